SELECT msg_id, claim_token FROM forgeyard.claim('bench', 'qf', 'c', 1) \gset
SELECT forgeyard.ack('bench', 'qf', :msg_id, :claim_token);
