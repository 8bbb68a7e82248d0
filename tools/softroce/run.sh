#!/usr/bin/env bash
# Run a program inside a QEMU guest that has a real kernel RDMA stack: Soft-RoCE (rdma_rxe) on the
# two ends of a veth pair, rxe0 <-> rxe1. No RDMA NIC, GPU or KVM is needed.
#
#   tools/softroce/run.sh [options] -- PROGRAM [ARGS...]
#
# The guest runs Debian's stock kernel (the linux-image package is downloaded, never installed, and
# unpacked into a cache outside the repository, keyed on its package version), boots from a small
# busybox initramfs under QEMU (TCG; KVM only where the CPU shows vmx/svm), sees this machine's
# root file system read-only over virtio-9p with a tmpfs overlay on top, and runs PROGRAM from the
# current directory (same path as here) as root, after tools/softroce/guest-rxe.sh has created
# rxe0 and rxe1. Binaries built here run there unchanged. PROGRAM's stdout and stderr stream to this
# terminal; its exit status is this script's (124 when the guest ran out of time, 125 when the
# guest could not be prepared or booted).
#
# Options:
#   --timeout S     kill the guest after S seconds (default 900)
#   --mem MB        guest memory (default 1024)
#   --smp N         guest vCPUs (default 1; TCG)
#   --cache DIR     kernel cache (default $GICOMM_SOFTROCE_CACHE, else ~/.cache/gicomm/softroce)
#   --kernel PKG    the linux-image package (default: what linux-image-amd64 depends on)
#   --install       install missing Debian packages (needs root; default when root)
#   --check         prepare the guest (packages, kernel, initramfs) and exit: 0 when ready, else 1
#                   and the reason on the last line
# Inside the guest: GICOMM_SOFTROCE=1, GICOMM_RXE_DEVICES="rxe0 rxe1", GICOMM_RXE_GID_INDEX=1.
#
# Latency under TCG is meaningless (a round trip costs scheduler ticks): use it for correctness only.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TIMEOUT_S=900
MEM_MB=1024
SMP=1
CACHE=${GICOMM_SOFTROCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gicomm/softroce}
KERNEL_PKG=${GICOMM_SOFTROCE_KERNEL:-}
INSTALL=0
[[ $(id -u) -eq 0 ]] && INSTALL=1
CHECK_ONLY=0

log() { printf '[softroce] %s\n' "$*" >&2; }
die() {
  printf '[softroce] ERROR: %s\n' "$*" >&2
  ((CHECK_ONLY)) && exit 1
  exit 125
}

while (($#)); do
  case $1 in
    --timeout) TIMEOUT_S=$2; shift 2 ;;
    --mem) MEM_MB=$2; shift 2 ;;
    --smp) SMP=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --kernel) KERNEL_PKG=$2; shift 2 ;;
    --install) INSTALL=1; shift ;;
    --check) CHECK_ONLY=1; shift ;;
    --) shift; break ;;
    *) die "unknown option '$1' (see the header of $0)" ;;
  esac
done
((CHECK_ONLY)) || (($#)) || die "usage: $0 [options] -- PROGRAM [ARGS...]"

# ------------------------------------------------------------------ host packages (by name)
# Debian package -> a file it provides that we use.
PACKAGES=(
  qemu-system-x86:/usr/bin/qemu-system-x86_64
  busybox-static:/bin/busybox
  kmod:/usr/bin/kmod
  cpio:/usr/bin/cpio
  iproute2:/usr/bin/rdma
  rdma-core:/usr/sbin/rdma-ndd
  ibverbs-providers:/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
  ibverbs-utils:/usr/bin/ibv_devinfo
)
missing=()
for pair in "${PACKAGES[@]}"; do
  [[ -e ${pair#*:} ]] || missing+=("${pair%%:*}")
done
# busybox must be the static one: the initramfs has no C library.
if [[ -e /bin/busybox ]] && ldd /bin/busybox >/dev/null 2>&1; then missing+=(busybox-static); fi
if ((${#missing[@]})); then
  if ((CHECK_ONLY)) && ((!INSTALL)); then
    echo "missing Debian packages: ${missing[*]} (not root, so they cannot be installed here)"
    exit 1
  fi
  ((INSTALL)) || die "missing Debian packages: ${missing[*]}; install them (apt-get install --no-install-recommends ${missing[*]}) or rerun as root"
  command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get (this script targets Debian 12)"
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } ||
    die "apt-get could not install ${missing[*]}"
fi
[[ $(uname -m) == x86_64 ]] || die "the guest is x86_64 (qemu-system-x86 under TCG); this host is $(uname -m)"
# ------------------------------------------------------------------ kernel (cached, keyed on version)
kernel_of_metapackage() {
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9.]+-[0-9]+-amd64$/ {print $2; exit}'
}
if [[ -z $KERNEL_PKG ]]; then
  KERNEL_PKG=$(kernel_of_metapackage)
  if [[ -z $KERNEL_PKG ]] && ((INSTALL)); then
    apt-get update -qq >/dev/null 2>&1 || true
    KERNEL_PKG=$(kernel_of_metapackage)
  fi
  [[ -n $KERNEL_PKG ]] || die "cannot find the kernel package linux-image-amd64 depends on (no apt lists: apt-get update?)"
fi
KERNEL_VERSION=$(apt-cache policy "$KERNEL_PKG" 2>/dev/null | awk '/Candidate:/ {print $2}')
[[ -n $KERNEL_VERSION && $KERNEL_VERSION != "(none)" ]] || die "apt knows no version of $KERNEL_PKG"
KREL=${KERNEL_PKG#linux-image-}  # e.g. 6.1.0-57-amd64
KDIR=$CACHE/${KERNEL_PKG}_${KERNEL_VERSION}
mkdir -p "$CACHE" 2>/dev/null || die "cannot create the kernel cache $CACHE (set GICOMM_SOFTROCE_CACHE)"
# One preparation at a time per cache (parallel CI jobs, several checkouts on one machine).
exec 9>"$CACHE/.lock"
flock 9
if [[ ! -e $KDIR/.ready ]]; then
  log "downloading $KERNEL_PKG $KERNEL_VERSION into $KDIR (once per version)"
  rm -rf "$KDIR" "$KDIR.tmp"
  mkdir -p "$KDIR.tmp"
  # apt-get download writes into the current directory; _apt must be able to write there.
  (cd "$KDIR.tmp" && chmod 0777 . && apt-get download -q "$KERNEL_PKG=$KERNEL_VERSION" >/dev/null 2>&1) ||
    (cd "$KDIR.tmp" && apt-get download -q "$KERNEL_PKG=$KERNEL_VERSION") || die "apt-get download $KERNEL_PKG failed"
  dpkg-deb -x "$KDIR.tmp"/*.deb "$KDIR.tmp/root"
  rm -f "$KDIR.tmp"/*.deb
  depmod -b "$KDIR.tmp/root" "$KREL"
  touch "$KDIR.tmp/.ready"
  mv "$KDIR.tmp" "$KDIR"
fi
VMLINUZ=$KDIR/root/boot/vmlinuz-$KREL
MODDIR=$KDIR/root/lib/modules/$KREL
[[ -r $VMLINUZ && -d $MODDIR ]] || die "the cached kernel in $KDIR is incomplete; remove it and rerun"

# ------------------------------------------------------------------ initramfs (cached per init script)
# Modules the guest needs before it can mount the host's files and create rxe devices, with their
# dependencies in load order. crc32 must be present: rxe asks for it when a link is added.
MODULES=(virtio_pci 9p 9pnet_virtio overlay veth crc32_generic crc32_pclmul ib_core ib_uverbs rdma_ucm rdma_rxe)
INIT_HASH=$(cat "$HERE/init" /bin/busybox | sha1sum | cut -c1-12)
INITRD=$KDIR/initrd-$INIT_HASH.cpio.gz
if [[ ! -s $INITRD ]]; then
  log "building the initramfs ($INITRD)"
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage"/{bin,dev,proc,sys,mods,host,job,newroot,upper}
  cp /bin/busybox "$stage/bin/busybox"
  ln -s busybox "$stage/bin/sh"
  install -m 0755 "$HERE/init" "$stage/init"
  : >"$stage/mods/order"
  for m in "${MODULES[@]}"; do
    modprobe -d "$KDIR/root" -S "$KREL" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
  done | awk '!seen[$0]++' | while read -r ko; do
    cp "$ko" "$stage/mods/"
    basename "$ko" >>"$stage/mods/order"
  done
  grep -qx 'rdma_rxe.ko' "$stage/mods/order" || die "$KERNEL_PKG has no rdma_rxe module (Soft-RoCE)"
  (cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) >"$INITRD.tmp"
  mv "$INITRD.tmp" "$INITRD"
  rm -rf "$stage"
  trap - EXIT
fi

flock -u 9
if ((CHECK_ONLY)); then
  echo "ready: $KERNEL_PKG $KERNEL_VERSION in $CACHE, qemu $(qemu-system-x86_64 --version | head -1 | awk '{print $4}')"
  exit 0
fi

# ------------------------------------------------------------------ the job and the boot
JOB=$(mktemp -d "${TMPDIR:-/tmp}/gicomm-softroce.XXXXXX")
QEMU_PID=
cleanup() {
  if [[ -n $QEMU_PID ]]; then kill "$QEMU_PID" 2>/dev/null || true; fi
  rm -rf "$JOB"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
{
  printf 'MODDIR=%q\n' "$MODDIR"
  printf 'HELPERS=%q\n' "$HERE"
  printf 'WORKDIR=%q\n' "$PWD"
} >"$JOB/env"
{
  printf 'exec'
  printf ' %q' "$@"
  printf '\n'
} >"$JOB/cmd"

ACCEL=tcg
CPU=max
if [[ -w /dev/kvm ]] && grep -qwE 'vmx|svm' /proc/cpuinfo; then ACCEL=kvm; CPU=host; fi
log "booting $KERNEL_PKG ($KERNEL_VERSION) under qemu ($ACCEL, $SMP vCPU, $MEM_MB MiB); timeout ${TIMEOUT_S}s"
t0=$SECONDS
set +e
timeout -k 10 "$TIMEOUT_S" qemu-system-x86_64 -accel "$ACCEL" -cpu "$CPU" -smp "$SMP" -m "$MEM_MB" \
  -nographic -no-reboot -monitor none -serial stdio -nic none \
  -kernel "$VMLINUZ" -initrd "$INITRD" \
  -append "console=ttyS0 panic=-1 quiet loglevel=3 rdinit=/init" \
  -fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
  -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
  -fsdev local,id=job,path="$JOB",security_model=none,multidevs=remap \
  -device virtio-9p-pci,fsdev=job,mount_tag=job </dev/null &
QEMU_PID=$!
wait "$QEMU_PID"
qrc=$?
QEMU_PID=
set -e
elapsed=$((SECONDS - t0))
if ((qrc == 124 || qrc == 137)); then
  log "the guest ran out of time after ${elapsed}s (--timeout $TIMEOUT_S)"
  exit 124
fi
if [[ ! -s $JOB/rc ]]; then
  log "the guest stopped after ${elapsed}s without running the program (qemu exit $qrc); see the console output above"
  exit 125
fi
rc=$(cat "$JOB/rc")
log "guest done in ${elapsed}s: '$*' exited $rc"
exit "$rc"
