#!/usr/bin/env bash
# bench/schedules.sh: recurring schedules, delaysched beside pg_cron, in one
# run on this machine.
#
#   bash bench/schedules.sh            the full run (make bench-schedules), about 8 minutes
#   bash bench/schedules.sh --smoke    tiny sizes, 1 to 1.5 minutes (most of it
#                                      waiting for the top of a minute)
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
#
# The server's CPU is that of the postmaster and all its children (live
# ones from /proc/<pid>/schedstat, exited ones from the postmaster's cutime
# and cstime), sampled once a second by bench/schedules_report.py; for
# delaysched it includes the consumer's backend.
#
# Results: bench/results/schedules-<time>/ (or $BENCH_OUT): schedules.txt
# (the table), lateness-cdf.svg, the receipts, the CPU samples and, per
# process, where the CPU went (*.cpu.procs).  Without --smoke the plot is
# also copied to doc/img/schedules-cron.svg.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

smoke=""
for arg in "$@"; do
	case $arg in
		--smoke) smoke=1 ;;
		*) echo "usage: bench/schedules.sh [--smoke]" >&2; exit 2 ;;
	esac
done

PACKAGES="$PACKAGES gnuplot-nox postgresql-$PG_MAJOR-cron"
ensure_packages
build_and_install "$root"
cron_version=$(dpkg-query -W -f='${Version}' "postgresql-$PG_MAJOR-cron")

if [ -n "$smoke" ]; then
	jobs=2 minutes=1 tail=10	# the window ends $tail s after the last firing
	tenk=500 seconds=10 lead=3
else
	jobs=20 minutes=5 tail=58
	tenk=10000 seconds=60 lead=5
fi

out=${BENCH_OUT:-$root/bench/results/schedules-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
[ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$out"
report() { python3 "$root/bench/schedules_report.py" "$@"; }

# Several clusters at once: each is remembered by its directory and port,
# and every one is stopped on exit.
clusters=()
sampler=""
cleanup() {
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null || true
	for c in "${clusters[@]}"; do
		CLUSTER_DIR=${c%:*} stop_throwaway_cluster
	done
}
trap cleanup EXIT
# An interrupted run cleans up too (bash runs the EXIT trap only on exit).
trap 'exit 130' INT
trap 'exit 143' TERM

start_cluster() {	# start_cluster VAR PORT [EXTRA [plain]]: VAR=dir:port
	start_throwaway_cluster "$2" "${3:-}" ${4:-}
	clusters+=("$CLUSTER_DIR:$CLUSTER_PORT")
	printf -v "$1" '%s' "$CLUSTER_DIR:$CLUSTER_PORT"
}

use() {	# use DIR:PORT: make it the cluster cluster_sql talks to
	CLUSTER_DIR=${1%:*}
	CLUSTER_PORT=${1##*:}
}

stop_cluster() {	# stop_cluster DIR:PORT
	use "$1"
	stop_throwaway_cluster
	local keep=() c
	for c in "${clusters[@]}"; do [ "$c" = "$1" ] || keep+=("$c"); done
	clusters=(${keep[@]+"${keep[@]}"})
}

postmaster_pid() { head -1 "${1%:*}/data/postmaster.pid"; }

# Sample the CPU of the servers given (DIR:PORT ...) into $1 until
# stop_sampler.
start_sampler() {
	local file=$1 pids=() c
	shift
	for c in "$@"; do pids+=("$(postmaster_pid "$c")"); done
	python3 "$root/bench/schedules_report.py" sample "$file" "${pids[@]}" &
	sampler=$!
}

stop_sampler() {
	kill "$sampler"
	wait "$sampler" || true
	sampler=""
}

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

now_us() { date +%s%6N; }
# (In the background, so that a signal interrupts the wait at once.)
sleep_until() {	# sleep_until EPOCH_US
	local left=$(( $1 - $(now_us) ))
	[ "$left" -le 0 ] && return
	sleep "$(printf '%d.%06d' $(( left / 1000000 )) $(( left % 1000000 )))" &
	wait $!
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

# --- cron: pg_cron beside delaysched, the same minutes ---
start_cron_side() {
	start_cluster cron 54371 "shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'" plain
	# pg_cron runs its jobs through libpq: point it at the socket.
	cluster_sql -c "ALTER SYSTEM SET cron.host = '$CLUSTER_DIR'" >/dev/null
	as_pg_user pg_ctl -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" -w restart >/dev/null
	cluster_sql -c "CREATE EXTENSION pg_cron" \
		-c "CREATE TABLE cron_fired (job text, fired_at timestamptz DEFAULT clock_timestamp())" >/dev/null
	start_cluster ds1 54372
	cluster_sql -c "SELECT sched.define_biz('jobs', ack_timeout => '1 hour')" >/dev/null
	start_listener "$ds1" jobs "$out/cron-delaysched.lis" \
		"--count $(( jobs * minutes )) --timeout $(( minutes * 60 + 180 ))"
	cron_listener=$listener
}

# The first minute of the window: the next top of a minute at least 8 s away.
first_minute() {
	local now
	now=$(date +%s)
	echo $(( (now + 8 + 59) / 60 * 60 ))
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
	sleep_until "$w_from"
	start_sampler "$out/cron.cpu" "$cron" "$ds1"
	sleep_until "$w_to"
	stop_sampler
	use "$cron"
	cluster_sql -c "SELECT cron.unschedule(jobid) FROM cron.job" >/dev/null
	wait "$cron_listener" || status=$?
	cluster_sql -AtF' ' -c "SELECT job, (extract(epoch FROM fired_at) * 1000000)::bigint,
		(extract(epoch FROM date_trunc('minute', fired_at)) * 1000000)::bigint FROM cron_fired" \
		>"$out/cron-pgcron.fired"
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
: >"$out/notes.txt"
started=$(date +%s)
start_cron_side
# A tenk run takes about $lead + $seconds + 8 s.  One that fits into the
# wait for the first minute of the cron window (only with --smoke) runs
# there, with the cron clusters up but idle; the others run after the cron
# window, when its clusters are gone.
m=$(first_minute)
before="" after=""
for variant in aligned spread; do
	if [ $(( m - $(date +%s) )) -gt $(( lead + seconds + 8 + 8 )) ]; then
		run_tenk $variant
		before="$before $variant"
	else
		after="$after $variant"
	fi
done
m=$(first_minute)
run_cron "$m"
for variant in $after; do run_tenk $variant; done
log "all runs took $(( $(date +%s) - started )) s"

# The table: the cron rows first.
{
	echo "delaysched schedules beside pg_cron $cron_version, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs${smoke:+ (--smoke: sizes too small to mean anything)}"
	echo "cron: pg_cron (at each minute's start) and delaysched (at its second 30) in two clusters at the same time, $minutes min window; tenk: delaysched alone,"
	echo "${before:+before the cron window:$before}${before:+${after:+, }}${after:+after it:$after}; $seconds s each, consumer without --ack.  lateness: pg_cron at its INSERT,"
	echo "delaysched at dslisten's receipt.  cpu: the whole server over the window, % of one core and CPU s per minute;"
	echo "quiet: the 50 s of each minute from 5 s after the system's firings."
	echo
	report header
	grep -v '^delaysched, [0-9]* x every' "$out/rows.txt" || true
	grep '^delaysched, [0-9]* x every' "$out/rows.txt" || true
	echo
	cat "$out/notes.txt"
} | tee "$out/schedules.txt"

# The plot: lateness CDFs, in report.sh's style.
if command -v gnuplot >/dev/null; then
	gnuplot <<-GP
		set terminal svg size 800,480 dynamic noenhanced font "sans,12"
		set linetype 1 linecolor rgb "#d62728" linewidth 2
		set linetype 2 linecolor rgb "#1f77b4" linewidth 2
		set linetype 3 linecolor rgb "#2ca02c" linewidth 1.5
		set linetype 4 linecolor rgb "#98df8a" linewidth 1.5
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
		     '$out/tenk-spread.dat' using (cdf(\$1)):(1) smooth cnormal with steps title 'delaysched, $tenk x every 10 s, spread'
	GP
	[ -n "$smoke" ] || cp "$out/lateness-cdf.svg" "$root/doc/img/schedules-cron.svg"
else
	echo "bench: gnuplot not found, no plot" >&2
fi
log "table: $out/schedules.txt"
[ -z "$failed" ] || { echo "bench: failed:$failed" >&2; exit 1; }
