#!/usr/bin/env bash
# Fetches the .proto files the build generates its protobuf code from
# (protoc-c, the Makefile's proto rules), from Debian sid's packages:
#   opentelemetry-proto              OTLP, the profiles signal among it
#                                    (opentelemetry/proto/...)
#   golang-github-google-pprof-dev   google/pprof's profile.proto (read back
#                                    by the OTLP exporter: a window's pprof)
# into $PYPROF_CACHE/protos (default /var/cache/pyprof-bpf/protos), through
# a private apt configuration (scripts/debian-apt.sh: the system's sources
# are never touched). Idempotent: returns at once when the files are there.
# `make setup` runs it (the build needs it); as root.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${PYPROF_CACHE:-/var/cache/pyprof-bpf}
dest=$cache/protos
files=(opentelemetry/proto/common/v1/common.proto
       opentelemetry/proto/resource/v1/resource.proto
       opentelemetry/proto/profiles/v1development/profiles.proto
       opentelemetry/proto/collector/profiles/v1development/profiles_service.proto
       perftools/profiles/profile.proto)

have_all() {
	for f in "${files[@]}"; do [ -s "$dest/$f" ] || return 1; done
}
if have_all; then
	echo "fetch-protos: ${#files[@]} .proto files in $dest"
	exit 0
fi

# shellcheck source=scripts/debian-apt.sh
. "$root/scripts/debian-apt.sh"
work=$cache/protos.tmp
rm -rf "$work"
mkdir -p "$work/debs" "$work/x"
debian_apt sid amd64 "$cache/apt-sid-protos"
(cd "$work/debs" && apt-get "${APT_OPTS[@]}" download opentelemetry-proto \
	golang-github-google-pprof-dev >"$work/download.log" 2>&1) ||
	{ cat "$work/download.log" >&2; echo "fetch-protos: apt-get download failed" >&2; exit 1; }
for d in "$work"/debs/*.deb; do dpkg-deb -x "$d" "$work/x"; done

mkdir -p "$work/out/perftools/profiles"
cp -r "$work/x/usr/include/opentelemetry" "$work/out/"
cp "$work/x/usr/share/gocode/src/github.com/google/pprof/proto/profile.proto" \
	"$work/out/perftools/profiles/profile.proto"
(cd "$work/debs" && for d in *.deb; do dpkg-deb -f "$d" Package Version | sed 's/^[^:]*: //' | paste -sd' '; done) \
	>"$work/out/VERSIONS"
rm -rf "$dest"
mv "$work/out" "$dest"
rm -rf "$work"
have_all || { echo "fetch-protos: the packages lack a .proto file the build needs" >&2; exit 1; }
echo "fetch-protos: $(paste -sd',' "$dest/VERSIONS") into $dest"
