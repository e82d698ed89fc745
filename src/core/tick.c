/*-------------------------------------------------------------------------
 *
 * tick.c
 *		One tick of the scan on one range, in the caller's transaction: lock
 *		the range's time pointer, walk it up to now delivering what falls
 *		due, and when asked sweep the range (tasks behind the pointer,
 *		expired acknowledgement leases, and for range 0 retention).
 *
 * The scanner workers call delaysched_tick() directly; sched._tick() is the
 * same for SQL, so that the isolation specs can race it against users'
 * statements.
 *
 * Locking.  The tick locks the range's row of sched.pointer FOR UPDATE SKIP
 * LOCKED.  While its transaction lasts no other worker works on the range;
 * if another transaction has the row the tick does nothing and reports
 * held = false.  Task rows are taken FOR UPDATE SKIP LOCKED too, so a claim,
 * cancel or acknowledgement in progress is stepped over, never waited for.
 *
 * The parts of a tick have files of their own: the statements and their
 * kept plans (tick_plans.c, with the buckets' arithmetic in buckets.c),
 * the walk (walk.c), the walk in fair shares after a backlog
 * (fair_walk.c), the lanes of the tasks that go first (firsts_ahead.c)
 * and of the keyed tasks (keys_ahead.c) ahead of a backlog, a delivery
 * statement and what it sends (delivery.c), the searches for the next due
 * task (next_due.c), and the sweep (sweep.c).  The design of each is
 * written at the top of its file.
 *
 * IDENTIFICATION
 *	  src/core/tick.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "core/tick.h"

PG_FUNCTION_INFO_V1(delaysched_tick_sql);

/*
 * A walk statement of this tick came back full: a burst has begun in the
 * range.  Before the worker leaves it, the types with tasks due there get
 * their shares of half a step (no more than the "room" left of the batch),
 * in fair shares from where the walk stopped.  Else a task of another type
 * due with the burst, after it in (run_at, id) order, would wait for every
 * range's first statement of the burst before the range's next tick served
 * it (fair_walk.c).  Half a step: every range's first tick of the burst is
 * that much longer, and the last range's wait is the others' first ticks
 * (in runs of TAP 021, a step let a neighbour's task due with a burst of
 * 300,000 wait up to 44 ms, half a step up to 32).  Nothing more is done
 * when the burst's type is the only one with pending tasks.  Returns the
 * earliest lease granted.
 */
static TimestampTz
share_the_onset(const TickRequest *request, int room, TickResult *result)
{
	TickRequest onset = *request;
	TimestampTz first_lease = DT_NOEND;

	onset.cursor = result->cursor;
	onset.cursor.nlanes = 0;
	onset.urgent = false;
	if (!delaysched_fair_walk(&onset, result->time_pointer, Min(room, Max(request->step / 2, 1)),
							  result, &first_lease))
		return DT_NOEND;
	return first_lease;
}

/*
 * Lock the range's row of sched.pointer (values[0]: the range), skipping
 * it if another transaction has it; false if it did.  *pointer is the time
 * pointer; *behind the run_at from which a transaction that held the row
 * put tasks behind it (behind_from), DT_NOEND if none.
 */
static bool
lock_range(Datum *values, TimestampTz *pointer, TimestampTz *behind)
{
	bool		isnull;
	Datum		value;

	if (SPI_execute_plan(delaysched_tick_plans.lock_pointer, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not lock the time pointer of range %d", DatumGetInt32(values[0]));
	if (SPI_processed == 0)
		return false;
	*pointer = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	*behind = isnull ? DT_NOEND : DatumGetTimestampTz(value);
	return true;
}

/*
 * Clear the range's behind_from mark (values[0]: the range) once this
 * tick's search for late tasks started at or before it ("searched": it
 * ran).  A worker's search that stopped short (more) is fine: where it
 * stopped, at or before every task it left, is the range's next start,
 * and it sweeps again at once.  SQL's sched._tick keeps no such place: its
 * search must have found them all.  A mark at or after the pointer is the
 * walk's to find.
 */
static void
forget_behind_if_searched(const TickRequest *request, Datum *values, TimestampTz pointer,
						  TimestampTz behind, bool searched, bool more)
{
	bool		walk_finds_them = behind >= pointer;
	bool		swept_from_it = request->sweep && searched && request->late_from <= behind &&
		(request->replan != NULL || !more);

	if (!walk_finds_them && !swept_from_it)
		return;
	if (SPI_execute_plan(delaysched_tick_plans.forget_behind, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not clear the late mark of range %d", request->range);
}

/*
 * One tick on request->range, in the caller's transaction (with a snapshot
 * pushed).  The extension must be installed.
 */
void
delaysched_tick(TickRequest *request, TickResult *result)
{
	Datum		values[1];
	TimestampTz pointer;
	TimestampTz behind;
	TimestampTz first_lease = DT_NOEND;
	TimestampTz walked_lease;
	int			late = 0;
	bool		late_more = false;
	int			batch = request->batch;
	int			firsts = 0;
	FirstsPlace firsts_place = {false, 0, 0, 0};

	memset(result, 0, sizeof(*result));
	result->next_due = DT_NOEND;
	result->urgent_at = DT_NOEND;
	result->next_sweep = DT_NOEND;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	delaysched_prepare_tick_plans();

	values[0] = Int32GetDatum(request->range);
	result->held = lock_range(values, &pointer, &behind);
	if (!result->held)
	{
		SPI_finish();
		return;
	}

	/*
	 * Tasks put behind the pointer by a transaction that held this row
	 * (sched.resume), told here rather than by its wake-up alone, which
	 * comes only after its commit is visible: a tick that began in between
	 * would sweep from where the last sweep stopped, deliver the later of
	 * them first, and leave the earlier ones to the next sweep.  The worker
	 * plans the tick again; the mark is cleared below, by the late tasks'
	 * search that started from it.
	 */
	if (behind != DT_NOEND && request->replan != NULL)
		request->replan(request, behind);
	/* Where this tick's sweep starts; what it did not reach, the next one. */
	result->late_from = request->late_from;
	result->lease_from = request->lease_from;
	result->purge_done_from = request->purge_done_from;
	result->purge_dead_from = request->purge_dead_from;

	/*
	 * In a backlog, the tasks that go first (a priority above 0, or a
	 * firing) before anything else (firsts_ahead.c): a step a tick, and no
	 * more than half the batch (all of a batch of 1), so that the walk
	 * still moves the backlog on.  (The workers'; SQL's sched._tick only
	 * walks.)
	 */
	if (request->shares)
		first_lease = delaysched_firsts_ahead(request,
											  Min(Max(request->step, 1), Max(batch / 2, 1)),
											  result, &firsts, &firsts_place);
	batch -= firsts;

	/*
	 * Late tasks next: every one of them was due before anything the walk
	 * will find, and a range delivers in run_at order (but for the tasks
	 * that go first).  A sweep that filled what the lane left of the batch,
	 * or found none left, has more to do at once.
	 */
	if (request->sweep)
	{
		if (batch > 0)
			late = delaysched_deliver_late(request, pointer, batch, &result->delivered,
										   &first_lease, &result->late_from, &late_more);
		late_more |= late >= batch;
	}
	if (behind != DT_NOEND)
		forget_behind_if_searched(request, values, pointer, behind, batch > 0, late_more);
	/*
	 * After a backlog, in fair shares while other types wait, else a whole
	 * batch a statement; otherwise a step a statement, so that the first
	 * statement of a burst does not keep the other ranges waiting for a
	 * whole batch (see "The walk" in walk.c).  (Not inside Min(), a macro: it
	 * would walk twice.)
	 */
	if (!request->cursor.fair ||
		!delaysched_fair_walk(request, pointer, batch - late, result, &walked_lease))
	{
		int			walked;
		int			room;
		int			limit = batch - late;

		/*
		 * A backlogged range takes a step a tick, as in the fair walk, when
		 * it is urgent or while its lane of keyed tasks finds some
		 * (keys_ahead.c): a task not of its backlog then waits for the
		 * ticks under way, not for whole batches.
		 */
		if (request->cursor.fair &&
			(request->urgent || delaysched_keys_ahead_warm(&request->cursor, request->now)))
			limit = Min(limit, Max(request->step, 1));
		walked_lease = delaysched_walk(request, pointer, limit,
							request->cursor.fair ? request->batch : request->step, result,
							&walked);
		room = limit - walked;
		if (request->shares && !request->cursor.fair && result->cursor.fair && room > 0)
			walked_lease = Min(walked_lease, share_the_onset(request, room, result));
	}
	first_lease = Min(first_lease, walked_lease);

	/*
	 * In a backlog, the keyed tasks after it whose keys have none in it
	 * (keys_ahead.c): a step a tick.  (The workers'; SQL's sched._tick only
	 * walks.)
	 */
	if (request->shares)
	{
		TimestampTz lane_lease = delaysched_keys_ahead(request, Max(request->step, 1), result);

		first_lease = Min(first_lease, lane_lease);
	}

	/* Where the next tick's lane of the tasks that go first starts. */
	result->cursor.firsts_valid = firsts_place.valid && result->cursor.valid && result->cursor.fair;
	result->cursor.firsts_run_at = firsts_place.run_at;
	result->cursor.firsts_id = firsts_place.id;
	result->cursor.firsts_next_at = firsts_place.next_at;

	/*
	 * The leases this tick granted: the worker must look again when the
	 * first of them runs out, sweep or not.
	 */
	result->next_sweep = first_lease;

	if (request->sweep)
		delaysched_sweep(request, late, late_more, result);

	SPI_finish();
}

/*
 * sched._tick(range smallint, now timestamptz, batch int, sweep boolean,
 *			   retention_s int, dead_retention_s int,
 *			   cursor_run_at timestamptz, cursor_id bigint, park_all boolean,
 *			   OUT held boolean, OUT delivered bigint, OUT time_pointer timestamptz,
 *			   OUT next_due timestamptz, OUT next_sweep timestamptz,
 *			   OUT cursor_run_at timestamptz, OUT cursor_id bigint)
 *
 * A worker's tick, for SQL (tests).  A NULL cursor means none.
 */
Datum
delaysched_tick_sql(PG_FUNCTION_ARGS)
{
	TickRequest request;
	TickResult	result;
	TupleDesc	desc;
	Datum		values[7];
	bool		nulls[7] = {false};

	for (int i = 0; i < 6; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("only the cursor arguments of sched._tick may be null")));
	request.range = PG_GETARG_INT16(0);
	request.now = PG_GETARG_TIMESTAMPTZ(1);
	request.batch = PG_GETARG_INT32(2);
	request.step = request.batch;
	request.urgent = false;
	request.shares = false;
	request.sweep = PG_GETARG_BOOL(3);
	request.retention_s = PG_GETARG_INT32(4);
	request.dead_retention_s = PG_GETARG_INT32(5);
	request.cursor.valid = !PG_ARGISNULL(6) && !PG_ARGISNULL(7);
	request.cursor.run_at = request.cursor.valid ? PG_GETARG_TIMESTAMPTZ(6) : 0;
	request.cursor.id = request.cursor.valid ? PG_GETARG_INT64(7) : 0;
	/* (SQL's ticks always walk: the fair shares are the workers'.) */
	request.cursor.fair = false;
	request.cursor.nlanes = 0;
	request.cursor.ahead_valid = false;
	request.cursor.firsts_valid = false;
	request.park_all = !PG_ARGISNULL(8) && PG_GETARG_BOOL(8);
	request.replan = NULL;
	/* Always a full sweep, and the far search when it is asked. */
	request.ticked_again_by = DT_NOEND;
	request.late_from = DT_NOBEGIN;
	request.lease_from = DT_NOBEGIN;
	request.purge_done_from = DT_NOBEGIN;
	request.purge_dead_from = DT_NOBEGIN;
	if (request.batch < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch must be at least 1")));
	if (TIMESTAMP_NOT_FINITE(request.now))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("now must be finite")));

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	delaysched_tick(&request, &result);

	values[0] = BoolGetDatum(result.held);
	if (!result.held)
	{
		for (int i = 1; i < 7; i++)
			nulls[i] = true;
	}
	else
	{
		values[1] = Int64GetDatum(result.delivered);
		values[2] = TimestampTzGetDatum(result.time_pointer);
		values[3] = TimestampTzGetDatum(result.next_due);
		nulls[3] = (result.next_due == DT_NOEND);
		values[4] = TimestampTzGetDatum(result.next_sweep);
		nulls[4] = (result.next_sweep == DT_NOEND);
		values[5] = TimestampTzGetDatum(result.cursor.run_at);
		values[6] = Int64GetDatum(result.cursor.id);
		nulls[5] = nulls[6] = !result.cursor.valid;
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
