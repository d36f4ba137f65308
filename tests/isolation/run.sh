#!/usr/bin/env bash
# Concurrency semantics of the hot paths, as PostgreSQL's own isolation tests pin them: each
# specs/NAME.spec runs its steps from several sessions in the orders its permutations give, and
# the output must equal expected/NAME.out (blocked steps, errors and results included).
# Runs against the throwaway cluster of scripts/test.sh (PG* in the environment), in a database
# of its own, made anew with the extension.
#   tests/isolation/run.sh [cpp|plpgsql]   the edition (default cpp); plpgsql: the PL/pgSQL
#   edition's plain script (sql/gen, from make), run by fy_owner, a role that is not superuser
# The same expected output for both.
set -uo pipefail
cd "$(dirname "$0")"
: "${PGHOST:?run through scripts/test.sh}"
tester=$(pg_config --pkglibdir)/pgxs/src/test/isolation/pg_isolation_regress
[ -x "$tester" ] || tester=/usr/lib/postgresql/15/lib/pgxs/src/test/isolation/pg_isolation_regress
out=${ISOLATION_OUT:-$(mktemp -d)}
edition=${1:-cpp}
db=forgeyard_isolation_$edition
case "$edition" in
  cpp)
    dropdb --if-exists "$db" && createdb "$db" && psql -X -q -d "$db" -c "CREATE EXTENSION forgeyard" || exit 1 ;;
  plpgsql)
    script=../../sql/gen/plpgsql/plain--$(cat ../../VERSION).sql
    dropdb --if-exists "$db" && createdb -O fy_owner "$db" &&
      psql -X -q -v ON_ERROR_STOP=1 -U fy_owner -d "$db" -f "$script" >/dev/null || exit 1 ;;
  *) echo "usage: tests/isolation/run.sh [cpp|plpgsql]" >&2; exit 2 ;;
esac
mapfile -t specs < <(ls specs/*.spec | sed 's|specs/||; s|\.spec$||')
"$tester" --use-existing --host="$PGHOST" --port="$PGPORT" --user="${PGUSER:-postgres}" \
  --dbname="$db" --inputdir=. --outputdir="$out" "${specs[@]}"
status=$?
[ $status -eq 0 ] || cat "$out/regression.diffs" 2>/dev/null
exit $status
