#!/bin/sh
# gicomm-pair-check with two ranks on the emulated rdma-core: two processes, each its own emulated
# host with its own sysfs view (GICOMM_EMU_SYSFS_DIR, read back through --sysfs), RDMA writes over
# the wire, and the path proof from the emulated port counters.
#   pair_check_two_ranks.sh PAIR_CHECK WORKDIR GID_INDEX
set -u
bin=$1 dir=$2 gid=$3
# Below the kernel's ephemeral range (32768 and up by default), where the kernel hands ports to
# outgoing connections and to tests that ask it for a free one; apart from two_rank_emu.sh's
# 20000-27999.
port=$(( 28000 + $$ % 4000 ))
mkdir -p "$dir"
rm -rf "$dir/rank0" "$dir/rank1"
common="--world-size 2 --rendezvous-port $port --device mlx5_0 --gid-index $gid --messages 2000 --bytes 5000 --timeout-ms 30000 --work-timeout-ms 30000"
# shellcheck disable=SC2086
GICOMM_EMU_SYSFS_DIR=$dir/rank0 "$bin" --rank 0 --sysfs "$dir/rank0" $common > "$dir/rank0.out" 2>&1 &
pid0=$!
# shellcheck disable=SC2086
GICOMM_EMU_SYSFS_DIR=$dir/rank1 "$bin" --rank 1 --sysfs "$dir/rank1" $common > "$dir/rank1.out" 2>&1
rc1=$?
wait $pid0
rc0=$?
cat "$dir/rank0.out" "$dir/rank1.out"
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && grep -q '"path":{"ok":true' "$dir/rank0.out" && grep -q '"data":"ok"' "$dir/rank1.out" &&
  echo "pair_check_two_ranks: ok" || { echo "pair_check_two_ranks: FAILED (rank 0 exit $rc0, rank 1 exit $rc1)"; exit 1; }
