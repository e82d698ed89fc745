#!/usr/bin/env bash
# bench/keys.sh: what a key costs, in one run, so that every figure is a
# ratio of two measured on the same machine minutes apart.
#
#   bash bench/keys.sh [--smoke] [--rounds N] [--seconds S]
#   make bench-keys            (make bench-keys-smoke: a few seconds; CI runs it)
#
# Each workload runs on a throwaway cluster of its own, once without keys
# and once with, in alternating order over the rounds (default 3; 1 with
# --smoke), for S seconds each (default 15; 3 with --smoke):
#   add     pgbench, 1 client, prepared statements: sched.add of a task due
#           tomorrow (nothing is delivered meanwhile); with keys, each add
#           names one of 1,000 keys.  tps and average latency.  (With
#           pgbench's simple protocol the keyed statement's text, with a
#           named argument, is parsed and planned at every call: 7% more
#           than the keyless one's, the same cost on the server.)
#   claim   pgbench, 1 client, prepared: BEGIN; sched.claim of 10 tasks of a pull
#           type with 20,000 due; ROLLBACK (the same tasks every time).
#           Without keys, one run of the parked tasks' index; with keys, the
#           turns of 100 keys.  Average latency.
# The table shows each side's median over the rounds and keyed / keyless as
# the median of the rounds' own ratios.  Results go to
# bench/results/keys-<time>/ (or $BENCH_OUT): raw.csv and table.txt.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

smoke=""
rounds=""
seconds=""
while [ $# -gt 0 ]; do
	case $1 in
		--smoke) smoke=1 ;;
		--rounds) rounds=$2; shift ;;
		--seconds) seconds=$2; shift ;;
		*) echo "usage: bench/keys.sh [--smoke] [--rounds N] [--seconds S]" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$smoke" ]; then
	rounds=${rounds:-1}; seconds=${seconds:-3}
else
	rounds=${rounds:-3}; seconds=${seconds:-15}
fi

ensure_packages
build_and_install "$root"

out=${BENCH_OUT:-$root/bench/results/keys-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
work=$(mktemp -d /tmp/delaysched-keys.XXXXXX)
[ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$out" "$work"
raw=$out/raw.csv
echo "round,workload,side,tps,lat_avg_ms" >"$raw"
trap 'stop_throwaway_cluster; rm -rf "$work"' EXIT

cat >"$work/add-keyless.sql" <<'SQL'
SELECT sched.add('bench', now() + interval '1 day', '{"n": 1}');
SQL
cat >"$work/add-keyed.sql" <<'SQL'
\set k random(1, 1000)
SELECT sched.add('bench', now() + interval '1 day', '{"n": 1}', key => 'tenant-' || :k);
SQL
cat >"$work/claim.sql" <<'SQL'
BEGIN;
SELECT count(*) FROM sched.claim('pulled', 10);
ROLLBACK;
SQL
chmod a+r "$work"/*.sql

# pgbench_run SCRIPT ROUND WORKLOAD SIDE: one run, a line of raw.csv.
pgbench_run() {
	local script=$1 round=$2 workload=$3 side=$4 log=$work/pgbench.out tps avg
	as_pg_user pgbench -n -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -c 1 -j 1 -M prepared \
		-T "$seconds" -f "$script" postgres >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' "$log")
	avg=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$log")
	echo "$round,$workload,$side,$tps,$avg" >>"$raw"
	printf 'round %d  %-6s %-8s %9.0f tps  avg %7.3f ms\n' "$round" "$workload" "$side" "$tps" "$avg"
}

run_add() {
	local round=$1 side=$2
	start_throwaway_cluster 54334 ""
	cluster_sql -c "SELECT sched.define_biz('bench', ack_timeout => '1 hour')" >/dev/null
	pgbench_run "$work/add-$side.sql" "$round" add "$side"
	stop_throwaway_cluster
}

run_claim() {
	local round=$1 side=$2 keys
	start_throwaway_cluster 54334 ""
	if [ "$side" = keyed ]; then keys="ARRAY(SELECT 'tenant-' || (g % 100) FROM generate_series(1, 20000) g)"
	else keys=NULL; fi
	cluster_sql -c "SELECT sched.define_biz('pulled', 'pull', ack_timeout => '1 hour')" \
		-c "SELECT count(*) FROM sched.add_many('pulled', array_fill(now() - interval '1 second', ARRAY[20000]),
				keys => $keys)" >/dev/null
	# Until the scanner has announced them all (state 'r').
	for _ in $(seq 1 600); do
		[ "$(cluster_sql -Atc "SELECT count(*) FROM sched.task WHERE state = 'p'")" = 0 ] && break
		sleep 0.1
	done
	cluster_sql -c "VACUUM ANALYZE sched.task" >/dev/null
	pgbench_run "$work/claim.sql" "$round" claim "$side"
	stop_throwaway_cluster
}

for round in $(seq 1 "$rounds"); do
	if [ $((round % 2)) -eq 1 ]; then order="keyless keyed"; else order="keyed keyless"; fi
	for side in $order; do run_add "$round" "$side"; done
	for side in $order; do run_claim "$round" "$side"; done
done

python3 - "$raw" "$out/table.txt" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
lines = ["%-7s %12s %12s %12s %12s %10s" % ("", "keyless tps", "keyed tps", "keyless ms", "keyed ms", "keyed/less")]
for w in ("add", "claim"):
    by = {}
    for r in rows:
        if r["workload"] == w:
            by.setdefault(r["round"], {})[r["side"]] = r
    rounds = [v for v in by.values() if "keyed" in v and "keyless" in v]
    if not rounds:
        continue
    med = lambda side, col: statistics.median(float(v[side][col]) for v in rounds)
    ratio = statistics.median(float(v["keyed"]["lat_avg_ms"]) / float(v["keyless"]["lat_avg_ms"]) for v in rounds)
    lines.append("%-7s %12.0f %12.0f %12.3f %12.3f %10.3f" % (
        w, med("keyless", "tps"), med("keyed", "tps"), med("keyless", "lat_avg_ms"), med("keyed", "lat_avg_ms"), ratio))
lines.append("(keyed/less: the median of the rounds' ratios of average latency; 1.05 is 5% slower with keys)")
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
log "results in $out"
