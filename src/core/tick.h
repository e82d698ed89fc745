/*-------------------------------------------------------------------------
 *
 * tick.h
 *		One tick of the scan on one range (see tick.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_TICK_H
#define DELAYSCHED_TICK_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "fmgr.h"

#include "base/shmem.h"

typedef struct TickRequest
{
	int			range;
	TimestampTz now;			/* deliver what is due at or before this */
	int			batch;			/* at most this many deliveries per step */

	/*
	 * At most this many per statement of the walk outside a backlog, and
	 * the batch spread over the ranges a worker takes in turn, so that the
	 * first statement of a burst keeps the worker from the other ranges no
	 * longer than a batch would in all.
	 */
	int			step;
	bool		urgent;			/* taken first for a task not of its backlog
								 * (see RangeState.urgent_at): a step only,
								 * so that the task's commit comes soon */
	bool		shares;			/* a burst's first full statement is followed
								 * by the other types' shares (the workers;
								 * SQL's sched._tick only walks) */
	bool		sweep;			/* also the backstop work (see tick.c) */
	int			retention_s;
	int			dead_retention_s;
	TickCursor	cursor;

	/*
	 * Where the sweep starts looking (see "A held horizon" in tick.c): for
	 * late tasks, from this run_at; for expired leases, from this
	 * lease_until.  DT_NOBEGIN for a full sweep.
	 */
	TimestampTz late_from;
	TimestampTz lease_from;
	/* The same for retention (range 0): finished_at of done and of dead. */
	TimestampTz purge_done_from;
	TimestampTz purge_dead_from;
	bool		park_all;		/* park every notify type's tasks for the
								 * drain (delaysched.max_deliveries_per_second
								 * is set) */

	/*
	 * The latest time the range is ticked again whatever happens (its next
	 * regular sweep); DT_NOEND if not known.  The far search is spared when
	 * this comes before the seconds it would look at (see tick.c).
	 */
	TimestampTz ticked_again_by;
} TickRequest;

typedef struct TickResult
{
	bool		held;			/* false: another transaction had the range */
	int64		delivered;
	TimestampTz time_pointer;
	TimestampTz next_due;		/* DT_NOEND if nothing is pending */
	TimestampTz next_sweep;		/* when the range's next sweep is due at the
								 * latest: the next lease expiry, or now when
								 * a sweep batch was full; DT_NOEND if
								 * nothing asks */
	TickCursor	cursor;
	TimestampTz urgent_at;		/* after a fair tick: the next due task not
								 * of the backlog (see fair_walk.c);
								 * DT_NOEND otherwise */

	/* After a sweep: where the next may start (see TickRequest). */
	TimestampTz late_from;
	TimestampTz lease_from;
	TimestampTz purge_done_from;
	TimestampTz purge_dead_from;
} TickResult;

/*
 * The second half of every statement of the walk (tick.c, fair_walk.c),
 * after a CTE "picked" (ids of one leaf partition, %s, locked) is opened:
 * deliver the picked tasks as their types say.  park_all and worker are
 * the statement's parameters saying whether every notify type's tasks are
 * parked, and which HTTP worker http tasks may be leased to (NULL: park
 * them all; see http_handoff.c).
 *
 * The update goes by primary key: joining it to the chosen rows could plan
 * a hash join over the partition.  Which http tasks are leased to the HTTP
 * worker, sched._handoff_lease says row by row, within the places reserved
 * for the statement, giving the same answer for a row every time it is
 * asked.  The rows it does not deliver it parks, in the same update: the
 * transition is DELAYSCHED_LEASE_OR_PARK (lease.h), written once for every
 * delivery.  (Two updates, one for the leased rows and one for the rest,
 * cost a notify type's tick 40% more CPU, for the second update's start-up
 * and hash joins.)  The rows come back in (run_at, id) order, in the
 * columns DC_* of tick.c.
 */
#define DELAYSCHED_DELIVER_PICKED(park_all, worker) \
"), kinds AS (" \
"  SELECT b.name, b.channel, b.ack_timeout, b.timeout, b.delivery = 'pull' AS pull, b.paused," \
"         (b.rate_limit IS NOT NULL OR b.max_concurrency IS NOT NULL OR " park_all ") AS limited," \
"         b.delivery = 'http' AS http," \
"         (b.delivery <> 'notify' OR b.paused OR b.rate_limit IS NOT NULL" \
"          OR b.max_concurrency IS NOT NULL OR " park_all ") AS parks," \
"         (b.delivery = 'http' AND NOT b.paused AND b.rate_limit IS NULL" \
"          AND b.max_concurrency IS NULL AND " worker " IS NOT NULL) AS handable" \
"  FROM sched.biz b" \
"), taken AS (" \
"  UPDATE sched.%s t SET " \
DELAYSCHED_LEASE_OR_PARK("(NOT k.parks OR k.handable AND sched._handoff_lease(t.id))", \
						 "pg_catalog.clock_timestamp()", \
						 "CASE WHEN k.handable AND sched._handoff_lease(t.id)" \
						 " THEN sched._http_lease(k.timeout) ELSE k.ack_timeout END", \
						 "CASE WHEN k.handable AND sched._handoff_lease(t.id) THEN " worker " END") \
"  FROM kinds k" \
"  WHERE t.id = ANY (ARRAY(SELECT picked.id FROM picked)) AND k.name = t.biz_type" \
"  RETURNING t.id, t.biz_type, t.run_at, t.payload, t.attempt, t.lease_until," \
"            k.channel, k.pull, k.paused, k.limited, k.http, k.http AND t.state = 'd' AS handed," \
"            t.schedule" \
") SELECT * FROM taken ORDER BY taken.run_at, taken.id"

/* What one delivery statement of the walk gave. */
typedef struct Delivered
{
	int			count;			/* rows taken: delivered, or parked */
	int			notified;		/* deliveries and announcements queued */
	TimestampTz last_run_at;	/* the (run_at, id) of the last one */
	int64		last_id;
	TimestampTz first_lease;	/* earliest lease granted; DT_NOEND if none */
} Delivered;

/* Sees a delivery statement's rows before they are sent (fair_walk.c). */
typedef void (*DeliveredRowsHook) (SPITupleTable *rows, uint64 nrows, void *arg);

extern Delivered delaysched_run_delivery(SPIPlanPtr plan, Datum *values, char *nulls,
										 int worker_param, int limit, int bucket,
										 TimestampTz now, DeliveredRowsHook hook, void *arg);
extern const char delaysched_fair_deliver_sql[];
extern SPIPlanPtr delaysched_fair_plan(int bucket);
extern TimestampTz delaysched_second_of(TimestampTz t);
extern int	delaysched_bucket_of(TimestampTz t);
extern void delaysched_move_pointer(int range, TimestampTz pointer, TimestampTz new_pointer,
									TickResult *result);
extern TimestampTz delaysched_next_due_soon(int range, TimestampTz now);
extern TimestampTz delaysched_next_due_after(int range, TimestampTz now,
											 TimestampTz ticked_again_by);
extern bool delaysched_fair_walk(const TickRequest *request, TimestampTz pointer,
								 int limit, TickResult *result, TimestampTz *first_lease);
extern void delaysched_tick(const TickRequest *request, TickResult *result);
extern Datum delaysched_tick_sql(PG_FUNCTION_ARGS);

#endif							/* DELAYSCHED_TICK_H */
