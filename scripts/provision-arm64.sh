#!/usr/bin/env bash
# The arm64 guest of the tests (issue #34), cached outside the repository:
#   $PYPROF_CACHE/kernels/arm64/vmlinuz     Debian trixie's generic arm64 kernel
#   $PYPROF_CACHE/kernels/arm64/initrd.gz   an arm64 busybox + the virtio-9p modules
#   $PYPROF_CACHE/kernels/arm64/release     its uname -r; arch: arm64
#   $PYPROF_CACHE/kernels/arm64/root/       an arm64 root the guest chroots into:
#                                           bookworm's glibc, busybox and Python 3.11
# All from Debian's packages, fetched through private apt configurations
# (scripts/debian-apt.sh) and unpacked (dpkg -x, no maintainer scripts): no
# arm64 machine needed. scripts/vm-run arm64 -- CMD boots it under
# qemu-system-aarch64 (TCG). Idempotent.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${PYPROF_CACHE:-/var/cache/pyprof-bpf}
out=$CACHE/kernels/arm64
. "$root/scripts/debian-apt.sh"
KREL=trixie RREL=bookworm
MODULES=(9p 9pnet_virtio virtio_pci)
ROOT_PKGS=(libc6 libgcc-s1 zlib1g libexpat1 libffi8 libbz2-1.0 liblzma5 libzstd1 libtinfo6
	   libncursesw6 libreadline8 libsqlite3-0 libssl3 libuuid1 libcrypt1 libdb5.3 libgdbm6
	   libnsl2 libtirpc3 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0
	   libcom-err2 libkeyutils1 busybox-static
	   python3.11-minimal libpython3.11-minimal libpython3.11-stdlib)
stamp="$KREL $RREL ${MODULES[*]} ${ROOT_PKGS[*]}"
if [ -f "$out/.provisioned" ] && [ "$(cat "$out/.provisioned")" = "$stamp" ]; then
	exit 0
fi
need=()
command -v qemu-system-aarch64 >/dev/null || need+=(qemu-system-arm)
command -v zstd >/dev/null || need+=(zstd)
if [ ${#need[@]} -gt 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi
echo "provision-arm64: the kernel ($KREL) and a root ($RREL)"
mkdir -p "$CACHE/kernels"
tmp=$(mktemp -d "$CACHE/kernels/tmp-arm64.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fetch() {	# DIR PKG...: downloaded and unpacked into DIR/x
	local d=$1
	shift
	mkdir -p "$d/x"
	(cd "$d" && apt-get "${APT_OPTS[@]}" download "$@" >download.log 2>&1) ||
		{ cat "$d/download.log" >&2; exit 1; }
	for p in "$d"/*.deb; do
		dpkg -x "$p" "$d/x"
	done
}

debian_apt "$KREL" arm64 "$CACHE/kernels/apt-$KREL-arm64"
mapfile -t kpkgs < <(debian_kernel_packages arm64)
[ ${#kpkgs[@]} -gt 0 ] || { echo "provision-arm64: no linux-image-arm64 in $KREL" >&2; exit 1; }
fetch "$tmp/k" "${kpkgs[@]}"
moddir=$(ls -d "$tmp"/k/x/lib/modules/* "$tmp"/k/x/usr/lib/modules/* 2>/dev/null | head -1 || true)
kver=${moddir##*/}
vmlinuz=$(ls "$tmp/k/x/boot/vmlinuz-$kver" "$moddir/vmlinuz" 2>/dev/null | head -1 || true)
[ -n "$kver" ] && [ -n "$vmlinuz" ] || { echo "provision-arm64: ${kpkgs[0]}: no kernel" >&2; exit 1; }

debian_apt "$RREL" arm64 "$CACHE/kernels/apt-$RREL-arm64"
fetch "$tmp/r" "${ROOT_PKGS[@]}"
r=$tmp/r/x
# What the guest mounts over, and /bin/sh: busybox's.
mkdir -p "$r/proc" "$r/sys" "$r/dev" "$r/tmp" "$r/run" "$r/host" "$r/work" "$r/usr/local/bin"
ln -sfn /bin/busybox "$r/bin/sh"
[ -e "$r/usr/bin/python3" ] || ln -sfn python3.11 "$r/usr/bin/python3"
/usr/bin/python3 "$root/scripts/vm.d/mkinitramfs.py" "$moddir" "$tmp/initrd.gz" \
	"$root/scripts/vm.d/init" "$r/bin/busybox" "${MODULES[@]}" >"$tmp/modules.txt"

rm -rf "$out"
mkdir -p "$out"
cp "$vmlinuz" "$out/vmlinuz"
mv "$tmp/initrd.gz" "$out/initrd.gz"
echo "$kver" >"$out/release"
echo arm64 >"$out/arch"
mv "$r" "$out/root"
echo "$stamp" >"$out/.provisioned"
echo "provision-arm64: $kver (modules: $(cat "$tmp/modules.txt")), root: $(du -sh "$out/root" | cut -f1)"
