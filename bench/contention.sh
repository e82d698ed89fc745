#!/usr/bin/env bash
# bench/contention.sh: delaysched's shared memory under contention, this tree
# beside a baseline revision, in one run, so that every figure is a ratio.
#
#   bash bench/contention.sh [--smoke] [--baseline REV] [--rounds N] [--seconds S]
#                            [--workloads "2 8 32 burst"]
#   make bench-contention      (make bench-contention-smoke: a few seconds)
#
# Two workloads, each on a throwaway cluster of its own:
#   add-C    pgbench, C clients (2, 8 and 32) calling sched.add for S seconds
#            (default 20; 3 with --smoke), each task due 0.1 to 2 s later, so
#            that the two scanner workers deliver them meanwhile and every
#            commit publishes a wake-up time; tps, latency average and p99
#   burst    test/bench/dsbench's burst of 50,000 tasks (2,000 with --smoke)
#            due at the same instant, with delaysched.workers = 4: drain time
#            and deliveries per second
#
# The baseline (default c76d95f, the revision before shared memory moved from
# one spinlock to LWLocks and atomics) is extracted with git archive, built,
# and installed into a relocated copy of the server (BASELINE_PREFIX, default
# /tmp/delaysched-baseline-pg, made from PG_BINDIR's installation when
# missing), since both builds are a library called delaysched.  This tree is
# installed into PG_BINDIR's.  The same dsbench and pgbench drive both.
#
# Rounds (default 3; 1 with --smoke) alternate the order old/new, new/old.
# The table shows each system's median over the rounds, and new / old as
# the median of the rounds' own ratios: old and new of one round run back
# to back, so their ratio is less at the mercy of what else the machine
# does than the ratio of the medians.
# Results go to bench/results/contention-<time>/ (or $BENCH_OUT): raw.csv and
# table.txt.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

smoke=""
baseline=c76d95f
rounds=""
seconds=""
while [ $# -gt 0 ]; do
	case $1 in
		--smoke) smoke=1 ;;
		--baseline) baseline=$2; shift ;;
		--rounds) rounds=$2; shift ;;
		--seconds) seconds=$2; shift ;;
		--workloads) read -r -a workloads <<<"$2"; shift ;;
		*) echo "usage: bench/contention.sh [--smoke] [--baseline REV] [--rounds N] [--seconds S] [--workloads LIST]" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$smoke" ]; then
	rounds=${rounds:-1}; seconds=${seconds:-3}; burst_size=2000
else
	rounds=${rounds:-3}; seconds=${seconds:-20}; burst_size=50000
fi
[ -n "${workloads+set}" ] || workloads=(2 8 32 burst)

ensure_packages
new_bindir=$PG_BINDIR
build_and_install "$root"

# The baseline's server: a relocated copy of this one's installation.
base_prefix=${BASELINE_PREFIX:-/tmp/delaysched-baseline-pg}
base_bindir=$base_prefix/usr/lib/postgresql/$PG_MAJOR/bin
if [ ! -x "$base_bindir/postgres" ]; then
	log "copying the server to $base_prefix for the baseline"
	src_prefix=${new_bindir%/usr/lib/postgresql/$PG_MAJOR/bin}
	[ "$src_prefix" != "$new_bindir" ] ||
		{ echo "bench: PG_BINDIR must end in /usr/lib/postgresql/$PG_MAJOR/bin" >&2; exit 1; }
	rm -rf "$base_prefix"
	mkdir -p "$base_prefix/usr/lib/postgresql" "$base_prefix/usr/share/postgresql" "$base_prefix/usr/include"
	cp -a "$src_prefix/usr/lib/postgresql/$PG_MAJOR" "$base_prefix/usr/lib/postgresql/"
	cp -a "$src_prefix/usr/share/postgresql/$PG_MAJOR" "$base_prefix/usr/share/postgresql/"
	ln -sfn "$(readlink -f "$src_prefix/usr/include/postgresql")" "$base_prefix/usr/include/postgresql"
fi
base_tree=$(mktemp -d /tmp/delaysched-baseline.XXXXXX)
trap 'rm -rf "$base_tree"' EXIT
trap 'exit 1' INT TERM
log "building the baseline $baseline into $base_prefix"
git -C "$root" archive "$baseline" | tar -x -C "$base_tree"
make -C "$base_tree" -s PG_CONFIG="$base_bindir/pg_config" >/dev/null
make -C "$base_tree" -s PG_CONFIG="$base_bindir/pg_config" install >/dev/null
base_rev=$(git -C "$root" rev-parse --short "$baseline")
new_rev=$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src || echo +)

out=${BENCH_OUT:-$root/bench/results/contention-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
work=$(mktemp -d /tmp/delaysched-contention.XXXXXX)
[ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$out" "$work"
raw=$out/raw.csv
echo "round,system,workload,tps,lat_avg_ms,lat_p99_ms,drain_s,deliver_per_s" >"$raw"
trap 'stop_throwaway_cluster; rm -rf "$base_tree" "$work"' EXIT

# The pgbench script: one sched.add, due 100 to 2,000 ms later.
cat >"$work/add.sql" <<'SQL'
\set delay random(100, 2000)
SELECT sched.add('bench', now() + :delay * interval '1 millisecond', '{"n": 1}');
SQL
chmod a+r "$work/add.sql"

# run_add SYSTEM ROUND CLIENTS: one pgbench run on a fresh cluster.
run_add() {
	local system=$1 round=$2 c=$3 logs tps avg p99
	start_throwaway_cluster 54333 ""
	cluster_sql -c "SELECT sched.define_biz('bench', ack_timeout => '1 hour')" >/dev/null
	logs=$work/log-$system-$c-$round
	as_pg_user mkdir "$logs"
	as_pg_user pgbench -n -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -c "$c" -j 2 \
		-T "$seconds" -f "$work/add.sql" -l --log-prefix="$logs/tx" postgres >"$logs.out" 2>&1 ||
		{ cat "$logs.out" >&2; exit 1; }
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' "$logs.out")
	avg=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$logs.out")
	# pgbench's log: client, transaction, latency in us, ...
	p99=$(cat "$logs"/tx.* | awk '{print $3}' | sort -n |
		awk '{v[NR] = $1} END {i = int(NR * 0.99); if (i < 1) i = 1; printf "%.3f", v[i] / 1000}')
	echo "$round,$system,add-$c,$tps,$avg,$p99,," >>"$raw"
	printf '%-6s round %d  add-%-3s %10.0f tps  avg %7.3f ms  p99 %7.3f ms\n' "$system" "$round" "$c" "$tps" "$avg" "$p99"
	stop_throwaway_cluster
	rm -rf "$logs" "$logs.out"
}

# run_burst SYSTEM ROUND: dsbench's burst with four scanner workers.
run_burst() {
	local system=$1 round=$2 line
	start_throwaway_cluster 54333 "delaysched.workers = 4"
	(cd /tmp && as_pg_user "$root/test/bench/dsbench" --system delaysched --workload burst \
		--size "$burst_size" --label burst --name "$system" --csv "$work/burst-$system-$round.csv" \
		"$(cluster_conninfo)") >/dev/null 2>&1
	# dsbench's CSV: system,workload,tasks,received,enqueue/s,drain s,deliver/s,...
	line=$(tail -1 "$work/burst-$system-$round.csv")
	IFS=, read -r _ _ _ _ _ drain per_s _ <<<"$line"
	echo "$round,$system,burst-4w,,,,$drain,$per_s" >>"$raw"
	printf '%-6s round %d  burst-4w  %8.3f s  %10.0f deliveries/s\n' "$system" "$round" "$drain" "$per_s"
	stop_throwaway_cluster
}

# run_system SYSTEM ROUND WORKLOAD
run_system() {
	if [ "$1" = old ]; then PG_BINDIR=$base_bindir; else PG_BINDIR=$new_bindir; fi
	if [ "$3" = burst ]; then run_burst "$1" "$2"; else run_add "$1" "$2" "$3"; fi
	PG_BINDIR=$new_bindir
}

log "old = $base_rev, new = $new_rev; $rounds rounds of ${seconds} s pgbench runs"
started=$(date +%s)
for round in $(seq 1 "$rounds"); do
	if [ $((round % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
	for workload in "${workloads[@]}"; do
		for system in $order; do
			run_system "$system" "$round" "$workload"
		done
	done
done
log "all runs took $(( $(date +%s) - started )) s"

python3 - "$raw" "$base_rev" "$new_rev" "$rounds" <<'PY' | tee "$out/table.txt"
import csv, statistics, sys
raw, old_rev, new_rev, rounds = sys.argv[1:]
rows = list(csv.DictReader(open(raw)))
def values(system, workload, field):
    return {r["round"]: float(r[field]) for r in rows
            if r["system"] == system and r["workload"] == workload and r[field]}
def med(system, workload, field):
    v = list(values(system, workload, field).values())
    return statistics.median(v) if v else float("nan")
def ratios(workload, field):
    o, n = values("old", workload, field), values("new", workload, field)
    return [n[k] / o[k] for k in o if k in n and o[k]]
def ratio(workload, field):
    v = ratios(workload, field)
    return statistics.median(v) if v else float("nan")
def better(workload, field):
    v = ratios(workload, field)
    higher = field in ("tps", "deliver_per_s")
    return f"{sum(1 for x in v if (x > 1 if higher else x < 1))} of {len(v)}"
print(f"sched.add under contention and a 4-worker burst: medians of {rounds} round(s),"
      f" old = {old_rev}, new = {new_rev}")
print("new / old is the median of the rounds' own ratios, \"new better\" in how many rounds;")
print("tps and deliveries/s: higher is better; latency and drain time: lower is better")
print()
print(f"| {'workload':<9} | {'figure':<16} | {'old':>10} | {'new':>10} | {'new / old':>9} | {'new better':>10} |")
print(f"|{'-' * 11}|{'-' * 18}|{'-' * 12}|{'-' * 12}|{'-' * 11}|{'-' * 12}|")
workloads = sorted({r["workload"] for r in rows},
                   key=lambda w: (w.startswith("burst"), int(w.split("-")[1]) if w.startswith("add") else 0))
for w in workloads:
    if w.startswith("add"):
        figures = [("tps", "tps"), ("lat_avg_ms", "latency avg ms"), ("lat_p99_ms", "latency p99 ms")]
    else:
        figures = [("drain_s", "drain s"), ("deliver_per_s", "deliveries/s")]
    for field, name in figures:
        o, n = med("old", w, field), med("new", w, field)
        fmt = "{:10.0f}" if field in ("tps", "deliver_per_s") else "{:10.3f}"
        print(f"| {w:<9} | {name:<16} | {fmt.format(o)} | {fmt.format(n)} | {ratio(w, field):9.3f} | {better(w, field):>10} |")
PY
echo "results: $out"
