UPDATE bench_q SET vt = now() + interval '30 seconds', read_ct = read_ct + 1
 WHERE msg_id = (SELECT msg_id FROM bench_q WHERE vt <= now() ORDER BY vt, msg_id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING msg_id \gset
DELETE FROM bench_q WHERE msg_id = :msg_id;
