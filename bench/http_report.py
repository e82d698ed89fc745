#!/usr/bin/env python3
"""The analysis of bench/http.sh: one workload's figures, as table rows.

    http_report.py throughput SINK TASKS [HTTP_WORKERS]
    http_report.py latency    SINK TASKS RATE
    http_report.py scheduled  SINK TASKS RATE
    http_report.py hung       SINK TASKS NORMAL_TYPE HUNG_IN_FLIGHT
    http_report.py memory     SAMPLES RSS_BEFORE_KB IN_FLIGHT
    http_report.py fdcap      SAMPLES SINK TASKS CAP REQUEUED DONE_FIRST_TIME
    http_report.py small      RECEIVER_LOG TASKS SUMMARY LABEL

SINK is test/bench/hooksink's log ("arrival_us task_id attempt" per
request); TASKS has "id biz_type run_at_us" per task; SAMPLES has
"in_flight rss_anon_kb open_fds" per sample of the HTTP worker.
RECEIVER_LOG is test/http_receiver.py's (a JSON object per request);
SUMMARY is "tasks done_at_attempt_1 failed_attempts timeouts".
"""
import json
import sys


def rows(path):
    with open(path) as f:
        return [line.split() for line in f if line.strip()]


def pct(values, p):
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(p * len(s) + 0.999999) - 1))
    return s[k]


def show(workload, measure, value):
    print("%-11s %-52s %s" % (workload, measure, value))


def first_arrivals(sink):
    """Arrival (µs) of each task's first request, and the number of requests."""
    first = {}
    n = 0
    for arrival, task, _attempt in rows(sink):
        n += 1
        first.setdefault(task, int(arrival))
    return first, n


def lateness_ms(sink, tasks, biz_type=None):
    first, _ = first_arrivals(sink)
    late = []
    missing = 0
    for task, biz, run_at in rows(tasks):
        if biz_type and biz != biz_type:
            continue
        if task not in first:
            missing += 1
            continue
        late.append((first[task] - int(run_at)) / 1000.0)
    return late, missing


def throughput(sink, tasks, workers="1"):
    first, requests = first_arrivals(sink)
    due = min(int(r[2]) for r in rows(tasks))
    n = len(rows(tasks))
    t0, t1 = min(first.values()), max(first.values())
    label = "throughput" if workers == "1" else "through-%sw" % workers
    show(label, "tasks due at once, HTTP workers", "%d, %s" % (n, workers))
    show(label, "arrived (distinct tasks / requests)", "%d / %d" % (len(first), requests))
    show(label, "webhooks/s, first to last arrival", "%.0f" % (len(first) / max(1e-6, (t1 - t0) / 1e6)))
    show(label, "webhooks/s, due time to last arrival", "%.0f" % (len(first) / max(1e-6, (t1 - due) / 1e6)))
    show(label, "first arrival after the due time, ms", "%.1f" % ((t0 - due) / 1000.0))


def steady_lateness(workload, what, measure, sink, tasks):
    """Rows for tasks falling due at a steady rate: count, percentiles, none early or lost."""
    late, missing = lateness_ms(sink, tasks)
    show(workload, what, len(late) + missing)
    show(workload, measure + " p50 / p99 / max, ms",
         "%.2f / %.2f / %.2f" % (pct(late, 0.5), pct(late, 0.99), max(late)))
    show(workload, "arrived before run_at / never", "%d / %d" % (sum(1 for x in late if x < 0), missing))


def latency(sink, tasks, rate):
    steady_lateness("latency", "tasks added at %s/s, one transaction each" % rate,
                    "commit-to-arrival", sink, tasks)


def scheduled(sink, tasks, rate):
    steady_lateness("scheduled", "tasks scheduled ahead, due at %s/s" % rate,
                    "due-to-arrival", sink, tasks)


def hung(sink, tasks, normal, in_flight):
    late, missing = lateness_ms(sink, tasks, normal)
    label = "beside a hung endpoint" if "beside" in normal else "alone"
    show("hung", "normal requests %s: count, hung in flight" % label, "%d, %s" % (len(late) + missing, in_flight))
    show("hung", "  lateness p50 / p99 / max, ms",
         "%.1f / %.1f / %.1f" % (pct(late, 0.5), pct(late, 0.99), max(late)))


def memory(samples, before, in_flight):
    s = rows(samples)
    peak_in_flight = max(int(r[0]) for r in s)
    peak_rss = max(int(r[1]) for r in s)
    show("memory", "HTTP worker private RSS idle, kB", before)
    show("memory", "peak requests in flight (asked %s)" % in_flight, peak_in_flight)
    show("memory", "peak private RSS, kB (per request in flight)",
         "%d (%.1f)" % (peak_rss, (peak_rss - int(before)) / max(1, peak_in_flight)))


def fdcap(samples, sink, tasks, cap, requeued, done_first):
    s = rows(samples)
    first, requests = first_arrivals(sink)
    n = len(rows(tasks))
    show("fdcap", "ulimit -n 512: the worker's cap", cap)
    show("fdcap", "peak requests in flight / open descriptors",
         "%d / %d" % (max(int(r[0]) for r in s), max(int(r[2]) for r in s)))
    show("fdcap", "tasks / arrived / done on attempt 1", "%d / %d / %s" % (n, len(first), done_first))
    show("fdcap", "requeued for a local failure", requeued)


def small(log, tasks, summary, label):
    with open(log) as f:
        got = [json.loads(line) for line in f if line.strip()]
    due = min(int(r[2]) for r in rows(tasks)) / 1e6
    n, first_attempt, failed, timeouts = summary.split()
    arrivals = [r["t"] for r in got]
    show("small", "%s: tasks, done at attempt 1" % label, "%s, %s" % (n, first_attempt))
    show("small", "  requests / failed attempts / timed out", "%d / %s / %s" % (len(got), failed, timeouts))
    show("small", "  due time to last arrival, s", "%.2f" % (max(arrivals) - due))
    show("small", "  most connections open at once", max(r["connections"] for r in got))


def main():
    workload, args = sys.argv[1], sys.argv[2:]
    {"throughput": throughput, "latency": latency, "scheduled": scheduled, "hung": hung,
     "memory": memory, "fdcap": fdcap, "small": small}[workload](*args)


if __name__ == "__main__":
    main()
