SELECT msg_id, claim_token FROM forgeyard.claim('bench', 'q', 'c', 1) \gset
SELECT forgeyard.ack('bench', 'q', :msg_id, :claim_token);
