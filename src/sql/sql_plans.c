/*-------------------------------------------------------------------------
 *
 * sql_plans.c
 *		The statements an SQL worker runs for every job, on the job's own
 *		task partition, prepared once per backend and bucket and kept:
 *		lease a parked job the ready ring named, lock a leased job's row
 *		for its run, and mark it done in the run's transaction.
 *
 * Why here and not in SQL functions.  The same steps written as functions
 * on the partitioned sched.task (sched._sql_claim_one, _sql_begin,
 * _sql_done, which the session workers still call) cost a short job most
 * of its time: a generic plan over the parent locks and initialises all of
 * its partitions at every call, and sched._lease plans its update afresh
 * at every call so as to prune them.  On the leaf, as the scanner's
 * statements are (core/tick_plans.c), a statement descends one primary key
 * index and locks one table.  What the statements do is what those
 * functions do, step for step; a change to one is a change to the other.
 *
 * Every function here runs in the worker's transaction, SPI connected, as
 * the worker, with search_path pg_catalog.  A task is found by its primary
 * key (id, bucket); its state is compared through a sub-select, as in
 * sched._lock, so that no plan reads a partial index whole instead.
 *
 * IDENTIFICATION
 *	  src/sql/sql_plans.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "nodes/parsenodes.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "compat.h"
#include "base/base.h"
#include "core/core.h"
#include "sql/sql.h"

/* The plans of one bucket, made at first use. */
typedef struct SqlBucketPlans
{
	SPIPlanPtr	lock_parked;
	SPIPlanPtr	lease;
	SPIPlanPtr	lock_leased;
	SPIPlanPtr	find_leased;
	SPIPlanPtr	done;
} SqlBucketPlans;

static struct
{
	Oid			extension;
	int			nbuckets;
	SqlBucketPlans *buckets;
	SPIPlanPtr	fired;
} plans;

/*
 * A parked job of an sql type without limits, locked (skipped if another
 * transaction holds it): sched._sql_claim_one's search.  $1 id, $2 bucket.
 */
static const char lock_parked_sql[] =
"SELECT t.run_at, t.biz_type, t.schedule, t.attempt, t.command, t.run_as::oid,"
"       extract(epoch FROM b.timeout)::float8 * 1000, b.timeout"
" FROM sched.%s t JOIN sched.biz b ON b.name = t.biz_type"
" WHERE t.id = $1 AND t.bucket = $2 AND t.state = (SELECT 'r'::\"char\")"
"   AND b.delivery = 'sql' AND NOT b.paused AND NOT b.limited"
" FOR UPDATE OF t SKIP LOCKED";

/*
 * Its lease (the transition of core.h): $1 id, $2 bucket, $3 at, $4 the
 * type's timeout, $5 owner.  Returns the new attempt.
 */
static const char lease_sql[] =
"UPDATE sched.%s t SET "
DELAYSCHED_LEASE("$3", "sched._http_lease($4)", "$5")
" WHERE t.id = $1 AND t.bucket = $2 AND t.state = (SELECT 'r'::\"char\")"
" RETURNING t.attempt";

/*
 * A leased job still this lease's (state 'd', owner $3, attempt $4),
 * locked for the run, or skipped: sched._sql_begin's.  find_leased is the
 * same without the lock, to tell a row held ("held") from one gone.
 */
#define LEASED_JOB \
" FROM sched.%s t" \
" WHERE t.id = $1 AND t.bucket = $2 AND t.state = (SELECT 'd'::\"char\")" \
"   AND t.lease_owner = $3 AND t.attempt = $4"
static const char lock_leased_sql[] = "SELECT" LEASED_JOB " FOR UPDATE SKIP LOCKED";
static const char find_leased_sql[] = "SELECT" LEASED_JOB;

/*
 * The done mark of sched._sql_done: the task to sched.finished as
 * sched._finish moves it (state 'done'), its dedupe key released, and the
 * run in sched.attempt, 'done', or 'stale' if the lease was no longer the
 * run's.  $1 id, $2 bucket, $3 owner, $4 attempt, $5 type, $6 started,
 * $7 duration in ms, $8 rows.  Returns whether the task was done.
 */
static const char done_sql[] =
"WITH gone AS ("
"  DELETE FROM sched.%s t"
"  WHERE t.id = $1 AND t.bucket = $2 AND t.state = (SELECT 'd'::\"char\")"
"    AND t.lease_owner = $3 AND t.attempt = $4"
"  RETURNING t.*"
"), released AS ("
"  DELETE FROM sched.dedupe d USING gone"
"  WHERE d.biz_type = gone.biz_type AND d.dedupe_key = gone.dedupe_key AND d.task_id = gone.id"
"), stored AS ("
"  INSERT INTO sched.finished (id, biz_type, run_at, state, attempt, payload, dedupe_key,"
"                              created_at, delivered_at, finished_at, last_error, schedule,"
"                              command, run_as, run_now, key, priority)"
"  SELECT gone.id, gone.biz_type, gone.run_at, 'done', gone.attempt, gone.payload,"
"         gone.dedupe_key, gone.created_at, gone.delivered_at, pg_catalog.clock_timestamp(),"
"         gone.last_error, gone.schedule, gone.command, gone.run_as, gone.run_now,"
"         gone.key, gone.priority"
"  FROM gone"
"  RETURNING id"
"), counted AS ("
"  SELECT pg_catalog.count(*) > 0 AS done FROM stored"
"), tried AS ("
"  INSERT INTO sched.attempt (task_id, attempt, biz_type, started_at, duration, outcome, rows)"
"  SELECT $1, $4, $5, $6, pg_catalog.make_interval(secs => $7 / 1000.0),"
"         CASE WHEN counted.done THEN 'done' ELSE 'stale' END, $8"
"  FROM counted"
")"
" SELECT counted.done FROM counted";

static void
free_bucket_plans(SqlBucketPlans *bp)
{
	delaysched_free_plan(&bp->lock_parked);
	delaysched_free_plan(&bp->lease);
	delaysched_free_plan(&bp->lock_leased);
	delaysched_free_plan(&bp->find_leased);
	delaysched_free_plan(&bp->done);
}

/* Plans made for another extension object (recreated, perhaps with another bucket count) go. */
static void
prepare_plans(void)
{
	Oid			extension = get_extension_oid("delaysched", false);

	if (plans.extension == extension)
		return;
	if (plans.buckets != NULL)
	{
		for (int b = 0; b < plans.nbuckets; b++)
			free_bucket_plans(&plans.buckets[b]);
		pfree(plans.buckets);
		plans.buckets = NULL;
	}
	delaysched_free_plan(&plans.fired);
	plans.extension = InvalidOid;

	plans.nbuckets = delaysched_read_bucket_count();
	plans.buckets = MemoryContextAllocZero(TopMemoryContext,
										   sizeof(SqlBucketPlans) * plans.nbuckets);
	{
		Oid			types[] = {INT8OID, INT2OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};

		plans.fired = delaysched_prepare_kept(
			"SELECT sched._fired(ARRAY[$1], ARRAY[$2], ARRAY[$3], ARRAY[$4], ARRAY[$5], $6)",
			lengthof(types), types);
	}
	plans.extension = extension;
}

/*
 * A statement on one partition, kept.  Each plan serves a sixtieth of the
 * jobs: left to choose, the plan cache would plan most calls afresh (the
 * first five calls of a plan are custom), where the generic plan serves
 * every call.
 */
static SPIPlanPtr
prepare_leaf(const char *sql, const char *partition, int nargs, Oid *types)
{
	return delaysched_prepare_kept_with(psprintf(sql, partition), nargs, types,
										CURSOR_OPT_GENERIC_PLAN);
}

/* The plans of bucket, made now if not yet. */
static SqlBucketPlans *
bucket_plans(int16 bucket)
{
	SqlBucketPlans *bp;

	prepare_plans();
	if (bucket < 0 || bucket >= plans.nbuckets)
		elog(ERROR, "delaysched: bucket %d out of range", bucket);
	bp = &plans.buckets[bucket];
	if (bp->done == NULL)
	{
		char		partition[NAMEDATALEN];
		Oid			lock_types[] = {INT8OID, INT2OID};
		Oid			lease_types[] = {INT8OID, INT2OID, TIMESTAMPTZOID, INTERVALOID, INT2OID};
		Oid			leased_types[] = {INT8OID, INT2OID, INT2OID, INT4OID};
		Oid			done_types[] = {INT8OID, INT2OID, INT2OID, INT4OID, TEXTOID, TIMESTAMPTZOID,
		FLOAT8OID, INT8OID};

		/* What a preparation that failed half-way left; done is made last. */
		free_bucket_plans(bp);

		/* The partitions' names, as the install script makes them. */
		snprintf(partition, sizeof(partition), "task_%04d", bucket);
		bp->lock_parked = prepare_leaf(lock_parked_sql, partition, lengthof(lock_types), lock_types);
		bp->lease = prepare_leaf(lease_sql, partition, lengthof(lease_types), lease_types);
		bp->lock_leased = prepare_leaf(lock_leased_sql, partition, lengthof(leased_types), leased_types);
		bp->find_leased = prepare_leaf(find_leased_sql, partition, lengthof(leased_types), leased_types);
		bp->done = prepare_leaf(done_sql, partition, lengthof(done_types), done_types);
	}
	return bp;
}

/*
 * Whether sched._fired, for the firing of a schedule being leased, says
 * to leave it (its delivery put off); it makes the schedule's next firing.
 */
static bool
firing_put_off(int64 id, int16 bucket, TimestampTz run_at, Datum biz_type, Datum schedule,
			   TimestampTz now)
{
	Datum		values[6];
	bool		isnull;
	Datum		skipped;

	values[0] = Int64GetDatum(id);
	values[1] = Int16GetDatum(bucket);
	values[2] = TimestampTzGetDatum(run_at);
	values[3] = biz_type;
	values[4] = schedule;
	values[5] = TimestampTzGetDatum(now);
	if (SPI_execute_plan(plans.fired, values, NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "sched._fired failed");
	skipped = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return false;
	return ArrayGetNItems(ARR_NDIM(DatumGetArrayTypeP(skipped)),
						  ARR_DIMS(DatumGetArrayTypeP(skipped))) > 0;
}

/*
 * Lease to owner the job (id, bucket) a scanner named in the ready ring,
 * if it is still parked and its type an sql type not paused, without a
 * rate limit or a concurrency cap (else false: it waits for
 * sched._sql_claim).  A schedule's firing makes its next firing first.
 * The job's strings go to context.
 */
bool
delaysched_sql_lease_parked(int16 owner, int16 bucket, int64 id, SqlJob *job,
							MemoryContext context)
{
	SqlBucketPlans *bp = bucket_plans(bucket);
	TimestampTz now = GetCurrentTimestamp();
	Datum		values[5];
	bool		isnull;
	HeapTuple	row;
	TupleDesc	desc;
	Datum		schedule;
	bool		schedule_null;
	Datum		timeout;

	values[0] = Int64GetDatum(id);
	values[1] = Int16GetDatum(bucket);
	if (SPI_execute_plan(bp->lock_parked, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "delaysched: could not lock a parked SQL job");
	if (SPI_processed == 0)
		return false;
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;

	job->id = id;
	job->bucket = bucket;
	job->run_at = DatumGetTimestampTz(SPI_getbinval(row, desc, 1, &isnull));
	job->biz_type = delaysched_spi_text(row, desc, 2, context);
	job->command = delaysched_spi_text(row, desc, 5, context);
	job->run_as = DatumGetObjectId(SPI_getbinval(row, desc, 6, &isnull));
	if (isnull)
		job->run_as = InvalidOid;
	job->timeout_ms = DatumGetFloat8(SPI_getbinval(row, desc, 7, &isnull));
	timeout = SPI_getbinval(row, desc, 8, &isnull);
	schedule = SPI_getbinval(row, desc, 3, &schedule_null);
	if (!schedule_null && DatumGetInt32(SPI_getbinval(row, desc, 4, &isnull)) == 0)
	{
		/* The first delivery of a firing. */
		Datum		type = CStringGetTextDatum(job->biz_type);

		schedule = PointerGetDatum(DatumGetTextPCopy(schedule));
		if (firing_put_off(id, bucket, job->run_at, type, schedule, now))
			return false;
	}

	values[2] = TimestampTzGetDatum(now);
	values[3] = timeout;
	values[4] = Int16GetDatum(owner);
	if (SPI_execute_plan(bp->lease, values, NULL, false, 1) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "delaysched: could not lease a parked SQL job");
	if (SPI_processed == 0)
		return false;
	job->attempt = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	return true;
}

/*
 * The start of a run, in the run's transaction: lock the job's row if it
 * is still this lease's.  SQL_BEGIN_RUN: locked; SQL_BEGIN_GONE: cancelled,
 * finished or taken back meanwhile; SQL_BEGIN_HELD: another transaction
 * holds the row (a cancellation not committed yet): never wait for it.
 */
SqlBegin
delaysched_sql_lock_leased(const SqlJob *job, int16 owner)
{
	SqlBucketPlans *bp = bucket_plans(job->bucket);
	Datum		values[4];

	values[0] = Int64GetDatum(job->id);
	values[1] = Int16GetDatum(job->bucket);
	values[2] = Int16GetDatum(owner);
	values[3] = Int32GetDatum(job->attempt);
	if (SPI_execute_plan(bp->lock_leased, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "delaysched: could not lock a leased SQL job");
	if (SPI_processed > 0)
		return SQL_BEGIN_RUN;
	if (SPI_execute_plan(bp->find_leased, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "delaysched: could not look for a leased SQL job");
	return SPI_processed > 0 ? SQL_BEGIN_HELD : SQL_BEGIN_GONE;
}

/*
 * The done mark, in the run's transaction, and the run in sched.attempt;
 * false if the lease was no longer the run's (the run is 'stale').  A job
 * done frees a slot of its type's concurrency cap: the drain runs
 * after the commit if a type waits for one.
 */
bool
delaysched_sql_mark_done(const SqlJob *job, int16 owner, const SqlRun *run)
{
	SqlBucketPlans *bp = bucket_plans(job->bucket);
	Datum		values[8];
	bool		isnull;
	bool		done;

	values[0] = Int64GetDatum(job->id);
	values[1] = Int16GetDatum(job->bucket);
	values[2] = Int16GetDatum(owner);
	values[3] = Int32GetDatum(job->attempt);
	values[4] = CStringGetTextDatum(job->biz_type);
	values[5] = TimestampTzGetDatum(run->started);
	values[6] = Float8GetDatum(run->duration_ms);
	values[7] = Int64GetDatum(run->rows);
	if (SPI_execute_plan(bp->done, values, NULL, false, 0) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "delaysched: could not mark an SQL job done");
	done = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (done)
		(void) DirectFunctionCall1(delaysched_wake_drain, BoolGetDatum(true));
	return done;
}

/*
 * The same steps as functions, for the SQL session workers, which run them
 * as the extension's owner (sql_session.c), and for the tests.
 */
PG_FUNCTION_INFO_V1(delaysched_sql_claim_one_sql);
PG_FUNCTION_INFO_V1(delaysched_sql_begin_sql);
PG_FUNCTION_INFO_V1(delaysched_sql_done_sql);

/*
 * sched._sql_claim_one(p_owner smallint, p_bucket smallint, p_id bigint)
 * RETURNS TABLE(id, bucket, biz_type, run_at, attempt, command, run_as,
 * timeout_ms, next_at): the job leased, or no row.
 */
Datum
delaysched_sql_claim_one_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext context = CurrentMemoryContext;
	SqlJob		job;
	bool		leased;

	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	leased = delaysched_sql_lease_parked(PG_GETARG_INT16(0), PG_GETARG_INT16(1), PG_GETARG_INT64(2),
										 &job, context);
	SPI_finish();
	if (leased)
	{
		Datum		values[9];
		bool		nulls[9] = {false};

		values[0] = Int64GetDatum(job.id);
		values[1] = Int16GetDatum(job.bucket);
		values[2] = CStringGetTextDatum(job.biz_type);
		values[3] = TimestampTzGetDatum(job.run_at);
		values[4] = Int32GetDatum(job.attempt);
		values[5] = job.command != NULL ? CStringGetTextDatum(job.command) : (Datum) 0;
		nulls[5] = job.command == NULL;
		values[6] = ObjectIdGetDatum(job.run_as);
		nulls[6] = !OidIsValid(job.run_as);
		values[7] = Float8GetDatum(job.timeout_ms);
		nulls[8] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * sched._sql_begin(p_owner smallint, p_bucket smallint, p_id bigint,
 * p_attempt int) RETURNS text: 'run', 'gone' or 'held'.
 */
Datum
delaysched_sql_begin_sql(PG_FUNCTION_ARGS)
{
	SqlJob		job;
	SqlBegin	begun;

	memset(&job, 0, sizeof(job));
	job.bucket = PG_GETARG_INT16(1);
	job.id = PG_GETARG_INT64(2);
	job.attempt = PG_GETARG_INT32(3);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	begun = delaysched_sql_lock_leased(&job, PG_GETARG_INT16(0));
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(begun == SQL_BEGIN_RUN ? "run" :
									 begun == SQL_BEGIN_HELD ? "held" : "gone"));
}

/*
 * sched._sql_done(p_owner smallint, p_bucket smallint, p_id bigint,
 * p_biz_type text, p_attempt int, p_started timestamptz, p_duration_ms
 * float8, p_rows bigint) RETURNS boolean: whether the job was done (false:
 * the run is recorded as stale).
 */
Datum
delaysched_sql_done_sql(PG_FUNCTION_ARGS)
{
	SqlJob		job;
	SqlRun		run;
	bool		done;

	memset(&job, 0, sizeof(job));
	memset(&run, 0, sizeof(run));
	job.bucket = PG_GETARG_INT16(1);
	job.id = PG_GETARG_INT64(2);
	job.biz_type = text_to_cstring(PG_GETARG_TEXT_PP(3));
	job.attempt = PG_GETARG_INT32(4);
	run.started = PG_GETARG_TIMESTAMPTZ(5);
	run.duration_ms = PG_GETARG_FLOAT8(6);
	run.rows = PG_GETARG_INT64(7);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	done = delaysched_sql_mark_done(&job, PG_GETARG_INT16(0), &run);
	SPI_finish();
	PG_RETURN_BOOL(done);
}
