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
#include "fmgr.h"

/*
 * Where a range's previous tick stopped delivering: the walk resumes after
 * it while it is at or after the range's pointer.
 */
typedef struct TickCursor
{
	bool		valid;
	TimestampTz run_at;
	int64		id;
} TickCursor;

typedef struct TickRequest
{
	int			range;
	TimestampTz now;			/* deliver what is due at or before this */
	int			batch;			/* at most this many deliveries per step */
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

	/* After a sweep: where the next may start (see TickRequest). */
	TimestampTz late_from;
	TimestampTz lease_from;
	TimestampTz purge_done_from;
	TimestampTz purge_dead_from;
} TickResult;

extern void delaysched_tick(const TickRequest *request, TickResult *result);
extern Datum delaysched_tick_sql(PG_FUNCTION_ARGS);

#endif							/* DELAYSCHED_TICK_H */
