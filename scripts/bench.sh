#!/usr/bin/env bash
# Benchmarks (not part of the test command): builds, starts a throwaway cluster, runs each
# benchmark against its hand-written baseline in the same run, prints the ratios.
# Extra arguments go to the benchmark, e.g. scripts/bench.sh --iterations 5000 --threads 4
set -uo pipefail
cd "$(dirname "$0")/.."
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
scripts/install-deps.sh || exit 1
make -j2 >/dev/null && $sudo make install >/dev/null || exit 1
cmake -S . -B build -DFORGEYARD_BENCH=ON >/dev/null && cmake --build build -j2 --target lease_bench cas_bench queue_bench audit_bench topic_bench workflow_bench sqlite_mixed >/dev/null || exit 1
source scripts/lib/cluster.sh
trap cluster_stop EXIT INT TERM
cluster_start || exit 1
psql -q -c "CREATE EXTENSION IF NOT EXISTS forgeyard" || exit 1
build/bench/lease_bench --pg "$FORGEYARD_TEST_PG_URL" "$@" || exit 1
build/bench/cas_bench --pg "$FORGEYARD_TEST_PG_URL" "$@" || exit 1
build/bench/queue_bench --pg "$FORGEYARD_TEST_PG_URL" "$@" || exit 1
build/bench/audit_bench --pg "$FORGEYARD_TEST_PG_URL" "$@" || exit 1
build/bench/topic_bench --pg "$FORGEYARD_TEST_PG_URL" "$@" || exit 1
build/bench/workflow_bench --pg "$FORGEYARD_TEST_PG_URL" || exit 1
# Writer processes and readers on one SQLite file (times, not ratios).
build/bench/sqlite_mixed --seconds 60 || exit 1
PG_BIN="$PG_BIN" bench/claim_depth.sh 1000000
PG_BIN="$PG_BIN" bench/vacuum_held.sh
bench/enqueue_batch_scaling.sh
# Server-side hot paths against the hand-written SKIP LOCKED queue (pgbench, own cluster, fsync on).
PG_BIN="$PG_BIN" bench/pgbench.sh
