-- DBOS's step record: is the step's output there? If not, run it and record it (two transactions).
\set p random(1, 1000000000000)
SELECT s.output FROM bench_steps s, bench_wf_owner o WHERE o.client = :client_id AND s.run_id = o.run_id AND s.position = :p;
INSERT INTO bench_steps (run_id, position, step, output)
SELECT o.run_id, :p, 's', '{"n": 1}' FROM bench_wf_owner o WHERE o.client = :client_id ON CONFLICT DO NOTHING;
