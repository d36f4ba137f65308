-- The next step of the client's run under its epoch (run, or the recorded result), then its
-- result recorded, fenced by the epoch (two transactions). The client counts its steps and names
-- each one's position, as WorkflowWorker does (p starts at 0 with each fresh run: -D p=0).
\set p :p + 1
SELECT s.status FROM bench_wf_owner o, forgeyard.workflow_step('bench', o.run_id, o.epoch, 's', NULL, :p) s WHERE o.client = :client_id;
SELECT forgeyard.workflow_step_complete('bench', o.run_id, o.epoch, 's', '{"n": 1}', NULL, :p) FROM bench_wf_owner o WHERE o.client = :client_id;
