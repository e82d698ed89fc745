#!/usr/bin/env bash
# bench/databases.sh: delaysched serving several databases of one cluster,
# in one run, so that the figures are ratios.
#
#   bash bench/databases.sh [--smoke] [--databases N] [--rate R] [--seconds S]
#   make bench-databases      (make bench-databases-smoke: a few seconds)
#
# On one throwaway cluster (max_worker_processes 64, the default two
# scanners and one HTTP worker per database):
#   steady-1    test/bench/dsbench's steady load, R tasks/s (default 50) for
#               S seconds (default 60), in one database with the extension
#   steady-1-total  N times that load in the one database (the same total
#               as the next), from one dsbench
#   steady-1-clients  the same total in the one database from N dsbench
#               runs at R tasks/s each, each with its own type and listener:
#               the next case's clients, in one database, so that what the
#               number of databases costs is told apart from what the
#               number of clients does
#   steady-N    the same load in each of N databases (default 10) at once,
#               each with its own dsbench, type and listener; lateness p50,
#               p99 and max per database and over them all, against both
#   create      CREATE DATABASE from template0, CREATE EXTENSION, define a
#               type, add a task due at once: how long CREATE EXTENSION
#               takes, and from its commit to the task's arrival at a LISTEN
#               client (5 times)
#   drop        DROP DATABASE (no FORCE) of a served database while 1,000 of
#               its tasks fall due over 10 s (5 times)
#   footprint   per served database: worker processes, their proportional
#               memory (PSS: a shared page counted once over its sharers),
#               and its share of delaysched's shared memory
# Results go to bench/results/databases-<time>/ (or $BENCH_OUT): table.txt and
# the receipts of every delivery.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

smoke=""
ndb=10
rate=50
seconds=60
rounds=5
while [ $# -gt 0 ]; do
	case $1 in
		--smoke) smoke=1 ;;
		--databases) ndb=$2; shift ;;
		--rate) rate=$2; shift ;;
		--seconds) seconds=$2; shift ;;
		*) echo "usage: bench/databases.sh [--smoke] [--databases N] [--rate R] [--seconds S]" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$smoke" ]; then
	ndb=3; seconds=3; rounds=2
fi

ensure_packages
build_and_install "$root"
out=${BENCH_OUT:-$root/bench/results/databases-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/receipts"
[ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$out"
trap stop_throwaway_cluster EXIT

start_throwaway_cluster 54334 "max_worker_processes = 64
max_connections = 300"
dsbench=$root/test/bench/dsbench

conninfo() {	# conninfo DB
	echo "host=$CLUSTER_DIR port=$CLUSTER_PORT user=postgres dbname=$1"
}

sql() {	# sql DB STATEMENT...
	local db=$1; shift
	as_pg_user psql -X -q -At -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -d "$db" "$@"
}

# Wait until database $1 has $2 scanners.
wait_scanners() {
	local i
	for i in $(seq 1 300); do
		[ "$(sql postgres -c "SELECT count(*) FROM pg_stat_activity WHERE datname = '$1' AND backend_type = 'delaysched scanner'")" = "$2" ] && return 0
		sleep 0.1
	done
	echo "bench: database $1 did not get $2 scanners" >&2
	return 1
}

# steady LABEL RATE LOAD...: the steady load, one dsbench per LOAD at once.
# A LOAD is DB (type "bench") or DB/TYPE; each has its own receipts file,
# named for the database, or for the type when one is given.
steady() {
	local label=$1 r=$2 load db type name pids=() status=0
	shift 2
	for load in "$@"; do
		db=${load%%/*}
		type=bench
		name=$db
		if [ "$load" != "$db" ]; then type=${load#*/}; name=$type; fi
		(cd /tmp && as_pg_user "$dsbench" --system delaysched --workload steady --rate "$r" \
			--seconds "$seconds" --ack-timeout 30 --label "$label" --name "$name" --type "$type" \
			--csv "$out/$label.csv" --receipts "$out/receipts/$label--$name.dat" \
			"$(conninfo "$db")" >/dev/null) &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || status=$?; done
	return $status
}

# Lateness percentiles over every receipt of a label (ms).
lateness() {	# lateness LABEL
	python3 - "$out/receipts" "$1" <<'EOF'
import glob, sys
values = []
for f in glob.glob(f"{sys.argv[1]}/{sys.argv[2]}--*.dat"):
    for line in open(f):
        if not line.startswith('#'):
            values.append(float(line.split()[1]))
values.sort()
def pct(p):
    return values[max(0, min(len(values) - 1, int(p * len(values) + 0.999999) - 1))]
print(f"{len(values)} {pct(0.5):.1f} {pct(0.99):.1f} {values[-1]:.1f}")
EOF
}

log "steady-1: $rate tasks/s for $seconds s in one database"
sql postgres -c "CREATE DATABASE db1" >/dev/null
sql db1 -c "CREATE EXTENSION delaysched"
wait_scanners db1 2
steady steady-1 "$rate" db1
read -r n1 p50_1 p99_1 max_1 <<<"$(lateness steady-1)"
cpu_1=$(cut -d, -f12 "$out/steady-1.csv")

total=$(awk -v r="$rate" -v n="$ndb" 'BEGIN {print r * n}')
log "steady-1-total: $total tasks/s for $seconds s in one database (the N databases' total)"
steady steady-1-total "$total" db1
read -r nt p50_t p99_t max_t <<<"$(lateness steady-1-total)"
cpu_t=$(cut -d, -f12 "$out/steady-1-total.csv")

log "steady-1-clients: $rate tasks/s for $seconds s from each of $ndb clients in one database"
steady steady-1-clients "$rate" $(for i in $(seq 1 "$ndb"); do echo "db1/t$i"; done)
read -r nc p50_c p99_c max_c <<<"$(lateness steady-1-clients)"
cpu_c=$(cut -d, -f12 "$out/steady-1-clients.csv" | sort -n | tail -1)

log "steady-$ndb: $rate tasks/s for $seconds s in each of $ndb databases"
dbs=(db1)
for i in $(seq 2 "$ndb"); do
	sql postgres -c "CREATE DATABASE db$i" >/dev/null
	sql "db$i" -c "CREATE EXTENSION delaysched"
	dbs+=("db$i")
done
for db in "${dbs[@]}"; do wait_scanners "$db" 2; done
steady "steady-$ndb" "$rate" "${dbs[@]}"
read -r nn p50_n p99_n max_n <<<"$(lateness "steady-$ndb")"
cpu_n=$(cut -d, -f12 "$out/steady-$ndb.csv" | sort -n | tail -1)
per_db=$(for db in "${dbs[@]}"; do
	python3 - "$out/receipts/steady-$ndb--$db.dat" <<'EOF'
import sys
v = sorted(float(l.split()[1]) for l in open(sys.argv[1]) if not l.startswith('#'))
print(f"{v[max(0, int(0.99 * len(v) + 0.999999) - 1)]:.1f}")
EOF
done | sort -n | tr '\n' ' ')

log "footprint per served database"
workers=$(sql postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('delaysched scanner', 'delaysched http')")
# Proportional set size: each shared page counted once over the processes sharing it.
pss_kb=$(for pid in $(sql postgres -c "SELECT pid FROM pg_stat_activity WHERE backend_type IN ('delaysched scanner', 'delaysched http')"); do
	awk '/^Pss:/ {print $2}' "/proc/$pid/smaps_rollup" 2>/dev/null || true
done | awk '{s += $1} END {print s + 0}')
shmem=$(sql postgres -c "SELECT (SELECT size FROM pg_shmem_allocations WHERE name = 'delaysched databases') / current_setting('delaysched.max_databases')::int")

log "create: CREATE EXTENSION to the first delivery, $rounds times"
# A LISTEN client waits on the new database's channel before the extension
# exists; the time is from just before CREATE EXTENSION to its receipt.
create_times=()
install_times=()
for r in $(seq 1 "$rounds"); do
	sql postgres -c "CREATE DATABASE fresh$r TEMPLATE template0" >/dev/null
	got=$out/first$r.txt
	rm -f "$got"
	(cd /tmp && as_pg_user "$root/test/dslisten" --count 1 --timeout 30 "$(conninfo "fresh$r")" first >"$got") &
	listener=$!
	for i in $(seq 1 300); do grep -q '^listening' "$got" 2>/dev/null && break; sleep 0.01; done
	start_us=$(date +%s%6N)
	sql "fresh$r" -c "CREATE EXTENSION delaysched"
	committed_us=$(date +%s%6N)
	sql "fresh$r" -c "SELECT sched.define_biz('first', channel => 'first')" \
		-c "SELECT sched.add('first', clock_timestamp())" >/dev/null
	wait "$listener"
	recv_us=$(awk -F'\t' 'NR > 1 {print $1; exit}' "$got")
	install_times+=("$(awk -v a="$committed_us" -v b="$start_us" 'BEGIN {printf "%.6f", (a - b) / 1e6}')")
	create_times+=("$(awk -v a="$recv_us" -v b="$committed_us" 'BEGIN {printf "%.6f", (a - b) / 1e6}')")
done

log "drop: DROP DATABASE while 1,000 tasks fall due, $rounds times"
drop_times=()
for r in $(seq 1 "$rounds"); do
	sql "fresh$r" -c "SELECT count(sched.add('first', clock_timestamp() + (i / 100.0) * interval '1 second')) FROM generate_series(1, 1000) i" >/dev/null
	sleep 0.5
	start=$(date +%s.%N)
	sql postgres -c "DROP DATABASE fresh$r"
	drop_times+=("$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN {printf "%.6f", a - b}')")
done

stats() {	# stats VALUE...: median and max
	printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {printf "%.3f %.3f", v[int((NR + 1) / 2)], v[NR]}'
}
read -r create_median create_max <<<"$(stats "${create_times[@]}")"
read -r install_median install_max <<<"$(stats "${install_times[@]}")"
read -r drop_median drop_max <<<"$(stats "${drop_times[@]}")"

{
	printf '%-26s %14s %14s %16s %16s\n' "figure" "1 db, $rate/s" "1 db, $total/s" "1 db, $ndb clients" "$ndb dbs, $rate/s each"
	printf '%-26s %14s %14s %16s %16s\n' "deliveries" "$n1" "$nt" "$nc" "$nn"
	printf '%-26s %14s %14s %16s %16s\n' "lateness p50 ms" "$p50_1" "$p50_t" "$p50_c" "$p50_n"
	printf '%-26s %14s %14s %16s %16s\n' "lateness p99 ms" "$p99_1" "$p99_t" "$p99_c" "$p99_n"
	printf '%-26s %14s %14s %16s %16s\n' "lateness max ms" "$max_1" "$max_t" "$max_c" "$max_n"
	printf '%-26s %14s %14s %16s %16s\n' "server cpu %" "$cpu_1" "$cpu_t" "$cpu_c" "$cpu_n"
	printf '%s %s\n' "p99 of each database (ms):" "$per_db"
	printf '%-36s %s s median, %s s max (%s rounds)\n' "CREATE EXTENSION itself" "$install_median" "$install_max" "$rounds"
	printf '%-36s %s s median, %s s max (%s rounds)\n' "its commit to the first delivery" "$create_median" "$create_max" "$rounds"
	printf '%-36s %s s median, %s s max (%s rounds)\n' "DROP DATABASE, tasks falling due" "$drop_median" "$drop_max" "$rounds"
	printf '%-36s %s processes, %s kB proportional memory (PSS) in all, %s bytes of shared memory each\n' \
		"workers of $ndb databases" "$workers" "$pss_kb" "$shmem"
} | tee "$out/table.txt"
log "bench: results in $out"
