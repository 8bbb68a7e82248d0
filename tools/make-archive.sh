#!/usr/bin/env bash
# A self-contained tarball of the artifact: code, configs, envs, container recipes and the archived
# campaigns (everything committed at HEAD), for evaluators and long-term storage.
#   tools/make-archive.sh [OUT_DIR]            -> OUT_DIR/gicomm-<commit>.tar.gz (default dist/)
#   WITH_WHEELS=1 tools/make-archive.sh        also bundles the pinned Python wheels (offline set-up)
set -euo pipefail
cd "$(dirname "$0")/.."
out_dir="${1:-dist}"
commit=$(git rev-parse --short HEAD)
name="gicomm-${commit}"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
git archive --format=tar --prefix="${name}/" HEAD | tar -x -C "$stage"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "warning: the working tree has uncommitted changes; the archive holds HEAD ($commit) only" >&2
fi
if [ "${WITH_WHEELS:-0}" = 1 ]; then
  python3 -m pip download -q -r requirements.txt -d "$stage/$name/wheels"
fi
mkdir -p "$out_dir"
tar -C "$stage" -czf "$out_dir/$name.tar.gz" "$name"
echo "$out_dir/$name.tar.gz"
