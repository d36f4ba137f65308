-- Restore safety (docs/sql-api.md#restore-safety): restore_status tells a restored database from
-- the original; restore_reconcile raises every fencing sequence to the clock, ends live leases
-- (reported once to lease_reap), re-tokens claimed deliveries, unlocks in-progress idempotency
-- keys under a new attempt, verifies audit chains against anchors and records its report in the
-- _forgeyard.operations chain; it is idempotent, refuses bad anchors and changes nothing then;
-- who may call what. A restore is simulated by the rows a pg_restore brings along
-- (tests/pg/restore_drill.sh runs the real pg_dump / pg_restore). Time is moved with
-- forgeyard.now_override; nothing sleeps.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(67);

SET TIME ZONE 'UTC';
CREATE FUNCTION pg_temp.us(t timestamptz) RETURNS bigint LANGUAGE sql IMMUTABLE
    AS $$ SELECT (extract(epoch FROM t) * 1000000)::bigint $$;
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$ SELECT state FROM forgeyard.restore_status() $$;
-- The report of one reconcile, by kind (audit failures by tenant).
CREATE TEMP TABLE rep (run int, kind text, tenant text, count bigint, detail text);
CREATE PROCEDURE pg_temp.reconcile(run int, anchors jsonb DEFAULT NULL) LANGUAGE sql AS $$
    INSERT INTO rep SELECT run, r.* FROM forgeyard.restore_reconcile(anchors) r
$$;
CREATE FUNCTION pg_temp.n(r int, k text) RETURNS bigint LANGUAGE sql
    AS $$ SELECT count FROM rep WHERE run = r AND kind = k $$;

-------------------------------------------------------------------------------------------------
-- Detection
-------------------------------------------------------------------------------------------------

SELECT is(pg_temp.state(), 'ok', 'a fresh install is where it was recorded: ok');
SELECT is((SELECT count(*) FROM forgeyard.store_identity WHERE reason = 'install'), 1::bigint,
          'CREATE EXTENSION records the database''s identity once');
SELECT ok((SELECT database_oid = (SELECT oid FROM pg_database WHERE datname = current_database())
             AND system_identifier = (SELECT system_identifier FROM pg_control_system())
             AND timeline = ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int
           FROM forgeyard.store_identity),
          'the recorded identity is this database''s oid, the system identifier and the timeline');
SELECT is((SELECT last_reconciled_at FROM forgeyard.restore_status()), NULL, 'never reconciled');

-- pg_restore into another database brings the original's rows along.
INSERT INTO forgeyard.store_identity
    SELECT clock_timestamp() - interval '1 day', 'install', system_identifier, timeline, 1, 'prod' FROM forgeyard.store_identity;
SELECT is(pg_temp.state(), 'restored', 'a row recorded in another database: restored');
SELECT matches((SELECT detail FROM forgeyard.restore_status()), 'recorded in database prod \(oid 1\)',
               'the detail names where the data was recorded');
SELECT throws_ok($$SELECT forgeyard.restore_acknowledge()$$, '22023',
                 'this database was restored: run forgeyard.restore_reconcile(), not restore_acknowledge()',
                 'a certain restore cannot be acknowledged away');

-------------------------------------------------------------------------------------------------
-- State at "backup time": a live lease, a claimed delivery, a locked key, an audit chain
-------------------------------------------------------------------------------------------------

SET forgeyard.now_override = '2030-01-01 00:00:00+00';
\o /dev/null
SELECT forgeyard.queue_create('t1', 'jobs');
\o
SELECT is(forgeyard.enqueue('t1', 'jobs', '\x01'), 1::bigint, 'message 1');
SELECT is(forgeyard.enqueue('t1', 'jobs', '\x02'), 2::bigint, 'message 2');
CREATE TEMP TABLE c AS SELECT msg_id, claim_token, attempt FROM forgeyard.claim('t1', 'jobs', 'w1', 1, '10 minutes');
SELECT is((SELECT msg_id FROM c), 1::bigint, 'message 1 is in flight');
CREATE TEMP TABLE l AS SELECT epoch FROM forgeyard.lease_acquire('t1', 'res', 'w1', '1 hour');
\o /dev/null
SELECT forgeyard.lease_acquire('t1', 'gone', 'w1', '1 hour');
SELECT forgeyard.lease_release('t1', 'gone', (SELECT epoch FROM forgeyard.lease_get('t1', 'gone')));
CREATE TEMP TABLE k AS SELECT attempt FROM forgeyard.idem_begin('t1', 'run.create', 'k1', '\x01');
SELECT forgeyard.idem_checkpoint('t1', 'run.create', 'k1', 'step-2', (SELECT attempt FROM k));
SELECT forgeyard.idem_begin('t1', 'run.create', 'k2', '\x01');
SELECT forgeyard.idem_complete('t1', 'run.create', 'k2', '\xaa');
SELECT forgeyard.audit_append('t1', 'a', 'deploy', 'svc');
SELECT forgeyard.audit_append('t1', 'a', 'rollback', 'svc');
SELECT forgeyard.audit_append('t2', 'a', 'deploy', 'svc');
\o
CREATE TEMP TABLE h AS SELECT seq, hash FROM forgeyard.audit_head('t1');

-------------------------------------------------------------------------------------------------
-- Bad input: a clear error and no change
-------------------------------------------------------------------------------------------------

SELECT throws_ok($$SELECT * FROM forgeyard.restore_reconcile('[]')$$, '22023', NULL, 'anchors must be an object');
SELECT throws_ok($$SELECT * FROM forgeyard.restore_reconcile('{"t1": 5}')$$, '22023',
                 'anchor of tenant "t1" must be {"seq": a positive integer, "hash": 64 hex digits}',
                 'an anchor must be an object');
SELECT throws_ok(format($$SELECT * FROM forgeyard.restore_reconcile('{"t1": {"seq": 0, "hash": "%s"}}')$$, repeat('ab', 32)),
                 '22023', NULL, 'an anchor seq must be positive');
SELECT throws_ok(format($$SELECT * FROM forgeyard.restore_reconcile('{"t1": {"seq": 1.5, "hash": "%s"}}')$$, repeat('ab', 32)),
                 '22023', NULL, 'an anchor seq must be an integer');
SELECT throws_ok($$SELECT * FROM forgeyard.restore_reconcile('{"t1": {"seq": 1, "hash": "abz"}}')$$, '22023', NULL,
                 'an anchor hash must be 64 hex digits');
SELECT throws_ok($$SELECT * FROM forgeyard.restore_reconcile('{"t1": {"seq": 1}}')$$, '22023', NULL,
                 'an anchor needs its hash');
SELECT is((SELECT expires_at FROM forgeyard.lease_get('t1', 'res')), '2030-01-01 01:00:00+00'::timestamptz,
          'a refused reconcile changed nothing: the lease is still live');
SELECT is(pg_temp.state(), 'restored', 'and the restore is still reported');

-------------------------------------------------------------------------------------------------
-- Permissions
-------------------------------------------------------------------------------------------------

CREATE ROLE fy_restore_app;
CREATE ROLE fy_restore_ops;
CREATE ROLE fy_restore_bound;
CREATE ROLE fy_restore_inspect;
GRANT ALL ON rep TO fy_restore_ops;
\o /dev/null
SELECT forgeyard.grant_usage('fy_restore_app');
SELECT forgeyard.grant_maintenance('fy_restore_ops');
SELECT forgeyard.grant_maintenance('fy_restore_bound');
SELECT forgeyard.bind_tenant('fy_restore_bound', 't1');
SELECT forgeyard.grant_inspect('fy_restore_inspect');
\o
SET ROLE fy_restore_app;
SELECT throws_ok($$SELECT * FROM forgeyard.restore_reconcile()$$, '42501', NULL, 'an application role cannot reconcile');
SELECT throws_ok($$SELECT forgeyard.restore_acknowledge()$$, '42501', NULL, 'nor acknowledge');
SELECT is(pg_temp.state(), 'restored', 'an application role may read restore_status (health checks)');
RESET ROLE;
SET ROLE fy_restore_inspect;
SELECT is(pg_temp.state(), 'restored', 'an inspection role may read restore_status');
RESET ROLE;
SET ROLE fy_restore_bound;
SELECT throws_ok($$SELECT * FROM forgeyard.restore_reconcile()$$, 'FY040', NULL,
                 'a maintenance role bound to a tenant cannot reconcile every tenant');
RESET ROLE;
SELECT is(pg_temp.state(), 'restored', 'the refused calls changed nothing');

-------------------------------------------------------------------------------------------------
-- Reconcile, as a maintenance role
-------------------------------------------------------------------------------------------------

SET forgeyard.now_override = '2030-01-01 00:01:00+00';
SET ROLE fy_restore_ops;
CALL pg_temp.reconcile(1, jsonb_build_object('t1', jsonb_build_object('seq', 5, 'hash', repeat('cd', 32))));
RESET ROLE;
SELECT is(pg_temp.n(1, 'restore_detected'), 1::bigint, 'the report says a restore was detected');
SELECT is(pg_temp.n(1, 'leases_expired'), 1::bigint, 'one live lease expired (the released one is left alone)');
SELECT is(pg_temp.n(1, 'deliveries_released'), 1::bigint, 'one claimed delivery released');
SELECT is(pg_temp.n(1, 'idempotency_unlocked'), 1::bigint, 'one locked key unlocked (the completed one is left alone)');
SELECT is(pg_temp.n(1, 'audit_chains_verified'), 2::bigint, 'both chains verified');
SELECT is(pg_temp.n(1, 'audit_chains_failed'), 1::bigint, 'one chain fails: its anchor is beyond its head');
SELECT is((SELECT tenant || ' ' || count || ' ' || detail FROM rep WHERE run = 1 AND kind = 'audit_tail_cut'),
          't1 5 events 3..5 were lost with the restore (head 2, anchor 5)', 'the cut tail is reported against the anchor');
SELECT is(pg_temp.n(1, 'fencing_floor'), pg_temp.us('2030-01-01 00:01:00+00'), 'the fencing floor is the clock in µs');
SELECT is(pg_temp.n(1, 'access_reapplied'), 4::bigint, 'the four recorded roles got their access kinds granted again');
SELECT is(pg_temp.state(), 'ok', 'after reconcile the database is ok');
SELECT is((SELECT last_reconciled_at IS NOT NULL FROM forgeyard.restore_status()), true, 'and was reconciled');

-- Sequences
SELECT ok((SELECT last_value FROM forgeyard.message_ids) >= pg_temp.us('2030-01-01 00:01:00+00'), 'message ids raised to the clock');
SELECT ok((SELECT last_value FROM forgeyard.claim_tokens) >= pg_temp.us('2030-01-01 00:01:00+00'), 'claim tokens raised to the clock');
SELECT ok((SELECT last_value FROM forgeyard.idempotency_attempts) >= pg_temp.us('2030-01-01 00:01:00+00'),
          'idempotency attempts raised to the clock');
SELECT ok(forgeyard.enqueue('t1', 'jobs', '\x03') > pg_temp.us('2030-01-01 00:01:00+00'), 'a new message id is above the floor');

-- Leases
SELECT throws_ok(format('SELECT forgeyard.lease_renew(%L, %L, %s, %L)', 't1', 'res', (SELECT epoch FROM l), '1 hour'), 'FY001', NULL,
                 'the lease live at backup time cannot be renewed');
SELECT is((SELECT resource || ' ' || (epoch = (SELECT epoch FROM l)) FROM forgeyard.lease_reap(100, 't1')), 'res true',
          'lease_reap reports it as expired');
SELECT is((SELECT count(*) FROM forgeyard.lease_reap(100, 't1')), 0::bigint, 'once');
CREATE TEMP TABLE l2 AS SELECT epoch FROM forgeyard.lease_acquire('t1', 'res', 'w2', '1 hour');
SELECT ok((SELECT epoch FROM l2) > (SELECT epoch FROM l), 'a new grant has a greater epoch');

-- Deliveries
SELECT throws_ok(format('SELECT forgeyard.ack(%L, %L, 1, %s)', 't1', 'jobs', (SELECT claim_token FROM c)), 'FY001', NULL,
                 'the restored claim token''s late ack is refused');
SELECT throws_ok(format('SELECT forgeyard.extend(%L, %L, 1, %s, %L)', 't1', 'jobs', (SELECT claim_token FROM c), '1 minute'),
                 'FY001', NULL, 'and so is its extend');
CREATE TEMP TABLE c2 AS SELECT msg_id, claim_token, attempt FROM forgeyard.claim('t1', 'jobs', 'w2', 10, '10 minutes');
SELECT is((SELECT count(*) FROM c2 WHERE msg_id = 1), 1::bigint, 'the restored in-flight message is delivered again');
SELECT ok((SELECT claim_token FROM c2 WHERE msg_id = 1) > pg_temp.us('2030-01-01 00:01:00+00'), 'with a new token above the floor');
SELECT is((SELECT attempt FROM c2 WHERE msg_id = 1), 2, 'as its second attempt');
SELECT lives_ok(format('SELECT forgeyard.ack(%L, %L, 1, %s)', 't1', 'jobs', (SELECT claim_token FROM c2 WHERE msg_id = 1)),
                'the new token acks it');

-- Idempotency keys
SELECT throws_ok(format('SELECT forgeyard.idem_checkpoint(%L, %L, %L, %L, %s)', 't1', 'run.create', 'k1', 'x', (SELECT attempt FROM k)),
                 'FY001', NULL, 'the attempt of the restored lock is refused');
CREATE TEMP TABLE k2 AS SELECT * FROM forgeyard.idem_begin('t1', 'run.create', 'k1', '\x01');
SELECT is((SELECT status || ' ' || recovery_point FROM k2), 'started step-2', 'the key resumes from its recovery point');
SELECT ok((SELECT attempt FROM k2) > pg_temp.us('2030-01-01 00:01:00+00'), 'with a new attempt above the floor');
SELECT is((SELECT status FROM forgeyard.idem_begin('t1', 'run.create', 'k2', '\x01')), 'replay', 'a completed key still replays');

-- The operations chain
SELECT is((SELECT seq FROM forgeyard.audit_head('_forgeyard.operations')), 1::bigint, 'the report went to the operations chain');
SELECT is((SELECT action || ' ' || (details->>'leases_expired') || ' ' || (details->>'restore_state')
             FROM forgeyard.audit_read('_forgeyard.operations')), 'storage.reconcile 1 restored', 'with its counts');
SELECT is((SELECT count::text || ' ' || detail FROM rep WHERE run = 1 AND kind = 'operations_audit'),
          (SELECT seq::text || ' ' || encode(hash, 'hex') FROM forgeyard.audit_head('_forgeyard.operations')),
          'the report names its place in that chain');

-------------------------------------------------------------------------------------------------
-- Idempotent
-------------------------------------------------------------------------------------------------

-- The work taken up after the first run is finished; a second run then finds nothing to do.
\o /dev/null
SELECT forgeyard.lease_release('t1', 'res', (SELECT epoch FROM l2));
SELECT forgeyard.idem_complete('t1', 'run.create', 'k1', '\xbb', (SELECT attempt FROM k2));
SELECT forgeyard.ack('t1', 'jobs', msg_id, claim_token) FROM c2 WHERE msg_id <> 1;
\o
SET forgeyard.now_override = '2030-01-01 00:02:00+00';
CALL pg_temp.reconcile(2);
SELECT is(pg_temp.n(2, 'restore_detected') + pg_temp.n(2, 'leases_expired') + pg_temp.n(2, 'deliveries_released')
          + pg_temp.n(2, 'idempotency_unlocked') + pg_temp.n(2, 'audit_chains_failed'), 0::bigint,
          'a second reconcile detects and changes nothing');
SELECT is(pg_temp.n(2, 'audit_chains_verified'), 3::bigint, 'and verifies three chains (the operations chain too)');
SELECT is((SELECT seq FROM forgeyard.audit_head('_forgeyard.operations')), 2::bigint, 'each run is recorded');

-------------------------------------------------------------------------------------------------
-- A second install over restored rows (pg_restore --clean into the same database)
-------------------------------------------------------------------------------------------------

INSERT INTO forgeyard.store_identity
    SELECT clock_timestamp(), 'install', system_identifier, timeline, database_oid, database_name
      FROM forgeyard.current_store_identity();
SELECT is(pg_temp.state(), 'restored', 'the extension installed again over restored rows: restored');
SELECT matches((SELECT detail FROM forgeyard.restore_status()), 'installed [0-9]+ times over restored data', 'says why');
CALL pg_temp.reconcile(3);
SELECT is(pg_temp.state(), 'ok', 'reconcile clears it');

-------------------------------------------------------------------------------------------------
-- Another timeline: a point-in-time recovery or a failover; acknowledge keeps leases
-------------------------------------------------------------------------------------------------

INSERT INTO forgeyard.store_identity
    SELECT clock_timestamp(), 'acknowledge', system_identifier, timeline + 7, database_oid, database_name
      FROM forgeyard.current_store_identity();
SELECT is(pg_temp.state(), 'suspected', 'a changed timeline is only suspected');
SELECT matches((SELECT detail FROM forgeyard.restore_status()), 'point-in-time recovery or a failover', 'says what it may be');
CREATE TEMP TABLE live AS SELECT epoch, expires_at FROM forgeyard.lease_acquire('t1', 'after', 'w3', '1 hour');
SET ROLE fy_restore_ops;
SELECT lives_ok($$SELECT forgeyard.restore_acknowledge()$$, 'a maintenance role acknowledges a failover');
RESET ROLE;
SELECT is(pg_temp.state(), 'ok', 'then the database is ok');
SELECT is((SELECT expires_at FROM forgeyard.lease_get('t1', 'after')), (SELECT expires_at FROM live),
          'and acknowledging expired nothing');

SELECT * FROM finish();
ROLLBACK;
