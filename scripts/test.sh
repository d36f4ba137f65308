#!/usr/bin/env bash
# Passes every test on a fresh Debian 12 machine: installs what is missing, builds, installs the
# extension, starts a throwaway PostgreSQL cluster (as an unprivileged OS user, in a temp dir,
# on its own port and socket), runs pgTAP and Boost.Test, and stops the cluster even on failure.
# Ends with one line: "forgeyard: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${JOBS:-2}
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

scripts/install-deps.sh || exit 1

echo "== build: extension (PGXS)"
make -j"$jobs" >/dev/null || { make; exit 1; }
$sudo make install >/dev/null || exit 1
echo "== build: client, CLI, tests (CMake)"
cmake -S . -B build -DFORGEYARD_TESTS=ON -DFORGEYARD_BENCH=ON >/dev/null || exit 1
cmake --build build -j"$jobs" >/dev/null || { cmake --build build -j1; exit 1; }

source scripts/lib/cluster.sh
trap cluster_stop EXIT INT TERM
echo "== start throwaway PostgreSQL cluster"
cluster_start || exit 1
bouncer_start || exit 1

passed=0
failed=0
count() {  # count NAME PASSED FAILED
  passed=$((passed + $2)); failed=$((failed + $3))
  printf '   %-28s %4d passed, %d failed\n' "$1" "$2" "$3"
}

echo "== checks: C++/PostgreSQL boundary"
if scripts/check-boundary.sh; then count boundary-check 1 0; else count boundary-check 0 1; fi

echo "== pgTAP (pg_prove regress/)"
pg_prove --failures regress/*.sql 2>&1 | tee build/pg_prove.log
tests=$(grep -oE 'Tests=[0-9]+' build/pg_prove.log | tail -1 | cut -d= -f2)
bad=$(grep -oE 'Failed [0-9]+/[0-9]+ subtests' build/pg_prove.log | awk '{split($2,a,"/"); s+=a[1]} END {print s+0}')
if [ -z "$tests" ]; then count pgtap 0 1
elif grep -q '^Result: PASS' build/pg_prove.log; then count pgtap "$tests" 0
else count pgtap $((tests - bad)) $((bad > 0 ? bad : 1)); fi

echo "== PostgreSQL restart, pg_dump / pg_restore"
if tests/pg/restart_restore.sh; then count restart-restore 1 0; else count restart-restore 0 1; fi

echo "== upgrade chain: ALTER EXTENSION forgeyard UPDATE vs a fresh install"
if tests/pg/upgrade.sh; then count upgrade 1 0; else count upgrade 0 1; fi

echo "== Boost.Test (ctest: unit, conformance on SQLite and PostgreSQL)"
psql -q -c "CREATE EXTENSION IF NOT EXISTS forgeyard" >/dev/null || exit 1
(cd build && ctest --output-on-failure -j"$jobs") 2>&1 | tee build/ctest.log
# Count Boost.Test cases (from each module's short report), not ctest entries.
log=build/Testing/Temporary/LastTest.log
cases_ok=$(grep -oE '[0-9]+ test cases? out of [0-9]+ passed' "$log" 2>/dev/null | awk '{s+=$1} END {print s+0}')
cases_bad=$(grep -oE '[0-9]+ test cases? out of [0-9]+ failed' "$log" 2>/dev/null | awk '{s+=$1} END {print s+0}')
line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' build/ctest.log | tail -1)
nfail=$(echo "$line" | grep -oE '[0-9]+ tests failed' | grep -oE '[0-9]+')
[ -n "$line" ] || nfail=1
# A module that crashed prints no report: count it as one failure.
[ "${nfail:-0}" -gt 0 ] && [ "$cases_bad" -eq 0 ] && cases_bad=$nfail
count boost-test-cases "$cases_ok" "$cases_bad"

echo
echo "forgeyard: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
