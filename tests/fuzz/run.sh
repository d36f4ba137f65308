#!/usr/bin/env bash
# Builds the libFuzzer targets (clang++, build-fuzz/) and runs each for a bounded time from its seed
# corpus in tests/fuzz/corpus/<target>/ (copied, so the repository's corpus stays as committed).
#   tests/fuzz/run.sh                  every target, FUZZ_SECONDS (default 15) each: about 2 minutes
#   FUZZ_SECONDS=3600 tests/fuzz/run.sh canonical_json   one target for an hour (the longer run)
#   FUZZ_PHASE=build|run               only build, or only run what was built (default: both)
#   FUZZ_JOBS=2                        targets run side by side, one process each (default 1)
# Prints the executions per target; a crash or a broken property leaves its input in
# build-fuzz/crashes/<target>/ (turn each into a unit test) and fails the run.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
seconds=${FUZZ_SECONDS:-15}
build=${FUZZ_BUILD_DIR:-build-fuzz}
phase=${FUZZ_PHASE:-all}
fuzz_jobs=${FUZZ_JOBS:-1}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(canonical_json uuid duration audit_export queue_options backup_manifest app_migration cli_args)

if [ "$phase" != run ]; then
  mkdir -p "$build"
  # A build directory from before the switch to Ninja is configured anew.
  [ ! -f "$build/CMakeCache.txt" ] || grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$build/CMakeCache.txt" ||
    rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
  if ! cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DFORGEYARD_FUZZ=ON -DFORGEYARD_TESTS=OFF \
       -DFORGEYARD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
       >"$build/configure.log" 2>&1; then
    tail -n 30 "$build/configure.log"; echo "fuzz: build failed"; exit 1
  fi
  if ! cmake --build "$build" -j"${JOBS:-2}" --target "${targets[@]/%/_fuzz}" >"$build/build.log" 2>&1; then
    tail -n 40 "$build/build.log"; echo "fuzz: build failed"; exit 1
  fi
  [ "$phase" = build ] && { echo "fuzz: ${#targets[@]} targets built"; exit 0; }
fi

fuzz_one() {  # fuzz_one TARGET: runs it, writes its line to $build/TARGET.result, exit status 0 or 1
  local t=$1 corpus="$build/corpus/$1" crashes="$build/crashes/$1" log="$build/$1.log" rc runs
  rm -f "$build/$t.result" "$build/$t.runs"
  mkdir -p "$corpus" "$crashes"
  cp -f "$root/tests/fuzz/corpus/$t"/* "$corpus/" 2>/dev/null
  "$build/tests/fuzz/${t}_fuzz" "$corpus" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
    -artifact_prefix="$crashes/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  runs=$(grep -oE 'Done [0-9]+ runs' "$log" | grep -oE '[0-9]+' | tail -1)
  [ -n "$runs" ] || runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  if [ $rc -eq 0 ]; then
    printf '%-16s %10s executions in %s s, corpus %s inputs, no crash\n' "$t" "${runs:-?}" "$seconds" \
      "$(ls "$corpus" | wc -l)" >"$build/$t.result"
  else
    { printf '%-16s FAILED after %s executions: %s\n' "$t" "${runs:-?}" "$(ls "$crashes" | head -3 | tr '\n' ' ')"
      grep -E 'ERROR|property failed|SUMMARY' "$log" | head -5; } >"$build/$t.result"
  fi
  echo "${runs:-0}" >"$build/$t.runs"
  return $((rc != 0))
}

# FUZZ_JOBS targets at a time, each a process of its own.
pids=()
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$fuzz_jobs" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
wait
failed=0
total=0
for t in "${targets[@]}"; do
  cat "$build/$t.result" 2>/dev/null || echo "$t: no result"
  grep -q 'no crash$' "$build/$t.result" 2>/dev/null || failed=$((failed + 1))
  total=$((total + $(cat "$build/$t.runs" 2>/dev/null || echo 0)))
done
echo "fuzz: ${#targets[@]} targets, $total executions, $failed failed"
[ "$failed" -eq 0 ]
