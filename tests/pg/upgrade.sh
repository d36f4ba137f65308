#!/usr/bin/env bash
# The upgrade chain: a database created at 0.1.0, with leases and access grants in it, and one
# created at the previous version (0.3.0) with a queue holding a message, are each updated with
# ALTER EXTENSION forgeyard UPDATE. Its old state must survive, the new API must
# work (also for roles granted before the update), and its catalog (functions, tables, columns,
# indexes, constraints, views, grants, comments, config-dump and membership) must equal a fresh
# install of the new version. Last, the audit log refuses a database that is not UTF8.
# Runs against the cluster of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CLUSTER_DIR:?run through scripts/test.sh}"

old=fy_upgrade_old
prev=fy_upgrade_prev
new=fy_upgrade_new
q() { psql -X -q -v ON_ERROR_STOP=1 -At -d "$1" -c "$2"; }
check() {  # check DB DESCRIPTION CONDITION
  if [ "$(q "$1" "SELECT ($3)::text")" != "true" ]; then echo "FAIL: $2"; exit 1; fi
  echo "ok - $2"
}
cleanup() { dropdb --if-exists "$old"; dropdb --if-exists "$prev"; dropdb --if-exists "$new"; dropdb --if-exists fy_latin1; q postgres "DROP ROLE IF EXISTS fy_upgrade_app" >/dev/null; }
cleanup

q postgres "CREATE ROLE fy_upgrade_app"
createdb "$old"
q "$old" "CREATE EXTENSION forgeyard VERSION '0.1.0'"
q "$old" "SELECT forgeyard.grant_usage('fy_upgrade_app')" >/dev/null
epoch=$(q "$old" "SELECT epoch FROM forgeyard.lease_acquire('t', 'r', 'a', '1 hour')")
check "$old" "starts at 0.1.0" "(SELECT extversion = '0.1.0' FROM pg_extension WHERE extname = 'forgeyard')"

q "$old" "ALTER EXTENSION forgeyard UPDATE"
latest=$(sed -n "s/^default_version = '\(.*\)'/\1/p" extension/forgeyard.control)
check "$old" "updated to the default version $latest" "(SELECT extversion = '$latest' FROM pg_extension WHERE extname = 'forgeyard')"
check "$old" "the lease taken before the update is still live with its epoch" \
  "(SELECT epoch = $epoch AND state = 'live' FROM forgeyard.lease_get('t', 'r'))"
check "$old" "a role granted before the update can call the new API" \
  "has_function_privilege('fy_upgrade_app', 'forgeyard.idem_begin(text,text,text,bytea,interval,interval)', 'EXECUTE')"
check "$old" "the new API works" \
  "(SELECT status = 'started' FROM forgeyard.idem_begin('t', 'scope', 'k', '\\x01'))"

# From the previous version: a queue's message survives, the audit log arrives append-only.
createdb "$prev"
q "$prev" "CREATE EXTENSION forgeyard VERSION '0.3.0'"
q "$prev" "SELECT forgeyard.grant_usage('fy_upgrade_app')" >/dev/null
q "$prev" "SELECT forgeyard.queue_create('t', 'q')" >/dev/null
q "$prev" "SELECT forgeyard.enqueue('t', 'q', 'kept')" >/dev/null
q "$prev" "ALTER EXTENSION forgeyard UPDATE"
check "$prev" "0.3.0 updated to $latest" "(SELECT extversion = '$latest' FROM pg_extension WHERE extname = 'forgeyard')"
check "$prev" "the message enqueued before the update is delivered after it" \
  "(SELECT payload = 'kept' FROM forgeyard.claim('t', 'q', 'c'))"
check "$prev" "a role granted before the update can append audit events" \
  "has_function_privilege('fy_upgrade_app', 'forgeyard.audit_append(text,text,text,text,jsonb,bytea,text,timestamptz,uuid)', 'EXECUTE')"
check "$prev" "the audit chain starts at seq 1 and verifies" \
  "(SELECT seq = 1 FROM forgeyard.audit_append('t', 'a', 'upgrade', 'r')) AND (SELECT ok FROM forgeyard.audit_verify('t'))"
check "$prev" "the audit log is append-only after the update" \
  "(SELECT count(*) = 2 FROM pg_trigger WHERE tgrelid = 'forgeyard.audit_events'::regclass AND tgenabled = 'A')"

createdb "$new"
q "$new" "CREATE EXTENSION forgeyard"
q "$new" "SELECT forgeyard.grant_usage('fy_upgrade_app')" >/dev/null
psql -X -q -At -v ON_ERROR_STOP=1 -d "$new" -f tests/pg/catalog.sql >"$CLUSTER_DIR/catalog-fresh.txt"
lines=$(wc -l <"$CLUSTER_DIR/catalog-fresh.txt")
[ "$lines" -gt 50 ] || { echo "FAIL: the catalog snapshot is suspiciously small ($lines lines)"; exit 1; }
for db in "$old" "$prev"; do
  psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" -f tests/pg/catalog.sql >"$CLUSTER_DIR/catalog-upgraded.txt"
  if ! diff -u "$CLUSTER_DIR/catalog-fresh.txt" "$CLUSTER_DIR/catalog-upgraded.txt"; then
    echo "FAIL: the catalog of $db after the update differs from a fresh install (diff above: - fresh, + upgraded)"
    exit 1
  fi
  echo "ok - $db: the upgraded catalog equals a fresh install ($lines catalog lines compared)"
done
# A database that is not UTF8 installs the extension, but its audit log refuses to work: the chain
# hashes UTF-8 text, and another encoding would hash the same event otherwise.
createdb -E LATIN1 --locale=C -T template0 fy_latin1
q fy_latin1 "CREATE EXTENSION forgeyard"
check fy_latin1 "leases work in a LATIN1 database" "(SELECT acquired FROM forgeyard.lease_acquire('t', 'r', 'a', '1 min'))"
state=$(psql -X -q -At -v VERBOSITY=verbose -d fy_latin1 -c "SELECT forgeyard.audit_append('t', 'a', 'b', 'c')" 2>&1 |
        grep -c "0A000: the audit log needs a database with UTF8 encoding" || true)
[ "$state" = 1 ] || { echo "FAIL: audit_append in a LATIN1 database must refuse with 0A000 'the audit log needs a database with UTF8 encoding'"; exit 1; }
echo "ok - the audit log refuses a LATIN1 database (0A000) and appends nothing"
check fy_latin1 "nothing was appended there" "NOT EXISTS (SELECT FROM forgeyard.audit_events) AND NOT EXISTS (SELECT FROM forgeyard.audit_heads)"

cleanup
