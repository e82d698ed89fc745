/*-------------------------------------------------------------------------
 *
 * worker.c
 *		What every delaysched background worker shares (the scanners of
 *		scanner.c, the HTTP workers of http_worker.c): registration with the
 *		postmaster, the session settings they run with, the check that the
 *		installed extension is the version this library needs, and the
 *		transaction a unit of work runs in, which survives an error.
 *
 * IDENTIFICATION
 *	  src/base/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

#include "compat.h"
#include "base/base.h"
#include "base/shmem.h"

/* How long a worker waits for a lock at most (see delaysched_setup_worker_session). */
#define WORKER_LOCK_TIMEOUT		"500ms"

/*
 * Start a worker's life in the database the launcher started it for
 * (bgw_extra): check that the database is still to be served and no
 * command needs it to itself, make its state this process's (base/shmem.h),
 * take slot "index" with take_slot, and connect.  The cluster's lock is
 * held while the slot is taken, so that the launcher cannot give the entry
 * away meanwhile.  A worker that comes too late -- the database is no
 * longer served, or its slot has a worker already (started by a previous
 * launcher) -- exits quietly.
 */
void
delaysched_join_database(bool (*take_slot) (int index), int index)
{
	DelayschedWorkerArgs args;
	DatabaseEntry *entry;
	bool		joined = false;

	memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof(args));
	if (args.entry < 0 || args.entry >= delaysched_cluster->max_databases)
		proc_exit(0);
	entry = &delaysched_cluster->databases[args.entry];
	LWLockAcquire(delaysched_cluster->lock, LW_SHARED);
	if (pg_atomic_read_u32(&entry->dboid) == args.dboid &&
		entry->want == DATABASE_SERVE && entry->leaving_for == 0)
	{
		delaysched_use_database(args.entry);
		joined = take_slot(index);
	}
	LWLockRelease(delaysched_cluster->lock);
	if (!joined)
		proc_exit(0);
	BackgroundWorkerInitializeConnectionByOid(args.dboid, InvalidOid, 0);
}

/*
 * Is this worker's database still to be served, by its workers, now?  Read
 * without the lock: the launcher sends SIGTERM anyway; this only spares a
 * tick.
 */
bool
delaysched_database_wanted(void)
{
	DatabaseEntry *entry = &delaysched_cluster->databases[delaysched_database_index];

	return entry->want == DATABASE_SERVE && entry->leaving_for == 0 &&
		pg_atomic_read_u32(&entry->dboid) == MyDatabaseId;
}

/*
 * The installed version of the extension in this database, or NULL.  In a
 * transaction.
 */
static char *
installed_version(bool *installed)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	char	   *version = NULL;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("delaysched"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	*installed = HeapTupleIsValid(tuple);
	if (*installed)
	{
		bool		isnull;
		Datum		value = heap_getattr(tuple, Anum_pg_extension_extversion,
										 RelationGetDescr(rel), &isnull);

		if (!isnull)
			version = TextDatumGetCString(value);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

/* Is the extension installed in this database, at any version?  In a transaction. */
bool
delaysched_extension_installed(void)
{
	bool		installed;

	(void) installed_version(&installed);
	return installed;
}

/*
 * Is the extension installed in this database, at the version of its SQL
 * objects that this library was built for?  In a transaction.  A database
 * still at an older version (the new library installed, ALTER EXTENSION
 * delaysched UPDATE not yet run) is left alone: the workers wait, as for
 * an extension not yet created, and the first to notice says so in the log.
 */
bool
delaysched_schema_ready(void)
{
	bool		installed;
	char	   *version = installed_version(&installed);
	bool		ready;
	bool		report = false;

	ready = version != NULL && strcmp(version, DELAYSCHED_SCHEMA_VERSION) == 0;
	if (version != NULL && !ready)
		report = pg_atomic_exchange_u32(&delaysched_shared->old_schema_reported, 1) == 0;
	else if (ready && pg_atomic_read_u32(&delaysched_shared->old_schema_reported) != 0)
		pg_atomic_write_u32(&delaysched_shared->old_schema_reported, 0);
	if (report)
		ereport(LOG,
				(errmsg("delaysched: the extension in database \"%s\" is at version %s, and this server's library needs %s; its workers wait",
						get_database_name(MyDatabaseId), version, DELAYSCHED_SCHEMA_VERSION),
				 errhint("Run ALTER EXTENSION delaysched UPDATE in that database.")));
	return ready;
}

/*
 * Wait DELAYSCHED_ERROR_PAUSE_MS after an error, or less if the latch is set (a
 * SIGTERM, for the HTTP workers, sets it).
 */
static void
pause_after_error(void)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 DELAYSCHED_ERROR_PAUSE_MS, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * In a worker's PG_CATCH: log the error and roll its transaction back, as
 * PostgreSQL's own error recovery does in a backend's main loop, and go on
 * in "context".
 */
void
delaysched_recover_from_error(MemoryContext context)
{
	HOLD_INTERRUPTS();
	MemoryContextSwitchTo(context);
	EmitErrorReport();
	FlushErrorState();
	disable_all_timeouts(false);
	QueryCancelPending = false;
	AbortCurrentTransaction();
	RESUME_INTERRUPTS();
}

/*
 * In a PG_CATCH: is the error being handled a lock that lock_timeout gave
 * up on?  (The error stays in place, to be recovered from or raised again.)
 */
bool
delaysched_caught_lock_timeout(MemoryContext context)
{
	ErrorData  *error;
	bool		lock_timeout;

	MemoryContextSwitchTo(context);
	error = CopyErrorData();
	lock_timeout = error->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE;
	FreeErrorData(error);
	return lock_timeout;
}

/*
 * Register a static background worker of this library, started once
 * recovery has finished and again a second after it ends.
 */
void
delaysched_register_static_worker(const char *function, const char *name)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "delaysched");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker.bgw_name, BGW_MAXLEN, "%s", name);
	snprintf(worker.bgw_type, BGW_MAXLEN, "%s", name);
	RegisterBackgroundWorker(&worker);
}

/*
 * Run "work" in a transaction of its own, with a snapshot, shown in
 * pg_stat_activity as "activity".  Returns false, having done nothing, if
 * the extension is not installed, or having rolled back, if the work raised
 * an error.  (The HTTP workers use it too.)
 *
 * An error does not end the worker, which the postmaster would start again
 * only to meet the same error: a database default that the workers cannot
 * override, a lock that lock_timeout gave up on, a full disk.  It goes to
 * the log, the transaction rolls back (nothing of it happened: every task
 * it touched is as it was), and the worker pauses for a second before it
 * goes on, so that an error that persists costs one line a second and
 * nothing else.
 */
bool
delaysched_run_in_transaction(const char *activity, void (*work) (void *), void *arg)
{
	MemoryContext caller_context = CurrentMemoryContext;
	volatile bool done = false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, activity);

		if (delaysched_schema_ready())
		{
			work(arg);
			done = true;
		}

		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		delaysched_recover_from_error(caller_context);
		done = false;
		pgstat_report_activity(STATE_IDLE, NULL);
		pause_after_error();
		return false;
	}
	PG_END_TRY();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
	return done;
}

/*
 * The settings every delaysched background worker runs with, whatever the
 * server, database or role defaults say.
 */
void
delaysched_setup_worker_session(void)
{
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
	 * The tick's statements take the times and the range as parameters.
	 * Left to itself the plan cache would keep planning some of them afresh
	 * (a custom plan can look cheaper than the generic one, notably for the
	 * searches over the parent table), which costs more than the statement;
	 * the generic plans serve every tick equally well.
	 */
	SetConfigOption("plan_cache_mode", "force_generic_plan", PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * A generic plan is made once and kept until the table's statistics
	 * change.  Made while a partition looks empty (a new install, before
	 * autovacuum has analysed it), it scans the partition whole where an
	 * index was meant, which costs nothing then, and 25 ms per sweep once
	 * 300,000 tasks are due in it.  Every statement of the workers is written
	 * for an index; let the planner take one whatever the statistics say.
	 */
	SetConfigOption("enable_seqscan", "off", PGC_SUSET, PGC_S_OVERRIDE);

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

	/*
	 * No worker waits on a row a user's transaction holds: the statements
	 * skip such rows (SKIP LOCKED) and come back to them.  This is the
	 * backstop for a lock nobody foresaw (a type's row held by an open
	 * drop_biz, say): the statement gives up, the transaction rolls back,
	 * and the worker tries again a second later (see
	 * delaysched_run_in_transaction).  It also bounds how long a worker
	 * that waits on a lock takes to notice a SIGTERM.
	 */
	SetConfigOption("lock_timeout", WORKER_LOCK_TIMEOUT, PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("idle_in_transaction_session_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
}
