#!/usr/bin/env bash
# One device-tool call on a lent GPU machine (no network, no NIC): build the native targets as the
# pipeline does, run the mini-gda GPU protocol check (every engine the machine allows), smoke-run
# gicomm-bench-gda's connection_scaling on the softnic (a code-path check, not a NIC measurement),
# then the campaign through tools/device-campaign.sh. Everything lands under $OUT.
#   DEADLINE_S=420 tools/device-verify.sh config/campaigns/h200x2.yaml [extra snakemake args]
# SKIP_CHECKS=1 runs the campaign only (a second call that resumes a campaign cut by DEADLINE_S).
set -uo pipefail
cd "$(dirname "$0")/.."
cfg=$1; shift
out=${OUT:-/tmp/gicomm-out}
mkdir -p "$out/checks"
source tools/device-env.sh
host=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["host"])' "$cfg")
log=$out/checks/log.txt
if [ -z "${SKIP_CHECKS:-}" ]; then
  {
    echo "== $(date -u +%FT%TZ) build (snakemake build/$host/gicomm_build.json)"
    nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,driver_version --format=csv
    t0=$(date +%s)
    python3 -m snakemake --profile profiles/local --configfile "$cfg" --cores all "build/$host/gicomm_build.json" \
      > "$out/checks/build.log" 2>&1
    echo "build exit $? in $(( $(date +%s) - t0 )) s"
    bin=build/$host/bin
    echo "== $(date -u +%FT%TZ) gicomm-gda-gpu-check"
    timeout 240 "$bin/gicomm-gda-gpu-check"
    echo "gpu-check exit $?"
    echo "== $(date -u +%FT%TZ) connection_scaling smoke on softnic-gpu"
    python3 - > /tmp/cs_points.jsonl <<'EOF'
import json
pts = [(q, 32, 8) for q in (64, 1024, 4096)] + [(64, 8192, 8), (1024, 32, 4096)]
for i, (q, w, size) in enumerate(pts):
    params = {"active_qps": q, "writes_per_visit": w, "direction": "send_recv", "size": size,
              "producers": 64, "nic_backend": "softnic-gpu"}
    print(json.dumps({"point_id": f"smoke{i}", "params": params}))
EOF
    timeout 120 "$bin/gicomm-bench-gda" --experiment connection_scaling --points /tmp/cs_points.jsonl \
      --out "$out/checks/connection_scaling_softnic_smoke.jsonl" --campaign softnic-smoke --host "$host" \
      --platform h200 --run-index 0 --provenance-id softnic-smoke --iters 3 --timeout-ms 5000 \
      --nic-backend softnic-gpu
    echo "connection_scaling smoke exit $?"
  } 2>&1 | tee "$log"
fi
tools/device-campaign.sh "$cfg" "$@"
