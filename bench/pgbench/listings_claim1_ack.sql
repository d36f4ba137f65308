SELECT msg_id, claim_token FROM listings.claim() \gset
SELECT listings.ack(:msg_id, :claim_token);
