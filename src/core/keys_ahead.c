/*-------------------------------------------------------------------------
 *
 * keys_ahead.c
 *		The lane of the keyed tasks ahead of a backlog: while a range has
 *		more due than its ticks deliver, a task with a key due after the
 *		backlog goes out in its tick, unless its key has tasks in the
 *		backlog.
 *
 * Why.  The walk delivers a range in (run_at, id) order, and the fair walk
 * shares it by type.  When key A of a type has 200,000 tasks due at once, a
 * task of key B of the same type due a moment later sits behind all of
 * them in that order: it waits for A's whole backlog, seconds.  Keys need
 * no definition and may be millions, so they cannot have places of their
 * own as types do in the fair walk.
 *
 * What.  After the walk (or the fair walk) of a worker's tick that leaves
 * the range with a backlog (the cursor is fair), this lane walks the
 * seconds from its own place up to now, a leaf partition per statement,
 * and looks at the keyed tasks there in (run_at, id) order, at most a step
 * of them a tick.  A task is delivered (or parked, as the walk would) at
 * once when its key is free: no task of its type and key in the range is
 * pending between the backlog's place and it.  Else it is left for the
 * walk, which reaches it in its order.  So a key's tasks still go out in
 * (run_at, id) order within the range, a key with tasks in the backlog
 * waits for it, and every other key's tasks do not.  Keyless tasks are
 * left to the walk (between types, the fair walk shares).
 *
 * Where it starts.  Just after the backlog's place's instant, (run_at of
 * the place, the largest id): a burst due at one instant is passed over
 * without reading it.  Its place is then the last task it looked at.  A
 * commit that reports a task due at or before it moves it back to that
 * time (scanner.c), so that the task is not left behind the lane for the
 * walk; when the backlog ends the lane ends with it.
 *
 * The probe.  Whether a key is free is one probe per key and statement of
 * task_keyed_idx (biz_type, key, run_at, id) of the pending keyed tasks,
 * from the backlog's place up to the key's first task of the statement, in
 * the partitions of those seconds only if they are AHEAD_NEAR_SECONDS at
 * most (tick.h), else in every partition.
 * The probe starts at the backlog's place, so the entries of the backlog's
 * key that the walk has delivered (dead until vacuum) are not read.
 *
 * What it costs.  Nothing without a keyed type.  A key alone whose tasks
 * are due at one instant: one empty probe of a partition or two per tick.
 * A key alone whose tasks are spread over time: the lane reads each of them
 * once and leaves it to the walk, a probe per statement.  A second backlog
 * of free keys ahead of the first is delivered a step a tick beside it; the
 * tasks after that second backlog wait for it as they waited for both
 * before.
 *
 * Urgency.  A tick of a backlog with the lane sets urgent_at (the next task
 * due after now in the range, as the fair walk does), so that the workers
 * take the range before the other backlogged ranges when a task falls due:
 * a free key's task waits for the ticks under way, not for the workers'
 * turn of every range.
 *
 * IDENTIFICATION
 *	  src/core/keys_ahead.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "core/tick.h"

/* The most seconds the lane walks in a tick (as the walk: WALK_MAX_SECONDS). */
#define AHEAD_MAX_SECONDS	WALK_MAX_SECONDS

static SPIPlanPtr keyed_plan = NULL;
static Oid	keyed_plan_extension = InvalidOid;

/* Has any type had a keyed task (sched.biz.keyed)?  SPI connected. */
static bool
any_keyed_type(void)
{
	Oid			extension = get_extension_oid("delaysched", false);
	bool		isnull;
	bool		keyed;

	if (keyed_plan == NULL || keyed_plan_extension != extension)
	{
		delaysched_free_plan(&keyed_plan);
		keyed_plan = delaysched_prepare_kept("SELECT EXISTS (SELECT FROM sched.biz b WHERE b.keyed)",
											 0, NULL);
		keyed_plan_extension = extension;
	}
	if (SPI_execute_plan(keyed_plan, NULL, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read the business types");
	keyed = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_freetuptable(SPI_tuptable);
	return keyed;
}

/*
 * Fill values[0 .. AHEAD_NEAR_SECONDS - 1] with the buckets of the seconds
 * from "from" on up to "to" (the last repeated); false if they are more
 * seconds than that, for the plan that probes every partition.
 */
static bool
near_buckets(TimestampTz from, TimestampTz to, Datum *values)
{
	int64		seconds = (delaysched_second_of(to) - delaysched_second_of(from)) / USECS_PER_SEC + 1;

	for (int i = 0; i < AHEAD_NEAR_SECONDS; i++)
		values[i] = Int16GetDatum((int16) delaysched_bucket_of(from + Min(i, Max(seconds, 1) - 1) * USECS_PER_SEC));
	return seconds <= AHEAD_NEAR_SECONDS;
}

/*
 * One statement of the lane, in the partition of "second": look at up to
 * "limit" keyed tasks after *place and deliver those whose keys are free.
 * Moves *place to the last task looked at; returns how many were looked at,
 * and adds to *delivered and *first_lease.
 */
static int
look_in_second(const TickRequest *request, TimestampTz second, TimestampTz backlog_at,
			   int64 backlog_id, int limit, TimestampTz *place, int64 *place_id,
			   int64 *delivered, TimestampTz *first_lease)
{
	int			bucket = delaysched_bucket_of(second);
	BucketPlans *plans = delaysched_ahead_plans(bucket);
	Datum		values[8 + AHEAD_NEAR_SECONDS];
	char		nulls[8 + AHEAD_NEAR_SECONDS];
	SPIPlanPtr	plan;
	Datum	   *free_ids;
	int			nfree = 0;
	int			looked;
	SPITupleTable *rows;

	memset(nulls, ' ', sizeof(nulls));
	values[0] = Int16GetDatum((int16) request->range);
	values[1] = TimestampTzGetDatum(*place);
	values[2] = Int64GetDatum(*place_id);
	values[3] = TimestampTzGetDatum(second + USECS_PER_SEC);
	values[4] = TimestampTzGetDatum(request->now);
	values[5] = Int32GetDatum(limit);
	values[6] = TimestampTzGetDatum(backlog_at);
	values[7] = Int64GetDatum(backlog_id);
	plan = near_buckets(backlog_at, second, values + 8) ? plans->ahead_pick : plans->ahead_pick_far;
	if (SPI_execute_plan(plan, values, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "the keys' lane statement of bucket %d failed", bucket);
	rows = SPI_tuptable;
	looked = (int) SPI_processed;
	free_ids = palloc(sizeof(Datum) * Max(looked, 1));
	for (int i = 0; i < looked; i++)
	{
		bool		isnull;
		HeapTuple	tuple = rows->vals[i];

		*place_id = DatumGetInt64(SPI_getbinval(tuple, rows->tupdesc, 1, &isnull));
		*place = DatumGetTimestampTz(SPI_getbinval(tuple, rows->tupdesc, 2, &isnull));
		if (DatumGetBool(SPI_getbinval(tuple, rows->tupdesc, 3, &isnull)))
			free_ids[nfree++] = Int64GetDatum(*place_id);
	}
	SPI_freetuptable(rows);

	if (nfree > 0)
	{
		Datum		deliver_values[3];
		char		deliver_nulls[3] = {' ', ' ', ' '};
		Delivered	d;

		deliver_values[0] = PointerGetDatum(construct_array(free_ids, nfree, INT8OID, sizeof(int64),
															FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		deliver_values[1] = BoolGetDatum(request->park_all);
		d = delaysched_run_delivery(plans->ahead_deliver, deliver_values, deliver_nulls, 2,
									nfree, bucket, request->now, NULL, NULL);
		*delivered += d.notified;
		*first_lease = Min(*first_lease, d.first_lease);
	}
	pfree(free_ids);
	return looked;
}

/*
 * The lane of a worker's tick (see the file header), after its walk: looks
 * at up to "limit" keyed tasks after the backlog that result->cursor
 * describes.  Adds to result->delivered, sets result->cursor's ahead place
 * and result->urgent_at; returns the earliest lease granted.  SPI
 * connected.
 */
TimestampTz
delaysched_keys_ahead(const TickRequest *request, int limit, TickResult *result)
{
	TickCursor *cursor = &result->cursor;
	TimestampTz now_second = delaysched_second_of(request->now);
	TimestampTz place;
	int64		place_id;
	TimestampTz first_lease = DT_NOEND;
	int			looked = 0;

	cursor->ahead_valid = false;
	if (!cursor->valid || !cursor->fair || limit <= 0 || !any_keyed_type())
		return DT_NOEND;

	/* Its own place, if it is after the backlog's instant; else just after. */
	if (request->cursor.ahead_valid && request->cursor.ahead_run_at > cursor->run_at)
	{
		place = request->cursor.ahead_run_at;
		place_id = request->cursor.ahead_id;
	}
	else
	{
		place = cursor->run_at;
		place_id = PG_INT64_MAX;
	}

	for (int walked = 0; walked < AHEAD_MAX_SECONDS && looked < limit; walked++)
	{
		TimestampTz second = delaysched_second_of(place);
		int			n;

		if (second > now_second)
			break;
		n = look_in_second(request, second, cursor->run_at, cursor->id, limit - looked,
						   &place, &place_id, &result->delivered, &first_lease);
		looked += n;
		if (looked >= limit || second == now_second)
			break;
		/* This second is looked at up to its end: on to the next. */
		place = second + USECS_PER_SEC;
		place_id = -1;
	}

	cursor->ahead_valid = true;
	cursor->ahead_run_at = place;
	cursor->ahead_id = place_id;
	result->urgent_at = delaysched_next_due_soon(request->range, request->now);
	return first_lease;
}
