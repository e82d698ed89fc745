/*-------------------------------------------------------------------------
 *
 * scanner.c
 *		The scanner workers: delaysched.workers background workers that share
 *		the ranges (door numbers) of the task table, each range walking its
 *		own persisted time pointer, and deliver tasks as they fall due.
 *
 * The workers own timing; the data work is a tick (tick.c), so that one
 * short transaction per tick does everything for one range and commits the
 * deliveries together with their NOTIFYs and the advanced pointer.
 *
 * A worker's loop:
 *	 1. picks, in shared memory, the range that has waited longest for a
 *		tick it needs -- a task due, a commit that reported one, a sweep or
 *		lease expiry due -- among those no other worker holds, and marks
 *		itself its holder;
 *	 2. runs a tick (range, now, batch, sweep, cursor) in its own
 *		transaction; the tick locks the range's row in sched.pointer
 *		FOR UPDATE SKIP LOCKED and does nothing if another transaction has
 *		it (a define_biz switching a type from pull, a test holding it);
 *		"sweep" asks for the backstop work (tasks added behind the pointer,
 *		expired acknowledgement leases, and for range 0 retention);
 *	 3. records what the tick learnt about the range (next due task, next
 *		lease expiry, the pointer, where delivery stopped), releases it, and
 *		goes back to 1 -- or, when no range needs a tick, sleeps until the
 *		earliest time one will.
 *
 * Between ticks a worker may run the drain (drain.c), which delivers the
 * parked tasks of limited business types as tokens allow: one worker at a
 * time, when the drain is due (DelayschedShared.drain_at), and never twice
 * in a row while a range waits, so that neither starves the other.
 *
 * A backend that commits a task due before the sleeping workers' wake-up
 * time sets one worker's latch (see wake.c), so a task added for "in 200
 * ms" is delivered in 200 ms, not at the next sweep.
 *
 * Errors: an ERROR inside a tick is caught (delaysched_run_in_transaction):
 * it is logged, the tick's transaction rolls back, so no delivery is
 * half-done, the worker lets go of its range and pauses a second, and the
 * range's persisted pointer resumes the walk.  A worker that ends anyway
 * (FATAL, SIGTERM) is started again after bgw_restart_time (1 s), and its
 * range is free at once (the row lock went with the transaction, the holder
 * mark with the process; see worker_detach).
 *
 * IDENTIFICATION
 *	  src/core/scanner.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "base/base.h"
#include "base/guc.h"
#include "base/shmem.h"
#include "cluster/cluster.h"
#include "core/core.h"
#include "core/tick.h"
#include "stats/stats.h"

/* How long to wait before trying again a range another transaction holds. */
#define HELD_RANGE_RETRY_MS		100

static int	my_index = -1;

/* The last thing this worker did was the drain: a range goes next. */
static bool drained_last = false;

/*
 * Shorthand: this worker's slot.  Its fields under workers_lock are changed
 * with that lock held exclusive; this worker, their only writer, may read
 * them without it.  See Locks in base/shmem.h.
 */
#define MY_SLOT (&delaysched_shared->workers[my_index])

/* Set this worker's status, for sched.workers.  Takes workers_lock. */
static void
set_status(ScannerStatus status)
{
	LWLockAcquire(delaysched_shared->workers_lock, LW_EXCLUSIVE);
	MY_SLOT->status = status;
	LWLockRelease(delaysched_shared->workers_lock);
}

/* Unmark range r's holder if it is this worker.  Takes ranges_lock. */
static void
release_range(int r)
{
	LWLockAcquire(delaysched_shared->ranges_lock, LW_EXCLUSIVE);
	if (delaysched_shared->ranges[r].holder == my_index)
		delaysched_shared->ranges[r].holder = -1;
	LWLockRelease(delaysched_shared->ranges_lock);
}

/*
 * Give up the drain if this worker holds it, and let the next worker run
 * it at once: it did not finish.  workers_lock held exclusive.
 */
static void
drop_drain(int index)
{
	if (delaysched_shared->drainer == index)
	{
		delaysched_shared->drainer = -1;
		delaysched_write_time(&delaysched_shared->drain_at, DT_NOBEGIN);
	}
}

/*
 * before_shmem_exit callback: tell backends this worker is gone, and give
 * up the range it was working on (its transaction, and so its row lock,
 * has ended by now).  Takes ranges_lock, then workers_lock.
 */
static void
worker_detach(int code, Datum arg)
{
	pg_atomic_write_u64(&MY_SLOT->sleep_until, 0);
	if (MY_SLOT->range >= 0)
		release_range(MY_SLOT->range);
	LWLockAcquire(delaysched_shared->workers_lock, LW_EXCLUSIVE);
	drop_drain(my_index);
	MY_SLOT->draining = false;
	MY_SLOT->pid = 0;
	MY_SLOT->range = -1;
	MY_SLOT->status = SCANNER_STOPPED;
	LWLockRelease(delaysched_shared->workers_lock);
}

/*
 * Take slot "index" of this database's scanners for this process; false if
 * another worker has it.  Takes ranges_lock, then workers_lock.
 */
static bool
worker_attach(int index)
{
	if (index < 0 || index >= DELAYSCHED_MAX_WORKERS)
		return false;
	LWLockAcquire(delaysched_shared->workers_lock, LW_EXCLUSIVE);
	if (delaysched_shared->workers[index].pid != 0)
	{
		LWLockRelease(delaysched_shared->workers_lock);
		return false;
	}
	my_index = index;
	drop_drain(index);
	MY_SLOT->draining = false;
	MY_SLOT->pid = MyProcPid;
	MY_SLOT->latch = MyLatch;
	MY_SLOT->status = SCANNER_DELIVERING;
	MY_SLOT->range = -1;
	LWLockRelease(delaysched_shared->workers_lock);

	/* A predecessor that died without detaching may have left a range marked. */
	LWLockAcquire(delaysched_shared->ranges_lock, LW_EXCLUSIVE);
	for (int r = 0; r < DELAYSCHED_MAX_RANGES; r++)
		if (delaysched_shared->ranges[r].holder == index)
			delaysched_shared->ranges[r].holder = -1;
	LWLockRelease(delaysched_shared->ranges_lock);

	/* The latch is visible before sleep_until can be non-zero (base/shmem.h). */
	pg_write_barrier();
	pg_atomic_write_u64(&MY_SLOT->sleep_until, 0);
	pg_atomic_write_u64(&MY_SLOT->delivered, 0);
	pg_atomic_write_u64(&MY_SLOT->ticks, 0);
	before_shmem_exit(worker_detach, (Datum) 0);
	return true;
}

/* count_ranges: the extension is not installed, or sched.pointer was locked */
#define RANGES_NO_EXTENSION		(-1)
#define RANGES_LOCKED			(-2)

/*
 * In a transaction of its own: is the extension installed, and with how
 * many ranges?  0 when it is at another version than this library's,
 * RANGES_NO_EXTENSION when it is not installed.
 *
 * RANGES_LOCKED when a lock on sched.pointer was not granted within
 * lock_timeout (a prepared DROP EXTENSION holds it until COMMIT or ROLLBACK
 * PREPARED, a user's LOCK TABLE until its transaction ends): the error is
 * logged and the worker asks again a moment later.  Any other error ends
 * the worker, and the launcher's backoff paces its restarts.
 */
static int
count_ranges(void)
{
	MemoryContext caller_context = CurrentMemoryContext;
	volatile int nranges = 0;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, "delaysched: looking for the extension");

		if (!delaysched_extension_installed())
			nranges = RANGES_NO_EXTENSION;
		else if (delaysched_schema_ready())
		{
			bool		isnull;

			if (SPI_execute("SELECT count(*)::int FROM sched.pointer", true, 1) != SPI_OK_SELECT ||
				SPI_processed != 1)
				elog(ERROR, "could not count the ranges in sched.pointer");
			nranges = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 1, &isnull));
			nranges = Min(nranges, DELAYSCHED_MAX_RANGES);
		}

		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		if (!delaysched_caught_lock_timeout(caller_context))
			PG_RE_THROW();
		delaysched_recover_from_error(caller_context);
		nranges = RANGES_LOCKED;
	}
	PG_END_TRY();
	pgstat_report_activity(STATE_IDLE, NULL);
	return nranges;
}


typedef struct TickCall
{
	TickRequest *request;
	TickResult *result;
} TickCall;

static void
tick_work(void *arg)
{
	TickCall   *call = (TickCall *) arg;

	delaysched_tick(call->request, call->result);
}

/* Run one tick in its own transaction and fill *result (see delaysched_run_in_transaction). */
static bool
run_tick(TickRequest *request, TickResult *result)
{
	TickCall	call = {request, result};

	return delaysched_run_in_transaction("delaysched: delivering due tasks", tick_work, &call);
}

/* When worker 0 next looks at the xmin horizon (horizon.c). */
static TimestampTz next_horizon_check = 0;

static void
horizon_work(void *arg)
{
	next_horizon_check = delaysched_check_horizon(*(TimestampTz *) arg);
}

typedef struct DrainCall
{
	TimestampTz now;
	DrainResult *result;
} DrainCall;

static void
drain_work(void *arg)
{
	DrainCall  *call = (DrainCall *) arg;

	delaysched_drain(call->now, delaysched_batch_size, call->result);
}

/* Run the drain in its own transaction and fill *result (see delaysched_run_in_transaction). */
static bool
run_drain(TimestampTz now, DrainResult *result)
{
	DrainCall	call = {now, result};

	return delaysched_run_in_transaction("delaysched: draining parked tasks", drain_work, &call);
}

/* Count a tick (or a drain) for sched.workers.  No lock: atomics. */
static void
count_tick(TimestampTz now, int64 delivered)
{
	delaysched_write_time(&MY_SLOT->last_tick, now);
	pg_atomic_fetch_add_u64(&MY_SLOT->delivered, (int64) delivered);
	pg_atomic_fetch_add_u64(&MY_SLOT->ticks, 1);
}

/*
 * Become the drainer if the drain is due and no other worker runs it.
 * Takes workers_lock.
 */
static bool
take_drain(TimestampTz now)
{
	bool		mine = false;

	/* Not due: no lock (a commit lowering it now wakes this worker). */
	if (delaysched_read_time(&delaysched_shared->drain_at) > now)
		return false;
	LWLockAcquire(delaysched_shared->workers_lock, LW_EXCLUSIVE);
	if (delaysched_shared->drainer < 0 &&
		delaysched_read_time(&delaysched_shared->drain_at) <= now)
	{
		delaysched_shared->drainer = my_index;
		/* Commits from now on lower it again. */
		delaysched_write_time(&delaysched_shared->drain_at, DT_NOEND);
		MY_SLOT->draining = true;
		MY_SLOT->status = SCANNER_DELIVERING;
		pg_atomic_write_u64(&MY_SLOT->sleep_until, 0);
		mine = true;
	}
	LWLockRelease(delaysched_shared->workers_lock);
	return mine;
}

/* The drain is over; count it as a tick.  Takes workers_lock. */
static void
finish_drain(TimestampTz now, TimestampTz next, int64 delivered)
{
	delaysched_lower_time(&delaysched_shared->drain_at, next);
	LWLockAcquire(delaysched_shared->workers_lock, LW_EXCLUSIVE);
	delaysched_shared->drainer = -1;
	MY_SLOT->draining = false;
	LWLockRelease(delaysched_shared->workers_lock);
	count_tick(now, delivered);
}

/*
 * When a range next needs a tick: a commit reported a task, its next task
 * falls due, its next sweep or lease expiry comes -- but not before a retry
 * time set when another transaction held it.  ranges_lock held by the
 * caller.
 */
static TimestampTz
range_due_at(RangeState *range, TimestampTz sweep_every)
{
	TimestampTz due = Min(delaysched_read_time(&range->wake_at), range->next_due);

	due = Min(due, range->next_sweep);
	due = Min(due, range->last_sweep + sweep_every);
	return Max(due, range->retry_at);
}

/*
 * Pick the range that has waited longest among those due by now and free
 * (but first one where a task not of its backlog has fallen due, see
 * RangeState.urgent_at, or one with no backlog), mark this worker its
 * holder and take what the range knows (*wake_at, the cursor, its sweep
 * times).  Returns -1 if none is due, with *next set to the earliest time
 * one will be (for a free range; a held one is its holder's business), and
 * this worker marked sleeping until then.
 *
 * Takes ranges_lock for the walk, then workers_lock for this worker's slot.
 * Before it sleeps, the worker's side of the wake-up protocol (base/shmem.h):
 * publish sleep_until, then look again, without a lock, at the wake times
 * that backends lower.
 */
static int
pick_range(TimestampTz now, TimestampTz sweep_every, TimestampTz *next,
		   TimestampTz *wake_at, TickCursor *cursor, RangeState *copy)
{
	int			best = -1;
	TimestampTz best_due = DT_NOEND;
	TimestampTz best_urgent = DT_NOEND;
	int			nranges;
	bool		drain_free;
	TimestampTz soonest;

	/* Per range seen free: its retry time; DT_NOEND for a held one. */
	TimestampTz not_before[DELAYSCHED_MAX_RANGES];

	*next = now + sweep_every;
	LWLockAcquire(delaysched_shared->ranges_lock, LW_EXCLUSIVE);
	nranges = delaysched_shared->nranges;
	for (int r = 0; r < nranges; r++)
	{
		RangeState *range = &delaysched_shared->ranges[r];
		TimestampTz due;
		TimestampTz urgent;

		not_before[r] = range->holder >= 0 ? DT_NOEND : range->retry_at;
		if (range->holder >= 0)
			continue;
		due = range_due_at(range, sweep_every);

		/*
		 * A range where a task not of its backlog has fallen due goes first
		 * (the earliest such task first): it would otherwise wait for the
		 * worker's turn of every backlogged range.  So does a range with no
		 * backlog that is due: a backlogged range is always due, from the
		 * end of its last tick, and ranks before a task that fell due since.
		 */
		urgent = range->cursor.fair ? range->urgent_at : due;
		if (due <= now && urgent <= now &&
			(best_urgent == DT_NOEND || urgent < best_urgent))
		{
			best = r;
			best_due = due;
			best_urgent = urgent;
		}
		else if (due <= now && best_urgent == DT_NOEND && (best < 0 || due < best_due))
		{
			best = r;
			best_due = due;
		}
		*next = Min(*next, due);
	}
	if (best >= 0)
	{
		RangeState *range = &delaysched_shared->ranges[best];

		range->holder = my_index;
		*wake_at = delaysched_exchange_time(&range->wake_at, DT_NOEND);
		/* A task reported behind the sweep's mark moves the mark back. */
		range->late_from = Min(range->late_from, *wake_at);
		copy->next_due = range->next_due;
		copy->next_sweep = range->next_sweep;
		copy->last_sweep = range->last_sweep;
		copy->pointer = range->pointer;
		copy->late_from = range->late_from;
		copy->lease_from = range->lease_from;
		copy->purge_done_from = range->purge_done_from;
		copy->purge_dead_from = range->purge_dead_from;
		copy->full_sweep_at = range->full_sweep_at;
		copy->urgent_at = range->urgent_at;
		*cursor = range->cursor;
	}
	LWLockRelease(delaysched_shared->ranges_lock);

	LWLockAcquire(delaysched_shared->workers_lock, LW_EXCLUSIVE);
	/* While a worker drains, the drain's time is its business. */
	drain_free = delaysched_shared->drainer < 0;
	MY_SLOT->range = best;
	MY_SLOT->status = best >= 0 ? SCANNER_DELIVERING : SCANNER_SLEEPING;
	LWLockRelease(delaysched_shared->workers_lock);

	if (best >= 0)
	{
		pg_atomic_write_u64(&MY_SLOT->sleep_until, 0);
		return best;
	}

	/*
	 * Publish the wake-up time (the exchange is a full barrier), then look
	 * again: a backend that lowered a time after the walk either reads this
	 * sleep_until and sets the latch, or its time is seen here.
	 */
	(void) pg_atomic_exchange_u64(&MY_SLOT->sleep_until, (uint64) *next);
	soonest = *next;
	for (int r = 0; r < nranges; r++)
	{
		if (not_before[r] == DT_NOEND)
			continue;
		soonest = Min(soonest, Max(delaysched_read_time(&delaysched_shared->ranges[r].wake_at),
								   not_before[r]));
	}
	if (drain_free)
		soonest = Min(soonest, delaysched_read_time(&delaysched_shared->drain_at));
	if (soonest < *next)
	{
		*next = soonest;
		pg_atomic_write_u64(&MY_SLOT->sleep_until, (uint64) soonest);
	}
	return -1;
}

/*
 * When a sweep of range r made at "now" counts as made: the latest point at
 * or before now of the range's own grid, sweep_every apart and offset by
 * (r + phase) / nranges of it.  The next sweep falls due at the next point,
 * so the ranges' sweeps (a few milliseconds each) are spread over the
 * interval.  Counted from the sweeps' own times, they all fell in the same
 * moment once started together, and held every scanner at once: webhooks
 * due then waited up to 45 ms, every second.
 *
 * The phase, in [0.05, 0.95) (so no sweep on a second's boundary, where
 * every range moves its pointer), is the database's: 1/2 for the first
 * served, and for the others the golden-ratio sequence, which spreads any
 * number of databases evenly.  With one phase for all, range r of every
 * database was swept at the same instant: ten databases' sweeps at once
 * on two cores delayed the tasks due then by several milliseconds.
 */
static TimestampTz
sweep_grid_point(int r, int nranges, TimestampTz now, TimestampTz sweep_every)
{
	double		spread = 0.5 + 0.6180339887 * Max(delaysched_database_index, 0);
	double		phase = 0.05 + 0.9 * (spread - floor(spread));
	TimestampTz offset = (TimestampTz) (sweep_every * (r + phase) / Max(nranges, 1));
	TimestampTz into = (now - offset) % sweep_every;

	if (into < 0)
		into += sweep_every;
	return now - into;
}

/*
 * The tick being planned or under way, what plan_tick reads: the range's
 * state as pick_range copied it, and the earliest run_at reported behind
 * its places (wake_at); and what it decides besides the request: whether
 * the sweep searches from the lowest keys (full).
 */
static struct
{
	RangeState *range;
	int			r;
	TimestampTz now;
	TimestampTz sweep_every;
	TimestampTz wake_at;
	bool		full;
} tick_plan;

/*
 * Plan the sweep of the tick in tick_plan: whether it sweeps, from where,
 * and which of the range's places (where its deliveries stopped, and its
 * lanes') a task reported behind them undoes.
 */
static void
plan_tick(TickRequest *request)
{
	const RangeState *range = tick_plan.range;
	TimestampTz now = tick_plan.now;
	TimestampTz wake_at = tick_plan.wake_at;
	TimestampTz sweep_every = tick_plan.sweep_every;
	int			r = tick_plan.r;

	/* (now < last_sweep: the clock went back; do not wait it out.) */
	request->sweep = wake_at < range->pointer ||
		now >= range->next_sweep ||
		now - range->last_sweep >= sweep_every ||
		now < range->last_sweep;
	/* A task reported behind where the range's deliveries stopped. */
	if (request->cursor.valid &&
		wake_at <= (request->cursor.fair ? request->cursor.reach : request->cursor.run_at))
	{
		request->cursor.valid = false;
		request->cursor.nlanes = 0;
	}
	/* ... or behind where the lane of the keyed tasks stopped. */
	if (request->cursor.ahead_valid && wake_at <= request->cursor.ahead_run_at)
	{
		request->cursor.ahead_run_at = wake_at;
		request->cursor.ahead_id = -1;
	}
	/* ... or of the tasks that go first. */
	if (request->cursor.firsts_valid && wake_at <= request->cursor.firsts_run_at)
	{
		request->cursor.firsts_run_at = wake_at;
		request->cursor.firsts_id = -1;
		request->cursor.firsts_next_at = DT_NOBEGIN;
	}

	/*
	 * The sweep starts where the last one left off (late_from,
	 * lease_from), but every delaysched.full_sweep_interval (a minute
	 * unless a test shortens it) from the lowest keys (see "A held
	 * horizon" in sweep.c).
	 */
	tick_plan.full = request->sweep &&
		(now - range->full_sweep_at >= (int64) delaysched_full_sweep_interval_ms * 1000 ||
		 now < range->full_sweep_at);
	request->late_from = tick_plan.full ? DT_NOBEGIN : Min(range->late_from, wake_at);
	/* Its next regular sweep, as finish_range will record it. */
	request->ticked_again_by = sweep_every +
		(request->sweep ? sweep_grid_point(r, delaysched_shared->nranges, now, sweep_every)
		 : range->last_sweep);
	request->lease_from = tick_plan.full ? DT_NOBEGIN : range->lease_from;
	request->purge_done_from = tick_plan.full ? DT_NOBEGIN : range->purge_done_from;
	request->purge_dead_from = tick_plan.full ? DT_NOBEGIN : range->purge_dead_from;
}

/*
 * The tick found, under its lock on the range's row, that a transaction
 * which held the row put tasks behind the pointer from "behind" on
 * (sched.resume: see sched.pointer.behind_from).  That transaction's
 * report (wake_at) is published only after its commit is visible, so this
 * tick may have started without it: plan it again as if it had come.
 */
static void
replan_tick(TickRequest *request, TimestampTz behind)
{
	tick_plan.wake_at = Min(tick_plan.wake_at, behind);
	plan_tick(request);
}

/*
 * Record what a tick on range r learnt and release the range.  wake_at is
 * what pick_range took from the range for this tick; full, whether its sweep
 * searched from the lowest keys.  Takes ranges_lock, then workers_lock.
 */
static void
finish_range(int r, TimestampTz now, bool sweep, bool full, TimestampTz sweep_every,
			 TimestampTz wake_at, const TickResult *tick)
{
	LWLockAcquire(delaysched_shared->ranges_lock, LW_EXCLUSIVE);
	{
		RangeState *range = &delaysched_shared->ranges[r];

		if (!tick->held)
		{
			/*
			 * Someone else has the row: look again a little later, and keep
			 * what commits reported for the tick that did not happen.
			 */
			range->retry_at = TimestampTzPlusMilliseconds(now, HELD_RANGE_RETRY_MS);
			range->next_due = Min(range->next_due, now);
			delaysched_lower_time(&range->wake_at, wake_at);
		}
		else
		{
			range->retry_at = 0;
			range->pointer = tick->time_pointer;
			range->next_due = tick->next_due;
			if (sweep)
			{
				range->last_sweep = sweep_grid_point(r, delaysched_shared->nranges,
													 now, sweep_every);
				range->next_sweep = tick->next_sweep;
				range->late_from = tick->late_from;
				range->lease_from = tick->lease_from;
				range->purge_done_from = tick->purge_done_from;
				range->purge_dead_from = tick->purge_dead_from;
				if (full)
					range->full_sweep_at = now;
			}
			else
				range->next_sweep = Min(range->next_sweep, tick->next_sweep);
			range->cursor = tick->cursor;
			range->urgent_at = tick->urgent_at;
		}
		range->holder = -1;
	}
	LWLockRelease(delaysched_shared->ranges_lock);

	LWLockAcquire(delaysched_shared->workers_lock, LW_EXCLUSIVE);
	MY_SLOT->range = -1;
	LWLockRelease(delaysched_shared->workers_lock);
	count_tick(now, tick->delivered);
}

/*
 * The extension is gone (or not there yet): forget every range.  Takes
 * ranges_lock.
 */
static void
forget_ranges(void)
{
	LWLockAcquire(delaysched_shared->ranges_lock, LW_EXCLUSIVE);
	delaysched_shared->nranges = 0;
	for (int r = 0; r < DELAYSCHED_MAX_RANGES; r++)
		if (delaysched_shared->ranges[r].holder < 0)
			delaysched_reset_range(&delaysched_shared->ranges[r]);
	LWLockRelease(delaysched_shared->ranges_lock);
}

/*
 * Sleep until `until` or until the latch is set.
 *
 * WaitLatch counts whole milliseconds: rounding up woke a worker half a
 * millisecond late on average (the idle workload's lateness), rounding down
 * woke it early to find nothing due.  So the latch is waited on for the whole
 * milliseconds only, and the last fraction of one is slept with pg_usleep,
 * which is as fine as the kernel's timer slack (50 us).  A latch set during
 * that fraction is seen by the next turn of the loop, under a millisecond
 * later.
 */
static void
sleep_until(TimestampTz until)
{
	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		TimestampTz remaining = until - now;
		int			rc;

		if (remaining <= 0)
			break;
		if (remaining < 1000)
		{
			pg_usleep((long) remaining);
			break;
		}
		rc = WaitLatch(MyLatch,
					   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					   (long) Min(remaining / 1000, INT_MAX),
					   PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		if (rc & WL_LATCH_SET)
			break;
	}
}


/*
 * Entry point of a scanner worker; main_arg is its index.
 */
void
delaysched_scanner_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	delaysched_join_database(worker_attach, DatumGetInt32(main_arg));
	pgstat_report_appname("delaysched scanner");
	delaysched_setup_worker_session();

	/*
	 * What the database's ranges knew may be of an installation that is
	 * gone (DROP EXTENSION, then CREATE EXTENSION while the workers were
	 * leaving): look afresh.  The ranges another worker holds keep theirs.
	 */
	forget_ranges();

	drained_last = false;
	for (;;)
	{
		TimestampTz now;
		TimestampTz next;
		TimestampTz wake_at = DT_NOEND;
		TimestampTz sweep_every = (TimestampTz) delaysched_sweep_interval_ms * 1000;
		RangeState	range;
		TickRequest request;
		TickResult	tick;
		int			r;
		int			load_taken;
		TimestampTz load_next;
		int64		handed_before;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		/* The launcher stops a database's workers; this spares a tick. */
		if (!delaysched_database_wanted())
			proc_exit(0);

		if (delaysched_shared->nranges == 0)
		{
			int			nranges = count_ranges();

			if (nranges == RANGES_NO_EXTENSION)
			{
				/* The extension was dropped: this database is served no more. */
				delaysched_stop_database(MyDatabaseId);
				proc_exit(0);
			}
			if (nranges <= 0)
			{
				now = GetCurrentTimestamp();
				next = TimestampTzPlusMilliseconds(now, nranges == RANGES_LOCKED ?
												   DELAYSCHED_ERROR_PAUSE_MS :
												   delaysched_extension_recheck_ms);
				set_status(SCANNER_WAITING_FOR_EXTENSION);
				pg_atomic_write_u64(&MY_SLOT->sleep_until, (uint64) next);
				sleep_until(next);
				continue;
			}
			LWLockAcquire(delaysched_shared->ranges_lock, LW_EXCLUSIVE);
			delaysched_shared->nranges = nranges;
			LWLockRelease(delaysched_shared->ranges_lock);
		}

		now = GetCurrentTimestamp();
		/*
		 * Are this database's gauges to be counted (stats_recount.c), or
		 * prepared transactions' numbers to be added (stats_prepared.c)?
		 */
		if (my_index == 0)
		{
			delaysched_stats_recount_if_needed();
			delaysched_prepared_fold_if_needed();
		}
		if (my_index == 0 && now >= next_horizon_check)
		{
			/* Has anything held back the horizon too long?  (horizon.c) */
			next_horizon_check = now + USECS_PER_SEC;
			delaysched_run_in_transaction("delaysched: checking the xmin horizon",
										  horizon_work, &now);
		}
		if (!drained_last && take_drain(now))
		{
			DrainResult drain;

			if (!run_drain(now, &drain))
			{
				finish_drain(now, DT_NOBEGIN, 0);
				forget_ranges();
				set_status(SCANNER_WAITING_FOR_EXTENSION);
				continue;
			}
			finish_drain(now, drain.next, drain.delivered);
			drained_last = true;
			continue;
		}

		/*
		 * As many deliveries as the database's load allows now (see
		 * stats/load.c): all of a batch but while load control holds
		 * deliveries back.  Waiting for them, the drain keeps its turn
		 * (drained_last): the ranges get the tokens when they come.
		 */
		load_taken = delaysched_load_take(delaysched_batch_size, now, &load_next);
		if (load_taken == 0)
		{
			pg_atomic_write_u64(&MY_SLOT->sleep_until, 0);
			sleep_until(load_next);
			continue;
		}
		drained_last = false;

		r = pick_range(now, sweep_every, &next, &wake_at, &request.cursor, &range);
		if (r < 0)
		{
			delaysched_load_settle(load_taken, 0);
			sleep_until(next);
			continue;
		}

		request.range = r;
		request.now = now;
		request.batch = load_taken;
		/* Each worker takes ranges / workers of the ranges in turn. */
		request.step = Max(1, (int) ((int64) delaysched_batch_size *
									 Min(delaysched_workers, delaysched_shared->nranges) /
									 Max(delaysched_shared->nranges, 1)));
		request.step = Min(request.step, load_taken);
		/*
		 * Every notify type's tasks go through the drain under the global
		 * cap (and a type's while it is held to its consumers' pace:
		 * sched._pace_holds in the statements).
		 */
		request.park_all = delaysched_max_deliveries_per_second > 0;
		request.urgent = range.urgent_at <= now;
		request.shares = true;
		request.retention_s = delaysched_retention_s;
		request.dead_retention_s = delaysched_dead_retention_s;
		tick_plan.range = &range;
		tick_plan.r = r;
		tick_plan.now = now;
		tick_plan.sweep_every = sweep_every;
		tick_plan.wake_at = wake_at;
		plan_tick(&request);
		request.replan = replan_tick;

		handed_before = delaysched_handed_to_workers();
		if (!run_tick(&request, &tick))
		{
			delaysched_load_settle(load_taken, 0);
			release_range(r);
			LWLockAcquire(delaysched_shared->workers_lock, LW_EXCLUSIVE);
			MY_SLOT->range = -1;
			LWLockRelease(delaysched_shared->workers_lock);
			forget_ranges();

			/*
			 * The tick failed (or the extension went): the range waits a
			 * while, so that a tick that fails every time does not keep
			 * the workers from the other ranges.
			 */
			LWLockAcquire(delaysched_shared->ranges_lock, LW_EXCLUSIVE);
			delaysched_shared->ranges[r].retry_at =
				TimestampTzPlusMilliseconds(GetCurrentTimestamp(), DELAYSCHED_ERROR_PAUSE_MS);
			LWLockRelease(delaysched_shared->ranges_lock);
			set_status(SCANNER_WAITING_FOR_EXTENSION);
			continue;
		}
		/* Tasks given to the HTTP and SQL workers were delivered too. */
		delaysched_load_settle(load_taken,
							   tick.delivered + delaysched_handed_to_workers() - handed_before);
		finish_range(r, now, request.sweep, tick_plan.full, sweep_every, tick_plan.wake_at, &tick);
	}
}
