/*-------------------------------------------------------------------------
 *
 * sql.h
 *		SQL jobs: the tasks of sql business types, whose delivery is running
 *		a command in their database as the role that added them.
 *
 *	 sql_worker.c	the SQL workers' loop: claim a job, run it, record a
 *					failure, wait; their slot in shared memory
 *	 sql_run.c		one run: the job's role, its settings and timeout, its
 *					statements, and the done mark committed with them
 *	 sql_session.c	a job that must be a session's statement (a CALL that may
 *					commit, VACUUM): run by a session worker as the job's role
 *	 sql_signal.c	waking the SQL workers after commit, and stopping the
 *					statement of a job that sched.cancel cancels
 *	 sql_plans.c	the statements of every job, on its own task partition:
 *					its lease from the ready ring, its row locked for the
 *					run, its done mark
 *	 sql_ready.c	the ready ring: the jobs a scanner's commit parked, named
 *					to the workers, which lease them by key
 *	 sql_command.c	sched._check_command(): refusing a command that could
 *					never run, when it is added
 *
 * The SQL workers' slots live in their database's DelayschedShared
 * (base/shmem.h, where their locks are described).
 *
 * IDENTIFICATION
 *	  src/sql/sql.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_SQL_H
#define DELAYSCHED_SQL_H

#include "postgres.h"

#include "utils/guc.h"
#include "utils/timestamp.h"

#include "base/shmem.h"

/*
 * An SQL worker leases jobs as owner DELAYSCHED_SQL_OWNER_BASE + its
 * number; an HTTP worker leases as its number (sched.task.lease_owner).
 */
#define DELAYSCHED_SQL_OWNER_BASE	1000

/* A job a worker leased (sched._sql_claim). */
typedef struct SqlJob
{
	int64		id;
	int16		bucket;
	char	   *biz_type;
	TimestampTz run_at;
	int32		attempt;
	char	   *command;
	Oid			run_as;
	double		timeout_ms;
} SqlJob;

/* How a run ended (sql_run.c). */
typedef enum SqlRunEnd
{
	SQL_RUN_DONE,				/* committed with its done mark */
	SQL_RUN_FAILED,				/* rolled back: outcome, error, sqlstate say why */
	SQL_RUN_GONE,				/* the job was no longer this lease's: nothing ran */
	SQL_RUN_HELD				/* another transaction holds the job's row: later */
} SqlRunEnd;

typedef struct SqlRun
{
	SqlRunEnd	end;
	const char *outcome;		/* SQL_RUN_FAILED: 'retry', 'dead' or 'cancelled' */
	char	   *error;			/* last_error: "sql_<SQLSTATE>: message", "timeout: ..." */
	char		sqlstate[6];	/* "" if none */
	TimestampTz started;
	double		duration_ms;
	int64		rows;			/* the rows its last statement processed */
} SqlRun;

/*
 * Called by a run that succeeded, after its done mark, in its transaction
 * (as the worker, SPI connected, in a subtransaction whose error is logged
 * and forgotten): the worker leases its next job there, so that the lease
 * commits with the run (sql_worker.c).
 */
typedef void (*SqlLeaseNext) (void *arg);

/* How the start of a run found its job's row (sql_plans.c). */
typedef enum SqlBegin
{
	SQL_BEGIN_RUN,				/* locked: run it */
	SQL_BEGIN_GONE,				/* no longer this lease's: nothing to do */
	SQL_BEGIN_HELD				/* another transaction holds it: later */
} SqlBegin;

/* sql_worker.c */
extern PGDLLEXPORT void delaysched_sql_main(Datum main_arg);
extern SqlWorkerSlot *delaysched_sql_my_slot;

/* sql_run.c */
extern void delaysched_sql_run(const SqlJob *job, int16 owner, SqlRun *run,
							  SqlLeaseNext lease_next, void *lease_next_arg);
extern void delaysched_sql_forget_session_state(void);
extern void delaysched_sql_bookkeeping_settings(GucAction action);

/* sql_session.c */
extern PGDLLEXPORT void delaysched_sql_session_main(Datum main_arg);
extern bool delaysched_sql_needs_session(const char *command);
extern void delaysched_sql_run_in_session(const SqlJob *job, int16 owner, SqlRun *run);

/* sql_plans.c */
extern bool delaysched_sql_lease_parked(int16 owner, int16 bucket, int64 id, SqlJob *job,
										MemoryContext context);
extern SqlBegin delaysched_sql_lock_leased(const SqlJob *job, int16 owner);
extern bool delaysched_sql_mark_done(const SqlJob *job, int16 owner, const SqlRun *run);

/* sql_ready.c */
extern void delaysched_sql_ready_note(int64 id, int16 bucket, TimestampTz run_at);
extern void delaysched_sql_ready_forget(void);
extern void delaysched_sql_ready_publish(void);
extern bool delaysched_sql_ready_take(SqlReady *out);

/* sql_signal.c */
extern void delaysched_sql_wake_all(void);
extern void delaysched_sql_install_cancel_handler(void);
extern bool delaysched_sql_cancelled_by_user(void);
extern void delaysched_sql_forget_cancel(void);

#endif							/* DELAYSCHED_SQL_H */
