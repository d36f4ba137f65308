-- One event of one tenant per transaction, as a plain INSERT.
INSERT INTO bench_audit (tenant_id, event_id, occurred_at, recorded_at, actor, action, resource, details,
                         prev_hash, hash)
VALUES ('bench', gen_random_uuid(), clock_timestamp(), clock_timestamp(), 'bench', 'order.paid', 'order/' || :client_id,
        '{"amount":1250,"currency":"EUR"}', '\x00', '\x00');
