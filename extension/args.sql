-- The PL/pgSQL edition's argument checks: the twins of extension/pg/args.cpp and core/input.cpp,
-- with the same SQLSTATEs, messages and details (sql/generate.py puts them into schema forgeyard_pl).
-- Helpers have no SET search_path of their own (a SET clause costs each call a GUC save and
-- restore): they run inside the API functions, whose search_path is pinned, and only their owner
-- may call them.

-- @helper
-- Raises code with message and detail (NULL: none): for SQL bodies, which have no RAISE.
CREATE FUNCTION forgeyard_pl.fail(code text, message text, detail text DEFAULT NULL)
    RETURNS void LANGUAGE plpgsql
    AS $$
BEGIN
    IF detail IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message;
    END IF;
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message, DETAIL = detail;
END
$$;

-- core::check_name: 22004 NULL, 22023 empty, 22001 over max_bytes. Returns the value.
CREATE FUNCTION forgeyard_pl.name_arg(argument text, value text, max_bytes integer)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = argument || ' must not be NULL';
    END IF;
    IF value = '' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = argument || ' must not be empty';
    END IF;
    IF octet_length(value) > max_bytes THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.string_too_long@',
            MESSAGE = format('%s is longer than %s bytes', argument, max_bytes),
            DETAIL = format('length is %s bytes', octet_length(value));
    END IF;
    RETURN value;
END
$$;

-- pg::optional_name_arg: NULL allowed (e.g. "all tenants"), otherwise name_arg's rules.
CREATE FUNCTION forgeyard_pl.optional_name_arg(argument text, value text, max_bytes integer)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN forgeyard_pl.name_arg(argument, value, max_bytes);
END
$$;

-- pg::text_arg: any text up to max_bytes (22001), empty allowed; NULL is 22004 unless optional.
CREATE FUNCTION forgeyard_pl.text_arg(argument text, value text, max_bytes integer, optional boolean DEFAULT false)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        IF optional THEN
            RETURN NULL;
        END IF;
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = argument || ' must not be NULL';
    END IF;
    IF octet_length(value) > max_bytes THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.string_too_long@',
            MESSAGE = format('%s is longer than %s bytes', argument, max_bytes),
            DETAIL = format('length is %s bytes', octet_length(value));
    END IF;
    RETURN value;
END
$$;

-- pg::bytea_arg: 22004 NULL (unless optional), 22023 under min_bytes ("must not be empty"),
-- 22001 over max_bytes.
CREATE FUNCTION forgeyard_pl.bytea_arg(argument text, value bytea, max_bytes integer,
                                       optional boolean DEFAULT false, min_bytes integer DEFAULT 0)
    RETURNS bytea LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF value IS NULL THEN
        IF optional THEN
            RETURN NULL;
        END IF;
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = argument || ' must not be NULL';
    END IF;
    IF octet_length(value) < min_bytes THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = argument || ' must not be empty';
    END IF;
    IF octet_length(value) > max_bytes THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.string_too_long@',
            MESSAGE = format('%s is longer than %s bytes', argument, max_bytes),
            DETAIL = format('length is %s bytes', octet_length(value));
    END IF;
    RETURN value;
END
$$;

-- pg::int8_arg / int4_arg / regclass_arg / jsonb_arg: 22004 "<argument> must not be NULL".
CREATE FUNCTION forgeyard_pl.not_null(argument text, present boolean)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF NOT present THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = argument || ' must not be NULL';
    END IF;
END
$$;

-- core::check_duration: no month component, a day is 24 hours, 0 < total <= max_usecs; the
-- total in microseconds. NULL is 22004 (pg::duration_arg).
CREATE FUNCTION forgeyard_pl.duration_arg(argument text, value interval, max_usecs bigint)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    months numeric;
    days numeric;
    total numeric;
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = argument || ' must not be NULL';
    END IF;
    months := extract(year FROM value) * 12 + extract(month FROM value);
    IF months <> 0 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = argument || ' must not have a month or year component',
            DETAIL = 'months and years have no fixed length; use days or hours';
    END IF;
    days := extract(day FROM value);
    -- With no months, the epoch of an interval is days * 86400 plus its time, exactly (numeric).
    total := extract(epoch FROM value) * 1000000;
    IF days * 86400000000 NOT BETWEEN -9223372036854775808 AND 9223372036854775807
       OR total NOT BETWEEN -9223372036854775808 AND 9223372036854775807 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = argument || ' is out of range';
    END IF;
    IF total <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = argument || ' must be positive';
    END IF;
    IF total > max_usecs THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = argument || ' is too long',
            DETAIL = format('the maximum is %s seconds', max_usecs / 1000000);
    END IF;
    RETURN total::bigint;
END
$$;

-- Microseconds since 1970 of a timestamptz (the unit of epochs and fencing tokens).
CREATE FUNCTION forgeyard_pl.usecs(t timestamptz)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN (extract(epoch FROM t) * 1000000)::bigint;
END
$$;
