#!/usr/bin/env bash
# Epochs keep growing across a cluster restart and a pg_dump / pg_restore round trip, also when
# the restored backup is older than the last grant; extension tables keep their data in a dump; a
# workflow's durable timer set before a restart fires after it.
# Runs against the throwaway cluster of scripts/test.sh (CLUSTER_DIR, PG* in the environment).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/cluster.sh
: "${CLUSTER_DIR:?run through scripts/test.sh}"

src=fy_restore_src
dst=fy_restore_dst
dump="$CLUSTER_DIR/old.dump"
q() { psql -X -q -v ON_ERROR_STOP=1 -At -d "$1" -c "$2"; }
check() {  # check DESCRIPTION CONDITION-SQL-RETURNING-BOOL
  if [ "$(q "${DB:-$src}" "SELECT ($2)::text")" != "true" ]; then echo "FAIL: $1"; exit 1; fi
  echo "ok - $1"
}

dropdb --if-exists "$src"; dropdb --if-exists "$dst"
createdb "$src"
q "$src" "CREATE EXTENSION forgeyard"
q "$src" "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fy_restore_app') THEN CREATE ROLE fy_restore_app; END IF; END \$\$"
q "$src" "SELECT forgeyard.grant_usage('fy_restore_app'); SELECT forgeyard.bind_tenant('fy_restore_app', 't')" >/dev/null

e1=$(q "$src" "SELECT epoch FROM forgeyard.lease_acquire('t', 'r', 'a', '1 hour')")
q "$src" "SELECT forgeyard.lease_release('t', 'r', $e1)" >/dev/null
q "$src" "SELECT forgeyard.audit_append('t', 'a', 'deploy', 'svc', '{\"v\": 1.50}'); SELECT forgeyard.audit_append('t', 'a', 'rollback', 'svc')" >/dev/null
head=$(q "$src" "SELECT seq || ':' || encode(hash, 'hex') FROM forgeyard.audit_head('t')")
pg_dump -Fc -d "$src" -f "$dump"          # the backup is taken here: it knows e1 only
e2=$(q "$src" "SELECT epoch FROM forgeyard.lease_acquire('t', 'r', 'b', '1 hour')")
DB=$src check "a later grant has a greater epoch ($e2 > $e1)" "$e2 > $e1"
q "$src" "SELECT forgeyard.lease_release('t', 'r', $e2)" >/dev/null

# A workflow run sleeps for an hour (a durable timer: a delayed message), then the cluster restarts.
at() { echo "SET forgeyard.now_override = '2030-01-01 $1+00';"; }
run=$(q "$src" "$(at 00:00:00) SELECT forgeyard.workflow_start('t', 'nap', 1, 'nap-1', '{}')")
epoch=$(q "$src" "$(at 00:00:00) SELECT epoch FROM forgeyard.workflow_claim('t', 'w1', ARRAY['nap@1'], 1, '1 minute')")
q "$src" "$(at 00:00:00) SELECT status FROM forgeyard.workflow_step('t', '$run', $epoch, 'wait')" >/dev/null
q "$src" "$(at 00:00:00) SELECT forgeyard.workflow_sleep('t', '$run', $epoch, 'wait', '2030-01-01 01:00:00+00')" >/dev/null
DB=$src check "the run sleeps" "(SELECT state = 'sleeping' FROM forgeyard.workflow_status('t', '$run'))"

cluster_pg_ctl restart
early=$(q "$src" "$(at 00:59:59) SELECT count(*) FROM forgeyard.workflow_claim('t', 'w2', ARRAY['nap@1'], 1, '1 minute')")
DB=$src check "after the restart nobody gets the sleeping run before its timer" "$early = 0"
epoch2=$(q "$src" "$(at 01:00:00) SELECT epoch FROM forgeyard.workflow_claim('t', 'w2', ARRAY['nap@1'], 1, '1 minute')")
DB=$src check "the timer set before the restart hands the run out at its end, to a new epoch ($epoch2 > $epoch)" \
  "${epoch2:-0} > $epoch"
status=$(q "$src" "$(at 01:00:00) SELECT status FROM forgeyard.workflow_step('t', '$run', ${epoch2:-0}, 'wait')")
DB=$src check "and the sleep replays as done" "'$status' = 'done'"
e3=$(q "$src" "SELECT epoch FROM forgeyard.lease_acquire('t', 'r', 'c', '1 hour')")
DB=$src check "after a restart the epoch keeps growing ($e3 > $e2)" "$e3 > $e2"

createdb "$dst"
pg_restore -d "$dst" "$dump"
DB=$dst check "the dump kept the lease row" "(SELECT epoch = $e1 AND released_at IS NOT NULL FROM forgeyard.leases WHERE tenant_id = 't' AND resource = 'r')"
DB=$dst check "the dump kept tenant bindings" "EXISTS (SELECT FROM forgeyard.tenant_bindings WHERE role_id = 'fy_restore_app'::regrole AND tenant_id = 't')"
DB=$dst check "the dump kept recorded access" "EXISTS (SELECT FROM forgeyard.role_access WHERE role_id = 'fy_restore_app'::regrole AND access = 'usage')"
DB=$dst check "the dump kept the grants" "has_function_privilege('fy_restore_app', 'forgeyard.lease_acquire(text,text,text,interval)', 'EXECUTE')"
DB=$dst check "the dump kept the audit chain: it verifies against the head taken before ($head)" \
  "(SELECT ok AND checked = 2 FROM forgeyard.audit_verify('t', 1, NULL, split_part('$head', ':', 1)::bigint, decode(split_part('$head', ':', 2), 'hex')))"
DB=$dst check "the restored audit log is still append-only" \
  "(SELECT count(*) = 2 FROM pg_trigger WHERE tgrelid = 'forgeyard.audit_events'::regclass AND tgenabled = 'A')"
e4=$(q "$dst" "SELECT epoch FROM forgeyard.lease_acquire('t', 'r', 'd', '1 hour')")
DB=$dst check "after restoring an older backup the epoch passes every epoch handed out before ($e4 > $e3)" "$e4 > $e3"

dropdb "$src"; dropdb "$dst"
q postgres "DROP ROLE fy_restore_app"
