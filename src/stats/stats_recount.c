/*-------------------------------------------------------------------------
 *
 * stats_recount.c
 *		The count that makes a database's gauges right: scanner worker 0
 *		takes it when it starts, and again whenever the gauges are marked
 *		stale.
 *
 * The gauges (tasks per state, per type; stats.h) are kept by adding every
 * committed change, so they are only as right as the count they started
 * from.  A count is right if no change can commit while it is taken and
 * installed: the worker locks sched.task (with its partitions) and
 * sched.finished in SHARE mode, which waits for the transactions that
 * changed them to end (and so to have added their changes, which they do at
 * commit before they release their locks) and keeps new changes out until
 * the count is installed and the worker's transaction ends.  Then every
 * change that commits later is added to the count.
 *
 * The lock is taken with lock_timeout = 100ms: while the worker waits, new
 * writers queue behind it, so it gives up soon and tries again in a
 * second.  Held, it stops every change for as long as the count takes
 * (about 0.25 s for a million tasks; see doc/monitoring.md).  A server
 * start and each database's first start count once; after that only what
 * marks the gauges stale counts again: a prepared transaction that changed
 * tasks, TRUNCATE, and sched.recount_stats().
 *
 * Until the count is in, the database's gauges are not ready, and
 * sched.biz_stats and sched.metrics() count the tables instead.
 *
 * IDENTIFICATION
 *	  src/stats/stats_recount.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "stats/stats.h"

/* After a count that could not lock the tables, wait this long (ms). */
#define RECOUNT_RETRY_MS	1000

/* Every type's tasks by state, and its delivery kind (see the view). */
static const char count_sql[] =
"SELECT c.biz_type, c.delivery, c.pending, c.ready, c.delivered, c.done, c.dead, c.cancelled"
"  FROM sched._task_counts c";

/*
 * Lock the task tables against changes, waiting at most 100 ms; false if
 * they could not be locked in that time.  In a subtransaction, so that a
 * timeout leaves the worker's transaction usable.
 */
static bool
lock_task_tables(void)
{
	MemoryContext context = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool locked = false;

	/* Back to the worker's own setting at the end of the transaction. */
	set_config_option("lock_timeout", "100ms", PGC_SUSET, PGC_S_OVERRIDE,
					  GUC_ACTION_LOCAL, true, 0, false);

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(context);
	PG_TRY();
	{
		if (SPI_execute("LOCK TABLE sched.task, sched.finished IN SHARE MODE", false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not lock the task tables");
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
		locked = true;
	}
	PG_CATCH();
	{
		if (!delaysched_caught_lock_timeout(context))
			PG_RE_THROW();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();
	return locked;
}

static int64
int8_column(HeapTuple row, TupleDesc desc, int column)
{
	bool		isnull;
	Datum		value = SPI_getbinval(row, desc, column, &isnull);

	return isnull ? 0 : DatumGetInt64(value);
}

/* The worker's unit of work: lock, count, install.  *(bool *) arg: done. */
static void
recount_work(void *arg)
{
	bool	   *counted = (bool *) arg;
	List	   *counts = NIL;

	*counted = false;
	SPI_connect();
	if (lock_task_tables())
	{
		/*
		 * Not read-only: SPI then takes a new snapshot for the count, after
		 * the lock.  The worker's transaction snapshot is older, and would
		 * miss what committed while the lock was waited for.
		 */
		if (SPI_execute(count_sql, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not count the tasks");
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			HeapTuple	row = SPI_tuptable->vals[i];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			StatsCopy  *count = palloc0(sizeof(StatsCopy));
			char	   *name = SPI_getvalue(row, desc, 1);

			strlcpy(count->biz_type, name, NAMEDATALEN);
			count->kind = delaysched_stats_kind_of(SPI_getvalue(row, desc, 2));
			count->v[SS_STATE_PENDING] = int8_column(row, desc, 3);
			count->v[SS_STATE_READY] = int8_column(row, desc, 4);
			count->v[SS_STATE_DELIVERED] = int8_column(row, desc, 5);
			count->v[SS_KEPT_DONE] = int8_column(row, desc, 6);
			count->v[SS_KEPT_DEAD] = int8_column(row, desc, 7);
			count->v[SS_KEPT_CANCELLED] = int8_column(row, desc, 8);
			counts = lappend(counts, count);
		}
		/* Installed under the lock, which the commit releases. */
		delaysched_stats_install(MyDatabaseId, counts);
		*counted = true;
	}
	SPI_finish();
}

/*
 * Scanner worker 0, between ticks: count if this database's gauges were
 * never counted or are marked stale.  A count that could not lock the
 * tables is tried again a second later.
 */
void
delaysched_stats_recount_if_needed(void)
{
	static TimestampTz retry_at = 0;
	TimestampTz now = GetCurrentTimestamp();
	bool		counted = false;

	if (now < retry_at || !delaysched_stats_claim_count(MyDatabaseId))
		return;
	if (!delaysched_run_in_transaction("delaysched: counting tasks for the statistics",
									   recount_work, &counted) || !counted)
	{
		delaysched_stats_mark_stale(MyDatabaseId);
		retry_at = TimestampTzPlusMilliseconds(now, RECOUNT_RETRY_MS);
	}
}
