/*-------------------------------------------------------------------------
 *
 * delivery.c
 *		Running one delivery statement of the walk, the fair walk or the
 *		sweep, and sending what it delivered: the NOTIFYs, the tasks handed
 *		to an HTTP worker, the parked types noted for the drain, and the
 *		firings of schedules.
 *
 * Deliveries.  A notify type's task is leased (state 'd', attempt + 1,
 * lease_until = now + ack_timeout) and its message queued with NOTIFY; a
 * pull type's task becomes claimable (state 'r') and its channel is told;
 * a paused type's task is parked (state 'r', nothing sent) until
 * sched.resume.  So is the task of a type with a rate limit or a
 * concurrency cap (or of any notify type while the global cap is set), for
 * the drain (drain.c) to deliver as tokens and slots allow: the walk never
 * waits for a token, and a throttled backlog leaves the index it walks.
 * An http type's task is leased to an HTTP worker with free slots, which
 * the commit hands it to (http_handoff.c), unless its type is limited or the
 * workers' slots are full: then it is parked, for the HTTP workers'
 * claims (http_worker.c), which the commit wakes.  An sql type's job is
 * parked for the SQL workers, which the commit wakes and, if its type is
 * not limited, names it to (sql/sql_ready.c).  The NOTIFYs go out
 * when the transaction commits, with the state changes.
 *
 * IDENTIFICATION
 *	  src/core/delivery.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "core/core.h"
#include "core/tick.h"
#include "http/http.h"
#include "schedule/schedule.h"
#include "sql/sql.h"

/* Column numbers of the delivery statement's rows. */
#define DC_ID		1
#define DC_BIZ_TYPE	2
#define DC_RUN_AT	3
#define DC_ATTEMPT	5
#define DC_PULL		8
#define DC_PAUSED	9
#define DC_LIMITED	10
#define DC_HTTP		11
#define DC_HANDED	12
#define DC_SCHEDULE	13
#define DC_SQL		14
#define DC_SQL_READY 15
#define DC_KEY		16

/*
 * Tasks this process's delivery statements gave to the HTTP and SQL
 * workers (handed off, or named to them), since it started: deliveries
 * that load control counts as the tick's own (see the scanner's loop).
 */
static int64 handed_to_workers = 0;

/* Is a bool column of a row true? */
static bool
row_flag(HeapTuple tuple, TupleDesc desc, int column)
{
	bool		isnull;

	return DatumGetBool(SPI_getbinval(tuple, desc, column, &isnull));
}

/*
 * The firings of schedules among the rows the statement delivered for the
 * first time (sent by NOTIFY or handed to an HTTP worker, not parked) go to
 * sched._fired, which makes their next firings as of the tick's now.
 */
static void
fire_schedules(SPITupleTable *rows, uint64 nrows, int bucket, TimestampTz now,
			   FiringBatch *firings)
{
	TupleDesc	desc = rows->tupdesc;

	for (uint64 i = 0; i < nrows; i++)
	{
		HeapTuple	tuple = rows->vals[i];
		bool		isnull;
		Datum		schedule = SPI_getbinval(tuple, desc, DC_SCHEDULE, &isnull);
		bool		sent;

		if (isnull ||
			DatumGetInt32(SPI_getbinval(tuple, desc, DC_ATTEMPT, &isnull)) != 1)
			continue;
		sent = row_flag(tuple, desc, DC_HANDED) ||
			!(row_flag(tuple, desc, DC_PAUSED) || row_flag(tuple, desc, DC_HTTP) ||
			  row_flag(tuple, desc, DC_SQL) || row_flag(tuple, desc, DC_PULL) ||
			  row_flag(tuple, desc, DC_LIMITED));
		if (sent)
			delaysched_firings_add(firings,
								   DatumGetInt64(SPI_getbinval(tuple, desc, DC_ID, &isnull)),
								   (int16) bucket,
								   DatumGetTimestampTz(SPI_getbinval(tuple, desc, DC_RUN_AT, &isnull)),
								   SPI_getbinval(tuple, desc, DC_BIZ_TYPE, &isnull),
								   schedule);
	}
	delaysched_firings_fire(firings, now);
}

/*
 * Run a delivery statement of the walk (plan, with its parameters; the HTTP
 * worker's is number worker_param, counted from 0) that picks at most
 * "limit" tasks of one bucket, and send what it delivered: the schedules
 * whose firings it delivers make their next ones first.  hook, if given,
 * sees the rows first.
 */
Delivered
delaysched_run_delivery(SPIPlanPtr plan, Datum *values, char *nulls, int worker_param,
						int limit, int bucket, TimestampTz now,
						DeliveredRowsHook hook, void *arg)
{
	Delivered	result = {0, 0, 0, 0, DT_NOEND, 0};
	TupleDesc	desc;
	SPITupleTable *rows;
	uint64		nrows;
	FiringBatch firings;
	int			handoff_worker = delaysched_handoff_reserve(limit);

	values[worker_param] = Int16GetDatum((int16) handoff_worker);
	nulls[worker_param] = handoff_worker < 0 ? 'n' : ' ';
	if (SPI_execute_plan(plan, values, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "the delivery statement of bucket %d failed", bucket);
	rows = SPI_tuptable;
	nrows = SPI_processed;
	if (hook != NULL)
		hook(rows, nrows, arg);

	delaysched_firings_init(&firings);
	fire_schedules(rows, nrows, bucket, now, &firings);

	desc = rows->tupdesc;
	for (uint64 i = 0; i < nrows; i++)
	{
		HeapTuple	tuple = rows->vals[i];
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
		TimestampTz run_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 3, &isnull));
		bool		pull = DatumGetBool(SPI_getbinval(tuple, desc, 8, &isnull));
		bool		paused = DatumGetBool(SPI_getbinval(tuple, desc, 9, &isnull));
		bool		limited = DatumGetBool(SPI_getbinval(tuple, desc, 10, &isnull));
		bool		http = DatumGetBool(SPI_getbinval(tuple, desc, 11, &isnull));
		bool		handed = DatumGetBool(SPI_getbinval(tuple, desc, 12, &isnull));
		char	   *biz_type;
		char	   *channel;
		char	   *message;

		result.last_run_at = run_at;
		result.last_id = id;
		if (!heap_attisnull(tuple, DC_KEY, desc))
			result.keyed++;
		if (paused)
			continue;			/* parked until sched.resume: nothing to send */
		if (delaysched_firing_suppressed(&firings, id))
			continue;			/* a firing its schedule skipped (cancelled) */
		if (handed)
		{
			TimestampTz lease_until = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 6, &isnull));

			/* Leased to an HTTP worker, which the commit will hand it to. */
			delaysched_handoff_add(id, (int16) bucket,
								   DatumGetInt32(SPI_getbinval(tuple, desc, 5, &isnull)),
								   lease_until);
			result.first_lease = Min(result.first_lease, lease_until);
			handed_to_workers++;
			continue;
		}
		if (http)
		{
			/* Parked for the HTTP workers, which the commit will wake. */
			delaysched_http_after_commit();
			continue;
		}
		if (row_flag(tuple, desc, DC_SQL))
		{
			/*
			 * Parked for the SQL workers, which the commit will wake, and
			 * named to them if its type is not limited (sql/sql_ready.c).
			 */
			if (row_flag(tuple, desc, DC_SQL_READY))
			{
				delaysched_sql_ready_note(id, (int16) bucket, run_at);
				handed_to_workers++;
			}
			delaysched_sql_after_commit();
			continue;
		}

		biz_type = TextDatumGetCString(SPI_getbinval(tuple, desc, DC_BIZ_TYPE, &isnull));
		if (!pull && limited)
		{
			/* Parked for the drain, which the commit will wake. */
			delaysched_note_parked(biz_type);
			pfree(biz_type);
			continue;
		}
		channel = TextDatumGetCString(SPI_getbinval(tuple, desc, 7, &isnull));
		if (pull)
			message = delaysched_ready_message(biz_type);
		else
		{
			Jsonb	   *payload = DatumGetJsonbP(SPI_getbinval(tuple, desc, 4, &isnull));
			int32		attempt = DatumGetInt32(SPI_getbinval(tuple, desc, 5, &isnull));

			TimestampTz lease = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 6, &isnull));
			Datum		schedule = SPI_getbinval(tuple, desc, DC_SCHEDULE, &isnull);

			int			omitted;

			message = delaysched_delivery_message(id, biz_type, run_at, payload, attempt,
												  isnull ? NULL : TextDatumGetCString(schedule),
												  delaysched_spi_text(tuple, desc, DC_KEY,
																	  CurrentMemoryContext),
												  &omitted);
			if (omitted > 0)
				delaysched_note_payload_omitted(id, (int16) bucket, omitted);
			result.first_lease = Min(result.first_lease, lease);
		}
		/* In run-at order; identical pull announcements fold into one. */
		Async_Notify(channel, message);
		pfree(message);
		pfree(channel);
		pfree(biz_type);
		result.notified++;
	}
	result.count = (int) nrows;
	SPI_freetuptable(rows);
	delaysched_handoff_settle();
	return result;
}

/* See handed_to_workers. */
int64
delaysched_handed_to_workers(void)
{
	return handed_to_workers;
}

/*
 * Deliver up to "limit" pending tasks of one bucket and range with
 * (run_at, id) > (after, after_id), run_at < before and run_at <= now, in
 * (run_at, id) order, skipping rows other transactions hold.  With
 * park_all every notify type's tasks are parked for the drain.
 */
Delivered
delaysched_deliver(int bucket, int range, TimestampTz after, int64 after_id,
				   TimestampTz before, TimestampTz now, int limit, bool park_all)
{
	Datum		values[8];
	char		nulls[8];

	memset(nulls, ' ', sizeof(nulls));	/* no parameter is null */
	values[0] = Int16GetDatum((int16) range);
	values[1] = TimestampTzGetDatum(after);
	values[2] = Int64GetDatum(after_id);
	values[3] = TimestampTzGetDatum(before);
	values[4] = TimestampTzGetDatum(now);
	values[5] = Int32GetDatum(limit);
	values[6] = BoolGetDatum(park_all);
	return delaysched_run_delivery(delaysched_bucket_plans(bucket)->deliver, values, nulls, 7,
								   limit, bucket, now, NULL, NULL);
}
