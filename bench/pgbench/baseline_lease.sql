-- Acquire (a take-over of the released grant: epoch + 1), renew, release: three transactions.
INSERT INTO bench_leases AS l (tenant_id, resource, owner, epoch, expires_at)
VALUES ('bench', 'r' || :client_id, 'o', 1, clock_timestamp() + interval '30 seconds')
ON CONFLICT (tenant_id, resource) DO UPDATE SET owner = excluded.owner, epoch = l.epoch + 1,
    expires_at = excluded.expires_at, released = false
 WHERE l.released OR l.expires_at <= clock_timestamp()
RETURNING epoch \gset
UPDATE bench_leases SET expires_at = clock_timestamp() + interval '30 seconds'
 WHERE tenant_id = 'bench' AND resource = 'r' || :client_id AND epoch = :epoch AND NOT released
   AND expires_at > clock_timestamp();
UPDATE bench_leases SET released = true
 WHERE tenant_id = 'bench' AND resource = 'r' || :client_id AND epoch = :epoch AND NOT released
   AND expires_at > clock_timestamp();
