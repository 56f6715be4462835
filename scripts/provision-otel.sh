#!/usr/bin/env bash
# Provisions the real OpenTelemetry and pprof tools the OTLP and pprof tests
# run against, built offline from Debian sid's Go source packages and cached
# outside the repository:
#   $PYPROF_CACHE/otel/otelcol-pyprof  a minimal OpenTelemetry Collector
#        (golang-opentelemetry-collector-dev): the OTLP receiver (HTTP and
#        gRPC), the batch and memory_limiter processors, the debug, OTLP/HTTP
#        (otlp_http) and OTLP/gRPC (otlp_grpc) exporters; the file, env and
#        yaml config providers. Profiles pipelines need
#        --feature-gates=service.profilesSupport.
#   $PYPROF_CACHE/otel/pprof           google/pprof's tool (golang-github-google-pprof-dev)
#   $PYPROF_CACHE/otel/proto/          the .proto files of those very packages:
#        opentelemetry/proto/... (opentelemetry-proto) and
#        perftools/profiles/profile.proto (google/pprof's), for protoc -I
#   $PYPROF_CACHE/otel/VERSIONS        the recipe, Go's and the packages' versions
#   $PYPROF_CACHE/otel/src/main.go     the collector's glue, written here
#   $PYPROF_CACHE/otel-build.log       the last build's log
# Both binaries are static (CGO_ENABLED=0) and run on the host. protoc is the
# host's (protobuf-compiler, installed here if missing).
#
# The build runs in a throw-away overlay on the sid root of
# scripts/provision-pythons.sh (its lower layer, never written to), in a
# private mount namespace (nothing stays mounted): apt-get installs golang-go
# and the source packages there (~240 packages, ~320 MB of downloads, 2.5 GB
# unpacked; in a tmpfs when the machine has 10 GB of memory free), Go builds
# in GOPATH mode as Debian's own packages do (no module proxy, no network but
# the Debian mirror), and the overlay goes with the namespace. About 6-8
# minutes on 2 CPUs (apt 2, the collector 4-5, pprof 0.2); what stays is
# 40 MB. Idempotent: returns at once when the tools are there, work and come
# from this recipe. As root, no standard input needed. PYPROF_OTEL: another
# place for the tools (tests/lib/otelcol.py reads it too).
set -euo pipefail

CACHE=${PYPROF_CACHE:-/var/cache/pyprof-bpf}
SID=$CACHE/sid
OTEL=${PYPROF_OTEL:-$CACHE/otel}
WORK=$OTEL-build.tmp
# Bump when what is built changes (the glue, the components, the flags): a
# cached build of another recipe is rebuilt.
RECIPE=2
PKGS=(golang-go golang-opentelemetry-collector-dev golang-github-google-pprof-dev
      opentelemetry-proto)
SERVICE_PROTO=opentelemetry/proto/collector/profiles/v1development/profiles_service.proto
PPROF_PROTO=perftools/profiles/profile.proto

die() { echo "provision-otel: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get, chroot, mount)"

# --- protoc on the host (protoc --encode/--decode in the tests) -----------------------
if ! command -v protoc >/dev/null 2>&1; then
	echo "provision-otel: installing protobuf-compiler on the host"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends protobuf-compiler >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null 2>&1 || true
		  apt-get install -y -q --no-install-recommends protobuf-compiler >/dev/null; } ||
		die "could not install protobuf-compiler on the host"
fi

# A profiles pipeline from the OTLP receiver to every exporter, for `validate`.
check_config() {
	cat <<-'EOF'
	receivers:
	  otlp:
	    protocols:
	      http:
	        endpoint: 127.0.0.1:4318
	      grpc:
	        endpoint: 127.0.0.1:4317
	exporters:
	  debug:
	    verbosity: detailed
	  otlp_http:
	    endpoint: http://127.0.0.1:4319
	  otlp_grpc:
	    endpoint: 127.0.0.1:4320
	service:
	  pipelines:
	    profiles:
	      receivers: [otlp]
	      exporters: [debug, otlp_http, otlp_grpc]
	EOF
}

# The tools in $1 work: the collector validates a profiles pipeline (with the
# gate), pprof reads nothing with its usual error, the host's protoc parses
# the .proto files.
tools_work() {
	local d=$1 cfg out
	[ "$(sed -n 's/^recipe //p' "$d/VERSIONS" 2>/dev/null)" = "$RECIPE" ] || return 1
	[ -x "$d/otelcol-pyprof" ] && [ -x "$d/pprof" ] || return 1
	cfg=$(mktemp /tmp/provision-otel.XXXXXX.yaml)
	check_config >"$cfg"
	if ! "$d/otelcol-pyprof" validate --feature-gates=service.profilesSupport \
		--config="$cfg" >/dev/null 2>&1; then
		rm -f "$cfg"
		return 1
	fi
	rm -f "$cfg"
	out=$("$d/pprof" -raw /dev/null 2>&1 || true)
	grep -q "empty input file" <<<"$out" || return 1
	protoc -I"$d/proto" --descriptor_set_out=/dev/null "$SERVICE_PROTO" "$PPROF_PROTO" \
		>/dev/null 2>&1 || return 1
}

if tools_work "$OTEL"; then
	echo "provision-otel: $OTEL ready ($(sed -n 's/^collector //p' "$OTEL/VERSIONS"))"
	exit 0
fi

[ -f "$SID/.pyprof-complete" ] || die "no sid root at $SID: run scripts/provision-pythons.sh"

start=$SECONDS
rm -rf "$WORK" "$OTEL.new"
trap 'rm -rf "$WORK"' EXIT
# seed/: what the overlay's upper layer starts with (/pyprof-otel in the root).
seed=$WORK/seed/pyprof-otel
mkdir -p "$seed/out/proto" "$seed/gopath/src/pyprof-bpf.invalid/otelcol-pyprof" "$OTEL.new/src"

# --- the collector's glue: its components, its config providers ------------------------
cat >"$seed/gopath/src/pyprof-bpf.invalid/otelcol-pyprof/main.go" <<'EOF'
// otelcol-pyprof: the OpenTelemetry Collector with the components the
// pyprof-bpf tests use. Written by scripts/provision-otel.sh.
package main

import (
	"os"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/processor/memorylimiterprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// The collector package's Debian version, set by the linker (-X main.version).
var version = "unknown"

func components() (otelcol.Factories, error) {
	var f otelcol.Factories
	var err error
	f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
	if err != nil {
		return f, err
	}
	f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](debugexporter.NewFactory(),
		otlphttpexporter.NewFactory(), otlpexporter.NewFactory())
	if err != nil {
		return f, err
	}
	// batch takes no profiles in this version; it is here so that a
	// config that puts it in a profiles pipeline fails as it would in
	// the real distributions.
	f.Processors, err = otelcol.MakeFactoryMap[processor.Factory](batchprocessor.NewFactory(),
		memorylimiterprocessor.NewFactory())
	if err != nil {
		return f, err
	}
	f.Telemetry = otelconftelemetry.NewFactory()
	return f, nil
}

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol-pyprof",
			Description: "OpenTelemetry Collector for the pyprof-bpf tests",
			Version:     version,
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					fileprovider.NewFactory(), envprovider.NewFactory(),
					yamlprovider.NewFactory(),
				},
			},
		},
	}
	// The command prints its own error.
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		os.Exit(1)
	}
}
EOF

# --- what runs in the overlay: apt-get, go build ----------------------------------------
cat >"$seed/build.sh" <<'EOF'
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
pkgs=("$@")
apt_opts=(-q -o Dpkg::Use-Pty=0 -o APT::Sandbox::User=root
	  -o Dpkg::Options::=--force-unsafe-io -o Acquire::Check-Valid-Until=false)
install() { apt-get install -y --no-install-recommends "${apt_opts[@]}" "${pkgs[@]}"; }
# The root's own lists first; refreshed ones (in the overlay) if they name
# files the mirror no longer has.
echo "== $(date +%T) apt-get install ${pkgs[*]}"
install || { apt-get update "${apt_opts[@]}" && install; }
apt-get clean

export PATH=/usr/lib/go/bin:/usr/bin:/bin HOME=/pyprof-otel/home
export GO111MODULE=off GOPATH=/pyprof-otel/gopath:/usr/share/gocode
export GOCACHE=/pyprof-otel/gocache GOPROXY=off GOTOOLCHAIN=local
export CGO_ENABLED=0 GOFLAGS=-trimpath
mkdir -p "$HOME"
go telemetry off
go version
collector=$(dpkg-query -W -f='${Version}' golang-opentelemetry-collector-dev)
echo "== $(date +%T) go build otelcol-pyprof (collector $collector)"
cd /pyprof-otel/gopath/src/pyprof-bpf.invalid/otelcol-pyprof
go build -ldflags="-s -w -X main.version=$collector" -o /pyprof-otel/out/otelcol-pyprof .
echo "== $(date +%T) go build pprof"
go build -ldflags='-s -w' -o /pyprof-otel/out/pprof github.com/google/pprof
cp main.go /pyprof-otel/out/main.go
cp -r /usr/include/opentelemetry /pyprof-otel/out/proto/
mkdir -p /pyprof-otel/out/proto/perftools/profiles
cp /usr/share/gocode/src/github.com/google/pprof/proto/profile.proto \
	/pyprof-otel/out/proto/perftools/profiles/
{
	echo "go $(go env GOVERSION)"
	echo "collector $collector"
	dpkg-query -W -f='${Package} ${Version}\n' "${pkgs[@]}" 'golang-1.*-go' \
		golang-opentelemetry-otel-dev golang-google-grpc-dev golang-google-protobuf-dev
} >/pyprof-otel/out/versions
echo "== $(date +%T) done"
EOF

# --- the build, in a private mount namespace -------------------------------------------
# The overlay's upper layer (the packages, Go's build cache: 3.5 GB at the
# most) is a tmpfs of the namespace when there is memory for it: on a slow
# disk the build is bound by I/O, and writing then deleting the layer took
# minutes. Without the memory, a directory on disk.
log=$OTEL-build.log
layer=$WORK/layer
mkdir -p "$layer"
tmpfs=""
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
if [ "${avail_kb:-0}" -ge $((10 * 1024 * 1024)) ]; then
	tmpfs="mount -t tmpfs -o size=8g,mode=0755 pyprof-otel $layer"
fi
echo "provision-otel: building the collector and pprof in an overlay on $SID" \
	"(${tmpfs:+in memory, }log: $log)"
if ! unshare --mount --propagation private /bin/sh -c "
	set -e
	$tmpfs
	mkdir -p $layer/upper $layer/work $layer/merged
	cp -a $WORK/seed/. $layer/upper/
	mount -t overlay overlay -o lowerdir=$SID,upperdir=$layer/upper,workdir=$layer/work \
		$layer/merged
	mount -t proc proc $layer/merged/proc
	chroot $layer/merged /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		/bin/bash /pyprof-otel/build.sh ${PKGS[*]}
	cp -a $layer/upper/pyprof-otel/out/. $OTEL.new/" </dev/null >"$log" 2>&1; then
	echo "provision-otel: the build failed; last lines of $log:" >&2
	tail -n 30 "$log" >&2
	exit 1
fi

mv "$OTEL.new/main.go" "$OTEL.new/src/main.go"
versions=$OTEL.new/versions
{ echo "recipe $RECIPE"; cat "$versions"; echo "built in $((SECONDS - start)) s"; } \
	>"$OTEL.new/VERSIONS"
rm -f "$versions"
tools_work "$OTEL.new" || die "the tools built in $OTEL.new do not work (see $log)"
rm -rf "$OTEL" "$WORK"
mv "$OTEL.new" "$OTEL"
echo "provision-otel: built in $((SECONDS - start)) s; $OTEL is $(du -sh "$OTEL" | cut -f1):"
sed 's/^/  /' "$OTEL/VERSIONS"
