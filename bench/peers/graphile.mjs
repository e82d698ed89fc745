// bench/peers/graphile.mjs: graphile-worker under the benchmark suite's
// workloads, printing the same row and CSV line as test/bench/dsbench.
//
//   node graphile.mjs --workload burst|idle|steady [--size N] [--rate R]
//        [--seconds S] [--poll MS] [--concurrency N] [--csv FILE] --conn URL
//
// Jobs are added with graphile_worker.add_job (its SQL interface), each
// carrying its due time in microseconds; the task handler timestamps every
// run. Lateness is run time minus due time, on this machine's clock.
import { run, Logger } from "graphile-worker";
import pg from "pg";
import { appendFileSync } from "node:fs";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) =>
    a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs, []));
const workload = args.workload;
const poll = Number(args.poll ?? 2000);
const concurrency = Number(args.concurrency ?? 1);
const system = `graphile/${poll}ms/x${concurrency}`;
const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000);

const defaults = { burst: [50000, 0], idle: [200, 20], steady: [0, 30] };
const size = Number(args.size ?? defaults[workload][0]);
const seconds = Number(args.seconds ?? defaults[workload][1]);
const rate = Number(args.rate ?? 300);
const expected = workload === "steady" ? Math.round(rate * seconds) : size;

const lateness = [];
let first = 0, last = 0, done;
const finished = new Promise((resolve) => { done = resolve; });

const client = new pg.Client({ connectionString: args.conn });
await client.connect();
await client.query("DROP SCHEMA IF EXISTS graphile_worker CASCADE");

const runner = await run({
  connectionString: args.conn,
  concurrency,
  pollInterval: poll,
  noHandleSignals: true,
  logger: new Logger(() => () => {}),
  taskList: {
    bench: async (payload) => {
      const at = nowUs();
      lateness.push(at - payload.due);
      if (!first) first = at;
      last = at;
      if (lateness.length >= expected) done();
    },
  },
});

const addSql = "SELECT graphile_worker.add_job('bench', json_build_object('due', $1::bigint), run_at => to_timestamp($1::bigint / 1e6))";
let enqueuePerS = 0, dueAt = 0;
if (workload === "burst") {
  const t0 = nowUs();
  dueAt = t0 + 5000000 + size * 20;
  // add_jobs: graphile-worker's batch form, one statement for the burst.
  await client.query(
    "SELECT count(*) FROM graphile_worker.add_jobs((SELECT array_agg(ROW('bench', json_build_object('due', $1::bigint), " +
    "NULL, to_timestamp($1::bigint / 1e6), NULL, NULL, NULL, NULL)::graphile_worker.job_spec) FROM generate_series(1, $2::int)))",
    [dueAt, size]);
  const t1 = nowUs();
  enqueuePerS = size / ((t1 - t0) / 1e6);
  // Drain is measured from the due time, or from the end of the insert if
  // that came later (as in dsbench).
  if (t1 > dueAt) dueAt = t1;
} else if (workload === "idle") {
  const start = nowUs() + 1000000;
  for (let i = 0; i < size; i++)
    await client.query(addSql, [start + Math.round(Math.random() * seconds * 1e6)]);
} else {
  const start = nowUs();
  for (let i = 0; i < expected; i++) {
    const when = start + (i * 1e6) / rate;
    const wait = when - nowUs();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait / 1000));
    await client.query(addSql, [nowUs() + 1000000 + Math.round(Math.random() * 4000000)]);
  }
}

const deadline = setTimeout(done, (seconds + 120) * 1000);
await finished;
clearTimeout(deadline);
await runner.stop();
await client.end();

lateness.sort((a, b) => a - b);
const pct = (p) => lateness.length
  ? lateness[Math.min(lateness.length - 1, Math.max(0, Math.ceil(p * lateness.length) - 1))] / 1000 : -1;
const drain = workload === "burst" ? (last - dueAt) / 1e6 : (last - first) / 1e6;
const perS = drain > 0 ? lateness.length / drain : 0;
const row = [system, workload, expected, lateness.length, enqueuePerS.toFixed(0), drain.toFixed(3),
  perS.toFixed(0), pct(0.5).toFixed(2), pct(0.9).toFixed(2), pct(0.99).toFixed(2), pct(1).toFixed(2)];
console.log(`${row[0].padEnd(20)} ${row[1].padEnd(8)} ${String(row[2]).padStart(9)} ${String(row[3]).padStart(9)} ` +
  `${row[4].padStart(11)} ${Number(row[5]).toFixed(2).padStart(8)} ${row[6].padStart(11)} ` +
  `${Number(row[7]).toFixed(1).padStart(9)} ${Number(row[8]).toFixed(1).padStart(9)} ` +
  `${Number(row[9]).toFixed(1).padStart(9)} ${Number(row[10]).toFixed(1).padStart(9)}`);
if (args.csv) appendFileSync(args.csv, row.join(",") + "\n");
if (lateness.length < expected) {
  console.error(`graphile: only ${lateness.length} of ${expected} jobs ran`);
  process.exitCode = 1;
}
