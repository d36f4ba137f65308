SELECT msg_id, claim_token FROM lanes.claim() \gset
SELECT lanes.ack(:msg_id, :claim_token);
