#!/usr/bin/env bash
# scripts/test.sh: the whole delaysched test suite.
#
# Installs what is missing (as root), builds and installs the extension, then
# runs, as the unprivileged postgres user in a scratch copy of the tree:
#   pg_regress   sql/*.sql against expected/*.out      (the SQL surface)
#   isolation    specs/*.spec                          (races between sessions)
#   TAP          test/t/*.pl                           (delivery, restart, crash)
# and ends with one line: "N passed, N failed".  Exit status 0 only if all pass.
# As root it first builds the Debian package (scripts/package.sh), installs it
# and runs the pg_regress and isolation tests against it (counted too).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

ensure_packages "$PACKAGES $TEST_PACKAGES" || exit 1
passed=0
failed=0

# pg_regress and pg_isolation_regress print one "... ok" or "... FAILED" per
# test.  Run them one after the other, so that a failure in the first does not
# hide the second.  run_regress_suites DIR LABEL: in the tree copy DIR, against
# the extension installed now; logs in DIR/test-logs.
run_regress_suites() {
	local dir=$1 label=$2 suite only status ok bad
	as_pg_user mkdir -p "$dir/test-logs"
	for suite in regress isolation; do
		log "$label$suite tests"
		case $suite in
			regress) only="ISOLATION=" ;;
			isolation) only="REGRESS=" ;;
		esac
		(cd "$dir" && as_pg_user make -s installcheck $only PG_CONFIG="$PG_BINDIR/pg_config") \
			>"$dir/test-logs/$suite.log" 2>&1
		status=$?
		cat "$dir/test-logs/$suite.log"
		ok=$(grep -cE '\.\.\. ok' "$dir/test-logs/$suite.log")
		bad=$(grep -cE '\.\.\. FAILED|\.\.\. failed' "$dir/test-logs/$suite.log")
		if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
		passed=$((passed + ok))
		failed=$((failed + bad))
	done
	for d in "$dir/regression.diffs" "$dir/output_iso/regression.diffs"; do
		[ -s "$d" ] && { echo "---- $d"; cat "$d"; }
	done
}

# The Debian package first: built from a clean copy of the tree with
# pg_buildext (scripts/package.sh), installed with apt-get, and the
# pg_regress and isolation tests run against what it installed, before the
# build from source below replaces its files.  Installing needs root.
if [ "$(id -u)" -eq 0 ]; then
	if deb=$(bash "$root/scripts/package.sh"); then
		log "installing $deb"
		if apt-get install -y -qq --reinstall --allow-downgrades "$deb" >/dev/null; then
			# Installed: its build directory (a copy of the tree, the build's
			# products and log) would be left in /tmp by every run.
			rm -rf "$(dirname "$deb")"
			run_regress_suites "$(copy_tree_for_pg_user "$root")" "installed package: "
		else
			echo "package: apt-get install $deb failed" >&2
			failed=$((failed + 1))
		fi
	else
		failed=$((failed + 1))
	fi
else
	log "the Debian package: skipped (installing it needs root)"
fi

build_and_install "$root" || exit 1

work=$(copy_tree_for_pg_user "$root")
logs=$work/test-logs
run_regress_suites "$work" ""

# TAP: every assertion counts.
log "TAP tests"
(cd "$work" && as_pg_user env \
	PERL5LIB="$PG_PKGLIBDIR/pgxs/src/test/perl" \
	PG_REGRESS="$PG_PKGLIBDIR/pgxs/src/test/regress/pg_regress" \
	TESTDIR="$work" \
	DSLISTEN="$work/test/dslisten" \
	prove -v test/t/*.pl) >"$logs/tap.log" 2>&1
status=$?
cat "$logs/tap.log"
ok=$(grep -cE '^\s*ok [0-9]+' "$logs/tap.log")
bad=$(grep -cE '^\s*not ok [0-9]+' "$logs/tap.log")
if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
[ "$status" -ne 0 ] && [ -d "$work/tmp_check/log" ] && tail -n 50 "$work"/tmp_check/log/*.log
passed=$((passed + ok))
failed=$((failed + bad))

echo "logs: $logs"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
