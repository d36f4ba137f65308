#!/usr/bin/env bash
# Claim+ack with vacuum held off: acks delete rows and claims move visible_at, so dead index
# entries pile up at the head of messages_claim until (auto)vacuum removes them. This runs 60 s of
# server-side claim+ack (pgbench, one client) on a queue of 600,000 messages, first as is, then
# while another session holds a snapshot open (so no vacuum can remove what the run leaves dead),
# and prints the rate of every 10 s; the same for the hand-written SKIP LOCKED queue of
# bench/pgbench/ (which has the same pattern: its claim moves vt, its ack deletes). Run by scripts/bench.sh against its throwaway cluster
# (PGHOST, PGPORT, PGUSER, PGDATABASE and PG_BIN set).
set -euo pipefail
seconds=${FY_VACUUM_HELD_SECONDS:-60}
# Enough that no run empties its queue (pgbench stops at the first claim that finds nothing).
messages=${FY_VACUUM_HELD_MESSAGES:-600000}
dir=$(mktemp -d)
holder=""
trap '[ -n "$holder" ] && kill "$holder" 2>/dev/null; rm -rf "$dir"' EXIT
source "$(dirname "$0")/lib/hold.sh"
cat >"$dir/claim_ack.sql" <<'SQL'
SELECT msg_id, claim_token FROM forgeyard.claim('bench', 'held', 'c', 1) \gset
SELECT forgeyard.ack('bench', 'held', :msg_id, :claim_token);
SQL
cat >"$dir/baseline.sql" <<'SQL'
UPDATE bench_held_q SET vt = now() + interval '30 seconds', read_ct = read_ct + 1
 WHERE msg_id = (SELECT msg_id FROM bench_held_q WHERE vt <= now() ORDER BY vt, msg_id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING msg_id \gset
DELETE FROM bench_held_q WHERE msg_id = :msg_id;
SQL
fill() {
  psql -X -q -v ON_ERROR_STOP=1 -c "SELECT forgeyard.queue_drop('bench', 'held')" \
    -c "SELECT forgeyard.queue_create('bench', 'held', '{\"max_messages\": 100000000, \"max_bytes\": 100000000000}')" \
    -c "WITH ids AS (SELECT pg_catalog.nextval('forgeyard.message_ids') AS id FROM generate_series(1, $messages))
        INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, is_head, payload, bytes, slot,
                                        enqueued_at, visible_at)
        SELECT id, 'bench', 'held', 'pending', 3, true, 'x', 1, 0, now(), now() FROM ids" \
    -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS bench_held_q" \
    -c "CREATE TABLE bench_held_q (msg_id bigserial PRIMARY KEY, read_ct integer NOT NULL DEFAULT 0,
          enqueued_at timestamptz NOT NULL DEFAULT now(), vt timestamptz NOT NULL DEFAULT now(), payload bytea)" \
    -c "CREATE INDEX ON bench_held_q (vt, msg_id)" \
    -c "INSERT INTO bench_held_q (payload) SELECT 'x' FROM generate_series(1, $messages)" \
    -c "VACUUM ANALYZE forgeyard.messages" -c "VACUUM ANALYZE bench_held_q" -c "CHECKPOINT" >/dev/null
}
rates() {  # label script: pgbench's progress lines as "label  10s 1234/s  20s ..."
  "$PG_BIN/pgbench" -n -M prepared -T "$seconds" -P 10 -f "$dir/$2.sql" 2>&1 |
    sed -n 's/^progress: \([0-9.]*\) s, \([0-9.]*\) tps.*/\1 \2/p' |
    awk -v l="$1" '{ line = line sprintf("  %3.0fs %6.0f/s", $1, $2) } END { printf "%-34s%s\n", l, line }'
}
fill
rates "forgeyard claim+ack, vacuum free" claim_ack
rates "baseline claim+delete, vacuum free" baseline
fill
hold
rates "forgeyard, a snapshot held open" claim_ack
release
hold
rates "baseline, a snapshot held open" baseline
release
