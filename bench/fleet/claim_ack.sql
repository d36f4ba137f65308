-- One runner of the fleet (a random one of :runners) claims a job and acks it (bench/fleet.sh).
\set r random(1, :runners)
SELECT msg_id, claim_token FROM forgeyard.claim('fleet', 'jobs', 'runner-' || :r, 1) \gset
SELECT forgeyard.ack('fleet', 'jobs', :msg_id, :claim_token);
