-- @edition cpp
-- The C++ edition's own machinery: the library defines forgeyard.now_override as a superuser-only
-- setting (PGC_SUSET), so a role that is not superuser cannot SET it at all (42501). The PL/pgSQL
-- edition has no library to define it: there it is a placeholder any role may set, which moves
-- forgeyard.now() only when the session's login role is a superuser or owns the installation
-- (extension/now.sql). Moved unchanged from regress/attack.sql (tests/pg/pgtap.sh runs this file
-- on the C++ edition only).
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(1);

SET TIME ZONE 'UTC';
SET forgeyard.now_override = '2030-01-01 00:00:00+00';

CREATE ROLE fy_attacker;
SELECT forgeyard.grant_usage('fy_attacker') \g /dev/null
SELECT forgeyard.bind_tenant('fy_attacker', 'edge') \g /dev/null

-- A statement under the attacker's search_path, as the attacker; the error's SQLSTATE or NULL.
CREATE FUNCTION pg_temp.as_attacker(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text;
BEGIN
    PERFORM set_config('role', 'fy_attacker', true);
    PERFORM set_config('search_path', 'attacker, pg_catalog, public', true);
    BEGIN
        EXECUTE sql;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
    END;
    PERFORM pg_catalog.set_config('search_path', '"$user", public', true);
    PERFORM pg_catalog.set_config('role', 'none', true);
    RETURN st;
END $$;

-------------------------------------------------------------------------------------------------
-- Privilege escalation: a usage role bound to tenant edge
-------------------------------------------------------------------------------------------------
SELECT is(pg_temp.as_attacker('SET LOCAL forgeyard.now_override = ''2100-01-01 00:00:00+00'''), '42501',
          'a usage role cannot move the clock');

SELECT * FROM finish();
ROLLBACK;
