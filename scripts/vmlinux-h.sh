#!/usr/bin/env bash
# vmlinux/ARCH/vmlinux.h for an architecture this machine does not run
# (issue #34: arm64 on x86-64), made once and committed, as the x86 one was
# made from the running kernel:
#   scripts/vmlinux-h.sh arm64 [RELEASE]     (default release: trixie, 6.12: sid's 7.x BTF dumps as C only with -fms-extensions)
# Debian's generic kernel package of RELEASE for ARCH is fetched through a
# private apt configuration (scripts/debian-apt.sh), its BTF cut out of its
# image (scripts/btf-from-image.py) and dumped as C by bpftool.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
arch=${1:?usage: scripts/vmlinux-h.sh ARCH [RELEASE]}
rel=${2:-trixie}
CACHE=${PYPROF_CACHE:-/var/cache/pyprof-bpf}
. "$root/scripts/debian-apt.sh"

command -v zstd >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y zstd >/dev/null
debian_apt "$rel" "$arch" "$CACHE/kernels/apt-$rel-$arch"
mapfile -t pkgs < <(debian_kernel_packages "$arch")
[ ${#pkgs[@]} -gt 0 ] || { echo "vmlinux-h: $rel/$arch: no linux-image-$arch" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get "${APT_OPTS[@]}" download "${pkgs[@]}" >download.log 2>&1) ||
	{ cat "$tmp/download.log" >&2; exit 1; }
for p in "$tmp"/*.deb; do
	dpkg -x "$p" "$tmp/x"
done
image=$(ls "$tmp"/x/boot/vmlinuz-* "$tmp"/x/usr/lib/modules/*/vmlinuz 2>/dev/null | head -1 || true)
[ -n "$image" ] || { echo "vmlinux-h: ${pkgs[0]} has no kernel image" >&2; exit 1; }
/usr/bin/python3 "$root/scripts/btf-from-image.py" "$image" "$tmp/vmlinux.btf"
mkdir -p "$root/vmlinux/$arch"
bpftool btf dump file "$tmp/vmlinux.btf" format c >"$tmp/vmlinux.h"
mv "$tmp/vmlinux.h" "$root/vmlinux/$arch/vmlinux.h"
echo "vmlinux-h: vmlinux/$arch/vmlinux.h from ${pkgs[0]} ($(basename "$image"))"
