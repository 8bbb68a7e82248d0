#!/usr/bin/env bash
# Everything issue 24 still needs two GPUs for, in one device call on nvidia-h200-x2 (about 420 s):
#   1. the gpu engine's check with the serial engine beside it (goals 2 and 3 on the peer placement,
#      and on the same GPU again): native/tests/softnic/device_check.sh with BASE=c6ea099;
#   2. the campaign h200x2-softnic-gpu (Fig 3, Fig 8, Tables 5/13 on both placements, each rate
#      record with its same-run ceiling: goal 1 where the engine has a whole GPU).
# Before the call, on a machine with the history:
#   rm -rf .device-baseline && mkdir -p .device-baseline &&
#     git archive c6ea099 native/src/nic/softnic | tar -x -C .device-baseline
# and carry .whl (see README "GPU machines without network access"). Results under $OUT, seven files
# (the device tool returns at most eight): check.tar.gz (device_check.sh's five files and its log
# check.log) and the campaign's tarball, logs and clocks. REHEARSE=1 runs the same call on one GPU
# (the peer placement's points skipped, saying so), to try the call itself.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gicomm-out}
mkdir -p "$OUT"
gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU')
[ "$gpus" -ge 2 ] || [ "${REHEARSE:-0}" = 1 ] ||
  { echo "device-two-gpus: $gpus GPU(s) visible; this call needs two (REHEARSE=1 tries it on one)" >&2; exit 77; }
[ -f .device-baseline/native/src/nic/softnic/gpu_engine.cu ] ||
  echo "device-two-gpus: no .device-baseline: the check runs without the serial engine (goal 2 not evaluated)" >&2
CHECK=$(mktemp -d)/check
mkdir -p "$CHECK"
BASE=c6ea099 OUT=$CHECK TOTAL_S=${CHECK_S:-150} bash native/tests/softnic/device_check.sh > "$CHECK/check.log" 2>&1
echo "engine check: exit $? ($(tail -1 "$CHECK/check.log"))"
tar -czf "$OUT/check.tar.gz" -C "$(dirname "$CHECK")" check
OUT=$OUT DEADLINE_S=${CAMPAIGN_S:-420} bash tools/device-campaign.sh config/campaigns/h200x2-softnic-gpu.yaml \
  --config runs=2 > "$OUT/campaign.log" 2>&1
status=$?
tail -3 "$OUT/campaign.log"
grep -E "^goal|NOT met|all evaluated" "$CHECK/summary.txt" 2> /dev/null
exit "$status"
