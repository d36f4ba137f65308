-- DBOS's record of a step's output, alone: INSERT ... ON CONFLICT DO NOTHING of (run, step, result).
\set p random(1, 1000000000000)
INSERT INTO bench_steps (run_id, position, step, output)
SELECT o.run_id, :p, 's', '{"n": 1}' FROM bench_wf_owner o WHERE o.client = :client_id ON CONFLICT DO NOTHING;
