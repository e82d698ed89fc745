#!/usr/bin/env bash
# bench/run.sh: delaysched beside the raw-SQL baseline, in one run on one
# throwaway cluster, so that every figure is a ratio.
#
#   bash bench/run.sh            the full workloads (a few minutes)
#   bash bench/run.sh --smoke    tiny sizes, a few seconds each (CI runs this)
#
# Each workload is one run of test/bench/dsbench (see its header for what it
# measures); results are appended to a CSV and summarised as ratios at the end.
# graphile-worker and pg-boss are not in this version of the suite yet.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"

smoke=""
[ "${1:-}" = "--smoke" ] && smoke=1

ensure_packages
build_and_install "$root"
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
for w in "${workloads[@]}"; do
	for system in delaysched raw; do
		# shellcheck disable=SC2086
		dsbench --system "$system" --workload $w
	done
done

# Ratios delaysched / raw per workload: delivery rate, p99 lateness, enqueue rate.
echo
awk -F, '
	{ key = $2; sys = $1; rate[sys, key] = $7; p99[sys, key] = $10; enq[sys, key] = $5; got[sys, key] = $4; want[sys, key] = $3; seen[key] = 1 }
	END {
		printf "%-8s %22s %22s %22s\n", "workload", "deliver/s (ds/raw)", "p99 ms (ds/raw)", "enqueue/s (ds/raw)"
		for (k in seen) {
			printf "%-8s %22s %22s %22s\n", k,
				(rate["raw", k] > 0 ? sprintf("%.2f", rate["delaysched", k] / rate["raw", k]) : "-"),
				(p99["raw", k] > 0 ? sprintf("%.2f", p99["delaysched", k] / p99["raw", k]) : "-"),
				(enq["raw", k] > 0 ? sprintf("%.2f", enq["delaysched", k] / enq["raw", k]) : "-")
			if (k != "enqueue" && (got["delaysched", k] < want["delaysched", k] || got["raw", k] < want["raw", k]))
				lost = 1
		}
		if (lost) { print "bench: some tasks did not arrive" > "/dev/stderr"; exit 1 }
	}' "$csv"
