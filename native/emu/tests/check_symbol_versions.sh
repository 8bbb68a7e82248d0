#!/bin/sh
# Symbol versions of the emulated libibverbs.so.1/libmlx5.so.1 against the installed rdma-core's
# (Debian's libibverbs1 and libmlx5-1 from ibverbs-providers), with readelf:
#   - the SONAMEs, and libmlx5's dependency on libibverbs.so.1, are rdma-core's;
#   - every version node of the installed libraries (IBVERBS_1.x, MLX5_1.x) exists in ours, and
#     ours define IBVERBS_1.0 ... IBVERBS_1.14 and MLX5_1.0 ... MLX5_1.25 (rdma-core 50 and the
#     nodes NVSHMEM 3.4.5 asks for);
#   - every entry point both define has the same default version (sym@@NODE).
# usage: check_symbol_versions.sh EMU_LIBDIR SYSTEM_LIBIBVERBS SYSTEM_LIBMLX5
set -eu
emu="$1"
sys_verbs="$(readlink -f "$2")"
sys_mlx5="$(readlink -f "$3")"
fail=0
say_fail() {
  echo "FAIL: $*"
  fail=1
}
command -v readelf >/dev/null || { echo "check_symbol_versions: readelf not found (binutils)"; exit 1; }

nodes() { readelf -V -W "$1" | sed -n '/Version definition/,/Version needs/p' | awk '/Name:/ {print $NF}' | grep -v '\.so\.' | sort -u; }
defaults() { readelf --dyn-syms -W "$1" | awk '$7 != "UND" && ($4 == "FUNC" || $4 == "OBJECT") && $8 ~ /@@/ {print $8}' | sort -u; }
soname() { readelf -d "$1" | awk '/SONAME/ {gsub(/[\[\]]/, "", $NF); print $NF}'; }

for pair in "libibverbs.so.1:$sys_verbs" "libmlx5.so.1:$sys_mlx5"; do
  lib="${pair%%:*}"
  sys="${pair#*:}"
  ours="$emu/$lib"
  [ -e "$ours" ] || { say_fail "$ours missing"; continue; }
  [ "$(soname "$ours")" = "$lib" ] || say_fail "$lib: SONAME is $(soname "$ours")"
  [ "$(soname "$sys")" = "$lib" ] || say_fail "the installed $sys has SONAME $(soname "$sys")"
  ours_nodes="$(nodes "$ours")"
  missing=""
  for n in $(nodes "$sys" | grep -v PRIVATE); do
    echo "$ours_nodes" | grep -qx "$n" || missing="$missing $n"
  done
  [ -z "$missing" ] || say_fail "$lib lacks version nodes of $(basename "$sys"):$missing"
  same=0
  only_ours=""
  sys_defaults="$(defaults "$sys")"
  for s in $(defaults "$ours"); do
    name="${s%%@@*}"
    sysdef="$(echo "$sys_defaults" | grep "^${name}@@" || true)"
    case "$s" in gicomm_emu_provider@@* | *@@GICOMM_EMU_PRIVATE) continue ;; esac
    if [ -z "$sysdef" ]; then
      only_ours="$only_ours $s"
    elif [ "$sysdef" != "$s" ]; then
      say_fail "$lib: $s, the installed library has $sysdef"
    else
      same=$((same + 1))
    fi
  done
  echo "$lib: $same entry points with the installed rdma-core's default versions ($(basename "$sys")); only in ours:${only_ours:- none}"
done

want_nodes() {
  prefix="$1"
  shift
  for v in "$@"; do echo "${prefix}_$v"; done
}
for n in $(want_nodes IBVERBS 1.0 1.1 1.5 1.6 1.7 1.8 1.9 1.10 1.11 1.12 1.13 1.14); do
  nodes "$emu/libibverbs.so.1" | grep -qx "$n" || say_fail "libibverbs.so.1 lacks $n"
done
i=0
while [ $i -le 25 ]; do
  nodes "$emu/libmlx5.so.1" | grep -qx "MLX5_1.$i" || say_fail "libmlx5.so.1 lacks MLX5_1.$i"
  i=$((i + 1))
done
readelf -d "$emu/libmlx5.so.1" | grep -q 'NEEDED.*\[libibverbs.so.1\]' || say_fail "libmlx5.so.1 does not need libibverbs.so.1"
if [ "$fail" -eq 0 ]; then
  echo "check_symbol_versions: ok (version nodes IBVERBS_1.0..1.14, MLX5_1.0..1.25; defaults match the installed rdma-core)"
fi
exit "$fail"
