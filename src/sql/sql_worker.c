/*-------------------------------------------------------------------------
 *
 * sql_worker.c
 *		The SQL workers: delaysched.sql_workers background workers per
 *		database served, each running one job of an sql business type at a
 *		time, so that a long job holds up neither the scanners nor the
 *		other jobs.
 *
 * How a job gets here.  When a job falls due, the scanner's walk parks it
 * (state 'r', as an http type's task) and its commit wakes these workers
 * (claim_wanted and the latch; sql_signal.c), naming the jobs of types
 * without limits in the ready ring (sql_ready.c).  A worker leases such a
 * job by its key (sql_plans.c), and otherwise searches: it leases
 * one parked job in a short transaction of its own (sched._sql_claim: state
 * 'd', attempt + 1, lease_owner = DELAYSCHED_SQL_OWNER_BASE + its number,
 * for the type's timeout and 30 seconds), the types taken in a random order
 * weighted by their weights, within their rate limits and concurrency caps;
 * a schedule's firing makes its next firing in that transaction.  It runs
 * the job (sql_run.c) in another transaction, which commits the command and
 * the done mark together; a run that failed is recorded in a third
 * (sched._sql_record: retried after a backoff, or dead, or, when
 * sched.cancel stopped it, left to the cancellation).  Then it claims
 * again at once.
 *
 * Leasing ahead.  A run that succeeded leases the next job the ready ring
 * names in its own transaction, after its done mark (lease_ahead), so that
 * the next lease commits with it: jobs due together cost one commit each,
 * not two, and a commit waits for the WAL to reach the disk.  Only after
 * the run: a job leased ahead never waits for the one before it.  If the
 * run rolls back, the lease does too, and the entry is leased on its own.
 *
 * Waiting.  With nothing to run, a worker waits on its latch, which a
 * commit that parked jobs sets, and on postmaster death; at most POLL_MS,
 * or until the next token of a rate-limited type with jobs.  A job whose
 * row another transaction holds (a cancellation not committed yet) is
 * looked at again every HELD_RETRY_MS, up to its timeout, and meanwhile
 * this worker runs nothing else; a failure that cannot be recorded yet for
 * the same reason waits the same way.
 *
 * Starting and stopping.  A worker that starts first takes back the jobs
 * its previous run held (sched._sql_release: their runs rolled back when
 * it died; each attempt counts, so that a job that brings its worker down
 * goes dead after max_attempts).  SIGTERM ends a running command at once
 * (the run rolls back), and the worker exits; the launcher starts it again
 * a second later while its database is served.
 *
 * IDENTIFICATION
 *	  src/sql/sql_worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "base/base.h"
#include "base/guc.h"
#include "base/shmem.h"
#include "sql/sql.h"

/* The longest a worker waits without being woken before it looks for jobs. */
#define POLL_MS				5000
/* How often a job or a failure held up by another transaction is tried again. */
#define HELD_RETRY_MS		100

SqlWorkerSlot *delaysched_sql_my_slot = NULL;

static int	my_index = -1;
static int16 my_owner;
static MemoryContext job_context = NULL;
static MemoryContext next_context = NULL;	/* the job leased ahead's strings */
static SPIPlanPtr claim_plan = NULL;
static SPIPlanPtr release_plan = NULL;
static SPIPlanPtr record_plan = NULL;

/* What a claim transaction is asked, and what it found. */
typedef struct ClaimCall
{
	bool		release;		/* first take back the previous run's jobs */
	const SqlReady *ready;		/* lease this job only (the ready ring), or NULL */
	bool		got;			/* a job was leased: job */
	SqlJob		job;
	TimestampTz next_token;		/* a rate-limited type's next token, or DT_NOEND */
} ClaimCall;

/*
 * The lease of the next job, made in the last run's transaction
 * (lease_ahead): the ready ring's entry it took, and the job if that was
 * still parked.  The job is run next if the run committed; if it did not,
 * the lease went with it and the entry is leased again on its own.
 */
static struct
{
	bool		taken;			/* entry was taken during the last run */
	SqlReady	entry;
	bool		got;			/* job was leased (in the last run's transaction) */
	SqlJob		job;
	bool		retry;			/* lease entry on its own: the run rolled back */
}			ahead;

/* A failed run to record. */
typedef struct RecordCall
{
	const SqlJob *job;
	const SqlRun *run;
	char	   *recorded;		/* the outcome, or "held" */
} RecordCall;

static void
sql_detach(int code, Datum arg)
{
	SqlWorkerSlot *slot = delaysched_sql_my_slot;

	if (slot == NULL)
		return;
	pg_atomic_write_u64(&slot->running, 0);
	LWLockAcquire(delaysched_shared->workers_lock, LW_EXCLUSIVE);
	if (slot->pid == MyProcPid)
	{
		slot->pid = 0;
		slot->latch = NULL;
	}
	LWLockRelease(delaysched_shared->workers_lock);
	delaysched_sql_my_slot = NULL;
}

/* Take SQL slot index of this database (base/worker.c calls it). */
static bool
sql_attach(int index)
{
	SqlWorkerSlot *slot;

	if (index < 0 || index >= delaysched_sql_workers)
		return false;
	slot = &delaysched_shared->sql_workers[index];
	LWLockAcquire(delaysched_shared->workers_lock, LW_EXCLUSIVE);
	if (slot->pid != 0)
	{
		LWLockRelease(delaysched_shared->workers_lock);
		return false;
	}
	slot->pid = MyProcPid;
	slot->latch = MyLatch;
	LWLockRelease(delaysched_shared->workers_lock);

	my_index = index;
	my_owner = (int16) (DELAYSCHED_SQL_OWNER_BASE + index);
	pg_atomic_write_u64(&slot->running, 0);
	pg_atomic_write_u64(&slot->cancel, 0);
	pg_atomic_write_u64(&slot->last_claim, 0);
	pg_atomic_write_u64(&slot->runs, 0);
	pg_atomic_write_u64(&slot->succeeded, 0);
	pg_atomic_write_u32(&slot->claim_wanted, 0);
	delaysched_sql_my_slot = slot;
	before_shmem_exit(sql_detach, (Datum) 0);
	return true;
}

/*
 * A leased job from a row of sched._sql_claim (a row
 * with an id), its strings copied into context.
 */
static void
read_job(HeapTuple tuple, TupleDesc desc, SqlJob *job, MemoryContext context)
{
	bool		isnull;

	job->id = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
	job->bucket = DatumGetInt16(SPI_getbinval(tuple, desc, 2, &isnull));
	job->biz_type = delaysched_spi_text(tuple, desc, 3, context);
	job->run_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 4, &isnull));
	job->attempt = DatumGetInt32(SPI_getbinval(tuple, desc, 5, &isnull));
	job->command = delaysched_spi_text(tuple, desc, 6, context);
	job->run_as = DatumGetObjectId(SPI_getbinval(tuple, desc, 7, &isnull));
	if (isnull)
		job->run_as = InvalidOid;
	job->timeout_ms = DatumGetFloat8(SPI_getbinval(tuple, desc, 8, &isnull));
}

/*
 * In the transaction of a run that succeeded (SqlLeaseNext): lease the
 * next job the ready ring names, so that its lease commits with the run
 * and the job starts without a transaction of its own first.  Only the
 * ring's jobs: the search of sched._sql_claim stays in a transaction
 * of its own.
 */
static void
lease_ahead(void *arg)
{
	if (!delaysched_sql_ready_take(&ahead.entry))
		return;
	ahead.taken = true;
	MemoryContextReset(next_context);
	ahead.got = delaysched_sql_lease_parked(my_owner, ahead.entry.bucket, ahead.entry.id,
											&ahead.job, next_context);
}

/* Drop what the last job left in the session (sql_run.c), in a transaction. */
static void
forget_work(void *arg)
{
	delaysched_sql_forget_session_state();
}

/* The claim's transaction: release (first time), forget what the last job left, lease one. */
static void
claim_work(void *arg)
{
	ClaimCall  *call = (ClaimCall *) arg;
	Datum		values[2];
	bool		isnull;

	delaysched_sql_forget_session_state();
	delaysched_sql_bookkeeping_settings(GUC_ACTION_LOCAL);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (claim_plan == NULL)
	{
		Oid			types[2] = {INT2OID, INT4OID};

		claim_plan = delaysched_prepare_kept(
			"SELECT id, bucket, biz_type, run_at, attempt, command, run_as, timeout_ms, next_at"
			" FROM sched._sql_claim($1, $2)", 2, types);
		release_plan = delaysched_prepare_kept("SELECT sched._sql_release($1)", 1, types);
	}
	values[0] = Int16GetDatum(my_owner);
	if (call->release &&
		SPI_execute_plan(release_plan, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "sched._sql_release failed");

	call->got = false;
	call->next_token = DT_NOEND;
	if (call->ready != NULL)
	{
		call->got = delaysched_sql_lease_parked(my_owner, call->ready->bucket, call->ready->id,
												&call->job, job_context);
		SPI_finish();
		return;
	}
	values[1] = Int32GetDatum(1);
	if (SPI_execute_plan(claim_plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "sched._sql_claim failed");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;

		(void) SPI_getbinval(tuple, desc, 1, &isnull);
		if (isnull)
		{
			/* A limit held a type back: when its next token comes. */
			Datum		next = SPI_getbinval(tuple, desc, 9, &isnull);

			if (!isnull)
				call->next_token = Min(call->next_token, DatumGetTimestampTz(next));
			continue;
		}
		call->got = true;
		read_job(tuple, desc, &call->job, job_context);
	}
	SPI_finish();
}

/* The failure's transaction: sched._sql_record. */
static void
record_work(void *arg)
{
	RecordCall *call = (RecordCall *) arg;
	const SqlJob *job = call->job;
	const SqlRun *run = call->run;
	Datum		values[10];
	char		nulls[10];
	bool		isnull;
	Datum		result;

	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (record_plan == NULL)
	{
		Oid			types[10] = {INT2OID, INT2OID, INT8OID, TEXTOID, INT4OID, TEXTOID, TEXTOID,
		TEXTOID, TIMESTAMPTZOID, FLOAT8OID};

		record_plan = delaysched_prepare_kept(
			"SELECT sched._sql_record($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)", 10, types);
	}
	memset(nulls, ' ', sizeof(nulls));
	values[0] = Int16GetDatum(my_owner);
	values[1] = Int16GetDatum(job->bucket);
	values[2] = Int64GetDatum(job->id);
	values[3] = CStringGetTextDatum(job->biz_type);
	values[4] = Int32GetDatum(job->attempt);
	values[5] = CStringGetTextDatum(run->outcome);
	values[6] = CStringGetTextDatum(run->error);
	values[7] = CStringGetTextDatum(run->sqlstate);
	if (run->sqlstate[0] == '\0')
		nulls[7] = 'n';
	values[8] = TimestampTzGetDatum(run->started);
	if (run->started == 0)
		values[8] = TimestampTzGetDatum(GetCurrentTimestamp());
	values[9] = Float8GetDatum(run->duration_ms);
	if (SPI_execute_plan(record_plan, values, nulls, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "sched._sql_record failed");
	result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	call->recorded = MemoryContextStrdup(job_context, isnull ? "stale" : TextDatumGetCString(result));
	SPI_finish();
}

/* Sleep ms at most on the latch (a SIGTERM ends the wait: die() sets it). */
static void
nap(long ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 Max(ms, 1), PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * Run a job this worker leased, and record a failure.  A job whose row is
 * held is tried again until its timeout has passed (its lease, a timeout
 * and 30 seconds long, then runs out and the sweep takes it back).
 */
static void
run_job(const SqlJob *job)
{
	TimestampTz give_up = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), (int64) job->timeout_ms);
	SqlRun		run;

	bool		session = job->command != NULL && delaysched_sql_needs_session(job->command);

	for (;;)
	{
		if (session)
			delaysched_sql_run_in_session(job, my_owner, &run);
		else
			delaysched_sql_run(job, my_owner, &run, lease_ahead, NULL);
		if (run.end != SQL_RUN_HELD || GetCurrentTimestamp() >= give_up)
			break;
		nap(HELD_RETRY_MS);
	}
	if (ahead.taken && run.end != SQL_RUN_DONE)
	{
		/* The run rolled back, and the next job's lease with it. */
		ahead.got = false;
		ahead.retry = true;
	}
	ahead.taken = false;
	if (run.end == SQL_RUN_DONE)
		pg_atomic_fetch_add_u64(&delaysched_sql_my_slot->succeeded, 1);
	if (run.end == SQL_RUN_DONE || run.end == SQL_RUN_FAILED)
		pg_atomic_fetch_add_u64(&delaysched_sql_my_slot->runs, 1);
	if (run.end != SQL_RUN_FAILED)
		return;

	for (;;)
	{
		RecordCall	call = {job, &run, NULL};

		if (delaysched_run_in_transaction("delaysched: recording an SQL job's run", record_work, &call) &&
			strcmp(call.recorded, "held") != 0)
		{
			if (strcmp(call.recorded, "dead") == 0)
				ereport(LOG,
						(errmsg("delaysched: SQL job " INT64_FORMAT " of business type \"%s\" is dead: %s",
								job->id, job->biz_type, run.error)));
			return;
		}
		if (GetCurrentTimestamp() >= give_up)
			return;				/* the lease runs out; the sweep takes it back */
		nap(HELD_RETRY_MS);
	}
}

void
delaysched_sql_main(Datum main_arg)
{
	bool		released = false;
	bool		want_claim = true;
	TimestampTz next_poll = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	delaysched_join_database(sql_attach, DatumGetInt32(main_arg));
	delaysched_sql_install_cancel_handler();
	pgstat_report_appname("delaysched sql");
	job_context = AllocSetContextCreate(TopMemoryContext, "delaysched SQL job",
										ALLOCSET_DEFAULT_SIZES);
	next_context = AllocSetContextCreate(TopMemoryContext, "delaysched next SQL job",
										 ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		TimestampTz now;
		ClaimCall	call;
		SqlReady	ready;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		/* The launcher stops a database's workers; this spares a claim. */
		if (!delaysched_database_wanted())
			proc_exit(0);

		now = GetCurrentTimestamp();
		if (pg_atomic_exchange_u32(&delaysched_sql_my_slot->claim_wanted, 0) != 0)
			want_claim = true;
		if (!want_claim && now < next_poll)
		{
			nap((long) ((next_poll - now + 999) / 1000));
			continue;
		}

		if (ahead.got)
		{
			/* Leased with the last run's commit: run it now. */
			SqlJob		job = ahead.job;
			MemoryContext strings = next_context;

			want_claim = true;
			if (!delaysched_run_in_transaction("delaysched: starting an SQL job", forget_work, NULL))
			{
				/*
				 * Not now (an error, logged, or the extension being
				 * updated): the job stays leased to this worker, and is run
				 * once the last one's session state is gone, never before.
				 */
				nap(HELD_RETRY_MS);
				continue;
			}
			ahead.got = false;
			next_context = job_context;
			job_context = strings;
			MemoryContextReset(next_context);
			delaysched_write_time(&delaysched_sql_my_slot->last_claim, now);
			run_job(&job);
			continue;
		}

		MemoryContextReset(job_context);
		memset(&call, 0, sizeof(call));
		call.release = !released;
		/* A job a scanner named first: leased by its key, no search. */
		if (ahead.retry)
		{
			ready = ahead.entry;
			ahead.retry = false;
		}
		else if (!released || !delaysched_sql_ready_take(&ready))
			ready.id = 0;
		if (ready.id != 0)
		{
			call.ready = &ready;
			if (delaysched_run_in_transaction("delaysched: leasing an SQL job", claim_work, &call) &&
				call.got)
			{
				delaysched_write_time(&delaysched_sql_my_slot->last_claim, now);
				run_job(&call.job);
			}
			/* Whether or not it was still parked, look again at once. */
			want_claim = true;
			continue;
		}
		if (!delaysched_run_in_transaction("delaysched: claiming SQL jobs", claim_work, &call))
		{
			/* No extension (yet), or an error (logged): look again later. */
			want_claim = false;
			next_poll = TimestampTzPlusMilliseconds(now, POLL_MS);
			continue;
		}
		released = true;
		delaysched_write_time(&delaysched_sql_my_slot->last_claim, now);
		next_poll = Min(TimestampTzPlusMilliseconds(now, POLL_MS), call.next_token);
		/* Ran one: there may be more. */
		want_claim = call.got;
		if (call.got)
			run_job(&call.job);
	}
}
