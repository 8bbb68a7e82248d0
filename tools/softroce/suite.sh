#!/usr/bin/env bash
# The Soft-RoCE suite, run inside the guest by tools/softroce/run.sh (tools/softroce/ci.sh does
# both): gicomm's verbs code against a real kernel RDMA stack, rxe0 and rxe1 on a veth pair.
#
#   tools/softroce/suite.sh BUILD_DIR [--also 'PROGRAM ARGS'] ...
#
#   1. loopback      mini-proxy's verbs backend, QP pairs on rxe0 (topology: loopback)
#   2. two ports     the same backend, rxe0's QPs connected to rxe1's through the endpoint exchange,
#                    CPU producers -> workers -> RDMA writes; port counters prove the path
#   3. two ranks     gicomm-pair-check as two processes (launcher flags, TCP exchange), rank 0 on
#                    rxe0, rank 1 on rxe1: 8-byte inline writes, then 4 KiB writes of 4 packets
#   4. wrong device  rank 0 configured on rxe0 but forced to send over rxe1: the counter check must
#                    fail the point and name rxe1
#   5. driver        the benchmark harness's two-rank run (gicomm-test-two-rank: the drivers' runner,
#                    launcher, out-of-band session, peer service and path proof, mini-proxy's verbs
#                    workers fed by CPU producers, as gicomm-bench-proxy needs a GPU): rank 0 on
#                    rxe0 writes records, rank 1 on rxe1 serves; path_check ok on both ranks; then
#                    proxy_one_op's ping-pong, rank 1's responder answering each ping over rxe1
#   6. floors        gicomm doctor's CPU-posted NIC floor (gicomm-bench-floors, floor nic_verbs: one
#                    host thread's 8-byte RDMA writes, latency and rate) between two ranks, rank 0 on
#                    rxe0, rank 1 on rxe1: both records ok, path_check ok (only in a CUDA build,
#                    which builds the floors driver; it touches no GPU)
#   7. --also        each extra program, run as given (e.g. a verbs test suite that takes device
#                    names: --also 'build/ctest/bin/some_suite --device rxe0 --peer rxe1')
# Latency under TCG is meaningless; every step has a generous time limit instead.
set -uo pipefail
BUILD=${1:?usage: suite.sh BUILD_DIR [--also CMD]...}
shift
BIN=$BUILD/bin
EXTRA=()
while (($#)); do
  case $1 in
    --also) EXTRA+=("$2"); shift 2 ;;
    *) echo "suite.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
GID=${GICOMM_RXE_GID_INDEX:-1}
LIMIT=300
OUT=$(mktemp -d)
failed=()
passed=0

step() {  # step NAME COMMAND...: run with a time limit, print PASS/FAIL with its time
  local name=$1; shift
  local t0=$SECONDS
  echo "=== $name: $*"
  if timeout -k 5 "$LIMIT" "$@"; then
    echo "--- PASS $name ($((SECONDS - t0)) s)"
    passed=$((passed + 1))
  else
    echo "--- FAIL $name (exit $?, $((SECONDS - t0)) s)"
    failed+=("$name")
  fi
}

# Both ranks of gicomm-pair-check; extra args: rank 0's, then rank 1's, separated by '--'.
pair() {
  local port=$1; shift
  local r0=() r1=()
  while (($#)) && [[ $1 != -- ]]; do r0+=("$1"); shift; done
  shift
  r1=("$@")
  "$BIN/gicomm-pair-check" --rank 0 --world-size 2 --rendezvous-port "$port" --gid-index "$GID" \
    --timeout-ms 120000 "${r0[@]}" >"$OUT/r0.json" 2>"$OUT/r0.err" &
  local pid=$!
  "$BIN/gicomm-pair-check" --rank 1 --world-size 2 --rendezvous-port "$port" --gid-index "$GID" \
    --timeout-ms 120000 "${r1[@]}" >"$OUT/r1.json" 2>"$OUT/r1.err"
  local rc1=$?
  wait "$pid"
  local rc0=$?
  echo "rank 0 (exit $rc0): $(cat "$OUT/r0.json")"
  echo "rank 1 (exit $rc1): $(cat "$OUT/r1.json")"
  cat "$OUT/r0.err" "$OUT/r1.err" >&2
  return $((rc0 || rc1))
}

two_ranks() {
  pair 17600 --device rxe0 --messages 4096 --bytes 8 -- --device rxe1 --messages 4096 --bytes 8 &&
    grep -q '"data":"ok"' "$OUT/r1.json" &&
    pair 17601 --device rxe0 --messages 500 --bytes 4096 -- --device rxe1 --messages 500 --bytes 4096
}

wrong_device() {
  # Rank 1 receives on rxe0; rank 0 says rxe0 but its QPs live on rxe1.
  if pair 17602 --device rxe0 --traffic-device rxe1 --messages 500 --bytes 4096 -- \
    --device rxe0 --messages 500 --bytes 4096; then
    echo "the check passed a point whose traffic left through rxe1"
    return 1
  fi
  grep -q 'the traffic went over another device: rxe1 port 1' "$OUT/r0.json" ||
    { echo "rank 0's reason does not name rxe1"; return 1; }
  grep -q '"data":"ok"' "$OUT/r1.json" || { echo "the data did not arrive (so this proves nothing)"; return 1; }
  echo "caught: $(grep -o 'path check failed[^"]*' "$OUT/r0.json" | head -1)"
}

# harness_ranks NAME DRIVER EXPERIMENT PORT POINT_JSON [FLAGS...]: a benchmark driver's two-rank
# run of one point, rank 0 on rxe0 (records in $OUT/NAME0.jsonl), rank 1 on rxe1 serving it; true
# when both ranks exit 0.
harness_ranks() {
  local name=$1 bin=$2 experiment=$3 port=$4 pts=$OUT/$1.points.jsonl
  echo "$5" >"$pts"
  shift 5
  local common=(--experiment "$experiment" --points "$pts" --campaign softroce --host guest --platform softroce
    --provenance-id softroce --timeout-ms 60000 --gid-index "$GID" --world-size 2 --rendezvous-port "$port" "$@")
  "$bin" "${common[@]}" --rank 1 --nic-device rxe1 --out "$OUT/${name}1.jsonl" 2>"$OUT/${name}1.err" &
  local pid=$!
  "$bin" "${common[@]}" --rank 0 --nic-device rxe0 --out "$OUT/${name}0.jsonl" 2>"$OUT/${name}0.err"
  local rc0=$?
  wait "$pid"
  local rc1=$?
  cat "$OUT/${name}0.err" "$OUT/${name}1.err" "$OUT/${name}0.jsonl"
  ((rc0 == 0 && rc1 == 0))
}

driver() {
  harness_ranks driver "$BIN/gicomm-test-two-rank" proxy_msg_rate 17603 \
    '{"point_id": "rxe-1", "nic_backend": "verbs", "params": {"mode": "rate", "workers": 2, "rings": 2, "batch": 4, "msgs": 1000}}' &&
    grep -q '"verdict": "ok"' "$OUT/driver0.jsonl" && grep -q '"status": "ok"' "$OUT/driver0.jsonl"
}

# The round trip through rank 1's responder: pings rxe0 -> rxe1, answers rxe1 -> rxe0.
driver_pingpong() {
  harness_ranks pingpong "$BIN/gicomm-test-two-rank" proxy_one_op 17605 \
    '{"point_id": "rxe-pp", "nic_backend": "verbs", "params": {"mode": "pingpong", "workers": 1}}' --warmup 5 --iters 50 &&
    grep -q '"verdict": "ok"' "$OUT/pingpong0.jsonl" && grep -q '"status": "ok"' "$OUT/pingpong0.jsonl" &&
    grep -q '"peer_tx_bytes": [1-9]' "$OUT/pingpong0.jsonl"
}

floors() {
  harness_ranks floors "$BIN/gicomm-bench-floors" floors 17604 \
    '{"point_id": "rxe-floor", "nic_backend": "verbs", "params": {"floor": "nic_verbs"}}' --warmup 10 --iters 100 &&
    [[ $(grep -c '"status": "ok"' "$OUT/floors0.jsonl") == 2 ]] &&
    [[ $(grep -c '"verdict": "ok"' "$OUT/floors0.jsonl") == 2 ]] && grep -q '"topology": "two-rank"' "$OUT/floors0.jsonl"
}

echo "suite: $(uname -r), devices: $(ls /sys/class/infiniband | tr '\n' ' ')"
for f in "$BIN/proxy_verbs_test" "$BIN/gicomm-pair-check"; do
  [[ -x $f ]] || { echo "suite: $f is missing (a native build with rdma-core is needed)"; exit 2; }
done
step loopback "$BIN/proxy_verbs_test" --device rxe0 --gid-index "$GID"
step two-ports "$BIN/proxy_verbs_test" --device rxe0 --peer-device rxe1 --gid-index "$GID"
export BIN GID OUT
export -f pair two_ranks wrong_device harness_ranks driver driver_pingpong floors
step two-ranks bash -c two_ranks
step wrong-device bash -c wrong_device
if [[ -x $BIN/gicomm-test-two-rank ]]; then
  step driver bash -c driver
  step driver-pingpong bash -c driver_pingpong
else
  echo "suite: $BIN/gicomm-test-two-rank is missing: the driver step is not run"
  failed+=("driver (missing)")
fi
if [[ -x $BIN/gicomm-bench-floors ]]; then
  step floors bash -c floors
else
  echo "suite: $BIN/gicomm-bench-floors is missing (a host-only build): the floors step is not run"
fi
for cmd in "${EXTRA[@]}"; do
  # shellcheck disable=SC2086 # the extra command is given as one string of words
  step "also: $cmd" $cmd
done
rm -rf "$OUT"
echo "suite: $passed passed, ${#failed[@]} failed${failed:+: ${failed[*]}}"
((${#failed[@]} == 0))
