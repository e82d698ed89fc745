#!/usr/bin/env bash
# bench/run.sh: delaysched beside the raw-SQL baseline, in one run on one
# throwaway cluster, so that every figure is a ratio.
#
#   bash bench/run.sh              delaysched and the raw baseline (a few minutes)
#   bash bench/run.sh --compare    also graphile-worker, installed from npm
#   bash bench/run.sh --smoke      tiny sizes, a few seconds each (CI runs this)
#
# Each workload is one run of test/bench/dsbench (see its header for what it
# measures) or of bench/peers/graphile.mjs for graphile-worker, at its
# defaults (poll 2000 ms, concurrency 1) and at poll 100 ms, concurrency 10.
# Results are appended to a CSV and summarised as ratios at the end.
# pg-boss is not in this version of the suite yet.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

smoke=""
compare=""
for arg in "$@"; do
	case $arg in
		--smoke) smoke=1 ;;
		--compare) compare=1 ;;
		*) echo "usage: bench/run.sh [--smoke] [--compare]" >&2; exit 2 ;;
	esac
done

ensure_packages
build_and_install "$root"
if [ -n "$compare" ]; then
	log "installing graphile-worker (pinned in bench/peers/package.json)"
	(cd "$root/bench/peers" && npm install --no-package-lock --no-audit --no-fund --loglevel=error >/dev/null)
	chmod -R a+rX "$root/bench/peers"
fi
trap stop_throwaway_cluster EXIT
start_throwaway_cluster 54332
csv=$CLUSTER_DIR/results.csv

dsbench() {
	as_pg_user "$root/test/bench/dsbench" --csv "$csv" "$@" "$(cluster_conninfo)"
}

if [ -n "$smoke" ]; then
	workloads=("burst --size 500" "idle --size 10 --seconds 2" "steady --rate 50 --seconds 2" "enqueue --seconds 1")
else
	workloads=("burst --size 50000" "idle --size 200 --seconds 20" "steady --rate 300 --seconds 30" "enqueue --seconds 10")
fi

"$root/test/bench/dsbench" --header
graphile() {
	local url="postgresql://postgres@${CLUSTER_DIR//\//%2F}:$CLUSTER_PORT/postgres"
	as_pg_user node "$root/bench/peers/graphile.mjs" --csv "$csv" --conn "$url" "$@"
}

for w in "${workloads[@]}"; do
	for system in delaysched raw; do
		# shellcheck disable=SC2086
		dsbench --system "$system" --workload $w
	done
	if [ -n "$compare" ] && [ "${w%% *}" != "enqueue" ]; then
		# shellcheck disable=SC2086
		graphile --workload $w --poll 2000 --concurrency 1
		# shellcheck disable=SC2086
		graphile --workload $w --poll 100 --concurrency 10
	fi
done

# Ratios of delaysched to every other system, per workload.
awk -F, '
	{ sys = $1; key = $2; rate[sys, key] = $7; p99[sys, key] = $10; enq[sys, key] = $5
	  got[sys, key] = $4; want[sys, key] = $3; seen[key] = 1; systems[sys] = 1 }
	END {
		printf "%-8s %-22s %16s %16s %16s\n", "workload", "delaysched vs", "deliver/s ratio", "p99 ratio", "enqueue/s ratio"
		for (k in seen) {
			for (s in systems) {
				if (s == "delaysched" || !((s, k) in got)) continue
				printf "%-8s %-22s %16s %16s %16s\n", k, s,
					(rate[s, k] > 0 ? sprintf("%.2f", rate["delaysched", k] / rate[s, k]) : "-"),
					(p99[s, k] > 0 ? sprintf("%.2f", p99["delaysched", k] / p99[s, k]) : "-"),
					(enq[s, k] > 0 ? sprintf("%.2f", enq["delaysched", k] / enq[s, k]) : "-")
			}
			for (s in systems)
				if (k != "enqueue" && ((s, k) in got) && got[s, k] < want[s, k])
					lost = 1
		}
		if (lost) { print "bench: some tasks did not arrive" > "/dev/stderr"; exit 1 }
	}' "$csv"
