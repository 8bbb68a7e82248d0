#!/usr/bin/env bash
# `make test`'s Soft-RoCE step: boots the guest (tools/softroce/run.sh) and runs the suite
# (tools/softroce/suite.sh) against the native build, or says plainly why it skips.
#
#   tools/softroce/ci.sh BUILD_DIR [--also 'PROGRAM ARGS'] ...
#
# GICOMM_SOFTROCE=0 skips it; GICOMM_SOFTROCE=1 makes a skip a failure (a CI that must run it).
# GICOMM_SOFTROCE_ALSO: more programs for the same guest, one command per line (suite.sh --also).
# Runs where: Linux x86_64, the native build has its rdma-core targets, and the guest's Debian
# packages are installed or installable (root). Takes about 1 minute once the kernel is cached
# (first run: plus a ~71 MB download).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${1:?usage: ci.sh BUILD_DIR [--also CMD]...}
shift
MODE=${GICOMM_SOFTROCE:-auto}

skip() {
  if [[ $MODE == 1 ]]; then
    echo "softroce: FAILED: cannot run ($*), and GICOMM_SOFTROCE=1 requires it" >&2
    exit 1
  fi
  echo "softroce: SKIPPED: $*"
  exit 0
}

[[ $MODE == 0 ]] && skip "disabled by GICOMM_SOFTROCE=0"
[[ $(uname -s) == Linux && $(uname -m) == x86_64 ]] || skip "needs Linux on x86_64 (this is $(uname -sm))"
for t in gicomm-pair-check proxy_verbs_test; do
  [[ -x $BUILD/bin/$t ]] || skip "$BUILD/bin/$t is missing: the native build has no rdma-core targets (libibverbs-dev)"
done
why=$(bash "$HERE/run.sh" --check 2>&1) || skip "$(tail -1 <<<"$why")"
t0=$SECONDS
also=()
while IFS= read -r cmd; do
  [[ -n $cmd ]] && also+=(--also "$cmd")
done <<<"${GICOMM_SOFTROCE_ALSO:-}"
bash "$HERE/run.sh" --timeout 900 -- "$HERE/suite.sh" "$BUILD" "${also[@]}" "$@"
rc=$?
echo "softroce: $( ((rc == 0)) && echo passed || echo "FAILED (exit $rc)") in $((SECONDS - t0)) s"
exit "$rc"
