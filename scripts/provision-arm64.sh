#!/usr/bin/env bash
# The arm64 guest of the tests (issue #34), cached outside the repository:
#   $PYPROF_CACHE/kernels/arm64/vmlinuz     Debian trixie's generic arm64 kernel
#   $PYPROF_CACHE/kernels/arm64/initrd.gz   an arm64 busybox + the virtio-9p modules
#   $PYPROF_CACHE/kernels/arm64/release     its uname -r; arch: arm64
#   $PYPROF_CACHE/kernels/arm64/root/       an arm64 root the guest chroots into:
#                                           sid's glibc, busybox and Pythons 3.13,
#                                           3.14 and 3.15 (/usr/bin/python3: 3.13)
# All from Debian's packages, fetched through private apt configurations
# (scripts/debian-apt.sh) and unpacked (dpkg -x, no maintainer scripts): no
# arm64 machine needed. The root is ROOT_PKGS and what they depend on
# (apt-cache depends, followed to the end; virtual packages and SKIP left
# out: nothing runs their maintainer scripts, and the tests need neither
# time zones nor glibc's extra charsets), without documentation, and with
# the bytecode of the modules the checks import compiled ahead, by each
# Python under qemu-user (the guest sees the root read-only: without it
# every start compiled them again, 15-25 s under TCG).
# scripts/vm-run arm64 -- CMD boots it under qemu-system-aarch64 (TCG).
# Idempotent: made again only when KREL, RREL, MODULES, ROOT_PKGS, SKIP or
# WARM change (.provisioned holds them), not when sid's packages move on.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${PYPROF_CACHE:-/var/cache/pyprof-bpf}
out=$CACHE/kernels/arm64
. "$root/scripts/debian-apt.sh"
KREL=trixie RREL=sid
MODULES=(9p 9pnet_virtio virtio_pci)
PYTHONS=(3.13 3.14 3.15)
ROOT_PKGS=(busybox-static)
for v in "${PYTHONS[@]}"; do
	ROOT_PKGS+=("python$v-minimal" "libpython$v-stdlib")
done
SKIP=(debconf cdebconf tzdata libc-gconv-modules-extra)
# what tests/kernels/checks.py and tests/targets/kernel_mix.py import
WARM=asyncio,collections,functools,gzip,json,re,shutil,signal,subprocess,threading
stamp="$KREL $RREL ${MODULES[*]} ${ROOT_PKGS[*]} -${SKIP[*]} +$WARM"
if [ -f "$out/.provisioned" ] && [ "$(cat "$out/.provisioned")" = "$stamp" ]; then
	exit 0
fi
need=()
command -v qemu-system-aarch64 >/dev/null || need+=(qemu-system-arm)
command -v zstd >/dev/null || need+=(zstd)
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
if [ ${#need[@]} -gt 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi
echo "provision-arm64: the kernel ($KREL) and a root ($RREL)"
mkdir -p "$CACHE/kernels"
tmp=$(mktemp -d "$CACHE/kernels/tmp-arm64.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# ROOT_PKGS and everything they depend on but SKIP, on stdout, one a line.
closure() {
	local -A seen=()
	local todo=("${ROOT_PKGS[@]}") next p
	for p in "${SKIP[@]}"; do
		seen[$p]=1
	done
	for p in "${ROOT_PKGS[@]}"; do
		apt-cache "${APT_OPTS[@]}" show "$p" >/dev/null 2>&1 ||
			{ echo "provision-arm64: $RREL/arm64 has no package $p" >&2; return 1; }
	done
	while [ ${#todo[@]} -gt 0 ]; do
		next=()
		for p in "${todo[@]}"; do
			[ -n "${seen[$p]:-}" ] || { seen[$p]=1; echo "$p"; }
		done
		# every alternative that is a real package; <virtual> names and
		# their providers (the lines indented deeper) left out
		apt-cache "${APT_OPTS[@]}" depends --no-recommends --no-suggests --no-conflicts \
			--no-breaks --no-replaces --no-enhances "${todo[@]}" >"$tmp/depends.txt"
		mapfile -t next < <(sed -n 's/^ [ |]\(Pre\)\?Depends: \([^< ]\+\)$/\2/p' \
				    "$tmp/depends.txt" | sort -u)
		todo=()
		for p in "${next[@]}"; do
			[ -n "${seen[$p]:-}" ] || todo+=("$p")
		done
	done
}

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
closure >"$tmp/root-packages.txt"
mapfile -t rpkgs <"$tmp/root-packages.txt"
fetch "$tmp/r" "${rpkgs[@]}"
r=$tmp/r/x
# sid's packages put everything under /usr: the merged-/usr links that
# base-files (not unpacked) would make.
for d in bin sbin lib; do
	if [ -d "$r/$d" ] && [ ! -L "$r/$d" ]; then
		mkdir -p "$r/usr/$d"
		cp -a "$r/$d/." "$r/usr/$d/"
		rm -rf "${r:?}/$d"
	fi
	mkdir -p "$r/usr/$d"
	ln -sfn "usr/$d" "$r/$d"
done
rm -rf "$r/usr/share/doc" "$r/usr/share/man" "$r/usr/share/lintian" "$r/usr/share/locale"
for v in "${PYTHONS[@]}"; do
	[ -x "$r/usr/bin/python$v" ] || { echo "provision-arm64: no /usr/bin/python$v in the root" >&2; exit 1; }
done
[ -x "$r/usr/bin/busybox" ] || { echo "provision-arm64: no busybox in the root" >&2; exit 1; }
for v in "${PYTHONS[@]}"; do
	qemu-aarch64-static -L "$r" "$r/usr/bin/python$v" -E -c "import ${WARM//,/, }" ||
		{ echo "provision-arm64: python$v does not run (qemu-aarch64-static)" >&2; exit 1; }
done
# What the guest mounts over, and /bin/sh: busybox's.
mkdir -p "$r/proc" "$r/sys" "$r/dev" "$r/tmp" "$r/run" "$r/host" "$r/work" "$r/usr/local/bin"
ln -sfn busybox "$r/usr/bin/sh"
ln -sfn "python${PYTHONS[0]}" "$r/usr/bin/python3"
/usr/bin/python3 "$root/scripts/vm.d/mkinitramfs.py" "$moddir" "$tmp/initrd.gz" \
	"$root/scripts/vm.d/init" "$r/usr/bin/busybox" "${MODULES[@]}" >"$tmp/modules.txt"

rm -rf "$out"
mkdir -p "$out"
cp "$vmlinuz" "$out/vmlinuz"
mv "$tmp/initrd.gz" "$out/initrd.gz"
echo "$kver" >"$out/release"
echo arm64 >"$out/arch"
mv "$r" "$out/root"
echo "$stamp" >"$out/.provisioned"
echo "provision-arm64: $kver (modules: $(cat "$tmp/modules.txt")), root: ${#rpkgs[@]} packages, $(du -sh "$out/root" | cut -f1)"
