#!/usr/bin/env bash
# Provisions the kernels of the test matrix (issue #33), cached outside the
# repository:
#   $PYPROF_CACHE/kernels/REL/vmlinuz      Debian's generic amd64 kernel of REL
#   $PYPROF_CACHE/kernels/REL/initrd.gz    busybox + the virtio-9p modules
#   $PYPROF_CACHE/kernels/REL/release      its uname -r
# for REL in bullseye (5.10), bookworm (6.1), trixie (6.12), sid (the newest),
# or the releases named as arguments. Each release's package list is fetched
# through a private apt configuration (the system's sources are never
# touched). Idempotent: a release already there is skipped.
set -euo pipefail

CACHE=${PYPROF_CACHE:-/var/cache/pyprof-bpf}
DIR=$CACHE/kernels
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RELEASES=("$@")
[ ${#RELEASES[@]} -gt 0 ] || RELEASES=(bullseye bookworm trixie sid)
MIRROR=${PYPROF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
MODULES=(9p 9pnet_virtio virtio_pci)

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -qx insmod || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
	echo "provision-kernels: installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi

provision() {
	local rel=$1 out=$DIR/$1 apt=$DIR/apt-$1
	if [ -s "$out/vmlinuz" ] && [ -s "$out/initrd.gz" ] && [ -s "$out/release" ]; then
		return 0
	fi
	echo "provision-kernels: $rel"
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$out"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $rel main" \
		>"$apt/sources.list"
	local opts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o Dir::Etc::sourceparts=/dev/null
		    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
		    -o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
	apt-get "${opts[@]}" update >"$apt/update.log" 2>&1 ||
		{ cat "$apt/update.log" >&2; echo "provision-kernels: $rel: apt update failed" >&2; return 1; }
	# The generic flavour (the cloud one has no 9p): the package the
	# linux-image-amd64 metapackage points at.
	local pkg
	pkg=$(apt-cache "${opts[@]}" depends linux-image-amd64 |
	      sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)\( .*\)\?$/\1/p' | sort -V | tail -1)
	[ -n "$pkg" ] || { echo "provision-kernels: $rel: no linux-image-*-amd64 package" >&2; return 1; }
	local tmp
	tmp=$(mktemp -d "$DIR/tmp-$rel.XXXXXX")
	# Newer kernels (7.x) split the image package: the kernel is in its
	# linux-binary-* dependency, the modules in linux-modules-*.
	local pkgs p
	pkgs=("$pkg" $(apt-cache "${opts[@]}" depends "$pkg" |
		       sed -n 's/^ *Depends: \(linux-\(binary\|modules\)-[^ ]*\).*/\1/p'))
	(cd "$tmp" && apt-get "${opts[@]}" download "${pkgs[@]}" >download.log 2>&1) ||
		{ cat "$tmp/download.log" >&2; rm -rf "$tmp"; return 1; }
	for p in "$tmp"/*.deb; do
		dpkg -x "$p" "$tmp/x"
	done
	local kver= moddir=
	local m vmlinuz=
	for m in "$tmp"/x/lib/modules/* "$tmp"/x/usr/lib/modules/*; do
		[ -d "$m/kernel" ] && moddir=$m kver=${m##*/}
	done
	for m in "$tmp/x/boot/vmlinuz-$kver" "$moddir/vmlinuz"; do
		[ -f "$m" ] && vmlinuz=$m
	done
	[ -n "$kver" ] && [ -n "$vmlinuz" ] ||
		{ echo "provision-kernels: $rel: $pkg has no kernel or modules" >&2; rm -rf "$tmp"; return 1; }
	/usr/bin/python3 "$root/scripts/vm.d/mkinitramfs.py" "$moddir" "$tmp/initrd.gz" \
		"$root/scripts/vm.d/init" /bin/busybox "${MODULES[@]}" >"$tmp/modules.txt"
	cp "$vmlinuz" "$out/vmlinuz.tmp" && mv "$out/vmlinuz.tmp" "$out/vmlinuz"
	mv "$tmp/initrd.gz" "$out/initrd.gz"
	cp "$tmp/x/boot/config-$kver" "$out/config" 2>/dev/null || true
	echo "$kver" >"$out/release"
	echo "provision-kernels: $rel: $kver (modules: $(cat "$tmp/modules.txt"))"
	rm -rf "$tmp"
}

mkdir -p "$DIR"
for rel in "${RELEASES[@]}"; do
	provision "$rel"
done
