#!/usr/bin/env bash
# Install the Debian packages gicomm's native build and tests need, when missing.
# As root, installs with apt-get; otherwise prints the command to run and carries on (the build then
# skips what those packages enable, e.g. the rdma-core targets).
set -euo pipefail
missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "gicomm: not a Debian system; please install the equivalents of: ${missing[*]}" >&2
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "gicomm: missing system packages: ${missing[*]}" >&2
  echo "gicomm: run 'sudo apt-get install -y ${missing[*]}' for the full native build" >&2
  exit 0
fi
echo "gicomm: installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
