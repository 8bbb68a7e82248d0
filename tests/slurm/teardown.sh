#!/usr/bin/env bash
# Stops the daemons that tests/slurm/setup.sh started (pids recorded in /run/gicomm-slurm), in reverse
# order. Daemons that were already running before setup.sh ran are left alone; configs, the munge key
# and the accounting database are kept so the next setup.sh is fast.
set -euo pipefail
STATE_DIR=/run/gicomm-slurm
[[ $(id -u) -eq 0 ]] || { echo "[slurm-teardown] must run as root" >&2; exit 1; }
[[ -d $STATE_DIR ]] || exit 0
for name in slurmd slurmctld slurmdbd mariadbd munged; do
  f=$STATE_DIR/$name.pid
  [[ -s $f ]] || continue
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    echo "[slurm-teardown] stopping $name (pid $pid)" >&2
    kill "$pid"
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -f "$f"
done
