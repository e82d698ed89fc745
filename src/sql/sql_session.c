/*-------------------------------------------------------------------------
 *
 * sql_session.c
 *		Jobs that must be a session's statement of their own: a CALL of a
 *		procedure that may COMMIT or ROLLBACK inside, and VACUUM.  An SQL
 *		worker runs them in a session worker, a background worker started
 *		for that one job and connected as the job's role.
 *
 * Why a session.  An SQL worker runs a job as a SECURITY DEFINER function
 * would (sql_run.c): its role switched inside the worker's transaction,
 * which the job therefore cannot end.  A procedure that commits, or
 * VACUUM, needs a top-level statement, and after a COMMIT or ROLLBACK the
 * transaction that follows must still belong to the job's role -- which
 * only a session of that role can promise: PostgreSQL restores, at an
 * abort, the user the transaction started with.  So the session worker
 * connects as the role (its session user: SET ROLE and SET SESSION
 * AUTHORIZATION are checked as in any session of it; its role settings
 * apply), runs the command as a top-level statement, as a client's simple
 * query would, and exits.  On PostgreSQL 15 the role must be able to log
 * in; from 17, background workers may connect as any role.
 *
 * The guarantee.  The command's transactions are its own: what a
 * procedure commits stays.  The job's done mark commits with the last of
 * them; a failure (an error, the timeout, a cancellation, a crash) after a
 * COMMIT leaves the committed part, and the job runs again: at least once,
 * as for any task.  A command that does not commit inside (a procedure
 * without COMMIT, VACUUM of nothing) is still done exactly once.
 *
 * The bookkeeping (sched._sql_begin, the command, sched._sql_done) runs as
 * the extension's owner for those statements only, switched inside the
 * transaction as a SECURITY DEFINER function is.  The session worker
 * reports how the run ended into its SQL worker's slot (SqlSessionReport,
 * base/shmem.h) and exits; the SQL worker, which waited for it (passing a
 * sched.cancel on as a SIGINT), records a failure as for any run.
 *
 * IDENTIFICATION
 *	  src/sql/sql_session.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/dest.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

#include "compat.h"
#include "base/base.h"
#include "base/shmem.h"
#include "sql/sql.h"

/* How often the SQL worker looks at its session worker while waiting. */
#define SESSION_POLL_MS		100

/* What the SQL worker tells the session worker it starts (bgw_extra). */
typedef struct SessionArgs
{
	Oid			dboid;
	Oid			role;
	int32		entry;			/* the database's entry (base/shmem.h) */
	int32		slot;			/* the SQL worker's slot in it */
	int64		id;
	int32		attempt;
	int16		bucket;
	int16		owner;			/* the lease's owner: the SQL worker's */
	double		timeout_ms;
	char		biz_type[NAMEDATALEN];
} SessionArgs;

StaticAssertDecl(sizeof(SessionArgs) <= BGW_EXTRALEN, "SessionArgs must fit in bgw_extra");

/*
 * Does command need a session of its own: one statement, a CALL (its
 * procedure may end the transaction) or one that PostgreSQL runs only
 * outside a transaction block (VACUUM, CREATE or DROP INDEX CONCURRENTLY,
 * REINDEX, CREATE or DROP DATABASE or TABLESPACE, ALTER SYSTEM), told by
 * its parse tree, as PostgreSQL's utility code tells them.  Several
 * statements run together in one transaction, as a client's multi-statement
 * query would.
 */
bool
delaysched_sql_needs_session(const char *command)
{
	List	   *statements;
	Node	   *stmt;

	PG_TRY();
	{
		statements = raw_parser(command, RAW_PARSE_DEFAULT);
	}
	PG_CATCH();
	{
		/* The run will report the syntax error as the job's. */
		FlushErrorState();
		return false;
	}
	PG_END_TRY();
	if (list_length(statements) != 1)
		return false;
	stmt = linitial_node(RawStmt, statements)->stmt;
	switch (nodeTag(stmt))
	{
		case T_CallStmt:
		case T_VacuumStmt:
		case T_ReindexStmt:
		case T_CreatedbStmt:
		case T_DropdbStmt:
		case T_CreateTableSpaceStmt:
		case T_DropTableSpaceStmt:
		case T_AlterSystemStmt:
			return true;
		case T_IndexStmt:
			return ((IndexStmt *) stmt)->concurrent;
		case T_DropStmt:
			return ((DropStmt *) stmt)->concurrent;
		default:
			return false;
	}
}

/* The session worker's report, in its SQL worker's slot. */
static SqlSessionReport *
report_of(const SessionArgs *args)
{
	return &delaysched_database_area(args->entry)->sql_workers[args->slot].report;
}

/* Say how the run ended, and let the SQL worker read it. */
static void
put_report(SqlSessionReport *report, SqlRunEnd end, const char *outcome, const char *sqlstate,
		   const char *error, int64 rows, TimestampTz started, double duration_ms)
{
	strlcpy(report->outcome, outcome != NULL ? outcome : "", sizeof(report->outcome));
	strlcpy(report->sqlstate, sqlstate != NULL ? sqlstate : "", sizeof(report->sqlstate));
	strlcpy(report->error, error != NULL ? error : "", sizeof(report->error));
	report->rows = rows;
	report->started = started;
	report->duration_ms = duration_ms;
	pg_write_barrier();
	pg_atomic_write_u32(&report->state, (uint32) end + 1);
}

/*
 * Run one statement as a client's simple query would: top-level, so that a
 * procedure may commit and VACUUM may run.  Its parse tree and plan live in
 * a context of the process, since the statement may end the transaction
 * it started in.  Returns the rows it processed.
 */
static int64
run_top_level(const char *command)
{
	MemoryContext statement_context = AllocSetContextCreate(TopMemoryContext, "delaysched session statement",
															ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(statement_context);
	RawStmt    *parsetree = linitial_node(RawStmt, pg_parse_query(command));
	bool		snapshot = analyze_requires_snapshot(parsetree);
	List	   *plans;
	Portal		portal;
	DestReceiver *receiver;
	QueryCompletion qc;

	if (snapshot)
		PushActiveSnapshot(GetTransactionSnapshot());
	plans = pg_plan_queries(pg_analyze_and_rewrite_fixedparams(parsetree, command, NULL, 0, NULL),
							command, CURSOR_OPT_PARALLEL_OK, NULL);
	if (snapshot)
		PopActiveSnapshot();

	portal = CreatePortal("", true, true);
	portal->visible = false;
	PortalDefineQuery(portal, NULL, command, CreateCommandTag(parsetree->stmt), plans, NULL);
	PortalStart(portal, NULL, 0, InvalidSnapshot);
	receiver = CreateDestReceiver(DestNone);
	InitializeQueryCompletion(&qc);
	(void) delaysched_portal_run(portal, FETCH_ALL, true, receiver, receiver, &qc);
	receiver->rDestroy(receiver);
	PortalDrop(portal, false);
	MemoryContextSwitchTo(old);
	return (int64) qc.nprocessed;
}

/*
 * As the extension's owner, the bookkeeping statement sql with its nargs
 * parameters; its one result as text, or NULL.  Inside the current
 * transaction, with a snapshot of its own; the user is the job's role
 * again after it.
 */
static char *
as_owner(Oid owner, const char *sql, int nargs, Oid *types, Datum *values)
{
	Oid			role;
	int			context;
	char	   *result = NULL;
	int			nest;

	GetUserIdAndSecContext(&role, &context);
	SetUserIdAndSecContext(owner, context | SECURITY_LOCAL_USERID_CHANGE);
	nest = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql, nargs, types, values, NULL, false, 1) < 0)
		elog(ERROR, "a session worker's statement failed: %s", sql);
	if (SPI_processed > 0)
	{
		char	   *value = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (value != NULL)
			result = MemoryContextStrdup(TopMemoryContext, value);
	}
	SPI_finish();
	PopActiveSnapshot();
	AtEOXact_GUC(false, nest);
	SetUserIdAndSecContext(role, context);
	return result;
}

/* The session worker: one job, then exit. */
void
delaysched_sql_session_main(Datum main_arg)
{
	SessionArgs args;
	SqlSessionReport *report;
	MemoryContext caller;
	Oid			owner = InvalidOid;
	TimestampTz started = 0;
	volatile bool began = false;

	memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof(args));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	if (args.entry < 0 || args.entry >= delaysched_cluster->max_databases ||
		args.slot < 0 || args.slot >= DELAYSCHED_MAX_SQL_WORKERS)
		proc_exit(0);
	report = report_of(&args);
	BackgroundWorkerInitializeConnectionByOid(args.dboid, args.role, DELAYSCHED_BGW_ANY_ROLE);
	pgstat_report_appname("delaysched sql session");
	caller = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		char	   *begun;
		char	   *command;
		int64		rows;
		char	   *done;
		Oid			types[8] = {INT2OID, INT2OID, INT8OID, INT4OID, TEXTOID, TIMESTAMPTZOID, FLOAT8OID, INT8OID};
		Datum		values[8];

		PushActiveSnapshot(GetTransactionSnapshot());
		owner = delaysched_extension_owner();
		PopActiveSnapshot();
		values[0] = Int16GetDatum(args.owner);
		values[1] = Int16GetDatum(args.bucket);
		values[2] = Int64GetDatum(args.id);
		values[3] = Int32GetDatum(args.attempt);
		begun = as_owner(owner, "SELECT sched._sql_begin($1, $2, $3, $4)", 4, types, values);
		if (begun == NULL || strcmp(begun, "run") != 0)
		{
			CommitTransactionCommand();
			put_report(report, begun != NULL && strcmp(begun, "held") == 0 ? SQL_RUN_HELD : SQL_RUN_GONE,
					   NULL, NULL, NULL, 0, 0, 0);
			proc_exit(0);
		}
		command = as_owner(owner,
						   "SELECT t.command FROM sched.task t WHERE t.bucket = $2 AND t.id = $3"
						   " AND t.lease_owner = $1 AND t.attempt = $4",
						   4, types, values);
		if (command == NULL)
			elog(ERROR, "the job has no command");

		began = true;
		started = GetCurrentTimestamp();
		pgstat_report_activity(STATE_RUNNING, command);
		debug_query_string = command;
		enable_timeout_after(STATEMENT_TIMEOUT, (int) Max(1, args.timeout_ms));
		rows = run_top_level(command);
		disable_timeout(STATEMENT_TIMEOUT, false);

		/* The done mark, with the last of the command's transactions. */
		CommandCounterIncrement();
		values[4] = CStringGetTextDatum(args.biz_type);
		values[5] = TimestampTzGetDatum(started);
		values[6] = Float8GetDatum((double) (GetCurrentTimestamp() - started) / 1000.0);
		values[7] = Int64GetDatum(rows);
		done = as_owner(owner, "SELECT sched._sql_done($1, $2, $3, $5, $4, $6, $7, $8)", 8, types, values);
		CommitTransactionCommand();
		put_report(report, SQL_RUN_DONE, done != NULL && strcmp(done, "t") == 0 ? "done" : "stale",
				   NULL, NULL, rows, started,
				   (double) (GetCurrentTimestamp() - started) / 1000.0);
	}
	PG_CATCH();
	{
		ErrorData  *error;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(caller);
		error = CopyErrorData();
		FlushErrorState();
		disable_all_timeouts(false);
		QueryCancelPending = false;
		AbortCurrentTransaction();
		RESUME_INTERRUPTS();
		if (!began)
			put_report(report, SQL_RUN_HELD, NULL, NULL, error->message, 0, 0, 0);
		else
			put_report(report, SQL_RUN_FAILED, "retry", unpack_sql_state(error->sqlerrcode),
					   error->message, 0, started, (double) (GetCurrentTimestamp() - started) / 1000.0);
	}
	PG_END_TRY();
	proc_exit(0);
}

/*
 * In the SQL worker: run job in a session worker connected as its role,
 * wait for it, and say in *run how it ended, as delaysched_sql_run does.
 * A sched.cancel of the job (this worker's SIGINT handler) is passed on to
 * the session worker; a SIGTERM of this worker stops it too.
 */
void
delaysched_sql_run_in_session(const SqlJob *job, int16 owner, SqlRun *run)
{
	SqlWorkerSlot *slot = delaysched_sql_my_slot;
	SqlSessionReport *report = &slot->report;
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	SessionArgs args;
	bool		forwarded = false;
	pid_t		pid = 0;
	SqlRunEnd	end;

	memset(run, 0, sizeof(SqlRun));
	memset(&args, 0, sizeof(args));
	args.dboid = MyDatabaseId;
	args.role = job->run_as;
	args.entry = delaysched_database_index;
	args.slot = (int32) (slot - delaysched_shared->sql_workers);
	args.id = job->id;
	args.attempt = job->attempt;
	args.bucket = job->bucket;
	args.owner = owner;
	args.timeout_ms = job->timeout_ms;
	strlcpy(args.biz_type, job->biz_type, sizeof(args.biz_type));

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	worker.bgw_notify_pid = MyProcPid;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "delaysched");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "delaysched_sql_session_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "delaysched sql session for job " INT64_FORMAT, job->id);
	snprintf(worker.bgw_type, BGW_MAXLEN, "delaysched sql session");
	memcpy(worker.bgw_extra, &args, sizeof(args));

	pg_atomic_write_u32(&report->state, 0);
	delaysched_sql_forget_cancel();
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		/* No slot of max_worker_processes free: later. */
		run->end = SQL_RUN_HELD;
		return;
	}
	pg_atomic_write_u64(&slot->running, (uint64) job->id);

	for (;;)
	{
		BgwHandleStatus status;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 SESSION_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		status = GetBackgroundWorkerPid(handle, &pid);
		if (ProcDiePending)
		{
			/* Stopping: the session goes too (its run rolls back). */
			TerminateBackgroundWorker(handle);
			pg_atomic_write_u64(&slot->running, 0);
			CHECK_FOR_INTERRUPTS();
		}
		if (QueryCancelPending)
		{
			/* Meant for the job's statement, which runs over there. */
			QueryCancelPending = false;
			if (status == BGWH_STARTED && pid != 0)
			{
				kill(pid, SIGINT);
				forwarded = forwarded || delaysched_sql_cancelled_by_user();
			}
		}
		if (status == BGWH_STOPPED || status == BGWH_POSTMASTER_DIED)
			break;
	}
	pg_atomic_write_u64(&slot->running, 0);
	pfree(handle);

	end = (SqlRunEnd) ((int) pg_atomic_read_u32(&report->state) - 1);
	pg_read_barrier();
	if (pg_atomic_read_u32(&report->state) == 0)
	{
		run->end = SQL_RUN_FAILED;
		run->outcome = "retry";
		run->error = psprintf("session_failed: the job's session (as role OID %u) ended without a result; see the server log%s",
							  job->run_as,
							  DELAYSCHED_BGW_ANY_ROLE == 0 ? " (the role must be able to log in)" : "");
		strlcpy(run->sqlstate, "28000", sizeof(run->sqlstate));
		return;
	}
	run->end = end;
	run->rows = report->rows;
	run->started = report->started;
	run->duration_ms = report->duration_ms;
	if (end != SQL_RUN_FAILED)
		return;
	strlcpy(run->sqlstate, report->sqlstate, sizeof(run->sqlstate));
	if (forwarded && strcmp(report->sqlstate, "57014") == 0)
	{
		run->outcome = "cancelled";
		run->error = pstrdup("cancelled: sched.cancel stopped the running job");
	}
	else if (strcmp(report->sqlstate, "57014") == 0 && run->duration_ms >= job->timeout_ms * 0.999)
	{
		run->outcome = "retry";
		run->error = psprintf("timeout: the command ran longer than %.0f ms", job->timeout_ms);
	}
	else
	{
		run->outcome = "retry";
		run->error = psprintf("sql_%s: %s", report->sqlstate, report->error);
	}
}
