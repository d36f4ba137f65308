#!/usr/bin/env bash
# The pgTAP suite (regress/*.sql, or the files named) on one edition, with pg_prove:
#   tests/pg/pgtap.sh cpp [FILE...]       CREATE EXTENSION forgeyard in each file's transaction, in
#                                         database forgeyard_pgtap
#   tests/pg/pgtap.sh plpgsql [FILE...]   the PL/pgSQL edition's plain script, run in each file's
#                                         transaction by fy_owner (not superuser, owner of database
#                                         forgeyard_pgtap_pl, which never loads the forgeyard library)
# FY_PGTAP_DB names another database, FY_GEN_DIR another output of sql/generate.py (sql/gen).
# Each file states its expected results once, for both editions. A file that checks the C++
# edition's own machinery (the C++/PostgreSQL boundary, statement counts below SPI) says so on a
# line `-- @edition cpp`, and runs on that edition alone. Runs against the server that
# libpq's environment names (scripts/test.sh's cluster); the PL/pgSQL script must have been
# generated (make, or sql/generate.py sql/gen).
set -uo pipefail
cd "$(dirname "$0")/../.."
edition=${1:?usage: tests/pg/pgtap.sh cpp|plpgsql [FILE...]}
shift
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(regress/*.sql)
case "$edition" in
  cpp)
    db=${FY_PGTAP_DB:-forgeyard_pgtap}
    psql -X -q -d postgres -c "SELECT 1" >/dev/null || exit 1
    [ "$(psql -X -At -d postgres -c "SELECT count(*) FROM pg_database WHERE datname = '$db'")" = 1 ] || createdb "$db"
    PGDATABASE=$db exec pg_prove --failures "${files[@]}"
    ;;
  plpgsql)
    db=${FY_PGTAP_DB:-forgeyard_pgtap_pl}
    owner=fy_owner
    version=$(cat VERSION)
    script=$(realpath -m "${FY_GEN_DIR:-sql/gen}")/plpgsql/plain--$version.sql
    [ -f "$script" ] || { echo "no $script: run make (or sql/generate.py sql/gen) first" >&2; exit 1; }
    psql -X -q -v ON_ERROR_STOP=1 -d postgres >/dev/null <<SQL || exit 1
SELECT 'CREATE ROLE $owner LOGIN NOSUPERUSER CREATEDB CREATEROLE'
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$owner') \gexec
SQL
    [ "$(psql -X -At -d postgres -c "SELECT count(*) FROM pg_database WHERE datname = '$db'")" = 1 ] ||
      createdb -O "$owner" "$db" || exit 1
    psql -X -q -d "$db" -c "CREATE EXTENSION IF NOT EXISTS pgtap" || exit 1
    pl=()
    for f in "${files[@]}"; do grep -q '^-- @edition cpp$' "$f" || pl+=("$f"); done
    FY_PLPGSQL_SCRIPT=$script FY_PLPGSQL_OWNER=$owner PGDATABASE=$db exec pg_prove --failures "${pl[@]}"
    ;;
  *) echo "usage: tests/pg/pgtap.sh cpp|plpgsql [FILE...]" >&2; exit 2 ;;
esac
