// bench/peers/pgboss.mjs: pg-boss under the benchmark suite's workloads
// (see harness.mjs for the workloads and what is measured).
//
//   node pgboss.mjs --workload W [workload options] [--poll S] [--workers N]
//        [--batch-size N] --conn URL
//
// Jobs are sent with boss.send (startAfter = the due time), or boss.insert
// (its batch form) for bursts and batches.  pg-boss has no NOTIFY: each
// worker (one boss.work call) fetches up to --batch-size jobs, runs them,
// then waits out the rest of its polling interval (pollingIntervalSeconds,
// default 2, at least 0.5) whether it found jobs or not.  So a queue drains
// at most workers x batch size / interval jobs per second.
import PgBoss from "pg-boss";
import { parseArgs, runWorkload } from "./harness.mjs";
import pg from "pg";

const args = parseArgs(process.argv.slice(2));
const poll = Number(args.poll ?? 2);
const workers = Number(args.workers ?? 1);
const batchSize = Number(args["batch-size"] ?? 1);
// pg-boss keeps milliseconds: round up so that no job is due before its time.
const startAfter = (due) => new Date(Math.ceil(due / 1000));
let boss;

await runWorkload({
  name: `pgboss/${poll * 1000}ms/${workers}x${batchSize}`,
  async start(conn, onJob) {
    const client = new pg.Client({ connectionString: conn });
    await client.connect();
    await client.query("DROP SCHEMA IF EXISTS pgboss CASCADE");
    await client.end();
    boss = new PgBoss({ connectionString: conn });
    boss.on("error", (err) => console.error(`pg-boss: ${err.message}`));
    await boss.start();
    await boss.createQueue("bench");
    for (let i = 0; i < workers; i++)
      await boss.work("bench", { pollingIntervalSeconds: poll, batchSize }, async (jobs) => {
        for (const job of jobs) onJob(job.data.due);
      });
  },
  async addOne(due) {
    await boss.send("bench", { due }, { startAfter: startAfter(due) });
  },
  async addMany(n, first, step) {
    const jobs = [];
    for (let i = 0; i < n; i++) {
      const due = first + i * step;
      jobs.push({ name: "bench", data: { due }, startAfter: startAfter(due) });
    }
    await boss.insert(jobs);
  },
  async stop() {
    await boss.stop({ graceful: false, wait: true });
  },
}, args);
