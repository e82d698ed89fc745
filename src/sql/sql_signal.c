/*-------------------------------------------------------------------------
 *
 * sql_signal.c
 *		Telling the SQL workers things: that a commit parked jobs for them
 *		(their latches), and that sched.cancel cancelled the job one of them
 *		is running (its statement is cancelled, as by pg_cancel_backend).
 *
 * A cancellation must stop the job it names and no other.  The worker
 * publishes the id of the job whose command runs (SqlWorkerSlot.running,
 * set before the command starts and cleared after the run's transaction
 * ends); a backend in sched.cancel writes that id into the slot's cancel
 * and sends the worker SIGINT.  The worker's handler stops the statement
 * only if the id it finds there is still the running one: a signal that
 * arrives after the job ended, or while the worker runs the next, is
 * dropped.  A SIGINT with no id (pg_cancel_backend, or the worker's own
 * statement timeout, which PostgreSQL delivers as a SIGINT to itself)
 * cancels as usual.
 *
 * IDENTIFICATION
 *	  src/sql/sql_signal.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"

#include "compat.h"
#include "base/guc.h"
#include "base/shmem.h"
#include "sql/sql.h"

PG_FUNCTION_INFO_V1(delaysched_sql_interrupt);

/* Set by the handler when sched.cancel stopped the running job. */
static volatile sig_atomic_t cancelled_by_user = false;

/*
 * The SQL worker's SIGINT handler.  Reads and writes only atomics of its
 * own slot (lock-free on the platforms PostgreSQL runs on), then hands the
 * signal to PostgreSQL's own handler.
 */
static void
sql_cancel_handler(SIGNAL_ARGS)
{
	SqlWorkerSlot *slot = delaysched_sql_my_slot;

	if (slot != NULL)
	{
		uint64		target = pg_atomic_read_u64(&slot->cancel);

		if (target != 0)
		{
			pg_atomic_write_u64(&slot->cancel, 0);
			if (target != pg_atomic_read_u64(&slot->running))
				return;			/* meant for a job that has ended */
			cancelled_by_user = true;
		}
	}
	StatementCancelHandler(postgres_signal_arg);
}

/* In an SQL worker, once its slot is set. */
void
delaysched_sql_install_cancel_handler(void)
{
	pqsignal(SIGINT, sql_cancel_handler);
}

/* Did sched.cancel stop the job that ran last? */
bool
delaysched_sql_cancelled_by_user(void)
{
	return cancelled_by_user;
}

/* Before a run. */
void
delaysched_sql_forget_cancel(void)
{
	cancelled_by_user = false;
}

/*
 * Ask every running SQL worker of the current database to claim, and set
 * its latch: after a commit that parked sql jobs (core/wake.c).  Reads the
 * slots under workers_lock shared, and sets the latches after releasing it.
 */
void
delaysched_sql_wake_all(void)
{
	Latch	   *latches[DELAYSCHED_MAX_SQL_WORKERS];
	int			n = 0;

	if (delaysched_shared == NULL)
		return;
	LWLockAcquire(delaysched_shared->workers_lock, LW_SHARED);
	for (int i = 0; i < delaysched_sql_workers; i++)
	{
		SqlWorkerSlot *slot = &delaysched_shared->sql_workers[i];

		if (slot->pid != 0 && slot->latch != NULL)
		{
			/* Before the latch: the worker clears it before it claims. */
			pg_atomic_write_u32(&slot->claim_wanted, 1);
			latches[n++] = slot->latch;
		}
	}
	LWLockRelease(delaysched_shared->workers_lock);
	for (int i = 0; i < n; i++)
		SetLatch(latches[i]);
}

/*
 * sched._sql_interrupt(id bigint) RETURNS boolean
 *
 * Cancel the statement of the SQL worker of the current database that runs
 * job id, if one does; true if one was signalled.  sched.cancel calls it
 * once it has checked the caller's privilege on the job's type; the job's
 * run then rolls back and gives the job's row up.
 */
Datum
delaysched_sql_interrupt(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);
	pid_t		pids[DELAYSCHED_MAX_SQL_WORKERS];
	int			n = 0;

	if (id == 0 || !delaysched_current_database())
		PG_RETURN_BOOL(false);
	LWLockAcquire(delaysched_shared->workers_lock, LW_SHARED);
	for (int i = 0; i < DELAYSCHED_MAX_SQL_WORKERS; i++)
	{
		SqlWorkerSlot *slot = &delaysched_shared->sql_workers[i];

		if (slot->pid != 0 && pg_atomic_read_u64(&slot->running) == (uint64) id)
		{
			pg_atomic_write_u64(&slot->cancel, (uint64) id);
			pids[n++] = slot->pid;
		}
	}
	LWLockRelease(delaysched_shared->workers_lock);
	for (int i = 0; i < n; i++)
		kill(pids[i], SIGINT);
	PG_RETURN_BOOL(n > 0);
}
