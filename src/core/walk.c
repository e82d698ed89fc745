/*-------------------------------------------------------------------------
 *
 * walk.c
 *		The walk: a range's pointer moved up to now, second by second, a
 *		leaf partition a statement, delivering what falls due.
 *
 * The walk.  A range's pointer is the start of the first second not yet
 * fully handled.  From the pointer, or from the cursor (where the previous
 * tick stopped delivering, so that a burst of thousands of tasks in one
 * second does not re-read what it already delivered), the walk delivers
 * second by second in (run_at, id) order until it reaches now, has
 * delivered a batch or has walked WALK_MAX_SECONDS seconds.  A second
 * before the current one is done once its due rows are delivered (rows
 * that others hold are left to the sweep), and the pointer moves past it.
 * The workers drop the cursor when a commit reports a task of the range due
 * at or before it.
 *
 * Backlogs.  A statement takes a step at most (TickRequest.step); one that
 * comes back full marks the cursor fair: the range has a backlog.  The same
 * tick then shares half a step among the types with tasks due in the range
 * (share_the_onset, tick.c), and its next ticks go to fair_walk.c, which shares
 * them by type while another type has pending tasks; with one type alone
 * they come back here, a whole batch a statement, until a statement comes
 * back short.
 *
 * IDENTIFICATION
 *	  src/core/walk.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "core/tick.h"

/*
 * Walk the range's pointer up to now (see the top of this file), taking at most
 * "limit" rows (delivered, or parked for a paused type), at most "per_statement"
 * in one statement; adds to delivered and fills time_pointer, next_due and
 * cursor of *result, sets *taken_out to the rows taken, and returns the
 * earliest lease granted.
 */
TimestampTz
delaysched_walk(const TickRequest *request, TimestampTz pointer, int limit,
				int per_statement, TickResult *result, int *taken_out)
{
	int			range = request->range;
	TimestampTz now = request->now;
	TimestampTz now_second = delaysched_second_of(now);
	TimestampTz after;
	int64		after_id;
	TimestampTz first_lease = DT_NOEND;
	TimestampTz new_pointer = pointer;
	int			taken = 0;

	if (request->cursor.valid && request->cursor.run_at >= pointer)
	{
		after = request->cursor.run_at;
		after_id = request->cursor.id;
	}
	else
	{
		after = pointer;
		after_id = -1;
	}

	for (int walked = 0;; walked++)
	{
		TimestampTz second = delaysched_second_of(after);
		int			room = limit - taken;
		Delivered	d;

		if (room <= 0)
		{
			/*
			 * The sweep's late tasks, or the tasks that go first, took the
			 * whole batch: nothing walked, a backlog stays one.
			 */
			result->next_due = now;
			result->cursor.fair = request->cursor.valid && request->cursor.fair;
			break;
		}

		if (second + USECS_PER_SEC < now_second || second > now_second)
		{
			/*
			 * Far behind: jump to the second of the next pending task.  (Or
			 * ahead of now, the clock having gone back: only look.)
			 */
			TimestampTz next;
			bool		found = delaysched_first_pending(range, after, after_id, &next);

			if (!found || next > now)
			{
				/* Every second up to now is drained. */
				new_pointer = Max(new_pointer, now_second);
				result->next_due = found ? next : DT_NOEND;
				break;
			}
			second = delaysched_second_of(next);
			if (after < second)
			{
				after = second;
				after_id = -1;
			}
		}

		room = Min(room, Max(per_statement, 1));
		d = delaysched_deliver(delaysched_bucket_of(second), range, after, after_id, second + USECS_PER_SEC,
					now, room, request->park_all);
		taken += d.count;
		result->delivered += d.notified;
		result->keyed_walked |= d.keyed > 0;
		first_lease = Min(first_lease, d.first_lease);
		if (d.count > 0)
		{
			after = d.last_run_at;
			after_id = d.last_id;
		}

		if (d.count >= room)
		{
			/*
			 * A full statement: more may be due in this second, a backlog,
			 * which the next ticks share out by type if other types wait
			 * (fair_walk.c).
			 */
			new_pointer = Max(new_pointer, second);
			result->next_due = now;
			result->cursor.fair = true;
			break;
		}
		if (second < now_second)
		{
			/* A past second, drained (rows others hold go to the sweep). */
			new_pointer = second + USECS_PER_SEC;
			after = new_pointer;
			after_id = -1;
			if (walked + 1 >= WALK_MAX_SECONDS)
			{
				result->next_due = now;
				break;
			}
			continue;
		}
		/* The current second, drained up to now. */
		new_pointer = Max(new_pointer, second);
		result->next_due = delaysched_next_due_after(range, now, request->ticked_again_by);
		break;
	}

	*taken_out = taken;
	result->cursor.valid = true;
	result->cursor.run_at = after;
	result->cursor.id = after_id;
	/* (In a backlog the worker drops the cursor by its reach: the same here.) */
	result->cursor.reach = after;
	delaysched_move_pointer(range, pointer, new_pointer, result);
	return first_lease;
}

/*
 * Record the range's new pointer, if it moved on from "pointer", and put it
 * in *result.
 */
void
delaysched_move_pointer(int range, TimestampTz pointer, TimestampTz new_pointer,
						TickResult *result)
{
	if (new_pointer > pointer)
	{
		Datum		values[2];

		values[0] = Int32GetDatum(range);
		values[1] = TimestampTzGetDatum(new_pointer);
		if (SPI_execute_plan(delaysched_tick_plans.move_pointer, values, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not move the time pointer of range %d", range);
	}
	result->time_pointer = Max(new_pointer, pointer);
}
