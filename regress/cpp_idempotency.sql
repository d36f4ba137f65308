-- @edition cpp
-- The idempotency keys' part of the C++ edition's own machinery, the extension: the sequence of
-- attempt numbers is registered for pg_dump (extconfig). (Moved unchanged from
-- regress/idempotency.sql, which checks the idempotency keys on both editions; tests/pg/pgtap.sh
-- runs this file on the C++ edition only: the PL/pgSQL edition's plain install is no extension.)
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(1);

SET TIME ZONE 'UTC';

-------------------------------------------------------------------------------------------------
-- Catalog
-------------------------------------------------------------------------------------------------
SELECT ok(EXISTS (SELECT 1 FROM pg_catalog.pg_extension e
                   WHERE e.extname = 'forgeyard' AND 'forgeyard.idempotency_attempts'::regclass = ANY (e.extconfig)),
          'attempt numbers come from the sequence forgeyard.idempotency_attempts, which pg_dump keeps');

SELECT * FROM finish();
ROLLBACK;
