#!/usr/bin/env bash
# Builds the client and the CLI and runs the main job on the embedded default store (SQLite
# under $XDG_DATA_HOME/forgeyard, else ~/.local/share/forgeyard; never the current directory):
# the store's status, then one lease taken, shown and given back.
# With arguments, runs the CLI with them instead: scripts/run.sh lease status demo quickstart
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --client
cmake -S . -B build/embedded -DFORGEYARD_TESTS=OFF -DFORGEYARD_BENCH=OFF >/dev/null
cmake --build build/embedded -j2 --target forgeyard_cli >/dev/null
cli=build/embedded/forgeyard
if [ $# -gt 0 ]; then exec "$cli" "$@"; fi

"$cli" storage status
echo
echo "# forgeyard lease acquire demo quickstart $(id -un) --ttl 30s"
out=$("$cli" lease acquire demo quickstart "$(id -un)" --ttl 30s) || { echo "$out"; exit 1; }
echo "$out"
epoch=$(echo "$out" | sed -n 's/^epoch=//p')
echo
echo "# forgeyard lease status demo quickstart"
"$cli" lease status demo quickstart
echo
echo "# forgeyard lease release demo quickstart $epoch"
"$cli" lease release demo quickstart "$epoch"
