SELECT msg_id, claim_token FROM forgeyard.claim('bench', 'ql', 'c', 1) \gset
SELECT forgeyard.ack('bench', 'ql', :msg_id, :claim_token);
