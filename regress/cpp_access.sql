-- @edition cpp
-- The extension's own records of the access layout, the C++ edition's machinery: every data table
-- and sequence registered for pg_dump (extconfig), and the extension not relocatable. (Moved
-- unchanged from regress/access.sql, which checks the layout on both editions; tests/pg/pgtap.sh
-- runs this file on the C++ edition only: the PL/pgSQL edition's plain install is no extension.)
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
\ir lib/install.sql

SELECT plan(2);

SELECT set_eq(
    $$SELECT unnest(extconfig)::regclass::text FROM pg_catalog.pg_extension WHERE extname = 'forgeyard'$$,
    ARRAY['forgeyard.leases', 'forgeyard.tenant_bindings', 'forgeyard.role_access', 'forgeyard.idempotency_keys',
          'forgeyard.queues', 'forgeyard.queue_slots', 'forgeyard.queue_releases', 'forgeyard.messages',
          'forgeyard.queue_release_deltas_0', 'forgeyard.queue_release_deltas_1', 'forgeyard.queue_release_deltas_2', 'forgeyard.queue_release_deltas_3',
          'forgeyard.queue_admit_deltas_0', 'forgeyard.queue_admit_deltas_1', 'forgeyard.queue_admit_deltas_2', 'forgeyard.queue_admit_deltas_3',
          'forgeyard.queue_events', 'forgeyard.queue_partitions', 'forgeyard.inbox',
          'forgeyard.message_ids', 'forgeyard.claim_tokens', 'forgeyard.idempotency_attempts',
          'forgeyard.event_types', 'forgeyard.topics', 'forgeyard.subscriptions', 'forgeyard.topic_events',
          'forgeyard.topic_event_seqs',
          'forgeyard.audit_events', 'forgeyard.audit_heads',
          'forgeyard.app_migrations', 'forgeyard.app_daemons', 'forgeyard.app_backfills',
          'forgeyard.store_identity', 'forgeyard.wf_runs', 'forgeyard.wf_journal',
          'forgeyard.wf_signals', 'forgeyard.wf_schedules', 'forgeyard.queue_admission',
          'forgeyard.queue_retry_windows', 'forgeyard.flow_resources', 'forgeyard.flow_resource_state',
          'forgeyard.flow_outcome_deltas', 'forgeyard.queue_fair_keys', 'forgeyard.queue_lane_entries_0',
          'forgeyard.queue_lane_entries_1', 'forgeyard.queue_lane_entries_2', 'forgeyard.queue_lane_entries_3',
          'forgeyard.queue_lane_segment', 'forgeyard.queue_lane_numbers', 'forgeyard.queue_lane_marks'],
    'pg_extension.extconfig registers every table and sequence for pg_dump but the step cursors (the views are not data)');
SELECT is((SELECT extrelocatable FROM pg_catalog.pg_extension WHERE extname = 'forgeyard'), false,
          'the extension is not relocatable');

SELECT * FROM finish();
ROLLBACK;
