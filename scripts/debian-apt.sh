# shellcheck shell=bash
# Sourced: a private apt configuration for one Debian release and
# architecture, under a directory of its own (the system's sources, lists
# and status are never touched). After `debian_apt REL ARCH DIR`, the array
# APT_OPTS makes apt-get and apt-cache use it, its lists updated.
#   MIRROR (default PYPROF_DEBIAN_MIRROR or deb.debian.org)
debian_apt() {
	local rel=$1 arch=$2 dir=$3
	local mirror=${PYPROF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
	echo "deb [arch=$arch signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $rel main" \
		>"$dir/sources.list"
	APT_OPTS=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o Dir::Etc::sourceparts=/dev/null
		  -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache"
		  -o Dir::State::status=/dev/null -o APT::Sandbox::User=root
		  -o "APT::Architecture=$arch" -o "APT::Architectures=$arch")
	apt-get "${APT_OPTS[@]}" update >"$dir/update.log" 2>&1 ||
		{ cat "$dir/update.log" >&2; echo "debian-apt: $rel/$arch: apt update failed" >&2; return 1; }
}

# The newest generic kernel package of the release for the architecture
# (what linux-image-ARCH points at), and the packages it splits into (7.x:
# linux-binary-*, linux-modules-*), on stdout, one a line.
debian_kernel_packages() {
	local arch=$1 pkg
	pkg=$(apt-cache "${APT_OPTS[@]}" depends "linux-image-$arch" |
	      sed -n "s/^ *Depends: \(linux-image-[0-9][^ ]*-$arch\)\( .*\)\?\$/\1/p" | sort -V | tail -1)
	[ -n "$pkg" ] || return 1
	echo "$pkg"
	apt-cache "${APT_OPTS[@]}" depends "$pkg" |
		sed -n 's/^ *Depends: \(linux-\(binary\|modules\)-[^ ]*\).*/\1/p'
}
