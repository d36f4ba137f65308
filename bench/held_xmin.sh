#!/usr/bin/env bash
# A queue under a held xmin horizon (issue F17's measure; a benchmark, not a test): claim+ack at a
# fixed offered rate while a REPEATABLE READ session holds one snapshot for the whole run, against
# the same run with nothing held, forgeyard's queue and the hand-written SKIP LOCKED queue of
# bench/pgbench/ side by side. Then, still held, each side's maximum rate, against its maximum
# with nothing held. Starts its own throwaway cluster (fsync on).
#
# Per run it prints: the rate achieved against the offered one, claim+ack latency p50/p99 (from
# the scheduled start, so a backlog counts), the dead tuples of the run's tables and their size
# (pg_stat_user_tables, pg_total_relation_size) at the end. The goals (F17): the offered rate held
# (>= 0.95x), p99 at most 2x the run with nothing held, dead tuples bounded by the work in flight,
# and the maximum held >= 0.8x of the maximum with nothing held.
#   FY_HELD_SECONDS=600      seconds per paced run      FY_HELD_RATES="1000 2000"  offered rates
#   FY_HELD_CLIENTS=2        pgbench clients            FY_HELD_MAX_SECONDS=30     seconds per maximum run
#   FY_HELD_SYNC=off         synchronous_commit (off: CPU alone, as the issue's figures)
#   FY_HELD_PRODUCE=0        1: during each paced run, one more pgbench client enqueues at the
#                            offered rate (forgeyard and plpgsql: forgeyard.enqueue; baseline: its
#                            INSERT), so the queue's depth stays; its rate and latency are printed
#                            on a line of their own (the producers' side of a held snapshot)
#   FY_HELD_MAINTAIN=1       forgeyard's sides: seconds between forgeyard.maintain() calls during
#                            each run, as an operator's maintenance loop makes them (0: none); the
#                            ready lanes' entries leave by maintain() (0.13.0: a segment truncated)
#   FY_HELD_FILL=            ready messages before each run (default: enough that no run empties
#                            the queue)
#   FY_HELD_SIDES="forgeyard baseline"   the sides, in order; "plpgsql" is forgeyard's queue in
#                            the PL/pgSQL edition (a plain install by a role that is not superuser,
#                            in its own database: make must have generated sql/gen first); "lanes"
#                            and "listings" are the prototypes of docs/queue-storage-design.md
#                            (bench/prototype/*.sql)
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${FY_HELD_SECONDS:-600}
rates=${FY_HELD_RATES:-1000 2000}
clients=${FY_HELD_CLIENTS:-2}
max_seconds=${FY_HELD_MAX_SECONDS:-30}
sync=${FY_HELD_SYNC:-off}
sides=${FY_HELD_SIDES:-forgeyard baseline}
produce=${FY_HELD_PRODUCE:-0}
maintain_every=${FY_HELD_MAINTAIN:-1}
scripts=bench/pgbench
dir=$(mktemp -d)
holder=""
source scripts/lib/cluster.sh
finish() {
  [ -n "$holder" ] && kill "$holder" 2>/dev/null
  rm -rf "$dir"
  cluster_stop
}
trap finish EXIT
trap 'exit 1' INT TERM
cluster_start || exit 1
psql -X -q -v ON_ERROR_STOP=1 -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET synchronous_commit = $sync" \
  -c "ALTER SYSTEM SET shared_buffers = '256MB'" -c "ALTER SYSTEM SET max_wal_size = '4GB'" >/dev/null || exit 1
cluster_pg_ctl restart || exit 1
psql -X -q -v ON_ERROR_STOP=1 -f "$scripts/setup.sql" >/dev/null || exit 1
for prototype in lanes listings; do
  case " $sides " in *" $prototype "*)
    psql -X -q -v ON_ERROR_STOP=1 -f "bench/prototype/$prototype.sql" >/dev/null || exit 1 ;;
  esac
done
case " $sides " in *" plpgsql "*)
  script="sql/gen/plpgsql/plain--$(cat VERSION).sql"
  [ -f "$script" ] || { echo "no $script: run make first" >&2; exit 1; }
  psql -X -q -v ON_ERROR_STOP=1 -c "CREATE ROLE fy_owner LOGIN NOSUPERUSER CREATEDB CREATEROLE" >/dev/null &&
    createdb -O fy_owner fy_held_pl && psql -X -q -v ON_ERROR_STOP=1 -U fy_owner -d fy_held_pl -f "$script" >/dev/null &&
    psql -X -q -v ON_ERROR_STOP=1 -d fy_held_pl -f "$scripts/setup.sql" >/dev/null || exit 1 ;;
esac
# Each side runs in the database $db names: fy_held_pl for the PL/pgSQL edition's (the holder
# too: a snapshot holds back the horizon of its own database only).
db=$PGDATABASE
sql() { psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@" >/dev/null; }
source bench/lib/fill.sh
source bench/lib/hold.sh

# The tables a side's run leaves dead tuples in.
tables() {
  case "$1" in
    forgeyard | plpgsql) echo "'messages', 'queue_slots', 'queue_admit_deltas', 'queue_releases', 'queue_release_deltas', 'queues', 'queue_lanes', 'queue_lane_entries_0', 'queue_lane_entries_1', 'queue_lane_entries_2', 'queue_lane_entries_3', 'queue_release_deltas_0', 'queue_release_deltas_1', 'queue_release_deltas_2', 'queue_release_deltas_3', 'queue_admit_deltas_0', 'queue_admit_deltas_1', 'queue_admit_deltas_2', 'queue_admit_deltas_3'" ;;
    baseline) echo "'bench_q'" ;;
    lanes) echo "'msgs', 'ready'" ;;
    listings) echo "'entries_0', 'entries_1', 'entries_2', 'entries_3', 'events_0', 'events_1', 'events_2', 'events_3'" ;;
  esac
}
# The prototype's queue: $1 ready messages, listed at positions 1..$1, the cursor at 0.
fill_lanes() {
  sql -c "TRUNCATE lanes.msgs, lanes.ready" \
    -c "INSERT INTO lanes.msgs (msg_id, payload, ready_pos, state)
        SELECT g, '\x7b226f72646572223a2031323334357d'::bytea, g, 'pending' FROM generate_series(1, $1) g" \
    -c "INSERT INTO lanes.ready (lane, pos, msg_id) SELECT 1, g, g FROM generate_series(1, $1) g" \
    -c "SELECT setval('lanes.msg_ids', $1), setval('lanes.lane_pos', $1), setval('lanes.lane_cursor', 0)" \
    -c "VACUUM ANALYZE lanes.msgs" -c "VACUUM ANALYZE lanes.ready" -c "CHECKPOINT"
}
# The second prototype's queue: $1 listings in segment 0 at positions 1..$1, the cursor at 0.
fill_listings() {
  sql -c "TRUNCATE listings.entries, listings.events" \
    -c "INSERT INTO listings.entries (seg, lane, pos, msg_id, attempt, payload)
        SELECT 0, 1, g, g, 0, '\x7b226f72646572223a2031323334357d'::bytea FROM generate_series(1, $1) g" \
    -c "SELECT setval('listings.msg_ids', $1), setval('listings.lane_pos', $1), setval('listings.lane_cursor', 0)" \
    -c "VACUUM ANALYZE listings.entries" -c "VACUUM ANALYZE listings.events" -c "CHECKPOINT"
}
dead() { # side: "dead tuples N, size M MB" of its tables (forgeyard's: and of the lanes' entries, and the counts' tables: slots, releases and their deltas with their segments)
  psql -X -At -d "$db" -c "SELECT pg_catalog.pg_stat_force_next_flush()" >/dev/null 2>&1
  psql -X -At -d "$db" -c "SELECT 'dead tuples ' || coalesce(sum(n_dead_tup), 0) || ', size ' ||
      pg_catalog.round(coalesce(sum(pg_catalog.pg_total_relation_size(relid)), 0) / 1048576.0) || ' MB' ||
      coalesce(' (lane entries: ' || sum(n_live_tup) FILTER (WHERE relname LIKE 'queue_lane%') || ' live, ' ||
               sum(n_dead_tup) FILTER (WHERE relname LIKE 'queue_lane%') || ' dead)', '') ||
      coalesce(' (counts: ' || sum(n_dead_tup) FILTER (WHERE relname ~ '^queue_(slots|releases|admit_deltas|release_deltas)') ||
               ' dead)', '')
    FROM pg_catalog.pg_stat_user_tables WHERE relname IN ($(tables "$1"))"
}
# percentiles PREFIX: "p50 …, p99 …" of the per-transaction logs $dir/PREFIX*.
percentiles() {
  cat "$dir/$1"* 2>/dev/null | awk '{ print $3 }' | sort -n |
    awk '{ v[NR] = $1 } END { if (NR == 0) { print "no transactions"; exit }
      printf "p50 %.2f ms, p99 %.2f ms", v[int(NR * 0.50) + 1] / 1000, v[int(NR * 0.99) + 1] / 1000 }'
}
# run label side rate seconds: pgbench at `rate` (0: as fast as it goes); prints the achieved rate
# and latency percentiles from the per-transaction log (and the producer's, FY_HELD_PRODUCE=1).
run() {
  local label=$1 side=$2 rate=$3 secs=$4 script producer=""
  case "$side" in
    forgeyard | plpgsql) script=$scripts/forgeyard_claim1_ack.sql producer=$scripts/forgeyard_enqueue.sql ;;
    baseline) script=$scripts/baseline_claim1_ack.sql producer=$scripts/baseline_enqueue.sql ;;
    lanes) script=$scripts/lanes_claim1_ack.sql ;;
    listings) script=$scripts/listings_claim1_ack.sql ;;
  esac
  rm -f "$dir"/log* "$dir"/plog*
  local pace=()
  [ "$rate" -gt 0 ] && pace=(-R "$rate")
  local pid="" pout=$dir/producer.out
  if [ "$produce" = 1 ] && [ "$rate" -gt 0 ] && [ -n "$producer" ]; then
    (cd "$dir" && "$PG_BIN/pgbench" -n -M prepared -c 1 -j 1 -T "$secs" -R "$rate" -l --log-prefix="$dir/plog" \
      -f "$OLDPWD/$producer" "$db" >"$pout" 2>&1) &
    pid=$!
  fi
  local mpid=""
  if [ "$maintain_every" != 0 ] && { [ "$side" = forgeyard ] || [ "$side" = plpgsql ]; }; then
    (
      local until=$((SECONDS + secs))
      while [ $SECONDS -lt $until ]; do
        psql -X -q -d "$db" -c "SELECT forgeyard.maintain()" >/dev/null 2>&1
        sleep "$maintain_every"
      done
    ) &
    mpid=$!
  fi
  local out
  out=$(cd "$dir" && "$PG_BIN/pgbench" -n -M prepared -c "$clients" -j "$clients" -T "$secs" "${pace[@]}" \
    -l --log-prefix="$dir/log" -f "$OLDPWD/$script" "$db" 2>&1)
  [ -n "$mpid" ] && wait "$mpid"
  local tps
  tps=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1)
  local offered="max"
  [ "$rate" -gt 0 ] && offered="$rate/s"
  printf '%-44s offered %-7s achieved %8.0f/s  %s  %s\n' "$label" "$offered" "${tps:-0}" "$(percentiles log)" \
    "$(dead "$side")"
  if [ -n "$pid" ]; then
    wait "$pid"
    printf '%-44s offered %-7s achieved %8.0f/s  %s\n' "  its producer (enqueue)" "$offered" \
      "$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$pout" | head -1)" "$(percentiles plog)"
  fi
}
# Enough ready messages that no run empties its queue: the fastest run's rate times its seconds
# (FY_HELD_FILL: another number; with FY_HELD_PRODUCE=1 a small one lets the consumers reach the
# producer's messages, whose lanes' segments can then be truncated during the run).
need=${FY_HELD_FILL:-$((seconds * 3000 + max_seconds * 6000))}
refill() {  # refill SIDE
  case "$1" in
    lanes) fill_lanes "$need" ;;
    listings) fill_listings "$need" ;;
    *) fill "$need" ;;
  esac
}
for side in $sides; do
  db=$PGDATABASE
  [ "$side" = plpgsql ] && db=fy_held_pl
  refill "$side"
  run "$side, nothing held, maximum" "$side" 0 "$max_seconds"
  for rate in $rates; do
    refill "$side"
    run "$side, nothing held" "$side" "$rate" "$seconds"
    refill "$side"
    PGDATABASE=$db hold
    run "$side, snapshot held ${seconds}s" "$side" "$rate" "$seconds"
    run "$side, then its maximum, still held" "$side" 0 "$max_seconds"
    release
  done
done
