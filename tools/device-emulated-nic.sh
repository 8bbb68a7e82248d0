#!/usr/bin/env bash
# The NIC experiments over the emulated rdma-core on a lent one-GPU H200 (no RDMA NIC), through the
# pipeline: config/campaigns/h200x1-emulated-nic.yaml (gda_one_op, gda_msg_rate, connection_scaling
# on mlx5; proxy_one_op, proxy_msg_rate on verbs; library_baselines with NVSHMEM's IBGDA and IBRC,
# their two PEs on the one GPU under a private MPS daemon the runner starts and stops), two ranks as
# two local processes sharing the GPU, one run, and the campaign's tables and report pages.
#   tools/device-emulated-nic.sh            (from the repository root, as one device call)
# Expected: about 4 min of points once the targets are built (the build reuses
# ${GICOMM_DEVICE_BUILD:-build/device}: a few minutes more when it is cold). Everything stops by
# DEADLINE_S (default 420 s) and is packed under $OUT/nicpipe/:
#   h200x1-emulated-nic.tar.gz  hosts/, raw/, partial/, logs/, tidy/ of the campaign
#   report.tar.gz               results/h200x1-emulated-nic/report (nic.html: the NIC paths run here)
#   snakemake.log, summary.txt  the pipeline's log; the NIC paths table, every point's status, and
#                               the NVSHMEM harness's checks and MPS lines from the bench logs
# Check in summary.txt: each experiment's points ok with rdma_provider emulated and topology
# two-rank, path_check ok (library_baselines has no counter check: "not recorded"); the
# library_baselines rows of nvshmem-ibgda and nvshmem-ibrc ok with params pes_per_gpu 2 and mps on,
# every "CHECK ... PASS" (none FAIL), and "MPS: control daemon ... started" then "... stopped".
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gicomm-out}/nicpipe
mkdir -p "$out"
cfg=config/campaigns/h200x1-emulated-nic.yaml
campaign=h200x1-emulated-nic
build=${GICOMM_DEVICE_BUILD:-build/device}
mkdir -p "$build" build
# The pipeline builds into build/<host> (host h200x1): let it be the shared device build.
if [ ! -e build/h200x1 ]; then ln -s "$(realpath "$build")" build/h200x1; fi
start=$(date +%s)
# The whole pipeline (tables and report included); stopped by DEADLINE_S with time left to pack.
# Finished points stay: the report can be rendered here from the raw records carried back.
OUT=$out DEADLINE_S=${DEADLINE_S:-420} tools/device-campaign.sh "$cfg"
status=$?
python3 - "$campaign" > "$out/summary.txt" 2>&1 <<'PY'
import sys
sys.path.insert(0, "workflow")
from pathlib import Path
import pandas as pd
from gicomm.nicpaths import nic_paths
campaign = sys.argv[1]
tidy = Path("results") / campaign / "tidy" / "records.csv"
if not tidy.exists():
    print(f"no tidy table ({tidy}): see snakemake.log"); sys.exit(0)
df = pd.read_csv(tidy)
print(nic_paths(df).to_string(index=False))
cols = [c for c in ["experiment", "transport", "nic_backend", "rdma_provider", "topology",
                    "doorbell_target", "path_check", "param_pes_per_gpu", "param_mps", "metric",
                    "status", "p50", "error"] if c in df]
print(df[cols].to_string(index=False, max_colwidth=160))
PY
# The NVSHMEM harness's correctness checks and the MPS daemon's start and stop (bench job logs).
{
  echo "== NVSHMEM checks and MPS (results/$campaign/logs/bench)"
  grep -rhE 'CHECK [a-z0-9_]+ (PASS|FAIL)|MPS: |correctness checks failed' "results/$campaign/logs/bench" 2>/dev/null |
    sort | uniq -c | head -120
} >> "$out/summary.txt"
if [ -d "results/$campaign/report" ]; then tar -czf "$out/report.tar.gz" -C results "$campaign/report"; fi
echo "device-emulated-nic: exit $status after $(( $(date +%s) - start )) s" | tee -a "$out/summary.txt"
exit "$status"
