#!/usr/bin/env bash
# Passes every test on a fresh Debian 12 machine: installs what is missing, builds, installs the
# extension, starts a throwaway PostgreSQL cluster (as an unprivileged OS user, in a temp dir,
# on its own port and socket), runs every suite, and stops the cluster even on failure.
#   scripts/test.sh           everything (CI runs this): about 10 minutes on two cores
#   scripts/test.sh --quick   the inner loop: the builds, pgTAP, the unit suite and the
#                             conformance suite on SQLite and PostgreSQL (about 3 minutes after a
#                             first build)
# Stages that wait on the server run beside stages that compile (see "Stages" in README.md).
# Prints each stage's wall time, then one line: "forgeyard: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-2}
quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
start=$SECONDS

scripts/install-deps.sh || exit 1

# Build output goes to build/*.log and is shown when a step fails.
mkdir -p build
rm -f build/stage-times.txt build/counts.txt build/failures.txt
step() {  # step LOG COMMAND...: run quietly, keep the output, show its end on failure
  local log=$1; shift
  "$@" >"$log" 2>&1 || { echo "failed: $* (output in $log):"; tail -n 60 "$log"; return 1; }
}
timed() {  # timed NAME COMMAND...: run, and record its wall time under NAME
  local name=$1 t=$SECONDS rc; shift
  "$@"; rc=$?
  echo "$name $((SECONDS - t))" >>build/stage-times.txt
  return $rc
}
count() {  # count NAME PASSED FAILED: recorded in build/counts.txt (background stages too)
  printf '   %-28s %4d passed, %d failed\n' "$1" "$2" "$3"
  echo "$1 $2 $3" >>build/counts.txt
}
check() {  # check NAME COMMAND...: one passed check, or one failed
  if "${@:2}"; then count "$1" 1 0; else count "$1" 0 1; fi
}
# One configuration per build directory, all with Ninja; -Werror in each.
configure() {  # configure DIR ARGS...
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DFORGEYARD_WERROR=ON "$@"
}
# Debug information as line tables only (-g1): enough for every backtrace and sanitizer report,
# and a quarter less to compile than -g.
main_args=(-DFORGEYARD_TESTS=ON -DFORGEYARD_BENCH=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
           "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
# The sanitizer build with clang: it compiles these targets in half the time g++ takes (73 s against
# 149 s on an idle 2-core machine), and this build is the test command's longest path. The fuzz
# targets are built in it too (tests/fuzz/CMakeLists.txt): the core and the CLI once, with
# libFuzzer's coverage besides the sanitizers.
asan_args=(-DCMAKE_CXX_COMPILER=clang++ -DFORGEYARD_SANITIZE=address,undefined -DFORGEYARD_TESTS=ON
           -DFORGEYARD_BENCH=OFF -DFORGEYARD_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1")
fuzz_targets=(canonical_json uuid duration audit_export queue_options backup_manifest app_migration cli_args)

build_extension() {
  echo "== build: extension (PGXS, -Werror)"
  step build/make.log make -j"$jobs" FORGEYARD_WERROR=1 && step build/make-install.log $sudo make install
}
build_main() {
  echo "== build: client, CLI, tests, benchmarks (CMake, -Werror, build/)"
  # A build directory from before the switch to Ninja is configured anew.
  [ ! -f build/CMakeCache.txt ] || grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' build/CMakeCache.txt ||
    rm -rf build/CMakeCache.txt build/CMakeFiles
  step build/cmake-configure.log configure build "${main_args[@]}" &&
    step build/cmake-build.log cmake --build build -j"$jobs"
}
# The sanitizer build: the suites that need no uninstrumented binary, with ASan and UBSan, and the
# fuzz targets.
build_asan() {
  # A build directory configured with another compiler is configured anew.
  [ ! -f build-asan/CMakeCache.txt ] || grep -q '^CMAKE_CXX_COMPILER:.*clang++' build-asan/CMakeCache.txt ||
    rm -rf build-asan/CMakeCache.txt build-asan/CMakeFiles
  step build/asan-configure.log configure build-asan "${asan_args[@]}" &&
    step build/asan-build.log cmake --build build-asan -j"$jobs" --target unit_tests conformance_tests forgeyard_cli \
      "${fuzz_targets[@]/%/_fuzz}"
}
# A second configure and build of the same tree compiles and links nothing (the glob check that
# CONFIGURE_DEPENDS adds runs, and finds no change).
rebuild_nothing() {
  configure build "${main_args[@]}" >build/cmake-rebuild.log 2>&1 &&
    cmake --build build -j"$jobs" >>build/cmake-rebuild.log 2>&1 &&
    ! grep -E 'Building|Linking|Re-running CMake' build/cmake-rebuild.log
}
# Every fuzz target for FUZZ_SECONDS (5) from its seed corpus, one at a time (beside the sanitizer
# suites), from the sanitizer build: a bounded check that the seeds and their first mutations
# pass; the longer runs are tests/fuzz/run.sh's (docs/operations.md, "Fault tests").
fuzz_runs() {
  echo "== fuzz: parsers of outside input, bounded run (libFuzzer, tests/fuzz/run.sh, build-asan/)"
  if FUZZ_PHASE=run FUZZ_BUILD_DIR=build-asan FUZZ_JOBS=1 FUZZ_SECONDS="${FUZZ_SECONDS:-5}" \
       tests/fuzz/run.sh "${fuzz_targets[@]}" >build/fuzz.log 2>&1; then
    count fuzz-targets "$(grep -oE '^fuzz: [0-9]+ targets' build/fuzz.log | grep -oE '[0-9]+')" 0
  else
    tail -n 40 build/fuzz.log 2>/dev/null; count fuzz-targets 0 1
  fi
  grep -E 'executions' build/fuzz.log 2>/dev/null | sed 's/^/   /'
}

# pgTAP (regress/) on one edition: tests/pg/pgtap.sh, counted as pgtap-EDITION.
pgtap_edition() {  # pgtap_edition EDITION DESCRIPTION
  local log=build/pg_prove-$1.log tests bad
  echo "== pgTAP, $2 (tests/pg/pgtap.sh $1)"
  tests/pg/pgtap.sh "$1" >"$log" 2>&1
  cat "$log"
  tests=$(grep -oE 'Tests=[0-9]+' "$log" | tail -1 | cut -d= -f2)
  bad=$(grep -oE 'Failed [0-9]+/[0-9]+ subtests' "$log" | awk '{split($2,a,"/"); s+=a[1]} END {print s+0}')
  if [ -z "$tests" ]; then count "pgtap-$1" 0 1
  elif grep -q '^Result: PASS' "$log"; then count "pgtap-$1" "$tests" 0
  else count "pgtap-$1" $((tests - bad)) $((bad > 0 ? bad : 1)); fi
}

# The source checks and the suites that need only the installed extension and the cluster: they
# run beside the client build. Their output goes to build/server-suites.log, shown when they end.
server_suites() {
  echo "== checks: C++/PostgreSQL boundary, formatting"
  check boundary-check scripts/check-boundary.sh
  check format-check scripts/lint.sh --format
  pgtap_edition cpp "C++ edition: CREATE EXTENSION in each file's transaction"
  pgtap_edition plpgsql "PL/pgSQL edition: its plain script, run by a role that is not superuser"
  local edition
  for edition in cpp plpgsql; do
    echo "== isolation, $edition edition: concurrent sessions on the hot paths (pg_isolation_regress, tests/isolation)"
    local ran=0 ok bad
    ISOLATION_OUT=$(mktemp -d) tests/isolation/run.sh "$edition" >"build/isolation-$edition.log" 2>&1 || ran=$?
    cat "build/isolation-$edition.log"
    ok=$(grep -cE '^test .* \.\.\. ok' "build/isolation-$edition.log")
    bad=$(grep -cE '^test .* \.\.\. FAILED' "build/isolation-$edition.log")
    [ "$ran" -ne 0 ] && [ "$bad" -eq 0 ] && bad=1
    count "isolation-$edition" "$ok" "$bad"
  done
  [ $quick = 1 ] && return 0

  echo "== hot paths under DDL: REINDEX CONCURRENTLY, VACUUM FULL, ALTER TABLE while workers run"
  check hot-paths-ddl tests/pg/hot_paths_ddl.sh
  echo "== PostgreSQL restart, pg_dump / pg_restore"
  check restart-restore tests/pg/restart_restore.sh
  echo "== restore drill: pg_dump -Fc / pg_restore of an older backup, then restore_reconcile()"
  check restore-drill tests/pg/restore_drill.sh
  echo "== ready lanes' segments: maintain() skips a segment an open transaction read, both editions"
  check lane-segments tests/pg/lane_segments.sh
  echo "== upgrade chain: ALTER EXTENSION forgeyard UPDATE vs a fresh install"
  check upgrade tests/pg/upgrade.sh
  echo "== model check: delivery, lease and queue storage protocols (spin, tests/model/check.sh)"
  if tests/model/check.sh >build/model-check.log 2>&1; then
    cat build/model-check.log
    count model-check "$(grep -oE '^model check: [0-9]+ passed' build/model-check.log | grep -oE '[0-9]+')" 0
  else
    tail -n 40 build/model-check.log; count model-check 0 1
  fi
}

# ctest over DIR for the entries matching REGEX; counts Boost.Test cases (from each module's
# short report), not ctest entries. A module that crashed prints no report: one failure.
boost_suites() {  # boost_suites NAME DIR REGEX [EXCLUDE]
  local name=$1 dir=$2 regex=$3 exclude=${4:-'^$'} log="build/$1.log" ok bad line nfail
  # Two at a time, as the suites have always run (four gained about 20 s).
  (cd "$dir" && ctest --output-on-failure -j"${CTEST_JOBS:-2}" -R "$regex" -E "$exclude") >"$log" 2>&1
  cat "$log"
  ok=$(grep -oE '[0-9]+ test cases? out of [0-9]+ passed' "$dir/Testing/Temporary/LastTest.log" 2>/dev/null | awk '{s+=$1} END {print s+0}')
  bad=$(grep -oE '[0-9]+ test cases? out of [0-9]+ failed' "$dir/Testing/Temporary/LastTest.log" 2>/dev/null | awk '{s+=$1} END {print s+0}')
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -1)
  nfail=$(echo "$line" | grep -oE '[0-9]+ tests failed' | grep -oE '[0-9]+')
  [ -n "$line" ] || nfail=1
  [ "${nfail:-0}" -gt 0 ] && [ "$bad" -eq 0 ] && bad=$nfail
  # Boost.Test's error lines, kept for the summary: a long log is cut in the middle when shown.
  grep -aE 'error: in "|Assertion|ERROR: AddressSanitizer|runtime error:' "$dir/Testing/Temporary/LastTest.log" 2>/dev/null |
    sed "s|^|$name: |" | head -n 40 >>build/failures.txt
  count "$name" "$ok" "$bad"
}

summary() {
  echo
  echo "== stage wall times (s); stages on one line ran side by side"
  awk '{printf "   %-44s %5d\n", $1, $2}' build/stage-times.txt 2>/dev/null
  printf '   %-44s %5d\n' total $((SECONDS - start))
  local passed failed
  passed=$(awk '{s+=$2} END {print s+0}' build/counts.txt 2>/dev/null)
  failed=$(awk '{s+=$3} END {print s+0}' build/counts.txt 2>/dev/null)
  if [ -s build/failures.txt ]; then
    echo
    echo "== what failed (Boost.Test's error lines; the whole output is in build/*.log)"
    cat build/failures.txt
  fi
  echo
  echo "forgeyard: ${passed:-0} passed, ${failed:-0} failed"
  [ "${failed:-0}" -eq 0 ]
}

timed extension-build build_extension || { count extension-build 0 1; summary; exit 1; }

source scripts/lib/cluster.sh
export CLUSTER_LOGS_TO=$PWD/build  # build/pg-primary.log, build/pg-standby.log after the run
trap cluster_stop EXIT INT TERM
echo "== start throwaway PostgreSQL cluster, its hot standby and PgBouncer"
cluster_start || exit 1
standby_start || exit 1
bouncer_start || exit 1
# The role that installs the PL/pgSQL edition in the tests: it owns its databases, and is not superuser.
psql -X -q -d postgres -c "CREATE ROLE fy_owner LOGIN NOSUPERUSER CREATEDB CREATEROLE" || exit 1

# The server suites beside the client build.
timed server-suites server_suites >build/server-suites.log 2>&1 &
server_pid=$!
timed client-build build_main
built=$?
# The full run restarts the server in those suites: the client suites wait for them. The quick
# run's pgTAP (its own database) goes on beside the client suites.
if [ $quick = 0 ] || [ $built -ne 0 ]; then
  wait "$server_pid"
  cat build/server-suites.log
fi
[ $built -eq 0 ] || { count client-build 0 1; summary; exit 1; }
echo "== checks: exported symbols, a second build of the same tree builds nothing"
check exported-symbols scripts/check-symbols.sh build
check rebuild-nothing rebuild_nothing
echo "== editions: storage install of the PL/pgSQL edition by the database owner, one catalog for both (tests/pg/editions.sh)"
check editions tests/pg/editions.sh build
if [ $quick = 0 ]; then
  # (restarts the server: only where nothing else runs on it)
  echo "== Neon, emulated: the PL/pgSQL edition through PgBouncer while the server restarts (tests/pg/neon.sh)"
  check neon tests/pg/neon.sh build
fi

psql -q -c "CREATE EXTENSION IF NOT EXISTS forgeyard" >/dev/null || exit 1
# The conformance suite's database of the PL/pgSQL edition, installed by fy_owner with the CLI.
createdb -O fy_owner forgeyard_test_pl &&
  build/forgeyard --store "postgresql://fy_owner@/forgeyard_test_pl?host=$PGHOST&port=$PGPORT" storage install \
    --edition plpgsql >/dev/null 2>&1 || { echo "failed: storage install --edition plpgsql"; exit 1; }
export FORGEYARD_TEST_PG_PLPGSQL_URL="postgresql://postgres@/forgeyard_test_pl?host=$PGHOST&port=$PGPORT"
export FORGEYARD_TEST_PG_PLPGSQL_OWNER=fy_owner
if [ $quick = 1 ]; then
  echo "== Boost.Test: unit, conformance on SQLite and PostgreSQL (quick)"
  timed boost-test boost_suites boost-test-cases build '^(unit|conformance_sqlite|conformance_postgres|conformance_plpgsql)$'
  wait "$server_pid"
  cat build/server-suites.log
  summary
  exit
fi

# Beside the Boost.Test suites, at nice 19 so that they keep the CPU they ask for and this takes
# what they leave idle: the sanitizer build, then its suites beside the fuzz runs. (Started with
# the client build instead, it took 60 s longer.)
(
  renice -n 19 -p "$BASHPID" >/dev/null
  echo "== AddressSanitizer + UBSan: unit and SQLite conformance suites, fuzz targets (build-asan/)"
  if timed asan-build build_asan; then
    timed asan-suites boost_suites asan-unit+conformance_sqlite build-asan '^(unit|conformance_sqlite)$' &
    timed fuzz-runs fuzz_runs
    wait
  else
    count asan-build 0 1
  fi
) >build/side.log 2>&1 &
side_pid=$!

# The conformance suite on SQLite runs once, in the sanitizer build (beside these): the same
# cases a second time here cost the command about 60 s of CPU on a machine with none to spare.
echo "== Boost.Test (ctest: unit, conformance on PostgreSQL (both editions) and PgBouncer, CLI, history, faults)"
timed boost-test boost_suites boost-test-cases build '.' '^conformance_sqlite$'
# The failover drill (its own pg_auto_failover monitor and nodes) beside the tail of the sanitizer
# stage, at its nice 19 so that they share the CPU evenly: the drill mostly waits on failure
# detection and promotion, and the sanitizer stage is the longer path.
echo "== failover drill: pg_auto_failover, two failovers under load (tests/ha/failover.sh)"
timed ha-drill check ha-failover nice -n 19 tests/ha/failover.sh build >build/ha-drill.log 2>&1 &
ha_pid=$!
wait "$side_pid"
cat build/side.log
wait "$ha_pid"
cat build/ha-drill.log
grep -aE 'error: in "' build/ha-drill.log | sed 's/^/ha-drill: /' | head -n 20 >>build/failures.txt

summary
