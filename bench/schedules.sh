#!/usr/bin/env bash
# bench/schedules.sh: recurring schedules, delaysched beside pg_cron, in one
# run on this machine.
#
#   bash bench/schedules.sh            the full run (make bench-schedules), about 8 minutes
#                                      (10 with the seconds workload)
#   bash bench/schedules.sh --smoke    tiny sizes, about 2 minutes (most of it
#                                      waiting for the top of a minute; 2.5 in
#                                      a chroot, with its build)
#   bash bench/schedules.sh --major N  on PostgreSQL N (default: 15, this
#                                      system's, or $PG_MAJOR) beside its
#                                      postgresql-N-cron; with --smoke too
#
# A major this system's Debian does not ship (17: trixie, 18: sid) runs in
# the chroot scripts/chroot.sh makes and keeps: the files git tracks (as
# they are in the working tree; a new file must be added first) are
# copied into a fresh directory in it, where this script runs again, as root
# with PG_MAJOR=N, as it does here; its results are copied back to
# bench/results/schedules-<time>-pgN/ (or $BENCH_OUT) and the copy removed
# (bench/lib_cron.sh, which bench/sql_jobs.sh shares).
#
# Workloads:
#   cron     20 jobs every minute for 5 minutes (smoke: 2 jobs, 1 minute),
#            pg_cron and delaysched at the same time, each in its own
#            throwaway cluster (pg_cron is not preloaded beside delaysched):
#            pg_cron's '* * * * *' at the start of each minute, delaysched's
#            '30 * * * * *' half a minute later, so that neither's firing
#            takes the other's CPU.
#            pg_cron: each job is "INSERT INTO cron_fired(job) ..." and
#            fired_at defaults to clock_timestamp(), so lateness = fired_at
#            minus the minute it was due (pg_cron 1.4 fires at the top of
#            the minute only); its own start_time in cron.job_run_details
#            is shown too.  delaysched: 20 schedules on one notify type,
#            test/dslisten as the consumer, on a type with ack_timeout 1
#            hour and without --ack (an inline ack would hold back the
#            receipt of the firings behind it): lateness = receipt - run_at.
#            Both: firings due in the window, lateness p50/p99/max, and the
#            server's CPU over the window and over the quiet part of each
#            minute (from 5 to 55 s after its firings).
#   seconds  only with a pg_cron that has second-granularity jobs (1.5 and
#            later; not 1.4.2, bookworm's for 15): 20 jobs every second for
#            60 s (smoke: 2 jobs, 10 s), pg_cron and delaysched at the same
#            time in two more clusters: pg_cron's '1 seconds' jobs, each
#            "INSERT INTO sec_fired(job) ...", scheduled 5 s before the
#            window (a new interval job runs at once), and delaysched's
#            '* * * * * *' schedules from the window's first whole second,
#            test/dslisten as above.  pg_cron does not align these jobs to
#            whole seconds: a job runs again once a second has passed since
#            its last run started (the time pg_cron takes once the run's
#            connection is made), so its runs drift later.  Hence for pg_cron p50/p99/max are not a lateness but
#            each job's interval between consecutive INSERTs minus 1 s;
#            delaysched's row has its lateness (receipt - run_at) and a row
#            below with its intervals between receipts minus 1 s, to compare.
#            Both: the firings in the window, "skip/dbl" (the seconds of the
#            window in which a job fired not at all / more than once, over
#            all jobs: by the second of the INSERT for pg_cron, of run_at for
#            delaysched) and the CPU over the window.
#   tenk     delaysched alone: 10,000 schedules 'every 10 seconds' for 60 s
#            (1,000 firings/s; smoke: 500 schedules, 10 s), twice in fresh
#            clusters: "aligned", 1,000 schedules starting on each of 10
#            whole seconds (so 1,000 fall due at the same instant every
#            second, as schedules defined without starts_at or by cron rules
#            do), and "spread", starts_at 1 ms apart (one firing due every
#            millisecond).  The consumer is test/dslisten without --ack on a
#            type with ack_timeout 1 hour: firings are made when a firing is
#            delivered, not when it is acknowledged, and one sched.ack
#            transaction per firing (1,000 commits/s) is the consumer's
#            bottleneck, not the scheduler's.
# The seconds and tenk runs go into the wait for the cron window when they
# fit there (with --smoke), after it otherwise.
#
# The server's CPU is that of the postmaster and all its children (live
# ones from /proc/<pid>/schedstat, exited ones from the postmaster's cutime
# and cstime), sampled once a second by bench/schedules_report.py (which
# lib_cron.sh starts); for delaysched it includes the consumer's backend.
#
# Results: bench/results/schedules-<time>/ (or $BENCH_OUT): schedules.txt
# (the table), lateness-cdf.svg, the receipts, the CPU samples and, per
# process, where the CPU went (*.cpu.procs).  A full run on 15 also copies
# the plot to doc/img/schedules-cron.svg.
set -euo pipefail

usage() {
	echo "usage: bench/schedules.sh [--smoke] [--major N]" >&2
	exit 2
}

smoke="" major=""
args=()		# the arguments for a run inside a chroot (all but --major)
while [ $# -gt 0 ]; do
	case $1 in
		--smoke) smoke=1; args+=("$1"); shift ;;
		--major) [ $# -ge 2 ] || usage; major=$2; shift 2 ;;
		--major=*) major=${1#--major=}; shift ;;
		*) usage ;;
	esac
done
case $major in
	*[!0-9]*) usage ;;
	?*) export PG_MAJOR=$major ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

. "$root/bench/lib_cron.sh"
bench_maybe_in_chroot "$major" schedules.sh schedules ${args[@]+"${args[@]}"}

PACKAGES="$PACKAGES gnuplot-nox postgresql-$PG_MAJOR-cron"
ensure_packages
build_and_install "$root"
cron_version=$(dpkg-query -W -f='${Version}' "postgresql-$PG_MAJOR-cron")
# pg_cron 1.5 added jobs every N seconds ('1 seconds').
cron_seconds=""
dpkg --compare-versions "${cron_version%%-*}" ge 1.5 && cron_seconds=1

if [ -n "$smoke" ]; then
	jobs=2 minutes=1 tail=10	# the window ends $tail s after the last firing
	tenk=500 seconds=10 lead=3
	sec_jobs=2 sec_window=10
else
	jobs=20 minutes=5 tail=58
	tenk=10000 seconds=60 lead=5
	sec_jobs=20 sec_window=60
fi
sec_lead=5

out=${BENCH_OUT:-$root/bench/results/schedules-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
[ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$out"
report() { python3 "$root/bench/schedules_report.py" "$@"; }

# Start test/dslisten in the background on cluster $1, channel $2, writing
# to $3, with options $4; wait until it listens.  Sets listener.
start_listener() {
	use "$1"
	# shellcheck disable=SC2086
	as_pg_user "$root/test/dslisten" $4 "$(cluster_conninfo)" "$2" >"$3" 2>>"$out/dslisten.err" &
	listener=$!
	for _ in $(seq 1 200); do [ "$(head -1 "$3" 2>/dev/null)" = listening ] && return; sleep 0.05; done
	echo "bench: dslisten did not start" >&2
	return 1
}

: >"$out/schedules.txt"
failed=""

# --- tenk: 1,000 firings/s, delaysched alone ---
# Firings due in [T0, T0 + $seconds): $tenk * $seconds / 10.
run_tenk() {	# run_tenk aligned|spread
	local variant=$1 ds offset t0 expected status=0 missed runs ticks
	if [ "$variant" = aligned ]; then
		offset="(i % 10) * interval '1 second'"
	else
		offset="(i % $tenk) * interval '10 seconds' / $tenk"
	fi
	expected=$(( tenk * seconds / 10 ))
	start_cluster ds 54373
	cluster_sql -c "SELECT sched.define_biz('tenk', ack_timeout => '1 hour')" >/dev/null
	start_listener "$ds" tenk "$out/tenk-$variant.lis" "--count $expected --timeout $(( lead + seconds + 60 ))"
	# T0: whole seconds, $lead s ahead; all the schedules in one statement.
	t0=$(cluster_sql -Atc "
		WITH t AS (SELECT date_trunc('second', now()) + interval '$lead seconds' AS t0)
		SELECT (extract(epoch FROM t0) * 1000000)::bigint
		FROM t, LATERAL (SELECT count(sched.define_schedule('e' || i, 'tenk', 'every 10 seconds',
				starts_at => t0 + $offset,
				ends_at => t0 + interval '$seconds seconds' - interval '1 microsecond'))
			FROM generate_series(1, $tenk) i) d")
	[ "$(now_us)" -lt "$t0" ] || echo "bench: defining the schedules took longer than $lead s" >&2
	ticks=$(cluster_sql -Atc "SELECT sum(ticks) FROM sched.workers WHERE role = 'scanner'")
	sleep_until "$t0"
	start_sampler "$out/tenk-$variant.cpu" "$ds"
	sleep_until $(( t0 + seconds * 1000000 ))
	stop_sampler
	wait "$listener" || status=$?
	use "$ds"
	ticks=$(cluster_sql -Atc "SELECT sum(ticks) - $ticks FROM sched.workers WHERE role = 'scanner'")
	read -r runs missed < <(cluster_sql -AtF' ' -c "SELECT sum(runs), sum(missed) FROM sched.schedules")
	report row "delaysched, $tenk x every 10 s, $variant" --dslisten "$out/tenk-$variant.lis" \
		--expected "$expected" --missed "$missed" --dat "$out/tenk-$variant.dat" --check \
		--cpu "$out/tenk-$variant.cpu" 1 "$t0" $(( t0 + seconds * 1000000 )) >>"$out/rows.txt" || status=3
	echo "tenk $variant: the scanners ran $ticks ticks from the definition to the last firing received" >>"$out/notes.txt"
	[ "$status" -eq 0 ] && [ "$missed" -eq 0 ] && [ "$runs" -eq "$expected" ] ||
		failed="$failed tenk-$variant(dslisten $status, runs $runs, missed $missed)"
	stop_cluster "$ds"
}

# --- seconds: pg_cron's '1 seconds' jobs beside delaysched's '* * * * * *' ---
# The window: the $sec_window whole seconds from T0, $sec_lead s ahead.
run_seconds() {
	local pc ds t0 t_end last_due expected status=0 missed
	expected=$(( sec_jobs * sec_window ))
	start_pgcron_cluster pc 54374 sec_fired
	start_cluster ds 54375
	cluster_sql -c "SELECT sched.define_biz('secs', ack_timeout => '1 hour')" >/dev/null
	start_listener "$ds" secs "$out/seconds-delaysched.lis" \
		"--count $expected --timeout $(( sec_lead + sec_window + 60 ))"
	t0=$(( ($(date +%s) + sec_lead) * 1000000 ))
	t_end=$(( t0 + sec_window * 1000000 ))
	last_due=$(( t_end - 1000000 ))
	# A new interval job runs at once, then every second after: it is in
	# its stride when the window opens.
	use "$pc"
	cluster_sql -c "SELECT count(cron.schedule('sec_' || i, '1 seconds',
		format('INSERT INTO sec_fired (job) VALUES (%L)', 'sec_' || i))) FROM generate_series(1, $sec_jobs) i" >/dev/null
	use "$ds"
	cluster_sql -c "SELECT count(sched.define_schedule('sec_' || i, 'secs', '* * * * * *',
		starts_at => to_timestamp($(( t0 / 1000000 ))), ends_at => to_timestamp($(( last_due / 1000000 )))))
		FROM generate_series(1, $sec_jobs) i" >/dev/null
	[ "$(now_us)" -lt "$t0" ] || echo "bench: defining the seconds jobs took longer than $sec_lead s" >&2
	log "seconds: $sec_jobs jobs every second from $(date -d "@$(( t0 / 1000000 ))" +%T) for $sec_window s, pg_cron and delaysched side by side"
	measure_window "$out/seconds.cpu" "$t0" "$t_end" "$pc" "$ds"
	wait "$listener" || status=$?
	fired_rows sec_fired second >"$out/seconds-pgcron.fired"
	use "$ds"
	missed=$(cluster_sql -Atc "SELECT sum(missed) FROM sched.schedules")
	{
		report row "pg_cron $cron_version, $sec_jobs jobs '1 seconds' (intervals)" \
			--cron "$out/seconds-pgcron.fired" --due "$t0" "$last_due" --intervals \
			--seconds "$t0" "$sec_window" "$sec_jobs" --expected "$expected" \
			--dat "$out/seconds-pgcron.dat" --cpu "$out/seconds.cpu" 1 "$t0" "$t_end"
		report row "delaysched, $sec_jobs schedules '* * * * * *'" \
			--dslisten "$out/seconds-delaysched.lis" --due "$t0" "$last_due" \
			--seconds "$t0" "$sec_window" "$sec_jobs" --expected "$expected" --missed "$missed" \
			--dat "$out/seconds-delaysched.dat" --check --cpu "$out/seconds.cpu" 2 "$t0" "$t_end" || status=3
		report row "  (its intervals between receipts)" \
			--dslisten "$out/seconds-delaysched.lis" --due "$t0" "$last_due" --intervals \
			--expected "$expected"
	} >>"$out/rows-seconds.txt"
	[ "$status" -eq 0 ] && [ "$missed" -eq 0 ] || failed="$failed seconds(dslisten $status, missed $missed)"
	stop_cluster "$pc"
	stop_cluster "$ds"
}

# --- cron: pg_cron beside delaysched, the same minutes ---
start_cron_side() {
	start_pgcron_cluster cron 54371 cron_fired
	start_cluster ds1 54372
	cluster_sql -c "SELECT sched.define_biz('jobs', ack_timeout => '1 hour')" >/dev/null
	start_listener "$ds1" jobs "$out/cron-delaysched.lis" \
		"--count $(( jobs * minutes )) --timeout $(( minutes * 60 + 180 ))"
	cron_listener=$listener
}

run_cron() {	# run_cron FIRST_MINUTE (epoch s)
	local m=$1 m_us w_from w_to last_due status=0 missed
	m_us=$(( m * 1000000 ))
	last_due=$(( m_us + (minutes - 1) * 60000000 ))
	w_from=$(( m_us - 2000000 ))
	# delaysched fires at second 30 of each minute: pg_cron's top-of-the-
	# minute start of 20 jobs (a process each) must not steal its CPU, nor
	# it pg_cron's.
	w_to=$(( last_due + (30 + tail) * 1000000 ))
	use "$cron"
	cluster_sql -c "SELECT count(cron.schedule('job_' || i, '* * * * *',
		format('INSERT INTO cron_fired (job) VALUES (%L)', 'job_' || i))) FROM generate_series(1, $jobs) i" >/dev/null
	use "$ds1"
	cluster_sql -c "SELECT count(sched.define_schedule('job_' || i, 'jobs', '30 * * * * *',
		starts_at => to_timestamp($m), ends_at => to_timestamp($last_due / 1000000.0 + 30)))
		FROM generate_series(1, $jobs) i" >/dev/null
	log "cron: $jobs jobs from $(date -d "@$m" +%T) for $minutes min, pg_cron and delaysched side by side"
	measure_window "$out/cron.cpu" "$w_from" "$w_to" "$cron" "$ds1"
	wait "$cron_listener" || status=$?
	fired_rows cron_fired minute >"$out/cron-pgcron.fired"
	cluster_sql -AtF' ' -c "SELECT jobid, (extract(epoch FROM start_time) * 1000000)::bigint,
		(extract(epoch FROM date_trunc('minute', start_time)) * 1000000)::bigint
		FROM cron.job_run_details WHERE status = 'succeeded'" >"$out/cron-pgcron.runs"
	use "$ds1"
	missed=$(cluster_sql -Atc "SELECT sum(missed) FROM sched.schedules")
	report row "pg_cron $cron_version, $jobs jobs '* * * * *'" --cron "$out/cron-pgcron.fired" \
		--due "$m_us" "$last_due" --expected $(( jobs * minutes )) --dat "$out/cron-pgcron.dat" \
		--cpu "$out/cron.cpu" 1 "$w_from" "$w_to" --quiet "$m_us" "$minutes" "$tail" >>"$out/rows.txt"
	report row "  (its start_time in cron.job_run_details)" --cron "$out/cron-pgcron.runs" \
		--due "$m_us" "$last_due" --expected $(( jobs * minutes )) >>"$out/rows.txt"
	report row "delaysched, $jobs schedules '30 * * * * *'" --dslisten "$out/cron-delaysched.lis" \
		--due "$(( m_us + 30000000 ))" "$(( last_due + 30000000 ))" --expected $(( jobs * minutes )) --missed "$missed" \
		--dat "$out/cron-delaysched.dat" --check \
		--cpu "$out/cron.cpu" 2 "$w_from" "$w_to" --quiet "$(( m_us + 30000000 ))" "$minutes" "$tail" >>"$out/rows.txt" || status=3
	[ "$status" -eq 0 ] && [ "$missed" -eq 0 ] || failed="$failed cron(dslisten $status, missed $missed)"
	stop_cluster "$cron"
	stop_cluster "$ds1"
}

: >"$out/rows.txt"
: >"$out/rows-seconds.txt"
: >"$out/notes.txt"
started=$(date +%s)
start_cron_side
# A tenk run takes about $lead + $seconds + 8 s.  One that fits into the
# wait for the first minute of the cron window (only with --smoke) runs
# there, with the cron clusters up but idle; the others run after the cron
# window, when its clusters are gone.
# The seconds run takes about $sec_lead + $sec_window + 12 s.
runs="aligned spread"
[ -n "$cron_seconds" ] && runs="seconds $runs"
m=$(first_minute)
before="" after=""
for run in $runs; do
	if [ "$run" = seconds ]; then
		takes=$(( sec_lead + sec_window + 12 ))
	else
		takes=$(( lead + seconds + 8 ))
	fi
	if [ $(( m - $(date +%s) )) -gt $(( takes + 8 )) ]; then
		if [ "$run" = seconds ]; then run_seconds; else run_tenk "$run"; fi
		before="$before $run"
	else
		after="$after $run"
	fi
done
m=$(first_minute)
run_cron "$m"
for run in $after; do
	if [ "$run" = seconds ]; then run_seconds; else run_tenk "$run"; fi
done
log "all runs took $(( $(date +%s) - started )) s"

# The table: the cron rows first, then the seconds rows.
{
	echo "delaysched schedules beside pg_cron $cron_version, PostgreSQL $PG_MAJOR, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs${smoke:+ (--smoke: sizes too small to mean anything)}"
	echo "cron: pg_cron (at each minute's start) and delaysched (at its second 30) in two clusters at the same time, $minutes min window;"
	if [ -n "$cron_seconds" ]; then
		echo "seconds: pg_cron's '1 seconds' jobs and delaysched's '* * * * * *' in two more clusters at the same time, $sec_window s window;"
	fi
	echo "tenk: delaysched alone, $seconds s each, consumer without --ack.  Run before the cron window:${before:- none}; after it:${after:- none}."
	echo "lateness: pg_cron at its INSERT, delaysched at dslisten's receipt.  cpu: the whole server over the window, % of one core"
	echo "and CPU s per minute; quiet: the 50 s of each minute from 5 s after the system's firings."
	if [ -n "$cron_seconds" ]; then
		echo "\"(intervals)\": each job's intervals between consecutive firings - 1 s, not the lateness (pg_cron's '1 seconds' jobs"
		echo "are not on whole seconds).  skip/dbl: the seconds of the window in which a job fired not at all / more than once."
	fi
	echo
	report header
	grep -v '^delaysched, [0-9]* x every' "$out/rows.txt" || true
	cat "$out/rows-seconds.txt"
	grep '^delaysched, [0-9]* x every' "$out/rows.txt" || true
	echo
	cat "$out/notes.txt"
} | tee "$out/schedules.txt"

# The plot: lateness CDFs, in report.sh's style; the seconds curves dashed
# (pg_cron's: its intervals - 1 s).
seconds_plot=""
if [ -n "$cron_seconds" ]; then
	seconds_plot=", \\
		     '$out/seconds-delaysched.dat' using (cdf(\$1)):(1) smooth cnormal with steps linetype 5 title \"delaysched, $sec_jobs x '* * * * * *' (receipt)\", \\
		     '$out/seconds-pgcron.dat' using (cdf(\$1)):(1) smooth cnormal with steps linetype 6 title \"pg_cron, $sec_jobs x '1 seconds' (interval - 1 s)\""
fi
if command -v gnuplot >/dev/null; then
	gnuplot <<-GP
		set terminal svg size 800,480 dynamic noenhanced font "sans,12"
		set linetype 1 linecolor rgb "#d62728" linewidth 2
		set linetype 2 linecolor rgb "#1f77b4" linewidth 2
		set linetype 3 linecolor rgb "#2ca02c" linewidth 1.5
		set linetype 4 linecolor rgb "#98df8a" linewidth 1.5
		set linetype 5 linecolor rgb "#1f77b4" linewidth 2 dashtype 2
		set linetype 6 linecolor rgb "#d62728" linewidth 2 dashtype 2
		set grid
		set output "$out/lateness-cdf.svg"
		set title "Lateness of recurring firings (CDF; further left is better)"
		set xlabel "lateness (ms, log scale)"
		set ylabel "fraction of firings"
		set logscale x
		set xrange [0.1:*]
		set yrange [0:1]
		set key bottom right
		cdf(x) = 10 ** (ceil(log10(x > 0.1 ? x : 0.1) * 50) / 50.0)
		plot '$out/cron-delaysched.dat' using (cdf(\$1)):(1) smooth cnormal with steps title 'delaysched, $jobs x * * * * * (receipt)', \
		     '$out/cron-pgcron.dat' using (cdf(\$1)):(1) smooth cnormal with steps title 'pg_cron, $jobs x * * * * * (INSERT)', \
		     '$out/tenk-aligned.dat' using (cdf(\$1)):(1) smooth cnormal with steps title 'delaysched, $tenk x every 10 s, aligned', \
		     '$out/tenk-spread.dat' using (cdf(\$1)):(1) smooth cnormal with steps title 'delaysched, $tenk x every 10 s, spread'${seconds_plot}
	GP
	# The plot doc/performance.md shows is the one from 15.
	[ -n "$smoke" ] || [ "$PG_MAJOR" != 15 ] || cp "$out/lateness-cdf.svg" "$root/doc/img/schedules-cron.svg"
else
	echo "bench: gnuplot not found, no plot" >&2
fi
log "table: $out/schedules.txt"
[ -z "$failed" ] || { echo "bench: failed:$failed" >&2; exit 1; }
