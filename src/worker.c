/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The scanner: a background worker that walks the persisted time
 *		pointer and delivers tasks as they fall due.
 *
 * The worker owns timing; the data work lives in SQL functions of the
 * extension (sched._tick and what it calls, in delaysched--*.sql), so that
 * one short transaction per tick does everything and commits the deliveries
 * together with their NOTIFYs and the advanced pointer.
 *
 * A tick:
 *	 1. takes what backends published in shared memory since the last tick
 *		(the earliest run_at committed), resets it, and marks itself busy;
 *	 2. runs sched._tick(now, batch, sweep, ...) in its own transaction;
 *		"sweep" asks for the backstop work (tasks added behind the pointer,
 *		expired acknowledgement leases, retention) and is set when the sweep
 *		interval has passed, when a commit reported a task behind the
 *		pointer, or when a known lease has expired;
 *	 3. sleeps until the earliest of: the next due task, the next known
 *		lease expiry, the next sweep -- or at once if the tick filled its
 *		batch or a commit during the tick asked for an earlier time.
 *
 * A backend that commits a task due before the worker's wake-up time sets
 * its latch (see wake.c), so a task added for "in 200 ms" is delivered in
 * 200 ms, not at the next sweep.
 *
 * Errors: an ERROR inside a tick ends the worker; the postmaster restarts it
 * after bgw_restart_time (1 s).  The tick's transaction rolls back, so no
 * delivery is half-done, and the persisted pointer resumes the walk.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "guc.h"
#include "shmem.h"
#include "worker.h"

/* How long to wait before looking again for a missing extension. */
#define EXTENSION_RECHECK_MS	10000

/* What one tick reports back. */
typedef struct TickResult
{
	bool		extension_present;
	int64		delivered;
	TimestampTz time_pointer;
	TimestampTz next_due;		/* DT_NOEND if nothing is pending */
	TimestampTz next_sweep;		/* when the next sweep is due at the latest:
								 * the next lease expiry, or now when a
								 * sweep batch was full; DT_NOEND if
								 * nothing asks */
} TickResult;

/*
 * Where the walk's last delivery stopped (see sched._walk): the next tick
 * searches after it.  Dropped when a commit reports a task due at or before
 * it, since the walk would not look there.
 */
typedef struct WalkCursor
{
	bool		valid;
	TimestampTz run_at;
	int64		id;
} WalkCursor;

static SPIPlanPtr tick_plan = NULL;

/*
 * Register the scanner with the postmaster; called from _PG_init.
 */
void
delaysched_register_scanner(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	/* A standby cannot deliver (it cannot write); start on promotion. */
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	/* Come back quickly after an error: tasks are waiting. */
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "delaysched");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "delaysched_scanner_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "delaysched scanner");
	snprintf(worker.bgw_type, BGW_MAXLEN, "delaysched scanner");
	RegisterBackgroundWorker(&worker);
}

static void
set_status(ScannerStatus status)
{
	SpinLockAcquire(&delaysched_shared->mutex);
	delaysched_shared->scanner_status = status;
	SpinLockRelease(&delaysched_shared->mutex);
}

/*
 * before_shmem_exit callback: tell backends nobody is listening any more.
 */
static void
scanner_detach(int code, Datum arg)
{
	SpinLockAcquire(&delaysched_shared->mutex);
	delaysched_shared->scanner_pid = 0;
	delaysched_shared->scanner_latch = NULL;
	delaysched_shared->scanner_status = SCANNER_STOPPED;
	SpinLockRelease(&delaysched_shared->mutex);
}

static void
scanner_attach(void)
{
	SpinLockAcquire(&delaysched_shared->mutex);
	delaysched_shared->scanner_pid = MyProcPid;
	delaysched_shared->scanner_latch = MyLatch;
	delaysched_shared->scanner_status = SCANNER_DELIVERING;
	delaysched_shared->sleep_until = 0;
	delaysched_shared->delivered = 0;
	delaysched_shared->ticks = 0;
	SpinLockRelease(&delaysched_shared->mutex);
	before_shmem_exit(scanner_detach, (Datum) 0);
}

static TimestampTz
nullable_timestamp(HeapTuple tuple, TupleDesc desc, int column, TimestampTz if_null)
{
	bool		isnull;
	Datum		value = SPI_getbinval(tuple, desc, column, &isnull);

	return isnull ? if_null : DatumGetTimestampTz(value);
}

/*
 * Run one tick in its own transaction and fill *result.
 */
static void
run_tick(TimestampTz now, bool sweep, WalkCursor *cursor, TickResult *result)
{
	memset(result, 0, sizeof(*result));
	result->next_due = DT_NOEND;
	result->next_sweep = DT_NOEND;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "delaysched: delivering due tasks");

	result->extension_present = OidIsValid(get_extension_oid("delaysched", true));
	if (result->extension_present)
	{
		Datum		values[7];
		char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
		HeapTuple	tuple;
		TupleDesc	desc;
		bool		isnull;
		int			ret;

		if (tick_plan == NULL)
		{
			Oid			types[7] = {TIMESTAMPTZOID, INT4OID, BOOLOID, INT4OID, INT4OID,
			TIMESTAMPTZOID, INT8OID};
			SPIPlanPtr	plan;

			plan = SPI_prepare("SELECT delivered, time_pointer, next_due, next_sweep,"
							   " cursor_run_at, cursor_id"
							   " FROM sched._tick($1, $2, $3, $4, $5, $6, $7)",
							   7, types);
			if (plan == NULL)
				elog(ERROR, "SPI_prepare failed for sched._tick: %s",
					 SPI_result_code_string(SPI_result));
			if (SPI_keepplan(plan) != 0)
				elog(ERROR, "SPI_keepplan failed for sched._tick");
			tick_plan = plan;
		}

		values[0] = TimestampTzGetDatum(now);
		values[1] = Int32GetDatum(delaysched_batch_size);
		values[2] = BoolGetDatum(sweep);
		values[3] = Int32GetDatum(delaysched_retention_s);
		values[4] = Int32GetDatum(delaysched_dead_retention_s);
		values[5] = TimestampTzGetDatum(cursor->run_at);
		values[6] = Int64GetDatum(cursor->id);
		if (!cursor->valid)
			nulls[5] = nulls[6] = 'n';

		ret = SPI_execute_plan(tick_plan, values, nulls, false, 1);
		if (ret != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "sched._tick returned %d with " UINT64_FORMAT " rows",
				 ret, SPI_processed);

		tuple = SPI_tuptable->vals[0];
		desc = SPI_tuptable->tupdesc;
		result->delivered = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
		result->time_pointer = nullable_timestamp(tuple, desc, 2, DT_NOBEGIN);
		result->next_due = nullable_timestamp(tuple, desc, 3, DT_NOEND);
		result->next_sweep = nullable_timestamp(tuple, desc, 4, DT_NOEND);
		cursor->run_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 5, &isnull));
		cursor->valid = !isnull;
		if (cursor->valid)
			cursor->id = DatumGetInt64(SPI_getbinval(tuple, desc, 6, &isnull));
	}
	else
		cursor->valid = false;

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Entry point of the scanner worker.
 */
void
delaysched_scanner_main(Datum main_arg)
{
	TimestampTz last_sweep = 0;
	TimestampTz next_sweep = DT_NOEND;
	TimestampTz time_pointer = DT_NOBEGIN;
	WalkCursor	cursor = {false, 0, 0};

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	scanner_attach();
	BackgroundWorkerInitializeConnection(delaysched_database, NULL, 0);
	pgstat_report_appname("delaysched scanner");
	/* The extension's internal functions assume only pg_catalog is searched. */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * Do not wait for the WAL flush before the NOTIFYs go out.  A crash can
	 * then forget a delivery that was already sent, which puts the task back
	 * to pending and delivers it again: a duplicate after a crash, which the
	 * at-least-once promise allows, and never a lost task.
	 */
	SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * The tick's statements take the bucket and times as parameters.  Left
	 * to itself the plan cache would keep planning them afresh (a custom
	 * plan prunes the 60 partitions at plan time and looks cheaper than the
	 * generic plan), costing milliseconds per tick; the generic plan prunes
	 * at run time just as well.
	 */
	SetConfigOption("plan_cache_mode", "force_generic_plan", PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * A generic plan over a large partition is estimated at millions of rows,
	 * which would make JIT compile the tick's statements every time: half a
	 * second per tick for a statement that runs in a few milliseconds.
	 */
	SetConfigOption("jit", "off", PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * If a tick ever deadlocks with DDL (DROP EXTENSION locks the partitions
	 * in its own order), let the scanner be the one to give way: it retries
	 * a second later, while the user's command would fail.
	 */
	SetConfigOption("deadlock_timeout", "100ms", PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * The tick relies on READ COMMITTED (a row skipped or changed under it
	 * is re-read, never a serialisation failure) and must write; database
	 * or role defaults must not change that, nor time it out.
	 */
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);

	for (;;)
	{
		TimestampTz now;
		TimestampTz wake_at;
		TimestampTz next;
		TimestampTz sweep_every = (TimestampTz) delaysched_sweep_interval_ms * 1000;
		TickResult	tick;
		bool		sweep;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		SpinLockAcquire(&delaysched_shared->mutex);
		wake_at = delaysched_shared->wake_at;
		delaysched_shared->wake_at = DT_NOEND;
		delaysched_shared->sleep_until = 0;
		delaysched_shared->scanner_status = SCANNER_DELIVERING;
		SpinLockRelease(&delaysched_shared->mutex);

		now = GetCurrentTimestamp();
		/* (now < last_sweep: the clock went back; do not wait it out.) */
		sweep = wake_at < time_pointer ||
			now >= next_sweep ||
			now - last_sweep >= sweep_every ||
			now < last_sweep;

		if (cursor.valid && wake_at <= cursor.run_at)
			cursor.valid = false;

		run_tick(now, sweep, &cursor, &tick);

		if (!tick.extension_present)
		{
			set_status(SCANNER_WAITING_FOR_EXTENSION);
			time_pointer = DT_NOBEGIN;
			next_sweep = DT_NOEND;
			next = TimestampTzPlusMilliseconds(now, EXTENSION_RECHECK_MS);
		}
		else
		{
			time_pointer = tick.time_pointer;
			if (sweep)
			{
				last_sweep = now;
				next_sweep = tick.next_sweep;
			}
			else
				next_sweep = Min(next_sweep, tick.next_sweep);
			next = Min(tick.next_due, next_sweep);
			next = Min(next, last_sweep + sweep_every);
			next = Min(next, now + sweep_every);
		}

		/*
		 * Publish the tick, and decide how long to sleep.  A commit during
		 * the tick may have asked for an earlier time than we computed.
		 */
		SpinLockAcquire(&delaysched_shared->mutex);
		delaysched_shared->last_tick = now;
		delaysched_shared->time_pointer = time_pointer;
		delaysched_shared->delivered += tick.delivered;
		delaysched_shared->ticks++;
		if (delaysched_shared->wake_at < next)
			next = delaysched_shared->wake_at;
		delaysched_shared->sleep_until = next;
		if (tick.extension_present)
			delaysched_shared->scanner_status = SCANNER_SLEEPING;
		SpinLockRelease(&delaysched_shared->mutex);

		now = GetCurrentTimestamp();
		if (next > now)
		{
			/* Round up: waking a little late beats waking early and spinning. */
			long		timeout_ms = (long) ((next - now + 999) / 1000);

			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 timeout_ms,
							 PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
}
