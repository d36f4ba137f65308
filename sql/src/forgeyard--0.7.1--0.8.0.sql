-- forgeyard 0.7.1 -> 0.8.0: forgeyard.edition() and forgeyard.version(), which tell the C++ edition
-- from the PL/pgSQL one and the version installed (docs/architecture.md, "Two editions").
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.8.0'" to load this file. \quit

CREATE FUNCTION forgeyard.edition() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT '@EDITION@'::text $$;
COMMENT ON FUNCTION forgeyard.edition() IS
  'Which edition of forgeyard this database runs: cpp (the C++ library, CREATE EXTENSION) or plpgsql (no C: pg_tle or a plain install).';
REVOKE ALL ON FUNCTION forgeyard.edition() FROM PUBLIC;

-- The version installed: the extension's, or (the PL/pgSQL edition's plain install, which is no
-- extension) the last one its installer recorded. PL/pgSQL, so that the C++ edition never plans the
-- second lookup, whose table it does not have.
CREATE FUNCTION forgeyard.version() RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v text;
BEGIN
    SELECT e.extversion INTO v FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'forgeyard';
    IF FOUND THEN
        RETURN v;
    END IF;
    RETURN (SELECT i.version FROM forgeyard_pl.installs i ORDER BY i.n DESC LIMIT 1);
END
$$;
COMMENT ON FUNCTION forgeyard.version() IS
  'The version of forgeyard installed in this database (with edition(): what storage status and health report).';

REVOKE ALL ON FUNCTION forgeyard.version() FROM PUBLIC;

COMMENT ON FUNCTION forgeyard.now() IS
  'The clock that decides expiry: clock_timestamp(), or the setting forgeyard.now_override when set (tests) by a superuser or, in the PL/pgSQL edition, the installation''s owner.';

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',   'EXECUTE', 'FUNCTION forgeyard.edition()'),
    ('inspect', 'EXECUTE', 'FUNCTION forgeyard.edition()'),
    ('usage',   'EXECUTE', 'FUNCTION forgeyard.version()'),
    ('inspect', 'EXECUTE', 'FUNCTION forgeyard.version()');
SELECT forgeyard.apply_access(a.role_id) FROM (SELECT DISTINCT role_id FROM forgeyard.role_access) a;
