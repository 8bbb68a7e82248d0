#!/usr/bin/env bash
# gicomm-pair-check as two processes on this host (no RDMA: --nic none), the same code path srun
# and mpirun take: agreement, then a peer of another build, another point and a dead peer, each
# failing fast with its reason on the rank that sees it.
#   pair_check_cli.sh path/to/gicomm-pair-check
set -uo pipefail
BIN=$1
fail() { echo "pair_check_cli: FAIL: $*" >&2; exit 1; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run_pair "rank0 args" "rank1 args": both ranks; exit codes in rc0/rc1, outputs in $tmp/{0,1}.{out,err}
run_pair() {
  local p; p=$(port)
  local t0=$SECONDS
  "$BIN" --rank 0 --world-size 2 --rendezvous-port "$p" --nic none $1 >"$tmp/0.out" 2>"$tmp/0.err" &
  local pid=$!
  "$BIN" --rank 1 --world-size 2 --rendezvous-port "$p" --nic none $2 >"$tmp/1.out" 2>"$tmp/1.err"
  rc1=$?
  wait "$pid"
  rc0=$?
  elapsed=$((SECONDS - t0))
}
expect() {  # expect FILE TEXT
  grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(cat "$1")"
}

run_pair "" ""
[[ $rc0 -eq 0 && $rc1 -eq 0 ]] || fail "agreeing ranks exited $rc0/$rc1: $(cat "$tmp"/*.err)"
expect "$tmp/0.out" '"ok":true'
expect "$tmp/1.out" '"launcher":"flags"'
echo "agreement: ok ($(cat "$tmp/0.out"))"

# refused NAME "RANK0 ARGS" "RANK1 ARGS" WHICH_ERR TEXT: both ranks fail within seconds (their timeout
# is 30 s) and rank WHICH_ERR's stderr says TEXT.
refused() {
  run_pair "--timeout-ms 30000 $2" "--timeout-ms 30000 $3"
  [[ $rc0 -eq 1 && $rc1 -eq 1 ]] || fail "$1: exit $rc0/$rc1"
  ((elapsed < 10)) || fail "$1 took ${elapsed}s (timeout 30 s): not fast"
  expect "$tmp/$4.err" "$5"
  echo "$1: $(cat "$tmp/$4.err")"
}
refused "other build" "" "--build-id not-this-build" 0 "refusing rank 1 (host $(hostname)): it runs build not-this-build"
refused "other point" "--experiment one_op --point-id aa11" "--experiment one_op --point-id bb22" 1 \
  "it is at experiment one_op point aa11 run 0, this rank at experiment one_op point bb22 run 0"
refused "other run" "--run 0" "--run 1" 0 "run 1, this rank at experiment - point - run 0"

p=$(port)
t0=$SECONDS
"$BIN" --rank 0 --world-size 2 --rendezvous-port "$p" --nic none --timeout-ms 2000 >"$tmp/0.out" 2>"$tmp/0.err"
rc=$?
((rc == 1 && SECONDS - t0 < 8)) || fail "rank 0 without a peer: exit $rc after $((SECONDS - t0))s"
expect "$tmp/0.err" "rank 1 did not connect to port $p within 2.0 s"
expect "$tmp/0.out" '"ok":false'
echo "dead peer (rank 0 waits): $(cat "$tmp/0.err")"
"$BIN" --rank 1 --world-size 2 --rendezvous-port "$p" --nic none --timeout-ms 2000 >"$tmp/1.out" 2>"$tmp/1.err"
(($? == 1)) || fail "rank 1 without a peer did not fail"
expect "$tmp/1.err" "rank 0 (host localhost) did not answer at localhost:$p within 2.0 s"
echo "dead peer (rank 1 waits): $(cat "$tmp/1.err")"

# Without an RDMA device, --nic verbs: both ranks still meet, then exit 3 with one line.
if [[ -z $(ls /sys/class/infiniband 2>/dev/null) ]]; then
  run_pair "--nic verbs" "--nic verbs"
  [[ $rc0 -eq 3 && $rc1 -eq 3 ]] || fail "no RDMA device: exit $rc0/$rc1, expected 3/3"
  [[ $(wc -l <"$tmp/0.err") -eq 1 ]] || fail "no RDMA device: more than one line: $(cat "$tmp/0.err")"
  expect "$tmp/0.err" "no RDMA device found"
  echo "no RDMA device: $(cat "$tmp/0.err")"
fi

"$BIN" --nic none >"$tmp/x.out" 2>"$tmp/x.err"
(($? == 2)) || fail "no launcher: exit code"
expect "$tmp/x.err" "no rank: not started by srun"
"$BIN" --rank 0 --world-size 2 --nic ib >"$tmp/x.out" 2>"$tmp/x.err"
(($? == 2)) || fail "bad --nic: exit code"
expect "$tmp/x.err" "--nic 'ib' is not one of verbs, none"
echo "pair_check_cli: ok"
