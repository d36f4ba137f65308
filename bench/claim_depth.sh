#!/usr/bin/env bash
# Server-side claim cost against queue depth, with pgbench (no client library in the way):
# claim+ack and claim alone at a shallow queue, then at a deep one. Run by scripts/bench.sh
# against its throwaway cluster (PGHOST, PGPORT, PGUSER, PGDATABASE and PG_BIN set).
set -euo pipefail
deep=${1:-1000000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/claim_ack.sql" <<'SQL'
SELECT msg_id, claim_token FROM forgeyard.claim('bench', 'depth', 'c', 1) \gset
SELECT forgeyard.ack('bench', 'depth', :msg_id, :claim_token);
SQL
echo "SELECT msg_id FROM forgeyard.claim('bench', 'depth', 'c', 1);" >"$dir/claim.sql"
fill() {
  psql -X -q -v ON_ERROR_STOP=1 -c "SELECT forgeyard.queue_drop('bench', 'depth')" \
    -c "SELECT forgeyard.queue_create('bench', 'depth', '{\"max_messages\": 100000000, \"max_bytes\": 100000000000}')" \
    -c "WITH ids AS (SELECT pg_catalog.nextval('forgeyard.message_ids') AS id FROM generate_series(1, $1))
        INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, is_head, payload, bytes, slot,
                                        enqueued_at, visible_at)
        SELECT id, 'bench', 'depth', 'pending', 3, true, 'x', 1, 0, now(), now() FROM ids" \
    -c "VACUUM ANALYZE forgeyard.messages" >/dev/null
}
for depth in 3000 "$deep"; do
  fill "$depth"
  for what in claim_ack claim; do
    latency=$("$PG_BIN/pgbench" -n -M prepared -t 1000 -f "$dir/$what.sql" 2>&1 | sed -n 's/latency average = //p')
    printf '%-28s %-10s depth %-8s %s\n' "server-side $what" postgresql "$depth" "$latency"
  done
done
