#!/usr/bin/env bash
# The hot paths below SPI (docs/architecture.md, "The table-access layer") while their tables
# change under them: two pgbench workers enqueue, claim and ack without pause while another
# session runs REINDEX CONCURRENTLY, VACUUM FULL, ALTER TABLE ADD/DROP COLUMN on the queue tables
# and creates and drops other queues (relcache invalidations of everything the layer caches), and
# runs maintain(), which moves the ready lanes' open segment on and truncates the sealed ones under
# the workers' listings and claims (0.13.0), and a third overflows the shared invalidation queue again and again (every backend's caches reset).
# No worker may fail (a deadlock with the DDL session is retried, as a client would), and afterwards
# the bound's bookkeeping is exact: admitted less released equals the messages still pending, and
# every pending message is still claimable (none lost with a truncated segment).
# Runs against the throwaway cluster of scripts/test.sh (CLUSTER_DIR, PG* in the environment).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/cluster.sh
: "${CLUSTER_DIR:?run through scripts/test.sh}"

db=fy_hot_ddl
q() { psql -X -q -v ON_ERROR_STOP=1 -At -d "$db" -c "$1"; }
dropdb --if-exists "$db"
createdb "$db"
q "CREATE EXTENSION forgeyard"
q "SELECT forgeyard.queue_create('ddl', 'q', '{\"max_messages\": 1000000}')" >/dev/null
script="$CLUSTER_DIR/hot_ddl.sql"
cat >"$script" <<'SQL'
SELECT forgeyard.enqueue('ddl', 'q', 'payload') AS id \gset
SELECT forgeyard.enqueue('ddl', 'q', 'payload') AS id \gset
SELECT coalesce(array_agg(msg_id), '{}') AS ids, coalesce(array_agg(claim_token), '{}') AS toks
  FROM forgeyard.claim('ddl', 'q', 'w', 1) \gset
SELECT count(*) AS n FROM forgeyard.ack_and_claim('ddl', 'q', 'w', :ids::bigint[], :toks::bigint[], 1) \gset
SQL
seconds=12
# A deadlock with the DDL session (40P01) or a serialization failure is retried, as a client
# would; any other error aborts the worker and fails the test.
"$PG_BIN/pgbench" -n -M prepared -c 2 -j 2 -T "$seconds" --max-tries=50 -d "$db" -f "$script" \
  >"$CLUSTER_DIR/hot_ddl.log" 2>&1 &
bench=$!
# Beside the DDL: bursts of more invalidation messages than the shared queue holds, so that the
# workers' backends are reset (every cache flushed, the layer's callback told "everything") at
# random points of their calls, also while the layer fills its own caches from the catalogs.
q "CREATE TABLE fy_storm (x integer)"
rm -f "$CLUSTER_DIR/hot_ddl.stop"
while [ ! -f "$CLUSTER_DIR/hot_ddl.stop" ]; do
  q "DO \$\$ BEGIN FOR i IN 1..3000 LOOP EXECUTE 'ALTER TABLE fy_storm ALTER COLUMN x SET STATISTICS ' || i % 100; END LOOP; END \$\$"
done &
storm=$!
changes=0
end=$((SECONDS + seconds - 2))
while [ $SECONDS -lt $end ]; do
  q "REINDEX TABLE CONCURRENTLY forgeyard.messages"
  q "VACUUM FULL forgeyard.queue_releases"
  q "ALTER TABLE forgeyard.messages ADD COLUMN fy_probe integer"
  q "SELECT forgeyard.queue_create('ddl', 'other')" >/dev/null
  q "VACUUM FULL forgeyard.messages"
  q "ALTER TABLE forgeyard.messages DROP COLUMN fy_probe"
  q "REINDEX TABLE CONCURRENTLY forgeyard.queue_slots"
  q "SELECT forgeyard.queue_drop('ddl', 'other')" >/dev/null
  q "REINDEX TABLE CONCURRENTLY forgeyard.queue_releases"
  q "VACUUM FULL forgeyard.queues"
  q "REINDEX TABLE CONCURRENTLY forgeyard.queue_release_deltas"
  q "VACUUM FULL forgeyard.queue_release_deltas"
  q "REINDEX TABLE CONCURRENTLY forgeyard.queue_admit_deltas"
  q "VACUUM FULL forgeyard.queue_admit_deltas"
  q "SELECT forgeyard.maintain()" >/dev/null
  q "VACUUM FULL forgeyard.queue_lane_entries_$((changes / 16 % 4))"
  q "SELECT forgeyard.maintain()" >/dev/null
  changes=$((changes + 16))
done
touch "$CLUSTER_DIR/hot_ddl.stop"
wait "$storm"
status=0
wait "$bench" || status=$?
fail() {
  echo "FAIL: $1"
  grep -E 'ERROR|error|aborted' "$CLUSTER_DIR/hot_ddl.log" | head -5 | sed 's/^/   /'
  sed 's/^/   /' "$CLUSTER_DIR/hot_ddl.log" | tail -8
  exit 1
}
[ $status -eq 0 ] || fail "pgbench exited with $status"
grep -qE 'aborted' "$CLUSTER_DIR/hot_ddl.log" && fail "a worker failed"
grep -qE '^number of failed transactions: 0 ' "$CLUSTER_DIR/hot_ddl.log" || fail "a transaction failed after its retries"
done_tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$CLUSTER_DIR/hot_ddl.log")
[ "${done_tx:-0}" -gt 0 ] || fail "no transaction ran"
echo "ok - two workers ran $done_tx enqueue/claim/ack rounds through $changes table changes without an error"
pending=$(q "SELECT count(*) FROM forgeyard.messages WHERE tenant_id = 'ddl' AND queue = 'q' AND state = 'pending'")
used=$(q "SELECT (SELECT sum(admitted_messages) FROM forgeyard.queue_slots WHERE tenant_id = 'ddl' AND queue = 'q')
               + (SELECT coalesce(sum(admitted_messages), 0) FROM forgeyard.queue_admit_deltas
                   WHERE tenant_id = 'ddl' AND queue = 'q')
               - (SELECT sum(released_messages) FROM forgeyard.queue_releases WHERE tenant_id = 'ddl' AND queue = 'q')
               - (SELECT coalesce(sum(released_messages), 0) FROM forgeyard.queue_release_deltas
                   WHERE tenant_id = 'ddl' AND queue = 'q')")
[ "$pending" = "$used" ] || { echo "FAIL: the bound counts $used messages, $pending are pending"; exit 1; }
echo "ok - the bound's bookkeeping is exact afterwards ($used admitted and not released, $pending pending)"
segments=$(q "SELECT forgeyard.queue_lane_segment_open()")
q "SELECT forgeyard.maintain()" >/dev/null
# (Visibility timeouts of the workers' last claims lapse after 30 s: they are claimed as the rest
# once the clock passes them; the override moves it on without waiting.)
drained=$(q "SET forgeyard.now_override = '2100-01-01 00:00:00+00';
             CREATE TEMP TABLE drained (msg_id bigint);
             DO \$\$ BEGIN
               LOOP
                 INSERT INTO drained SELECT c.msg_id FROM forgeyard.claim('ddl', 'q', 'drain', 1000) c;
                 EXIT WHEN NOT FOUND;
               END LOOP;
             END \$\$;
             SELECT count(DISTINCT msg_id) FROM drained")
[ "$drained" = "$pending" ] || { echo "FAIL: $pending messages are pending, a claim of all of them got $drained"; exit 1; }
echo "ok - every pending message is claimable after maintain() rotated the lanes' segments (open segment: $segments)"
q "SELECT forgeyard.queue_drop('ddl', 'q')" >/dev/null
dropdb "$db"
