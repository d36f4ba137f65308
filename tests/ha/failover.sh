#!/usr/bin/env bash
# Failover drill with a real HA manager: pg_auto_failover (Debian's postgresql-15-auto-failover)
# runs a monitor and two PostgreSQL nodes on this machine, each with its own port and directory,
# as an unprivileged user, with synchronous replication. The fault suite's workloads run through
# one multi-host URL (target_session_attrs=read-write) while the primary is SIGKILLed, the standby
# is promoted, the old primary rejoins as a standby and a second failover goes back
# (tests/faults/ha_failover_test.cpp); then the history checker and `storage verify --full`.
# Run by scripts/test.sh after the client build (the extension installed, build/tests/fault_tests
# built); alone: tests/ha/failover.sh [BUILD_DIR]. Bounded: every wait has a deadline.
# FORGEYARD_HA_KEEP=1 keeps the nodes running afterwards (their directory is printed).
#
# The drill calls this script back to act on the nodes: failover.sh control DIR kill-primary |
# wait-primary | rejoin.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/cluster.sh

# as_owner [NAME] CMD...: as the unprivileged owner, with the drill's environment. Every process
# started for service NAME (pg_autoctl forks services in sessions of their own, and PostgreSQL's
# backends inherit the postmaster's environment) carries FORGEYARD_HA_NODE=<dir>/NAME, which is
# how kill_node finds them; PostgreSQL's own processes also by their working directory, the
# node's data directory (a long process title overwrites the environment /proc shows: the
# monitor's logger and health-check worker outlived the drill, found by neither).
as_owner() {
  local node=""
  case $1 in monitor | node1 | node2) node=$HA_DIR/$1; shift ;; esac
  # The test cluster's PG* variables (scripts/test.sh exports them) would point pg_autoctl at it.
  cluster_as_owner env -u PGUSER -u PGDATABASE -u PGPORT -u PGPASSWORD HOME="$HA_DIR" \
    XDG_CONFIG_HOME="$HA_DIR/xdg/config" XDG_DATA_HOME="$HA_DIR/xdg/data" XDG_RUNTIME_DIR="$HA_DIR/xdg/run" \
    PG_REGRESS_SOCK_DIR="$HA_DIR/sock" PGHOST="$HA_DIR/sock" PATH="$PG_BIN:$PATH" FORGEYARD_HA_NODE="$node" "$@"
}
procs_of() {  # procs_of NAME: the pids of that service's processes
  local p
  for p in $(pgrep -u "$CLUSTER_OWNER"); do
    # A process substitution, not a pipe: under pipefail, tr's SIGPIPE after grep -q's early exit would
    # count as a miss.
    if [ "$(readlink "/proc/$p/cwd" 2>/dev/null)" = "$HA_DIR/$1" ] ||
       grep -qxF "FORGEYARD_HA_NODE=$HA_DIR/$1" < <(tr '\0' '\n' 2>/dev/null <"/proc/$p/environ"); then
      echo "$p"
    fi
  done
}
port_of() { cat "$HA_DIR/$1.port"; }
other_of() { [ "$1" = node1 ] && echo node2 || echo node1; }
# Whether NODE's PostgreSQL takes writes, as target_session_attrs=read-write sees it (a promoted
# standby is read-only until the monitor knows the old primary is gone).
writable() { [ "$(psql -X -At -h 127.0.0.1 -p "$(port_of "$1")" -U postgres -d postgres \
  -c "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'" 2>/dev/null)" = t ]; }
# The monitor's view: "NODE reported assigned" per node.
states() { as_owner pg_autoctl show state --pgdata "$HA_DIR/monitor" 2>/dev/null |
  awk -F'|' 'NR > 2 { gsub(/ /, ""); print $1, $6, $7 }'; }
state_of() { states | awk -v n="$1" '$1 == n { print $2 }'; }
wait_for() {  # wait_for SECONDS DESCRIPTION CMD...
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    if [ $SECONDS -ge $deadline ]; then
      echo "ha: timed out waiting for $what" >&2
      states >&2
      return 1
    fi
    sleep 0.2
  done
}
# Starts NODE's keeper (or the monitor's service) in the background, in a session of its own
# (away from this script's signals); kill_node finds its processes by their environment.
start_service() {  # start_service NAME
  as_owner "$1" setsid pg_autoctl run --pgdata "$HA_DIR/$1" >>"$HA_DIR/$1.log" 2>&1 &
}

# A node's whole "machine" at once: its keeper, the services it forked, its postmaster and every
# backend, SIGKILLed until none is left (a service could fork meanwhile).
kill_node() {  # kill_node NODE
  local pids round
  for round in 1 2 3 4 5; do
    pids=$(procs_of "$1")
    [ -n "$pids" ] || break
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null
    sleep 0.05
  done
  [ -z "$(procs_of "$1")" ] || { echo "ha: $1 survived SIGKILL" >&2; return 1; }
  echo "$1" >"$HA_DIR/killed"
}

# Whether NODE is a standby again. Until then, every 5 s, an immediate CHECKPOINT on the other
# node: when pg_rewind fails (pg_auto_failover writes standby.signal first, and pg_rewind's
# single-user crash recovery refuses standby mode), the keeper falls back to pg_basebackup, which
# waits for a spread checkpoint on the primary; that could outlast the wait below on a loaded
# machine. An immediate request makes the checkpoint in progress finish at once.
nudge_at=0
rejoined() {  # rejoined NODE
  [ "$(state_of "$1")" = secondary ] && return 0
  if [ $SECONDS -ge $nudge_at ]; then
    nudge_at=$((SECONDS + 5))
    psql -X -q -h 127.0.0.1 -p "$(port_of "$(other_of "$1")")" -U postgres -d postgres -c CHECKPOINT \
      >/dev/null 2>&1 || true
  fi
  return 1
}

control() {
  case $1 in
    kill-primary)
      local p
      for p in node1 node2; do writable "$p" && break; done
      writable "$p" || { echo "ha: no primary to kill" >&2; return 1; }
      kill_node "$p"
      ;;
    wait-primary)
      local survivor
      survivor=$(other_of "$(cat "$HA_DIR/killed")")
      # (pg_auto_failover's monitor notices a dead primary by its health checks, which under the
      # test command's parallel load, at nice 19, took longer than 60 s once.)
      wait_for 120 "$survivor to be promoted" writable "$survivor"
      ;;
    rejoin)
      local node
      node=$(cat "$HA_DIR/killed")
      start_service "$node"
      if ! wait_for 90 "$node to rejoin as a standby" rejoined "$node"; then
        echo "ha: the end of $node's keeper log:" >&2
        tail -n 40 "$HA_DIR/$node.log" >&2
        return 1
      fi
      wait_for 30 "synchronous replication back on" eval '[ "$(state_of "$(other_of "$node")")" = primary ]'
      ;;
    *)
      echo "usage: failover.sh control DIR kill-primary|wait-primary|rejoin" >&2
      return 2
      ;;
  esac
}

if [ "${1:-}" = control ]; then
  HA_DIR=$2
  CLUSTER_OWNER=$(stat -c %U "$HA_DIR")
  control "$3"
  exit
fi

build=${1:-build}
command -v pg_autoctl >/dev/null || { echo "ha: pg_autoctl is missing (scripts/install-deps.sh)" >&2; exit 1; }
[ -x "$build/tests/fault_tests" ] || { echo "ha: $build/tests/fault_tests is not built" >&2; exit 1; }
cluster_owner_init
HA_DIR=$(mktemp -d -t forgeyard-ha.XXXXXX)
chmod 755 "$HA_DIR"
mkdir -p "$HA_DIR/sock" "$HA_DIR/xdg/config" "$HA_DIR/xdg/data" "$HA_DIR/xdg/run"
chmod 700 "$HA_DIR/xdg/run"
chown -R "$CLUSTER_OWNER" "$HA_DIR"
stop_all() {
  local s
  for s in node1 node2 monitor; do kill_node "$s" 2>/dev/null; done
  rm -rf "$HA_DIR"
}
# FORGEYARD_HA_KEEP=1 leaves the nodes running and their directory in place, to look at.
[ "${FORGEYARD_HA_KEEP:-0}" = 1 ] || trap stop_all EXIT
trap 'exit 1' INT TERM
t0=$SECONDS

for s in monitor node1 node2; do
  port=$((20000 + RANDOM % 20000))
  while (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null || grep -qx "$port" "$HA_DIR"/*.port 2>/dev/null; do
    port=$((port + 1))
  done
  echo "$port" >"$HA_DIR/$s.port"
done
monitor_url="postgres://autoctl_node@127.0.0.1:$(port_of monitor)/pg_auto_failover?sslmode=disable"

echo "== pg_auto_failover: monitor on $(port_of monitor)"
as_owner monitor pg_autoctl create monitor --pgdata "$HA_DIR/monitor" --pgport "$(port_of monitor)" --hostname 127.0.0.1 \
  --auth trust --no-ssl --pgctl "$PG_BIN/pg_ctl" >"$HA_DIR/monitor.log" 2>&1 || { cat "$HA_DIR/monitor.log"; exit 1; }
start_service monitor
# (120 s: at nice 19 beside the sanitizer suites, two clean-clone runs of 0.10.0's test command saw
# the monitor not yet accepting connections after 30 s.)
wait_for 120 "the monitor" eval 'psql -X -At "$monitor_url" -c "SELECT 1" >/dev/null 2>&1' || exit 1
# Failure detection in seconds rather than the defaults' half a minute.
psql -X -q -h 127.0.0.1 -p "$(port_of monitor)" -U "$CLUSTER_OWNER" -d pg_auto_failover \
  -c "ALTER SYSTEM SET pgautofailover.health_check_period = 1000" \
  -c "ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000" \
  -c "ALTER SYSTEM SET pgautofailover.health_check_max_retries = 1" \
  -c "ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500" \
  -c "ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 2000" \
  -c "ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 6000" \
  -c "SELECT pg_reload_conf()" >/dev/null || exit 1

for n in node1 node2; do
  echo "== pg_auto_failover: $n on $(port_of "$n")"
  as_owner "$n" pg_autoctl create postgres --pgdata "$HA_DIR/$n" --pgport "$(port_of "$n")" --hostname 127.0.0.1 \
    --name "$n" --auth trust --no-ssl --pgctl "$PG_BIN/pg_ctl" --monitor "$monitor_url" --dbname forgeyard_ha \
    --username postgres >>"$HA_DIR/$n.log" 2>&1 || { cat "$HA_DIR/$n.log"; exit 1; }
  # A primary that loses the monitor and its standby demotes itself after this; the monitor's
  # primary_demote_timeout (above) must stay longer, or a partitioned old primary could still take
  # writes when the standby is promoted.
  as_owner "$n" pg_autoctl config set --pgdata "$HA_DIR/$n" timeout.network_partition_timeout 3 >/dev/null || exit 1
  start_service "$n"
  if [ $n = node1 ]; then
    wait_for 60 "node1 to be the primary" writable node1 || exit 1
  else
    # (At nice 19 beside the sanitizer suites and the fuzz runs, node2 once stayed catchingup for
    # the 90 s this waited before.)
    wait_for 150 "node2 to be a standby" eval '[ "$(state_of node2)" = secondary ]' || exit 1
  fi
done
wait_for 30 "synchronous replication to node2" eval '[ "$(state_of node1)" = primary ]' || exit 1
states
# Two data nodes: pg_auto_failover keeps number_sync_standbys at 0 and names the one standby in
# synchronous_standby_names (ANY 1) while it is healthy, so a commit returns only once the standby
# has it. Without that the drill proves nothing.
sync=$(psql -X -At -h 127.0.0.1 -p "$(port_of node1)" -U postgres -d postgres -c "SHOW synchronous_standby_names")
echo "synchronous_standby_names = '$sync'"
[ -n "$sync" ] || { echo "ha: the primary does not replicate synchronously" >&2; exit 1; }
psql -X -q -h 127.0.0.1 -p "$(port_of node1)" -U postgres -d forgeyard_ha -c "CREATE EXTENSION forgeyard" || exit 1
# A workflow run and a resource's breaker that must still be there, on the standby, after both
# failovers (read below).
psql -X -q -h 127.0.0.1 -p "$(port_of node1)" -U postgres -d forgeyard_ha \
  -c "SELECT forgeyard.workflow_start('ha-drill', 'drill', 1, 'drill-1', '{\"drill\": true}')" \
  -c "SELECT forgeyard.breaker_configure('ha-drill', 'drill', '{}')" >/dev/null || exit 1
echo "== ha setup: $((SECONDS - t0)) s ($HA_DIR)"

FORGEYARD_TEST_HA_URL="postgresql://postgres@127.0.0.1:$(port_of node1),127.0.0.1:$(port_of node2)/forgeyard_ha?target_session_attrs=read-write&connect_timeout=2&application_name=forgeyard-ha" \
  FORGEYARD_TEST_HA_CONTROL="$PWD/tests/ha/failover.sh control $HA_DIR" FORGEYARD_LOG_LEVEL=error \
  "$build/tests/fault_tests" --suite=ha_failover --log_level=test_suite --report_level=short
rc=$?

# Everything the inspect access kind reads works on a hot standby: nothing there writes. The
# list is the access catalog's, so a new view or function is covered without a change here. The
# functions on one workflow run read the run started at setup (1 / count(*) fails without it).
standby=node1
writable node1 && standby=node2
echo "== inspect reads on the standby ($standby)"
reads=$(psql -X -At -h 127.0.0.1 -p "$(port_of "$standby")" -U postgres -d forgeyard_ha -c "
  SELECT CASE WHEN object LIKE 'TABLE %' THEN 'SELECT count(*) FROM ' || substr(object, 7)
              WHEN object LIKE 'FUNCTION %()' THEN 'SELECT count(*) FROM ' || substr(object, 10)
              WHEN object = 'FUNCTION forgeyard.storage_stats(text)' THEN 'SELECT count(*) FROM forgeyard.storage_stats(NULL)'
              WHEN object = 'FUNCTION forgeyard.breaker_state(text, text)'
                THEN 'SELECT count(*) FROM forgeyard.breaker_state(''ha-drill'', ''drill'')'
              WHEN object LIKE 'FUNCTION forgeyard.workflow\_%(text, uuid)'
                THEN 'SELECT 1 / count(*) FROM forgeyard.wf_runs r LEFT JOIN LATERAL '
                     || regexp_replace(substr(object, 10), '\(.*\)$', '(r.tenant_id, r.run_id)')
                     || ' x ON true WHERE r.tenant_id = ''ha-drill'''
              ELSE 'SELECT count(*) FROM ' || regexp_replace(substr(object, 10), '\(.*\)$', '(''ha-drill'')') END
    FROM forgeyard.access_catalog WHERE access = 'inspect' ORDER BY object") || rc=1
[ -n "$reads" ] || { echo "ha: no inspect reads found" >&2; rc=1; }
while IFS= read -r q; do
  [ -n "$q" ] || continue
  if out=$(psql -X -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(port_of "$standby")" -U postgres -d forgeyard_ha \
    -c "SET default_transaction_read_only = on" -c "$q" 2>&1); then
    echo "ok - $q on the standby: $(tail -1 <<<"$out") rows"
  else
    echo "FAIL: $q on the standby: $out"
    rc=1
  fi
done <<<"$reads"
echo "== ha drill: $((SECONDS - t0)) s in all"
exit $rc
