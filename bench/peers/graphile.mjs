// bench/peers/graphile.mjs: graphile-worker under the benchmark suite's
// workloads (see harness.mjs for the workloads and what is measured).
//
//   node graphile.mjs --workload W [workload options] [--poll MS]
//        [--concurrency N] --conn URL
//
// Jobs are added through graphile_worker.add_job, or add_jobs (its batch
// form) for bursts and batches, each carrying its due time in microseconds.
// --poll is graphile-worker's pollInterval (default 2000 ms), which bounds
// how late a job scheduled for the future can start; jobs due now are
// announced by NOTIFY.  --concurrency is its concurrency (default 1).
import { run, Logger } from "graphile-worker";
import pg from "pg";
import { parseArgs, runWorkload } from "./harness.mjs";

const args = parseArgs(process.argv.slice(2));
const poll = Number(args.poll ?? 2000);
const concurrency = Number(args.concurrency ?? 1);
const clients = [];
let runner;

await runWorkload({
  name: `graphile/${poll}ms/x${concurrency}`,
  async start(conn, onJob) {
    for (let lane = 0; lane < 2; lane++) {
      clients[lane] = new pg.Client({ connectionString: conn });
      await clients[lane].connect();
    }
    await clients[0].query("DROP SCHEMA IF EXISTS graphile_worker CASCADE");
    runner = await run({
      connectionString: conn,
      concurrency,
      pollInterval: poll,
      noHandleSignals: true,
      logger: new Logger(() => () => {}),
      taskList: { bench: async (payload) => onJob(payload.due) },
    });
  },
  async addOne(due, lane) {
    await clients[lane].query("SELECT graphile_worker.add_job('bench', json_build_object('due', $1::bigint)," +
      " run_at => to_timestamp($1::bigint / 1e6))", [due]);
  },
  async addMany(n, first, step, lane) {
    await clients[lane].query(
      "SELECT count(*) FROM graphile_worker.add_jobs((SELECT array_agg(ROW('bench', json_build_object('due', d), " +
      "NULL, to_timestamp(d / 1e6), NULL, NULL, NULL, NULL)::graphile_worker.job_spec) " +
      "FROM (SELECT $1::bigint + $2::bigint * g AS d FROM generate_series(0, $3::int - 1) g) s))",
      [first, step, n]);
  },
  async stop() {
    await runner.stop();
    for (const client of clients) await client.end();
  },
}, args);
