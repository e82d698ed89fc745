#!/usr/bin/env bash
# bench/http.sh: webhook delivery, measured against a local receiver that
# answers at once (test/bench/hooksink, a C epoll server), on a throwaway
# cluster with delaysched preloaded and one HTTP worker.
#
#   bash bench/http.sh            the full run (make bench-http), ~3 minutes
#   bash bench/http.sh --smoke    tiny sizes, a few seconds each
#
# Workloads (each with a fresh receiver, whose log gives arrival times):
#   throughput   N tasks due at once (50,000): webhooks/s, first to last
#                arrival, and due time to last arrival
#   through-2w   the same with two HTTP workers, on a cluster of its own
#   latency      500 tasks/s for 30 s, each added by its own transaction
#                (pgbench -R 500, one client) with run_at = clock_timestamp():
#                commit-to-arrival p50, p99, max
#   scheduled    30 s of tasks scheduled ahead, falling due at 500/s: due-
#                to-arrival p50, p99, max
#   small        200 tasks due at once to a small receiver (the test
#                suite's Python http.server, with the standard library's
#                listen backlog of 5): arrivals, failures and timeouts,
#                due time to last arrival, the most connections open at
#                once; with each receiver's allowance (the default) and
#                without it (delaysched.http_max_in_flight_per_host = 0,
#                as before 0.3; not in the smoke run: its timeouts take
#                10 s and more)
#
# The workloads below measure the worker's own slots, with every request
# sent at once: they run with the receivers' allowance off (= 0).
#
#   hung         1,000 tasks to an endpoint that never answers (timeout
#                10 s), hanging when 1,000 normal tasks fall due a second
#                later: the normal ones' lateness, beside the same 1,000 alone
#   fdcap        the HTTP worker under a 512-descriptor limit, 2,000 tasks to
#                an endpoint that answers after 1 s: its cap, the most
#                requests it had in flight, and that every task arrived
#   memory       1,000 requests in flight (the endpoint answers after 5 s):
#                the HTTP worker's private resident memory before and during
#
# Before the latency workload the cluster is vacuumed and checkpointed
# (settle), so that autovacuum's clean-up of the 50,000-task burst does not
# run during it.
#
# Results: bench/results/http-<time>/ (or $BENCH_OUT): http.txt (the table),
# the receiver logs and the task times.  pg_net is not packaged for Debian;
# doc/performance.md sets these figures beside the ones the issue gives.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

smoke=""
for arg in "$@"; do
	case $arg in
		--smoke) smoke=1 ;;
		*) echo "usage: bench/http.sh [--smoke]" >&2; exit 2 ;;
	esac
done

ensure_packages
build_and_install "$root"
make -C "$root" -s test/bench/hooksink >/dev/null

if [ -n "$smoke" ]; then
	burst=500 rate=100 seconds=2 hung=50 fdtasks=300 inflight=100 small=200
else
	burst=50000 rate=500 seconds=30 hung=1000 fdtasks=2000 inflight=1000 small=200
fi

out=${BENCH_OUT:-$root/bench/results/http-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
[ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$out"
sink_pid=""
cleanup() {
	[ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null || true
	stop_throwaway_cluster
}
trap cleanup EXIT

# Start the receiver; its arrivals go to $out/$1.sink when it stops.
start_sink() {
	local name=$1
	shift
	rm -f "$out/sink.port"
	# Not as the postgres user: runuser would not pass SIGTERM on to it.
	"$root/test/bench/hooksink" --port-file "$out/sink.port" --out "$out/$name.sink" \
		--hang-path /hang "$@" </dev/null >/dev/null 2>>"$out/sink.log" &
	sink_pid=$!
	for _ in $(seq 1 100); do [ -s "$out/sink.port" ] && break; sleep 0.05; done
	sink_port=$(cat "$out/sink.port")
}

stop_sink() {
	kill -TERM "$sink_pid"
	wait "$sink_pid" || true
	sink_pid=""
}

# Wait (up to $2 s) until the query $1 returns t.
wait_for() {
	local deadline=$(( $(date +%s) + $2 ))
	until [ "$(cluster_sql -Atc "$1")" = t ]; do
		[ "$(date +%s)" -lt "$deadline" ] || { echo "bench: timed out waiting for: $1" >&2; return 1; }
		sleep 0.05
	done
}

# Let the cluster settle after a workload: clean up now what autovacuum would
# clean up during the next one (the 50,000 finished tasks and attempts of
# the burst), so that each workload measures itself.
settle() {
	cluster_sql -c "VACUUM (ANALYZE) sched.task, sched.finished, sched.attempt" >/dev/null
	cluster_sql -c "CHECKPOINT" >/dev/null
}

# Every task's id and run_at (epoch µs) of the given types, for the analysis.
task_times() {
	cluster_sql -Atc "SELECT id || ' ' || biz_type || ' ' || (extract(epoch FROM run_at) * 1000000)::bigint
	                  FROM sched.tasks WHERE biz_type IN ($1)" >"$out/$2.tasks"
}

analyse() {	# analyse WORKLOAD ARGS...
	python3 "$root/bench/http_report.py" "$@" | tee -a "$out/http.txt"
}

# Sample the HTTP worker every 50 ms while $1 is true, into $2: its requests
# in flight (sched.workers), its private resident memory (RssAnon: what it
# allocated itself, not the shared buffers it touched) and its open files.
sample_worker() {
	local query=$1 file=$2 pid
	pid=$(cluster_sql -Atc "SELECT pid FROM sched.workers WHERE role = 'http'")
	: >"$file"
	while [ "$(cluster_sql -Atc "$query")" = t ]; do
		echo "$(cluster_sql -Atc "SELECT split_part(holds, ' ', 1) FROM sched.workers WHERE role = 'http'") \
$(awk '/^RssAnon/ {print $2}' "/proc/$pid/status") $(ls "/proc/$pid/fd" | wc -l)" >>"$file"
		sleep 0.05
	done
}

# The throughput workload on the running cluster, which has $2 HTTP workers:
# $burst tasks of a new type due at once, results under the name $1.
burst_throughput() {
	local name=$1 workers=$2
	start_sink "$name"
	cluster_sql -c "SELECT sched.define_biz('burst', 'http', url => 'http://127.0.0.1:$sink_port/ok')" >/dev/null
	cluster_sql -c "SELECT count(*) FROM sched.add_many('burst',
		array_fill(clock_timestamp() + interval '2 seconds', ARRAY[$burst]))" >/dev/null
	wait_for "SELECT count(*) = $burst FROM sched.tasks WHERE biz_type = 'burst' AND state = 'done'" 300
	stop_sink
	task_times "'burst'" "$name"
	analyse throughput "$out/$name.sink" "$out/$name.tasks" "$workers"
}

: >"$out/http.txt"
log "webhook benchmarks; results in $out"
# 2,000 slots: a type alone may have 1,500 requests in flight.
start_throwaway_cluster 54333 "delaysched.http_workers = 1
delaysched.http_max_in_flight = 2000"

# --- throughput ---
burst_throughput throughput 1

# --- latency at a steady rate ---
settle
start_sink latency
cluster_sql -c "SELECT sched.define_biz('steady', 'http', url => 'http://127.0.0.1:$sink_port/ok')" >/dev/null
echo "SELECT sched.add('steady', clock_timestamp(), '{\"n\": 1}');" >"$out/steady.sql"
as_pg_user "$PG_BINDIR/pgbench" -n -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -c 1 -j 1 \
	-R "$rate" -T "$seconds" -f "$out/steady.sql" postgres >"$out/pgbench.txt" 2>&1
n=$(cluster_sql -Atc "SELECT count(*) FROM sched.tasks WHERE biz_type = 'steady'")
wait_for "SELECT count(*) = $n FROM sched.tasks WHERE biz_type = 'steady' AND state = 'done'" 60
stop_sink
task_times "'steady'" latency
analyse latency "$out/latency.sink" "$out/latency.tasks" "$rate"

# --- lateness of tasks scheduled ahead, falling due at a steady rate ---
start_sink scheduled
cluster_sql -c "SELECT sched.define_biz('ahead', 'http', url => 'http://127.0.0.1:$sink_port/ok')" >/dev/null
cluster_sql -c "SELECT count(*) FROM sched.add_many('ahead', ARRAY(
	SELECT clock_timestamp() + interval '1 second' + i * interval '1 second' / $rate
	FROM generate_series(1, $rate * $seconds) i))" >/dev/null
wait_for "SELECT count(*) = $rate * $seconds FROM sched.tasks WHERE biz_type = 'ahead' AND state = 'done'" $(( seconds + 60 ))
stop_sink
task_times "'ahead'" scheduled
analyse scheduled "$out/scheduled.sink" "$out/scheduled.tasks" "$rate"

# Set the allowance per receiver to $1, and the worker's cap to $2 (about
# 2,000): the worker shows its cap in sched.workers, so once it shows $2 it
# has read both.
http_per_host() {
	cluster_sql -c "ALTER SYSTEM SET delaysched.http_max_in_flight_per_host = $1" \
		-c "ALTER SYSTEM SET delaysched.http_max_in_flight = $2" -c "SELECT pg_reload_conf()" >/dev/null
	wait_for "SELECT holds LIKE '% of $2;%' FROM sched.workers WHERE role = 'http'" 30
}

# --- 200 due at once to a small receiver ---
# Run the receiver as $1 (a label) with the allowance per receiver $2, the
# worker's cap $3; $4 says what it is.
small_receiver() {
	local label=$1 port type="small_$1"
	http_per_host "$2" "$3"
	rm -f "$out/small.port"
	python3 "$root/test/http_receiver.py" --port-file "$out/small.port" --log "$out/small-$label.log" \
		--backlog default </dev/null >/dev/null 2>>"$out/sink.log" &
	sink_pid=$!
	for _ in $(seq 1 100); do [ -s "$out/small.port" ] && break; sleep 0.05; done
	port=$(cat "$out/small.port")
	cluster_sql -c "SELECT sched.define_biz('$type', 'http', url => 'http://127.0.0.1:$port/ok/$label',
		timeout => '10 seconds')" >/dev/null
	cluster_sql -c "SELECT count(*) FROM sched.add_many('$type',
		array_fill(date_trunc('second', clock_timestamp()) + interval '2 seconds', ARRAY[$small]))" >/dev/null
	wait_for "SELECT count(*) = 0 FROM sched.task WHERE biz_type = '$type'" 300
	stop_sink
	task_times "'$type'" "small-$label"
	analyse small "$out/small-$label.log" "$out/small-$label.tasks" "$(cluster_sql -Atc "
		SELECT (SELECT count(*) FROM sched.tasks WHERE biz_type = '$type') || ' ' ||
		       (SELECT count(*) FROM sched.tasks WHERE biz_type = '$type' AND state = 'done' AND attempt = 1) || ' ' ||
		       count(*) FILTER (WHERE error IS NOT NULL) || ' ' || count(*) FILTER (WHERE error LIKE 'timeout%')
		FROM sched.attempts WHERE biz_type = '$type'")" "$4"
}
small_receiver polite 256 1999 "each receiver's allowance (the default)"
[ -n "$smoke" ] || small_receiver all_at_once 0 1998 "every request at once (allowance off)"

# From here on, every request is sent at once (see the header).
http_per_host 0 2000

# --- one hung endpoint beside normal requests ---
for variant in alone beside; do
	start_sink "hung-$variant"
	cluster_sql -c "SELECT sched.define_biz('normal_$variant', 'http', url => 'http://127.0.0.1:$sink_port/ok')" >/dev/null
	cluster_sql -c "SELECT sched.define_biz('hung_$variant', 'http', url => 'http://127.0.0.1:$sink_port/hang',
		timeout => '10 seconds', max_attempts => 1)" >/dev/null
	types="'normal_$variant'"
	if [ $variant = beside ]; then
		# The hung type's requests are in flight, hanging, when the normal
		# ones fall due a second later.
		cluster_sql -c "SELECT count(*) FROM sched.add_many('hung_beside',
			array_fill(date_trunc('second', clock_timestamp()) + interval '2 seconds', ARRAY[$hung]))" >/dev/null
		types="$types, 'hung_beside'"
	fi
	cluster_sql -c "SELECT count(*) FROM sched.add_many('normal_$variant',
		array_fill(date_trunc('second', clock_timestamp()) + interval '3 seconds', ARRAY[$hung]))" >/dev/null
	wait_for "SELECT count(*) = $hung FROM sched.tasks WHERE biz_type = 'normal_$variant' AND state = 'done'" 120
	in_flight=$(cluster_sql -Atc "SELECT count(*) FROM sched.task WHERE biz_type = 'hung_$variant' AND state = 'd'")
	stop_sink
	task_times "$types" "hung-$variant"
	analyse hung "$out/hung-$variant.sink" "$out/hung-$variant.tasks" "normal_$variant" "$in_flight"
	cluster_sql -c "SELECT sched.drop_biz('hung_$variant', cancel_tasks => true)" >/dev/null
done

# --- memory with many requests in flight ---
start_sink memory --delay-ms 5000
cluster_sql -c "SELECT sched.define_biz('slow', 'http', url => 'http://127.0.0.1:$sink_port/ok', timeout => '30 seconds')" >/dev/null
# A fresh HTTP worker, without the connections the runs above left open.
pid=$(cluster_sql -Atc "SELECT pid FROM sched.workers WHERE role = 'http'")
cluster_sql -Atc "SELECT pg_terminate_backend($pid)" >/dev/null
wait_for "SELECT pid IS NOT NULL AND pid <> $pid FROM sched.workers WHERE role = 'http'" 30
pid=$(cluster_sql -Atc "SELECT pid FROM sched.workers WHERE role = 'http'")
wait_for "SELECT last_tick IS NOT NULL FROM sched.workers WHERE role = 'http'" 30
before=$(awk '/^RssAnon/ {print $2}' "/proc/$pid/status")
cluster_sql -c "SELECT count(*) FROM sched.add_many('slow', array_fill(clock_timestamp(), ARRAY[$inflight]))" >/dev/null
sample_worker "SELECT count(*) < $inflight FROM sched.tasks WHERE biz_type = 'slow' AND state = 'done'" "$out/memory.samples"
stop_sink
analyse memory "$out/memory.samples" "$before" "$inflight"
stop_throwaway_cluster

# --- the same burst with two HTTP workers, on a cluster of its own ---
# (delaysched.http_workers is read at server start.)
start_throwaway_cluster 54335 "delaysched.http_workers = 2
delaysched.http_max_in_flight = 2000"
burst_throughput throughput-2w 2
stop_throwaway_cluster

# --- requests in flight under a low file descriptor limit ---
# A cluster of its own, started with "ulimit -n 512" (soft and hard) and
# max_files_per_process = 200, so that the worker's cap comes from the limit.
CLUSTER_DIR=$(mktemp -d /tmp/delaysched-cluster.XXXXXX)
CLUSTER_PORT=54334
chown "$PG_USER" "$CLUSTER_DIR"
as_pg_user initdb -D "$CLUSTER_DIR/data" -A trust -U postgres >/dev/null
cat >>"$CLUSTER_DIR/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$CLUSTER_DIR'
port = $CLUSTER_PORT
shared_preload_libraries = 'delaysched'
max_files_per_process = 200
delaysched.http_max_in_flight_per_host = 0
CONF
as_pg_user bash -c "ulimit -n 512 && pg_ctl -D '$CLUSTER_DIR/data' -l '$CLUSTER_DIR/server.log' -w start" >/dev/null
cluster_sql -c "CREATE EXTENSION delaysched" >/dev/null
wait_for "SELECT pid IS NOT NULL FROM sched.workers WHERE role = 'http'" 30
start_sink fdcap --delay-ms 1000
cluster_sql -c "SELECT sched.define_biz('fd', 'http', url => 'http://127.0.0.1:$sink_port/ok', timeout => '30 seconds')" >/dev/null
cap=$(cluster_sql -Atc "SELECT split_part(split_part(holds, ';', 1), ' ', 5) FROM sched.workers WHERE role = 'http'")
cluster_sql -c "SELECT count(*) FROM sched.add_many('fd', array_fill(clock_timestamp(), ARRAY[$fdtasks]))" >/dev/null
sample_worker "SELECT count(*) < $fdtasks FROM sched.tasks WHERE biz_type = 'fd' AND state = 'done'" "$out/fdcap.samples"
stop_sink
task_times "'fd'" fdcap
requeued=$(cluster_sql -Atc "SELECT count(*) FROM sched.attempts WHERE biz_type = 'fd' AND outcome = 'requeued'")
done=$(cluster_sql -Atc "SELECT count(*) FROM sched.tasks WHERE biz_type = 'fd' AND state = 'done' AND attempt = 1")
analyse fdcap "$out/fdcap.samples" "$out/fdcap.sink" "$out/fdcap.tasks" "$cap" "$requeued" "$done"
stop_throwaway_cluster

log "table: $out/http.txt"
