/*-------------------------------------------------------------------------
 *
 * wake.c
 *		Wake a scanner worker when a transaction that made a task due sooner
 *		commits -- after the commit, never before, so that the worker's next
 *		snapshot is sure to see the task.
 *
 * sched.add and the other functions that set a task's run_at call
 * sched._wake(run_at, door).  This only remembers the earliest such run_at
 * per range (door number) in backend-local memory; a transaction callback
 * publishes it to shared memory at XACT_EVENT_COMMIT (which PostgreSQL fires
 * after the commit is visible to other sessions) and sets the latch of one
 * sleeping worker if it would otherwise sleep past that time.  Workers that
 * are busy look at the published times before they sleep.  An abort forgets
 * it all.  A NULL door stands for every range.
 *
 * The earliest run_at more than DELAYSCHED_FAR_AHEAD ahead of the clock is published
 * apart (RangeState.far_added): the scanner's search for the next task
 * beyond the coming seconds (tick.c) keeps its last answer until a commit
 * reports an earlier one.  A task scheduled nearer than that falls in the
 * seconds the scanner looks at directly.
 *
 * All of it concerns the current database's workers (base/shmem.h); a
 * database not served (yet) has none to wake.
 *
 * The drain (drain.c) is woken the same way, after a commit that parked
 * tasks (the parked types' hints are published first, see limiter.c),
 * changed a type's limits, or freed a slot of a type waiting at its
 * concurrency cap.  And so are the HTTP workers (http_worker.c), after a
 * commit that parked tasks of an http type or changed an http type.
 *
 * IDENTIFICATION
 *	  src/core/wake.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "base/guc.h"
#include "base/shmem.h"
#include "core/core.h"
#include "http/http.h"
#include "sql/sql.h"

PG_FUNCTION_INFO_V1(delaysched_wake);
PG_FUNCTION_INFO_V1(delaysched_wake_drain);
PG_FUNCTION_INFO_V1(delaysched_wake_http);
PG_FUNCTION_INFO_V1(delaysched_wake_sql);
PG_FUNCTION_INFO_V1(delaysched_note_parked_sql);

/* Earliest run_at this transaction scheduled per range, DT_NOEND if none. */
static TimestampTz pending_wake_at[DELAYSCHED_MAX_RANGES];
/* The same, of the run_ats more than DELAYSCHED_FAR_AHEAD ahead when scheduled. */
static TimestampTz pending_far_at[DELAYSCHED_MAX_RANGES];
/* The ranges whose entries above are set, in the order first set. */
static int	pending_ranges[DELAYSCHED_MAX_RANGES];
static int	n_pending_ranges = 0;
static TimestampTz pending_earliest = DT_NOEND;
static bool pending_drain = false;	/* wake the drain at commit */
static bool pending_hints = false;	/* publish parked types at commit */
static bool pending_http = false;	/* wake the HTTP workers at commit */
static bool pending_sql = false;	/* wake the SQL workers at commit */
static bool callback_registered = false;

/* Types this transaction parked tasks of, published at commit. */
static List *parked_here = NIL;

static void forget_pending(void);
static void forget_parked(void);
static void wake_xact_callback(XactEvent event, void *arg);

static void
register_callback(void)
{
	if (!callback_registered)
	{
		for (int i = 0; i < DELAYSCHED_MAX_RANGES; i++)
			pending_wake_at[i] = pending_far_at[i] = DT_NOEND;
		n_pending_ranges = 0;
		forget_pending();
		RegisterXactCallback(wake_xact_callback, NULL);
		callback_registered = true;
	}
}

static void
forget_pending(void)
{
	for (int i = 0; i < n_pending_ranges; i++)
		pending_wake_at[pending_ranges[i]] = pending_far_at[pending_ranges[i]] = DT_NOEND;
	n_pending_ranges = 0;
	pending_earliest = DT_NOEND;
	if (pending_hints)
		forget_parked();
	pending_drain = false;
	pending_hints = false;
	pending_http = false;
	if (pending_sql)
		delaysched_sql_ready_forget();
	pending_sql = false;
}

/*
 * Wake one sleeping scanner worker that would sleep past "earliest", a time
 * this backend has just published (see the wake-up protocol in base/shmem.h).
 * No lock: the caller has issued the barrier.
 */
static void
wake_scanner(TimestampTz earliest)
{
	for (int i = 0; i < delaysched_workers; i++)
	{
		WorkerSlot *worker = &delaysched_shared->workers[i];
		TimestampTz sleep_until = delaysched_read_time(&worker->sleep_until);

		if (sleep_until != 0 && earliest < sleep_until)
		{
			/* Its latch was set before sleep_until was first non-zero. */
			pg_read_barrier();
			SetLatch(worker->latch);
			break;
		}
	}
}

/*
 * Publish pending_wake_at once the transaction's work is visible.  Takes
 * no lock for the ranges' times and the scanners' wake-up; workers_lock
 * shared only after a commit that parked tasks, the HTTP workers' slot
 * locks shared only after one that asks for a claim.
 */
static void
wake_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:

			/*
			 * A prepared transaction commits later, perhaps in another
			 * session; the workers' next walk or sweep finds its tasks.
			 */
			if (pending_earliest != DT_NOEND || pending_drain || pending_hints || pending_http ||
				pending_sql)
				forget_pending();
			return;
		default:
			return;
	}

	if (pending_earliest == DT_NOEND && !pending_drain && !pending_hints && !pending_http &&
		!pending_sql)
		return;
	if (!delaysched_current_database())
	{
		/* Not served (yet): its workers find everything when they start. */
		forget_pending();
		return;
	}
	/*
	 * A test's way to widen the moment before the wake-up (guc.c): in a
	 * client's session only, never in delaysched's own workers.
	 */
	if (delaysched_debug_commit_wakeup_delay_ms > 0 && MyBackendType == B_BACKEND)
		pg_usleep((long) delaysched_debug_commit_wakeup_delay_ms * 1000L);

	/*
	 * Hints before the wake-up, so that the drain finds them.  A new hint
	 * needs the drain; so does one it may be clearing right now.  A type
	 * that was hinted already is in the drain's plans.
	 */
	if (pending_hints && delaysched_publish_hints(parked_here))
		pending_drain = true;
	if (pending_hints)
		forget_parked();
	if (pending_hints && !pending_drain)
	{
		LWLockAcquire(delaysched_shared->workers_lock, LW_SHARED);
		if (delaysched_shared->drainer >= 0)
			pending_drain = true;
		LWLockRelease(delaysched_shared->workers_lock);
	}
	if (pending_drain)
	{
		TimestampTz now = GetCurrentTimestamp();

		delaysched_lower_time(&delaysched_shared->drain_at, now);
		pending_earliest = Min(pending_earliest, now);
	}
	for (int i = 0; i < n_pending_ranges; i++)
	{
		int			r = pending_ranges[i];
		RangeState *range = &delaysched_shared->ranges[r];

		delaysched_lower_time(&range->wake_at, pending_wake_at[r]);
		if (pending_far_at[r] != DT_NOEND)
			delaysched_lower_time(&range->far_added, pending_far_at[r]);
	}

	if (pending_earliest != DT_NOEND)
	{
		/* The times above before the workers' sleep_until (see base/shmem.h). */
		pg_memory_barrier();
		wake_scanner(pending_earliest);
	}
	if (pending_http)
		delaysched_http_wake_all();
	if (pending_sql)
	{
		/* The jobs it parked first, so that the workers woken find them. */
		delaysched_sql_ready_publish();
		delaysched_sql_wake_all();
	}
	forget_pending();
}

/*
 * sched._wake(run_at timestamptz, door smallint DEFAULT NULL,
 *			   far boolean DEFAULT NULL) RETURNS void
 *
 * Note that the calling transaction schedules a task due at run_at in the
 * range of door (every range when door is NULL).  far says whether it is
 * the earliest of its tasks more than DELAYSCHED_FAR_AHEAD ahead (NULL:
 * judge it by the clock now).
 */
Datum
delaysched_wake(PG_FUNCTION_ARGS)
{
	TimestampTz run_at;
	bool		far;
	int			first = 0;
	int			last = DELAYSCHED_MAX_RANGES - 1;

	if (PG_ARGISNULL(0))
		PG_RETURN_VOID();
	run_at = PG_GETARG_TIMESTAMPTZ(0);
	far = PG_ARGISNULL(2) ? run_at > GetCurrentTimestamp() + DELAYSCHED_FAR_AHEAD
		: PG_GETARG_BOOL(2);

	register_callback();
	if (!PG_ARGISNULL(1))
	{
		int			door = PG_GETARG_INT16(1);

		if (door < 0 || door >= DELAYSCHED_MAX_RANGES)
			elog(ERROR, "door number %d out of range", door);
		first = last = door;
	}
	for (int i = first; i <= last; i++)
	{
		if (run_at == DT_NOEND)
			break;
		if (pending_wake_at[i] == DT_NOEND)
			pending_ranges[n_pending_ranges++] = i;
		if (run_at < pending_wake_at[i])
			pending_wake_at[i] = run_at;
		if (far && run_at < pending_far_at[i])
			pending_far_at[i] = run_at;
	}
	if (run_at < pending_earliest)
		pending_earliest = run_at;

	PG_RETURN_VOID();
}

/* Run the drain once the current transaction commits. */
void
delaysched_drain_after_commit(void)
{
	register_callback();
	pending_drain = true;
}

/*
 * Note that the current transaction parked tasks of biz; the drain hears of
 * it when (and only if) the transaction commits: the callback above
 * publishes the types as hints (limiter.c) before it wakes the drain.
 */
void
delaysched_note_parked(const char *biz)
{
	ListCell   *lc;
	MemoryContext old;

	foreach(lc, parked_here)
		if (strcmp((const char *) lfirst(lc), biz) == 0)
			return;
	old = MemoryContextSwitchTo(TopMemoryContext);
	parked_here = lappend(parked_here, pstrdup(biz));
	MemoryContextSwitchTo(old);
	register_callback();
	pending_hints = true;
}

static void
forget_parked(void)
{
	list_free_deep(parked_here);
	parked_here = NIL;
}

/*
 * sched._note_parked(biz_type text) RETURNS void of 0.1 and 0.2, whose
 * sched._expire_leases parked the expired leases of limited types: tell
 * the drain at commit.  0.3 has no such function (the tick parks those
 * tasks when they fall due again), but the released scripts create it, and
 * PostgreSQL looks for the symbol then: it stays for them.
 */
Datum
delaysched_note_parked_sql(PG_FUNCTION_ARGS)
{
	char	   *biz = text_to_cstring(PG_GETARG_TEXT_PP(0));

	delaysched_note_parked(biz);
	PG_RETURN_VOID();
}

/*
 * sched._wake_drain(for_slot boolean DEFAULT false) RETURNS void
 *
 * Run the drain after the calling transaction commits: a type's limits
 * changed, or (for_slot) a delivery was acknowledged, which matters only
 * while a type waits at its concurrency cap.
 */
Datum
delaysched_wake_drain(PG_FUNCTION_ARGS)
{
	bool		for_slot = !PG_ARGISNULL(0) && PG_GETARG_BOOL(0);

	if (!for_slot ||
		(delaysched_current_database() &&
		 pg_atomic_read_u32(&delaysched_shared->drain_waits_for_slot) != 0))
		delaysched_drain_after_commit();
	PG_RETURN_VOID();
}

/* Wake the HTTP workers once the current transaction commits. */
void
delaysched_http_after_commit(void)
{
	register_callback();
	pending_http = true;
}

/*
 * sched._wake_http() RETURNS void
 *
 * Wake the HTTP workers after the calling transaction commits: it parked
 * tasks of an http type, or changed one.
 */
Datum
delaysched_wake_http(PG_FUNCTION_ARGS)
{
	delaysched_http_after_commit();
	PG_RETURN_VOID();
}

/* Wake the SQL workers once the current transaction commits. */
void
delaysched_sql_after_commit(void)
{
	register_callback();
	pending_sql = true;
}

/*
 * sched._wake_sql() RETURNS void
 *
 * Wake the SQL workers after the calling transaction commits: it parked
 * jobs of an sql type, or changed one.
 */
Datum
delaysched_wake_sql(PG_FUNCTION_ARGS)
{
	delaysched_sql_after_commit();
	PG_RETURN_VOID();
}
