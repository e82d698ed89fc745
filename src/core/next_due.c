/*-------------------------------------------------------------------------
 *
 * next_due.c
 *		The searches of a range's pending tasks: the first after a place,
 *		the first in one second, the late ones behind the pointer, and the
 *		next due time after a tick, with the far search and its kept answer.
 *
 * The next due time.  After the walk, the tick probes the rest of the
 * current second and the next second, one partition each; beyond them,
 * the far search looks at the whole table, and its answer is kept a while
 * (far_due).  The far search is spared when the range is ticked again
 * anyway before those two seconds are over (its next regular sweep, once
 * a second by default): that tick probes the seconds then ahead, so a
 * task beyond them is found in time without a search of the whole table.
 *
 * IDENTIFICATION
 *	  src/core/next_due.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "base/shmem.h"
#include "core/tick.h"

/*
 * The sweep looks for late tasks a partition at a time over at most this
 * many seconds behind the pointer, and over more by the parent.
 */
#define LATE_PROBE_SECONDS	3

/* The far search's answer is used again for at most this long (µs). */
#define FAR_RECHECK			USECS_PER_SEC

/* The earliest pending task of a range after (after, after_id), any bucket. */
bool
delaysched_first_pending(int range, TimestampTz after, int64 after_id, TimestampTz *run_at)
{
	Datum		values[3];

	values[0] = Int16GetDatum((int16) range);
	values[1] = TimestampTzGetDatum(after);
	values[2] = Int64GetDatum(after_id);
	return delaysched_fetch_timestamp(delaysched_tick_plans.first_pending, values, run_at);
}

/* The earliest pending task of a range in [from, before), within one second. */
static bool
first_due_in_second(int range, TimestampTz from, TimestampTz before, TimestampTz *run_at)
{
	Datum		values[3];

	values[0] = Int16GetDatum((int16) range);
	values[1] = TimestampTzGetDatum(from);
	values[2] = TimestampTzGetDatum(before);
	return delaysched_fetch_timestamp(delaysched_bucket_plans(delaysched_bucket_of(from))->first_due, values, run_at);
}

/*
 * The earliest pending task of a range at or after horizon (at least
 * DELAYSCHED_FAR_AHEAD after now), DT_NOEND if none: the far search.  A
 * search of the whole table merges an index scan of every partition, which
 * would cost more than the rest of the tick, so its answer is kept in the
 * range's shared state and used again while it is younger than
 * FAR_RECHECK, still at or after the horizon, and no commit has reported
 * an earlier task that far ahead (far_added, see wake.c).  A task
 * scheduled nearer than DELAYSCHED_FAR_AHEAD before the tick started is
 * before the horizon, where the caller looks itself, and one committed
 * after the tick started wakes the range again anyway.  Takes ranges_lock
 * (base/shmem.h) twice, for a few fields, not across the search.
 */
static TimestampTz
far_due(int range, TimestampTz horizon, TimestampTz now)
{
	RangeState *state = NULL;
	TimestampTz found = DT_NOEND;
	bool		known = false;

	Assert(horizon >= now + DELAYSCHED_FAR_AHEAD);
	if (delaysched_shared != NULL && range < DELAYSCHED_MAX_RANGES)
	{
		TimestampTz far_added;

		state = &delaysched_shared->ranges[range];
		LWLockAcquire(delaysched_shared->ranges_lock, LW_EXCLUSIVE);
		far_added = delaysched_read_time(&state->far_added);
		if (state->far_checked_at != 0 && now >= state->far_checked_at &&
			now < state->far_checked_at + FAR_RECHECK &&
			state->far_due >= horizon && far_added >= horizon)
		{
			found = Min(state->far_due, far_added);
			known = true;
		}
		else
		{
			/* The search below sees every commit reported so far. */
			delaysched_write_time(&state->far_added, DT_NOEND);
		}
		LWLockRelease(delaysched_shared->ranges_lock);
	}
	if (known)
		return found;

	if (!delaysched_first_pending(range, horizon, -1, &found))
		found = DT_NOEND;
	if (state != NULL)
	{
		LWLockAcquire(delaysched_shared->ranges_lock, LW_EXCLUSIVE);
		state->far_due = found;
		state->far_checked_at = now;
		LWLockRelease(delaysched_shared->ranges_lock);
	}
	return found;
}

/*
 * When the range's next pending task is due, after now, if it is within the
 * rest of the current second or the next one (one partition each); DT_NOEND
 * if none is.
 */
TimestampTz
delaysched_next_due_soon(int range, TimestampTz now)
{
	TimestampTz second = delaysched_second_of(now);
	TimestampTz found;

	if (first_due_in_second(range, now + 1, second + USECS_PER_SEC, &found) ||
		first_due_in_second(range, second + USECS_PER_SEC, second + 2 * USECS_PER_SEC, &found))
		return found;
	return DT_NOEND;
}

/*
 * When the range's next pending task is due, after now: looked for in the
 * rest of the current second and in the next one, one partition each, and
 * only if both are empty by the far search.  DT_NOEND if none.
 */
TimestampTz
delaysched_next_due_after(int range, TimestampTz now, TimestampTz ticked_again_by)
{
	TimestampTz horizon = delaysched_second_of(now) + 2 * USECS_PER_SEC;
	TimestampTz found = delaysched_next_due_soon(range, now);

	if (found != DT_NOEND)
		return found;

	/*
	 * Ticked again before the horizon, the range probes the seconds then
	 * ahead: nothing is due before the horizon, and what is after it is
	 * that tick's to find.
	 */
	if (ticked_again_by < horizon)
		return horizon;
	return far_due(range, horizon, now);
}

/*
 * The earliest pending task of a range in [from, before), DT_NOEND if none.
 * The search behind the pointer: over a few seconds, probed a partition at
 * a time (see "An idle range" in sweep.c); over more, by the parent.
 */
bool
delaysched_first_pending_before(int range, TimestampTz from, TimestampTz before, TimestampTz *run_at)
{
	if (from >= before)
		return false;
	if (from > before - LATE_PROBE_SECONDS * USECS_PER_SEC)
	{
		for (TimestampTz second = delaysched_second_of(from); second < before; second += USECS_PER_SEC)
			if (first_due_in_second(range, Max(from, second),
									Min(second + USECS_PER_SEC, before), run_at))
				return true;
		return false;
	}

	/*
	 * The second at "from" first, one partition: walking a backlog second by
	 * second (a catch-up batch of a per-second schedule), the next late task
	 * is most often there, and the search by the parent starts an index scan
	 * of every partition, most of the cost of delivering it.
	 */
	if (first_due_in_second(range, from, delaysched_second_of(from) + USECS_PER_SEC, run_at))
		return true;
	return delaysched_first_pending(range, from, -1, run_at) && *run_at < before;
}
