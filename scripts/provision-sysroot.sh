#!/usr/bin/env bash
# A sysroot for building pyprof-bpf for another architecture on this one
# (issue #34: arm64 on x86-64), cached outside the repository:
#   scripts/provision-sysroot.sh arm64 [RELEASE]    (default: bookworm, the glibc
#                                                   2.36 the release binary targets)
# gives $PYPROF_CACHE/sysroot-ARCH: Debian's -dev packages the build links
# (libbpf, libelf, libdw, zlib, zstd, xz, bzip2, ncursesw, protobuf-c), glibc's and
# gcc's runtime objects, unpacked (dpkg -x, no maintainer scripts) from
# packages fetched through a private apt configuration
# (scripts/debian-apt.sh). clang --target=aarch64-linux-gnu --sysroot=...
# with ld.lld builds against it (the Makefile's ARCH=arm64). Idempotent: a
# sysroot whose package list is unchanged is kept.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
arch=${1:?usage: scripts/provision-sysroot.sh ARCH [RELEASE]}
rel=${2:-bookworm}
CACHE=${PYPROF_CACHE:-/var/cache/pyprof-bpf}
out=$CACHE/sysroot-$arch
. "$root/scripts/debian-apt.sh"

PKGS=(libc6 libc6-dev linux-libc-dev libgcc-12-dev libgcc-s1 libcrypt1 libcrypt-dev libcurl4-openssl-dev
      libbpf1 libbpf-dev libelf1 libelf-dev libdw1 libdw-dev zlib1g zlib1g-dev
      libzstd1 libzstd-dev liblzma5 liblzma-dev libbz2-1.0 libbz2-dev
      libncursesw6 libncurses6 libncurses-dev libtinfo6 libprotobuf-c1 libprotobuf-c-dev)
want="$rel ${PKGS[*]} (static-sources)"
if [ -f "$out/.packages" ] && [ "$(cat "$out/.packages")" = "$want" ]; then
	exit 0
fi
need=()
command -v ld.lld >/dev/null || need+=(lld)
if [ ${#need[@]} -gt 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi
echo "provision-sysroot: $arch ($rel): ${#PKGS[@]} packages"
debian_apt "$rel" "$arch" "$CACHE/apt-sysroot-$rel-$arch"
tmp=$(mktemp -d "$CACHE/tmp-sysroot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get "${APT_OPTS[@]}" download "${PKGS[@]}" >download.log 2>&1) ||
	{ cat "$tmp/download.log" >&2; exit 1; }
mkdir "$tmp/root"
# .static-sources: each static library's source package and version, as
# `make deb ARCH=...` names them in Static-Built-Using (no dpkg database
# knows this sysroot's packages).
: >"$tmp/static-sources"
for p in "$tmp"/*.deb; do
	dpkg -x "$p" "$tmp/root"
	src=$(dpkg-deb -f "$p" Source)
	ver=$(dpkg-deb -f "$p" Version)
	case $src in
	*"("*) ver=${src#*(}; ver=${ver%)}; src=${src%% *} ;;
	"") src=$(dpkg-deb -f "$p" Package) ;;
	esac
	dpkg-deb -c "$p" | awk '{print $6}' | sed -n 's|^\./|/|; /\.a$/p' |
		sed "s|\$|\t$src (= $ver)|" >>"$tmp/static-sources"
done
mv "$tmp/static-sources" "$tmp/root/.static-sources"
# Absolute symlinks (libfoo.so -> /lib/...) resolved inside the sysroot.
find "$tmp/root" -type l -lname '/*' | while read -r l; do
	ln -sfn "$tmp/root$(readlink "$l")" "$l.tmp" && t=$(readlink "$l") &&
		ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$tmp/root$t")" "$l" && rm -f "$l.tmp"
done
echo "$want" >"$tmp/root/.packages"
rm -rf "$out"
mv "$tmp/root" "$out"
echo "provision-sysroot: $out"
