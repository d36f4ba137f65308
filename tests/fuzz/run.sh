#!/usr/bin/env bash
# Builds the libFuzzer targets (clang++, build-fuzz/) and runs each for a bounded time from its seed
# corpus in tests/fuzz/corpus/<target>/ (copied, so the repository's corpus stays as committed).
#   tests/fuzz/run.sh                  every target, FUZZ_SECONDS (default 15) each: about 2 minutes
#   FUZZ_SECONDS=3600 tests/fuzz/run.sh canonical_json   one target for an hour (the longer run)
# Prints the executions per target; a crash or a broken property leaves its input in
# build-fuzz/crashes/<target>/ (turn each into a unit test) and fails the run.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
seconds=${FUZZ_SECONDS:-15}
build=${FUZZ_BUILD_DIR:-build-fuzz}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(canonical_json uuid duration audit_export queue_options backup_manifest app_migration cli_args)

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
mkdir -p "$build"
if ! cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DFORGEYARD_FUZZ=ON -DFORGEYARD_TESTS=OFF \
     -DFORGEYARD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >"$build/configure.log" 2>&1; then
  tail -n 30 "$build/configure.log"; echo "fuzz: build failed"; exit 1
fi
if ! cmake --build "$build" -j"${JOBS:-2}" --target "${targets[@]/%/_fuzz}" >"$build/build.log" 2>&1; then
  tail -n 40 "$build/build.log"; echo "fuzz: build failed"; exit 1
fi

failed=0
total=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  crashes="$build/crashes/$t"
  mkdir -p "$corpus" "$crashes"
  cp -f "$root/tests/fuzz/corpus/$t"/* "$corpus/" 2>/dev/null
  log="$build/$t.log"
  "$build/tests/fuzz/${t}_fuzz" "$corpus" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
    -artifact_prefix="$crashes/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  runs=$(grep -oE 'Done [0-9]+ runs' "$log" | grep -oE '[0-9]+' | tail -1)
  [ -n "$runs" ] || runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  total=$((total + ${runs:-0}))
  if [ $rc -eq 0 ]; then
    printf '%-16s %10s executions in %s s, corpus %s inputs, no crash\n' "$t" "${runs:-?}" "$seconds" "$(ls "$corpus" | wc -l)"
  else
    failed=$((failed + 1))
    printf '%-16s FAILED after %s executions: %s\n' "$t" "${runs:-?}" "$(ls "$crashes" | head -3 | tr '\n' ' ')"
    grep -E 'ERROR|property failed|SUMMARY' "$log" | head -5
  fi
done
echo "fuzz: ${#targets[@]} targets, $total executions, $failed failed"
[ "$failed" -eq 0 ]
