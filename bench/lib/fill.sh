# Shared by the server-side benchmarks (bench/pgbench.sh, bench/held_xmin.sh): sourced, with
# sql() defined by the caller (psql on the database the run uses).

# Fresh queues holding $1 ready messages of 16 bytes (class interactive, as enqueue's default),
# spread over the queue's capacity slots in turn as forgeyard.enqueue spreads them, or with $2 = 1
# all in one slot, as one enqueue_batch admits them (one producer's batch: every ack then gives
# its room back to that slot); each listed in its ready lane at positions 1..$1, as enqueue lists
# a message claimable at once (0.10.0).
fill() {
  local n=$1 spread="g % q.slots"
  [ "${2:-}" = 1 ] && spread=0
  sql -c "TRUNCATE bench_q" \
    -c "INSERT INTO bench_q (payload) SELECT '\x7b226f72646572223a2031323334357d'::bytea FROM generate_series(1, $n)" \
    -c "SELECT forgeyard.queue_drop('bench', 'q')" \
    -c "SELECT forgeyard.queue_create('bench', 'q', '{\"max_messages\": 100000000, \"max_bytes\": 100000000000}')" \
    -c "INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, is_head, payload, bytes, slot,
                                        enqueued_at, visible_at)
        SELECT pg_catalog.nextval('forgeyard.message_ids'), 'bench', 'q', 'pending', 3, true,
               '\x7b226f72646572223a2031323334357d'::bytea, 16, $spread, now(), now()
          FROM generate_series(1, $n) g, forgeyard.queues q WHERE q.tenant_id = 'bench' AND q.queue = 'q'" \
    -c "UPDATE forgeyard.messages m SET ready_pos = l.pos
          FROM (SELECT msg_id, row_number() OVER (ORDER BY msg_id) AS pos FROM forgeyard.messages
                 WHERE tenant_id = 'bench' AND queue = 'q') l WHERE m.msg_id = l.msg_id" \
    -c "INSERT INTO forgeyard.queue_lane_entries (lane, pos, msg_id)
        SELECT q.lanes * 8 + 3, m.ready_pos, m.msg_id FROM forgeyard.messages m, forgeyard.queues q
         WHERE q.tenant_id = 'bench' AND q.queue = 'q' AND m.tenant_id = q.tenant_id AND m.queue = q.queue" \
    -c "SELECT pg_catalog.setval(('forgeyard.lane_' || (q.lanes * 8 + 3))::regclass, $n) FROM forgeyard.queues q
         WHERE q.tenant_id = 'bench' AND q.queue = 'q'" \
    -c "UPDATE forgeyard.queue_slots a SET admitted_messages = c.n, admitted_bytes = 16 * c.n
          FROM (SELECT slot, count(*) AS n FROM forgeyard.messages WHERE tenant_id = 'bench' AND queue = 'q' GROUP BY slot) c
         WHERE a.tenant_id = 'bench' AND a.queue = 'q' AND a.slot = c.slot" \
    -c "VACUUM ANALYZE bench_q" -c "VACUUM ANALYZE forgeyard.messages" -c "VACUUM ANALYZE forgeyard.queue_slots" \
    -c "VACUUM ANALYZE forgeyard.queue_releases" -c "VACUUM ANALYZE forgeyard.queue_lane_entries" -c "CHECKPOINT"
}
