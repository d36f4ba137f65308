#!/usr/bin/env bash
# The two editions and the ways in (docs/operations.md, "Installing forgeyard"):
#   tests/pg/editions.sh BUILD_DIR      (BUILD_DIR holds the CLI, `forgeyard`)
# - `storage install --edition plpgsql` by fy_owner, a role that is neither superuser nor owner of
#   anything but its database: the PL/pgSQL edition, no function of it in C, forgeyard.edition()
#   and forgeyard.version() say so; run again it changes nothing; two installers at once: one
#   installs, the other finds nothing to do.
# - Its catalog equals the C++ edition's (CREATE EXTENSION) object by object, but for what makes an
#   edition: each function's language and body, the extension's own records, owners.
# - `--print plpgsql | psql -f` gives the same catalog, and is safe to run again.
# - Refusals change nothing: a role without CREATE on the database (42501, naming the privilege),
#   a database holding the other edition (42710, both ways), a database at a newer version (22023).
# - `--print pg_tle` keeps pg_tle's rules: no transaction control or psql meta-command in the
#   extension scripts it registers, no $_pgtle_ quote.
# - pg_dump / pg_restore of a plain install by its owner alone.
# - The upgrade in place: a plain install of the released 0.8.0 (sql/plpgsql/plain--0.8.0.sql) with
#   messages ready, in flight, delayed and dead is brought to this version by storage install; its
#   catalog then equals a fresh install's, bodies included, and the claim taken before is acked.
# Runs against the cluster of scripts/test.sh (libpq's environment names it).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CLUSTER_DIR:?run through scripts/test.sh}"
build=${1:?usage: tests/pg/editions.sh BUILD_DIR}
cli=$(realpath "$build/forgeyard")
out=$CLUSTER_DIR/editions
mkdir -p "$out"
owner=fy_owner
dbs=(fy_ed_cpp fy_ed_cpp2 fy_ed_pl fy_ed_psql fy_ed_twice fy_ed_nocreate fy_ed_restored fy_ed_switched fy_ed_upgraded)

q() { psql -X -q -v ON_ERROR_STOP=1 -At -d "$1" -c "$2"; }
check() {  # check DB DESCRIPTION CONDITION
  if [ "$(q "$1" "SELECT ($3)::text")" != "true" ]; then echo "FAIL: $2"; exit 1; fi
  echo "ok - $2"
}
url() {  # url DB [ROLE]
  echo "postgresql://${2:-$owner}@/$1?host=$PGHOST&port=$PGPORT"
}
refused() {  # refused DESCRIPTION EXIT TEXT COMMAND...: exits EXIT (4: refused), TEXT on stderr
  local what=$1 code=$2 expect=$3 rc=0
  shift 3
  "$@" >"$out/refused.out" 2>"$out/refused.err" || rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -q -- "$expect" "$out/refused.err"; then
    echo "FAIL: $what: exit $rc, stderr:"; cat "$out/refused.err"; exit 1
  fi
  [ ! -s "$out/refused.out" ] || { echo "FAIL: $what printed on stdout:"; cat "$out/refused.out"; exit 1; }
  echo "ok - $what (exit $rc)"
}
cleanup() {
  for db in "${dbs[@]}"; do dropdb --if-exists "$db"; done
  q postgres "DROP ROLE IF EXISTS fy_ed_nocreate"
}
catalog() {  # catalog DB OUT: the catalog without what differs between editions by design
  psql -X -q -At -v ON_ERROR_STOP=1 -d "$1" -f tests/pg/catalog.sql |
    awk -v owner="$2" '
      # Each function: its declaration lines up to LANGUAGE, and the lines after it up to the body.
      { sub(/ owner=[^ ]*/, " owner=OWNER"); gsub(owner, "OWNER"); gsub(/postgres/, "OWNER") }
      /^function / {
        if (!match($0, /\) [0-9][0-9][0-9] /)) { print; next }
        key = substr($0, 1, RSTART); n = substr($0, RSTART + 2, 3)
        if (n == "001") { inbody[key] = 0 }
        if (inbody[key]) next
        if ($0 ~ / LANGUAGE /) next
        if ($0 ~ / AS /) { inbody[key] = 1; next }
      }
      /^(extension|member|config-dump|init-privs|comment extension) / { next }
      /^depend / && /extension forgeyard/ { next }
      { print }' | sort >"$3"
}
cleanup
psql -X -q -v ON_ERROR_STOP=1 -d postgres >/dev/null <<SQL
SELECT 'CREATE ROLE $owner LOGIN NOSUPERUSER CREATEDB CREATEROLE'
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$owner') \gexec
CREATE ROLE fy_ed_nocreate LOGIN NOSUPERUSER;
SQL
for db in fy_ed_pl fy_ed_psql fy_ed_twice fy_ed_nocreate; do createdb -O "$owner" "$db"; done
createdb fy_ed_cpp

# The plain install by the database owner, who is not superuser.
check postgres "fy_owner is not superuser" "NOT (SELECT rolsuper FROM pg_roles WHERE rolname = '$owner')"
"$cli" --store "$(url fy_ed_pl)" storage install --edition plpgsql --json >"$out/install.json" 2>"$out/install.err"
grep -q '"edition": "plpgsql", "from_version": "", "version": "'"$(cat VERSION)"'", "action": "installed"' "$out/install.json" ||
  { echo "FAIL: storage install --json printed:"; cat "$out/install.json"; exit 1; }
grep -q "forgeyard: installing forgeyard $(cat VERSION) (PL/pgSQL edition)" "$out/install.err" ||
  { echo "FAIL: no progress line on stderr:"; cat "$out/install.err"; exit 1; }
echo "ok - storage install --edition plpgsql by the database owner installs $(cat VERSION), progress on stderr"
check fy_ed_pl "edition() and version() name the PL/pgSQL edition and its version" \
  "forgeyard.edition() = 'plpgsql' AND forgeyard.version() = '$(cat VERSION)'"
check fy_ed_pl "no function of the PL/pgSQL edition is written in C, and none names a library" \
  "NOT EXISTS (SELECT FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
                WHERE p.pronamespace IN ('forgeyard'::regnamespace, 'forgeyard_pl'::regnamespace)
                  AND (l.lanname NOT IN ('plpgsql', 'sql') OR p.probin IS NOT NULL))
   AND NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'forgeyard')"
# The scripts create functions with check_function_bodies off (sql/generate.py): every body must
# compile now that all is there.
check fy_ed_pl "every function body of the PL/pgSQL edition compiles (its language's validator)" \
  "(SELECT count(*) > 150 FROM (
      SELECT CASE l.lanname WHEN 'plpgsql' THEN plpgsql_validator(p.oid)::text ELSE fmgr_sql_validator(p.oid)::text END
        FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
       WHERE p.pronamespace IN ('forgeyard'::regnamespace, 'forgeyard_pl'::regnamespace)) v)"
check fy_ed_pl "every object of the schemas belongs to the database owner" \
  "NOT EXISTS (SELECT FROM pg_class WHERE relnamespace = 'forgeyard'::regnamespace AND relowner <> '$owner'::regrole)
   AND NOT EXISTS (SELECT FROM pg_proc WHERE pronamespace = 'forgeyard'::regnamespace AND proowner <> '$owner'::regrole)"
"$cli" --store "$(url fy_ed_pl)" storage install --edition plpgsql >"$out/again.txt" 2>/dev/null
grep -q '^action=unchanged$' "$out/again.txt" && grep -q '^steps=$' "$out/again.txt" ||
  { echo "FAIL: a second install changed something:"; cat "$out/again.txt"; exit 1; }
check fy_ed_pl "run again, storage install records no second install" "(SELECT count(*) = 1 FROM forgeyard_pl.installs)"

# Two installers at once into one empty database: one installs, the other waits for its lock and
# then finds nothing to do.
# The lock is held first, so both are running before either can start.
psql -X -q -d fy_ed_twice -c "SELECT pg_advisory_lock(28839325086085748), pg_sleep(3)" >/dev/null &
holder=$!
sleep 0.5
"$cli" --store "$(url fy_ed_twice)" storage install --edition plpgsql >"$out/twice-1.txt" 2>/dev/null &
first=$!
"$cli" --store "$(url fy_ed_twice)" storage install --edition plpgsql >"$out/twice-2.txt" 2>/dev/null &
second=$!
sleep 1.5
[ "$(q fy_ed_twice "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")" = 2 ] ||
  { echo "FAIL: the two installers do not both wait for the install lock"; exit 1; }
wait "$holder" "$second"
wait "$first"
actions=$(cat "$out/twice-1.txt" "$out/twice-2.txt" | grep '^action=' | sort | tr '\n' ' ')
[ "$actions" = "action=installed action=unchanged " ] ||
  { echo "FAIL: two installers at once: $actions"; cat "$out"/twice-*.txt; exit 1; }
check fy_ed_twice "two installers at once: one install, recorded once" "(SELECT count(*) = 1 FROM forgeyard_pl.installs)"
echo "ok - two installers at once: one installs, the other finds nothing to do"

# The same script through psql, by the owner; safe to run again.
"$cli" storage install --print plpgsql >"$out/plpgsql.sql"
psql -X -q -v ON_ERROR_STOP=1 -U "$owner" -d fy_ed_psql -f "$out/plpgsql.sql" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -U "$owner" -d fy_ed_psql -f "$out/plpgsql.sql" >/dev/null
check fy_ed_psql "--print plpgsql through psql, twice: installed once" \
  "forgeyard.edition() = 'plpgsql' AND (SELECT count(*) = 1 FROM forgeyard_pl.installs)"

# One catalog: the C++ edition's fresh install and the PL/pgSQL edition's, object by object.
q fy_ed_cpp "CREATE EXTENSION forgeyard"
catalog fy_ed_cpp postgres "$out/cpp.txt"
catalog fy_ed_pl "$owner" "$out/plpgsql.txt"
catalog fy_ed_psql "$owner" "$out/psql.txt"
grep -v '^schema forgeyard_pl\|forgeyard_pl\.' "$out/plpgsql.txt" >"$out/plpgsql-api.txt" || true
[ "$(wc -l <"$out/cpp.txt")" -gt 1000 ] || { echo "FAIL: the catalog snapshot is suspiciously small"; exit 1; }
diff -u "$out/cpp.txt" "$out/plpgsql-api.txt" || { echo "FAIL: the editions' catalogs differ (diff above)"; exit 1; }
echo "ok - the two editions' catalogs are equal but for languages, bodies and ownership ($(wc -l <"$out/cpp.txt") lines)"
diff -u "$out/plpgsql.txt" "$out/psql.txt" || { echo "FAIL: psql -f and storage install give other catalogs"; exit 1; }
echo "ok - psql -f of --print plpgsql and storage install give the same catalog"

q fy_ed_pl "SELECT forgeyard.grant_usage('fy_ed_nocreate')" >/dev/null
check fy_ed_pl "the edition's internal schema is closed: no USAGE and no EXECUTE for PUBLIC, nothing for a granted role" \
  "NOT has_schema_privilege('public', 'forgeyard_pl', 'USAGE')
   AND NOT EXISTS (SELECT FROM pg_proc p WHERE p.pronamespace = 'forgeyard_pl'::regnamespace
                    AND (has_function_privilege('public', p.oid, 'EXECUTE')
                         OR has_function_privilege('fy_ed_nocreate', p.oid, 'EXECUTE')))
   AND NOT has_table_privilege('fy_ed_nocreate', 'forgeyard_pl.installs', 'SELECT')"

# The test clock without the library: forgeyard.now_override is a placeholder any role may set, and
# moves forgeyard.now() only for the installation's owner and superusers, never for another login.
q fy_ed_pl "SELECT forgeyard.grant_usage('fy_ed_nocreate')" >/dev/null
[ "$(psql -X -q -At -U fy_ed_nocreate -d fy_ed_pl -c "SET forgeyard.now_override = '2001-01-01 00:00:00+00'" \
      -c "SELECT forgeyard.now() > '2020-01-01' AND expires_at > '2020-01-01' FROM forgeyard.lease_acquire('t', 'clock', 'w', '1 minute')")" = t ] ||
  { echo "FAIL: a login that is not superuser moved the PL/pgSQL edition's clock"; exit 1; }
echo "ok - a login that is neither superuser nor owner sets forgeyard.now_override: its clock and lease expiry do not move"
[ "$(psql -X -q -At -U "$owner" -d fy_ed_pl -c "SET forgeyard.now_override = '2001-01-01 00:00:00+00'" \
      -c "SELECT forgeyard.now() = '2001-01-01 00:00:00+00'")" = t ] ||
  { echo "FAIL: the installation's owner cannot move the PL/pgSQL edition's clock"; exit 1; }
echo "ok - the installation's owner moves its clock with forgeyard.now_override"

# One audit chain for both editions: the same events hash alike; a chain written by either verifies
# under the other (its rows copied over) and under the offline verifier (audit export, verify --file).
for db in fy_ed_cpp fy_ed_pl; do
  q "$db" "SET forgeyard.now_override = '2031-02-03 04:05:06.789+00';
           SELECT forgeyard.audit_append('t', 'actor ü', 'act', 'res', '{\"b\": [1, 2.50, \"x\\u0001\"], \"a\": null, \"é\": {}}',
                                         '\\x00ff', 'ref', '2030-01-01 00:00:00.5+00', '6f1d2c3b-4a59-4e68-9a7b-8c9d0e1f2a3b');
           SELECT forgeyard.audit_append_batch('t', '{a,b}', '{x,y}', '{r,s}', ARRAY['{\"n\": [1e3, -0.0]}', '{\"s\": \"t\"}']::jsonb[],
                                               event_ids => '{7a1d2c3b-4a59-4e68-9a7b-8c9d0e1f2a3b,8b1d2c3b-4a59-4e68-9a7b-8c9d0e1f2a3b}')" >/dev/null
  "$cli" --store "$(url "$db" postgres)" audit export t >"$out/audit-$db.jsonl"
  "$cli" audit verify --file "$out/audit-$db.jsonl" >"$out/audit-verify-$db.txt" ||
    { echo "FAIL: the offline verifier refuses the chain $db wrote:"; cat "$out/audit-verify-$db.txt"; exit 1; }
done
[ "$(q fy_ed_cpp "SELECT encode(hash, 'hex') FROM forgeyard.audit_head('t')")" = \
  "$(q fy_ed_pl "SELECT encode(hash, 'hex') FROM forgeyard.audit_head('t')")" ] ||
  { echo "FAIL: the same events hash otherwise in the two editions"; exit 1; }
echo "ok - the same audit events give the same chain in both editions, and the offline verifier accepts both"
# (into databases without tenant t: the tenant is part of each hashed event)
createdb fy_ed_cpp2
q fy_ed_cpp2 "CREATE EXTENSION forgeyard"
for pair in "fy_ed_cpp fy_ed_psql" "fy_ed_pl fy_ed_cpp2"; do
  read -r from to <<<"$pair"
  for table in audit_events audit_heads; do
    psql -X -q -v ON_ERROR_STOP=1 -d "$from" -c "COPY (SELECT * FROM forgeyard.$table WHERE tenant_id = 't') TO STDOUT" |
      psql -X -q -v ON_ERROR_STOP=1 -d "$to" -c "COPY forgeyard.$table FROM STDIN"
  done
  check "$to" "a chain written by the $(q "$from" "SELECT forgeyard.edition()") edition verifies in the $(q "$to" "SELECT forgeyard.edition()") edition" \
    "(SELECT ok AND checked = 3 FROM forgeyard.audit_verify('t'))"
done
dropdb fy_ed_cpp2

# Switching editions (docs/operations.md, "Switching editions"): every row goes through a SQLite
# file with storage copy into a new database of the other edition, which then holds the same leases
# and epochs, queues and messages, and audit chain.
q fy_ed_cpp "SELECT forgeyard.lease_acquire('sw', 'r', 'w', '1 hour');
             SELECT forgeyard.queue_create('sw', 'q'); SELECT forgeyard.enqueue('sw', 'q', 'one');
             SELECT forgeyard.enqueue('sw', 'q', 'two')" >/dev/null
rm -f "$out/switch.db"
"$cli" --store "$(url fy_ed_cpp postgres)" storage copy --to "sqlite://$out/switch.db" >/dev/null 2>&1 ||
  { echo "FAIL: storage copy of the C++ edition's store to SQLite"; exit 1; }
createdb -O "$owner" fy_ed_switched
"$cli" --store "$(url fy_ed_switched)" storage install --edition plpgsql >/dev/null 2>&1
"$cli" --store "sqlite://$out/switch.db" storage copy --to "$(url fy_ed_switched postgres)" >/dev/null 2>"$out/switch.err" ||
  { echo "FAIL: storage copy into the PL/pgSQL edition:"; cat "$out/switch.err"; exit 1; }
for sql in "SELECT epoch FROM forgeyard.lease_get('sw', 'r')" \
           "SELECT string_agg(encode(payload, 'escape'), ',' ORDER BY msg_id) FROM forgeyard.messages WHERE tenant_id = 'sw'" \
           "SELECT encode(hash, 'hex') FROM forgeyard.audit_head('t')"; do
  [ "$(q fy_ed_cpp "$sql")" = "$(q fy_ed_switched "$sql")" ] ||
    { echo "FAIL: after switching editions, $sql differs"; exit 1; }
done
check fy_ed_switched "switched to the PL/pgSQL edition: every lease, message and audit event kept, the chain verifies" \
  "forgeyard.edition() = 'plpgsql' AND (SELECT ok FROM forgeyard.audit_verify('t'))
   AND (SELECT count(*) = 2 FROM forgeyard.claim('sw', 'q', 'c', 10))"
dropdb fy_ed_switched

# Refusals, each changing nothing.
refused "a role without CREATE on the database is refused, naming the privilege" 4 "needs the CREATE privilege on database .* SQLSTATE 42501" \
  "$cli" --store "$(url fy_ed_nocreate fy_ed_nocreate)" storage install --edition plpgsql
check fy_ed_nocreate "nothing was created" "to_regnamespace('forgeyard') IS NULL AND to_regnamespace('forgeyard_pl') IS NULL"
refused "the PL/pgSQL edition does not go over the C++ edition" 4 "installed in this database as the cpp edition.*SQLSTATE 42710" \
  "$cli" --store "$(url fy_ed_cpp postgres)" storage install --edition plpgsql
refused "the C++ edition does not go over the PL/pgSQL edition" 4 "installed in this database as the plpgsql edition.*SQLSTATE 42710" \
  "$cli" --store "$(url fy_ed_pl)" storage install --edition cpp
refused "psql -f of the plain script refuses a database holding the C++ edition" 3 "installed in this database as an extension" \
  psql -X -q -v ON_ERROR_STOP=1 -d fy_ed_cpp -f "$out/plpgsql.sql"
check fy_ed_cpp "the C++ edition is left as it was" "forgeyard.edition() = 'cpp' AND to_regnamespace('forgeyard_pl') IS NULL"
q fy_ed_pl "INSERT INTO forgeyard_pl.installs (version) VALUES ('99.0.0')"
refused "a database at a newer version is refused" 4 "newer than this script.*SQLSTATE 22023" \
  "$cli" --store "$(url fy_ed_pl)" storage install --edition plpgsql
check fy_ed_pl "and kept as it was" "forgeyard.version() = '99.0.0'"
q fy_ed_pl "DELETE FROM forgeyard_pl.installs WHERE version = '99.0.0'"
refused "a SQLite store is refused" 4 "storage install is for PostgreSQL" \
  "$cli" --store "sqlite://$out/none.db" storage install
[ ! -e "$out/none.db" ] || { echo "FAIL: storage install created a SQLite file"; exit 1; }

# pg_tle's rules for the scripts it registers.
"$cli" storage install --print pg_tle >"$out/pg_tle.sql"
awk '/\$fy_tle\$/ { n = gsub(/\$fy_tle\$/, "&"); inside = (inside + n) % 2; next } inside' "$out/pg_tle.sql" >"$out/pg_tle-ext.sql"
[ "$(wc -l <"$out/pg_tle-ext.sql")" -gt 1000 ] || { echo "FAIL: --print pg_tle holds no extension script"; exit 1; }
if grep -nE '^\s*(BEGIN|COMMIT|ROLLBACK|START TRANSACTION)\s*;|^\\|\$_pgtle_' "$out/pg_tle-ext.sql"; then
  echo "FAIL: the pg_tle extension script holds transaction control, a psql meta-command or a \$_pgtle_ quote"; exit 1
fi
grep -q "pgtle.install_extension('forgeyard', '$(cat VERSION)'" "$out/pg_tle.sql" &&
  grep -q "pgtle.set_default_version('forgeyard', '$(cat VERSION)')" "$out/pg_tle.sql" ||
  { echo "FAIL: --print pg_tle does not register $(cat VERSION)"; exit 1; }
echo "ok - --print pg_tle registers $(cat VERSION) with no transaction control, meta-command or \$_pgtle_ quote"

# The upgrade in place, from the released 0.8.0: messages ready, in flight (a claim held across the
# upgrade), delayed and dead.
createdb -O "$owner" fy_ed_upgraded
psql -X -q -v ON_ERROR_STOP=1 -U "$owner" -d fy_ed_upgraded -f sql/plpgsql/plain--0.8.0.sql >/dev/null
check fy_ed_upgraded "the released 0.8.0 script installs the PL/pgSQL edition at 0.8.0" \
  "forgeyard.edition() = 'plpgsql' AND forgeyard.version() = '0.8.0'"
pq() { psql -X -q -v ON_ERROR_STOP=1 -At -U "$owner" -d fy_ed_upgraded -c "$1"; }
pq "SELECT forgeyard.queue_create('t', 'q', '{\"max_attempts\": 1}')" >/dev/null
pq "SELECT forgeyard.enqueue('t', 'q', 'held'); SELECT forgeyard.enqueue('t', 'q', 'dead')" >/dev/null
held=$(pq "SELECT msg_id || ' ' || claim_token FROM forgeyard.claim('t', 'q', 'c', 1, '1 hour')")
[ -n "$held" ] || { echo "FAIL: nothing to claim on 0.8.0"; exit 1; }
pq "SELECT forgeyard.nack('t', 'q', msg_id, claim_token, 'boom') FROM forgeyard.claim('t', 'q', 'c', 1)" >/dev/null
pq "SELECT forgeyard.enqueue('t', 'q', 'ready'); SELECT forgeyard.enqueue('t', 'q', 'later', delay => '1 hour')" >/dev/null
"$cli" --store "$(url fy_ed_upgraded)" storage install --edition plpgsql --json >"$out/upgrade.json" 2>"$out/upgrade.err"
grep -q '"edition": "plpgsql", "from_version": "0.8.0", "version": "'"$(cat VERSION)"'", "action": "upgraded"' "$out/upgrade.json" ||
  { echo "FAIL: storage install did not upgrade 0.8.0:"; cat "$out/upgrade.json" "$out/upgrade.err"; exit 1; }
echo "ok - storage install --edition plpgsql upgrades the released 0.8.0 in place to $(cat VERSION)"
fullcat() {  # fullcat DB OUT: the whole catalog, bodies included, owners and install records apart
  psql -X -q -At -v ON_ERROR_STOP=1 -d "$1" -f tests/pg/catalog.sql |
    awk -v owner="$owner" '{ sub(/ owner=[^ ]*/, " owner=OWNER"); gsub(owner, "OWNER"); print }' | sort >"$2"
}
helpers() {  # helpers DB: the PL/pgSQL edition's own functions (schema forgeyard_pl), whole
  psql -X -q -At -v ON_ERROR_STOP=1 -d "$1" -c "SELECT p.oid::regprocedure::text || E'\n' || pg_get_functiondef(p.oid)
      FROM pg_proc p WHERE p.pronamespace = 'forgeyard_pl'::regnamespace ORDER BY 1"
}
fullcat fy_ed_psql "$out/fresh-full.txt"
fullcat fy_ed_upgraded "$out/upgraded-full.txt"
helpers fy_ed_psql >>"$out/fresh-full.txt"
helpers fy_ed_upgraded >>"$out/upgraded-full.txt"
[ "$(grep -c 'forgeyard_pl\.' "$out/fresh-full.txt")" -gt 10 ] || { echo "FAIL: no helper compared"; exit 1; }
diff -u "$out/fresh-full.txt" "$out/upgraded-full.txt" || { echo "FAIL: the upgraded catalog differs from a fresh install's (diff above)"; exit 1; }
echo "ok - the upgraded plain install's catalog and helpers equal a fresh one's, bodies included ($(wc -l <"$out/fresh-full.txt") lines)"
check fy_ed_upgraded "the messages come through: 1 ready, 1 in flight, 1 delayed, 1 dead" \
  "(SELECT ready = 1 AND in_flight = 1 AND delayed = 1 AND dead = 1 FROM forgeyard.queue_stats('t', 'q'))"
pq "SELECT forgeyard.ack('t', 'q', ${held% *}, ${held#* })" >/dev/null
check fy_ed_upgraded "the claim taken before the upgrade is acked after it; the ready message is claimed" \
  "(SELECT in_flight = 0 FROM forgeyard.queue_stats('t', 'q'))
   AND (SELECT payload = 'ready' FROM forgeyard.claim('t', 'q', 'c'))"
pq "SELECT forgeyard.maintain()" >/dev/null
pq "SELECT forgeyard.enqueue('t', 'q', 'after')" >/dev/null
check fy_ed_upgraded "maintain() gives the upgraded queue its ready lanes; a message enqueued after is listed and claimed" \
  "(SELECT lanes IS NOT NULL FROM forgeyard.queues WHERE queue = 'q')
   AND (SELECT ready_pos IS NOT NULL FROM forgeyard.messages WHERE payload = 'after')
   AND (SELECT payload = 'after' FROM forgeyard.claim('t', 'q', 'c'))"

# pg_dump / pg_restore of a plain install, by its owner alone.
q fy_ed_pl "SELECT forgeyard.grant_usage('$owner')" >/dev/null
pg_dump -Fc -U "$owner" -d fy_ed_pl -f "$out/plain.dump"
createdb -O "$owner" fy_ed_restored
pg_restore -U "$owner" -d fy_ed_restored --exit-on-error "$out/plain.dump"
check fy_ed_restored "pg_restore by the owner: the edition, its version and its records come back" \
  "forgeyard.edition() = 'plpgsql' AND forgeyard.version() = '$(cat VERSION)'
   AND (SELECT count(*) = 1 FROM forgeyard.role_access WHERE role_id = '$owner'::regrole)"
catalog fy_ed_restored "$owner" "$out/restored.txt"
diff -u "$out/plpgsql.txt" "$out/restored.txt" >"$out/restored.diff" || true
grep -E '^[-+][a-z]' "$out/restored.diff" | grep -vE '^[-+](grant|acl|view) ' >"$out/restored-other.diff" || true
[ ! -s "$out/restored-other.diff" ] || { cat "$out/restored-other.diff"; echo "FAIL: the restored catalog differs"; exit 1; }
echo "ok - the restored plain install has the catalog it was dumped with (views as pg_dump deparses them)"
cleanup
