#!/usr/bin/env bash
# bench/monitoring.sh: what reading the numbers costs beside many pending
# tasks, against sched.biz_stats as it was (0.1 and 0.2 before the gauges
# in shared memory: counting every task), in one run.
#
#   bash bench/monitoring.sh [--smoke] [--tasks N]
#   make bench-monitoring      (make bench-monitoring-smoke: 20,000 tasks)
#
# On one throwaway cluster, N pending tasks (default 1,000,000) in 10
# business types, due an hour or more ahead, then 11 runs of each read, as
# psql's \timing reports it (server time and the trip over a local socket):
#   biz_stats        SELECT * FROM sched.biz_stats
#   biz_stats_old    the same view as delaysched--0.1.sql defines it, which
#                    counts the tables
#   metrics          SELECT sched.metrics()
#   metric_samples   SELECT count(*) FROM sched.metric_samples()
#   exporter_scrape  one scrape of prometheus-postgres-exporter with
#                    contrib/prometheus/delaysched-queries.yaml (its 11
#                    queries), timed from a client, if the exporter is installed
#   count            SELECT * FROM sched._task_counts: the count scanner
#                    worker 0 takes (holding a SHARE lock) at its start
# and how long after a server restart, and after sched.recount_stats(), the
# gauges are ready.
# Results go to bench/results/monitoring-<time>/ (or $BENCH_OUT): table.txt.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

ntasks=1000000
runs=11
while [ $# -gt 0 ]; do
	case $1 in
		--smoke) ntasks=20000; runs=3 ;;
		--tasks) ntasks=$2; shift ;;
		*) echo "usage: bench/monitoring.sh [--smoke] [--tasks N]" >&2; exit 2 ;;
	esac
	shift
done

ensure_packages
build_and_install "$root"
out=${BENCH_OUT:-$root/bench/results/monitoring-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
work=$(mktemp -d /tmp/delaysched-bench-monitoring.XXXXXX)
[ "$(id -u)" -eq 0 ] && chown "$PG_USER" "$work"
port=54336
exporter_pid=""

stop_all() {
	[ -n "$exporter_pid" ] && kill "$exporter_pid" 2>/dev/null
	as_pg_user pg_ctl -D "$work/data" stop -m fast >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap stop_all EXIT

as_pg_user initdb -D "$work/data" -A trust >/dev/null
cat >>"$work/data/postgresql.conf" <<EOF
shared_preload_libraries = 'delaysched'
listen_addresses = ''
unix_socket_directories = '$work'
port = $port
shared_buffers = 512MB
max_wal_size = 8GB
EOF
as_pg_user pg_ctl -D "$work/data" -l "$work/log" -w start >/dev/null
psql_() { as_pg_user psql -h "$work" -p "$port" -X -q -v ON_ERROR_STOP=1 "$@"; }
ready() { [ "$(psql_ -At -c "SELECT coalesce(bool_and(counted), false) FROM sched._type_counts('{t1}')" 2>/dev/null)" = t ]; }
wait_ready() { local deadline=$((SECONDS + 120)); until ready; do [ $SECONDS -lt $deadline ] || return 1; sleep 0.02; done; }

psql_ -c "CREATE EXTENSION delaysched" -c "SELECT sched.define_biz('t' || i) FROM generate_series(1, 10) i" >/dev/null
log "adding $ntasks pending tasks"
batch=10000
for ((done = 0; done < ntasks; done += batch)); do
	psql_ -c "SELECT count(*) FROM sched.add_many('t' || ($done / $batch % 10 + 1),
		ARRAY(SELECT now() + interval '1 hour' + (($done + i) % 86400) * interval '1 second'
		      FROM generate_series(1, LEAST($batch, $ntasks - $done)) i))" >/dev/null
done
psql_ -c "VACUUM ANALYZE" >/dev/null
# The view as it was: 0.1's definition, beside the new one.
awk '/^CREATE VIEW sched.biz_stats/,/;$/' "$root/delaysched--0.1.sql" |
	sed 's/^CREATE VIEW sched.biz_stats/CREATE VIEW public.biz_stats_old/' >"$work/old.sql"
psql_ -f "$work/old.sql" >/dev/null
wait_ready

# median, min and max of psql's \timing over $runs runs of query $2 (after one unmeasured).
time_query() {
	local label=$1 query=$2
	(echo '\o /dev/null'; echo "$query;"; echo '\timing on'; for ((i = 0; i < runs; i++)); do echo "$query;"; done) |
		psql_ -At 2>&1 | grep -o 'Time: [0-9.]*' | awk '{print $2}' | sort -n |
		awk -v label="$label" '{a[NR] = $1} END {printf "%-16s %10.2f %10.2f %10.2f\n", label, a[int((NR + 1) / 2)], a[1], a[NR]}'
}

{
	printf '%s pending tasks in 10 types; %s runs each, ms (psql \\timing)\n\n' "$ntasks" "$runs"
	printf '%-16s %10s %10s %10s\n' read median min max
	time_query biz_stats 'SELECT * FROM sched.biz_stats'
	time_query biz_stats_old 'SELECT * FROM public.biz_stats_old'
	time_query metrics 'SELECT sched.metrics()'
	time_query metric_samples 'SELECT count(*) FROM sched.metric_samples()'
	time_query count 'SELECT * FROM sched._task_counts'
	if [ -x /usr/bin/prometheus-postgres-exporter ]; then
		eport=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		# (Not through runuser: killing it must reach the exporter itself.)
		DATA_SOURCE_NAME="host=$work port=$port user=$PG_USER dbname=postgres sslmode=disable" \
			/usr/bin/prometheus-postgres-exporter --web.listen-address=127.0.0.1:$eport \
			--extend.query-path="$root/contrib/prometheus/delaysched-queries.yaml" \
			--disable-default-metrics --disable-settings-metrics >"$work/exporter.log" 2>&1 &
		exporter_pid=$!
		/usr/bin/python3 - "127.0.0.1:$eport" "$runs" <<'PY' | sort -n |
import sys, time, urllib.request
url = "http://%s/metrics" % sys.argv[1]
deadline = time.time() + 60
while b"\ndelaysched_stats_ready" not in urllib.request.urlopen(url).read():
    if time.time() > deadline:
        sys.exit("the exporter serves no delaysched metrics")
    time.sleep(0.2)
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    urllib.request.urlopen(url).read()
    print("%.3f" % ((time.perf_counter() - start) * 1000))
PY
			awk '{a[NR] = $1} END {printf "%-16s %10.2f %10.2f %10.2f\n", "exporter_scrape", a[int((NR + 1) / 2)], a[1], a[NR]}'
		kill "$exporter_pid"; exporter_pid=""
	fi
	echo
	as_pg_user pg_ctl -D "$work/data" -l "$work/log" -w restart >/dev/null
	start=$(date +%s.%N)
	wait_ready
	awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "gauges ready %.2f s after the restart (pg_ctl returned)\n", b - a}'
	psql_ -c 'SELECT sched.recount_stats()' >/dev/null
	start=$(date +%s.%N)
	wait_ready
	awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "gauges ready %.2f s after sched.recount_stats()\n", b - a}'
} | tee "$out/table.txt"
log "results in $out"
