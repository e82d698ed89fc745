#!/usr/bin/env bash
# bench/scale_out.sh: delaysched_router's cost and the deliveries of 1, 2 and
# 3 nodes, in one run on this machine.
#
#   bash bench/scale_out.sh [--smoke]
#   make bench-scale-out      (make bench-scale-out-smoke: a few seconds each)
#
# Three delaysched nodes and a router (PL/Proxy) on four throwaway clusters
# of this machine, then:
#   add        pgbench, 1 client, 10 seconds of SELECT sched.add(...), each in
#              its own transaction: on a node directly, and through the router
#              (3 nodes); also the router's bare PL/Proxy call (sched._add_on,
#              no routing function around it), to see where the time goes;
#              3 rounds, direct and routed runs alternating, medians compared
#   add_many   the same with sched.add_many of 1,000 tasks per call (the
#              router splits each batch into one call per node)
#   deliver-K  N tasks due at one instant, added through the router with K
#              nodes behind it (1, 2, 3), and the deliveries per second of
#              the K nodes together: N over the time from the instant to the
#              last delivery (sched.tasks.delivered_at, on the nodes)
# The nodes share this machine's cores (2 here): K nodes do not have K times
# the CPU, so deliver-K measures the split's overhead, not a K-fold machine.
# Results go to bench/results/scale-out-<time>/ (or $BENCH_OUT): table.txt.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

seconds=10
nrounds=3
ndeliver=150000
while [ $# -gt 0 ]; do
	case $1 in
		--smoke) seconds=2; nrounds=1; ndeliver=6000 ;;
		*) echo "usage: bench/scale_out.sh [--smoke]" >&2; exit 2 ;;
	esac
	shift
done

ensure_packages "$PACKAGES postgresql-$PG_MAJOR-plproxy"
build_and_install "$root"
out=${BENCH_OUT:-$root/bench/results/scale-out-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"

dirs=()
ports=()
stop_all() {
	local d
	for d in "${dirs[@]}"; do
		as_pg_user pg_ctl -D "$d/data" -m fast stop >/dev/null 2>&1 || true
		rm -rf "$d"
	done
}
trap stop_all EXIT

conf="shared_buffers = 256MB
max_wal_size = 4GB
timezone = 'UTC'"
for i in 1 2 3; do
	start_throwaway_cluster $((54440 + i)) "$conf"
	dirs+=("$CLUSTER_DIR"); ports+=("$CLUSTER_PORT")
done
start_throwaway_cluster 54440 "$conf" plain
router_dir=$CLUSTER_DIR
dirs+=("$router_dir")
CLUSTER_DIR=""

node_info() { echo "host=${dirs[$1]} port=${ports[$1]} dbname=postgres"; }
node_sql() { local i=$1; shift; as_pg_user psql -X -q -h "${dirs[$i]}" -p "${ports[$i]}" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }
router_sql() { as_pg_user psql -X -q -h "$router_dir" -p 54440 -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }
set_nodes() {
	local k=$1 list="" i
	for ((i = 0; i < k; i++)); do list="$list${list:+, }'$(node_info $i)'"; done
	router_sql -At -c "SELECT count(*) FROM sched.set_nodes(ARRAY[$list])" >/dev/null
}

router_sql -c "CREATE EXTENSION delaysched_router CASCADE"
set_nodes 3
router_sql -c "SELECT sched.define_biz('bench', ack_timeout => '1 hour')" >/dev/null

calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }

# pgbench_tps HOST PORT SCRIPT: transactions per second, and the mean latency in ms.
pgbench_tps() {
	local host=$1 port=$2 script=$3
	as_pg_user pgbench -n -h "$host" -p "$port" -U postgres -d postgres -c 1 -T "$seconds" -f "$script" 2>&1 |
		awk '/^tps/ { tps = $3 } /latency average/ { lat = $4 } END { printf "%.1f %.3f\n", tps, lat }'
}

scripts=$(mktemp -d /tmp/delaysched-bench-scale.XXXXXX)
dirs+=("$scripts")
cat >"$scripts/add.sql" <<'SQL'
SELECT sched.add('bench', now() + interval '1 day');
SQL
cat >"$scripts/add_on.sql" <<'SQL'
SELECT sched._add_on(0, 'bench', now() + interval '1 day', '{}', NULL, 'keep', NULL, NULL, 0);
SQL
cat >"$scripts/add_many.sql" <<'SQL'
SELECT count(*) FROM sched.add_many('bench', array_fill(now() + interval '1 day', ARRAY[1000]));
SQL
chmod 644 "$scripts"/*.sql
[ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$scripts"

# Empty the nodes (TRUNCATE: cancelling a million tasks one by one would
# take minutes; the gauges are counted again), so that every round and
# every delivery run starts alike.
empty_nodes() {
	local i
	for i in 0 1 2; do
		node_sql $i -c "TRUNCATE sched.task, sched.dedupe, sched.finished" -c "VACUUM ANALYZE" >/dev/null
	done
}

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# rounds NAME HOST PORT SCRIPT: one pgbench run of NAME in this round,
# appended to $scripts/NAME (tps and latency per line).
round() { pgbench_tps "$2" "$3" "$4" >>"$scripts/$1.runs"; }
col() { awk -v c="$2" '{ print $c }' "$scripts/$1.runs" | median; }

{
	printf '%-28s %12s %12s %10s\n' workload per_second latency_ms ratio
	# The direct and routed runs alternate, $nrounds rounds, and the medians
	# are compared: this machine's rate drifts by 10% or more between runs.
	for ((r = 1; r <= nrounds; r++)); do
		log "add and add_many, round $r of $nrounds: a node directly, the router, PL/Proxy bare"
		empty_nodes
		round add_direct "${dirs[0]}" "${ports[0]}" "$scripts/add.sql"
		round add_router "$router_dir" 54440 "$scripts/add.sql"
		round add_bare "$router_dir" 54440 "$scripts/add_on.sql"
		round many_direct "${dirs[0]}" "${ports[0]}" "$scripts/add_many.sql"
		round many_router "$router_dir" 54440 "$scripts/add_many.sql"
	done
	base=$(col add_direct 1)
	printf '%-28s %12.1f %12.3f %10s\n' "add, node directly" "$base" "$(col add_direct 2)" 1.00
	printf '%-28s %12.1f %12.3f %10.2f\n' "add, router (3 nodes)" "$(col add_router 1)" "$(col add_router 2)" "$(calc "$(col add_router 1) / $base")"
	printf '%-28s %12.1f %12.3f %10.2f\n' "add, bare PL/Proxy call" "$(col add_bare 1)" "$(col add_bare 2)" "$(calc "$(col add_bare 1) / $base")"
	base=$(col many_direct 1)
	printf '%-28s %12.0f %12.3f %10s\n' "add_many tasks, node" "$(calc "$base * 1000")" "$(col many_direct 2)" 1.00
	printf '%-28s %12.0f %12.3f %10.2f\n' "add_many tasks, router" "$(calc "$(col many_router 1) * 1000")" "$(col many_router 2)" "$(calc "$(col many_router 1) / $base")"

	empty_nodes
	router_sql -c "SELECT sched.drop_biz('bench')" >/dev/null
	base=""
	for k in 1 2 3; do
		log "deliver: $ndeliver tasks due at once, $k node(s)"
		set_nodes $k
		router_sql -c "SELECT sched.define_biz('deliver$k', ack_timeout => '1 hour')" >/dev/null
		# Due 5 s after the add began: time enough to store them all.
		due=$(router_sql -At -c "SELECT extract(epoch FROM date_trunc('second', clock_timestamp()) + interval '6 seconds')")
		router_sql -c "SELECT count(*) FROM sched.add_many('deliver$k', array_fill(to_timestamp($due), ARRAY[$ndeliver]))" >/dev/null
		deadline=$((SECONDS + 300))
		until [ "$(router_sql -At -c "SELECT sum(pending) FROM sched.biz_stats WHERE biz_type = 'deliver$k'")" = 0 ]; do
			[ $SECONDS -lt $deadline ] || { log "deliver-$k did not finish"; exit 1; }
			sleep 0.2
		done
		last=0
		for ((i = 0; i < k; i++)); do
			l=$(node_sql $i -At -c "SELECT extract(epoch FROM max(delivered_at)) FROM sched.tasks WHERE biz_type = 'deliver$k'")
			last=$(calc "($l > $last) ? $l : $last")
		done
		rate=$(calc "$ndeliver / ($last - $due)")
		[ -n "$base" ] || base=$rate
		printf '%-28s %12.0f %12s %10.2f\n' "deliver, $k node(s)" "$rate" - "$(calc "$rate / $base")"
		empty_nodes
		router_sql -c "SELECT sched.drop_biz('deliver$k')" >/dev/null
	done
} | tee "$out/table.txt"
log "results in $out"
