#!/usr/bin/env bash
# The restore drill through a DBA's raw pg_dump -Fc / pg_restore plus forgeyard.restore_reconcile()
# (docs/operations.md#backup-and-restore): write (leases, claims, CAS, idempotency, audit), dump,
# write more (new epochs, tokens, messages, attempts), restore the older dump into a fresh
# database, reconcile, then prove: every epoch, token and attempt issued after the backup is
# refused (FY001); no id, token, epoch or attempt is handed out twice; the restored in-flight
# message is delivered again; audit chains verify and the cut tail is reported against the later
# anchor; a second reconcile changes nothing. Then pg_restore --clean over the original database
# (the same oid and system) is detected too. Runs against the cluster of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CLUSTER_DIR:?run through scripts/test.sh}"

src=fy_drill_src
dst=fy_drill_dst
dump="$CLUSTER_DIR/drill.dump"
q() { psql -X -q -v ON_ERROR_STOP=1 -At -d "$1" -c "$2"; }
check() {  # check DB DESCRIPTION CONDITION
  if [ "$(q "$1" "SELECT ($3)::text")" != "true" ]; then echo "FAIL: $2"; exit 1; fi
  echo "ok - $2"
}
# refused DB DESCRIPTION SQLSTATE SQL: the statement fails with exactly that SQLSTATE.
refused() {
  local got
  got=$(psql -X -q -At -d "$1" -v ON_ERROR_STOP=1 -c "DO \$\$ BEGIN PERFORM * FROM ($4) s; RAISE EXCEPTION 'no error' USING ERRCODE = 'P0001'; EXCEPTION WHEN OTHERS THEN RAISE NOTICE 'state:%', SQLSTATE; END \$\$" 2>&1 | grep -o 'state:[0-9A-Z]*' || true)
  if [ "$got" != "state:$3" ]; then echo "FAIL: $2 (got ${got:-nothing}, want $3)"; exit 1; fi
  echo "ok - $2"
}

dropdb --if-exists "$src"; dropdb --if-exists "$dst"
createdb "$src"
q "$src" "CREATE EXTENSION forgeyard"
q "$src" "CREATE TABLE public.items (id int PRIMARY KEY, name text, entity_version bigint NOT NULL DEFAULT 1);
          SELECT forgeyard.enable_versioning('public.items'); INSERT INTO public.items (id, name) VALUES (1, 'one')" >/dev/null

# ---- before the backup
q "$src" "SELECT forgeyard.queue_create('t', 'jobs')" >/dev/null
m1=$(q "$src" "SELECT forgeyard.enqueue('t', 'jobs', '\x01')")
m2=$(q "$src" "SELECT forgeyard.enqueue('t', 'jobs', '\x02')")
t1=$(q "$src" "SELECT claim_token FROM forgeyard.claim('t', 'jobs', 'w1', 1, '1 hour')")   # m1 in flight
e1=$(q "$src" "SELECT epoch FROM forgeyard.lease_acquire('t', 'res', 'w1', '1 hour')")
a1=$(q "$src" "SELECT attempt FROM forgeyard.idem_begin('t', 'run.create', 'k', '\x01', '1 hour', '1 day')")
q "$src" "SELECT forgeyard.idem_checkpoint('t', 'run.create', 'k', 'step-1', $a1)" >/dev/null
q "$src" "SELECT forgeyard.cas_update('public.items', '{\"id\": 1}', 1, '{\"name\": \"one-b\"}')" >/dev/null
q "$src" "SELECT forgeyard.audit_append('t', 'a', 'deploy', 'svc'); SELECT forgeyard.audit_append('t', 'a', 'scale', 'svc')" >/dev/null
check "$src" "a fresh database is not reported as restored" "(SELECT state = 'ok' FROM forgeyard.restore_status())"

pg_dump -Fc -d "$src" -f "$dump"          # the backup

# ---- after the backup: everything here is lost by the restore
q "$src" "SELECT forgeyard.lease_release('t', 'res', $e1)" >/dev/null
e2=$(q "$src" "SELECT epoch FROM forgeyard.lease_acquire('t', 'res', 'w2', '1 hour')")
m3=$(q "$src" "SELECT forgeyard.enqueue('t', 'jobs', '\x03')")
t2=$(q "$src" "SELECT string_agg(msg_id || ':' || claim_token, ' ' ORDER BY msg_id) FROM forgeyard.claim('t', 'jobs', 'w2', 5, '1 hour')")
q "$src" "SELECT forgeyard.idem_abandon('t', 'run.create', 'k', $a1)" >/dev/null
a2=$(q "$src" "SELECT attempt FROM forgeyard.idem_begin('t', 'run.create', 'k', '\x01', '1 hour', '1 day')")
q "$src" "SELECT forgeyard.cas_update('public.items', '{\"id\": 1}', 2, '{\"name\": \"one-c\"}')" >/dev/null
q "$src" "SELECT forgeyard.audit_append('t', 'a', 'rollback', 'svc'); SELECT forgeyard.audit_append('t', 'a', 'deploy', 'svc')" >/dev/null
anchor=$(q "$src" "SELECT jsonb_build_object('t', jsonb_build_object('seq', seq, 'hash', encode(hash, 'hex'))) FROM forgeyard.audit_head('t')")
# The highest value of each kind ever handed out in the lost period.
max_id=$(q "$src" "SELECT last_value FROM forgeyard.message_ids")
max_token=$(q "$src" "SELECT last_value FROM forgeyard.claim_tokens")
max_attempt=$(q "$src" "SELECT last_value FROM forgeyard.idempotency_attempts")
check "$src" "the lost period handed out a new epoch ($e2 > $e1), message $m3, tokens ($t2), attempt $a2" "$e2 > $e1 AND $m3 > $m2 AND $a2 > $a1"

# ---- restore the older dump into a fresh database
createdb "$dst"
pg_restore -d "$dst" "$dump"
check "$dst" "the restored database is reported as restored" "(SELECT state = 'restored' FROM forgeyard.restore_status())"
check "$dst" "the restored sequences rewound (the danger reconcile removes)" "(SELECT last_value < $max_token FROM forgeyard.claim_tokens)"

q "$dst" "CREATE TABLE public.drill_report AS SELECT * FROM forgeyard.restore_reconcile('$anchor')"
n() { echo "(SELECT count FROM public.drill_report WHERE kind = '$1')"; }
check "$dst" "reconcile reports the restore" "$(n restore_detected) = 1"
check "$dst" "reconcile expired the lease live at backup time" "$(n leases_expired) = 1"
check "$dst" "reconcile released the in-flight delivery" "$(n deliveries_released) = 1"
check "$dst" "reconcile unlocked the in-progress idempotency key" "$(n idempotency_unlocked) = 1"
check "$dst" "reconcile reports the cut tail against the later anchor" \
  "(SELECT tenant = 't' AND count = 4 AND detail LIKE 'events 3..4 were lost%' FROM public.drill_report WHERE kind = 'audit_tail_cut')"
check "$dst" "after reconcile the database is ok" "(SELECT state = 'ok' FROM forgeyard.restore_status())"

# Every epoch, token and attempt issued after the backup is refused.
refused "$dst" "the epoch granted after the backup cannot renew" FY001 "SELECT forgeyard.lease_renew('t', 'res', $e2, '1 hour')"
refused "$dst" "the epoch granted after the backup cannot fence" FY001 "SELECT forgeyard.lease_fence('t', 'res', $e2)"
refused "$dst" "the epoch live at backup time cannot renew" FY001 "SELECT forgeyard.lease_renew('t', 'res', $e1, '1 hour')"
for pair in $t2; do
  id=${pair%%:*}; token=${pair##*:}
  if [ "$id" -le "$m2" ]; then
    refused "$dst" "message $id: the claim token $token issued after the backup cannot ack" FY001 "SELECT forgeyard.ack('t', 'jobs', $id, $token)"
  fi
done
refused "$dst" "the restored in-flight claim token $t1 cannot ack" FY001 "SELECT forgeyard.ack('t', 'jobs', $m1, $t1)"
refused "$dst" "the attempt issued after the backup cannot complete" FY001 "SELECT forgeyard.idem_complete('t', 'run.create', 'k', '\x00', $a2)"
refused "$dst" "the attempt of the restored lock cannot complete" FY001 "SELECT forgeyard.idem_complete('t', 'run.create', 'k', '\x00', $a1)"
refused "$dst" "a write based on the lost version is a conflict" FY002 "SELECT forgeyard.cas_update('public.items', '{\"id\": 1}', 3, '{\"name\": \"x\"}')"

# Nothing is handed out twice; the restored in-flight message is delivered again.
e3=$(q "$dst" "SELECT epoch FROM forgeyard.lease_acquire('t', 'res', 'w3', '1 hour')")
check "$dst" "a new epoch passes every epoch of the lost period ($e3 > $e2)" "$e3 > $e2"
m4=$(q "$dst" "SELECT forgeyard.enqueue('t', 'jobs', '\x04')")
check "$dst" "a new message id passes every id of the lost period ($m4 > $max_id)" "$m4 > $max_id"
q "$dst" "CREATE TABLE public.drill_claim AS SELECT msg_id, claim_token, attempt FROM forgeyard.claim('t', 'jobs', 'w3', 10, '1 hour')"
check "$dst" "the restored in-flight message $m1 is delivered again (attempt 2)" "(SELECT attempt = 2 FROM public.drill_claim WHERE msg_id = $m1)"
check "$dst" "every new claim token passes every token of the lost period ($max_token)" "(SELECT bool_and(claim_token > $max_token) FROM public.drill_claim)"
q "$dst" "SELECT forgeyard.ack('t', 'jobs', msg_id, claim_token) FROM public.drill_claim WHERE msg_id = $m1" >/dev/null
check "$dst" "the new token acks the redelivered message" "NOT EXISTS (SELECT FROM forgeyard.messages WHERE msg_id = $m1 AND state = 'pending')"
check "$dst" "the key resumes from its recovery point with a new attempt above the lost ones ($max_attempt)" \
  "(SELECT status = 'started' AND recovery_point = 'step-1' AND attempt > $max_attempt FROM forgeyard.idem_begin('t', 'run.create', 'k', '\x01', '1 hour', '1 day'))"
check "$dst" "the audit chain verifies up to the backup" "(SELECT ok AND checked = 2 FROM forgeyard.audit_verify('t'))"
check "$dst" "the reconcile is in the operations audit chain" \
  "(SELECT action = 'storage.reconcile' AND (details->>'leases_expired')::int = 1 FROM forgeyard.audit_read('_forgeyard.operations'))"

# Idempotent: a second run (with the new work finished) changes nothing.
q "$dst" "SELECT forgeyard.lease_release('t', 'res', $e3); SELECT forgeyard.ack('t', 'jobs', msg_id, claim_token) FROM public.drill_claim WHERE msg_id <> $m1" >/dev/null
q "$dst" "SELECT forgeyard.idem_abandon('t', 'run.create', 'k')" >/dev/null
check "$dst" "a second reconcile finds nothing to change" \
  "(SELECT sum(count) = 0 FROM forgeyard.restore_reconcile() WHERE kind IN ('restore_detected', 'leases_expired', 'deliveries_released', 'idempotency_unlocked', 'audit_chains_failed'))"

# pg_restore --clean over the original database: same oid, same system; detected by the second install.
pg_restore --clean --if-exists -d "$src" "$dump"
check "$src" "pg_restore --clean into the original database is detected" "(SELECT state = 'restored' FROM forgeyard.restore_status())"
q "$src" "SELECT count(*) FROM forgeyard.restore_reconcile()" >/dev/null
check "$src" "and reconciled" "(SELECT state = 'ok' FROM forgeyard.restore_status())"
check "$src" "after which no claim token of the lost period comes again" \
  "(SELECT bool_and(claim_token > $max_token) FROM forgeyard.claim('t', 'jobs', 'w4', 10, '1 hour'))"

# Grants made during ALTER EXTENSION ... UPDATE are recorded as initial privileges, which pg_dump
# leaves out: after restoring a database updated from 0.4.0 the role has lost them, and reconcile
# grants them again from forgeyard.role_access.
upd=fy_drill_updated
upd_dst=fy_drill_updated_dst
dropdb --if-exists "$upd"; dropdb --if-exists "$upd_dst"
q postgres "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fy_drill_app') THEN CREATE ROLE fy_drill_app; END IF; END \$\$"
createdb "$upd"
q "$upd" "CREATE EXTENSION forgeyard VERSION '0.4.0'"
q "$upd" "SELECT forgeyard.grant_usage('fy_drill_app')" >/dev/null
q "$upd" "ALTER EXTENSION forgeyard UPDATE"
grant="has_function_privilege('fy_drill_app', 'forgeyard.lease_acquire(text,text,text,interval)', 'EXECUTE')"
check "$upd" "a role granted before ALTER EXTENSION UPDATE may call the API" "$grant"
pg_dump -Fc -d "$upd" -f "$CLUSTER_DIR/updated.dump"
createdb "$upd_dst"
pg_restore -d "$upd_dst" "$CLUSTER_DIR/updated.dump"
check "$upd_dst" "pg_dump left out the grants made during the update" "NOT $grant"
check "$upd_dst" "reconcile grants every recorded role its access again" \
  "(SELECT count = 1 FROM forgeyard.restore_reconcile() WHERE kind = 'access_reapplied') AND $grant"

dropdb "$src"; dropdb "$dst"; dropdb "$upd"; dropdb "$upd_dst"
q postgres "DROP ROLE fy_drill_app"
