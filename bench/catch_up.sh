#!/usr/bin/env bash
# bench/catch_up.sh: how fast catch_up => 'all' replays a schedule's
# backlog (issue 32, item 6).
#
#   bash bench/catch_up.sh [--smoke] [--backlogs "7200 100000"]
#   make bench-catch-up        (make bench-catch-up-smoke: 7,200 only)
#
# For each backlog N, in a fresh throwaway cluster: a notify type (ack
# timeout an hour, no consumer needed: a delivery is the NOTIFY and the
# lease), a per-second schedule under catch_up 'all', and its pending firing
# moved N seconds back with sched.reschedule, so that N more instants are
# due.  The table gives the time from the move until every instant up to the
# move is delivered (polled every 0.2 s), the rate, and the checks that make
# the figure mean something: each instant delivered once, and counted once
# in the schedule's runs.  pg_cron has nothing to compare: it does not
# replay the runs a downtime missed.
# Results go to bench/results/catch_up-<time>/ (or $BENCH_OUT): table.txt.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

backlogs="7200 100000"
while [ $# -gt 0 ]; do
	case $1 in
		--smoke) backlogs="7200" ;;
		--backlogs) backlogs=$2; shift ;;
		*) echo "usage: bench/catch_up.sh [--smoke] [--backlogs \"N ...\"]" >&2; exit 2 ;;
	esac
	shift
done

ensure_packages
build_and_install "$root"
out=${BENCH_OUT:-$root/bench/results/catch_up-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
trap stop_throwaway_cluster EXIT

# One backlog of $1 seconds: prints "N seconds rate once counted".
run_backlog() {
	local n=$1 from start end took delivered
	start_throwaway_cluster 54337 "delaysched.databases = 'postgres'"
	cluster_sql -At -v ON_ERROR_STOP=1 -c "SELECT sched.define_biz('cu', ack_timeout => '1 hour')" \
		-c "SELECT sched.define_schedule('cu', 'cu', 'every 1 second', catch_up => 'all',
				starts_at => date_trunc('second', clock_timestamp()) - interval '$n seconds' - interval '1 hour')" >/dev/null
	from=$(cluster_sql -At -c "SELECT date_trunc('second', clock_timestamp()) - interval '$n seconds'")
	start=$(date +%s.%N)
	cluster_sql -At -c "SELECT sched.reschedule(id, '$from') FROM sched.tasks WHERE schedule = 'cu' AND state = 'pending'" >/dev/null
	local deadline=$((SECONDS + 3600))
	while :; do
		delivered=$(cluster_sql -At -c "SELECT count(*) FROM sched.tasks WHERE schedule = 'cu'
			AND state = 'delivered' AND run_at <= '$from'::timestamptz + interval '$n seconds'")
		end=$(date +%s.%N)
		[ "$delivered" -gt "$n" ] && break
		[ $SECONDS -lt $deadline ] || { log "backlog $n: only $delivered delivered after an hour"; break; }
		sleep 0.2
	done
	took=$(echo "$end - $start" | bc)
	cluster_sql -At -F ' ' -c "
		SELECT $((n + 1)), round($took, 1), round($((n + 1)) / $took),
			   count(*) = count(DISTINCT t.run_at),
			   (SELECT runs FROM sched.schedules WHERE name = 'cu') = count(*)
				 + (SELECT count(*) FROM sched.tasks x WHERE x.schedule = 'cu' AND x.state = 'delivered'
					AND x.run_at > '$from'::timestamptz + interval '$n seconds')
		FROM sched.tasks t WHERE t.schedule = 'cu' AND t.state = 'delivered'
		  AND t.run_at <= '$from'::timestamptz + interval '$n seconds'"
	stop_throwaway_cluster
}

{
	printf 'catch_up => '"'all'"': a per-second schedule'"'"'s backlog replayed (PostgreSQL %s)\n\n' "$("$PG_BINDIR/pg_config" --version | awk '{print $2}')"
	printf '%10s %10s %12s %10s %10s\n' firings seconds 'firings/s' 'each once' counted
	for n in $backlogs; do
		log "backlog of $n seconds"
		run_backlog "$n" | awk '{printf "%10s %10s %12s %10s %10s\n", $1, $2, $3, $4, $5}'
	done
} | tee "$out/table.txt"
