#!/usr/bin/env python3
"""bench/load_profile.py: where the time goes in a run of bench/load.sh --profile.

  load_profile.py cpu OUT POSTMASTER_PID
      every half second until killed, append to OUT "time kind seconds":
      the CPU time (user and system) so far of each kind of process: the
      postmaster's children by their title (client backends, delaysched's
      workers, autovacuum, the WAL writer, ...) and pgbench.  A process
      that exited keeps the time it had when last seen.

  load_profile.py report WAITS CPU FROM TO
      what pgbench's sessions waited on while running a statement (WAITS:
      lines "time|wait", one per active pgbench session and sample, and
      one "time|(sample)" a sample), and
      the CPU each kind of process used, both between the times FROM and
      TO (seconds since the epoch).
"""
import os
import re
import sys
import time
from collections import Counter

TICK = os.sysconf("SC_CLK_TCK")


def kind_of(pid, postmaster):
    """The kind of process pid is, or None if it is not one to count."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None, 0
    # the command name may hold spaces: the fields after it start at ") "
    rest = stat[stat.rindex(")") + 2:].split()
    ppid, ticks = int(rest[1]), int(rest[11]) + int(rest[12])
    if cmd.startswith("pgbench"):
        return "pgbench (client)", ticks
    if ppid != postmaster:
        return None, 0
    title = cmd[len("postgres: "):] if cmd.startswith("postgres: ") else cmd
    if re.match(r"\S+ \S+ (\[local\]|\d+\.\d+\.\d+\.\d+)", title):
        return "client backends", ticks
    title = re.sub(r" (of|for|in) .*$", "", title)     # "... scanner 1 of postgres"
    title = re.sub(r"\s+\d+$", "", title)
    return title, ticks


def sample_cpu(out, postmaster):
    seen = {}       # pid -> (kind, ticks when last seen)
    with open(out, "a") as f:
        while True:
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    kind, ticks = kind_of(int(entry), postmaster)
                    if kind:
                        seen[int(entry)] = (kind, ticks)
            totals = Counter()
            for kind, ticks in seen.values():
                totals[kind] += ticks
            now = time.time()
            for kind, ticks in sorted(totals.items()):
                f.write("%.3f\t%s\t%.2f\n" % (now, kind, ticks / TICK))
            f.flush()
            time.sleep(0.5)


def report(waits, cpu, start, end):
    counts = Counter()
    samples = set()
    for line in open(waits):
        parts = line.rstrip("\n").split("|")
        if len(parts) != 2 or not parts[0]:
            continue
        at = float(parts[0])
        if start <= at <= end:
            if parts[1] == "(sample)":
                samples.add(at)
            else:
                counts[parts[1]] += 1
    total = sum(counts.values())
    print("pgbench's sessions running a statement: %.2f on average over %d samples; waiting on:"
          % (total / max(1, len(samples)), len(samples)))
    for wait, n in counts.most_common(12):
        print("  %-32s %5.1f%%" % (wait, 100.0 * n / total))
    first, last = {}, {}
    for line in open(cpu):
        at, kind, secs = line.rstrip("\n").split("\t")
        at, secs = float(at), float(secs)
        if at <= start or kind not in first:
            first[kind] = (at, secs)
        if at <= end:
            last[kind] = (at, secs)
    span = end - start
    print("CPU over the window (%.1f s), in cores:" % span)
    used = sorted(((last[k][1] - first[k][1]) / span, k) for k in last if k in first)
    for share, kind in reversed(used):
        if share >= 0.005:
            print("  %-32s %5.2f" % (kind, share))


if __name__ == "__main__":
    if sys.argv[1] == "cpu":
        sample_cpu(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit(__doc__)
