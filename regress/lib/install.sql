-- Installs forgeyard for one regression file, inside the file's transaction (which it rolls back).
-- The C++ edition: CREATE EXTENSION. The PL/pgSQL edition, when FY_PLPGSQL_SCRIPT names its plain
-- install script (sql/gen/plpgsql/plain--V.sql): that script, run as FY_PLPGSQL_OWNER, a role that
-- is not superuser and owns the database (tests/pg/pgtap.sh runs every file both ways).
\getenv fy_plpgsql_script FY_PLPGSQL_SCRIPT
\if :{?fy_plpgsql_script}
\getenv fy_plpgsql_owner FY_PLPGSQL_OWNER
SET LOCAL ROLE :"fy_plpgsql_owner";
\set QUIET on
\i :fy_plpgsql_script
RESET ROLE;
\else
CREATE EXTENSION forgeyard;
\endif
