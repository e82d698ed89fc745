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
 * (run_at, id) order within the range (of the tasks pending together), a
 * key with tasks in the backlog waits for them, and every other key's
 * tasks do not.  Keyless tasks are left to the walk (between types, the
 * fair walk shares).
 *
 * Where it starts.  Just after the backlog's place's instant, (run_at of
 * the place, the largest id): a burst due at one instant is passed over
 * without reading it.  Its place is then the last task it looked at, or
 * now once it has looked at everything due.  It never goes back over what
 * it passed: a task it left for the walk because its key was held is the
 * walk's, and so are that key's later tasks in the range, which its
 * pending task holds in turn.  A key is held when it has a task in the
 * backlog: at the burst's very instant (the lane starts after it), or
 * behind the place the lane started from.  A commit that reports a task
 * due at or before the lane's place moves it back to that time
 * (scanner.c), so that the task is not left behind the lane for the walk;
 * when the backlog ends the lane ends with it.
 *
 * The probe.  Whether a key is free is one probe per key and statement of
 * task_keyed_idx (biz_type, key, door, run_at, id) of the pending keyed
 * tasks, from the backlog's place up to the key's first task of the
 * statement, in the partitions of those seconds only if they are
 * AHEAD_NEAR_SECONDS at most (tick.h), else in every partition.  The
 * probe starts at the backlog's place, so the entries of the backlog's key
 * that the walk has delivered (dead until vacuum) are not read.
 *
 * What it costs.  Nothing until a type has had a keyed task
 * (sched.biz.keyed, which stays set); then every tick of a backlog, keyed
 * or not, runs the lane: a statement whose generic plan locks every task
 * partition (its probe, on the parent, is pruned at execution), about 0.1 ms
 * when the seconds after the backlog are empty.  The lane reads once the
 * pending tasks after the backlog that it passes, keyless ones included
 * (to find the keyed ones), and locks only those it delivers.
 *
 * Urgency.  While the lane or the walk finds keyed tasks (in the last
 * second: from the burst's first tick), a tick sets urgent_at (the next task due after now in the range, as the fair
 * walk does), so that the workers take the range before the other
 * backlogged ranges when a task falls due, and take a step of it: a free
 * key's task waits for the ticks under way, not for the workers' round of
 * every range.  A keyless backlog keeps whole batches a tick.
 *
 * IDENTIFICATION
 *	  src/core/keys_ahead.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "core/tick.h"

/* The most seconds the lane walks in a tick (as the walk: WALK_MAX_SECONDS). */
#define AHEAD_MAX_SECONDS	WALK_MAX_SECONDS

/* A tick keeps the range urgent this long after the lane last found a keyed task. */
#define AHEAD_WARM_USECS	USECS_PER_SEC

/* The lane in one tick. */
typedef struct Lane
{
	const TickRequest *request;
	TimestampTz backlog_at;		/* the backlog's place: (backlog_at, backlog_id) */
	int64		backlog_id;
	TimestampTz place;			/* the lane's own: (place, place_id) */
	int64		place_id;
	int			looked;			/* keyed tasks looked at in this tick */
	int64		delivered;
	TimestampTz first_lease;
} Lane;

static SPIPlanPtr keyed_plan = NULL;
static Oid	keyed_plan_extension = InvalidOid;

/* Has any type had a keyed task (sched.biz.keyed)?  SPI connected. */
static bool
any_keyed_type(void)
{
	bool		isnull;
	bool		keyed;

	if (keyed_plan == NULL || keyed_plan_extension != delaysched_tick_plans.extension)
	{
		delaysched_free_plan(&keyed_plan);
		keyed_plan = delaysched_prepare_kept("SELECT EXISTS (SELECT FROM sched.biz b WHERE b.keyed)",
											 0, NULL);
		keyed_plan_extension = delaysched_tick_plans.extension;
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

/* Deliver the chosen tasks of a bucket, those still pending and free to take. */
static void
deliver_free(Lane *lane, int bucket, Datum *ids, int nids)
{
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	Delivered	d;

	values[0] = PointerGetDatum(construct_array(ids, nids, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[1] = TimestampTzGetDatum(lane->request->now);
	values[2] = BoolGetDatum(lane->request->park_all);
	d = delaysched_run_delivery(delaysched_ahead_plans(bucket)->ahead_deliver, values, nulls, 3,
								nids, bucket, lane->request->now, NULL, NULL);
	lane->delivered += d.notified;
	lane->first_lease = Min(lane->first_lease, d.first_lease);
}

/*
 * One statement of the lane, in the partition of "second": look at up to
 * "limit" keyed tasks after the lane's place and deliver those whose keys
 * are free.  Moves the place to the last task looked at; returns how many
 * were looked at.
 */
static int
look_in_second(Lane *lane, TimestampTz second, int limit)
{
	int			bucket = delaysched_bucket_of(second);
	BucketPlans *plans = delaysched_ahead_plans(bucket);
	Datum		values[AHEAD_PICK_PLACES + AHEAD_NEAR_SECONDS];
	char		nulls[AHEAD_PICK_PLACES + AHEAD_NEAR_SECONDS];
	SPIPlanPtr	plan;
	Datum	   *free_ids;
	int			nfree = 0;
	int			looked;
	SPITupleTable *rows;

	memset(nulls, ' ', sizeof(nulls));
	values[0] = Int16GetDatum((int16) lane->request->range);
	values[1] = TimestampTzGetDatum(lane->place);
	values[2] = Int64GetDatum(lane->place_id);
	values[3] = TimestampTzGetDatum(second + USECS_PER_SEC);
	values[4] = TimestampTzGetDatum(lane->request->now);
	values[5] = Int32GetDatum(limit);
	values[6] = TimestampTzGetDatum(lane->backlog_at);
	values[7] = Int64GetDatum(lane->backlog_id);
	plan = near_buckets(lane->backlog_at, second, values + AHEAD_PICK_PLACES) ?
		plans->ahead_pick : plans->ahead_pick_far;
	if (SPI_execute_plan(plan, values, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "the keys' lane statement of bucket %d failed", bucket);
	rows = SPI_tuptable;
	looked = (int) SPI_processed;
	free_ids = palloc(sizeof(Datum) * Max(looked, 1));
	for (int i = 0; i < looked; i++)
	{
		bool		isnull;
		HeapTuple	tuple = rows->vals[i];

		lane->place_id = DatumGetInt64(SPI_getbinval(tuple, rows->tupdesc, 1, &isnull));
		lane->place = DatumGetTimestampTz(SPI_getbinval(tuple, rows->tupdesc, 2, &isnull));
		if (DatumGetBool(SPI_getbinval(tuple, rows->tupdesc, 3, &isnull)))
			free_ids[nfree++] = Int64GetDatum(lane->place_id);
	}
	SPI_freetuptable(rows);

	if (nfree > 0)
		deliver_free(lane, bucket, free_ids, nfree);
	pfree(free_ids);
	lane->looked += looked;
	return looked;
}

/*
 * Have the lane or the walk of this cursor's range found keyed tasks within
 * AHEAD_WARM_USECS of now?  While it does, a backlogged tick of the range takes a step (tick.c).
 */
bool
delaysched_keys_ahead_warm(const TickCursor *cursor, TimestampTz now)
{
	return cursor->ahead_valid && cursor->ahead_seen_at != DT_NOBEGIN &&
		now - cursor->ahead_seen_at < AHEAD_WARM_USECS;
}

/*
 * The lane of a worker's tick (see the file header), after its walk: looks
 * at up to "limit" keyed tasks after the backlog that result->cursor
 * describes.  Adds to result->delivered, sets result->cursor's ahead place
 * and, while the lane finds keyed tasks, result->urgent_at; returns the
 * earliest lease granted.  SPI connected.
 */
TimestampTz
delaysched_keys_ahead(const TickRequest *request, int limit, TickResult *result)
{
	TickCursor *cursor = &result->cursor;
	TimestampTz now_second = delaysched_second_of(request->now);
	Lane		lane = {0};

	cursor->ahead_valid = false;
	if (!cursor->valid || !cursor->fair || limit <= 0 || !any_keyed_type())
		return DT_NOEND;

	lane.request = request;
	lane.backlog_at = cursor->run_at;
	lane.backlog_id = cursor->id;
	lane.first_lease = DT_NOEND;
	/* Its own place, if it is after the backlog's instant; else just after. */
	if (request->cursor.ahead_valid && request->cursor.ahead_run_at > cursor->run_at)
	{
		lane.place = request->cursor.ahead_run_at;
		lane.place_id = request->cursor.ahead_id;
	}
	else
	{
		lane.place = cursor->run_at;
		lane.place_id = PG_INT64_MAX;
	}

	for (int walked = 0; walked < AHEAD_MAX_SECONDS && lane.looked < limit; walked++)
	{
		TimestampTz second = delaysched_second_of(lane.place);
		int			room = limit - lane.looked;

		if (second > now_second)
			break;
		if (look_in_second(&lane, second, room) < room && second == now_second)
		{
			/* Everything due is looked at: from now on next time. */
			lane.place = Max(lane.place, request->now);
			lane.place_id = PG_INT64_MAX;
			break;
		}
		if (lane.looked >= limit)
			break;
		/* This second is looked at up to its end: on to the next. */
		lane.place = second + USECS_PER_SEC;
		lane.place_id = -1;
	}

	result->delivered += lane.delivered;
	cursor->ahead_valid = true;
	cursor->ahead_run_at = lane.place;
	cursor->ahead_id = lane.place_id;
	cursor->ahead_seen_at = lane.looked > 0 || result->keyed_walked ? request->now :
		(request->cursor.ahead_valid ? request->cursor.ahead_seen_at : DT_NOBEGIN);
	if (result->urgent_at == DT_NOEND && delaysched_keys_ahead_warm(cursor, request->now))
		result->urgent_at = delaysched_next_due_soon(request->range, request->now);
	return lane.first_lease;
}
