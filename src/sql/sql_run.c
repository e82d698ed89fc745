/*-------------------------------------------------------------------------
 *
 * sql_run.c
 *		One run of an SQL job, in one transaction: lock the job's row, run
 *		its command as the job's role, mark the job done, commit.
 *
 * Exactly once.  The command's work and the done mark (sql_plans.c: the
 * task to sched.finished, a row in sched.attempt) commit together, or
 * neither does: a job that committed is never run again, and a run that
 * failed, timed out, was cancelled or was cut short by a crash left nothing
 * behind.  The lease that sched._sql_claim committed before (state 'd',
 * attempt + 1, lease_owner) is what survives a crash: the worker releases
 * it when it starts again (sched._sql_release), or the sweep when it runs
 * out, and the job runs again, its attempt counted.
 *
 * As whom.  The command runs with the job's role as the current user,
 * under SECURITY_LOCAL_USERID_CHANGE, as the body of a SECURITY DEFINER
 * function owned by that role would: PostgreSQL checks every privilege
 * against that role, and refuses SET ROLE and SET SESSION AUTHORIZATION
 * (the session's user, the worker's, is never reachable).  The role's own
 * settings (ALTER ROLE ... SET, and ... IN DATABASE ... SET) apply for the
 * run, as at a login of that role.  The switch is made inside the
 * transaction and undone before its end, as PostgreSQL does for SECURITY
 * DEFINER; so a command cannot end the transaction itself (COMMIT or
 * ROLLBACK in a procedure fails with invalid_transaction_termination, as
 * in a SECURITY DEFINER procedure), and statements that must run outside a
 * transaction block (VACUUM, CREATE INDEX CONCURRENTLY) fail as they do in
 * a function.
 *
 * What a run leaves in the worker's session.  Settings changed by the
 * command (SET, set_config) are undone with the run's GUC nest level;
 * what the transaction's end does not undo -- cursors WITH HOLD, prepared
 * statements, LISTEN, session advisory locks, temporary tables, sequence
 * caches -- is dropped before the worker's next transaction
 * (delaysched_sql_forget_session_state), so that no job sees what another
 * role's job left.
 *
 * The statement timeout is the type's timeout, timed from the command's
 * start with PostgreSQL's own STATEMENT_TIMEOUT (a command cannot lift it:
 * statement_timeout is not looked at here).  sched.cancel stops the
 * statement through the worker's SIGINT handler (sql_signal.c).
 *
 * IDENTIFICATION
 *	  src/sql/sql_run.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_db_role_setting.h"
#include "commands/async.h"
#include "commands/prepare.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/lock.h"
#include "tcop/dest.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/resowner.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timeout.h"

#include "compat.h"
#include "base/base.h"
#include "sql/sql.h"

/* Where a run is, for what an error there means. */
typedef enum RunStage
{
	STAGE_BEGIN,				/* locking the row: no attempt was made */
	STAGE_COMMAND				/* the command, the done mark, the commit */
} RunStage;

/*
 * The worker's own settings for its statements, for the rest of the
 * current GUC nest level (GUC_ACTION_SAVE) or transaction
 * (GUC_ACTION_LOCAL): its functions assume pg_catalog alone is searched,
 * it waits for no lock for long, and its statements are written for an
 * index (a plan made while a partition looked empty would otherwise read
 * it whole once it is not; see delaysched_setup_worker_session).
 */
void
delaysched_sql_bookkeeping_settings(GucAction action)
{
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION,
							 action, true, 0, false);
	(void) set_config_option("lock_timeout", "500ms", PGC_SUSET, PGC_S_SESSION,
							 action, true, 0, false);
	(void) set_config_option("enable_seqscan", "off", PGC_SUSET, PGC_S_SESSION,
							 action, true, 0, false);
}

/*
 * The settings of role for this database and for every database
 * (pg_db_role_setting), applied for the current GUC nest level as at the
 * role's login: those for this database win.
 */
static void
apply_role_settings(Oid role)
{
	Relation	rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	Oid			databases[2] = {InvalidOid, MyDatabaseId};

	for (int i = 0; i < 2; i++)
	{
		ScanKeyData keys[2];
		SysScanDesc scan;
		HeapTuple	tuple;

		ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(databases[i]));
		ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(role));
		scan = systable_beginscan(rel, DbRoleSettingDatidRolidIndexId, true, NULL, 2, keys);
		while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		{
			bool		isnull;
			Datum		config = heap_getattr(tuple, Anum_pg_db_role_setting_setconfig,
											  RelationGetDescr(rel), &isnull);

			if (!isnull)
				ProcessGUCArray(DatumGetArrayTypeP(config), PGC_SUSET, PGC_S_SESSION,
								GUC_ACTION_SAVE);
		}
		systable_endscan(scan);
	}
	table_close(rel, AccessShareLock);
}

/*
 * The worker's lease of its next job, after the done mark: in a
 * subtransaction, so that an error there (logged) costs the next job its
 * early lease and never this run its commit.
 */
static void
lease_next_job(SqlLeaseNext lease_next, void *arg)
{
	MemoryContext context = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(context);
	PG_TRY();
	{
		lease_next(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *error;

		MemoryContextSwitchTo(context);
		error = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		ereport(LOG,
				(errmsg("delaysched: could not lease the next SQL job: %s", error->message)));
		FreeErrorData(error);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(context);
	CurrentResourceOwner = owner;
}

/*
 * Run the command's statements through SPI, their rows discarded; returns
 * the rows the last one processed.  Statements SPI cannot run here are an
 * error of the command's.
 */
static int64
execute_command(const char *command)
{
	SPIExecuteOptions options;
	int			rc;

	memset(&options, 0, sizeof(options));
	options.read_only = false;
	options.tcount = 0;
	options.dest = CreateDestReceiver(DestNone);
	rc = SPI_execute_extended(command, &options);
	if (rc == SPI_ERROR_TRANSACTION)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
				 errmsg("a job's command cannot control transactions")));
	if (rc == SPI_ERROR_COPY)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a job's command cannot copy to or from the client"),
				 errhint("COPY to or from a file or program on the server instead.")));
	if (rc < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("the job's command failed: %s", SPI_result_code_string(rc))));
	return (int64) SPI_processed;
}

/* "sql_<SQLSTATE>: message", or "timeout: ..." for the statement timeout. */
static void
describe_failure(const SqlJob *job, ErrorData *error, SqlRun *run)
{
	const char *state = unpack_sql_state(error->sqlerrcode);

	strlcpy(run->sqlstate, state, sizeof(run->sqlstate));
	run->outcome = "retry";
	if (error->sqlerrcode == ERRCODE_QUERY_CANCELED && delaysched_sql_cancelled_by_user())
	{
		run->outcome = "cancelled";
		run->error = psprintf("cancelled: sched.cancel stopped the running job");
	}
	else if (error->sqlerrcode == ERRCODE_QUERY_CANCELED &&
			 run->duration_ms >= job->timeout_ms * 0.999)
		run->error = psprintf("timeout: the command ran longer than %.0f ms", job->timeout_ms);
	else
		run->error = psprintf("sql_%s: %s", state, error->message);
}

/*
 * Run job, leased to owner, and say how it ended in *run.  Called outside
 * any transaction; starts and ends its own, never raises.  For a failure,
 * the caller records it (sched._sql_record) in a transaction of its own.
 * lease_next, if given, is called after a successful run's done mark, in
 * its transaction (see SqlLeaseNext).
 */
void
delaysched_sql_run(const SqlJob *job, int16 owner, SqlRun *run,
				   SqlLeaseNext lease_next, void *lease_next_arg)
{
	MemoryContext caller = CurrentMemoryContext;
	Oid			worker_user;
	int			worker_context;
	volatile RunStage stage = STAGE_BEGIN;
	SqlWorkerSlot *slot = delaysched_sql_my_slot;

	memset(run, 0, sizeof(SqlRun));
	run->end = SQL_RUN_FAILED;
	GetUserIdAndSecContext(&worker_user, &worker_context);
	delaysched_sql_forget_cancel();

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		int			nest;
		SqlBegin	begun;
		bool		role_exists;

		/* The row first, as the worker. */
		nest = NewGUCNestLevel();
		delaysched_sql_bookkeeping_settings(GUC_ACTION_SAVE);
		PushActiveSnapshot(GetTransactionSnapshot());
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		begun = delaysched_sql_lock_leased(job, owner);
		role_exists = SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(job->run_as));
		SPI_finish();
		PopActiveSnapshot();
		AtEOXact_GUC(false, nest);

		if (begun != SQL_BEGIN_RUN || !role_exists || job->command == NULL)
		{
			/* Nothing ran; the commit lets the row go. */
			CommitTransactionCommand();
			MemoryContextSwitchTo(caller);
			if (begun == SQL_BEGIN_HELD)
				run->end = SQL_RUN_HELD;
			else if (begun == SQL_BEGIN_GONE)
				run->end = SQL_RUN_GONE;
			else if (!role_exists)
			{
				run->outcome = "dead";
				run->error = psprintf("role_dropped: the role the job runs as (OID %u) no longer exists",
									  job->run_as);
				strlcpy(run->sqlstate, "42704", sizeof(run->sqlstate));	/* undefined_object */
			}
			else
			{
				/* Only sched.add_sql and define_schedule make sql jobs, with one. */
				run->outcome = "dead";
				run->error = pstrdup("no_command: the job has no command to run");
				strlcpy(run->sqlstate, "22004", sizeof(run->sqlstate));	/* null_value_not_allowed */
			}
		}
		else
		{
			/* The command, as the job's role. */
			stage = STAGE_COMMAND;
			run->started = GetCurrentTimestamp();
			pg_atomic_write_u64(&slot->run_started, (uint64) run->started);
			pg_atomic_write_u64(&slot->running, (uint64) job->id);
			pgstat_report_activity(STATE_RUNNING, job->command);
			debug_query_string = job->command;

			PushActiveSnapshot(GetTransactionSnapshot());
			if (SPI_connect() != SPI_OK_CONNECT)
				elog(ERROR, "SPI_connect failed");
			SetUserIdAndSecContext(job->run_as, worker_context | SECURITY_LOCAL_USERID_CHANGE);
			nest = NewGUCNestLevel();
			apply_role_settings(job->run_as);
			enable_timeout_after(STATEMENT_TIMEOUT, (int) Max(1, job->timeout_ms));
			run->rows = execute_command(job->command);
			disable_timeout(STATEMENT_TIMEOUT, false);
			AtEOXact_GUC(false, nest);
			SetUserIdAndSecContext(worker_user, worker_context);
			run->duration_ms = (double) (GetCurrentTimestamp() - run->started) / 1000.0;

			/* The done mark, as the worker, and the commit of both. */
			nest = NewGUCNestLevel();
			delaysched_sql_bookkeeping_settings(GUC_ACTION_SAVE);
			CommandCounterIncrement();
			delaysched_sql_mark_done(job, owner, run);
			if (lease_next != NULL)
				lease_next_job(lease_next, lease_next_arg);
			AtEOXact_GUC(false, nest);
			SPI_finish();
			PopActiveSnapshot();
			CommitTransactionCommand();
			MemoryContextSwitchTo(caller);
			run->end = SQL_RUN_DONE;
		}
	}
	PG_CATCH();
	{
		ErrorData  *error;

		/* As PostgreSQL's own error recovery in a backend's main loop. */
		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(caller);
		error = CopyErrorData();
		FlushErrorState();
		disable_all_timeouts(false);
		QueryCancelPending = false;
		AbortCurrentTransaction();
		SetUserIdAndSecContext(worker_user, worker_context);
		RESUME_INTERRUPTS();

		if (stage == STAGE_BEGIN)
		{
			/* The worker's own statement failed: no attempt was made. */
			ereport(LOG,
					(errmsg("delaysched: could not start SQL job " INT64_FORMAT ": %s",
							job->id, error->message)));
			run->end = SQL_RUN_HELD;
		}
		else
		{
			run->end = SQL_RUN_FAILED;
			run->duration_ms = (double) (GetCurrentTimestamp() - run->started) / 1000.0;
			describe_failure(job, error, run);
		}
		FreeErrorData(error);
	}
	PG_END_TRY();
	pg_atomic_write_u64(&slot->running, 0);
	debug_query_string = NULL;
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Drop what a job may have left in the session beyond its transaction (see
 * the top of this file).  In a transaction, as the worker.
 */
void
delaysched_sql_forget_session_state(void)
{
	PortalHashTableDeleteAll();
	DropAllPreparedStatements();
	Async_UnlistenAll();
	LockReleaseAll(USER_LOCKMETHOD, true);
	ResetTempTableNamespace();
	ResetSequenceCaches();
}
