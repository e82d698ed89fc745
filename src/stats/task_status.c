/*-------------------------------------------------------------------------
 *
 * task_status.c
 *		sched._task_status(): where an unfinished task is, in one word, for
 *		the status column of sched.tasks.
 *
 * state says what the row is (pending, delivered); status says why it is
 * waiting, from the row, its type's definition, and two facts only shared
 * memory has: whether the task sits in an HTTP worker's hand-off ring
 * (base/shmem.h), and how many deliveries of its type await
 * acknowledgement (the gauges of stats.c, against max_concurrency).
 *
 *	 state 'p'	 run_at ahead:  waiting, or retry_wait after a failed attempt
 *				 run_at passed: paused, or due (the scanner takes it next)
 *	 state 'r'	 paused; claimable (pull); at_concurrency_cap; throttled (a
 *				 rate limit, or delaysched.max_deliveries_per_second for a
 *				 notify type); waiting_for_http_slot (http)
 *	 state 'd'	 lease_expired (the sweep redelivers it); for http,
 *				 handed_to_http_worker (in the ring, not started) or
 *				 request_in_flight; else awaiting_ack
 *
 * doc/monitoring.md lists them with what an operator can do about each.
 *
 * Any role may call it (see base/caller.c), with any arguments: for a type
 * the session's role may not read it answers NULL, and it names a task in
 * a hand-off ring only once it has found the task, of the type it was
 * given, in sched.task -- a ring knows ids, not types.
 *
 * IDENTIFICATION
 *	  src/stats/task_status.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "base/guc.h"
#include "base/shmem.h"
#include "stats/stats.h"

PG_FUNCTION_INFO_V1(delaysched_task_status_sql);

/*
 * Is task "id" in a hand-off ring of this database's HTTP workers?  If so,
 * *bucket is the bucket the ring says it is in.
 */
static bool
in_handoff_ring(int64 id, int16 *bucket)
{
	bool		found = false;

	if (!delaysched_current_database() || delaysched_http_slots == NULL)
		return false;
	for (int i = 0; i < delaysched_http_workers && !found; i++)
	{
		HttpWorkerSlot *slot = &delaysched_http_slots[i];

		LWLockAcquire(slot->lock, LW_SHARED);
		for (uint64 k = slot->handoff_tail; k < slot->handoff_head; k++)
		{
			if (slot->handoff[k % HTTP_HANDOFF_RING].id == id)
			{
				*bucket = slot->handoff[k % HTTP_HANDOFF_RING].bucket;
				found = true;
				break;
			}
		}
		LWLockRelease(slot->lock);
	}
	return found;
}

/*
 * Is task "id" of bucket "bucket" in sched.task, of type biz_type?  For a
 * caller that may read only some types, before it is told a task is in a
 * ring.
 */
static bool
task_is_of_type(int64 id, int16 bucket, const char *biz_type)
{
	Oid			types[3] = {INT2OID, INT8OID, TEXTOID};
	Datum		values[3];
	bool		found;

	values[0] = Int16GetDatum(bucket);
	values[1] = Int64GetDatum(id);
	values[2] = CStringGetTextDatum(biz_type);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	delaysched_execute_as_owner(delaysched_extension_owner(),
								"SELECT FROM sched.task t"
								" WHERE t.bucket OPERATOR(pg_catalog.=) $1"
								" AND t.id OPERATOR(pg_catalog.=) $2"
								" AND t.biz_type OPERATOR(pg_catalog.=) $3",
								3, types, values);
	found = SPI_processed > 0;
	SPI_finish();
	return found;
}

/* Do the deliveries of biz_type awaiting acknowledgement fill max_concurrency? */
static bool
at_concurrency_cap(const char *biz_type, int32 max_concurrency)
{
	int64		gauges[SS_COUNT];

	return delaysched_stats_gauges(MyDatabaseId, biz_type, gauges) &&
		gauges[SS_STATE_DELIVERED] >= max_concurrency;
}

/*
 * sched._task_status(id, biz_type, state, run_at, attempt, lease_until,
 *					  delivery, paused, rate_limited, max_concurrency)
 * RETURNS text
 */
Datum
delaysched_task_status_sql(PG_FUNCTION_ARGS)
{
	int64		id;
	char		biz_type[NAMEDATALEN];
	char		state;
	TimestampTz run_at;
	int32		attempt;
	bool		leased = !PG_ARGISNULL(5);
	TimestampTz lease_until = leased ? PG_GETARG_TIMESTAMPTZ(5) : 0;
	char	   *delivery = PG_ARGISNULL(6) ? "notify" : text_to_cstring(PG_GETARG_TEXT_PP(6));
	bool		paused = !PG_ARGISNULL(7) && PG_GETARG_BOOL(7);
	bool		rate_limited = !PG_ARGISNULL(8) && PG_GETARG_BOOL(8);
	bool		capped = !PG_ARGISNULL(9);
	int32		max_concurrency = capped ? PG_GETARG_INT32(9) : 0;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	const ReadableTypes *readable;
	const char *status;
	int16		bucket;

	/* (NOT NULL columns of sched.task: NULL only from a direct call) */
	for (int i = 0; i <= 4; i++)
		if (PG_ARGISNULL(i))
			PG_RETURN_NULL();
	id = PG_GETARG_INT64(0);
	state = PG_GETARG_CHAR(2);
	run_at = PG_GETARG_TIMESTAMPTZ(3);
	attempt = PG_GETARG_INT32(4);
	readable = delaysched_readable_types(fcinfo);
	text_to_cstring_buffer(PG_GETARG_TEXT_PP(1), biz_type, NAMEDATALEN);
	if (!delaysched_may_read(readable, biz_type))
		PG_RETURN_NULL();
	switch (state)
	{
		case 'p':
			if (run_at > now)
				status = attempt > 0 ? "retry_wait" : "waiting";
			else
				status = paused ? "paused" : "due";
			break;
		case 'r':
			if (paused)
				status = "paused";
			else if (strcmp(delivery, "pull") == 0)
				status = "claimable";
			else if (capped && at_concurrency_cap(biz_type, max_concurrency))
				status = "at_concurrency_cap";
			else if (rate_limited ||
					 (strcmp(delivery, "notify") == 0 && delaysched_max_deliveries_per_second > 0))
				status = "throttled";
			else if (strcmp(delivery, "http") == 0)
				status = "waiting_for_http_slot";
			else if (strcmp(delivery, "sql") == 0)
				status = "waiting_for_sql_worker";
			else
				status = "throttled";
			break;
		case 'd':
			if (leased && lease_until <= now)
				status = "lease_expired";
			else if (strcmp(delivery, "http") == 0)
				status = in_handoff_ring(id, &bucket) &&
					(readable->all || task_is_of_type(id, bucket, biz_type)) ?
					"handed_to_http_worker" : "request_in_flight";
			else if (strcmp(delivery, "sql") == 0)
				status = "running";
			else
				status = "awaiting_ack";
			break;
		default:
			status = "unknown";
			break;
	}
	PG_RETURN_TEXT_P(cstring_to_text(status));
}
