#!/usr/bin/env bash
# Installs the peers that scripts/bench measures pyprof-bpf against, and what
# the bench itself needs, cached outside the repository. Idempotent: what is
# already there is only checked.
#
#   host:        linux-perf (perf record -g), bpftool (BPF run time),
#                python3-matplotlib (the PNG chart)
#   sid root:    python3.15 (CPython 3.15's own profiling.sampling), python3.13
#                (austin's target), from scripts/provision-pythons.sh
#   $PEERS/austin  austin 3.7, unpacked from the sid package with dpkg -x (its
#                package dependency is broken; the binary works). It is built
#                against sid's libc, so it runs with the sid root's loader.
#
# A peer that cannot be installed does not stop the others: the reason is
# written to $PEERS/status (one "name<TAB>ok|unavailable: why" line per peer)
# and the bench prints that peer's rows as unavailable. Exits non-zero only on
# its own errors (not root, no sid root).
set -euo pipefail

CACHE=${PYPROF_CACHE:-/var/cache/pyprof-bpf}
SID=$CACHE/sid
PEERS=${PYPROF_PEERS:-$CACHE/peers}
HOST_PKGS=(linux-perf bpftool python3-matplotlib procps util-linux)

if [ "$(id -u)" -ne 0 ]; then
	echo "install-peers: must run as root (apt-get, chroot)" >&2
	exit 1
fi
if [ ! -x "$SID/usr/bin/python3.15" ]; then
	echo "install-peers: no sid root at $SID: run scripts/provision-pythons.sh" >&2
	exit 1
fi
mkdir -p "$PEERS"
status=$PEERS/status.tmp
: > "$status"
note() { printf '%s\t%s\n' "$1" "$2" >> "$status"; echo "install-peers: $1: $2"; }

# --- host packages --------------------------------------------------------------------
missing=()
for p in "${HOST_PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	log=$PEERS/apt.log
	echo "install-peers: installing ${missing[*]} (log: $log)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >"$log" 2>&1 ||
		echo "install-peers: apt-get update reported errors; continuing" >&2
	# One at a time: a package that cannot be installed must not stop the others.
	for p in "${missing[@]}"; do
		apt-get install -y -q --no-install-recommends "$p" >>"$log" 2>&1 ||
			echo "install-peers: could not install $p (see $log)" >&2
	done
fi

if perf_out=$(perf --version 2>&1); then
	note perf "ok ($perf_out)"
else
	note perf "unavailable: perf does not run: ${perf_out//$'\n'/ }"
fi
if ! command -v bpftool >/dev/null 2>&1; then
	note bpftool "unavailable: bpftool is not installed (no BPF run time)"
else
	note bpftool "ok"
fi
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
	note matplotlib "ok"
else
	note matplotlib "unavailable: python3-matplotlib does not import (no PNG chart)"
fi

# --- CPython 3.15's own sampling profiler --------------------------------------------
if out=$(chroot "$SID" /usr/bin/python3.15 -c \
	'import profiling.sampling, sys; print(sys.version.split()[0])' 2>&1); then
	note cpython315 "ok (python $out)"
else
	note cpython315 "unavailable: python3.15 -m profiling.sampling: ${out//$'\n'/ }"
fi

# --- austin 3.7, unpacked from the sid package ----------------------------------------
austin_runs() {
	# The binary lives outside the sid root; run it with sid's loader and libc.
	local libs=$SID/lib/x86_64-linux-gnu:$SID/usr/lib/x86_64-linux-gnu
	"$SID/lib64/ld-linux-x86-64.so.2" --library-path "$libs" \
		"$PEERS/austin/usr/bin/austin" --version 2>&1
}
if [ -x "$PEERS/austin/usr/bin/austin" ] && out=$(austin_runs); then
	note austin "ok ($out)"
else
	rm -rf "$PEERS/austin" "$PEERS/austin.tmp" "$SID/tmp/pyprof-peers"
	mkdir -p "$SID/tmp/pyprof-peers"
	err=""
	# apt inside the root: refresh its lists (sid moves fast), then fetch the .deb
	# only (no install: the dependency is broken). _apt cannot write there: run as
	# root. This machine's clock runs past the mirror's Valid-Until: do not check it
	# (the signatures are still checked).
	apt_opts=(-q -o APT::Sandbox::User=root -o Acquire::Check-Valid-Until=false)
	if ! out=$(chroot "$SID" apt-get "${apt_opts[@]}" update 2>&1); then
		err="apt-get update in the sid root failed: $(tail -n 2 <<<"$out" | tr '\n' ' ')"
	elif ! out=$(chroot "$SID" sh -c \
		"cd /tmp/pyprof-peers && apt-get ${apt_opts[*]} download austin" 2>&1); then
		err="apt-get download austin failed: $(tail -n 2 <<<"$out" | tr '\n' ' ')"
	else
		deb=$(ls "$SID"/tmp/pyprof-peers/austin_*.deb 2>/dev/null | head -n 1)
		if [ -z "$deb" ]; then
			err="apt-get download austin left no .deb"
		elif ! dpkg -x "$deb" "$PEERS/austin.tmp"; then
			err="dpkg -x $deb failed"
		else
			cp "$deb" "$PEERS/austin.tmp/"
			mv "$PEERS/austin.tmp" "$PEERS/austin"
		fi
	fi
	rm -rf "$SID/tmp/pyprof-peers" "$PEERS/austin.tmp"
	if [ -n "$err" ]; then
		note austin "unavailable: $err"
	elif out=$(austin_runs); then
		note austin "ok ($out)"
	else
		note austin "unavailable: the unpacked binary does not run: ${out//$'\n'/ }"
	fi
fi

mv "$status" "$PEERS/status"
echo "install-peers: status in $PEERS/status"
