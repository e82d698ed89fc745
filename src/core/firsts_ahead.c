/*-------------------------------------------------------------------------
 *
 * firsts_ahead.c
 *		The lane of the tasks that go first: while a range has more due
 *		than its ticks deliver, its due tasks with a priority above 0 and
 *		its schedules' firings go out at the start of each tick, ahead of
 *		the backlog.
 *
 * Why.  The walk delivers a range in (run_at, id) order, and the fair walk
 * shares it by type.  A task of the backlog's own type due after a burst
 * of 500,000 waits for the whole burst in that order: seconds at full
 * speed, minutes while load control holds deliveries back (stats/load.c)
 * or a fixed global cap parks them.  Priority orders the tasks that wait
 * to be delivered (sched._pick); a recurring firing is the work a backlog
 * should hold back least.  So those two kinds have a lane of their own.
 *
 * What.  A worker's tick of a range with a backlog (the cursor is fair)
 * first looks at the range's pending tasks with a priority above 0 or a
 * schedule, due by now, after the backlog's place, at most a step of them
 * in (run_at, id) order, and delivers them (or parks them, as the walk
 * would: for a limited, paused or held type, whose waiting tasks go by
 * priority anyway) highest priority first, before the walk takes the rest
 * of the tick's batch.  Under load control the lane's deliveries are the
 * first of the tick's tokens.  A task of a key goes out ahead of its own
 * key's backlog too: a key's waiting tasks go by priority first as well
 * (doc/tasks.md).  Tasks with a priority of 0 or below stay in the walk's
 * order.
 *
 * The index.  task_firsts_idx (door, run_at, id) has an entry for each
 * pending task with a priority above 0 or a schedule, and for no other, so
 * that the lane reads only its own tasks however long the backlog is.  Its
 * predicate spells state = 'p' as "state IN ('p', 'r') AND state <> 'r'":
 * a plan made while the partitions looked empty cannot then take
 * task_pending_idx (the same columns, every pending task) and filter the
 * backlog.  The statement is on the parent, the index's entries of every
 * partition merged in (run_at, id) order: about 0.1 ms a tick when they
 * are few, the cost of a backlogged tick only.  A task the lane delivered
 * leaves its entry behind until vacuum (or, once no snapshot sees it, the
 * next scan that meets it marks it dead), and the lane's next ticks step
 * over it.
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
 * The range's pending tasks that go first, due by now, after the backlog's
 * place: the first $5 in (run_at, id) order, highest priority first.
 * Parameters: $1 door, $2/$3 after (run_at, id), $4 now, $5 at most this
 * many.
 */
static const char firsts_pick_sql[] =
"SELECT c.id, c.bucket FROM ("
"  SELECT t.id, t.bucket, t.run_at, t.priority FROM sched.task t"
"  WHERE t.door = $1 AND t.state IN ('p', 'r') AND t.state <> 'r'"
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
	d = delaysched_run_delivery(delaysched_ahead_plans(bucket)->ahead_deliver, values, nulls, 3,
								nids, bucket, request->now, NULL, NULL);
	*delivered += d.notified;
	*taken += d.count;
	return d.first_lease;
}

/*
 * The lane of a worker's tick (see the file header), before its walk: up
 * to "limit" tasks that go first, after the backlog request->cursor
 * describes.  Adds to result->delivered, sets *taken_out to the tasks
 * taken (delivered or parked), and returns the earliest lease granted.
 * SPI connected.
 */
TimestampTz
delaysched_firsts_ahead(const TickRequest *request, int limit, TickResult *result,
						int *taken_out)
{
	Datum		values[5];
	SPITupleTable *rows;
	int			npicked;
	int		   *buckets;
	Datum	   *ids;
	Datum	   *group;
	bool	   *done;
	TimestampTz first_lease = DT_NOEND;

	*taken_out = 0;
	if (!request->cursor.valid || !request->cursor.fair || limit <= 0)
		return DT_NOEND;

	values[0] = Int16GetDatum((int16) request->range);
	values[1] = TimestampTzGetDatum(request->cursor.run_at);
	values[2] = Int64GetDatum(request->cursor.id);
	values[3] = TimestampTzGetDatum(request->now);
	values[4] = Int32GetDatum(limit);
	if (SPI_execute_plan(firsts_pick(), values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "the statement of the tasks that go first failed");
	rows = SPI_tuptable;
	npicked = (int) SPI_processed;
	if (npicked == 0)
	{
		SPI_freetuptable(rows);
		return DT_NOEND;
	}
	ids = palloc(sizeof(Datum) * npicked);
	buckets = palloc(sizeof(int) * npicked);
	for (int i = 0; i < npicked; i++)
	{
		bool		isnull;

		ids[i] = Int64GetDatum(DatumGetInt64(SPI_getbinval(rows->vals[i], rows->tupdesc, 1, &isnull)));
		buckets[i] = DatumGetInt16(SPI_getbinval(rows->vals[i], rows->tupdesc, 2, &isnull));
	}
	SPI_freetuptable(rows);

	/*
	 * A statement a bucket, the buckets in the order of their first task
	 * (the highest priority first).
	 */
	group = palloc(sizeof(Datum) * npicked);
	done = palloc0(sizeof(bool) * npicked);
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
