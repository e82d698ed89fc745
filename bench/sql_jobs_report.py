#!/usr/bin/env python3
"""The analysis of bench/sql_jobs.sh: one line of its table per run.

    sql_jobs_report.py header
    sql_jobs_report.py row LABEL --runs FILE --dues FIRST_US STEP_US COUNT --jobs N [options]

FILE has one line per run a system made, "job start_us due_us": the job's
key (its name, or its command), when the run started (the row its INSERT
wrote, or a start time the system recorded) and the instant it was due
for, in epoch microseconds ("-" if none was found: a run before any due
instant of its job).  The due instants expected are COUNT, from FIRST_US
every STEP_US, for each of N jobs.

    lateness   start - due, of the runs due at an expected instant
    missing    expected (job, instant) pairs that no run was for
    dup        runs beyond the first for the same pair
    stray      runs for no expected instant (shown only when there are some)

Options:
    --cpu SAMPLES COL FROM_US TO_US
                  the server in column COL (1 = first postmaster) of
                  bench/schedules_report.py sample's output: the CPU
                  seconds it used from FROM to TO, and that as % of one core
    --quiet START_US MINUTES
                  also its CPU in the quiet part of each minute: from 5 to
                  45 s after START_US + k minutes, k = 0 .. MINUTES - 1
    --dat FILE    write the lateness in ms, one a line, for the plot
    --check       exit 3 if a run is missing, doubled or stray

The CPU sampling and its interpolation are bench/schedules_report.py's.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from schedules_report import cpu_share, pct, read_samples  # noqa: E402

ROW = "%-50s %6s %8s %7s %4s %8s %8s %8s %7s %7s %8s"
HEADER = ROW % ("run", "runs", "expected", "missing", "dup", "p50 ms", "p99 ms", "max ms",
                "cpu s", "cpu %", "quiet %")
ARITY = {"--runs": 1, "--dues": 3, "--jobs": 1, "--cpu": 4, "--quiet": 2, "--dat": 1}


def read_runs(path):
    """(job, start_us, due_us or None) per line of FILE."""
    runs = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 3:
                continue
            runs.append((parts[0], int(parts[1]), None if parts[2] == "-" else int(parts[2])))
    return runs


def shown(v):
    return "%.1f" % v if v < 100 else "%.0f" % v


def row(args):
    label = args.pop(0)
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    opts = {}
    while args:
        key = args.pop(0)
        n = ARITY.get(key)
        if n is None or len(args) < n:
            sys.exit("sql_jobs_report.py: bad option %s" % key)
        opts[key] = args[:n]
        del args[:n]
    for key in ("--runs", "--dues", "--jobs"):
        if key not in opts:
            sys.exit("sql_jobs_report.py: %s is required" % key)
    runs = read_runs(opts["--runs"][0])
    first, step, count = (int(x) for x in opts["--dues"])
    jobs = int(opts["--jobs"][0])
    dues = {first + k * step for k in range(count)}

    kept = [(job, start, due) for job, start, due in runs if due in dues]
    stray = len(runs) - len(kept)
    pairs = {(job, due) for job, _, due in kept}
    missing = jobs * count - len(pairs)
    dup = len(kept) - len(pairs)
    late = sorted((start - due) / 1000.0 for _, start, due in kept)
    if "--dat" in opts:
        with open(opts["--dat"][0], "w") as f:
            f.writelines("%.3f\n" % v for v in late)

    cpu_s = cpu_pct = quiet = "-"
    if "--cpu" in opts:
        path, col, t_from, t_to = opts["--cpu"]
        samples = read_samples(path)
        col = int(col)
        used, wall = cpu_share(samples, col, int(t_from), int(t_to))
        if wall > 0:
            cpu_s = "%.2f" % (used / 1e9)
            cpu_pct = "%.2f" % (100.0 * used / wall)
        if "--quiet" in opts:
            start, minutes = (int(x) for x in opts["--quiet"])
            q_used = q_wall = 0
            for k in range(minutes):
                base = start + k * 60000000
                u, w = cpu_share(samples, col, base + 5000000, base + 45000000)
                q_used += u
                q_wall += w
            if q_wall > 0:
                quiet = "%.2f" % (100.0 * q_used / q_wall)

    print(ROW % (
        label, len(kept), jobs * count, missing, dup,
        shown(pct(late, 0.50)) if late else "-", shown(pct(late, 0.99)) if late else "-",
        shown(late[-1]) if late else "-", cpu_s, cpu_pct, quiet))
    if stray:
        print("%-50s %d runs for no expected instant" % ("", stray))
    if check and (missing or dup or stray):
        sys.exit(3)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    what, args = sys.argv[1], sys.argv[2:]
    if what == "header":
        print(HEADER)
    elif what == "row" and args:
        row(args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
