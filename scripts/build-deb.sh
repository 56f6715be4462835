#!/usr/bin/env bash
# Builds a Debian package of pyprof-bpf with dpkg-deb (run by `make deb`):
#
#   scripts/build-deb.sh BINARY VERSION COMMIT OUTDIR
#
# BINARY is the release build (libbpf, elfutils' libraries and zlib linked
# in, glibc dynamic), so the package installs on any Debian or Ubuntu whose glibc is new
# enough, whatever its libbpf: the tree is `make install PREFIX=/usr` of that
# binary (the man page gzipped, as Debian wants it; the agent's systemd unit,
# and its settings /etc/default/pyprof-bpf-agent as a conffile) plus the
# copyright and a changelog. The maintainer scripts reload systemd, restart a
# running agent on upgrade, stop it on removal and remove its state on purge;
# nothing is enabled. Recommends names libcurl, which `agent --push` opens at
# run time. Depends comes from dpkg-shlibdeps (libc6 (>= 2.X): the newest
# glibc symbol version the binary uses), Static-Built-Using names the source
# packages of the static libraries linked in (their .a files found through
# gcc and dpkg -S). $RELEASE_PKGS lists them as pkg-config names (default
# "libbpf libelf zlib"); $DEB_VERSION overrides the package version;
# $DEB_MAINTAINER the maintainer (default: git's committer identity).
# Another architecture's binary (make deb ARCH=arm64): $DEB_ARCH names it,
# $SYSROOT and $TRIPLE say where its libraries are (scripts/provision-sysroot.sh):
# Depends is then libc6 (>= the newest GLIBC_ version the binary uses), and
# Static-Built-Using comes from the sysroot's .static-sources.
# Prints the path of the .deb.
set -euo pipefail

if [ $# -ne 4 ]; then
	echo "usage: $0 BINARY VERSION COMMIT OUTDIR" >&2
	exit 2
fi
bin=$1 version=${DEB_VERSION:-$2} commit=$3 outdir=$4
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkgs=${RELEASE_PKGS:-libbpf libelf zlib}
for tool in dpkg-deb dpkg-shlibdeps pkg-config gzip; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "build-deb: $tool is missing (run scripts/install-deps.sh)" >&2
		exit 1
	fi
done
arch=${DEB_ARCH:-$(dpkg --print-architecture)}
cross=${SYSROOT:+1}
deb=$outdir/pyprof-bpf_${version}_${arch}.deb

mkdir -p "$outdir"
work=$(mktemp -d "$outdir/deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
# dpkg-shlibdeps wants a source tree's layout: debian/control, debian/PACKAGE.
pkg=$work/debian/pyprof-bpf
mkdir -p "$pkg/DEBIAN"
printf 'Source: pyprof-bpf\n\nPackage: pyprof-bpf\nArchitecture: any\n' > "$work/debian/control"

make -C "$root" --no-print-directory install DESTDIR="$pkg" PREFIX=/usr \
	INSTALL_BIN="$(realpath "$bin")" >&2
gzip -9n "$pkg/usr/share/man/man1/pyprof-bpf.1"

doc=$pkg/usr/share/doc/pyprof-bpf
mkdir -p "$doc"
maint=${DEB_MAINTAINER:-$(git -C "$root" var GIT_COMMITTER_IDENT 2>/dev/null |
	sed 's/> .*/>/' || true)}
maint=${maint:-$(id -un) <$(id -un)@$(hostname)>}
cat > "$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: pyprof-bpf
Source: https://github.com/pyprof-bpf/pyprof-bpf

Files: *
Copyright: the pyprof-bpf authors
License: MIT
Comment: The BPF program embedded in the binary is licensed "Dual MIT/GPL".
 The binary holds these libraries, linked statically (their sources and
 versions: the package's Static-Built-Using field): $pkgs.

License: MIT
 Permission is hereby granted, free of charge, to any person obtaining a copy
 of this software and associated documentation files (the "Software"), to deal
 in the Software without restriction, including without limitation the rights
 to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
 copies of the Software, and to permit persons to whom the Software is
 furnished to do so, subject to the following conditions:
 .
 The above copyright notice and this permission notice shall be included in
 all copies or substantial portions of the Software.
 .
 THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
 IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
 FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
 AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
 LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
 OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
 SOFTWARE.
EOF
{
	printf 'pyprof-bpf (%s) unstable; urgency=medium\n\n' "$version"
	printf '  * Release build of commit %s.\n\n' "$commit"
	printf ' -- %s  %s\n' "$maint" "$(date -R)"
} | gzip -9n > "$doc/changelog.gz"

# Depends: what the binary needs from the system, as dpkg-shlibdeps says
# (another architecture's: the newest glibc symbol version it uses).
if [ -n "$cross" ]; then
	glibc=$(readelf --dyn-syms -W "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' |
		sort -V | tail -n 1)
	depends=${glibc:+libc6 (>= $glibc)}
else
	depends=$(cd "$work" && dpkg-shlibdeps -O -edebian/pyprof-bpf/usr/bin/pyprof-bpf |
		sed -n 's/^shlibs:Depends=//p')
fi
if [ -z "$depends" ]; then
	echo "build-deb: dpkg-shlibdeps found no dependency for the binary" >&2
	exit 1
fi
# Static-Built-Using: the source packages whose .a files are inside.
built_using=()
# shellcheck disable=SC2086 # $pkgs is a list
for l in $(pkg-config --static --libs-only-l $pkgs); do
	case $l in -lc | -lm | -ldl | -lpthread | -lrt | -lresolv) continue ;; esac
	if [ -n "$cross" ]; then
		a=/usr/lib/$TRIPLE/lib${l#-l}.a
		src=$(awk -F'\t' -v a="$a" '$1 == a { print $2; exit }' "$SYSROOT/.static-sources")
		[ -n "$src" ] || { echo "build-deb: no static library $SYSROOT$a" >&2; exit 1; }
		case " ${built_using[*]-} " in *" $src,"*) ;; *) built_using+=("$src,") ;; esac
		continue
	fi
	a=$(gcc -print-file-name="lib${l#-l}.a")
	[ -f "$a" ] || { echo "build-deb: no static library for $l" >&2; exit 1; }
	owner=$(dpkg -S "$(realpath "$a")" 2>/dev/null | head -n 1 | cut -d: -f1) ||
		owner=
	[ -n "$owner" ] || owner=$(dpkg -S "$a" | head -n 1 | cut -d: -f1)
	src=$(dpkg-query -W -f='${source:Package} (= ${source:Version})' "$owner")
	case " ${built_using[*]-} " in *" $src,"*) ;; *) built_using+=("$src,") ;; esac
done
static_built_using=$(printf '%s ' "${built_using[@]}" | sed 's/, $//')

# The agent's settings are the administrator's once installed: a conffile.
(cd "$pkg" && find etc -type f | sed 's|^|/|' | sort) > "$pkg/DEBIAN/conffiles"
unit=pyprof-bpf-agent.service
if ! grep -qx /etc/default/pyprof-bpf-agent "$pkg/DEBIAN/conffiles" ||
	[ ! -f "$pkg/usr/lib/systemd/system/$unit" ]; then
	echo "build-deb: make install did not install $unit and its settings" >&2
	exit 1
fi
# Maintainer scripts: systemd is told of the unit, which the package never
# enables or starts; a running agent is restarted on upgrade (to run the new
# binary) and stopped on removal; purge removes its state (spool, files).
cat > "$pkg/DEBIAN/postinst" <<EOF
#!/bin/sh
set -e
if [ "\$1" = configure ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	if [ -n "\$2" ]; then
		systemctl try-restart $unit >/dev/null 2>&1 || true
	fi
fi
exit 0
EOF
cat > "$pkg/DEBIAN/prerm" <<EOF
#!/bin/sh
set -e
if [ "\$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl stop $unit >/dev/null 2>&1 || true
fi
exit 0
EOF
cat > "$pkg/DEBIAN/postrm" <<EOF
#!/bin/sh
set -e
if [ "\$1" = purge ]; then
	rm -f /etc/systemd/system/multi-user.target.wants/$unit
	rm -rf /var/lib/pyprof-bpf
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
EOF
chmod 0755 "$pkg/DEBIAN/postinst" "$pkg/DEBIAN/prerm" "$pkg/DEBIAN/postrm"

installed_size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
cat > "$pkg/DEBIAN/control" <<EOF
Package: pyprof-bpf
Version: $version
Architecture: $arch
Maintainer: $maint
Installed-Size: $installed_size
Depends: $depends
Recommends: libcurl4t64 | libcurl4
Static-Built-Using: $static_built_using
Section: devel
Priority: optional
Homepage: https://github.com/pyprof-bpf/pyprof-bpf
Description: sampling profiler for CPython 3.11 to 3.15, assisted by eBPF
 pyprof-bpf attaches to a running CPython process, or starts a command, and
 records where its threads spend their time as exact Python stacks (function,
 file and line), without stopping or tracing it: a BPF program copies the
 frame chain of the interrupted thread at each tick. It writes perf script
 text, folded stacks, speedscope, pprof, flame graphs and a top view, and
 dumps every thread's stack of a running process.
 .
 pyprof-bpf agent profiles every Python process of the host continuously and
 pushes the profiles to Grafana Pyroscope or Parca (or writes files), keeping
 them in a spool on disk while a store is down. The systemd unit
 pyprof-bpf-agent.service runs it; it is not enabled: set its arguments in
 /etc/default/pyprof-bpf-agent first.
 .
 The BPF backend needs root, or CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE (see
 pyprof-bpf(1)); without them it reads the target from outside.
 .
 This is the release build: $pkgs (and what they need) are linked in, so it
 depends on glibc alone. libcurl (recommended) is opened at run time, by
 agent --push only.
EOF
(cd "$pkg" && find usr -type f -exec md5sum {} + | sort -k2) > "$pkg/DEBIAN/md5sums"

dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >&2
echo "$deb"
