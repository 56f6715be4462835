#!/usr/bin/env bash
# Provisions the test interpreters, cached outside the repository (the
# libpython*-dev headers are kept for reading struct layouts):
#   $PYPROF_CACHE/sid    Debian sid root with python3.13, python3.14, python3.15,
#                        python3.14-dbg (static builds, .PyRuntime section),
#                        and the pure-Python Debian packages the real-program
#                        tests run (tests/test_real_programs.py): jinja2,
#                        docutils, sympy, flask (they import under 3.13, 3.14
#                        and 3.15 alike, from /usr/lib/python3/dist-packages)
# and writes $PYPROF_CACHE/pythons.txt: one "label<TAB>launcher..." line per
# interpreter found, which the tests read. Rebuilds only what is missing.
set -euo pipefail

CACHE=${PYPROF_CACHE:-/var/cache/pyprof-bpf}
SID=$CACHE/sid
MIRROR=${PYPROF_MIRROR:-http://deb.debian.org/debian}
SID_PKGS=python3.13,python3.14,python3.15,python3.14-dbg,libpython3.13-dev,libpython3.14-dev,libpython3.15-dev
# Installed with the root by debootstrap, and topped up in a root built before
# they were on this list.
SID_LIBS=(python3-jinja2 python3-docutils python3-sympy python3-flask python3-aiohttp
	python3-greenlet)

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
	libs=${SID_LIBS[*]}
	debootstrap --variant=minbase --include="$SID_PKGS,${libs// /,}" sid "$SID.tmp" "$MIRROR"
	touch "$SID.tmp/.pyprof-complete"
	rm -rf "$SID"
	mv "$SID.tmp" "$SID"
fi
# The libraries, in a root that lacks some of them: apt-get inside the root
# (it needs neither /proc nor more of /dev than debootstrap made there). With
# the root's package lists first; if that fails (an old root's lists may name
# files the mirror no longer has), refreshed lists. The mirror's Release file
# may be past its Valid-Until (debootstrap does not check it; apt does and
# refuses the lists), so apt is told not to check it either.
missing=()
for p in "${SID_LIBS[@]}"; do
	chroot "$SID" dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	log=$CACHE/sid-apt.log
	echo "provision: installing ${missing[*]} in $SID (log: $log)"
	export DEBIAN_FRONTEND=noninteractive
	apt_install() {
		chroot "$SID" apt-get install -y -q --no-install-recommends \
			-o Dpkg::Use-Pty=0 "${missing[@]}"
	}
	if ! { apt_install || {
		chroot "$SID" apt-get update -q -o Acquire::Check-Valid-Until=false &&
		apt_install; }; } >"$log" 2>&1; then
		echo "provision: apt-get in $SID failed; last lines of $log:" >&2
		tail -n 20 "$log" >&2
		exit 1
	fi
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
