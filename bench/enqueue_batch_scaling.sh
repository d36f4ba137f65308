#!/usr/bin/env bash
# Server-side cost of one enqueue_batch call against the batch size: one call of 1,000 and one of
# 10,000 payloads into a fresh queue, best of 3 each, and the ratio (linear would be 10x). Run by
# scripts/bench.sh against its throwaway cluster (PGHOST, PGPORT, PGUSER, PGDATABASE set).
set -euo pipefail
best() {  # best of 3 wall times (ms) of one enqueue_batch of $1 payloads
  local n=$1 best="" t
  for _ in 1 2 3; do
    t=$(psql -X -q -v ON_ERROR_STOP=1 \
      -c "SELECT forgeyard.queue_drop('bench', 'batch')" \
      -c "SELECT forgeyard.queue_create('bench', 'batch', '{\"max_messages\": 100000, \"max_bytes\": 100000000}')" \
      -c '\timing on' \
      -c "SELECT count(*) FROM forgeyard.enqueue_batch('bench', 'batch',
            (SELECT pg_catalog.array_agg(pg_catalog.convert_to('payload ' || i, 'UTF8')) FROM generate_series(1, $n) i))" \
      | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1)
    if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
  done
  echo "$best"
}
small=$(best 1000)
large=$(best 10000)
printf '%-28s %-10s %10s ms\n' "server-side enqueue_batch" 1000 "$small"
printf '%-28s %-10s %10s ms\n' "server-side enqueue_batch" 10000 "$large"
awk -v a="$large" -v b="$small" 'BEGIN { printf "%-28s 10000/1000 %9.2fx (target <= 12x)\n", "enqueue_batch scaling", a / b }'
