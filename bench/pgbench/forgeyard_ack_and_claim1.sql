-- One call per message: ack the previous delivery (ids/toks from the last run, '{}' at first)
-- and claim the next. One round trip and one commit per message.
SELECT coalesce(array_agg(msg_id), '{}') AS ids, coalesce(array_agg(claim_token), '{}') AS toks
  FROM forgeyard.ack_and_claim('bench', 'q', 'c', :ids::bigint[], :toks::bigint[], 1) \gset
