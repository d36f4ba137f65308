SELECT coalesce(array_agg(msg_id), '{}') AS ids, coalesce(array_agg(claim_token), '{}') AS toks
  FROM forgeyard.claim('bench', 'q', 'c', 100) \gset
SELECT forgeyard.ack_batch('bench', 'q', :ids::bigint[], :toks::bigint[]);
