#!/usr/bin/env bash
# Concurrency semantics of the hot paths, as PostgreSQL's own isolation tests pin them: each
# specs/NAME.spec runs its steps from several sessions in the orders its permutations give, and
# the output must equal expected/NAME.out (blocked steps, errors and results included).
# Runs against the throwaway cluster of scripts/test.sh (PG* in the environment), in a database
# of its own, made anew with the extension.
set -uo pipefail
cd "$(dirname "$0")"
: "${PGHOST:?run through scripts/test.sh}"
tester=$(pg_config --pkglibdir)/pgxs/src/test/isolation/pg_isolation_regress
[ -x "$tester" ] || tester=/usr/lib/postgresql/15/lib/pgxs/src/test/isolation/pg_isolation_regress
out=${ISOLATION_OUT:-$(mktemp -d)}
dropdb --if-exists forgeyard_isolation && createdb forgeyard_isolation &&
  psql -X -q -d forgeyard_isolation -c "CREATE EXTENSION forgeyard" || exit 1
mapfile -t specs < <(ls specs/*.spec | sed 's|specs/||; s|\.spec$||')
"$tester" --use-existing --host="$PGHOST" --port="$PGPORT" --user="${PGUSER:-postgres}" \
  --dbname=forgeyard_isolation --inputdir=. --outputdir="$out" "${specs[@]}"
status=$?
[ $status -eq 0 ] || cat "$out/regression.diffs" 2>/dev/null
exit $status
