#!/usr/bin/env bash
# Neon compatibility, emulated (the seed's distributed mode runs on Neon): the PL/pgSQL edition,
# installed by a role that is not superuser, used through PgBouncer in transaction mode (unnamed
# statements) with a statement_timeout on the database, while the server restarts under the
# client (a compute scaled to zero and back). Every message whose send was acknowledged is there
# with its payload, and every send that failed failed with a kind docs/errors.md lists for a lost
# server (Unavailable, CommitUnknown, Timeout: exit 5, "later").
#   tests/pg/neon.sh BUILD_DIR      (BUILD_DIR holds the CLI; run by scripts/test.sh, whose
#                                    PgBouncer maps the database forgeyard_neon)
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CLUSTER_DIR:?run through scripts/test.sh}" "${FORGEYARD_TEST_PGBOUNCER_URL:?run through scripts/test.sh}"
cli=$(realpath "${1:?usage: tests/pg/neon.sh BUILD_DIR}/forgeyard")
source scripts/lib/cluster.sh
db=forgeyard_neon
out=$CLUSTER_DIR/neon
mkdir -p "$out"
q() { psql -X -q -v ON_ERROR_STOP=1 -At -d "$1" -c "$2"; }
q postgres "DROP DATABASE IF EXISTS $db WITH (FORCE)"
createdb -O fy_owner "$db"
q "$db" "ALTER DATABASE $db SET statement_timeout = '3s'"
# The bouncer's URL, for this database and the installing role.
bouncer=${FORGEYARD_TEST_PGBOUNCER_URL/postgres@\/forgeyard_test/fy_owner@\/$db}
fy() { "$cli" --store "$bouncer" --unnamed-statements "$@"; }
fy storage install --edition plpgsql >"$out/install.txt" 2>&1 || { cat "$out/install.txt"; exit 1; }
[ "$(q "$db" "SELECT forgeyard.edition() || ' ' || forgeyard.version()")" = "plpgsql $(cat VERSION)" ] ||
  { echo "FAIL: the install through PgBouncer"; exit 1; }
echo "ok - storage install of the PL/pgSQL edition by a role that is not superuser, through PgBouncer in transaction mode"
fy queue create t q >/dev/null
started=$(q "$db" "SELECT pg_postmaster_start_time()")
acked=0 failed=0 restarted=0
: >"$out/acked.txt"
for i in $(seq 1 80); do
  if [ "$i" = 25 ]; then
    cluster_pg_ctl restart -m immediate >/dev/null 2>&1 &
    restart=$!
  fi
  rc=0
  fy queue send t q "m$i" >"$out/send.out" 2>"$out/send.err" || rc=$?
  if [ "$rc" = 0 ]; then
    echo "$(sed -n 's/^msg_id=//p' "$out/send.out") m$i" >>"$out/acked.txt"
    acked=$((acked + 1))
    [ "$i" -gt 25 ] && restarted=$((restarted + 1))
  else
    failed=$((failed + 1))
    if [ "$rc" != 5 ] || ! grep -qE '\[(Unavailable|CommitUnknown|Timeout), SQLSTATE' "$out/send.err"; then
      echo "FAIL: send $i failed with exit $rc and an error the docs do not list for a lost server:"
      cat "$out/send.err"; exit 1
    fi
  fi
  sleep 0.05
done
wait "$restart" || { echo "FAIL: the server did not restart"; exit 1; }
[ "$(q "$db" "SELECT pg_postmaster_start_time() > '$started'")" = t ] || { echo "FAIL: the server did not restart"; exit 1; }
[ "$restarted" -gt 0 ] || { echo "FAIL: no send was acknowledged after the restart"; exit 1; }
while read -r id payload; do
  [ "$(q "$db" "SELECT encode(payload, 'escape') FROM forgeyard.messages WHERE msg_id = $id")" = "$payload" ] ||
    { echo "FAIL: acknowledged message $id ($payload) is not in the queue"; exit 1; }
done <"$out/acked.txt"
echo "ok - a restart under the client: $acked sends acknowledged, every one kept; $failed failed, each Unavailable, CommitUnknown or Timeout (exit 5)"
# (PgBouncer keeps a server connection to it)
q postgres "DROP DATABASE $db WITH (FORCE)"
