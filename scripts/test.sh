#!/usr/bin/env bash
# scripts/test.sh: the whole delaysched test suite.
#
# Installs what is missing (as root), builds and installs the extension, then
# runs, as the unprivileged postgres user in a scratch copy of the tree:
#   pg_regress   sql/*.sql against expected/*.out      (the SQL surface)
#   isolation    specs/*.spec                          (races between sessions)
#   TAP          test/t/*.pl                           (delivery, restart, crash)
# and ends with one line: "N passed, N failed".  Exit status 0 only if all pass.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

ensure_packages || exit 1
build_and_install "$root" || exit 1

work=$(copy_tree_for_pg_user "$root")
logs=$work/test-logs
as_pg_user mkdir -p "$logs"
passed=0
failed=0

# pg_regress and pg_isolation_regress print one "... ok" or "... FAILED" per
# test.  Run them one after the other, so that a failure in the first does not
# hide the second.
for suite in regress isolation; do
	log "$suite tests"
	case $suite in
		regress) only="ISOLATION=" ;;
		isolation) only="REGRESS=" ;;
	esac
	(cd "$work" && as_pg_user make -s installcheck $only PG_CONFIG="$PG_BINDIR/pg_config") \
		>"$logs/$suite.log" 2>&1
	status=$?
	cat "$logs/$suite.log"
	ok=$(grep -cE '\.\.\. ok' "$logs/$suite.log")
	bad=$(grep -cE '\.\.\. FAILED|\.\.\. failed' "$logs/$suite.log")
	if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
	passed=$((passed + ok))
	failed=$((failed + bad))
done
for d in "$work/regression.diffs" "$work/output_iso/regression.diffs"; do
	[ -s "$d" ] && { echo "---- $d"; cat "$d"; }
done

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
