/*-------------------------------------------------------------------------
 *
 * tick.h
 *		One tick of the scan on one range (see tick.c).
 *
 * IDENTIFICATION
 *	  src/core/tick.h
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

	/*
	 * The range's row says that a transaction which held it put tasks
	 * behind the pointer from "behind" on (sched.pointer.behind_from): plan
	 * the tick again as if a commit had reported that run_at (the worker's;
	 * NULL for SQL's sched._tick, which sweeps as it is asked).
	 */
	void		(*replan) (struct TickRequest *request, TimestampTz behind);
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
	bool		keyed_walked;	/* the walk (or fair walk) took keyed tasks */

	/* After a sweep: where the next may start (see TickRequest). */
	TimestampTz late_from;
	TimestampTz lease_from;
	TimestampTz purge_done_from;
	TimestampTz purge_dead_from;
} TickResult;

/* What one delivery statement of the walk gave. */
typedef struct Delivered
{
	int			count;			/* rows taken: delivered, or parked */
	int			notified;		/* deliveries and announcements queued */
	TimestampTz last_run_at;	/* the (run_at, id) of the last one */
	int64		last_id;
	TimestampTz first_lease;	/* earliest lease granted; DT_NOEND if none */
	int			keyed;			/* rows taken that have a key */
} Delivered;

/* Sees a delivery statement's rows before they are sent (fair_walk.c). */
typedef void (*DeliveredRowsHook) (SPITupleTable *rows, uint64 nrows, void *arg);

/* The statements of one task partition (bucket). */
typedef struct BucketPlans
{
	SPIPlanPtr	deliver;
	SPIPlanPtr	first_due;
	SPIPlanPtr	fair_deliver;	/* fair_walk.c's; made when first used */
	SPIPlanPtr	ahead_pick;		/* keys_ahead.c's; made when first used */
	SPIPlanPtr	ahead_pick_far;
	SPIPlanPtr	ahead_deliver;
} BucketPlans;

/* The plans this backend keeps, for one extension object (tick_plans.c). */
typedef struct TickPlans
{
	Oid			extension;
	int			nbuckets;
	BucketPlans *buckets;
	SPIPlanPtr	lock_pointer;
	SPIPlanPtr	forget_behind;
	SPIPlanPtr	move_pointer;
	SPIPlanPtr	first_pending;
	SPIPlanPtr	next_lease;
	SPIPlanPtr	first_lease;
	SPIPlanPtr	expire_leases;
	SPIPlanPtr	purge;
} TickPlans;

/*
 * The lane of keyed tasks ahead of a backlog probes the partitions of so
 * many seconds from the backlog's on by name, more by the parent.
 */
#define AHEAD_NEAR_SECONDS	8
/* ... whose parameters come after the statement's first so many. */
#define AHEAD_PICK_PLACES	8

/* Is place (a, a_id) before (b, b_id) in (run_at, id) order? */
static inline bool
place_before(TimestampTz a, int64 a_id, TimestampTz b, int64 b_id)
{
	return a < b || (a == b && a_id < b_id);
}

/* The most seconds one tick walks before it lets the worker look around. */
#define WALK_MAX_SECONDS	64

/* The tick (tick.c). */
extern void delaysched_tick(TickRequest *request, TickResult *result);
extern Datum delaysched_tick_sql(PG_FUNCTION_ARGS);

/* Its statements and their plans (tick_plans.c), the buckets (buckets.c). */
extern TickPlans delaysched_tick_plans;
extern void delaysched_prepare_tick_plans(void);
extern BucketPlans *delaysched_bucket_plans(int bucket);
extern SPIPlanPtr delaysched_fair_plan(int bucket);
extern BucketPlans *delaysched_ahead_plans(int bucket);
extern SPIPlanPtr delaysched_ahead_deliver_plan(int bucket);
extern int	delaysched_bucket_of(TimestampTz t);
extern TimestampTz delaysched_second_of(TimestampTz t);
extern int	delaysched_bucket_among(TimestampTz t, int nbuckets);

/* A delivery statement, and what it sends (delivery.c). */
extern Delivered delaysched_run_delivery(SPIPlanPtr plan, Datum *values, char *nulls,
										 int worker_param, int limit, int bucket,
										 TimestampTz now, DeliveredRowsHook hook, void *arg);
extern Delivered delaysched_deliver(int bucket, int range, TimestampTz after, int64 after_id,
									TimestampTz before, TimestampTz now, int limit,
									bool park_all);
extern int64 delaysched_handed_to_workers(void);

/* The walk (walk.c) and the walk in fair shares (fair_walk.c). */
extern TimestampTz delaysched_walk(const TickRequest *request, TimestampTz pointer, int limit,
								   int per_statement, TickResult *result, int *taken_out);
extern void delaysched_move_pointer(int range, TimestampTz pointer, TimestampTz new_pointer,
									TickResult *result);
extern bool delaysched_fair_walk(const TickRequest *request, TimestampTz pointer,
								 int limit, TickResult *result, TimestampTz *first_lease);

/* The lane of the tasks that go first, ahead of a backlog (firsts_ahead.c). */
typedef struct FirstsPlace
{
	bool		valid;
	TimestampTz run_at;
	int64		id;
	TimestampTz next_at;		/* when it looks again (firsts_ahead.c) */
} FirstsPlace;

extern TimestampTz delaysched_firsts_ahead(const TickRequest *request, int limit,
										   TickResult *result, int *taken_out,
										   FirstsPlace *place);

/* The lane of the keyed tasks ahead of a backlog (keys_ahead.c). */
extern TimestampTz delaysched_keys_ahead(const TickRequest *request, int limit,
										 TickResult *result);
extern bool delaysched_keys_ahead_warm(const TickCursor *cursor, TimestampTz now);

/* The searches of pending tasks (next_due.c). */
extern bool delaysched_first_pending(int range, TimestampTz after, int64 after_id,
									 TimestampTz *run_at);
extern bool delaysched_first_pending_before(int range, TimestampTz from, TimestampTz before,
											TimestampTz *run_at);
extern TimestampTz delaysched_next_due_soon(int range, TimestampTz now);
extern TimestampTz delaysched_next_due_after(int range, TimestampTz now,
											 TimestampTz ticked_again_by);

/* The sweep (sweep.c). */
extern int	delaysched_deliver_late(const TickRequest *request, TimestampTz pointer, int limit,
									int64 *notified, TimestampTz *first_lease,
									TimestampTz *late_from, bool *more);
extern void delaysched_sweep(const TickRequest *request, int late, bool late_more,
							 TickResult *result);

#endif							/* DELAYSCHED_TICK_H */
