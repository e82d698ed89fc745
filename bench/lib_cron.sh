# bench/lib_cron.sh: what the benchmarks beside pg_cron share
# (bench/schedules.sh, bench/sql_jobs.sh).
#
# Sourced, not run, after scripts/lib.sh, with $root the tree's top.
#
#   bench_maybe_in_chroot MAJOR SCRIPT PREFIX [ARG ...]
#                      when MAJOR is set and this system's Debian does not
#                      ship it (17: trixie, 18: sid), run bench/SCRIPT with
#                      the ARGs in the chroot scripts/chroot.sh makes and
#                      keeps, copy its results back to
#                      bench/results/PREFIX-<time>-pgMAJOR/ (or $BENCH_OUT),
#                      and exit with its status; otherwise return
#   start_cluster VAR PORT [EXTRA [plain]]
#                      a throwaway cluster (lib.sh's), remembered in
#                      $clusters and stopped on exit; VAR=dir:port
#   use DIR:PORT       make it the one cluster_sql talks to
#   stop_cluster DIR:PORT
#   start_pgcron_cluster VAR PORT TABLE
#                      a cluster with pg_cron alone (cron.database_name
#                      postgres, cron.host its socket directory, nothing
#                      else set) and a table TABLE (job text, fired_at
#                      timestamptz DEFAULT clock_timestamp()) for its jobs
#   start_sampler FILE DIR:PORT ...   stop_sampler
#                      the CPU of those servers, once a second, into FILE
#   measure_window FILE FROM_US TO_US PG_CRON OTHER
#                      sample both from FROM to TO, then unschedule every
#                      pg_cron job
#   fired_rows TABLE UNIT   job, fired_at and its UNIT, in epoch µs
#   now_us, sleep_until EPOCH_US, first_minute
#
# The server's CPU is that of the postmaster and all its children (live
# ones from /proc/<pid>/schedstat, exited ones from the postmaster's cutime
# and cstime), sampled once a second by bench/schedules_report.py sample.

# In the chroot of major $1: copy the tree in (the files git tracks, as
# they are in the working tree), run bench/$2 there with the other
# arguments, as root with PG_MAJOR set, copy its results out, remove the
# copy and exit with its status.
bench_run_in_chroot() {
	local m=$1 script=$2 prefix=$3 out status=0
	shift 3
	out=${BENCH_OUT:-$root/bench/results/$prefix-$(date +%Y%m%d-%H%M%S)-pg$m}
	trap chroot_tree_end EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	chroot_tree_begin "$m" "$root" || exit 1
	log "PostgreSQL $m: running in $CHROOT_DIR ($CHROOT_INSIDE)"
	chroot_run "$CHROOT_DIR" PG_MAJOR="$m" BENCH_OUT="$CHROOT_INSIDE/results" \
		bash "$CHROOT_INSIDE/bench/$script" "$@" || status=$?
	if [ -d "$CHROOT_TREE/results" ]; then
		mkdir -p "$out"
		cp -a "$CHROOT_TREE/results/." "$out/"
		[ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$out"
		log "results copied to $out"
	fi
	exit "$status"
}

bench_maybe_in_chroot() {
	local m=$1
	[ -n "$m" ] || return 0
	. "$root/scripts/chroot.sh"
	if major_needs_chroot "$m"; then
		bench_run_in_chroot "$@"
	fi
}

# Several clusters at once: each is remembered by its directory and port,
# and every one is stopped on exit.
clusters=()
sampler=""
bench_cleanup() {
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null || true
	for c in ${clusters[@]+"${clusters[@]}"}; do
		CLUSTER_DIR=${c%:*} stop_throwaway_cluster
	done
}
trap bench_cleanup EXIT
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

# A cluster with pg_cron alone and a table TABLE for its jobs' INSERTs.
start_pgcron_cluster() {	# start_pgcron_cluster VAR PORT TABLE
	start_cluster "$1" "$2" "shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'" plain
	# pg_cron runs its jobs through libpq: point it at the socket.
	cluster_sql -c "ALTER SYSTEM SET cron.host = '$CLUSTER_DIR'" >/dev/null
	as_pg_user pg_ctl -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" -w restart >/dev/null
	cluster_sql -c "CREATE EXTENSION pg_cron" \
		-c "CREATE TABLE $3 (job text, fired_at timestamptz DEFAULT clock_timestamp())" >/dev/null
}

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

now_us() { date +%s%6N; }
# (In the background, so that a signal interrupts the wait at once.)
sleep_until() {	# sleep_until EPOCH_US
	local left=$(( $1 - $(now_us) ))
	[ "$left" -le 0 ] && return
	sleep "$(printf '%d.%06d' $(( left / 1000000 )) $(( left % 1000000 )))" &
	wait $!
}

# measure_window CPU_FILE FROM TO PG_CRON OTHER: sample both clusters' CPU
# into CPU_FILE from FROM to TO (epoch microseconds), then unschedule
# pg_cron's jobs; the pg_cron cluster is the current one after it.
measure_window() {
	sleep_until "$2"
	start_sampler "$1" "$4" "$5"
	sleep_until "$3"
	stop_sampler
	use "$4"
	cluster_sql -c "SELECT cron.unschedule(jobid) FROM cron.job" >/dev/null
}

# fired_rows TABLE UNIT: what pg_cron's jobs inserted into TABLE (in the
# current cluster): job, fired_at and the UNIT (second, minute) it fell in,
# both in epoch microseconds.
fired_rows() {
	cluster_sql -AtF' ' -c "SELECT job, (extract(epoch FROM fired_at) * 1000000)::bigint,
		(extract(epoch FROM date_trunc('$2', fired_at)) * 1000000)::bigint FROM $1"
}

# The first minute of a window: the next top of a minute at least 8 s away.
# If that is the top after next, wait until the one before it has passed:
# pg_cron runs a '* * * * *' job made now at the next top of a minute,
# which would be a round of runs the window does not expect (it happened
# once, at 19:44:53, on 18).
first_minute() {
	local now m
	now=$(date +%s)
	m=$(( (now + 8 + 59) / 60 * 60 ))
	[ $(( m - now )) -le 59 ] || sleep $(( m - 59 - now ))
	echo "$m"
}
