#!/usr/bin/env bash
# bench/load.sh: what a burst of due tasks does to the application's own
# transactions, with load control and without (doc/flow-control.md).
#
#   bash bench/load.sh [--smoke] [--rounds N] [--tasks N] [--rate TPS] [--caps "N ..."]
#                      [--profile] [--conf "name = value; ..."]
#   make bench-load            (make bench-load-smoke: a minute; CI runs it)
#
# The application is pgbench's TPC-B-like script at a fixed rate (--rate,
# default 300 transactions a second, 4 clients; pgbench -R, so a slow server
# makes transactions late rather than fewer), on a throwaway cluster with
# delaysched.  The burst: --tasks (default 500,000; 5,000 with --smoke) of
# a notify type, added and vacuumed before pgbench starts, all due at one
# moment LEAD seconds into the run, delivered with nobody listening (their
# leases last an hour).  Three sides, in alternating order over the rounds
# (default 2; 1 with --smoke), and one per --caps figure:
#   none   pgbench alone (no burst): the latency to compare with;
#   off    the burst, delaysched.load_control = off;
#   on     the burst, delaysched.load_control = on;
#   capN   the burst, load control off, delaysched.max_deliveries_per_second
#          = N: what a fixed pace costs pgbench (what a controller could get).
# For each: pgbench's p50 and p99 latency before the burst falls due, and
# during it (from the due time until no task is left pending), the burst's
# drain time and rate.  "none" runs as long as the round's longest drain,
# and each side is compared with none's p99 over the same window (as long
# as its drain, from the due time): p99 during / none's p99 over that
# window is the figure the target is on (1.5 or less).  A p99 over a
# longer window is higher (more of pgbench's own checkpoints and
# autovacuum in it), so a short window of none would flatter no side.  Results go to bench/results/load-<time>/ (or $BENCH_OUT):
# raw.csv, table.txt, and latency.svg (pgbench's p99 second by second and
# the tasks left, last round).
#
# --conf: settings for every side's server, as postgresql.conf lines
# separated by ";" (to try the controller's: "delaysched.load_max_slowdown
# = 1.1").
#
# --profile: where the time goes, side by side (profile-<round>-<side>.txt
# and profile.txt): what pgbench's sessions wait on while running a
# statement (pg_stat_activity sampled every 10 ms by one more session, so
# the latencies of a profiled run are not the figures to quote), and the
# CPU time of each kind of server process over the side's window, from
# /proc.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

smoke=""
rounds=""
tasks=""
rate=300
caps=""
profile=""
conf=""
while [ $# -gt 0 ]; do
	case $1 in
		--smoke) smoke=1 ;;
		--rounds) rounds=$2; shift ;;
		--tasks) tasks=$2; shift ;;
		--rate) rate=$2; shift ;;
		--caps) caps=$2; shift ;;
		--profile) profile=1 ;;
		--conf) conf=$2; shift ;;
		*) echo "usage: bench/load.sh [--smoke] [--rounds N] [--tasks N] [--rate TPS] [--caps \"N ...\"] [--profile] [--conf \"name = value; ...\"]" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$smoke" ]; then
	rounds=${rounds:-1}; tasks=${tasks:-5000}; lead=5; tail_s=5; most_s=60; setup_s=15
else
	rounds=${rounds:-2}; tasks=${tasks:-500000}; lead=15; tail_s=10; most_s=600; setup_s=90
fi

ensure_packages
build_and_install "$root"

out=${BENCH_OUT:-$root/bench/results/load-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
work=$(mktemp -d /tmp/delaysched-load.XXXXXX)
[ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$out" "$work"
raw=$out/raw.csv
echo "round,side,before_p50_ms,before_p99_ms,during_p50_ms,during_p99_ms,drain_s,tasks_per_s,transactions" >"$raw"
pgbench_pid=""
profilers=""
trap '[ -n "$profilers" ] && kill $profilers; [ -n "$pgbench_pid" ] && pkill -TERM -f "pgbench -n -h ${CLUSTER_DIR:-none}"; stop_throwaway_cluster; rm -rf "$work"' EXIT

# --profile: one more session samples what pgbench's sessions wait on, and
# load_profile.py what each kind of process spends on CPU.
start_profile() {
	rm -f "$work/waits" "$work/cpu"
	cat >"$work/sample.sql" <<'SQL'
SELECT extract(epoch FROM clock_timestamp())::numeric(16,3),
	w FROM (SELECT coalesce(wait_event_type || ':' || wait_event, 'running') AS w
		FROM pg_stat_activity
		WHERE application_name = 'pgbench' AND state = 'active'
		UNION ALL SELECT '(sample)') AS s \watch 0.01
SQL
	(cd "$work" && as_pg_user psql -X -q -A -t -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres postgres \
		-o "$work/waits" -f "$work/sample.sql" >/dev/null 2>&1) &
	profilers=$!
	python3 "$root/bench/load_profile.py" cpu "$work/cpu" "$(head -1 "$CLUSTER_DIR/data/postmaster.pid")" &
	profilers="$profilers $!"
}

# stop_profile ROUND SIDE FROM TO: the profile of the window FROM..TO.
stop_profile() {
	kill $profilers 2>/dev/null || true
	pkill -TERM -f "psql -X -q -A -t -h $CLUSTER_DIR" 2>/dev/null || true   # runs as another user
	wait $profilers 2>/dev/null || true
	profilers=""
	{ echo "== round $1, $2"; python3 "$root/bench/load_profile.py" report "$work/waits" "$work/cpu" "$3" "$4"; } |
		tee "$out/profile-$1-$2.txt" >>"$out/profile.txt"
}

# run_side ROUND SIDE [DRAIN_S]: one run; a line of raw.csv.  DRAIN_S: for
# "none", the length of the window to measure.
run_side() {
	local round=$1 side=$2 window=${3:-0} control=off cap=0 due start ended=""
	[ "$side" = on ] && control=on
	case $side in cap*) cap=${side#cap} ;; esac
	start_throwaway_cluster 54335 "delaysched.load_control = $control
delaysched.max_deliveries_per_second = $cap
max_wal_size = '4GB'
$(echo "$conf" | tr ';' '\n')"
	as_pg_user pgbench -q -i -s 10 -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres postgres >/dev/null 2>&1
	cluster_sql -c "SELECT sched.define_biz('burst', ack_timeout => '1 hour')" >/dev/null
	# The burst is added first, due SETUP seconds later, so that pgbench
	# starts LEAD seconds before it falls due, after the add's own work
	# (vacuum, checkpoint) is done.
	due=$(python3 -c "import time; print(time.time() + $setup_s)")
	if [ "$side" != none ]; then
		cluster_sql -c "SELECT count(*) FROM sched.add_many('burst',
			array_fill(to_timestamp($due), ARRAY[$tasks]), array_fill('{}'::jsonb, ARRAY[$tasks]))" >/dev/null
	fi
	cluster_sql -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null
	if [ "$side" = none ]; then
		due=$(python3 -c "import time; print(time.time() + $lead)")
	elif ! python3 -c "import sys, time; sys.exit(0 if time.time() < $due - $lead else 1)"; then
		echo "the setup took more than $setup_s - $lead s: raise setup_s" >&2
		exit 1
	fi
	sleep "$(python3 -c "import time; print(max(0, $due - $lead - time.time()))")"
	start=$(date +%s.%N)
	rm -f "$work"/pgbench_log.*
	(cd "$work" && as_pg_user pgbench -n -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres \
		-c 4 -j 2 -R "$rate" -T "$most_s" -l postgres >"$work/pgbench.out" 2>&1) &
	pgbench_pid=$!
	[ -n "$profile" ] && start_profile
	if [ "$side" = none ]; then
		sleep "$(python3 -c "print($lead + $window + $tail_s)")"
		ended=$(python3 -c "print($due + $window)")
	else
		while :; do
			sleep 0.5
			if python3 -c "import sys, time; sys.exit(0 if time.time() > $due else 1)" &&
				[ "$(cluster_sql -Atc "SELECT coalesce((SELECT pending FROM sched.biz_stats WHERE biz_type = 'burst'), 1)")" = 0 ]; then
				ended=$(date +%s.%N)
				break
			fi
			python3 -c "import sys, time; sys.exit(0 if time.time() < $start + $most_s - $tail_s else 1)" || break
		done
		[ -n "$ended" ] || { echo "the burst did not drain within $most_s s" >&2; exit 1; }
		sleep "$tail_s"
	fi
	# pgbench runs under as_pg_user: signal it, not the subshell; SIGTERM,
	# as a job in the background of a script ignores SIGINT.  (It may lose
	# the last lines of its log, which come after every window measured.)
	pkill -TERM -f "pgbench -n -h $CLUSTER_DIR" 2>/dev/null || true
	wait "$pgbench_pid" 2>/dev/null || true
	pgbench_pid=""
	[ -n "$profile" ] && stop_profile "$round" "$side" "$due" "$ended"
	stop_throwaway_cluster
	python3 - "$work" "$round" "$side" "$due" "$ended" "$tasks" "$out" >>"$raw" <<'PY'
import glob, sys
work, rnd, side, due, ended, tasks, out = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
before, during, series = [], [], []
for f in glob.glob(work + "/pgbench_log.*"):
    for line in open(f):
        p = line.split()
        if len(p) < 6:
            continue
        at = int(p[4]) + int(p[5]) / 1e6
        ms = int(p[2]) / 1000.0
        series.append((at - due, ms))
        if at < due:
            before.append(ms)
        elif at <= ended:
            during.append(ms)
def pct(a, q):
    a = sorted(a)
    return a[min(len(a) - 1, int(len(a) * q))] if a else float("nan")
drain = ended - due
rate = tasks / drain if side != "none" and drain > 0 else 0
print("%s,%s,%.2f,%.2f,%.2f,%.2f,%.1f,%.0f,%d" % (rnd, side, pct(before, .5), pct(before, .99),
      pct(during, .5), pct(during, .99), drain if side != "none" else 0, rate, len(during)))
# p99 second by second, for the plot
by = {}
for t, ms in series:
    by.setdefault(int(t // 1), []).append(ms)
with open("%s/series-%s-%s.dat" % (out, rnd, side), "w") as s:
    for sec in sorted(by):
        s.write("%d %.2f\n" % (sec, pct(by[sec], .99)))
# every transaction from the due time on, for the other sides' windows
if side == "none":
    with open("%s/none-%s.lat" % (out, rnd), "w") as s:
        for t, ms in sorted(series):
            if t >= 0:
                s.write("%.4f %.3f\n" % (t, ms))
PY
	tail -n 1 "$raw"
}

for round in $(seq 1 "$rounds"); do
	order="off on"
	for c in $caps; do order="$order cap$c"; done
	[ $((round % 2)) -eq 0 ] && order=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
	for side in $order; do run_side "$round" "$side"; done
	longest=$(awk -F, -v r="$round" '$1 == r && $2 != "none" && $7 > m { m = $7 } END { print m + 0 }' "$raw")
	run_side "$round" none "$longest"
done

python3 - "$raw" "$out/table.txt" "$out" "$conf" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
out = sys.argv[3]
conf = sys.argv[4]
def pct(a, q):
    a = sorted(a)
    return a[min(len(a) - 1, int(len(a) * q))] if a else float("nan")
def none_p99(rnd, window):
    lat = [tuple(map(float, l.split())) for l in open("%s/none-%s.lat" % (out, rnd))]
    return pct([ms for t, ms in lat if t <= window], .99)
med = lambda side, col: statistics.median(float(r[col]) for r in rows if r["side"] == side)
sides = []
for r in rows:
    if r["side"] != "none" and r["side"] not in sides:
        sides.append(r["side"])
lines = ["%-8s %10s %10s %10s %10s %9s %10s %10s %10s" % ("side", "before p50", "before p99", "during p50",
         "during p99", "drain s", "tasks/s", "none p99", "p99 / none")]
lines.append("%-8s %10.2f %10.2f %10s %10s %9s %10s %10s %10s" % (
    "none", med("none", "before_p50_ms"), med("none", "before_p99_ms"), "", "", "", "", "", ""))
for side in sides:
    mine = [r for r in rows if r["side"] == side]
    base = [none_p99(r["round"], float(r["drain_s"])) for r in mine]
    ratio = statistics.median(float(r["during_p99_ms"]) / b for r, b in zip(mine, base))
    lines.append("%-8s %10.2f %10.2f %10.2f %10.2f %9.1f %10.0f %10.2f %10.2f" % (
        side, med(side, "before_p50_ms"), med(side, "before_p99_ms"), med(side, "during_p50_ms"),
        med(side, "during_p99_ms"), med(side, "drain_s"), med(side, "tasks_per_s"),
        statistics.median(base), ratio))
lines.append("(medians over the rounds; latencies in ms; none p99: pgbench alone, over the side's own drain")
lines.append(" window from the due time; p99 / none: the median of the rounds' ratios; target 1.5 or less)")
if conf:
    lines.append("(every side's server also had: %s)" % conf)
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY

last=$rounds
if command -v gnuplot >/dev/null; then
	gnuplot <<GP || true
set terminal svg size 900,450
set output "$out/latency.svg"
set title "pgbench p99 latency, second by second (the burst falls due at 0)"
set xlabel "seconds from the due time"
set ylabel "p99 ms"
set logscale y
plot "$out/series-$last-none.dat" with lines title "no burst", \
     "$out/series-$last-off.dat" with lines title "burst, load control off", \
     "$out/series-$last-on.dat" with lines title "burst, load control on"
GP
fi
log "results in $out"
