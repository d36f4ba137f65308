#!/usr/bin/env bash
# Installs the Debian 12 packages forgeyard needs, if any is missing.
#   scripts/install-deps.sh           everything: build, extension, tests, benchmarks
#   scripts/install-deps.sh --client  only what the client library and CLI need to build
set -euo pipefail
client=(libpq-dev libsqlite3-dev libspdlog-dev libssl-dev libcli11-dev cmake g++ make pkg-config tzdata python3)
packages=("${client[@]}" postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap
          libtap-parser-sourcehandler-pgtap-perl libboost-test-dev pgbouncer ninja-build clang-format clang-tidy
          spin clang libfuzzer-14-dev postgresql-15-auto-failover pg-auto-failover-cli)
[ "${1:-}" = "--client" ] && packages=("${client[@]}")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
