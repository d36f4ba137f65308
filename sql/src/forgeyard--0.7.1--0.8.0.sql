-- forgeyard 0.7.1 -> 0.8.0: forgeyard.edition(), which tells the C++ edition from the PL/pgSQL one
-- (docs/architecture.md, "Two editions").
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.8.0'" to load this file. \quit

CREATE FUNCTION forgeyard.edition() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT '@EDITION@'::text $$;
COMMENT ON FUNCTION forgeyard.edition() IS
  'Which edition of forgeyard this database runs: cpp (the C++ library, CREATE EXTENSION) or plpgsql (no C: pg_tle or a plain install).';
REVOKE ALL ON FUNCTION forgeyard.edition() FROM PUBLIC;

INSERT INTO forgeyard.access_catalog (access, privilege, object) VALUES
    ('usage',   'EXECUTE', 'FUNCTION forgeyard.edition()'),
    ('inspect', 'EXECUTE', 'FUNCTION forgeyard.edition()');
SELECT forgeyard.apply_access(a.role_id) FROM (SELECT DISTINCT role_id FROM forgeyard.role_access) a;
