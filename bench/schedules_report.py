#!/usr/bin/env python3
"""The CPU sampler and the analysis of bench/schedules.sh.

    schedules_report.py sample OUT PID [PID ...]
    schedules_report.py header
    schedules_report.py row LABEL --expected N [options]

sample: until SIGTERM, once a second, append to OUT one line
"time_us cpu_ns cpu_ns ..." with the CPU time so far of each server whose
postmaster PID is given: the postmaster, its live children (read from
/proc/<pid>/schedstat, in nanoseconds) and its reaped children (the
postmaster's cutime + cstime, in clock ticks).  At SIGTERM it also writes
OUT.procs: the CPU each process used while it was sampled, by server, largest
first, so that one sees where the time went.

row: one line of the table.  Options:
    --dslisten FILE      test/dslisten's output: lateness = receipt - run_at
                         (the firing's job is its message's "schedule")
    --cron FILE          "job fired_us due_us" per pg_cron run: lateness =
                         fired - due
    --due FROM_US TO_US  count only firings due in [FROM, TO]
    --intervals          instead of the lateness: each job's intervals between
                         its consecutive firings (receipts, INSERTs) that
                         --due kept, minus one second; for jobs meant to
                         run every second but not on whole seconds
                         (pg_cron's '1 seconds')
    --seconds FROM_US N JOBS
                         the "skip/dbl" column: of the N whole seconds from
                         FROM_US, for each of JOBS jobs, how many had no
                         firing due in them and how many more than one
    --missed N           firings the schedules skipped (sched.schedules)
    --cpu SAMPLES COL FROM_US TO_US
                         the server in column COL (1 = first PID) of the
                         sampler's output: its CPU from FROM to TO, as % of
                         one core and as CPU seconds per minute
    --quiet START_US MINUTES TAIL_S
                         also its CPU in the quiet part of each minute, from
                         second 5 to second 55 (or TAIL_S) after START_US +
                         k minutes, k = 0 .. MINUTES - 1
    --dat FILE           write the lateness (or the intervals - 1 s) in ms, one
                         a line, for the plot
    --check              exit 3 when fewer firings than expected were seen
                         (or, with --seconds, when a second was doubled)
"""
import bisect
import json
import os
import signal
import sys
import time


# ---------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------

TICK_NS = 1000000000 // os.sysconf("SC_CLK_TCK")


def stat_fields(pid):
    """/proc/PID/stat after the command name: field 3 (state) is index 0."""
    with open("/proc/%d/stat" % pid) as f:
        text = f.read()
    return text[text.rindex(")") + 2:].split()


def runtime_ns(pid):
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def sample(out, postmasters):
    first = {}      # (server, pid) -> (cpu ns, command line) when first seen
    last = {}       # (server, pid) -> cpu ns when last seen
    stop = []
    sleeping = []

    def on_term(*_):
        stop.append(1)
        if sleeping:
            raise InterruptedError

    signal.signal(signal.SIGTERM, on_term)
    with open(out, "w") as f:
        while True:
            parents = {}
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        parents[int(entry)] = int(stat_fields(int(entry))[1])
                    except (OSError, ValueError, IndexError):
                        pass
            now = time.time()
            totals = []
            for server, pm in enumerate(postmasters):
                total = 0
                try:
                    fields = stat_fields(pm)
                    reaped = (int(fields[13]) + int(fields[14])) * TICK_NS
                    total += reaped
                    procs = [pm] + [p for p, pp in parents.items() if pp == pm]
                except (OSError, ValueError, IndexError):
                    procs = []
                for pid in procs:
                    try:
                        ns = runtime_ns(pid)
                    except (OSError, ValueError):
                        continue
                    total += ns
                    if (server, pid) not in first:
                        first[(server, pid)] = (ns, cmdline(pid))
                    last[(server, pid)] = ns
                if procs:
                    first.setdefault((server, "reaped"), (reaped, "exited children (postmaster cutime + cstime)"))
                    last[(server, "reaped")] = reaped
                totals.append(total)
            f.write("%d %s\n" % (now * 1e6, " ".join(str(t) for t in totals)))
            f.flush()
            if stop:
                break
            # Sleep to the next whole second; SIGTERM ends the sleep, and
            # one last sample is taken.
            sleeping.append(1)
            try:
                if not stop:
                    time.sleep(1 - time.time() % 1)
            except InterruptedError:
                pass
            sleeping.clear()
    with open(out + ".procs", "w") as f:
        f.write("# CPU while sampled, by process; \"reaped\" also holds the whole CPU of\n"
                "# the processes above that exited meanwhile (their lines and it overlap)\n")
        f.write("server\tpid\tcpu_ms\tprocess\n")
        used = sorted(((server, last[key] - ns0, pid, cmd)
                       for key, (ns0, cmd) in first.items()
                       for server, pid in [key]), key=lambda r: (r[0], -r[1]))
        for server, ns, pid, cmd in used:
            f.write("%d\t%s\t%.1f\t%s\n" % (server + 1, pid, ns / 1e6, cmd))


# ---------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------

def pct(values, p):
    """Nearest-rank percentile of sorted values."""
    if not values:
        return float("nan")
    k = max(0, min(len(values) - 1, int(p * len(values) + 0.999999) - 1))
    return values[k]


def dslisten_firings(path):
    """(job, received_us, due_us) per firing test/dslisten printed."""
    firings = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 4 or parts[1] == "-":
                continue
            received, lateness = int(parts[0]), int(parts[1])
            try:
                job = json.loads(parts[3]).get("schedule")
            except ValueError:
                job = None
            firings.append((job, received, received - lateness))
    return firings


def cron_firings(path):
    """(job, fired_us, due_us) per line "job fired_us due_us"."""
    firings = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 3:
                continue
            firings.append((parts[0], int(parts[1]), int(parts[2])))
    return firings


def intervals_ms(firings):
    """Each job's intervals between consecutive firings, minus 1 s, in ms."""
    by_job = {}
    for job, when, _ in firings:
        by_job.setdefault(job, []).append(when)
    result = []
    for times in by_job.values():
        times.sort()
        result.extend((b - a - 1000000) / 1000.0 for a, b in zip(times, times[1:]))
    return result


def skipped_doubled(firings, start, seconds, jobs):
    """Whole seconds (of jobs x seconds from start) with no firing due, and
    with more than one."""
    counts = {}
    for job, _, due in firings:
        k = (due - start) // 1000000
        if 0 <= k < seconds:
            counts[(job, k)] = counts.get((job, k), 0) + 1
    return jobs * seconds - len(counts), sum(1 for n in counts.values() if n > 1)


def cpu_at(samples, col, t):
    """The server's CPU (ns) at time t (µs), interpolated between samples."""
    times = [s[0] for s in samples]
    i = bisect.bisect_left(times, t)
    if i == 0:
        return samples[0][col]
    if i == len(samples):
        return samples[-1][col]
    (t0, v0), (t1, v1) = (times[i - 1], samples[i - 1][col]), (times[i], samples[i][col])
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1


def cpu_share(samples, col, t_from, t_to):
    """CPU ns used from t_from to t_to (µs), and the wall ns."""
    t_from = max(t_from, samples[0][0])
    t_to = min(t_to, samples[-1][0])
    if t_to <= t_from:
        return 0, 0
    return cpu_at(samples, col, t_to) - cpu_at(samples, col, t_from), (t_to - t_from) * 1000


def read_samples(path):
    with open(path) as f:
        return [[int(x) for x in line.split()] for line in f if line.strip()]


ROW = "%-50s %8s %8s %6s %8s %8s %8s %8s %7s %8s %9s"
HEADER = ROW % (
    "run", "firings", "expected", "missed", "skip/dbl", "p50 ms", "p99 ms", "max ms",
    "cpu %", "cpu s/m", "quiet %")


def row(args):
    label = args.pop(0)
    opts = {}
    flags = {"--check", "--intervals"}
    check = "--check" in args
    by_interval = "--intervals" in args
    args = [a for a in args if a not in flags]
    while args:
        key = args.pop(0)
        n = {"--dslisten": 1, "--cron": 1, "--due": 2, "--missed": 1, "--expected": 1,
             "--cpu": 4, "--quiet": 3, "--dat": 1, "--seconds": 3}.get(key)
        if n is None or len(args) < n:
            sys.exit("schedules_report.py: bad option %s" % key)
        opts[key] = args[:n]
        del args[:n]
    if "--dslisten" in opts:
        firings = dslisten_firings(opts["--dslisten"][0])
    elif "--cron" in opts:
        firings = cron_firings(opts["--cron"][0])
    else:
        firings = []
    if "--due" in opts:
        due_from, due_to = (int(x) for x in opts["--due"])
        firings = [f for f in firings if due_from <= f[2] <= due_to]
    if by_interval:
        late = intervals_ms(firings)
    else:
        late = [(when - due) / 1000.0 for _, when, due in firings]
    late.sort()
    skip_dbl = "-"
    doubled = 0
    if "--seconds" in opts:
        skipped, doubled = skipped_doubled(firings, *(int(x) for x in opts["--seconds"]))
        skip_dbl = "%d/%d" % (skipped, doubled)
    if "--dat" in opts:
        with open(opts["--dat"][0], "w") as f:
            f.writelines("%.3f\n" % v for v in late)
    cpu = cpm = quiet = "-"
    if "--cpu" in opts:
        path, col, t_from, t_to = opts["--cpu"]
        samples = read_samples(path)
        col = int(col)
        used, wall = cpu_share(samples, col, int(t_from), int(t_to))
        if wall > 0:
            cpu = "%.2f" % (100.0 * used / wall)
            cpm = "%.3f" % (60.0 * used / wall)
        if "--quiet" in opts:
            start, minutes, tail = (int(x) for x in opts["--quiet"])
            q_used = q_wall = 0
            for k in range(minutes):
                base = start + k * 60000000
                u, w = cpu_share(samples, col, base + 5000000, base + min(55, tail) * 1000000)
                q_used += u
                q_wall += w
            if q_wall > 0:
                quiet = "%.2f" % (100.0 * q_used / q_wall)
    fmt = lambda v: "%.1f" % v if v < 100 else "%.0f" % v
    print(ROW % (
        label, len(firings), opts.get("--expected", ["-"])[0], opts.get("--missed", ["-"])[0],
        skip_dbl, fmt(pct(late, 0.50)) if late else "-", fmt(pct(late, 0.99)) if late else "-",
        fmt(late[-1]) if late else "-", cpu, cpm, quiet))
    if check and (len(firings) < int(opts["--expected"][0]) or doubled):
        sys.exit(3)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    what, args = sys.argv[1], sys.argv[2:]
    if what == "sample" and len(args) >= 2:
        sample(args[0], [int(p) for p in args[1:]])
    elif what == "header":
        print(HEADER)
    elif what == "row" and args:
        row(args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
