-- The PL/pgSQL edition's twins of extension/boundary.cpp: the probes of the C++/PostgreSQL error
-- boundary. There is no boundary here, but the functions keep their declaration and answer as
-- the C++ edition does for the same input (regress/boundary.sql runs on both editions; the
-- probes of the C++ machinery itself are in regress/cpp_boundary.sql).
--
-- Their declarations pin no search_path, so these bodies check their arguments themselves (with
-- pg::optional_name_arg / pg::name_arg's codes and messages) instead of calling forgeyard_pl's
-- helpers: a helper called under the caller's search_path as well as under the API's pinned one
-- would have its cached plans made again at each switch, and PL/pgSQL keeps every such plan until
-- the end of the transaction (regress/boundary.sql's loops would grow by megabytes).

-- @body fy_boundary_throw
-- The arguments are checked in the C++ order (message first); the error is what invoke() makes of
-- the exception: the code when it is a SQLSTATE PostgreSQL can carry (five of 0-9 A-Z, not class
-- 00), else XX000; a NULL sqlstate is a plain std::runtime_error (XX000, no detail).
DECLARE
    msg pg_catalog.text := 'boom';
    code pg_catalog.text := $1;
BEGIN
    IF $2 IS NOT NULL THEN
        IF $2 OPERATOR(pg_catalog.=) '' THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'message must not be empty';
        END IF;
        IF pg_catalog.octet_length($2) OPERATOR(pg_catalog.>) 1000 THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.string_too_long@', MESSAGE = 'message is longer than 1000 bytes',
                DETAIL = pg_catalog.format('length is %s bytes', pg_catalog.octet_length($2));
        END IF;
        msg := $2;
    END IF;
    IF code IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.internal_error@', MESSAGE = msg;
    END IF;
    IF code OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'sqlstate must not be empty';
    END IF;
    IF pg_catalog.octet_length(code) OPERATOR(pg_catalog.>) 5 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.string_too_long@', MESSAGE = 'sqlstate is longer than 5 bytes',
            DETAIL = pg_catalog.format('length is %s bytes', pg_catalog.octet_length(code));
    END IF;
    IF code OPERATOR(pg_catalog.!~) '^[0-9A-Z]{5}$' OR pg_catalog.starts_with(code, '00') THEN
        code := '@sqlstate.internal_error@';
    END IF;
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = msg, DETAIL = 'raised by forgeyard.boundary_throw';
END

-- @body fy_boundary_pg_error
-- Runs sql with the caller's rights (the declaration is not SECURITY DEFINER) as one SPI_execute,
-- as Spi::run_once does: the row count of its last statement; an error comes back unchanged.
-- Transaction control and COPY to or from the client: 0A000, PL/pgSQL's own refusal, as the C++
-- edition answers SPI_execute's. One difference remains: PL/pgSQL's EXECUTE refuses a string
-- whose last statement is SELECT ... INTO (0A000), which SPI_execute runs.
DECLARE
    n pg_catalog.int8;
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'sql must not be NULL';
    END IF;
    IF $1 OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'sql must not be empty';
    END IF;
    IF pg_catalog.octet_length($1) OPERATOR(pg_catalog.>) 10000 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.string_too_long@', MESSAGE = 'sql is longer than 10000 bytes',
            DETAIL = pg_catalog.format('length is %s bytes', pg_catalog.octet_length($1));
    END IF;
    EXECUTE $1;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
