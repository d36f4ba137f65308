#!/usr/bin/env bash
# Load at fleet scale (contract §12; seed 000 §139): one primary, a queue of 100,000 jobs and a
# fleet of registered runners (the daemon registry, forgeyard.app_daemon_register) that heartbeat
# about every 10 s and claim and ack jobs, all through PgBouncer in transaction mode with 20 server
# connections. The same work with 10,000 runners and with 100, interleaved, each run on a fresh
# queue of 100,000 jobs and a registry of exactly that many runners. Per run it prints:
#   claims/s            claim + ack pairs per second (pgbench, 16 clients through PgBouncer)
#   p50_ms p99_ms       latency of one claim + ack pair (pgbench's per-transaction log)
#   beats/s target      heartbeats per second done, and asked (runners / 10, pgbench --rate)
#   beat_p99_ms         latency of a heartbeat, its wait for a free connection included
#   live                registered runners still live (heartbeat not older than 30 s) at the end
#   cpu_us/job          server CPU (every PostgreSQL process, exited ones included) per claimed job
# then the median of the rounds per fleet size. Not part of the test command.
#   FY_FLEET_ROUNDS=3  FY_FLEET_SECONDS=10  FY_FLEET_SYNC=on (off: no wait for the WAL flush)
#   FY_FLEET_SIZES="10000 100"  FY_FLEET_JOBS=100000  FY_FLEET_CLIENTS=16
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${FY_FLEET_ROUNDS:-3}
seconds=${FY_FLEET_SECONDS:-10}
sync=${FY_FLEET_SYNC:-on}
sizes=${FY_FLEET_SIZES:-"10000 100"}
jobs=${FY_FLEET_JOBS:-100000}
clients=${FY_FLEET_CLIENTS:-16}
scripts=bench/fleet
source scripts/lib/cluster.sh
work=$(mktemp -d -t forgeyard-fleet.XXXXXX)
trap 'cluster_stop; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
cluster_start || exit 1
psql -X -q -v ON_ERROR_STOP=1 -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET synchronous_commit = $sync" \
  -c "ALTER SYSTEM SET shared_buffers = '256MB'" -c "ALTER SYSTEM SET max_wal_size = '2GB'" >/dev/null || exit 1
cluster_pg_ctl restart || exit 1
bouncer_start || exit 1
chmod 777 "$work"
sql() { psql -X -q -v ON_ERROR_STOP=1 "$@" >/dev/null; }
sql -c "CREATE EXTENSION IF NOT EXISTS forgeyard" || exit 1

# A fresh queue of $jobs ready jobs (through enqueue_batch, 1,000 at a time) and a registry of
# exactly $1 runners, each registered once.
prepare() {  # runners
  sql -c "SELECT forgeyard.queue_drop('fleet', 'jobs')" \
    -c "SELECT forgeyard.queue_create('fleet', 'jobs', '{\"max_messages\": $((jobs * 2)), \"max_bytes\": 1000000000}')" \
    -c "DELETE FROM forgeyard.app_daemons WHERE application = 'fleet'" || return 1
  local left=$jobs n
  while [ "$left" -gt 0 ]; do
    n=$((left < 1000 ? left : 1000))
    sql -c "SELECT count(*) FROM forgeyard.enqueue_batch('fleet', 'jobs',
              pg_catalog.array_fill('\x7b226a6f62223a2031323334357d'::bytea, ARRAY[$n]))" || return 1
    left=$((left - n))
  done
  sql -c "SELECT count(forgeyard.app_daemon_register('fleet', 'runner-' || g, 0, 0, '30 seconds'))
            FROM generate_series(1, $1) g" \
    -c "VACUUM ANALYZE" -c "CHECKPOINT"
}

# CPU ticks of the server so far: the postmaster with its reaped children, and every live child.
server_ticks() {
  local pm
  pm=$(head -1 "$CLUSTER_DIR/data/postmaster.pid")
  {
    awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pm/stat"
    for p in $(pgrep -P "$pm"); do awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null; done
  } | awk '{ s += $1 } END { print s }'
}

# Latency percentile in ms of pgbench per-transaction logs (column 3: microseconds).
percentile() {  # p files...
  local p=$1
  shift
  cat "$@" | awk '{ print $3 }' | sort -n | awk -v p="$p" '{ a[NR] = $1 } END { i = int(NR * p / 100); if (i < 1) i = 1; printf "%.2f", a[i] / 1000 }'
}

one_run() {  # runners round
  local runners=$1 rate=$(($1 / 10)) dir="$work/$1-$2" t0 t1 claims beats out_c out_b
  mkdir -p "$dir" && chmod 777 "$dir"
  [ "$rate" -lt 1 ] && rate=1
  prepare "$runners" || { echo "prepare failed" >&2; return 1; }
  t0=$(server_ticks)
  # Heartbeats at the fleet's rate, claims as fast as the server takes them, side by side.
  (cd "$dir" && "$PG_BIN/pgbench" -n -M extended -c 4 -j 1 -T "$seconds" -R "$rate" -D runners="$runners" \
    -l --log-prefix=beat -f "$OLDPWD/$scripts/heartbeat.sql" "$FORGEYARD_TEST_PGBOUNCER_URL" >pgbench_beat.out 2>&1) &
  local beat_pid=$!
  (cd "$dir" && "$PG_BIN/pgbench" -n -M extended -c "$clients" -j 2 -T "$seconds" -D runners="$runners" \
    -l --log-prefix=claim -f "$OLDPWD/$scripts/claim_ack.sql" "$FORGEYARD_TEST_PGBOUNCER_URL" >pgbench_claim.out 2>&1)
  wait "$beat_pid"
  t1=$(server_ticks)
  out_c=$(cat "$dir/pgbench_claim.out")
  out_b=$(cat "$dir/pgbench_beat.out")
  if grep -q 'aborted\|ERROR' <<<"$out_c$out_b"; then
    echo "pgbench failed:" >&2
    tail -5 "$dir/pgbench_claim.out" "$dir/pgbench_beat.out" >&2
    return 1
  fi
  claims=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out_c")
  beats=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out_b")
  local live
  live=$(psql -X -A -t -c "SELECT count(*) FROM forgeyard.app_daemon_list('fleet') WHERE live")
  awk -v n="$runners" -v r="$2" -v c="$claims" -v b="$beats" -v s="$seconds" -v rate="$rate" \
    -v p50="$(percentile 50 "$dir"/claim.*)" -v p99="$(percentile 99 "$dir"/claim.*)" \
    -v bp99="$(percentile 99 "$dir"/beat.*)" -v live="$live" -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%-8s %-5s %10.0f %8s %8s %8.0f %8d %11s %7d %10.0f\n", n, r, c / s, p50, p99, b / s, rate, bp99,
             live, (c > 0 ? ticks * 1e6 / hz / c : 0) }'
}

results="$work/results"
printf '%-8s %-5s %10s %8s %8s %8s %8s %11s %7s %10s\n' runners round claims/s p50_ms p99_ms beats/s target \
  beat_p99_ms live cpu_us/job
for round in $(seq "$rounds"); do
  for n in $sizes; do
    one_run "$n" "$round" | tee -a "$results"
  done
done
echo
echo "median of $rounds rounds of $seconds s (synchronous_commit=$sync, $clients claiming clients through PgBouncer):"
awk '{ for (i = 3; i <= 10; i++) v[$1, i] = v[$1, i] " " $i; seen[$1] = 1 } END {
  for (n in seen) { line = sprintf("%-8s %-5s", n, "med");
    for (i = 3; i <= 10; i++) { k = split(v[n, i], a, " ");
      for (x = 1; x <= k; x++) for (y = x + 1; y <= k; y++) if (a[y] + 0 < a[x] + 0) { t = a[x]; a[x] = a[y]; a[y] = t }
      line = line sprintf(" %10s", a[int((k + 1) / 2)]) }
    print line } }' "$results" | sort -rn
