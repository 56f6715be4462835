#!/usr/bin/env bash
# Installs the npm packages that tests/test_formats.py reads pyprof-bpf's
# output with (speedscope, pprof-format, playwright-core, ajv), at the versions
# locked in tests/consumers/package-lock.json, into a cache outside the
# repository: $PYPROF_NODE_CACHE, default /var/cache/pyprof-bpf/node.
# Idempotent: when the cache already holds that lock file's packages it only
# checks they load. Chromium itself comes from scripts/install-deps.sh.
# Also Debian's golang-go, for `go tool pprof` (the reference pprof reader,
# tests/test_native_formats.py): installed once, when `go` is missing (as
# root; apt's own cache keeps the package).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=$root/tests/consumers
cache=${PYPROF_NODE_CACHE:-/var/cache/pyprof-bpf/node}
mods=(speedscope/package.json pprof-format playwright-core ajv)

for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "install-consumers: $tool is missing (run scripts/install-deps.sh)" >&2
		exit 1
	fi
done

if ! command -v go >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-consumers: go is missing (golang-go; run as root to install it)" >&2
		exit 1
	fi
	echo "install-consumers: installing golang-go (go tool pprof)"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y -q --no-install-recommends golang-go </dev/null; then
		apt-get update -q || true
		apt-get install -y -q --no-install-recommends golang-go </dev/null
	fi
fi

loads() {
	(cd "$cache" && node -e '
		for (const m of process.argv.slice(1))
			require.resolve(m, { paths: [process.cwd()] });
	' "${mods[@]}") >/dev/null 2>&1
}

mkdir -p "$cache"
if cmp -s "$src/package-lock.json" "$cache/.installed-lock.json" && loads; then
	echo "install-consumers: packages present in $cache"
	exit 0
fi

echo "install-consumers: installing into $cache"
cp "$src/package.json" "$src/package-lock.json" "$cache/"
rm -f "$cache/.installed-lock.json"
# --ignore-scripts: nothing here needs an install script (playwright-core
# downloads no browser; the tests use /usr/bin/chromium).
(cd "$cache" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error </dev/null)
if ! loads; then
	echo "install-consumers: installed packages do not load from $cache" >&2
	exit 1
fi
cp "$src/package-lock.json" "$cache/.installed-lock.json"
echo "install-consumers: done"
