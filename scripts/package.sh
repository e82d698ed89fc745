#!/usr/bin/env bash
# scripts/package.sh: build the Debian package postgresql-15-delaysched the
# way Debian's PostgreSQL extensions are built (debian/rules: debhelper with
# pg_buildext, from postgresql-server-dev-all), from a clean copy of the tree.
#
#   bash scripts/package.sh [OUTDIR]
#
# Installs the build's packages if missing (as root).  The copy holds the
# files git tracks, as they are in the working tree (no build products, no
# untracked files), in OUTDIR/delaysched (default: a new directory under
# /tmp).  The build runs without the package's own tests (nocheck): the
# regression tests need a server with the library preloaded, and
# scripts/test.sh runs them against the installed package.  Prints the
# path of the .deb on stdout; the build's log is OUTDIR/build.log.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

ensure_packages "$PACKAGES $PACKAGE_BUILD_PACKAGES"

out=${1:-$(mktemp -d /tmp/delaysched-deb.XXXXXX)}
src=$out/delaysched
rm -rf "$src"
mkdir -p "$src"
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$root" && git ls-files -z | xargs -0 cp --parents -t "$src")
else
	cp -a "$root/." "$src"
	make -C "$src" -s clean PG_CONFIG="$PG_BINDIR/pg_config" >/dev/null 2>&1 || true
fi

log "building the Debian package in $out"
if ! (cd "$src" && DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
	tail -n 40 "$out/build.log" >&2
	echo "package: dpkg-buildpackage failed (log: $out/build.log)" >&2
	exit 1
fi
ls "$out"/postgresql-"$PG_MAJOR"-delaysched_*_*.deb
