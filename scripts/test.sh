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

# Build output goes to build/*.log and is shown when a step fails.
mkdir -p build
step() {  # step LOG COMMAND...: run quietly, keep the output, show its end on failure
  local log=$1; shift
  "$@" >"$log" 2>&1 || { echo "failed: $* (output in $log):"; tail -n 60 "$log"; return 1; }
}
echo "== build: extension (PGXS, -Werror)"
step build/make.log make -j"$jobs" FORGEYARD_WERROR=1 || exit 1
step build/make-install.log $sudo make install || exit 1
echo "== build: client, CLI, tests (CMake, -Werror)"
step build/cmake-configure.log cmake -S . -B build -DFORGEYARD_TESTS=ON -DFORGEYARD_BENCH=ON -DFORGEYARD_WERROR=ON || exit 1
step build/cmake-build.log cmake --build build -j"$jobs" || exit 1

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

echo "== checks: C++/PostgreSQL boundary, exported symbols, formatting"
if scripts/check-boundary.sh; then count boundary-check 1 0; else count boundary-check 0 1; fi
if scripts/check-symbols.sh build; then count exported-symbols 1 0; else count exported-symbols 0 1; fi
if scripts/lint.sh --format; then count format-check 1 0; else count format-check 0 1; fi

echo "== pgTAP (pg_prove regress/)"
pg_prove --failures regress/*.sql 2>&1 | tee build/pg_prove.log
tests=$(grep -oE 'Tests=[0-9]+' build/pg_prove.log | tail -1 | cut -d= -f2)
bad=$(grep -oE 'Failed [0-9]+/[0-9]+ subtests' build/pg_prove.log | awk '{split($2,a,"/"); s+=a[1]} END {print s+0}')
if [ -z "$tests" ]; then count pgtap 0 1
elif grep -q '^Result: PASS' build/pg_prove.log; then count pgtap "$tests" 0
else count pgtap $((tests - bad)) $((bad > 0 ? bad : 1)); fi

echo "== PostgreSQL restart, pg_dump / pg_restore"
if tests/pg/restart_restore.sh; then count restart-restore 1 0; else count restart-restore 0 1; fi

echo "== restore drill: pg_dump -Fc / pg_restore of an older backup, then restore_reconcile()"
if tests/pg/restore_drill.sh; then count restore-drill 1 0; else count restore-drill 0 1; fi

echo "== upgrade chain: ALTER EXTENSION forgeyard UPDATE vs a fresh install"
if tests/pg/upgrade.sh; then count upgrade 1 0; else count upgrade 0 1; fi

echo "== model check: delivery and lease protocols (spin, tests/model/check.sh)"
if tests/model/check.sh >build/model-check.log 2>&1; then
  count model-check "$(grep -oE '^model check: [0-9]+ passed' build/model-check.log | grep -oE '[0-9]+')" 0
else
  tail -n 40 build/model-check.log; count model-check 0 1
fi

echo "== fuzz: parsers of outside input, bounded run (libFuzzer, tests/fuzz/run.sh, build-fuzz/)"
if tests/fuzz/run.sh >build/fuzz.log 2>&1; then
  count fuzz-targets "$(grep -oE '^fuzz: [0-9]+ targets' build/fuzz.log | grep -oE '[0-9]+')" 0
else
  tail -n 40 build/fuzz.log; count fuzz-targets 0 1
fi
grep -E 'executions' build/fuzz.log | sed 's/^/   /'

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

echo "== AddressSanitizer + UBSan: unit and SQLite conformance suites (build-asan/)"
# FORGEYARD_SANITIZE=0 skips this step for a quick local run; CI always runs it.
if [ "${FORGEYARD_SANITIZE:-1}" != 0 ]; then
  if step build/asan-configure.log cmake -S . -B build-asan -DFORGEYARD_SANITIZE=address,undefined \
       -DFORGEYARD_BENCH=OFF -DFORGEYARD_WERROR=ON -DCMAKE_BUILD_TYPE=Debug &&
     step build/asan-build.log cmake --build build-asan -j"$jobs" --target unit_tests conformance_tests forgeyard_cli; then
    for t in unit conformance_sqlite; do
      if (cd build-asan && ctest -R "^$t\$" --output-on-failure) >"build/asan-$t.log" 2>&1; then
        n=$(grep -oE '[0-9]+ test cases? out of [0-9]+ passed' build-asan/Testing/Temporary/LastTest.log | awk '{s+=$1} END {print s+0}')
        count "asan-$t" "$n" 0
      else
        tail -n 60 "build/asan-$t.log"; count "asan-$t" 0 1
      fi
    done
  else
    count asan-build 0 1
  fi
fi

echo
echo "forgeyard: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
