/*-------------------------------------------------------------------------
 *
 * firsts_ahead.c
 *		The lane of the tasks that go first: while a range has more due
 *		than its ticks deliver, its due keyless tasks with a priority above
 *		0 and its schedules' firings go out at the start of each tick,
 *		ahead of the backlog.
 *
 * Why.  The walk delivers a range in (run_at, id) order, and the fair walk
 * shares it by type.  A task of the backlog's own type due after a burst
 * of 500,000 waits for the whole burst in that order: seconds at full
 * speed, minutes while load control holds deliveries back (stats/load.c).
 * Priority orders the tasks that wait
 * to be delivered (sched._pick); a recurring firing is the work a backlog
 * should hold back least.  So those two kinds have a lane of their own.
 *
 * What.  A worker's tick of a range with a backlog (the cursor is fair)
 * first looks at the range's pending tasks without a key and with a
 * priority above 0 or a schedule, due by now, after the backlog's place and
 * after the lane's own, at most a step of them (and half the tick's batch)
 * in (run_at, id) order, and delivers them (or parks them, as the walk
 * would: for a limited, paused or held type, whose waiting tasks go by
 * priority anyway), before the late tasks and the walk take the rest of
 * the batch.  So under load control they take the first of the tick's
 * tokens.  They go in run_at order, a step a tick; among those a tick
 * takes, the highest priority first.  Tasks with a priority of 0 or below
 * keep the walk's order, and so do keyed tasks: a key's tasks go out in
 * run_at order within a range (keys_ahead.c lets a free key's tasks
 * through a backlog).
 *
 * Its place.  The lane starts after the backlog's place, or after its own
 * if that is further on: the last task a full statement read, or now once
 * a statement read everything due (TickCursor.firsts_*).  A commit that
 * reports a task due at or before it moves it back (scanner.c), as for the
 * keys' lane.  A task the lane passed without taking it (another
 * transaction held its row) is the walk's, which reaches it in its order:
 * the lane never makes a task later than the walk would.
 *
 * The index.  task_firsts_idx (door, run_at, id) has an entry for each
 * pending task the lane may take, and for no other, so that it reads none
 * of the backlog however long.  Its predicate spells state = 'p' as "state
 * IN ('p', 'r') AND state <> 'r'": a plan made while the partitions looked
 * empty cannot then take task_pending_idx (the same columns, every pending
 * task) and filter the backlog.  The statement is on the parent, the
 * partitions' entries merged in (run_at, id) order and stopped by the
 * limit.  A task the lane delivered leaves its entry behind until vacuum
 * (or, once no snapshot sees it, the next scan that meets it marks it
 * dead); the lane's own place keeps it from reading them again.
 *
 * What it costs.  The statement locks every task partition (60 by
 * default): about 0.3 ms when there is nothing to take.  Run in every tick
 * of a backlog, that made a keyless burst of 300,000 drain about 15%
 * slower (a range is ticked every few milliseconds).  So after a statement
 * that found everything due taken, the lane looks again FIRSTS_IDLE_MS
 * later, or at the next tick once a commit reports a task due before its
 * place (a task added or rescheduled to now): a task that goes first waits
 * that much at most for the lane to see it fall due, and a task reported
 * due goes at the next tick.
 *
 * IDENTIFICATION
 *	  src/core/firsts_ahead.c
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

/*
 * After a statement that found everything due taken, the lane looks again
 * this long later (ms), or at once when a task is reported due before its
 * place: see "What it costs" above.
 */
#define FIRSTS_IDLE_MS		100

/*
 * The range's pending tasks that go first, due by now, after the backlog's
 * place: the first $5 in (run_at, id) order, highest priority first.
 * Parameters: $1 door, $2/$3 after (run_at, id), $4 now, $5 at most this
 * many.
 */
static const char firsts_pick_sql[] =
"SELECT c.id, c.bucket, c.run_at FROM ("
"  SELECT t.id, t.bucket, t.run_at, t.priority FROM sched.task t"
"  WHERE t.door = $1 AND t.state IN ('p', 'r') AND t.state <> 'r' AND t.key IS NULL"
"    AND (t.priority > 0 OR t.schedule IS NOT NULL)"
"    AND (t.run_at, t.id) > ($2, $3) AND t.run_at <= $4"
"  ORDER BY t.run_at, t.id LIMIT $5) c"
" ORDER BY c.priority DESC, c.run_at, c.id";

static SPIPlanPtr firsts_pick_plan = NULL;
static Oid	firsts_pick_extension = InvalidOid;

static SPIPlanPtr
firsts_pick(void)
{
	if (firsts_pick_plan == NULL || firsts_pick_extension != delaysched_tick_plans.extension)
	{
		Oid			types[] = {INT2OID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT4OID};

		delaysched_free_plan(&firsts_pick_plan);
		firsts_pick_plan = delaysched_prepare_kept(firsts_pick_sql, lengthof(types), types);
		firsts_pick_extension = delaysched_tick_plans.extension;
	}
	return firsts_pick_plan;
}

/*
 * Deliver the picked tasks of one bucket (ids), those still pending, due
 * and free to take; adds to *delivered and *taken, returns the earliest
 * lease granted.
 */
static TimestampTz
deliver_bucket(const TickRequest *request, int bucket, Datum *ids, int nids,
			   int64 *delivered, int *taken)
{
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	Delivered	d;

	values[0] = PointerGetDatum(construct_array(ids, nids, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[1] = TimestampTzGetDatum(request->now);
	values[2] = BoolGetDatum(request->park_all);
	d = delaysched_run_delivery(delaysched_ahead_deliver_plan(bucket), values, nulls, 3,
								nids, bucket, request->now, NULL, NULL);
	*delivered += d.notified;
	*taken += d.count;
	return d.first_lease;
}

/*
 * The lane of a worker's tick (see the file header), before its walk: up
 * to "limit" tasks that go first, after the backlog request->cursor
 * describes (and after the lane's own place).  Adds to result->delivered,
 * sets *taken_out to the tasks taken (delivered or parked) and *place to
 * where the next tick's lane starts, and returns the earliest lease
 * granted.  SPI connected.
 */
TimestampTz
delaysched_firsts_ahead(const TickRequest *request, int limit, TickResult *result,
						int *taken_out, FirstsPlace *place)
{
	const TickCursor *cursor = &request->cursor;
	Datum		values[5];
	SPITupleTable *rows;
	int			npicked;
	int		   *buckets;
	Datum	   *ids;
	Datum	   *group;
	bool	   *done;
	TimestampTz first_lease = DT_NOEND;

	*taken_out = 0;
	place->valid = false;
	if (!cursor->valid || !cursor->fair || limit <= 0)
		return DT_NOEND;

	/* From the backlog's place, or the lane's own if it is further on. */
	place->valid = true;
	place->run_at = cursor->run_at;
	place->id = cursor->id;
	place->next_at = DT_NOBEGIN;
	if (cursor->firsts_valid &&
		place_before(place->run_at, place->id, cursor->firsts_run_at, cursor->firsts_id))
	{
		place->run_at = cursor->firsts_run_at;
		place->id = cursor->firsts_id;
	}
	/* It found nothing more a moment ago, and nothing was reported since. */
	if (cursor->firsts_valid && request->now < cursor->firsts_next_at &&
		request->now >= cursor->firsts_next_at - FIRSTS_IDLE_MS * 1000)
	{
		place->next_at = cursor->firsts_next_at;
		return DT_NOEND;
	}

	values[0] = Int16GetDatum((int16) request->range);
	values[1] = TimestampTzGetDatum(place->run_at);
	values[2] = Int64GetDatum(place->id);
	values[3] = TimestampTzGetDatum(request->now);
	values[4] = Int32GetDatum(limit);
	if (SPI_execute_plan(firsts_pick(), values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "the statement of the tasks that go first failed");
	rows = SPI_tuptable;
	npicked = (int) SPI_processed;
	ids = palloc(sizeof(Datum) * Max(npicked, 1));
	buckets = palloc(sizeof(int) * Max(npicked, 1));
	for (int i = 0; i < npicked; i++)
	{
		HeapTuple	tuple = rows->vals[i];
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(tuple, rows->tupdesc, 1, &isnull));
		TimestampTz run_at = DatumGetTimestampTz(SPI_getbinval(tuple, rows->tupdesc, 3, &isnull));

		ids[i] = Int64GetDatum(id);
		buckets[i] = DatumGetInt16(SPI_getbinval(tuple, rows->tupdesc, 2, &isnull));
		/* A full statement: the next starts after the last it read. */
		if (npicked >= limit && place_before(place->run_at, place->id, run_at, id))
		{
			place->run_at = run_at;
			place->id = id;
		}
	}
	SPI_freetuptable(rows);

	/*
	 * A short one read everything due: the next starts at now (a task
	 * reported due before that moves it back, scanner.c).
	 */
	if (npicked < limit)
	{
		if (place_before(place->run_at, place->id, request->now, PG_INT64_MAX))
		{
			place->run_at = request->now;
			place->id = PG_INT64_MAX;
		}
		place->next_at = TimestampTzPlusMilliseconds(request->now, FIRSTS_IDLE_MS);
	}

	/*
	 * A statement a bucket, the buckets in the order of their first task
	 * (the highest priority first).
	 */
	group = palloc(sizeof(Datum) * Max(npicked, 1));
	done = palloc0(sizeof(bool) * Max(npicked, 1));
	for (int i = 0; i < npicked; i++)
	{
		int			ngroup = 0;

		if (done[i])
			continue;
		for (int j = i; j < npicked; j++)
		{
			if (!done[j] && buckets[j] == buckets[i])
			{
				group[ngroup++] = ids[j];
				done[j] = true;
			}
		}
		first_lease = Min(first_lease,
						  deliver_bucket(request, buckets[i], group, ngroup,
										 &result->delivered, taken_out));
	}
	pfree(done);
	pfree(group);
	pfree(buckets);
	pfree(ids);
	return first_lease;
}
