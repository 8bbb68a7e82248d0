#!/usr/bin/env bash
# Build the gicomm container from the generated recipes (container/), with whichever builder this
# machine has: apptainer (clusters), docker or podman (workstations). Regenerates the recipes first.
#   tools/build-container.sh [apptainer|docker|podman]   -> gicomm.sif or image gicomm:<commit>
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m gicomm.container >/dev/null
tag="gicomm:$(git rev-parse --short HEAD 2>/dev/null || echo dev)"
builder="${1:-}"
if [ -z "$builder" ]; then
  for b in apptainer docker podman; do command -v "$b" >/dev/null && { builder=$b; break; }; done
fi
case "$builder" in
  apptainer) apptainer build gicomm.sif container/gicomm.def ;;
  docker|podman) "$builder" build -f container/Dockerfile -t "$tag" . ;;
  "") echo "no container builder found (apptainer, docker or podman); the recipes are in container/" >&2; exit 3 ;;
  *) echo "unknown builder '$builder'; allowed: apptainer, docker, podman" >&2; exit 2 ;;
esac
