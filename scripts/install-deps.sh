#!/usr/bin/env bash
# Installs the Debian packages that the build and the tests need. Idempotent:
# packages already present are not fetched again; apt-get update runs only
# when something is missing.
#
#   scripts/install-deps.sh           what `make test` needs (the build's too)
#   scripts/install-deps.sh --build   what `make` needs, alone (`make setup`)
set -euo pipefail

BUILD=(
	make gcc clang llvm libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev pkg-config
	# `top`'s terminal view (ncursesw)
	libncurses-dev
	# asm/unistd_64.h, the syscall names (Makefile: syscall_table.h)
	linux-libc-dev
	# `agent --push`: libcurl's headers (the library itself is opened at run time)
	libcurl4-openssl-dev
	# make release (the static libraries libdw needs), make deb
	libbz2-dev liblzma-dev dpkg-dev
	# OTLP and pprof messages: protoc-c generates their C from .proto files
	# (scripts/fetch-protos.sh fetches those), libprotobuf-c packs them
	protobuf-c-compiler libprotobuf-c-dev
)

PKGS=(
	"${BUILD[@]}"
	# driving `top` in its tests (tests/test_top.py)
	tmux
	# tests
	python3 python3-pytest libcmocka-dev debootstrap util-linux procps perl
	# callgrind_annotate reads our callgrind output (tests/test_views_callgraph.py)
	valgrind
	# GNU time: peak RSS of a run (tests/test_hostile.py, tests/test_all.py)
	time
	# `record -- CMD` run through a real sudo (tests/test_launch.py)
	sudo
	# real consumers of our output formats (issues #3, #5)
	chromium
	# the man page, capabilities (tests/test_install.py)
	binutils man-db groff-base libcap2-bin
	# protoc --decode: what the OTLP exports hold (tests/test_otlp.py)
	protobuf-compiler
	# another tracer holding a target (tests/test_blocking.py)
	strace
	# gcore: core files of live targets for `dump --core` (tests/test_dump_core.py)
	gdb
	# the arm64 build on this machine (issue #34): lld links it against
	# scripts/provision-sysroot.sh's sysroot, qemu-user-static runs it
	# (tests/test_cross.py), zstd opens kernel images (scripts/btf-from-image.py)
	lld qemu-user-static zstd
	# the arm64 guest (scripts/provision-arm64.sh, tests/test_arm64.py)
	qemu-system-arm
)

build_only=0
[ "${1:-}" = --build ] && build_only=1 && PKGS=("${BUILD[@]}")

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: must run as root (apt-get install)" >&2
	exit 1
fi

missing=()
for p in "${PKGS[@]}"; do
	case "$p" in \#*) continue ;; esac
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done

# node and npm come with the machine image (NodeSource); Debian's npm would
# conflict with it, so only install Debian's when node is absent.
[ $build_only = 1 ] || command -v node >/dev/null 2>&1 || missing+=(nodejs npm)

if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#PKGS[@]} packages present"
	exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A third-party list that cannot be reached must not stop the Debian ones.
apt-get update -q || echo "install-deps: apt-get update reported errors; continuing" >&2
apt-get install -y -q --no-install-recommends "${missing[@]}"
