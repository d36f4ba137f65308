#!/usr/bin/env bash
# libforgeyard.so exports the public API only (client/include/forgeyard/export.hpp): no symbol of
# the shared core (fy::core::), the extension's namespaces (fy::) or the client's internals
# (forgeyard::detail::, the backends) in its dynamic symbol table.
#   scripts/check-symbols.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
lib=$(ls "${1:-build}"/libforgeyard.so.* 2>/dev/null | head -1)
[ -n "$lib" ] || { echo "symbols: no libforgeyard.so in ${1:-build}"; exit 1; }
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | c++filt)
leaks=$(grep -E '(^|[^A-Za-z_:])(fy::|forgeyard::detail::|forgeyard::(pg|sqlite|postgres)::)' <<<"$exported" | head -20)
public=$(grep -c '^forgeyard::' <<<"$exported")
if [ -n "$leaks" ]; then
  echo "symbols: internal symbols exported by $lib:"; echo "$leaks"; exit 1
fi
[ "$public" -gt 0 ] || { echo "symbols: $lib exports no forgeyard:: symbol at all"; exit 1; }
echo "symbols: ok ($public forgeyard:: symbols exported, no internal ones)"
