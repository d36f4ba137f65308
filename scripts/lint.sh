#!/usr/bin/env bash
# The tree against .clang-format and .clang-tidy (docs/architecture.md, "Tools").
#   scripts/lint.sh           check both; exit 1 on any finding
#   scripts/lint.sh --fix     rewrite every file with clang-format, then check with clang-tidy
#   scripts/lint.sh --format  clang-format only (check)
# clang-tidy reads the compile commands of a file-by-file configure in build/lint/ (the unity
# builds' commands name batches, not files; configured here when missing); the
# extension, built by PGXS, gets the flags of the Makefile.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
jobs=${JOBS:-2}
mode=${1:-check}
status=0

mkdir -p "$build"
mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
# No file means git could not list the tree (not a checkout, or one git refuses to read): fail.
[ ${#files[@]} -gt 0 ] || { echo "lint: git ls-files lists no C++ file here"; exit 2; }
if [ "$mode" = "--fix" ]; then
  clang-format -i "${files[@]}"
else
  clang-format --dry-run --Werror "${files[@]}" 2>"$build/lint-format.log" || {
    echo "lint: clang-format: $(grep -c 'error:' "$build/lint-format.log") places differ (scripts/lint.sh --fix rewrites them):"
    grep 'error:' "$build/lint-format.log" | cut -d: -f1 | sort | uniq -c | head -20
    status=1
  }
fi
if [ "$mode" = "--format" ]; then
  [ $status -eq 0 ] && echo "lint: format ok (${#files[@]} files)"
  exit $status
fi

if [ ! -f "$build/lint/compile_commands.json" ]; then
  cmake -S . -B "$build/lint" -DCMAKE_UNITY_BUILD=OFF -DFORGEYARD_TESTS=ON -DFORGEYARD_BENCH=ON >"$build/lint-configure.log" 2>&1 ||
    { echo "lint: configuring $build/lint failed (see $build/lint-configure.log)"; exit 2; }
fi
build="$build/lint"
server=$(pg_config --includedir-server)
# Translation units only; headers are checked through them (HeaderFilterRegex).
mapfile -t cmake_units < <(git ls-files 'core/*.cpp' 'client/*.cpp' 'tests/*.cpp' 'bench/*.cpp')
mapfile -t pg_units < <(git ls-files 'extension/*.cpp')
{
  printf '%s\n' "${cmake_units[@]}" | xargs -P "$jobs" -n 4 clang-tidy --quiet -p "$build"
  printf '%s\n' "${pg_units[@]}" | xargs -P "$jobs" -n 4 sh -c \
    'clang-tidy --quiet "$@" -- -std=c++20 -Wno-register -I. -Iextension -isystem '"$server" sh
} >"$build/lint-tidy.log" 2>&1 || status=1
if grep -qE 'warning:|error:' "$build/lint-tidy.log"; then
  status=1
  echo "lint: clang-tidy findings ($build/lint-tidy.log):"
  grep -E 'warning:|error:' "$build/lint-tidy.log" | sort -u | head -40
fi
[ $status -eq 0 ] && echo "lint: ok (${#files[@]} files formatted, $(( ${#cmake_units[@]} + ${#pg_units[@]} )) units tidy)"
exit $status
