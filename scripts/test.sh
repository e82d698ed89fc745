#!/usr/bin/env bash
# scripts/test.sh: the whole delaysched test suite on every supported
# PostgreSQL major.
#
#   bash scripts/test.sh                 every major in $SUPPORTED_MAJORS
#   bash scripts/test.sh --major 17      one major (may be repeated)
#
# A major this system's Debian ships (15 on bookworm) runs here; the others
# run in a Debian chroot of the suite that ships them (scripts/chroot.sh:
# trixie for 17, sid for 18), made once and kept.  Each runs
# scripts/suite.sh: the Debian package built and installed, the tree
# compiled with -Werror, and pg_regress, isolation and TAP run against the
# package.  Ends with
# one line over all majors: "N passed, N failed" (exit status 0 only if all
# pass), after a line per major and whatever was left unchecked.
#
# Moving between majors: before the first chroot, a PostgreSQL 15 server
# with this tree's build starts on the host (127.0.0.1), and each newer
# major's suite also runs test/cross/*.pl, which dump a database of it
# with the newer pg_dump and restore it into the newer server.
#
# PG_TEST_EXTRA=delaysched_timing adds the timing bounds (lateness p99,
# rates within 5%), which a busy machine can miss; PROVE_JOBS (default 3)
# sets how many TAP tests run at once.  The first major runs the TAP tests'
# largest data sets (a million keys, backlogs of 300,000) at full size; the
# later ones at 0.2 of it (DELAYSCHED_TEST_SCALE, which sets every major's
# when given), since what they check does not depend on the size and the
# whole run must fit CI's hour.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
. "$root/scripts/chroot.sh"

usage() {
	awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
}

majors=""
while [ $# -gt 0 ]; do
	case $1 in
		--major) [ $# -ge 2 ] || { usage >&2; exit 2; }; majors="$majors $2"; shift 2 ;;
		--major=*) majors="$majors ${1#--major=}"; shift ;;
		-h | --help) usage; exit 0 ;;
		*) echo "test.sh: unknown argument \"$1\"" >&2; usage >&2; exit 2 ;;
	esac
done
majors=${majors:-$SUPPORTED_MAJORS}
for m in $majors; do
	case " $SUPPORTED_MAJORS " in
		*" $m "*) ;;
		*) echo "test.sh: PostgreSQL $m is not supported (supported: $SUPPORTED_MAJORS)" >&2; exit 2 ;;
	esac
done

logdir=$(mktemp -d /tmp/delaysched-test.XXXXXX)
dump_from=""
cleanup() {
	chroot_tree_end
	stop_throwaway_cluster
}
trap cleanup EXIT

# The server the newer majors dump from (test/cross): this system's own
# major with this tree's build, on 127.0.0.1 (a chroot shares the host's
# network).  Sets dump_from to its conninfo, or leaves it empty (and says
# why) if it could not start.
dump_source_failed=""
start_dump_source() {
	local port
	[ -n "$dump_from" ] || [ -n "$dump_source_failed" ] && return 0
	log "PostgreSQL $PG_MAJOR on the host, for the newer majors to dump from"
	if ! build_and_install "$root" || ! port=$(free_tcp_port) ||
		! start_throwaway_cluster "$port" "listen_addresses = '127.0.0.1'"; then
		log "the server to dump from did not start: moving between majors goes unchecked"
		stop_throwaway_cluster
		dump_source_failed=1
		return 1
	fi
	dump_from="host=127.0.0.1 port=$port user=postgres"
}

# run_major M LOG SCALE: the suite for major M, here or in its chroot, the
# TAP tests' large data sets at SCALE; its output goes to the terminal and
# to LOG.
run_major() {
	local m=$1 out=$2 scale=$3
	if ! major_needs_chroot "$m"; then
		PG_MAJOR=$m PG_BINDIR=/usr/lib/postgresql/$m/bin DELAYSCHED_TEST_SCALE=$scale \
			bash "$root/scripts/suite.sh" 2>&1 | tee "$out"
		return
	fi
	# (The copy holds the tracked files as they are in the working tree,
	# as scripts/package.sh takes them.)
	if ! chroot_tree_begin "$m" "$root"; then
		echo "0 passed, 1 failed" | tee "$out"
		return
	fi
	start_dump_source
	chroot_run "$CHROOT_DIR" PG_MAJOR="$m" PG_TEST_EXTRA="${PG_TEST_EXTRA:-}" PROVE_JOBS="${PROVE_JOBS:-3}" \
		DELAYSCHED_DUMP_FROM="$dump_from" DELAYSCHED_TEST_SCALE="$scale" \
		bash "$CHROOT_INSIDE/scripts/suite.sh" 2>&1 | tee "$out"
	chroot_tree_end
}

total_passed=0
total_failed=0
report=""
scale=${DELAYSCHED_TEST_SCALE:-1}
for m in $majors; do
	start=$(date +%s)
	log "PostgreSQL $m: the whole suite"
	run_major "$m" "$logdir/pg$m.log" "$scale"
	scale=${DELAYSCHED_TEST_SCALE:-0.2}
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$logdir/pg$m.log" | tail -n 1)
	[ -n "$line" ] || line="0 passed, 1 failed"
	p=${line%% passed*}
	f=${line#*, }
	f=${f%% failed}
	total_passed=$((total_passed + p))
	total_failed=$((total_failed + f))
	report="$report
PostgreSQL $m: $line in $(( $(date +%s) - start )) s"
	if major_needs_chroot "$m" && [ -z "$dump_from" ]; then
		echo "unchecked: moving from $PG_MAJOR to $m by pg_dump (no server to dump from)" >>"$logdir/pg$m.log"
	fi
	failures=$(grep -E '^failed: ' "$logdir/pg$m.log" | sed "s/^failed: /  failed on $m: /")
	[ -n "$failures" ] && report="$report
$failures"
	unchecked=$(grep -E '^unchecked: ' "$logdir/pg$m.log" | sort -u | sed "s/^unchecked: /  unchecked on $m: /")
	[ -n "$unchecked" ] && report="$report
$unchecked"
done

echo "==== summary (logs: $logdir)$report"
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
