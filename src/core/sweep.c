/*-------------------------------------------------------------------------
 *
 * sweep.c
 *		The sweep, a tick's backstop: the late tasks behind the pointer,
 *		the acknowledgement leases that ran out, and for range 0 the
 *		retention of finished tasks.
 *
 * An idle range.  Every range is swept once a second, in every database
 * served, with nothing due: what such a tick costs is what a served
 * database costs when idle.  A statement on the parent table starts an
 * index scan of every partition (60 by default), about ten times the cost
 * of one on a leaf.  So an idle sweep keeps to the leaves where it can:
 * the late tasks behind the pointer are looked for second by second when
 * they can only lie in the few seconds since the last sweep, and the one
 * search of the lease index (which spans every partition) comes first,
 * telling at once whether any lease ran out (then, and only then, the
 * expiry runs) and when the next one will.
 *
 * A held horizon.  A delivered task's entry stays in the pending index,
 * and an acknowledged task's in the lease index, until vacuum removes
 * them, and vacuum cannot while any transaction holds back the xmin
 * horizon.  Those entries lie behind the pointer (pending) and at or before
 * the leases running out now (leases), so every statement that starts an
 * index scan from the lowest key of its range reads all of them: with an
 * idle snapshot held for ten minutes at 500 tasks/s, hundreds of thousands
 * at every sweep.  So the sweep starts where the previous one left off:
 * the search for late tasks at late_from, the first pending task the
 * previous sweep found behind the pointer (the pointer if none), lowered
 * by the worker to any run_at a commit reported since (wake_at); the
 * expiry at lease_from, the first expired lease the previous sweep could
 * not take (its row held), or that sweep's now.  The search for the next
 * lease expiry looks no further than the next regular sweep.  Retention
 * likewise: the purge of range 0's sweep starts at the cut-offs of the last
 * complete one (less PURGE_MARGIN), for done and for dead tasks.  Tasks that
 * get behind these marks without a report (a firing put off by the drain
 * or a claim, a lease granted by a transaction that committed after the
 * lease ran out) are found by a full sweep, which each range makes every
 * delaysched.full_sweep_interval (a minute), and after a restart.
 *
 * IDENTIFICATION
 *	  src/core/sweep.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "base/guc.h"
#include "core/tick.h"

/*
 * The next purge starts this long before the retention cut-off of the last
 * complete one (µs): a task finished by a transaction that commits that much
 * later than it finished the task is still found (and any other by the full
 * sweep).
 */
#define PURGE_MARGIN		(10 * USECS_PER_SEC)

/*
 * The backstop: deliver up to "limit" pending tasks of the range behind its
 * pointer (added after their second was walked, left by a transaction that
 * held them, returned by a rollback, released by sched.resume, or a
 * schedule's catch-up batch), second by second in (run_at, id) order.  Rows
 * that others hold are stepped over and found again by a later sweep.
 *
 * A tick looks at WALK_MAX_SECONDS seconds at most, so that one range does
 * not keep the others waiting; late tasks spread over more seconds than
 * that (a catch-up batch of a per-second schedule: 1,000 firings in 1,000
 * seconds) set *more, and the range is swept again at once instead of at
 * the next regular sweep, which would deliver them at 64 a second.
 */
int
delaysched_deliver_late(const TickRequest *request, TimestampTz pointer, int limit,
						int64 *notified, TimestampTz *first_lease, TimestampTz *late_from,
						bool *more)
{
	int			range = request->range;
	TimestampTz now = request->now;
	TimestampTz after = request->late_from;
	int			n = 0;

	/*
	 * The next sweep starts at the first late task found here, delivered or
	 * not (its row may be held), or at the pointer if there is none.
	 */
	*late_from = pointer;
	*more = false;
	for (int seconds = 0; n < limit; seconds++)
	{
		TimestampTz next;
		TimestampTz second;
		Delivered	d;

		if (!delaysched_first_pending_before(range, after, pointer, &next))
			break;
		if (seconds == WALK_MAX_SECONDS)
		{
			/* More late seconds than a tick looks at: sweep again at once. */
			*more = true;
			break;
		}
		if (seconds == 0)
			*late_from = next;
		second = delaysched_second_of(next);
		after = Max(after, second);
		d = delaysched_deliver(delaysched_bucket_of(second), range, after, -1,
					Min(second + USECS_PER_SEC, pointer), now, limit - n, request->park_all);
		n += d.count;
		*notified += d.notified;
		*first_lease = Min(*first_lease, d.first_lease);
		after = second + USECS_PER_SEC;
	}
	return n;
}

/*
 * The earliest lease of a range that plan (first_lease or next_lease)
 * finds between from and to; DT_NOEND if none.
 */
static TimestampTz
lease_between(SPIPlanPtr plan, int range, TimestampTz from, TimestampTz to)
{
	Datum		values[3];
	TimestampTz found;

	values[0] = Int16GetDatum((int16) range);
	values[1] = TimestampTzGetDatum(from);
	values[2] = TimestampTzGetDatum(to);
	return delaysched_fetch_timestamp(plan, values, &found) ? found : DT_NOEND;
}

/*
 * The sweep's work after the walk (the late tasks come before it,
 * delaysched_deliver_late): expire the leases that ran out, purge range 0's
 * finished tasks past their retention, and say in *result when to sweep
 * again and where the next sweep starts.  "late" is how many late tasks
 * the tick took, and late_more whether more were left for the next.  SPI
 * connected, the range's row locked.
 */
void
delaysched_sweep(const TickRequest *request, int late, bool late_more, TickResult *result)
{
	Datum		values[6];
	int			expired = 0;
	int			purged = 0;
	TimestampTz sweep_end = TimestampTzPlusMilliseconds(request->now,
														delaysched_sweep_interval_ms);
	TimestampTz first;

	/*
	 * The first lease from where the last sweep left off up to the
	 * next regular sweep: if it has not run out, there is nothing to
	 * expire and it is when to look again (see "An idle range").
	 */
	first = lease_between(delaysched_tick_plans.first_lease, request->range,
						  request->lease_from, sweep_end);
	if (first > request->now)
	{
		result->lease_from = request->now;
		result->next_sweep = Min(result->next_sweep, first);
	}
	else
	{
		values[0] = Int16GetDatum((int16) request->range);
		values[1] = TimestampTzGetDatum(request->now);
		values[2] = Int32GetDatum(request->batch);
		values[3] = TimestampTzGetDatum(request->lease_from);
		expired = delaysched_fetch_int(delaysched_tick_plans.expire_leases, values);

		/*
		 * Every lease that ran out by now is expired, but for rows
		 * others held: the next sweep starts at the first of those, or
		 * at now (leases granted from now on end later; see "A held
		 * horizon" above).
		 */
		if (expired < request->batch)
		{
			TimestampTz held = lease_between(delaysched_tick_plans.first_lease, request->range,
											 request->lease_from, request->now);

			result->lease_from = held == DT_NOEND ? request->now : held;
		}
	}

	if (request->range == 0)
	{
		values[0] = TimestampTzGetDatum(request->now);
		values[1] = Int32GetDatum(request->retention_s);
		values[2] = Int32GetDatum(request->dead_retention_s);
		values[3] = Int32GetDatum(request->batch);
		values[4] = TimestampTzGetDatum(request->purge_done_from);
		values[5] = TimestampTzGetDatum(request->purge_dead_from);
		purged = delaysched_fetch_int(delaysched_tick_plans.purge, values);
		if (purged < request->batch)
		{
			/* Everything past its retention is gone. */
			result->purge_done_from = request->now - PURGE_MARGIN -
				(int64) request->retention_s * USECS_PER_SEC;
			result->purge_dead_from = request->now - PURGE_MARGIN -
				(int64) request->dead_retention_s * USECS_PER_SEC;
		}
	}

	if (late >= request->batch || late_more ||
		expired >= request->batch || purged >= request->batch)
		result->next_sweep = request->now;	/* more to do: again at once */
	else if (first <= request->now)
	{
		/* Leases ran out: when does the next? */
		TimestampTz next_lease = lease_between(delaysched_tick_plans.next_lease, request->range,
											   request->now, sweep_end);

		result->next_sweep = Min(result->next_sweep, next_lease);
	}
}
