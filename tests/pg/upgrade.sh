#!/usr/bin/env bash
# The upgrade chain: a database created at 0.1.0, with leases and access grants in it, is
# updated with ALTER EXTENSION forgeyard UPDATE. Its old state must survive, the new API must
# work (also for roles granted before the update), and its catalog (functions, tables, columns,
# indexes, constraints, views, grants, comments, config-dump and membership) must equal a fresh
# install of the new version. Runs against the cluster of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CLUSTER_DIR:?run through scripts/test.sh}"

old=fy_upgrade_old
new=fy_upgrade_new
q() { psql -X -q -v ON_ERROR_STOP=1 -At -d "$1" -c "$2"; }
check() {  # check DB DESCRIPTION CONDITION
  if [ "$(q "$1" "SELECT ($3)::text")" != "true" ]; then echo "FAIL: $2"; exit 1; fi
  echo "ok - $2"
}
cleanup() { dropdb --if-exists "$old"; dropdb --if-exists "$new"; q postgres "DROP ROLE IF EXISTS fy_upgrade_app" >/dev/null; }
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

createdb "$new"
q "$new" "CREATE EXTENSION forgeyard"
q "$new" "SELECT forgeyard.grant_usage('fy_upgrade_app')" >/dev/null
psql -X -q -At -v ON_ERROR_STOP=1 -d "$old" -f tests/pg/catalog.sql >"$CLUSTER_DIR/catalog-upgraded.txt"
psql -X -q -At -v ON_ERROR_STOP=1 -d "$new" -f tests/pg/catalog.sql >"$CLUSTER_DIR/catalog-fresh.txt"
if ! diff -u "$CLUSTER_DIR/catalog-fresh.txt" "$CLUSTER_DIR/catalog-upgraded.txt"; then
  echo "FAIL: the upgraded catalog differs from a fresh install (diff above: - fresh, + upgraded)"
  exit 1
fi
lines=$(wc -l <"$CLUSTER_DIR/catalog-fresh.txt")
[ "$lines" -gt 50 ] || { echo "FAIL: the catalog snapshot is suspiciously small ($lines lines)"; exit 1; }
echo "ok - the upgraded catalog equals a fresh install ($lines catalog lines compared)"
cleanup
