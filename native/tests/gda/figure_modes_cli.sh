#!/bin/sh
# No-GPU CLI check of gicomm-bench-gda's figure experiments (inline_payload, completion_scope,
# sm_clock): points the driver refuses before touching CUDA (a parameter outside its declaration,
# or a size the inline path cannot carry) become failed records that name the parameter, the value
# and what is allowed (exit 0), and where no GPU is visible a valid point of each exits 3 with one
# line.
# Usage: figure_modes_cli.sh BENCH WORKDIR
set -u
B=$1
D=$2
mkdir -p "$D" && cd "$D" || exit 1
rm -f fig_*.jsonl fig_*.err
C="--campaign ci --host ci --platform local --provenance-id ci"
fail() { echo "FAIL: $*"; exit 1; }
refused() {  # experiment, expected error text, params...
  e=$1; want=$2; shift 2
  "$B" --experiment "$e" --out "fig_$e.jsonl" $C "$@" 2>/dev/null || fail "$e $*: exit $?"
  grep -Eq '"status": ?"failed"' "fig_$e.jsonl" || fail "$e $*: no failed record"
  grep -Eq "\"experiment\": ?\"$e\"" "fig_$e.jsonl" || fail "$e $*: record names another experiment"
  grep -qF "$want" "fig_$e.jsonl" || fail "$e $*: error does not say '$want': $(cat fig_$e.jsonl)"
  rm -f "fig_$e.jsonl"
}
refused inline_payload 'kMaxInlineRc' --param payload=inline --param size=221
refused inline_payload "parameter 'payload': value 'registered' is not allowed; allowed: 'inline', 'pointer'" \
  --param payload=registered --param size=8
refused inline_payload "parameter 'size': value 4096 is out of range; allowed: an integer from 1 to 256" \
  --param payload=pointer --param size=4096
refused completion_scope "parameter 'qps_per_peer': value 0 is out of range; allowed: an integer from 1 to 64" \
  --param qps_per_peer=0 --param scope=all
refused completion_scope "parameter 'scope': value 'some' is not allowed; allowed: 'used', 'all'" \
  --param qps_per_peer=4 --param scope=some
refused sm_clock "parameter 'clock': value 1400 has the wrong type; allowed: 'observed'" \
  --param clock=1400 --param payload=inline
# Where a GPU is visible the valid points would run for real: this test stops here.
if [ -e /dev/nvidia0 ] || [ -e /dev/nvidiactl ]; then echo "GPU present: valid points not run"; exit 0; fi
for args in "inline_payload --param payload=inline --param size=92" \
            "completion_scope --param qps_per_peer=8 --param scope=used" \
            "sm_clock --param clock=observed --param payload=pointer"; do
  set -- $args
  e=$1; shift
  "$B" --experiment "$e" --out "fig_$e.jsonl" $C "$@" 2>"fig_$e.err"
  rc=$?
  [ $rc -eq 3 ] || fail "$e: exit $rc without a GPU (want 3)"
  [ "$(wc -l < "fig_$e.err")" -eq 1 ] || fail "$e: stderr is not one line: $(cat fig_$e.err)"
  grep -q 'GPU' "fig_$e.err" || fail "$e: stderr does not name the missing GPU"
done
echo "ok"
