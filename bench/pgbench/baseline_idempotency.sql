-- A new key per run: claim it, then store the response (two transactions).
\set k random(1, 1000000000000)
INSERT INTO bench_idem (tenant_id, scope, key, request_digest, status)
VALUES ('bench', 'bench.op', :client_id || '-' || :k, '\x01', 'in_progress') ON CONFLICT DO NOTHING;
UPDATE bench_idem SET status = 'completed', response = 'response'
 WHERE tenant_id = 'bench' AND scope = 'bench.op' AND key = :client_id || '-' || :k;
