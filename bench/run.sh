#!/usr/bin/env bash
# bench/run.sh: delaysched side by side with what a user would pick instead,
# in one run on this machine, so that every figure is a ratio.
#
#   bash bench/run.sh              delaysched and the raw-SQL baseline (make bench)
#   bash bench/run.sh --compare    also graphile-worker and pg-boss, installed
#                                  from the npm registry (make bench-compare)
#   bash bench/run.sh --smoke      tiny sizes, a few seconds each (CI runs this)
#   bash bench/run.sh --only xmin  only the workloads whose label starts with
#                                  one of the given (comma-separated) prefixes;
#                                  "xmin" is the held-horizon pair, 2 x 10
#                                  minutes per system (make bench-xmin)
#   bash bench/run.sh --systems delaysched,raw   only these systems
#
# Every (system, workload) run gets its own throwaway cluster, started with
# the same default settings and removed afterwards; delaysched is preloaded
# only in the clusters that measure it.  Results go to bench/results/<time>/
# (or $BENCH_OUT): results.csv, the receipts of every delivery, the
# comparison table (comparison.txt and comparison.md) and the plots (SVG).
#
# The systems (see doc/performance.md for why these settings):
#   delaysched           test/bench/dsbench: sched.add, LISTEN, sched.ack_many
#                        (2 workers; bursts also with 1 and with 4)
#   raw                  test/bench/dsbench: DELETE ... SKIP LOCKED + pg_notify loop
#   graphile defaults    pollInterval 2000 ms, concurrency 1
#   graphile fast        pollInterval 100 ms, concurrency 10
#   pg-boss defaults     pollingIntervalSeconds 2, 10 workers x batchSize 100
#   pg-boss fastest      pollingIntervalSeconds 0.5 (its minimum), 10 x 100
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

smoke=""
compare=""
only=""
only_systems=""
while [ $# -gt 0 ]; do
	case $1 in
		--smoke) smoke=1 ;;
		--compare) compare=1 ;;
		--only) [ $# -ge 2 ] || { echo "bench/run.sh: --only needs a list of workloads" >&2; exit 2; }
			only=$2; shift ;;
		--systems) [ $# -ge 2 ] || { echo "bench/run.sh: --systems needs a list of systems" >&2; exit 2; }
			only_systems=$2; shift ;;
		*) echo "usage: bench/run.sh [--smoke] [--compare] [--only WORKLOAD[,...]] [--systems NAME[,...]]" >&2; exit 2 ;;
	esac
	shift
done

PACKAGES="$PACKAGES gnuplot-nox"
ensure_packages
build_and_install "$root"
if [ -n "$compare" ]; then
	command -v node >/dev/null && command -v npm >/dev/null ||
		{ echo "bench: --compare needs Node.js 20 and npm" >&2; exit 1; }
	log "installing graphile-worker and pg-boss (pinned in bench/peers/package.json)"
	(cd "$root/bench/peers" && npm install --no-package-lock --no-audit --no-fund --loglevel=error >/dev/null)
	chmod -R a+rX "$root/bench/peers"
fi

out=${BENCH_OUT:-$root/bench/results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/receipts"
[ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$out"
csv=$out/results.csv
trap stop_throwaway_cluster EXIT

# The workloads: a label, dsbench's arguments (also understood by the peers'
# harness), and which systems run it: "all", or "fast" for delaysched, raw
# and each peer at its fast setting only (pending scale compares a system
# with itself; enqueue does not depend on polling), or "own" for delaysched
# and raw alone (the 500k burst: graphile-worker and pg-boss would need
# 5 to 20 minutes for it, at the rates the 50k burst shows; the neighbour,
# 300,000 tasks of one type due at once and another type due 20 times a
# second beside them, which the raw loop has no types to share; neighbour-keys,
# the same with 200,000 tasks of key A and ten other keys of the same type,
# each due 20 times a second, beside them), or "limit" for
# delaysched alone (a backlog paced by a rate limit: the others have none).
#
# xmin-free and xmin-held are the same steady load for 10 minutes, the
# second beside a session that holds a REPEATABLE READ snapshot open, idle,
# for the whole run (nothing can be vacuumed meanwhile): a held horizon
# must not slow the scan.  Together they take 20 minutes a system, so a full
# run leaves them out unless --only names them ("opt" scope: delaysched and
# raw, when asked for); --smoke runs a few seconds of each.  The type keeps
# the default ack_timeout (30 s), so that lease expiry meets the leases of
# acknowledged tasks as it would in production.
if [ -n "$smoke" ]; then
	workloads=(
		"burst50k|burst --size 500|all"
		"burst500k|burst --size 2000|own"
		"neighbour|neighbour --size 2000 --seconds 2|own"
		"neighbour-keys|neighbour --size 2000 --seconds 2 --keys 10 --rate 200|own"
		"idle|idle --size 10 --seconds 2|all"
		"steady|steady --rate 50 --seconds 2|all"
		"pending|pending --pending 20000 --rate 50 --seconds 2|fast"
		"enqueue|enqueue --seconds 1|fast"
		"enqueue-batch|enqueue --seconds 1 --batch 1000|fast"
		"throttled|burst --size 500 --rate-limit 1000 --burst 100|limit"
		"xmin-free|steady --rate 50 --seconds 3 --ack-timeout 30|own"
		"xmin-held|steady --rate 50 --seconds 3 --ack-timeout 30 --hold snapshot|own")
else
	workloads=(
		"burst50k|burst --size 50000|all"
		"burst500k|burst --size 500000|own"
		"neighbour|neighbour --size 300000|own"
		"neighbour-keys|neighbour --size 200000 --keys 10 --rate 200|own"
		"idle|idle --size 200 --seconds 20|all"
		"steady|steady --rate 500 --seconds 30|all"
		"pending|pending --pending 1000000 --rate 500 --seconds 30|fast"
		"enqueue|enqueue --seconds 10|fast"
		"enqueue-batch|enqueue --seconds 10 --batch 1000|fast"
		"throttled|burst --size 100000 --rate-limit 1000 --burst 100|limit"
		"xmin-free|steady --rate 500 --seconds 600 --ack-timeout 30|opt"
		"xmin-held|steady --rate 500 --seconds 600 --ack-timeout 30 --hold snapshot|opt")
fi

# The systems: name|kind|command|postgresql.conf line, where kind says which
# workloads it joins ("workers": the bursts only).  delaysched runs with its
# default two workers; the bursts also with one and with four.
systems=(
	"delaysched|own|dsbench --system delaysched|"
	"raw|own|dsbench --system raw|"
	"delaysched-1w|workers|dsbench --system delaysched --name delaysched-1w|delaysched.workers = 1"
	"delaysched-4w|workers|dsbench --system delaysched --name delaysched-4w|delaysched.workers = 4")
if [ -n "$compare" ]; then
	systems+=(
		"graphile-defaults|peer|node bench/peers/graphile.mjs --poll 2000 --concurrency 1|"
		"graphile-fast|fast|node bench/peers/graphile.mjs --poll 100 --concurrency 10|"
		"pgboss-defaults|peer|node bench/peers/pgboss.mjs --poll 2 --workers 10 --batch-size 100|"
		"pgboss-fastest|fast|node bench/peers/pgboss.mjs --poll 0.5 --workers 10 --batch-size 100|")
fi

joins() {	# joins SYSTEM_KIND WORKLOAD_SCOPE WORKLOAD_LABEL SYSTEM_NAME
	[ "$1" = workers ] && { [ "${3#burst}" != "$3" ]; return; }
	case $2 in
		all) return 0 ;;
		fast) [ "$1" != peer ] ;;
		own) [ "$1" = own ] ;;
		opt) [ "$1" = own ] && [ -n "$only" ] ;;
		limit) [ "$4" = delaysched ] ;;
	esac
}

run_one() {	# run_one NAME KIND COMMAND CONF LABEL ARGS
	local name=$1 kind=$2 command=$3 conf=$4 label=$5 args=$6 plain="" conn
	[ "${name#delaysched}" != "$name" ] || plain=plain
	start_throwaway_cluster 54332 "$conf" $plain
	if [ "${command%% *}" = dsbench ]; then
		conn=("$(cluster_conninfo)")
		command="$root/test/bench/dsbench ${command#dsbench }"
	else
		conn=(--conn "postgresql://postgres@${CLUSTER_DIR//\//%2F}:$CLUSTER_PORT/postgres")
		command="${command%% *} $root/${command#* }"
	fi
	# Exit status 3: tasks still missing at the deadline.  For a peer that
	# is a result (it fell behind), shown in the comparison; for delaysched
	# and the baseline, as for any other failure, the suite fails.
	local status=0
	# shellcheck disable=SC2086
	(cd /tmp && as_pg_user $command --workload $args --label "$label" --csv "$csv" \
		--receipts "$out/receipts/$label--$name.dat" "${conn[@]}") | tee -a "$out/table.txt" || status=$?
	if [ "$status" -eq 3 ] && [ "$kind" != own ] && [ "$kind" != workers ]; then
		behind="$behind $name/$label"
	elif [ "$status" -ne 0 ]; then
		failed="$failed $name/$label"
	fi
	stop_throwaway_cluster
}

failed=""
behind=""
started=$(date +%s)
"$root/test/bench/dsbench" --header | tee "$out/table.txt"
selected() {	# selected LABEL: is it among the prefixes of --only (or is there none)?
	local prefix
	[ -n "$only" ] || return 0
	for prefix in ${only//,/ }; do
		[ "${1#"$prefix"}" != "$1" ] && return 0
	done
	return 1
}

for w in "${workloads[@]}"; do
	IFS='|' read -r label args scope <<<"$w"
	selected "$label" || continue
	for s in "${systems[@]}"; do
		IFS='|' read -r name kind command conf <<<"$s"
		[ -z "$only_systems" ] || [[ ",$only_systems," == *",$name,"* ]] || continue
		joins "$kind" "$scope" "$label" "$name" || continue
		run_one "$name" "$kind" "$command" "$conf" "$label" "$args"
	done
done
log "all runs took $(( $(date +%s) - started )) s"

bash "$root/bench/report.sh" "$out"
[ -z "$behind" ] || echo "bench: fell behind (not every task arrived in time):$behind"
[ -z "$failed" ] || { echo "bench: failed:$failed" >&2; exit 1; }
