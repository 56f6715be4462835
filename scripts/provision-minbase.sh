#!/usr/bin/env bash
# Provisions a minimal Debian root (debootstrap --variant=minbase) that has
# none of the build tools or -dev packages, cached outside the repository:
#   $PYPROF_CACHE/minbase-SUITE    (default /var/cache/pyprof-bpf/minbase-bookworm)
# SUITE is $PYPROF_MINBASE_SUITE, default this host's release (its glibc is the
# oldest the release binary is built for). tests/test_install.py runs the
# release binary and installs the .deb there, each time in a throw-away
# overlay on top of it, so the cached root stays as debootstrap made it.
#
# Idempotent: a complete root is only checked. Messages go to stderr; the
# root's path is the one line on stdout.
set -euo pipefail

CACHE=${PYPROF_CACHE:-/var/cache/pyprof-bpf}
MIRROR=${PYPROF_MIRROR:-http://deb.debian.org/debian}
# shellcheck source=/dev/null
SUITE=${PYPROF_MINBASE_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}
if [ -z "$SUITE" ]; then
	echo "provision-minbase: no VERSION_CODENAME in /etc/os-release: set PYPROF_MINBASE_SUITE" >&2
	exit 1
fi
ROOT=$CACHE/minbase-$SUITE

if [ "$(id -u)" -ne 0 ]; then
	echo "provision-minbase: must run as root (debootstrap)" >&2
	exit 1
fi

complete() {
	[ -f "$ROOT/.pyprof-complete" ] && [ -x "$ROOT/bin/sh" ] && [ -x "$ROOT/usr/bin/dpkg" ]
}

if complete; then
	echo "provision-minbase: $SUITE minbase root present in $ROOT" >&2
else
	echo "provision-minbase: building a $SUITE minbase root in $ROOT (about a minute, ~200 MB)" >&2
	log=$CACHE/minbase-$SUITE.log
	mkdir -p "$CACHE"
	rm -rf "$ROOT.tmp"
	if ! debootstrap --variant=minbase "$SUITE" "$ROOT.tmp" "$MIRROR" >"$log" 2>&1; then
		echo "provision-minbase: debootstrap failed; last lines of $log:" >&2
		tail -n 20 "$log" >&2
		rm -rf "$ROOT.tmp"
		exit 1
	fi
	# Nothing of apt's downloads is needed again: keep the cache small.
	rm -f "$ROOT.tmp"/var/cache/apt/archives/*.deb
	touch "$ROOT.tmp/.pyprof-complete"
	rm -rf "$ROOT"
	mv "$ROOT.tmp" "$ROOT"
	echo "provision-minbase: done ($(du -sh "$ROOT" | cut -f1))" >&2
fi
echo "$ROOT"
