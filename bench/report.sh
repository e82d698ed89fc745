#!/usr/bin/env bash
# bench/report.sh: turn one benchmark run's results into the comparison
# table and the plots.
#
#   bash bench/report.sh DIR      (DIR written by bench/run.sh)
#
# Reads DIR/results.csv and DIR/receipts/<workload>--<system>.dat; writes
#   comparison.txt   one line per workload and system: the headline figure
#                    and delaysched's figure divided by it
#   comparison.md    the same as a Markdown table, for doc/performance.md
#   xmin.txt, xmin.md    a held horizon against none, per system (when the
#                    xmin-free and xmin-held workloads ran): p50, p99, max,
#                    cpu, dead tuples at the end, lost tasks, and held/free
#   lateness-<workload>.svg   lateness CDF per system (idle, steady, pending,
#                    xmin-free, xmin-held)
#   lateness-xmin-time.svg    p99 lateness per 10 s of the xmin runs
#   lateness-neighbour.svg    the neighbour workload: both types' lateness over time
#   rate-<workload>.svg       deliveries per 100 ms after the due time (bursts)
#
# The headline figure is deliveries per second for bursts, enqueued tasks per
# second for enqueue, and lateness p99 (ms) otherwise; "cpu" is the whole
# server's CPU while receiving, in percent of one core.  A run that did not
# receive every task before its deadline is marked "only N of M arrived"
# (its percentiles cover the tasks that did).
set -euo pipefail

dir=${1:?usage: bench/report.sh DIR}
csv=$dir/results.csv

# CSV: system,workload,tasks,received,enqueue/s,drain s,deliver/s,p50,p90,p99,max,cpu,dead
awk -F, -v md="$dir/comparison.md" '
	function metric(label) {
		if (label ~ /^burst/ || label ~ /^neighbour(-keys)?$/) return "deliver/s"
		if (label ~ /^enqueue/) return "enqueue/s"
		return "p99 ms"
	}
	function value(s, label) {
		if (label ~ /^burst/ || label ~ /^neighbour(-keys)?$/) return rate[s, label]
		if (label ~ /^enqueue/) return enq[s, label]
		return p99[s, label]
	}
	function shown(v, label) {
		return (label ~ /^(burst|enqueue)/ || label ~ /^neighbour(-keys)?$/) ? sprintf("%.0f", v) : sprintf("%.1f", v)
	}
	{
		if (!($2 in seen)) { labels[++nl] = $2; seen[$2] = 1 }
		if (!($1 in known)) { systems[++ns] = $1; known[$1] = 1 }
		has[$1, $2] = 1
		rate[$1, $2] = $7; enq[$1, $2] = $5; p50[$1, $2] = $8; p99[$1, $2] = $10; cpu[$1, $2] = $12
		short[$1, $2] = ($2 !~ /^enqueue/ && $4 < $3) ? sprintf("only %d of %d arrived", $4, $3) : ""
	}
	END {
		printf "%-14s %-10s %-24s %12s %9s %7s %22s\n", "workload", "metric", "system", "value", "p50 ms", "cpu %", "delaysched / system"
		printf "| workload | metric |" > md
		for (i = 1; i <= ns; i++) printf " %s |", systems[i] > md
		printf "\n|---|---|" > md
		for (i = 1; i <= ns; i++) printf "---|" > md
		printf "\n" > md
		for (l = 1; l <= nl; l++) {
			label = labels[l]
			mine = value("delaysched", label)
			printf "| %s | %s |", label, metric(label) > md
			for (i = 1; i <= ns; i++) {
				s = systems[i]
				if (!has[s, label]) { printf " |" > md; continue }
				v = value(s, label)
				ratio = (has["delaysched", label] && v > 0 && s != "delaysched") ? sprintf("%.3g", mine / v) : "-"
				printf "%-14s %-10s %-24s %12s %9s %7s %22s %s\n", label, metric(label), s, shown(v, label),
					(label ~ /^(burst|enqueue)/ || label ~ /^neighbour(-keys)?$/) ? "-" : sprintf("%.1f", p50[s, label]),
					(cpu[s, label] >= 0 ? cpu[s, label] : "-"), ratio, short[s, label]
				printf " %s%s%s |", shown(v, label), (ratio != "-" ? " (" ratio "×)" : ""),
					(short[s, label] != "" ? ", " short[s, label] : "") > md
			}
			printf "\n" > md
		}
	}' "$csv" | tee "$dir/comparison.txt"

# A held horizon against none: one line per system that ran both.
if grep -q ',xmin-held,' "$csv"; then
	awk -F, -v md="$dir/xmin.md" '
		$2 == "xmin-free" || $2 == "xmin-held" {
			k = ($2 == "xmin-held") ? "held" : "free"
			if (!($1 in seen)) { order[++n] = $1; seen[$1] = 1 }
			has[$1, k] = 1; p50[$1, k] = $8; p99[$1, k] = $10; mx[$1, k] = $11
			cpu[$1, k] = $12; dead[$1, k] = ($13 == "" ? -1 : $13); lost[$1, k] = $3 - $4
		}
		function ratio(a, b) { return b > 0 ? sprintf("%.2f", a / b) : "-" }
		END {
			printf "%-14s %-5s %8s %8s %8s %6s %9s %5s\n", "system", "run", "p50 ms", "p99 ms", "max ms", "cpu %", "dead", "lost"
			print "| system | run | p50 ms | p99 ms | max ms | cpu % | dead tuples at the end | lost |" > md
			print "|---|---|---|---|---|---|---|---|" > md
			for (i = 1; i <= n; i++) {
				s = order[i]
				for (j = 1; j <= 2; j++) {
					k = (j == 1) ? "free" : "held"
					if (!has[s, k]) continue
					printf "%-14s %-5s %8.1f %8.1f %8.1f %6s %9d %5d\n", s, k, p50[s, k], p99[s, k], mx[s, k], cpu[s, k], dead[s, k], lost[s, k]
					printf "| %s | %s | %.1f | %.1f | %.1f | %s | %d | %d |\n", s, k, p50[s, k], p99[s, k], mx[s, k], cpu[s, k], dead[s, k], lost[s, k] > md
				}
				if (has[s, "free"] && has[s, "held"]) {
					printf "%-14s %-5s %8s %8s %8s %6s\n", s, "h/f", ratio(p50[s, "held"], p50[s, "free"]), ratio(p99[s, "held"], p99[s, "free"]),
						ratio(mx[s, "held"], mx[s, "free"]), ratio(cpu[s, "held"], cpu[s, "free"])
					printf "| %s | held / free | %s× | %s× | %s× | %s× | | |\n", s, ratio(p50[s, "held"], p50[s, "free"]), ratio(p99[s, "held"], p99[s, "free"]),
						ratio(mx[s, "held"], mx[s, "free"]), ratio(cpu[s, "held"], cpu[s, "free"]) > md
				}
			}
		}' "$csv" | tee "$dir/xmin.txt"
fi

# Plots: one line per receipts file of the workload, titled by its system.
# The CDFs round lateness up to 50 steps a decade, which keeps the SVGs small
# and never shows a task earlier than it was.
plot_lines() {	# plot_lines WORKLOAD USING SMOOTH STYLE
	local first=1 f title
	# delaysched first and the raw baseline second, so they keep their colours.
	for f in "$dir/receipts/$1--delaysched.dat" "$dir/receipts/$1--raw.dat" \
		$(ls "$dir/receipts/$1--"*.dat | grep -v -e '--delaysched.dat$' -e '--raw.dat$'); do
		[ -s "$f" ] || continue
		title=$(head -1 "$f" | awk '{ print $2 }')
		[ $first -eq 1 ] || printf ', '
		printf "'%s' using %s smooth %s with %s title '%s'" "$f" "$2" "$3" "$4" "$title"
		first=0
	done
}

command -v gnuplot >/dev/null || { echo "bench: gnuplot not found, no plots" >&2; exit 0; }
# Six colours that stay apart, and the settings every plot shares.
style='set terminal svg size 800,480 dynamic font "sans,12"
set linetype 1 linecolor rgb "#d62728" linewidth 2
set linetype 2 linecolor rgb "#1f77b4" linewidth 2
set linetype 3 linecolor rgb "#2ca02c" linewidth 1.5
set linetype 4 linecolor rgb "#98df8a" linewidth 1.5
set linetype 5 linecolor rgb "#ff7f0e" linewidth 1.5
set linetype 6 linecolor rgb "#ffbb78" linewidth 1.5
set grid'
for w in idle steady pending xmin-free xmin-held; do
	ls "$dir/receipts/$w--"*.dat >/dev/null 2>&1 || continue
	gnuplot <<-GP
		$style
		set output "$dir/lateness-$w.svg"
		set title "Lateness at the consumer, $w workload (CDF; lower and further left is better)"
		set xlabel "lateness (ms, log scale)"
		set ylabel "fraction of tasks delivered"
		set logscale x
		set xrange [0.1:*]
		set yrange [0:1]
		set key bottom right
		plot $(plot_lines "$w" '(10 ** (ceil(log10($2 > 0.1 ? $2 : 0.1) * 50) / 50.0)):(1)' cnormal steps)
	GP
done
for w in burst50k burst500k; do
	ls "$dir/receipts/$w--"*.dat >/dev/null 2>&1 || continue
	gnuplot <<-GP
		$style
		set output "$dir/rate-$w.svg"
		set title "Deliveries per 100 ms after the due time, $w workload"
		set xlabel "seconds after the due time (log scale)"
		set ylabel "tasks delivered in the 100 ms (log scale)"
		set logscale xy
		set xrange [0.1:*]
		set key top right
		plot $(plot_lines "$w" '(floor($1 * 10) / 10.0 + 0.1):(1)' frequency 'points pointtype 7 pointsize 0.5')
	GP
done
# A held horizon over time: p99 lateness of each 10 s of the xmin runs, so
# that a cost growing with the hold shows as a slope.
if ls "$dir/receipts/neighbour--"*.dat >/dev/null 2>&1; then
	series=""
	for f in "$dir/receipts/neighbour--delaysched.dat" "$dir/receipts/neighbour--raw.dat"; do
		[ -s "$f" ] || continue
		name=$(head -1 "$f" | awk '{ print $2 }')
		series="$series${series:+, }'$f' every 500 using 1:2 with points pointtype 7 pointsize 0.3 title '$name: the burst (every 500th)'"
		[ -s "$f.n" ] && series="$series, '$f.n' using 1:2 with linespoints pointtype 7 pointsize 0.6 title '$name: the neighbour'"
	done
	gnuplot <<-GP
		$style
		set output "$dir/lateness-neighbour.svg"
		set title "300,000 tasks of one type due at once, another type due 20 times a second"
		set xlabel "seconds after the burst's due time"
		set ylabel "lateness at the consumer (ms, log scale)"
		set logscale y
		set yrange [0.1:*]
		set key top left
		plot $series
	GP
fi
if ls "$dir/receipts/xmin-"*.dat >/dev/null 2>&1; then
	series=""
	for f in "$dir/receipts/xmin-"*.dat; do
		[ -s "$f" ] || continue
		awk 'NR > 1 { print int($1 / 10), $2 }' "$f" | sort -k1,1n -k2,2g |
			awk 'function flush() { if (k > 0) { r = int(0.99 * k + 0.999999); printf "%d %.3f\n", w * 10 + 5, v[r] } }
				$1 != w { flush(); w = $1; k = 0 }
				{ v[++k] = $2 }
				END { flush() }' >"$f.p99"
		title=$(head -1 "$f" | awk '{ print $2 "/" substr($3, 1, length($3) - 1) }')
		series="$series${series:+, }'$f.p99' using 1:2 with lines title '$title'"
	done
	gnuplot <<-GP
		$style
		set output "$dir/lateness-xmin-time.svg"
		set title "p99 lateness per 10 s, steady 500/s, with and without a held snapshot"
		set xlabel "seconds into the run"
		set ylabel "p99 lateness in the 10 s (ms)"
		set xrange [0:*]
		set yrange [0:*]
		set key top left
		plot $series
	GP
fi
# The rate limiter pacing a backlog: deliveries per 100 ms, linear axes, so
# that a saw (bursts at each second, nothing between) would show.
if [ -s "$dir/receipts/throttled--delaysched.dat" ]; then
	gnuplot <<-GP
		$style
		set output "$dir/rate-throttled.svg"
		set title "Deliveries per 100 ms, a backlog paced by rate_limit 1000/s (burst 100)"
		set xlabel "seconds after the due time"
		set ylabel "tasks delivered in the 100 ms"
		set yrange [0:*]
		set key top right
		plot '$dir/receipts/throttled--delaysched.dat' using (floor(\$1 * 10) / 10.0):(1) smooth frequency with steps title 'delaysched'
	GP
fi
echo "bench: results, table and plots in $dir"
