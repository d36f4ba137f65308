WITH c AS (
  UPDATE bench_q SET vt = now() + interval '30 seconds', read_ct = read_ct + 1
   WHERE msg_id IN (SELECT msg_id FROM bench_q WHERE vt <= now() ORDER BY vt, msg_id LIMIT 100 FOR UPDATE SKIP LOCKED)
  RETURNING msg_id)
SELECT coalesce(array_agg(msg_id), '{}') AS ids FROM c \gset
DELETE FROM bench_q WHERE msg_id = ANY (:ids::bigint[]);
