#!/usr/bin/env bash
# Run a campaign on a GPU machine that has no network (the project's lent H200s) and pack what the
# project keeps (hosts/ provenance, raw/ records, logs) into $OUT for the trip back.
#   tools/device-campaign.sh config/campaigns/h200x2.yaml [extra snakemake args]
# Python packages missing there travel as wheels in .whl/ (see README "GPU machines without network").
set -euo pipefail
cd "$(dirname "$0")/.."
cfg=$1; shift
out=${OUT:-/tmp/gicomm-out}
mkdir -p "$out"
source tools/device-env.sh
campaign=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["campaign"])' "$cfg")
nvidia-smi -q -d CLOCK > "$out/clocks-before.txt" 2>&1 || true
nvidia-smi topo -m > "$out/topology.txt" 2>&1 || true
start=$(date +%s)
set +e
# DEADLINE_S stops the campaign (SIGINT: running jobs are killed, finished points stay in
# results/<campaign>/partial/) early enough to pack; rerun with results/<campaign> carried back and
# only the missing points are measured.
timeout --signal=INT --kill-after=30 "${DEADLINE_S:-86400}" \
  python3 -m snakemake --profile profiles/local --configfile "$cfg" --cores all \
  "$@" 2>&1 | tee "$out/snakemake.log"
status=${PIPESTATUS[0]}
set -e
echo "campaign $campaign: snakemake exit $status after $(( $(date +%s) - start )) s" | tee -a "$out/snakemake.log"
nvidia-smi -q -d CLOCK > "$out/clocks-after.txt" 2>&1 || true
kept=()
for d in hosts raw partial logs tidy; do [ -d "results/$campaign/$d" ] && kept+=("$campaign/$d"); done
tar -czf "$out/$campaign.tar.gz" -C results "${kept[@]}"
exit "$status"
