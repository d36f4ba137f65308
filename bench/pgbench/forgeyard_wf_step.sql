-- The next step of the client's run under its epoch (run, or the recorded result), then its
-- result recorded, fenced by the epoch (two transactions).
SELECT s.status FROM bench_wf_owner o, forgeyard.workflow_step('bench', o.run_id, o.epoch, 's') s WHERE o.client = :client_id;
SELECT forgeyard.workflow_step_complete('bench', o.run_id, o.epoch, 's', '{"n": 1}') FROM bench_wf_owner o WHERE o.client = :client_id;
