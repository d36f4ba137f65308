#!/usr/bin/env bash
# The pg_tle way in (docs/operations.md, "The PL/pgSQL edition through pg_tle"), checked against a
# real pg_tle. pg_tle is not a Debian package and this machine may not reach the network, so this
# check is not in the test command: run it by hand with pg_tle's source tree.
#   tests/pg/pg_tle.sh PG_TLE_SOURCE_DIR BUILD_DIR
# (apt-get install flex bison libkrb5-dev first; BUILD_DIR holds the CLI, `forgeyard`.)
# pg_tle refuses an extension name whose control file the server has, and this machine's
# PostgreSQL has the C++ edition's: so a copy of the PostgreSQL 15 installation without it, in a
# temp dir, gets pg_tle (built with PGXS) and a throwaway cluster with pg_tle preloaded. There a
# role that is not superuser and holds pgtle_admin runs `storage install --print pg_tle`, then
# CREATE EXTENSION forgeyard: the PL/pgSQL edition, whose API works; the registration run again
# changes nothing; and the regression files of regress/ pass on it (but those of the C++ edition's
# own machinery).
set -euo pipefail
cd "$(dirname "$0")/../.."
src=$(realpath "${1:?usage: tests/pg/pg_tle.sh PG_TLE_SOURCE_DIR BUILD_DIR}")
cli=$(realpath "${2:?usage: tests/pg/pg_tle.sh PG_TLE_SOURCE_DIR BUILD_DIR}")/forgeyard
source scripts/lib/cluster.sh
cluster_owner_init
dir=$(mktemp -d -t forgeyard-pg_tle.XXXXXX)
chmod 755 "$dir"
pg=$dir/install
cleanup() {
  [ ! -f "$dir/data/postmaster.pid" ] || cluster_as_owner "$pg/lib/postgresql/15/bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

echo "== a copy of PostgreSQL 15 without forgeyard's control file, with pg_tle"
mkdir -p "$pg/lib/postgresql" "$pg/share/postgresql" "$pg/include"
cp -a "$(pg_config --pkglibdir)/.." "$pg/lib/postgresql/15"
cp -a "$(pg_config --sharedir)" "$pg/share/postgresql/15"
ln -s "$(dirname "$(dirname "$(pg_config --includedir-server)")")" "$pg/include/postgresql"
rm -f "$pg/share/postgresql/15/extension/forgeyard"*
cp -a "$src" "$dir/pg_tle"
make -C "$dir/pg_tle" -j2 PG_CONFIG="$pg/lib/postgresql/15/bin/pg_config" >"$dir/pg_tle-build.log" 2>&1 &&
  make -C "$dir/pg_tle" PG_CONFIG="$pg/lib/postgresql/15/bin/pg_config" install >>"$dir/pg_tle-build.log" 2>&1 ||
  { tail -30 "$dir/pg_tle-build.log"; exit 1; }

echo "== a cluster with pg_tle preloaded"
chown -R "$CLUSTER_OWNER" "$dir"
port=$((20000 + RANDOM % 20000))
while (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; do port=$((port + 1)); done
cluster_as_owner "$pg/lib/postgresql/15/bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = ''
port = $port
unix_socket_directories = '$dir'
shared_preload_libraries = 'pg_tle, pg_stat_statements'  # pg_stat_statements: as the test command's cluster
CONF
cluster_as_owner "$pg/lib/postgresql/15/bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres
q() { psql -X -q -v ON_ERROR_STOP=1 -At "$@"; }
check() {  # check DB DESCRIPTION CONDITION [ROLE]
  if [ "$(q -U "${4:-postgres}" -d "$1" -c "SELECT ($3)::text")" != "true" ]; then echo "FAIL: $2"; exit 1; fi
  echo "ok - $2"
}
q -c "CREATE ROLE tle_admin LOGIN NOSUPERUSER CREATEROLE" -c "CREATE DATABASE fy_tle OWNER tle_admin"
q -d fy_tle -c "CREATE EXTENSION pg_tle" -c "GRANT pgtle_admin TO tle_admin"

echo "== storage install --print pg_tle, by a role that is not superuser (pgtle_admin)"
"$cli" storage install --print pg_tle >"$dir/pg_tle.sql"
q -U tle_admin -d fy_tle -f "$dir/pg_tle.sql" >/dev/null
q -U tle_admin -d fy_tle -f "$dir/pg_tle.sql" >/dev/null
check fy_tle "registered once, run twice" \
  "(SELECT count(*) = 1 FROM pgtle.available_extension_versions() WHERE name = 'forgeyard')" tle_admin
q -U tle_admin -d fy_tle -c "CREATE EXTENSION forgeyard"
check fy_tle "CREATE EXTENSION forgeyard installs the PL/pgSQL edition at $(cat VERSION)" \
  "forgeyard.edition() = 'plpgsql' AND forgeyard.version() = '$(cat VERSION)'
   AND (SELECT extversion = '$(cat VERSION)' FROM pg_extension WHERE extname = 'forgeyard')" tle_admin
check fy_tle "no function of it is C" \
  "NOT EXISTS (SELECT FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
                WHERE p.pronamespace IN ('forgeyard'::regnamespace, 'forgeyard_pl'::regnamespace)
                  AND l.lanname NOT IN ('plpgsql', 'sql'))" tle_admin
check fy_tle "its API works for the role that created it" \
  "(SELECT acquired FROM forgeyard.lease_acquire('t', 'r', 'w', '1 minute'))" tle_admin
check fy_tle "its tables are registered for pg_dump" \
  "(SELECT cardinality(extconfig) > 10 FROM pg_extension WHERE extname = 'forgeyard')" tle_admin
"$cli" --store "postgresql://tle_admin@/fy_tle?host=$dir&port=$port" storage install >"$dir/install.txt" 2>&1
grep -q '^edition=plpgsql$' "$dir/install.txt" && grep -q '^action=unchanged$' "$dir/install.txt" ||
  { echo "FAIL: storage install on the pg_tle install:"; cat "$dir/install.txt"; exit 1; }
echo "ok - storage install finds the pg_tle install of this version and changes nothing"
# (No earlier version of the PL/pgSQL edition exists yet: the update below has no step to take.)
q -U tle_admin -d fy_tle -c "ALTER EXTENSION forgeyard UPDATE"
check fy_tle "ALTER EXTENSION forgeyard UPDATE: already at the default version" \
  "(SELECT extversion = '$(cat VERSION)' FROM pg_extension WHERE extname = 'forgeyard')" tle_admin
q -U tle_admin -d fy_tle -c "DROP EXTENSION forgeyard"
check fy_tle "DROP EXTENSION removes every object (and leaves the schema forgeyard empty, as the C++ edition's does)" \
  "to_regnamespace('forgeyard_pl') IS NULL AND NOT EXISTS (SELECT FROM pg_class WHERE relnamespace = 'forgeyard'::regnamespace)
   AND NOT EXISTS (SELECT FROM pg_proc WHERE pronamespace = 'forgeyard'::regnamespace)" tle_admin

echo "== the regression files on the pg_tle install (CREATE EXTENSION forgeyard in each file's transaction)"
q -c "CREATE DATABASE fy_tle_tap OWNER tle_admin"
q -d fy_tle_tap -c "CREATE EXTENSION pg_tle" -c "GRANT pgtle_admin TO tle_admin" -c "CREATE EXTENSION pgtap"
q -U tle_admin -d fy_tle_tap -f "$dir/pg_tle.sql" >/dev/null
files=()
for f in regress/*.sql; do
  grep -q '^-- @edition cpp$' "$f" && continue
  files+=("$f")
done
PGDATABASE=fy_tle_tap pg_prove --failures "${files[@]}"
echo "pg_tle: all checks passed"
