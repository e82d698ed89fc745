// bench/peers/harness.mjs: the benchmark suite's workloads for the queues
// that run in Node (graphile-worker, pg-boss), measured the way
// test/bench/dsbench measures delaysched and the raw baseline, and printed
// as the same table row and CSV line.
//
// A peer module gives an adapter:
//   name                          the system column, settings included
//   start(conn, onJob)            install, start its workers; onJob(due) on every run
//   addOne(due, lane)             schedule one job due at epoch microseconds `due`
//   addMany(n, first, step, lane) schedule n jobs at once, the i-th due at first + i*step
// `lane` (0 or 1) is the producer: the enqueue workload runs two at once,
// and each must have its own connection.
//   stop()
//
// Every delivery workload starts with a warm-up of 20 jobs that is not
// measured.
//
// Options: --workload burst|idle|steady|pending|enqueue [--size N] [--rate R]
//   [--seconds S] [--pending N] [--batch N] [--label NAME] [--csv FILE]
//   [--receipts FILE] --conn URL, plus the peer's own settings.
import { appendFileSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { execSync } from "node:child_process";
import pg from "pg";

export const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000);
const sleepMs = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i++)
    if (argv[i].startsWith("--")) args[argv[i].slice(2)] = argv[i + 1];
  return args;
}

// CPU seconds used so far by the server: the postmaster with its exited
// children, and its live children, from /proc (as in dsbench).
const clockTicks = Number(execSync("getconf CLK_TCK").toString());
function processTicks(pid, reaped) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // f[0] is field 3 (state): ppid is field 4, utime..cstime fields 14..17.
    const ticks = Number(f[11]) + Number(f[12]) + (reaped ? Number(f[13]) + Number(f[14]) : 0);
    return { ppid: Number(f[1]), ticks };
  } catch {
    return null;
  }
}
function serverCpuSeconds(postmaster) {
  const own = processTicks(postmaster, true);
  if (!own) return -1;
  let ticks = own.ticks;
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!pid || pid === postmaster) continue;
    const p = processTicks(pid, false);
    if (p && p.ppid === postmaster) ticks += p.ticks;
  }
  return ticks / clockTicks;
}

// Run VACUUM or ANALYZE on a connection of its own.
async function analyze(conn, command) {
  const client = new pg.Client({ connectionString: conn });
  await client.connect();
  await client.query(command);
  await client.end();
}

function percentileMs(sorted, p) {
  if (!sorted.length) return -1;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return sorted[rank] / 1000;
}

export async function runWorkload(adapter, args) {
  const workload = args.workload;
  const defaults = { burst: 50000, idle: 200 };
  const size = Number(args.size ?? defaults[workload] ?? 0);
  const seconds = Number(args.seconds ?? (workload === "idle" ? 20 : workload === "enqueue" ? 10 : 30));
  const rate = Number(args.rate ?? 300);
  const pending = Number(args.pending ?? 1000000);
  const batch = Number(args.batch ?? 1);
  const label = args.label ?? workload;

  const client = new pg.Client({ connectionString: args.conn });
  await client.connect();
  const dataDir = (await client.query("SHOW data_directory")).rows[0].data_directory;
  const postmaster = Number(readFileSync(`${dataDir}/postmaster.pid`, "utf8").split("\n")[0]);
  await client.end();

  const at = [], lateness = [];
  let expected = 0, done;
  const finished = new Promise((resolve) => { done = resolve; });
  await adapter.start(args.conn, (due) => {
    const t = nowUs();
    at.push(t);
    lateness.push(t - due);
    if (expected && lateness.length >= expected) done();
  });

  // Warm up as dsbench does: 20 jobs due within a quarter of a second,
  // received before measuring (not for enqueue, which delivers nothing).
  if (workload !== "enqueue") {
    const warm = 20, until = nowUs() + 30e6;
    for (let i = 0; i < warm; i++) await adapter.addOne(nowUs() + 50000 + i * 10000, 0);
    while (lateness.length < warm && nowUs() < until) await sleepMs(10);
    if (lateness.length < warm) throw new Error(`warm-up: only ${lateness.length} of ${warm} jobs ran`);
    at.length = 0;
    lateness.length = 0;
  }

  let enqueuePerS = 0, reference = nowUs(), cpuBefore = -1, cpuFrom = 0, deadline;
  if (workload === "burst") {
    expected = size;
    const t0 = nowUs();
    const due = t0 + 2000000 + size * 20;
    await adapter.addMany(size, due, 0, 0);
    const t1 = nowUs();
    enqueuePerS = size / ((t1 - t0) / 1e6);
    await analyze(args.conn, "ANALYZE");	// as dsbench does: fresh statistics
    // Drain from the due time, or from the end of the insert if later.
    reference = Math.max(due, t1);
    deadline = due + 600e6;
  } else if (workload === "enqueue") {
    cpuBefore = serverCpuSeconds(postmaster);
    cpuFrom = nowUs();
    const end = nowUs() + seconds * 1e6;
    let added = 0;
    const producer = async (lane) => {
      while (nowUs() < end) {
        const due = nowUs() + 86400e6;
        if (batch > 1) await adapter.addMany(batch, due, 0, lane);
        else await adapter.addOne(due, lane);
        added += batch;
      }
    };
    await Promise.all([producer(0), producer(1)]);
    enqueuePerS = added / seconds;
    expected = added;
  } else {
    if (workload === "pending") {
      const from = nowUs() + 600e6, step = Math.floor(86400e6 / Math.max(pending, 1));
      for (let doneCount = 0; doneCount < pending; doneCount += 50000) {
        const n = Math.min(50000, pending - doneCount);
        await adapter.addMany(n, from + doneCount * step, step, 0);
        console.error(`  ... ${doneCount + n} of ${pending} pending jobs added`);
      }
      // What autovacuum would have done by now on a server that ran a while.
      await analyze(args.conn, "VACUUM ANALYZE");
    }
    reference = nowUs();
    cpuBefore = serverCpuSeconds(postmaster);
    cpuFrom = nowUs();
    if (workload === "idle") {
      expected = size;
      const start = nowUs() + 1e6;
      for (let i = 0; i < size; i++) await adapter.addOne(start + Math.round(Math.random() * seconds * 1e6), 0);
    } else {
      expected = Math.round(rate * seconds);
      for (let i = 0; i < expected; i++) {
        const wait = reference + (i * 1e6) / rate - nowUs();
        if (wait > 0) await sleepMs(wait / 1000);
        await adapter.addOne(nowUs() + 1e6 + Math.round(Math.random() * 4e6), 0);
      }
    }
    deadline = reference + (seconds + 60) * 1e6;
  }

  if (workload !== "enqueue") {
    const progress = setInterval(() => {
      if (expected > 1000) console.error(`  ... ${lateness.length} of ${expected} received`);
    }, 1000);
    if (lateness.length < expected) {
      const timer = setTimeout(done, Math.max(0, (deadline - nowUs()) / 1000));
      await finished;
      clearTimeout(timer);
    }
    clearInterval(progress);
  }
  const cpuPct = cpuBefore >= 0 ? (100 * (serverCpuSeconds(postmaster) - cpuBefore)) / ((nowUs() - cpuFrom) / 1e6) : -1;
  await adapter.stop();

  if (args.receipts) {
    const lines = at.map((t, i) => `${((t - reference) / 1e6).toFixed(4)} ${(lateness[i] / 1000).toFixed(3)}`);
    writeFileSync(args.receipts, `# ${adapter.name} ${label}: seconds since reference, lateness ms\n${lines.join("\n")}\n`);
  }
  const received = workload === "enqueue" ? 0 : lateness.length;
  const sorted = [...lateness].sort((a, b) => a - b);
  const last = at.length ? at[at.length - 1] : 0;
  const drain = !at.length ? 0 : workload === "burst" ? (last - reference) / 1e6 : (last - at[0]) / 1e6;
  const perS = drain > 0 ? received / drain : 0;
  const ps = [0.5, 0.9, 0.99, 1].map((p) => percentileMs(sorted, p));
  const cpu = cpuPct >= 0 ? cpuPct.toFixed(0) : "-";
  const row = [adapter.name, label, expected, received, enqueuePerS.toFixed(0), drain.toFixed(3),
    perS.toFixed(0), ...ps.map((v) => v.toFixed(2)), cpuPct >= 0 ? cpuPct.toFixed(0) : "-1"];
  console.log(`${adapter.name.padEnd(24)} ${label.padEnd(13)} ${String(expected).padStart(9)} ` +
    `${String(received).padStart(9)} ${row[4].padStart(11)} ${drain.toFixed(2).padStart(8)} ` +
    `${row[6].padStart(11)} ${ps.map((v) => v.toFixed(1).padStart(9)).join(" ")} ${cpu.padStart(6)}`);
  if (args.csv) appendFileSync(args.csv, row.join(",") + "\n");
  if (workload !== "enqueue" && received < expected) {
    console.error(`${adapter.name}: only ${received} of ${expected} jobs ran before the deadline`);
    process.exitCode = 3;	// fell behind: a result, not a broken run (see bench/run.sh)
  }
}
