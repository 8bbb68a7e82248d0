#!/bin/sh
# Two-rank runs of a driver on the emulated rdma-core, CPU only (each process is one emulated host
# with its own sysfs view): the runner, launcher, out-of-band session, the peer's side and the
# port-counter path proof, end to end; then what must fail, and how.
#   two_rank_emu.sh DRIVER WORKDIR GID_INDEX LINK     (LD_LIBRARY_PATH: the emulated rdma-core)
#   1. two ranks, two points: records on rank 0 only, path_check ok on both ranks, peer provenance
#   2. rank 0's QPs forced onto another device than --nic-device: the point is failed, with why
#   3. no rank 1 (no rank 0): the other fails within the peer timeout, naming the missing rank
#   4. rank 1 with another points file: both refuse, naming the point
#   5. one rank: refused without --topology loopback (exit 3); with it, a path_check on the record
#   6. proxy_one_op pingpong: rank 1's responder answers every ping; traffic proven both ways (and
#      with the answers' address and rkey named in the request, as mini-gda names them)
#   7. a responder that never answers: rank 0's record fails, saying it saw no answer and what rank
#      1's responder saw (the ping, then no further one within its wait)
#   8. `responder: gpu` asked of a rank 1 whose driver has no GPU responder (this CPU driver): rank
#      0's record fails with rank 1's refusal, naming the key and value; 6's records name the host
#      responder that answered them
set -u
bin=$1 dir=$2 gid=$3 link=$4
# 16 ports per run, below the kernel's ephemeral range (32768 and up by default): there the kernel
# hands ports to outgoing connections and to the tests beside this one that ask it for a free port
# (CI saw "cannot listen on port 42614: in use"). The ib run in 20000-23999, the roce run, which
# ctest may run beside it, in 24000-27999; pair_check_two_ranks.sh takes 28000-31999.
case $link in ib) port=20000 ;; *) port=24000 ;; esac
port=$(( port + $$ % 250 * 16 ))
rm -rf "$dir" && mkdir -p "$dir"
# The emulation rewrites its counter files once per engine pass: on tmpfs, not the build disk.
sys=$(mktemp -d /dev/shm/gicomm-two-rank.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$sys"' EXIT
fails=0
bad() { echo "two_rank_emu: FAILED: $*"; fails=$((fails + 1)); }
points=$dir/points.jsonl
cat > "$points" <<PTS
{"point_id": "tr-1", "transport": "mini-proxy", "nic_backend": "verbs", "params": {"mode": "rate", "workers": 1, "rings": 1, "batch": 1, "msgs": 3000}}
{"point_id": "tr-2", "transport": "mini-proxy", "nic_backend": "verbs", "params": {"mode": "rate", "workers": 2, "rings": 2, "batch": 4, "msgs": 5000}}
PTS
common="--campaign test --host h --platform local --provenance-id t --gid-index $gid"
# rank R NAME [extra flags...]: runs rank R of the pair (its own emulated host, device mlx5_R)
rank() {
  r=$1 name=$2
  shift 2
  # shellcheck disable=SC2086
  GICOMM_EMU_DEVICES=${DEVICES:-mlx5_$r:$link} GICOMM_EMU_SYSFS_DIR=$sys/$name.sys$r \
    "$bin" --experiment "${EXP:-proxy_msg_rate}" --timeout-ms "${TIMEOUT:-20000}" $common --nic-device "mlx5_$r" --points "${PTS:-$points}" --out "$dir/$name.rank$r.jsonl" --rank "$r" \
    --world-size 2 --rendezvous-port "$port" "$@" > "$dir/$name.rank$r.log" 2>&1
}

# 1. two ranks
rank 1 pair & p1=$!
rank 0 pair; rc0=$?
wait $p1; rc1=$?
cat "$dir/pair.rank0.log" "$dir/pair.rank1.log"
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || bad "two ranks: exit $rc0 / $rc1"
[ "$(grep -c '"status": "ok"' "$dir/pair.rank0.jsonl" 2>/dev/null)" = 2 ] || bad "two ranks: rank 0 has not 2 ok records"
[ "$(grep -c '"verdict": "ok"' "$dir/pair.rank0.jsonl" 2>/dev/null)" = 2 ] || bad "two ranks: path_check not ok"
grep -q '"peer_rx_bytes": [1-9]' "$dir/pair.rank0.jsonl" || bad "two ranks: no bytes received by the peer"
grep -q '"peer": {"rank": 1' "$dir/pair.rank0.jsonl" || bad "two ranks: no peer provenance"
[ "$(grep -c '"topology": "two-rank"' "$dir/pair.rank0.jsonl")" = 2 ] || bad "two ranks: topology is not two-rank"
[ ! -s "$dir/pair.rank1.jsonl" ] || bad "two ranks: rank 1 wrote records"
head -c 1500 "$dir/pair.rank0.jsonl"; echo
port=$((port + 1))

# 2. rank 0's traffic over mlx5_1 while mlx5_0 is configured
rank 1 wrong & p1=$!
DEVICES=mlx5_0:$link,mlx5_1:$link GICOMM_TEST_TRAFFIC_DEVICE=mlx5_1 rank 0 wrong; rc0=$?
wait $p1
cat "$dir/wrong.rank0.log"
grep -q '"verdict": "failed"' "$dir/wrong.rank0.jsonl" 2>/dev/null &&
  grep -q '"status": "failed", "error": "path check: path .*mlx5_0 port 1' "$dir/wrong.rank0.jsonl" ||
  bad "wrong device: not recorded failed with the path check's reason"
grep -o '"status": "failed", "error": "[^"]*"' "$dir/wrong.rank0.jsonl" | head -1
port=$((port + 1))

# 3. one rank alone (R) must fail within the peer timeout, naming the other, and write no record
alone() {
  r=$1 other=$((1 - $1))
  start=$(date +%s)
  rank "$r" dead --peer-timeout-ms 2000
  rc=$?
  took=$(( $(date +%s) - start ))
  cat "$dir/dead.rank$r.log"
  [ $rc -eq 1 ] && [ $took -le 15 ] && grep -q "rank $other" "$dir/dead.rank$r.log" ||
    bad "rank $r alone: exit $rc after $took s"
  [ ! -s "$dir/dead.rank$r.jsonl" ] || bad "rank $r alone: a record was written"
  port=$((port + 1))
}
alone 0
alone 1

# 4. rank 1 with another points file
head -1 "$points" > "$dir/other.jsonl"
PTS=$dir/other.jsonl rank 1 other & p1=$!
rank 0 other; rc0=$?
wait $p1; rc1=$?
cat "$dir/other.rank0.log" "$dir/other.rank1.log"
[ $rc0 -ne 0 ] && [ $rc1 -ne 0 ] && grep -q "point tr-2 is not in rank 1's points file" "$dir/other.rank1.log" ||
  bad "other points: exit $rc0 / $rc1"
port=$((port + 1))

# 5. one rank
one() {
  name=$1
  shift
  # shellcheck disable=SC2086
  GICOMM_EMU_DEVICES=mlx5_0:$link GICOMM_EMU_SYSFS_DIR=$sys/one.sys "$bin" --experiment proxy_msg_rate \
    --timeout-ms 20000 $common --nic-device mlx5_0 --points "$points" \
    --out "$dir/$name.jsonl" "$@" > "$dir/$name.log" 2>&1
}
one single; rc=$?
cat "$dir/single.log"
[ $rc -eq 3 ] && grep -q 'launch two ranks' "$dir/single.log" || bad "one rank: exit $rc"
echo '{"point_id": "lb-1", "nic_backend": "verbs", "params": {"mode": "rate", "workers": 1, "rings": 1, "msgs": 200}}' \
  > "$dir/loopback.points.jsonl"
points=$dir/loopback.points.jsonl one loopback --topology loopback; rc=$?
cat "$dir/loopback.log"
[ $rc -eq 0 ] && [ "$(grep -c '"path_check": {' "$dir/loopback.jsonl")" = 1 ] &&
  grep -q '"topology": "loopback"' "$dir/loopback.jsonl" || bad "loopback: exit $rc"
grep -o '"verdict": "[a-z]*"' "$dir/loopback.jsonl" | sed 's/^/loopback /'

port=$((port + 1))

# 6. the round trip through rank 1's responder
echo '{"point_id": "pp-1", "transport": "mini-proxy", "nic_backend": "verbs", "params": {"mode": "pingpong", "workers": 1}}' \
  > "$dir/pingpong.points.jsonl"
export EXP=proxy_one_op PTS=$dir/pingpong.points.jsonl
rank 1 pingpong --warmup 10 --iters 300 & p1=$!
rank 0 pingpong --warmup 10 --iters 300; rc0=$?
wait $p1; rc1=$?
cat "$dir/pingpong.rank0.log" "$dir/pingpong.rank1.log"
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || bad "pingpong: exit $rc0 / $rc1"
grep -q '"metric": "rtt_ns".*"status": "ok"\|"status": "ok".*"metric": "rtt_ns"' "$dir/pingpong.rank0.jsonl" ||
  bad "pingpong: no ok rtt_ns record"
grep -q '"verdict": "ok"' "$dir/pingpong.rank0.jsonl" || bad "pingpong: path_check not ok"
grep -q '"peer_tx_bytes": [1-9]' "$dir/pingpong.rank0.jsonl" && grep -q '"rx_bytes": [1-9]' "$dir/pingpong.rank0.jsonl" ||
  bad "pingpong: the answers are not in both ranks' counters"
grep -q '"topology": "two-rank"' "$dir/pingpong.rank0.jsonl" || bad "pingpong: topology is not two-rank"
grep -q 'responder ok: saw 310 pings, answered 310' "$dir/pingpong.rank1.log" || bad "pingpong: rank 1 did not answer 310 pings"
grep -o '"p50": [0-9.e+]*' "$dir/pingpong.rank0.jsonl" | sed 's/^/pingpong rtt_ns /'
port=$((port + 1))

# 6b. the same, rank 0 naming the answers' address and rkey in its request (as mini-gda does)
rank 1 explicit --warmup 0 --iters 50 & p1=$!
GICOMM_TEST_RESPONDER_TARGET=explicit rank 0 explicit --warmup 0 --iters 50; rc0=$?
wait $p1; rc1=$?
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && grep -q '"verdict": "ok"' "$dir/explicit.rank0.jsonl" &&
  grep -q 'responder ok: saw 50 pings, answered 50' "$dir/explicit.rank1.log" ||
  { cat "$dir/explicit.rank0.log" "$dir/explicit.rank1.log"; bad "explicit target: exit $rc0 / $rc1"; }
port=$((port + 1))

# 7. rank 1's responder sees the pings and never answers (tests only)
GICOMM_TEST_RESPONDER_MUTE=1 rank 1 mute --warmup 0 --iters 5 & p1=$!
TIMEOUT=1500 rank 0 mute --warmup 0 --iters 5; rc0=$?
wait $p1
cat "$dir/mute.rank0.log"
grep -q '"status": "failed", "error": "ping 0: no answer within 1500 ms (this rank timed out waiting for the pong); rank 1 (host [^)]*).s responder saw 1 pings, answered 0, then ' \
  "$dir/mute.rank0.jsonl" 2>/dev/null || bad "mute: rank 0's record does not say which side timed out"
grep -o '"error": "[^"]*"' "$dir/mute.rank0.jsonl" | head -1
port=$((port + 1))

# 8. the GPU responder asked of a driver without it; the host responder named in the records
grep -q '"responder": "rank 1 host thread via its mini-proxy worker (verbs)"' "$dir/pingpong.rank0.jsonl" ||
  bad "pingpong: the records do not name rank 1's host responder"
echo '{"point_id": "pp-gpu", "transport": "mini-proxy", "nic_backend": "verbs", "params": {"mode": "pingpong", "workers": 1, "responder": "gpu"}}' \
  > "$dir/gpu.points.jsonl"
PTS=$dir/gpu.points.jsonl
rank 1 gpu --warmup 0 --iters 5 & p1=$!
rank 0 gpu --warmup 0 --iters 5
wait $p1
grep -q "\"status\": \"failed\", \"error\": \"[^\"]*responder 'gpu': this driver of rank 1 has no GPU responder" \
  "$dir/gpu.rank0.jsonl" 2>/dev/null || { cat "$dir/gpu.rank0.log" "$dir/gpu.rank1.log"; bad "gpu responder: not refused by rank 1 naming it"; }
grep -o '"error": "[^"]*"' "$dir/gpu.rank0.jsonl" | head -1
unset EXP PTS

[ $fails -eq 0 ] && echo "two_rank_emu: ok" || { echo "two_rank_emu: $fails checks FAILED"; exit 1; }
