#!/usr/bin/env bash
# Server-side hot paths against hand-written SQL, with pgbench (the client costs the same for
# both): the SKIP LOCKED queue, and the leases, compare-and-set, idempotency keys and audit table
# of the client-side benchmarks' baselines, and a workflow step against DBOS's check of the step's
# output then INSERT ... ON CONFLICT DO NOTHING (workflow_step), and its record alone against that
# INSERT alone (step_record). A throwaway cluster with fsync on, both schemas
# loaded, baseline and forgeyard interleaved, 1 and 2 clients, three rounds of 10 s per side.
# Prints operations/s (messages for the queue lines, script runs for the others) and the ratio per
# line and round, then the median ratio of the rounds per line.
# Not part of the test command. Run from scripts/bench.sh, or alone (it starts its own cluster).
#   FY_PGBENCH_ROUNDS=3  rounds            FY_PGBENCH_SECONDS=10  seconds per run (0: counts instead)
#   FY_PGBENCH_SCALE=100 transaction counts of FY_PGBENCH_SECONDS=0, in percent
#   FY_PGBENCH_SYNC=on   synchronous_commit (off: CPU alone, no commit wait)
#   FY_PGBENCH_ONLY=     only lines whose name matches this regular expression
#   FY_PGBENCH_CLIENTS="1 2"  the client counts of each line
#   FY_PGBENCH_WAITS=0   1: during each timed run, the share of the active pgbench backends'
#                        samples (every 10 ms, pg_stat_activity) per wait event on stderr, with
#                        Lock:transactionid (waiting for another transaction's row) first
#   FY_PGBENCH_EDITIONS=0  1: also the PL/pgSQL edition (a plain install by a role that is not
#                        superuser, in its own database with the same baseline tables), run after
#                        the C++ edition's side: each line prints both editions against the
#                        baseline and the C++ edition over the PL/pgSQL one (docs/architecture.md,
#                        "Two editions"; make must have generated sql/gen first)
#   FY_PGBENCH_STATEMENTS=0  1: after each run, its statements' mean server execution time (µs,
#                        pg_stat_statements, reset before the run) on stderr, with how often they
#                        were planned and the mean planning time: where a line's time goes
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${FY_PGBENCH_ROUNDS:-3}
seconds=${FY_PGBENCH_SECONDS:-10}
scale=${FY_PGBENCH_SCALE:-100}
sync=${FY_PGBENCH_SYNC:-on}
only=${FY_PGBENCH_ONLY:-}
statements=${FY_PGBENCH_STATEMENTS:-0}
waits=${FY_PGBENCH_WAITS:-0}
editions=${FY_PGBENCH_EDITIONS:-0}
client_counts=${FY_PGBENCH_CLIENTS:-1 2}
scripts=bench/pgbench
source scripts/lib/cluster.sh
trap cluster_stop EXIT
trap 'exit 1' INT TERM
cluster_start || exit 1
# cluster.sh turns fsync off for tests; the figures here are with fsync on.
psql -X -q -v ON_ERROR_STOP=1 -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET synchronous_commit = $sync" \
  -c "ALTER SYSTEM SET shared_buffers = '256MB'" -c "ALTER SYSTEM SET max_wal_size = '2GB'" \
  -c "ALTER SYSTEM SET pg_stat_statements.track_planning = $([ "$statements" = 1 ] && echo on || echo off)" >/dev/null || exit 1
cluster_pg_ctl restart || exit 1
psql -X -q -v ON_ERROR_STOP=1 -f "$scripts/setup.sql" >/dev/null || exit 1
db=$PGDATABASE
if [ "$editions" = 1 ]; then
  script="sql/gen/plpgsql/plain--$(cat VERSION).sql"
  [ -f "$script" ] || { echo "no $script: run make first" >&2; exit 1; }
  psql -X -q -v ON_ERROR_STOP=1 -c "CREATE ROLE fy_owner LOGIN NOSUPERUSER CREATEDB CREATEROLE" >/dev/null &&
    createdb -O fy_owner fy_bench_pl && psql -X -q -v ON_ERROR_STOP=1 -U fy_owner -d fy_bench_pl -f "$script" >/dev/null &&
    psql -X -q -v ON_ERROR_STOP=1 -d fy_bench_pl -f "$scripts/setup.sql" >/dev/null || exit 1
fi
# (cluster.sh loads pg_stat_statements; its view needs the extension)
[ "$statements" = 1 ] && { psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null || exit 1; }
# Each side runs in the database $db names: the C++ edition's (and the baseline's), or fy_bench_pl.
sql() { psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@" >/dev/null; }

# fill N [1]: fresh queues of N ready messages (bench/lib/fill.sh).
source bench/lib/fill.sh

# fill, and a second queue of $1 ready messages bound to a resource whose rate limit and
# max_in_flight never bind (kept in 8 parts), and with $2 = breaker a breaker that never opens
# (which keeps the resource in one part): the claim with flow control configured, against the
# same claim without (the line's "baseline" is forgeyard's own plain claim).
fill_limited() {
  local n=$1 breaker='NULL'
  [ "${2:-}" = breaker ] && breaker="'{}'"
  fill "$n"
  sql -c "SELECT forgeyard.queue_drop('bench', 'ql')" \
    -c "SELECT forgeyard.queue_create('bench', 'ql', '{\"max_messages\": 100000000, \"max_bytes\": 100000000000}')" \
    -c "SELECT forgeyard.resource_limit('bench', 'dep', '{\"rate\": 1000000000, \"per\": \"1 second\", \"max_in_flight\": 1000000}')" \
    -c "SELECT forgeyard.breaker_configure('bench', 'dep', $breaker)" \
    -c "INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, is_head, payload, bytes, slot,
                                        enqueued_at, visible_at, resource)
        SELECT pg_catalog.nextval('forgeyard.message_ids'), 'bench', 'ql', 'pending', 3, true,
               '\x7b226f72646572223a2031323334357d'::bytea, 16, g % q.slots, now(), now(), 'dep'
          FROM generate_series(1, $n) g, forgeyard.queues q WHERE q.tenant_id = 'bench' AND q.queue = 'ql'" \
    -c "UPDATE forgeyard.queue_slots a SET admitted_messages = c.n, admitted_bytes = 16 * c.n
          FROM (SELECT slot, count(*) AS n FROM forgeyard.messages WHERE tenant_id = 'bench' AND queue = 'ql' GROUP BY slot) c
         WHERE a.tenant_id = 'bench' AND a.queue = 'ql' AND a.slot = c.slot" \
    -c "VACUUM ANALYZE forgeyard.messages" -c "VACUUM ANALYZE forgeyard.queue_slots" \
    -c "VACUUM ANALYZE forgeyard.flow_resource_state" -c "CHECKPOINT"
}
# fill, and a second queue of $1 ready messages of a fair queue over 1,000 fairness keys (weights
# 1 to 4), with the passes its enqueue would give them (the keys in turn, each key's messages a
# step of its weight apart): the claim in pass order, against the same claim in age order.
fill_fair() {
  local n=$1
  fill "$n"
  sql -c "SELECT forgeyard.queue_drop('bench', 'qf')" \
    -c "SELECT forgeyard.queue_create('bench', 'qf', '{\"max_messages\": 100000000, \"max_bytes\": 100000000000, \"fairness\": true}')" \
    -c "SELECT forgeyard.fairness_weight('bench', 'qf', 'k' || k, 1 + k % 4) FROM generate_series(0, 999) k" \
    -c "INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, is_head, payload, bytes, slot,
                                        enqueued_at, visible_at, fairness_key, pass)
        SELECT pg_catalog.nextval('forgeyard.message_ids'), 'bench', 'qf', 'pending', 3, true,
               '\x7b226f72646572223a2031323334357d'::bytea, 16, g % q.slots, now(), now(), 'k' || (g % 1000),
               (g / 1000 + 1) * (1000000 / (1 + (g % 1000) % 4))
          FROM generate_series(1, $n) g, forgeyard.queues q WHERE q.tenant_id = 'bench' AND q.queue = 'qf'" \
    -c "UPDATE forgeyard.queue_slots a SET admitted_messages = c.n, admitted_bytes = 16 * c.n
          FROM (SELECT slot, count(*) AS n FROM forgeyard.messages WHERE tenant_id = 'bench' AND queue = 'qf' GROUP BY slot) c
         WHERE a.tenant_id = 'bench' AND a.queue = 'qf' AND a.slot = c.slot" \
    -c "VACUUM ANALYZE forgeyard.messages" -c "VACUUM ANALYZE forgeyard.queue_slots" -c "CHECKPOINT"
}
# The compare-and-set rows back at version 1 (each run starts from v=1), both tables.
reset_cas() {
  sql -c "UPDATE bench_cas_plain SET value = 0, entity_version = 1" -c "DROP TABLE bench_cas" \
    -c "CREATE TABLE bench_cas (LIKE bench_cas_plain INCLUDING ALL)" -c "INSERT INTO bench_cas SELECT * FROM bench_cas_plain" \
    -c "SELECT forgeyard.enable_versioning('bench_cas')" -c "VACUUM ANALYZE bench_cas" -c "VACUUM ANALYZE bench_cas_plain" \
    -c "CHECKPOINT"
}

# A run for each of 8 pgbench clients, claimed for a day (bench_wf_owner), and on both sides the
# same 100,000 recorded steps of other runs: the baseline's table and forgeyard's journal start
# each run alike (the journal would otherwise keep every earlier run's steps, and grow through the
# bench while the baseline's table does not).
own_runs() {
  sql -c "TRUNCATE bench_steps, bench_wf_owner, forgeyard.wf_journal" \
    -c "INSERT INTO bench_steps SELECT gen_random_uuid(), g, 's', '{\"n\": 1}' FROM generate_series(1, 100000) g" \
    -c "INSERT INTO forgeyard.wf_journal (tenant_id, run_id, position, step, status, result, epoch, recorded_at)
        SELECT 'bench', gen_random_uuid(), g, 's', 'done', '{\"n\": 1}', 1, now() FROM generate_series(1, 100000) g" \
    -c "DO \$\$ DECLARE g int; r uuid; e bigint; BEGIN
          FOR g IN 0..7 LOOP
            PERFORM forgeyard.workflow_start('bench', 'stepper', 1, 'k-' || g || '-' || clock_timestamp());
            SELECT c.run_id, c.epoch INTO r, e FROM forgeyard.workflow_claim('bench', 'w' || g, ARRAY['stepper@1'], 1, '1 day') c;
            INSERT INTO bench_wf_owner VALUES (g, r, e);
          END LOOP;
        END \$\$" \
    -c "VACUUM ANALYZE" -c "CHECKPOINT"
}

# What a line needs before each run: queue lines a fresh queue of $2 ready messages, the
# producer line a fresh queue of 1,000.
prepare() {  # kind messages
  case $1 in
    queue) fill "$2" ;;
    batch) fill "$2" 1 ;;
    limits) fill_limited "$2" ;;
    breaker) fill_limited "$2" breaker ;;
    fair) fill_fair "$2" ;;
    producer) fill 1000 ;;
    cas) reset_cas ;;
    workflow) own_runs ;;
    *) sql -c "VACUUM ANALYZE" -c "CHECKPOINT" ;;
  esac
}

# Operations/s of one script: pgbench's tps times the messages per script run.
run() {  # script clients transactions_per_client messages_per_transaction
  local out tps length=(-t "$3")
  [ "$seconds" -gt 0 ] && length=(-T "$seconds")
  [ "$statements" = 1 ] && sql -c "SELECT pg_stat_statements_reset()"
  local sampler="" samples
  if [ "$waits" = 1 ] && [ "$seconds" -gt 0 ]; then
    samples=$(mktemp)
    psql -X -At -F ' ' -d "$db" -c "SELECT * FROM bench_waits($seconds)" >"$samples" &
    sampler=$!
  fi
  out=$("$PG_BIN/pgbench" -n -M prepared -c "$2" -j "$2" "${length[@]}" -D ids='{}' -D toks='{}' -D v=1 -D p=0 \
    -f "$scripts/$1.sql" "$db" 2>&1)
  if [ -n "$sampler" ]; then
    wait "$sampler"
    awk -v s="$1" -v c="$2" '{ n[$1] = $2; total += $2; order[NR] = $1 } END {
      printf "  %s (%s clients): %d active samples, Lock:transactionid %.1f%%;", s, c, total,
        (total ? 100 * n["Lock:transactionid"] / total : 0)
      for (i = 1; i <= NR && i <= 4; i++) printf " %s %.1f%%", order[i], 100 * n[order[i]] / total
      printf "\n" }' "$samples" >&2
    rm -f "$samples"
  fi
  tps=$(sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' <<<"$out")
  if [ -z "$tps" ] || grep -q 'aborted\|ERROR' <<<"$out"; then
    echo "pgbench $1 failed:" >&2
    echo "$out" | tail -5 >&2
    echo 0
    return
  fi
  [ "$statements" = 1 ] && psql -X -At -F ' ' -d "$db" -c "SELECT round((mean_exec_time * 1000)::numeric, 1), calls,
        round((mean_plan_time * 1000)::numeric, 1), plans,
        left(regexp_replace(query, '\s+', ' ', 'g'), 100) FROM pg_stat_statements
      WHERE toplevel AND calls >= 100 AND query NOT LIKE '%pg_stat_statements%' ORDER BY mean_exec_time DESC" |
    awk -v s="$1" -v c="$2" '{ printf "  %s (%s clients): %8.1f us x %s, planned %s x %s us  ", s, c, $1, $2, $4, $3
                              $1 = $2 = $3 = $4 = ""; print substr($0, 5) }' >&2
  awk -v t="$tps" -v m="$4" 'BEGIN { printf "%.0f", t * m }'
}

# name baseline-script forgeyard-script script-runs-per-client operations-per-run target kind
# (claim1@limits compares forgeyard with itself: the claim of messages bound to a resource whose
# limits never bind, against the plain claim: flow control's cost when configured; claim1@breaker
# the same with a breaker that never opens. claim1@fair
# likewise: the claim of a fair queue over 1,000 keys against the plain claim.)
# (workflow_step is the whole step protocol: workflow_step then workflow_step_complete, against
# the lookup then the INSERT; step_record is the issue's measure, recording a step:
# workflow_step_complete alone against the INSERT alone.)
# (ack_and_claim1@batch is ack_and_claim1 on a queue whose messages a batch admitted into one
# capacity slot: every ack gives room back to that slot, where two consumers meet.)
# (A timed run of a queue line gets a queue of 12,000 script runs per client and second: more than
# this machine claims; a queue that runs dry aborts the run, which then prints 0.)
lines=(
  "claim1+ack baseline_claim1_ack forgeyard_claim1_ack 4000 1 1.0 queue"
  "ack_and_claim1 baseline_claim1_ack forgeyard_ack_and_claim1 4000 1 1.5 queue"
  "ack_and_claim1@batch baseline_claim1_ack forgeyard_ack_and_claim1 4000 1 1.5 batch"
  "claim100+ack baseline_claim100_ack forgeyard_claim100_ack 200 100 1.4 queue"
  "claim1@limits forgeyard_claim1_ack forgeyard_claim1_ack_limited 4000 1 0.9 limits"
  "claim1@breaker forgeyard_claim1_ack forgeyard_claim1_ack_limited 4000 1 0.9 breaker"
  "claim1@fair forgeyard_claim1_ack forgeyard_claim1_ack_fair 4000 1 0.9 fair"
  "enqueue1 baseline_enqueue forgeyard_enqueue 4000 1 0.95 producer"
  "enqueue100 baseline_enqueue100 forgeyard_enqueue100 200 100 1.0 producer"
  "lease baseline_lease forgeyard_lease 1500 1 0.9 none"
  "cas_update baseline_cas forgeyard_cas 4000 1 0.9 cas"
  "idempotency baseline_idempotency forgeyard_idempotency 2000 1 0.9 none"
  "audit_append baseline_audit forgeyard_audit 4000 1 0.8 none"
  "workflow_step baseline_wf_step forgeyard_wf_step 2000 1 0.8 workflow"
  "step_record baseline_wf_record forgeyard_wf_record 2000 1 0.8 workflow"
)
ratios=$(mktemp)
if [ "$editions" = 1 ]; then
  printf '%-16s %-7s %-5s %12s %12s %12s %7s %7s %7s %s\n' line clients round baseline cpp plpgsql cpp/base pl/base cpp/pl target
else
  printf '%-16s %-7s %-5s %12s %12s %7s %s\n' line clients round baseline forgeyard ratio target
fi
for round in $(seq "$rounds"); do
  for line in "${lines[@]}"; do
    read -r name base fy t m target kind <<<"$line"
    [ -n "$only" ] && ! [[ "$name" =~ $only ]] && continue
    t=$((t * scale / 100))
    for clients in $client_counts; do
      fill=$((clients * t * m + 1000))
      [ "$seconds" -gt 0 ] && fill=$((clients * seconds * 12000 * (m > 1 ? 4 : 1) + 1000))
      db=$PGDATABASE
      prepare "$kind" "$fill"
      b=$(run "$base" "$clients" "$t" "$m")
      prepare "$kind" "$fill"
      f=$(run "$fy" "$clients" "$t" "$m")
      if [ "$editions" = 1 ]; then
        db=fy_bench_pl
        prepare "$kind" "$fill"
        p=$(run "$fy" "$clients" "$t" "$m")
        db=$PGDATABASE
        awk -v n="$name" -v c="$clients" -v r="$round" -v b="$b" -v f="$f" -v p="$p" -v g="$target" \
          'BEGIN { printf "%-16s %-7s %-5s %12d %12d %12d %6.2fx %6.2fx %6.2fx >= %sx\n", n, c, r, b, f, p,
                   (b > 0 ? f / b : 0), (b > 0 ? p / b : 0), (p > 0 ? f / p : 0), g }' | tee -a "$ratios"
      else
        awk -v n="$name" -v c="$clients" -v r="$round" -v b="$b" -v f="$f" -v g="$target" \
          'BEGIN { printf "%-16s %-7s %-5s %12d %12d %6.2fx >= %sx\n", n, c, r, b, f, (b > 0 ? f / b : 0), g }' |
          tee -a "$ratios"
      fi
    done
  done
done
echo
if [ "$seconds" -gt 0 ]; then echo "median of $rounds rounds of $seconds s per side:"; else echo "median of $rounds rounds:"; fi
if [ "$editions" = 1 ]; then
  echo "line             clients cpp/base pl/base  cpp/pl  (target: cpp/base; cpp/pl >= 1.3x)"
  awk '{ k = $1 " " $2; for (c = 0; c < 3; c++) r[k, c] = r[k, c] " " $(7 + c); keys[k] = 1 } END {
    for (k in keys) { split(k, kk, " "); printf "%-16s %-7s", kk[1], kk[2]
      for (c = 0; c < 3; c++) { n = split(r[k, c], a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { x = a[i]; a[i] = a[j]; a[j] = x }
        printf " %6.2fx", a[int((n + 1) / 2)] + 0 }
      printf "\n" } }' "$ratios" | sort
else
  awk '{ k = $1 " " $2; r[k] = r[k] " " $6; t[k] = $8 } END {
    for (k in r) { n = split(r[k], a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { x = a[i]; a[i] = a[j]; a[j] = x }
      split(k, kk, " "); printf "%-16s %-7s %6.2fx >= %s\n", kk[1], kk[2], a[int((n + 1) / 2)] + 0, t[k] } }' "$ratios" | sort
fi
rm -f "$ratios"
