#!/usr/bin/env bash
# Provisions the test interpreters, cached outside the repository (the
# libpython*-dev headers are kept for reading struct layouts):
#   $PYPROF_CACHE/sid    Debian sid root with python3.13, python3.14, python3.15,
#                        python3.14-dbg (static builds, .PyRuntime section)
# and writes $PYPROF_CACHE/pythons.txt: one "label<TAB>launcher..." line per
# interpreter found, which the tests read. Rebuilds only what is missing.
set -euo pipefail

CACHE=${PYPROF_CACHE:-/var/cache/pyprof-bpf}
SID=$CACHE/sid
MIRROR=${PYPROF_MIRROR:-http://deb.debian.org/debian}
SID_PKGS=python3.13,python3.14,python3.15,python3.14-dbg,libpython3.13-dev,libpython3.14-dev,libpython3.15-dev

mkdir -p "$CACHE"

sid_complete() {
	[ -f "$SID/.pyprof-complete" ] &&
	for v in 3.13 3.14 3.15 3.14d; do
		[ -x "$SID/usr/bin/python$v" ] || return 1
	done
}

if ! sid_complete; then
	echo "provision: building the sid root in $SID (a few minutes, ~700 MB)"
	rm -rf "$SID.tmp"
	debootstrap --variant=minbase --include="$SID_PKGS" sid "$SID.tmp" "$MIRROR"
	touch "$SID.tmp/.pyprof-complete"
	rm -rf "$SID"
	mv "$SID.tmp" "$SID"
fi
# chroot targets need /proc for some tools (CPython's own profiler); the tests
# mount it per run, nothing stays mounted here.

out=$CACHE/pythons.txt.tmp
: > "$out"
for v in 3.13 3.14 3.15 3.14d; do
	printf 'sid-%s\tchroot:%s:/usr/bin/python%s\n' "$v" "$SID" "$v" >> "$out"
done
if command -v pyenv >/dev/null 2>&1 || [ -d "${PYENV_ROOT:-$HOME/.pyenv}" ]; then
	root=${PYENV_ROOT:-$HOME/.pyenv}
	for d in "$root"/versions/3.1[0-9]*; do
		[ -x "$d/bin/python3" ] || continue
		printf 'pyenv-%s\t%s\n' "$(basename "$d")" "$d/bin/python3" >> "$out"
	done
fi
[ -x /usr/bin/python3.11 ] && printf 'system-3.11\t/usr/bin/python3.11\n' >> "$out"
mv "$out" "$CACHE/pythons.txt"
echo "provision: interpreters:"
cat "$CACHE/pythons.txt"
