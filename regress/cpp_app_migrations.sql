-- @edition cpp
-- The application schema migrations' part of the C++ edition's own machinery, the extension: the
-- three tables are registered for pg_dump (extconfig). (Moved unchanged from
-- regress/app_migrations.sql, which checks them on both editions; tests/pg/pgtap.sh runs this
-- file on the C++ edition only: the PL/pgSQL edition's plain install is no extension, and pg_dump
-- dumps every row of it.)
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(1);

SELECT ok((SELECT 'forgeyard.app_migrations'::regclass::oid = ANY (e.extconfig) AND 'forgeyard.app_daemons'::regclass::oid = ANY (e.extconfig)
              AND 'forgeyard.app_backfills'::regclass::oid = ANY (e.extconfig)
             FROM pg_extension e WHERE e.extname = 'forgeyard'),
          'the three tables are registered with pg_extension_config_dump');

SELECT * FROM finish();
ROLLBACK;
