#!/usr/bin/env bash
# bench/quick.sh: the two headline figures of delaysched alone, on a
# throwaway cluster, received by a LISTEN client (test/dslisten):
#
#   precision  200 tasks scattered over 20 s on an idle server:
#              lateness (receipt at the client - run_at) percentiles
#   burst      N tasks (default 50,000) due in the same second:
#              time from run_at until the last one arrives, tasks/s
#   enqueue    sched.add, one per statement and transaction, from 2 pgbench
#              clients for 10 s, beside a plain INSERT into a table of the
#              same shape with a run_at index
#
# usage: bash bench/quick.sh [burst size]      (run as root or as postgres)
# It prints a table; the side-by-side comparison with other queues is the
# benchmark suite's job.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
burst=${1:-50000}

ensure_packages
build_and_install "$root"
trap stop_throwaway_cluster EXIT
[ -n "${KEEP_BENCH_LOGS:-}" ] && trap "cp -r \"\$CLUSTER_DIR/bench\" \"$KEEP_BENCH_LOGS\"; stop_throwaway_cluster" EXIT
start_throwaway_cluster 54331
out=$CLUSTER_DIR/bench
as_pg_user mkdir -p "$out"

# Never acknowledged within the run: a week-long ack timeout keeps
# redeliveries out of the figures.
cluster_sql -c "SELECT sched.define_biz('bench', ack_timeout => '7 days')" >/dev/null

# Print "p50 p90 p99 max" in ms of the lateness column of a dslisten log.
lateness_percentiles() {
	awk -F'\t' '$2 != "-" && NF >= 4 { print $2 / 1000.0 }' "$1" | sort -n | awk '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { print "- - - -"; exit }
			split("0.50 0.90 0.99 1.00", q, " ")
			for (i = 1; i <= 4; i++) {
				r = int(q[i] * NR + 0.999999); if (r < 1) r = 1
				printf "%.1f%s", v[r], (i < 4 ? " " : "\n")
			}
		}'
}

listen() {	# listen COUNT TIMEOUT LOGFILE
	as_pg_user "$root/test/dslisten" --count "$1" --timeout "$2" "$(cluster_conninfo)" bench >"$3" &
	listener_pid=$!
	until grep -q '^listening$' "$3" 2>/dev/null; do sleep 0.01; done
}

log "precision: 200 tasks scattered over 20 s"
listen 200 60 "$out/precision.log"
cluster_sql -c "SELECT count(sched.add('bench', clock_timestamp() + interval '1 second' + random() * interval '20 seconds'))
				FROM generate_series(1, 200)" >/dev/null
wait "$listener_pid"
read -r p50 p90 p99 pmax < <(lateness_percentiles "$out/precision.log")

log "burst: $burst tasks due in the same second"
listen "$burst" 300 "$out/burst.log"
t0=$(date +%s.%N)
due=$(cluster_sql -At -c "SELECT extract(epoch FROM date_trunc('second', clock_timestamp()) + interval '30 seconds')")
cluster_sql -c "SELECT count(*) FROM sched.add_many('bench',
					array_fill(to_timestamp($due), ARRAY[$burst]))" >/dev/null
t1=$(date +%s.%N)
wait "$listener_pid"
last=$(awk -F'\t' 'NF >= 4 { t = $1 } END { printf "%.6f", t / 1e6 }' "$out/burst.log")
first=$(awk -F'\t' 'NF >= 4 { printf "%.6f", $1 / 1e6; exit }' "$out/burst.log")
received=$(grep -c $'\t' "$out/burst.log" || true)
read -r b50 b90 b99 bmax < <(lateness_percentiles "$out/burst.log")

log "enqueue: sched.add against a plain INSERT, 2 clients, 10 s each"
cluster_sql -c "CREATE TABLE plain_task (id bigserial PRIMARY KEY, biz_type text NOT NULL,
					run_at timestamptz NOT NULL, payload jsonb NOT NULL)" \
			-c "CREATE INDEX ON plain_task (run_at)" >/dev/null
echo "SELECT sched.add('bench', now() + interval '1 day', '{\"order\": 42}');" >"$out/add.sql"
echo "INSERT INTO plain_task (biz_type, run_at, payload) VALUES ('bench', now() + interval '1 day', '{\"order\": 42}');" >"$out/insert.sql"
chmod a+r "$out"/*.sql
pgbench_tps() {
	as_pg_user pgbench -n -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -c 2 -j 2 -T 10 -f "$1" postgres 2>/dev/null |
		awk '/^tps/ { printf "%.0f", $3 }'
}
add_tps=$(pgbench_tps "$out/add.sql")
insert_tps=$(pgbench_tps "$out/insert.sql")

printf '\n%-34s %10s %10s %10s %10s\n' "workload" "p50 ms" "p90 ms" "p99 ms" "max ms"
printf '%-34s %10s %10s %10s %10s\n' "precision (200 over 20 s, idle)" "$p50" "$p90" "$p99" "$pmax"
printf '%-34s %10s %10s %10s %10s\n' "burst ($burst in one second)" "$b50" "$b90" "$b99" "$bmax"
awk -v n="$received" -v due="$due" -v first="$first" -v last="$last" -v t0="$t0" -v t1="$t1" -v size="$burst" 'BEGIN {
	printf "\nburst: %d of %d received; enqueue (add_many) %.2f s = %.0f tasks/s\n", n, size, t1 - t0, size / (t1 - t0)
	printf "burst: first arrival %.1f ms after run_at, last %.1f ms after; drain %.2f s = %.0f tasks/s\n",
		(first - due) * 1000, (last - due) * 1000, last - due, n / (last - due)
}'
awk -v a="$add_tps" -v i="$insert_tps" 'BEGIN {
	printf "enqueue: sched.add %d/s, plain INSERT %d/s, ratio %.2f\n", a, i, a / i
}'
