#!/usr/bin/env bash
# scripts/package.sh: build the Debian package postgresql-M-delaysched the
# way Debian's PostgreSQL extensions are built (debian/rules: debhelper with
# pg_buildext, from postgresql-server-dev-all), from a clean copy of the tree.
#
#   bash scripts/package.sh [--major M] [OUTDIR]
#
# M is a supported major (default: PG_MAJOR, 15): bookworm's own here, 17
# and 18 in their Debian chroots (scripts/chroot.sh), whose package is then
# copied out to OUTDIR.  Installs the build's packages if missing (as root).
# The copy holds the files git tracks, as they are in the working tree (no
# build products, no untracked files), in OUTDIR/delaysched (default: a new
# directory under /tmp).  The build runs without the package's own tests
# (nocheck): the regression tests need a server with the library preloaded,
# and scripts/suite.sh runs them against the installed package.  Prints the
# path of the .deb on stdout; the build's log is OUTDIR/build.log.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
. "$root/scripts/chroot.sh"

major=$PG_MAJOR
if [ "${1:-}" = --major ]; then
	[ $# -ge 2 ] || { echo "usage: scripts/package.sh [--major M] [OUTDIR]" >&2; exit 2; }
	major=$2
	shift 2
fi
out=${1:-$(mktemp -d /tmp/delaysched-deb.XXXXXX)}
mkdir -p "$out"

# Another major's package: built by this script inside its chroot.
if major_needs_chroot "$major"; then
	trap chroot_tree_end EXIT
	chroot_tree_begin "$major" "$root"
	# (Built beside the copy, not in it: the build copies the tree.)
	built=$CHROOT_TREE.deb
	deb=$(chroot_run "$CHROOT_DIR" PG_MAJOR="$major" bash "$CHROOT_INSIDE/scripts/package.sh" \
		"$CHROOT_INSIDE.deb")
	cp "$CHROOT_DIR$deb" "$built/build.log" "$out/"
	rm -rf "$built"
	echo "$out/$(basename "$deb")"
	exit 0
fi

PG_MAJOR=$major
PG_BINDIR=/usr/lib/postgresql/$major/bin
PACKAGES=$(major_packages "$major")
ensure_packages "$PACKAGES $PACKAGE_BUILD_PACKAGES"

src=$out/delaysched
rm -rf "$src"
copy_tracked_files "$root" "$src"
# debian/control names a package per major this system supports (from
# debian/control.in and debian/pgversions): postgresql-17-delaysched in a
# trixie chroot, postgresql-15-delaysched on bookworm.
(cd "$src" && pg_buildext updatecontrol) >/dev/null

log "building the Debian package for PostgreSQL $major in $out"
if ! (cd "$src" && DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
	tail -n 40 "$out/build.log" >&2
	echo "package: dpkg-buildpackage failed (log: $out/build.log)" >&2
	exit 1
fi
ls "$out"/postgresql-"$major"-delaysched_*_*.deb
