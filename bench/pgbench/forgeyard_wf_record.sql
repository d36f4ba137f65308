-- A step's result recorded, alone: workflow_step_complete at the next position, fenced by the
-- epoch, which checks that the position before it is recorded (-D p=0: each fresh run starts at 1).
\set p :p + 1
SELECT forgeyard.workflow_step_complete('bench', o.run_id, o.epoch, 's', '{"n": 1}', NULL, :p) FROM bench_wf_owner o WHERE o.client = :client_id;
