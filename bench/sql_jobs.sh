#!/usr/bin/env bash
# bench/sql_jobs.sh: SQL jobs, delaysched beside pg_cron, in one run on this
# machine (issue 33): when the jobs start, and what the server spends.
#
#   bash bench/sql_jobs.sh            the full run (make bench-sql-jobs), about 7 minutes
#   bash bench/sql_jobs.sh --smoke    tiny sizes, about 2.5 minutes (most of
#                                     it waiting for the top of a minute)
#   bash bench/sql_jobs.sh --major N  on PostgreSQL N (default: 15, this
#                                     system's, or $PG_MAJOR) beside its
#                                     postgresql-N-cron; with --smoke too
#
# A major this system's Debian does not ship (17: trixie, 18: sid) runs in
# the chroot scripts/chroot.sh makes and keeps, as bench/schedules.sh does
# (bench/lib_cron.sh): results in bench/results/sql-jobs-<time>-pgN/.
#
# Two throwaway clusters at the same time: one with pg_cron alone,
# preloaded with cron.database_name 'postgres' and cron.host its socket
# directory (it runs each job over a libpq connection; nothing else is set:
# cron.max_running_jobs stays at 32 and max_connections at 100), one with
# delaysched alone at its defaults (2 scanners, delaysched.sql_workers 2).
# Both run both workloads, one after the other, in the same minutes, with
# each system's jobs due half a minute from the other's: pg_cron starts
# jobs at the top of a minute only, and side by side neither's runs take
# the other's CPU, while both see the same machine (a run after the other
# would take twice as long and see a different load).  Every job is the
# same statement, "INSERT INTO fired (job) VALUES ('<job>')", whose
# fired_at defaults to clock_timestamp(): the start lateness is fired_at
# minus the instant the job was due, inside the server for both.
#
# Workloads:
#   cron20     20 jobs every minute for 5 minutes (smoke: 2 jobs, 1 minute).
#              pg_cron: cron.schedule('c_<i>', '* * * * *', ...): due at
#              each minute.  delaysched: an sql type "cron" and 20
#              sched.define_schedule('c_<i>', 'cron', '30 * * * * *',
#              command => ...) from the first minute: due at second 30; a
#              run's due instant is the run_at of its schedule's firing (the
#              latest in sched.tasks at or before fired_at).
#   burst1000  1,000 one-shot jobs due at the same instant (smoke: 100), in
#              the minute after cron20's.  pg_cron has no one-shot jobs:
#              1,000 cron.schedule('b_<i>', 'M H * * *', ...) for that
#              minute (in UTC, pg_cron's time zone), made 12 s before it
#              and unscheduled after; due at the minute.  delaysched: an sql
#              type "burst" and 1,000 sched.add_sql('burst', T, ...) in one
#              statement, T a whole second 30 s after that minute (20 s in
#              smoke), added 5 s ahead (3 s); due at T, the jobs' run_at.
# Both: the runs for each due instant and job, "missing" and "dup" (pairs
# of job and instant with no run / more than one), lateness p50/p99/max,
# and under it the start each system records itself: pg_cron's start_time
# in cron.job_run_details; delaysched's started_at in sched.attempts (the
# run's transaction, its command about to run) and delivered_at in
# sched.tasks (the SQL worker's lease, the transaction before it).
#
# CPU: the whole server (the postmaster and all its children, exited ones
# included: pg_cron's job connections), sampled once a second by
# bench/schedules_report.py for both clusters over the whole run.  Each
# system's windows start 2 s before its first job is due: cron20 until
# just before the burst's jobs are made (pg_cron 47 s, delaysched 54 s
# after its last due instant; smoke: 47 and 46 s), with "quiet" the 5th to
# 45th second after each minute's firings; burst1000 for 30 s (smoke: 20 s)
# from 1 s before the instant, which holds its jobs and the system's idle
# work.  Neither system's window holds the other's jobs.
#
# Results: bench/results/sql-jobs-<time>/ (or $BENCH_OUT): sql_jobs.txt
# (the table), lateness-cdf.svg, every run (*.runs: "job start_us
# due_us"), the CPU samples (cpu) and, per process, where the CPU went
# (cpu.procs: server 1 is pg_cron's, 2 delaysched's).  A full run on 15
# also copies the plot to doc/img/sql-jobs.svg.
set -euo pipefail

usage() {
	echo "usage: bench/sql_jobs.sh [--smoke] [--major N]" >&2
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
bench_maybe_in_chroot "$major" sql_jobs.sh sql-jobs ${args[@]+"${args[@]}"}

PACKAGES="$PACKAGES gnuplot-nox postgresql-$PG_MAJOR-cron"
ensure_packages
build_and_install "$root"
cron_version=$(dpkg-query -W -f='${Version}' "postgresql-$PG_MAJOR-cron")

if [ -n "$smoke" ]; then
	jobs=2 minutes=1 burst=100
	offset=20 lead=3	# delaysched's burst: $offset s after the minute, added $lead s ahead
else
	jobs=20 minutes=5 burst=1000
	offset=30 lead=5
fi
cron_ahead=12		# pg_cron's burst jobs are made this many s before their minute

out=${BENCH_OUT:-$root/bench/results/sql-jobs-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
[ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$out"
report() { python3 "$root/bench/sql_jobs_report.py" "$@"; }
started=$(date +%s)
: >"$out/notes.txt"
note() { echo "$*" >>"$out/notes.txt"; }
note "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"

# The job of name $1: the same statement for both systems.
command_sql() { echo "format('INSERT INTO fired (job) VALUES (%L)', $1)"; }

start_pgcron_cluster pc 54376 fired
start_cluster ds 54377
cluster_sql -c "CREATE TABLE fired (job text, fired_at timestamptz DEFAULT clock_timestamp())" \
	-c "SELECT sched.define_biz('cron', delivery => 'sql'), sched.define_biz('burst', delivery => 'sql')" >/dev/null
note "delaysched.sql_workers $(cluster_sql -Atc 'SHOW delaysched.sql_workers'); pg_cron's cron.max_running_jobs $(use "$pc"; cluster_sql -Atc 'SHOW cron.max_running_jobs')"

# The instants (epoch µs): pg_cron's cron20 minutes from m, delaysched's
# 30 s after each; the burst's minute b (pg_cron) and instant t (delaysched).
m=$(first_minute)
m_us=$(( m * 1000000 ))
b_us=$(( m_us + minutes * 60000000 ))
t_us=$(( b_us + offset * 1000000 ))
ds_first=$(( m_us + 30000000 ))
ds_last=$(( b_us - 30000000 ))

use "$pc"
cluster_sql -c "SELECT count(cron.schedule('c_' || i, '* * * * *', $(command_sql "'c_' || i")))
	FROM generate_series(1, $jobs) i" >/dev/null
use "$ds"
cluster_sql -c "SELECT count(sched.define_schedule('c_' || i, 'cron', '30 * * * * *',
		starts_at => to_timestamp($m), ends_at => to_timestamp($ds_last / 1000000.0),
		command => $(command_sql "'c_' || i")))
	FROM generate_series(1, $jobs) i" >/dev/null
log "cron20: $jobs jobs every minute from $(date -d "@$m" +%T) for $minutes min (pg_cron at :00, delaysched at :30); burst1000: $burst jobs, pg_cron at $(date -d "@$(( b_us / 1000000 ))" +%T), delaysched at $(date -d "@$(( t_us / 1000000 ))" +%T)"

sleep_until $(( m_us - 2000000 ))
start_sampler "$out/cpu" "$pc" "$ds"

# pg_cron's burst: its cron20 jobs go, then $burst jobs for minute b.
sleep_until $(( b_us - (cron_ahead + 1) * 1000000 ))
use "$pc"
cluster_sql -c "SELECT cron.unschedule(jobid) FROM cron.job" >/dev/null
sleep_until $(( b_us - cron_ahead * 1000000 ))
cluster_sql -c "SELECT count(cron.schedule('b_' || i, '$(date -u -d "@$(( b_us / 1000000 ))" '+%-M %-H') * * *',
		$(command_sql "'b_' || i")))
	FROM generate_series(1, $burst) i" >/dev/null
[ "$(now_us)" -lt $(( b_us - 2000000 )) ] || echo "bench: making pg_cron's burst jobs took longer than $(( cron_ahead - 2 )) s" >&2

# delaysched's burst: $burst jobs due at t, in one statement.
sleep_until $(( t_us - lead * 1000000 ))
use "$ds"
cluster_sql -c "SELECT count(sched.add_sql('burst', to_timestamp($(( t_us / 1000000 ))), $(command_sql "'b_' || i")))
	FROM generate_series(1, $burst) i" >/dev/null
[ "$(now_us)" -lt $(( t_us - 1000000 )) ] || echo "bench: adding delaysched's burst jobs took longer than $(( lead - 1 )) s" >&2
end_us=$(( t_us + (offset - 1) * 1000000 ))
sleep_until "$end_us"
stop_sampler

# Runs later than the windows still count (up to a minute more).
for _ in $(seq 1 60); do
	use "$pc"
	n_pc=$(cluster_sql -Atc "SELECT count(*) FROM fired WHERE job LIKE 'b\_%'")
	use "$ds"
	n_ds=$(cluster_sql -Atc "SELECT count(*) FROM fired WHERE job LIKE 'b\_%'")
	[ "$n_pc" -ge "$burst" ] && [ "$n_ds" -ge "$burst" ] && break
	sleep 1
done
use "$pc"
cluster_sql -c "SELECT cron.unschedule(jobid) FROM cron.job" >/dev/null

# The runs, "job start_us due_us", by workload (c_ and b_ jobs).
us() { echo "(extract(epoch FROM $1) * 1000000)::bigint"; }
split_runs() {	# split_runs NAME: stdin into NAME-cron.runs and NAME-burst.runs
	local all
	all=$(cat)
	grep '^c_' <<<"$all" >"$out/$1-cron.runs" || true
	grep '^b_' <<<"$all" >"$out/$1-burst.runs" || true
}
use "$pc"
fired_rows fired minute | split_runs pgcron
# Its own start times, keyed by job id, the job's name in front.
cluster_sql -AtF' ' -c "SELECT CASE WHEN command LIKE '%''c\_%' THEN 'c_' ELSE 'b_' END || jobid,
		$(us start_time), $(us "date_trunc('minute', start_time)")
	FROM cron.job_run_details" | split_runs pgcron-start
note "pg_cron's runs by status: $(cluster_sql -AtF' ' -c "SELECT string_agg(status || ' ' || n, ', ') FROM (SELECT status, count(*) n FROM cron.job_run_details GROUP BY 1) s")"
note "pg_cron's burst: the last INSERT $(cluster_sql -Atc "SELECT round(extract(epoch FROM max(fired_at) - to_timestamp($(( b_us / 1000000 )))) * 1000) FROM fired WHERE job LIKE 'b\_%'") ms after its minute, delaysched's instant $(( offset * 1000 )) ms after it"
use "$ds"
cluster_sql -AtF' ' -c "SELECT f.job, $(us f.fired_at), coalesce($(us t.run_at)::text, '-')
	FROM fired f
	LEFT JOIN LATERAL (SELECT max(t.run_at) AS run_at FROM sched.tasks t
		WHERE CASE WHEN f.job LIKE 'c\_%' THEN t.schedule = f.job
			  ELSE t.biz_type = 'burst' AND t.command = $(command_sql f.job) END
		  AND t.run_at <= f.fired_at) t ON true" | split_runs delaysched
# Its own marks: the run's start (sched.attempts), the lease (sched.tasks).
task_key="CASE WHEN t.schedule IS NOT NULL THEN t.schedule ELSE 'b_' || t.id END"
cluster_sql -AtF' ' -c "SELECT $task_key, $(us a.started_at), $(us t.run_at)
	FROM sched.attempts a JOIN sched.tasks t ON t.id = a.id WHERE a.outcome = 'done'" | split_runs delaysched-start
cluster_sql -AtF' ' -c "SELECT $task_key, $(us t.delivered_at), $(us t.run_at)
	FROM sched.tasks t WHERE t.delivered_at IS NOT NULL" | split_runs delaysched-lease
note "delaysched's runs by outcome: $(cluster_sql -AtF' ' -c "SELECT string_agg(outcome || ' ' || n, ', ') FROM (SELECT outcome, count(*) n FROM sched.attempts GROUP BY 1) s"); schedules missed: $(cluster_sql -Atc "SELECT sum(missed) FROM sched.schedules")"
note "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
stop_cluster "$pc"
stop_cluster "$ds"
log "the run took $(( $(date +%s) - started )) s"

# The table.
failed=""
pc_cron_to=$(( b_us - (cron_ahead + 1) * 1000000 ))
ds_cron_to=$(( t_us - (lead + 1) * 1000000 ))
row() {	# row LABEL FILE JOBS FIRST_DUE COUNT [options]: one line, and its check
	local label=$1 file=$2 n=$3 first=$4 count=$5
	shift 5
	report row "$label" --runs "$out/$file.runs" --jobs "$n" --dues "$first" 60000000 "$count" "$@" ||
		failed="$failed $file"
}
{
	echo "delaysched SQL jobs beside pg_cron $cron_version, PostgreSQL $PG_MAJOR, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs${smoke:+ (--smoke: sizes too small to mean anything)}"
	echo "Two clusters at the same time; pg_cron's jobs due at each minute's start, delaysched's half a minute later."
	echo "cron20: $jobs jobs every minute for $minutes min.  burst1000: $burst one-shot jobs due at the same instant, in the minute after."
	echo "lateness: start - due, at the job's INSERT unless said.  cpu: the whole server over the system's window, CPU s and % of one"
	echo "core (cron20: from 2 s before its first firing for $(( (pc_cron_to - m_us) / 1000000 + 2 )) s (pg_cron), $(( (ds_cron_to - ds_first) / 1000000 + 2 )) s (delaysched); burst1000: $offset s from 1 s before"
	echo "the instant); quiet: from 5 to 45 s after each minute's firings."
	echo
	report header
	row "pg_cron $cron_version, $jobs jobs '* * * * *'" pgcron-cron "$jobs" "$m_us" "$minutes" \
		--dat "$out/pgcron-cron.dat" --check \
		--cpu "$out/cpu" 1 $(( m_us - 2000000 )) "$pc_cron_to" --quiet "$m_us" "$minutes"
	row "  (its start_time in cron.job_run_details)" pgcron-start-cron "$jobs" "$m_us" "$minutes"
	row "delaysched, $jobs schedules '30 * * * * *'" delaysched-cron "$jobs" "$ds_first" "$minutes" \
		--dat "$out/delaysched-cron.dat" --check \
		--cpu "$out/cpu" 2 $(( ds_first - 2000000 )) "$ds_cron_to" --quiet "$ds_first" "$minutes"
	row "  (its started_at in sched.attempts)" delaysched-start-cron "$jobs" "$ds_first" "$minutes"
	row "  (its lease: delivered_at in sched.tasks)" delaysched-lease-cron "$jobs" "$ds_first" "$minutes"
	row "pg_cron $cron_version, $burst jobs for one minute" pgcron-burst "$burst" "$b_us" 1 \
		--dat "$out/pgcron-burst.dat" --check --cpu "$out/cpu" 1 $(( b_us - 1000000 )) $(( b_us + (offset - 1) * 1000000 ))
	row "  (its start_time in cron.job_run_details)" pgcron-start-burst "$burst" "$b_us" 1
	row "delaysched, $burst x sched.add_sql at one second" delaysched-burst "$burst" "$t_us" 1 \
		--dat "$out/delaysched-burst.dat" --check --cpu "$out/cpu" 2 $(( t_us - 1000000 )) "$end_us"
	row "  (its started_at in sched.attempts)" delaysched-start-burst "$burst" "$t_us" 1
	row "  (its lease: delivered_at in sched.tasks)" delaysched-lease-burst "$burst" "$t_us" 1
	echo
	cat "$out/notes.txt"
} >"$out/sql_jobs.txt"
cat "$out/sql_jobs.txt"

# The plot: lateness CDFs at the INSERT, in report.sh's style.
if command -v gnuplot >/dev/null; then
	gnuplot <<-GP
		set terminal svg size 800,480 dynamic noenhanced font "sans,12"
		set linetype 1 linecolor rgb "#1f77b4" linewidth 2
		set linetype 2 linecolor rgb "#d62728" linewidth 2
		set linetype 3 linecolor rgb "#1f77b4" linewidth 2 dashtype 2
		set linetype 4 linecolor rgb "#d62728" linewidth 2 dashtype 2
		set grid
		set output "$out/lateness-cdf.svg"
		set title "Start lateness of SQL jobs (CDF; further left is better)"
		set xlabel "lateness at the job's INSERT (ms, log scale)"
		set ylabel "fraction of runs"
		set logscale x
		set xrange [0.1:*]
		set yrange [0:1]
		set key bottom right
		cdf(x) = 10 ** (ceil(log10(x > 0.1 ? x : 0.1) * 50) / 50.0)
		plot '$out/delaysched-cron.dat' using (cdf(\$1)):(1) smooth cnormal with steps title 'delaysched, $jobs schedules every minute', \
		     '$out/pgcron-cron.dat' using (cdf(\$1)):(1) smooth cnormal with steps title 'pg_cron, $jobs jobs every minute', \
		     '$out/delaysched-burst.dat' using (cdf(\$1)):(1) smooth cnormal with steps title 'delaysched, $burst one-shot jobs at one instant', \
		     '$out/pgcron-burst.dat' using (cdf(\$1)):(1) smooth cnormal with steps title 'pg_cron, $burst jobs at one minute'
	GP
	# The plot doc/performance.md shows is the one from 15.
	[ -n "$smoke" ] || [ "$PG_MAJOR" != 15 ] || cp "$out/lateness-cdf.svg" "$root/doc/img/sql-jobs.svg"
else
	echo "bench: gnuplot not found, no plot" >&2
fi
log "table: $out/sql_jobs.txt"
[ -z "$failed" ] || { echo "bench: failed:$failed" >&2; exit 1; }
