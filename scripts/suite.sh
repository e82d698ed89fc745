#!/usr/bin/env bash
# scripts/suite.sh: the whole delaysched test suite on one PostgreSQL major,
# the one this system ships (PG_MAJOR, default 15).  scripts/test.sh runs it
# for every supported major, here or in a chroot (scripts/chroot.sh).
#
# Installs what is missing (as root), builds and installs the extension (as
# a Debian package when root), then runs, as the unprivileged postgres user in a scratch copy of the tree:
#   pg_regress   sql/*.sql against expected/*.out      (the SQL surface)
#   isolation    specs/*.spec                          (races between sessions)
#   TAP          test/t/*.pl                           (delivery, restart, crash)
# and ends with one line: "N passed, N failed".  Exit status 0 only if all pass.
# As root it first builds the Debian package (scripts/package.sh) and installs
# it, and the tests run against what it installed (the tree is compiled too,
# with -Werror, but not installed over it).
#
# TAP tests run through PGXS (make installcheck, TAP_TESTS) with prove -j
# $PROVE_JOBS (default 3; the longest first).  Timing bounds are checked only when PG_TEST_EXTRA
# names delaysched_timing (test/perl/DelayschedTest.pm); otherwise their
# figures are printed, not asserted.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

ensure_packages "$PACKAGES $TEST_PACKAGES" || exit 1
passed=0
failed=0
# The names of what failed, said again just before the last line, so that a
# CI page that shows only the end of the output still says which tests.
failures=""
note_failures() {
	failures="$failures
$(grep -E "$2" "$1")"
}
PROVE_JOBS=${PROVE_JOBS:-3}

# Count a log's "... ok" and "... FAILED" lines (pg_regress, isolation) or
# "ok N" and "not ok N" lines (TAP), and a failure if the run failed without
# one.  count_results LOG STATUS OK_PATTERN BAD_PATTERN
count_results() {
	local log=$1 status=$2 ok bad
	ok=$(grep -cE "$3" "$log")
	bad=$(grep -cE "$4" "$log")
	if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
	passed=$((passed + ok))
	failed=$((failed + bad))
}

# pg_regress and pg_isolation_regress print one "... ok" or "... FAILED"
# (from 16 on, "ok N" or "not ok N") per test.  Run them one after the
# other, so that a failure in the first does not hide the second.  run_regress_suites DIR LABEL: in the tree copy DIR, against
# the extension installed now; logs in DIR/test-logs.
run_regress_suites() {
	local dir=$1 label=$2 suite only status
	as_pg_user mkdir -p "$dir/test-logs"
	for suite in regress isolation; do
		log "PostgreSQL $PG_MAJOR: $label$suite tests"
		case $suite in
			regress) only="ISOLATION=" ;;
			isolation) only="REGRESS=" ;;
		esac
		(cd "$dir" && as_pg_user make -s installcheck $only TAP_TESTS= PG_CONFIG="$PG_BINDIR/pg_config") \
			>"$dir/test-logs/$suite.log" 2>&1
		status=$?
		cat "$dir/test-logs/$suite.log"
		# "test x ... ok" up to 15, "ok 1 - x" (TAP) from 16 on.
		count_results "$dir/test-logs/$suite.log" "$status" '\.\.\. ok|^ok [0-9]+ ' \
			'\.\.\. FAILED|\.\.\. failed|^not ok [0-9]+ '
		note_failures "$dir/test-logs/$suite.log" '\.\.\. FAILED|\.\.\. failed|^not ok [0-9]+ '
	done
	for d in "$dir/regression.diffs" "$dir/output_iso/regression.diffs"; do
		[ -s "$d" ] && { echo "---- $d"; cat "$d"; }
	done
}

# The Debian package first: built from a clean copy of the tree with
# pg_buildext (scripts/package.sh) and installed with apt-get; every test
# below runs against what it installed.  The tree is still compiled with
# -Werror (the package's build does not treat warnings as errors), but not
# installed over the package, and the LISTEN client and benchmark programs
# the TAP tests use are built.  Without root (or if the package fails), the
# build from source is installed and tested instead.
packaged=""
if [ "$(id -u)" -eq 0 ]; then
	if deb=$(bash "$root/scripts/package.sh"); then
		log "installing $deb"
		if apt-get install -y -qq --reinstall --allow-downgrades "$deb" >/dev/null; then
			# Installed: its build directory (a copy of the tree, the build's
			# products and log) would be left in /tmp by every run.
			rm -rf "$(dirname "$deb")"
			packaged=1
		else
			echo "package: apt-get install $deb failed" >&2
			failed=$((failed + 1))
		fi
	else
		failed=$((failed + 1))
	fi
else
	log "the Debian package: skipped (installing it needs root)"
	echo "unchecked: the Debian package (building and installing it needs root)"
fi

if [ -n "$packaged" ]; then
	log "compiling the tree with -Werror (the package stays installed), and the test tools"
	make -C "$root" -s -j2 PG_CONFIG="$PG_BINDIR/pg_config" COPT=-Werror all test-tools >/dev/null || exit 1
	label="installed package: "
else
	build_and_install "$root" || exit 1
	label=""
fi

work=$(copy_tree_for_pg_user "$root")
logs=$work/test-logs
run_regress_suites "$work" "$label"

# TAP through PGXS (prove_installcheck), every assertion counted; with
# DELAYSCHED_DUMP_FROM (an older major's server, from scripts/test.sh) the
# tests of moving between majors too (test/cross).
# The longest files first (their times on CI's two cores, 2026-11-29, 80 s
# to 350 s): prove -j starts files in the order given, and one of them
# started last would run alone at the end.
tap_tests=""
for t in 030_keys 007_workers 021_fairness 016_held_locks 020_router 017_databases \
	031_key_fairness 014_faults 028_sql_jobs; do
	[ -f "$work/test/t/$t.pl" ] && tap_tests="$tap_tests test/t/$t.pl"
done
for f in "$work"/test/t/*.pl; do
	case " $tap_tests " in *" test/t/${f##*/} "*) ;; *) tap_tests="$tap_tests test/t/${f##*/}" ;; esac
done
[ -n "${DELAYSCHED_DUMP_FROM:-}" ] && tap_tests="$tap_tests test/cross/*.pl"
log "PostgreSQL $PG_MAJOR: TAP tests (prove -j $PROVE_JOBS)"
(cd "$work" && as_pg_user env PG_TEST_EXTRA="${PG_TEST_EXTRA:-}" \
	DELAYSCHED_DUMP_FROM="${DELAYSCHED_DUMP_FROM:-}" DELAYSCHED_TEST_SCALE="${DELAYSCHED_TEST_SCALE:-1}" \
	make -s installcheck REGRESS= ISOLATION= PG_CONFIG="$PG_BINDIR/pg_config" \
	PROVE_TESTS="$tap_tests" PROVE_FLAGS="-v --timer -j $PROVE_JOBS") >"$logs/tap.log" 2>&1
status=$?
cat "$logs/tap.log"
# prove's summary (verbose lines interleave under -j): "Files=F, Tests=N,
# ..." and, per failing file, "(Wstat: W (exited E) Tests: T Failed: K)";
# a file that failed with no failed assertion (it died, or broke its plan)
# counts once.
tap_total=$(sed -nE 's/^Files=[0-9]+, Tests=([0-9]+),.*/\1/p' "$logs/tap.log" | tail -n 1)
read -r tap_failed tap_broken < <(grep -oE 'Wstat: [0-9]+( \([^)]*\))? Tests: [0-9]+ Failed: [0-9]+' "$logs/tap.log" |
	awk '{ f += $NF; if ($NF == 0) b++ } END { print f + 0, b + 0 }')
passed=$((passed + ${tap_total:-0} - tap_failed))
tap_failed=$((tap_failed + tap_broken))
if [ "$status" -ne 0 ] && [ "$tap_failed" -eq 0 ]; then tap_failed=1; fi
failed=$((failed + tap_failed))
note_failures "$logs/tap.log" '^not ok [0-9]+ |Wstat: '
[ "$status" -ne 0 ] && [ -d "$work/tmp_check/log" ] && tail -n 50 "$work"/tmp_check/log/*.log

# What was not checked here, said rather than hidden: a test that skips
# says "# unchecked: ..." (DelayschedTest::skip_all).
grep -hE '^# unchecked: ' "$logs/tap.log" | sed 's/^# //'
[ "${DELAYSCHED_TEST_SCALE:-1}" = 1 ] ||
	echo "unchecked: the TAP tests' largest data sets at full size (here at $DELAYSCHED_TEST_SCALE of it: DELAYSCHED_TEST_SCALE)"
case " ${PG_TEST_EXTRA:-} " in
	*" delaysched_timing "*) ;;
	*) echo "unchecked: timing bounds (lateness, rates within 5%); PG_TEST_EXTRA=delaysched_timing checks them" ;;
esac

echo "logs: $logs"
printf '%s\n' "$failures" | sed -E '/^[[:space:]]*$/d; s/^[[:space:]]*/failed: /'
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
