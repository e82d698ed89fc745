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
 * Statements.  Every statement a tick runs in the common case targets one
 * leaf partition (sched.task_NNNN, the bucket of one run-at second) through
 * a plan prepared once per backend and bucket and kept.  The same statement
 * on the parent would merge an index scan of every partition and, as a
 * generic plan, lock all of them at every execution; on a leaf it descends
 * one index and locks one table, so the cost of a tick grows with what is
 * due, not with what is pending.  The parent is searched only where a
 * search must span seconds: a pointer more than a second behind (after
 * downtime), the next due task when none is pending in the next two
 * seconds, and the sweep.
 *
 * The walk.  A range's pointer is the start of the first second not yet
 * fully handled.  From the pointer, or from the cursor (where the previous
 * tick stopped delivering, so that a burst of thousands of tasks in one
 * second does not re-read what it already delivered), the walk delivers
 * second by second in (run_at, id) order until it reaches now, has
 * delivered a batch or has walked WALK_MAX_SECONDS seconds.  A second
 * before the current one is done once its due rows are delivered (rows
 * that others hold are left to the sweep), and the pointer moves past it.
 * The workers drop the cursor when a commit reports a task of the range due
 * at or before it.
 *
 * Backlogs.  A statement takes a step at most (TickRequest.step); one that
 * comes back full marks the cursor fair: the range has a backlog.  The same
 * tick then shares half a step among the types with tasks due in the range
 * (share_the_onset), and its next ticks go to fair_walk.c, which shares
 * them by type while another type has pending tasks; with one type alone
 * they come back here, a whole batch a statement, until a statement comes
 * back short.
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
 * claims (http_worker.c), which the commit wakes.  The NOTIFYs go out
 * when the transaction commits, with the state changes.
 *
 * The next due time.  After the walk, the tick probes the rest of the
 * current second and the next second, one partition each; beyond them,
 * the far search looks at the whole table, and its answer is kept a while
 * (far_due).  The far search is spared when the range is ticked again
 * anyway before those two seconds are over (its next regular sweep, once
 * a second by default): that tick probes the seconds then ahead, so a
 * task beyond them is found in time without a search of the whole table.
 *
 * An idle range.  Every range is swept once a second, in every database
 * served, with nothing due: what such a tick costs is what a served
 * database costs when idle.  A statement on the parent table starts an
 * index scan of every partition (60 by default), about ten times the cost
 * of one on a leaf.  So an idle sweep keeps to the leaves where it can:
 * the late tasks behind the pointer are looked for second by second when
 * they can only lie in the few seconds since the last sweep, and the one
 * search of the lease index (which spans every partition) comes first,
 * telling at once whether any lease ran out (then, and only then, the
 * expiry runs) and when the next one will.
 *
 * A held horizon.  A delivered task's entry stays in the pending index,
 * and an acknowledged task's in the lease index, until vacuum removes
 * them, and vacuum cannot while any transaction holds back the xmin
 * horizon.  Those entries lie behind the pointer (pending) and at or before
 * the leases running out now (leases), so every statement that starts an
 * index scan from the lowest key of its range reads all of them: with an
 * idle snapshot held for ten minutes at 500 tasks/s, hundreds of thousands
 * at every sweep.  So the sweep starts where the previous one left off:
 * the search for late tasks at late_from, the first pending task the
 * previous sweep found behind the pointer (the pointer if none), lowered
 * by the worker to any run_at a commit reported since (wake_at); the
 * expiry at lease_from, the first expired lease the previous sweep could
 * not take (its row held), or that sweep's now.  The search for the next
 * lease expiry looks no further than the next regular sweep.  Retention
 * likewise: the purge of range 0's sweep starts at the cut-offs of the last
 * complete one (less PURGE_MARGIN), for done and for dead tasks.  Tasks that
 * get behind these marks without a report (a firing put off by the drain
 * or a claim, a lease granted by a transaction that committed after the
 * lease ran out) are found by a full sweep, which each range makes every
 * delaysched.full_sweep_interval (a minute), and after a restart.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "schedule/firing.h"
#include "base/guc.h"
#include "http/http_handoff.h"
#include "core/lease.h"
#include "core/limiter.h"
#include "base/message.h"
#include "base/shmem.h"
#include "base/spi_plans.h"
#include "core/tick.h"
#include "core/wake.h"

/* The most seconds one tick walks before it lets the worker look around. */
#define WALK_MAX_SECONDS	64

/*
 * The sweep looks for late tasks a partition at a time over at most this
 * many seconds behind the pointer, and over more by the parent.
 */
#define LATE_PROBE_SECONDS	3

/* The far search's answer is used again for at most this long (µs). */
#define FAR_RECHECK			USECS_PER_SEC

/*
 * The next purge starts this long before the retention cut-off of the last
 * complete one (µs): a task finished by a transaction that commits that much
 * later than it finished the task is still found (and any other by the full
 * sweep).
 */
#define PURGE_MARGIN		(10 * USECS_PER_SEC)

/* The statements of one task partition (bucket). */
typedef struct BucketPlans
{
	SPIPlanPtr	deliver;
	SPIPlanPtr	first_due;
	SPIPlanPtr	fair_deliver;	/* fair_walk.c's; made when first used */
} BucketPlans;

/*
 * The plans this backend prepared, for the extension object they were made
 * for: recreating the extension (perhaps with another bucket count) makes
 * them all anew.
 */
static struct
{
	Oid			extension;
	int			nbuckets;
	BucketPlans *buckets;
	SPIPlanPtr	lock_pointer;
	SPIPlanPtr	move_pointer;
	SPIPlanPtr	first_pending;
	SPIPlanPtr	next_lease;
	SPIPlanPtr	first_lease;
	SPIPlanPtr	expire_leases;
	SPIPlanPtr	purge;
} plans;

PG_FUNCTION_INFO_V1(delaysched_tick_sql);

/*
 * Statement text of a task partition; %s is its name.  Parameters:
 * $1 door, $2/$3 deliver after (run_at, id), $4 before run_at, $5 now,
 * $6 at most this many, $7 park every notify type's tasks, $8 the HTTP
 * worker to lease http tasks to (NULL: park them all; see http_handoff.c).
 * The ids are chosen first, in the range's (run_at, id) order; what is
 * done with them is DELAYSCHED_DELIVER_PICKED (tick.h).
 */
static const char deliver_sql[] =
"WITH picked AS ("
"  SELECT t.id FROM sched.%s t"
"  WHERE t.door = $1 AND t.state = 'p' AND (t.run_at, t.id) > ($2, $3)"
"    AND t.run_at < $4 AND t.run_at <= $5"
"  ORDER BY t.run_at, t.id LIMIT $6"
"  FOR UPDATE SKIP LOCKED"
DELAYSCHED_DELIVER_PICKED("$7", "$8");

/* $1 door, $2 at or after run_at, $3 before run_at. */
static const char first_due_sql[] =
"SELECT t.run_at FROM sched.%s t"
" WHERE t.door = $1 AND t.state = 'p' AND t.run_at >= $2 AND t.run_at < $3"
" ORDER BY t.run_at LIMIT 1";

/*
 * Make sure the plans belong to the installed extension; prepare the ones
 * that are not per bucket.  SPI connected.
 */
static void
prepare_plans(void)
{
	Oid			extension = get_extension_oid("delaysched", false);
	bool		isnull;

	if (plans.extension == extension)
		return;

	if (plans.buckets != NULL)
	{
		for (int b = 0; b < plans.nbuckets; b++)
		{
			delaysched_free_plan(&plans.buckets[b].deliver);
			delaysched_free_plan(&plans.buckets[b].first_due);
			delaysched_free_plan(&plans.buckets[b].fair_deliver);
		}
		pfree(plans.buckets);
		plans.buckets = NULL;
	}
	delaysched_free_plan(&plans.lock_pointer);
	delaysched_free_plan(&plans.move_pointer);
	delaysched_free_plan(&plans.first_pending);
	delaysched_free_plan(&plans.next_lease);
	delaysched_free_plan(&plans.first_lease);
	delaysched_free_plan(&plans.expire_leases);
	delaysched_free_plan(&plans.purge);
	plans.extension = InvalidOid;

	if (SPI_execute("SELECT sched._bucket_count()", true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read the bucket count of delaysched");
	plans.nbuckets = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
												 SPI_tuptable->tupdesc, 1, &isnull));
	plans.buckets = MemoryContextAllocZero(TopMemoryContext,
										   sizeof(BucketPlans) * plans.nbuckets);

	{
		Oid			types[] = {INT4OID, TIMESTAMPTZOID};

		plans.lock_pointer = delaysched_prepare_kept(
			"SELECT p.pointer FROM sched.pointer p WHERE p.range_id = $1 FOR UPDATE SKIP LOCKED",
			1, types);
		plans.move_pointer = delaysched_prepare_kept(
			"UPDATE sched.pointer p SET pointer = $2, updated_at = pg_catalog.clock_timestamp()"
			" WHERE p.range_id = $1",
			2, types);
	}
	{
		Oid			types[] = {INT2OID, TIMESTAMPTZOID, INT8OID};

		plans.first_pending = delaysched_prepare_kept(
			"SELECT t.run_at FROM sched.task t"
			" WHERE t.door = $1 AND t.state = 'p' AND (t.run_at, t.id) > ($2, $3)"
			" ORDER BY t.run_at, t.id LIMIT 1",
			3, types);
	}
	{
		Oid			types[] = {INT2OID, TIMESTAMPTZOID, INT4OID, BOOLOID, TIMESTAMPTZOID};
		Oid			next_lease_types[] = {INT2OID, TIMESTAMPTZOID, TIMESTAMPTZOID};

		/*
		 * Strictly later than now: an expired lease that another transaction
		 * holds (an ack in progress) waits for the next regular sweep rather
		 * than waking the worker over and over.  No later than the next
		 * regular sweep, which comes anyway: the leases of acknowledged tasks
		 * stay in the index until vacuum, and a search without an end would
		 * read all of them while the horizon is held.
		 */
		plans.next_lease = delaysched_prepare_kept(
			"SELECT t.lease_until FROM sched.task t"
			" WHERE t.door = $1 AND t.state = 'd' AND t.lease_until > $2"
			"   AND t.lease_until <= $3"
			" ORDER BY t.lease_until LIMIT 1",
			3, next_lease_types);

		/*
		 * The earliest lease in [$2, $3]: before the expiry, whether any ran
		 * out and when the next will; after it, one still there, that is,
		 * one whose row another transaction held (an acknowledgement that
		 * may yet roll back), where the next sweep starts.
		 */
		plans.first_lease = delaysched_prepare_kept(
			"SELECT t.lease_until FROM sched.task t"
			" WHERE t.door = $1 AND t.state = 'd' AND t.lease_until >= $2"
			"   AND t.lease_until <= $3"
			" ORDER BY t.lease_until LIMIT 1",
			3, next_lease_types);
		plans.expire_leases = delaysched_prepare_kept("SELECT sched._expire_leases($1, $2, $3, $4, $5)", 5, types);
	}
	{
		Oid			types[] = {TIMESTAMPTZOID, INT4OID, INT4OID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID};

		plans.purge = delaysched_prepare_kept("SELECT sched._purge($1, $2, $3, $4, $5, $6)", 6, types);
	}
	plans.extension = extension;
}

static BucketPlans *
bucket_plans(int bucket)
{
	BucketPlans *bp = &plans.buckets[bucket];

	if (bp->deliver == NULL)
	{
		char		partition[NAMEDATALEN];
		Oid			deliver_types[] = {INT2OID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID,
		TIMESTAMPTZOID, INT4OID, BOOLOID, INT2OID};
		Oid			first_due_types[] = {INT2OID, TIMESTAMPTZOID, TIMESTAMPTZOID};

		/* The partitions' names, as the install script makes them. */
		snprintf(partition, sizeof(partition), "task_%04d", bucket);
		bp->first_due = delaysched_prepare_kept(psprintf(first_due_sql, partition), 3, first_due_types);
		bp->deliver = delaysched_prepare_kept(psprintf(deliver_sql, partition, partition),
											  8, deliver_types);
	}
	return bp;
}

/* The fair walk's delivery statement of a bucket (fair_walk.c). */
SPIPlanPtr
delaysched_fair_plan(int bucket)
{
	BucketPlans *bp = &plans.buckets[bucket];

	if (bp->fair_deliver == NULL)
	{
		char		partition[NAMEDATALEN];
		Oid			types[] = {INT2OID, TEXTARRAYOID, INT4ARRAYOID, TIMESTAMPTZARRAYOID,
		INT8ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID, INT2OID};

		snprintf(partition, sizeof(partition), "task_%04d", bucket);
		bp->fair_deliver = delaysched_prepare_kept(psprintf(delaysched_fair_deliver_sql,
															partition, partition),
												   lengthof(types), types);
	}
	return bp->fair_deliver;
}

/* The start of t's second. */
TimestampTz
delaysched_second_of(TimestampTz t)
{
	TimestampTz into = t % USECS_PER_SEC;

	return into < 0 ? t - into - USECS_PER_SEC : t - into;
}

/* The bucket of tasks due in t's second, of nbuckets: its Unix second mod nbuckets. */
static int
bucket_among(TimestampTz t, int nbuckets)
{
	int64		unix_seconds = delaysched_second_of(t) / USECS_PER_SEC +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;

	return (int) (((unix_seconds % nbuckets) + nbuckets) % nbuckets);
}

/* The bucket of tasks due in t's second: what sched._bucket(t) computes. */
int
delaysched_bucket_of(TimestampTz t)
{
	return bucket_among(t, plans.nbuckets);
}

/*
 * sched._bucket_of(run_at timestamptz, buckets int) RETURNS smallint, the
 * body of sched._bucket.  In C, so that sched._bucket is inlined into the
 * statements that call it: written in SQL with EXTRACT (a stable function),
 * it was not, and each row ran a SQL function of its own (an eighth of
 * sched.add_many's time).
 */
PG_FUNCTION_INFO_V1(delaysched_bucket_sql);

Datum
delaysched_bucket_sql(PG_FUNCTION_ARGS)
{
	TimestampTz run_at = PG_GETARG_TIMESTAMPTZ(0);
	int32		nbuckets = PG_GETARG_INT32(1);

	if (TIMESTAMP_NOT_FINITE(run_at))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("run_at must be finite")));
	if (nbuckets < 1 || nbuckets > PG_INT16_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the number of buckets must be between 1 and %d", PG_INT16_MAX)));
	PG_RETURN_INT16((int16) bucket_among(run_at, nbuckets));
}

/* Column numbers of the delivery statement's rows. */
#define DC_ID		1
#define DC_RUN_AT	3
#define DC_ATTEMPT	5
#define DC_PULL		8
#define DC_PAUSED	9
#define DC_LIMITED	10
#define DC_HTTP		11
#define DC_HANDED	12
#define DC_SCHEDULE	13

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
			  row_flag(tuple, desc, DC_PULL) || row_flag(tuple, desc, DC_LIMITED));
		if (sent)
			delaysched_firings_add(firings,
								   DatumGetInt64(SPI_getbinval(tuple, desc, DC_ID, &isnull)),
								   (int16) bucket,
								   DatumGetTimestampTz(SPI_getbinval(tuple, desc, DC_RUN_AT, &isnull)),
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
	Delivered	result = {0, 0, 0, 0, DT_NOEND};
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
			continue;
		}
		if (http)
		{
			/* Parked for the HTTP workers, which the commit will wake. */
			delaysched_http_after_commit();
			continue;
		}

		biz_type = TextDatumGetCString(SPI_getbinval(tuple, desc, 2, &isnull));
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

/*
 * Deliver up to "limit" pending tasks of one bucket and range with
 * (run_at, id) > (after, after_id), run_at < before and run_at <= now, in
 * (run_at, id) order, skipping rows other transactions hold.  With
 * park_all every notify type's tasks are parked for the drain.
 */
static Delivered
deliver(int bucket, int range, TimestampTz after, int64 after_id, TimestampTz before,
		TimestampTz now, int limit, bool park_all)
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
	return delaysched_run_delivery(bucket_plans(bucket)->deliver, values, nulls, 7,
								   limit, bucket, now, NULL, NULL);
}

/* The earliest pending task of a range after (after, after_id), any bucket. */
static bool
first_pending(int range, TimestampTz after, int64 after_id, TimestampTz *run_at)
{
	Datum		values[3];

	values[0] = Int16GetDatum((int16) range);
	values[1] = TimestampTzGetDatum(after);
	values[2] = Int64GetDatum(after_id);
	return delaysched_fetch_timestamp(plans.first_pending, values, run_at);
}

/* The earliest pending task of a range in [from, before), within one second. */
static bool
first_due_in_second(int range, TimestampTz from, TimestampTz before, TimestampTz *run_at)
{
	Datum		values[3];

	values[0] = Int16GetDatum((int16) range);
	values[1] = TimestampTzGetDatum(from);
	values[2] = TimestampTzGetDatum(before);
	return delaysched_fetch_timestamp(bucket_plans(delaysched_bucket_of(from))->first_due, values, run_at);
}

/*
 * The earliest pending task of a range at or after horizon (at least
 * DELAYSCHED_FAR_AHEAD after now), DT_NOEND if none: the far search.  A
 * search of the whole table merges an index scan of every partition, which
 * would cost more than the rest of the tick, so its answer is kept in the
 * range's shared state and used again while it is younger than
 * FAR_RECHECK, still at or after the horizon, and no commit has reported
 * an earlier task that far ahead (far_added, see wake.c).  A task
 * scheduled nearer than DELAYSCHED_FAR_AHEAD before the tick started is
 * before the horizon, where the caller looks itself, and one committed
 * after the tick started wakes the range again anyway.  Takes ranges_lock
 * (shmem.h) twice, for a few fields, not across the search.
 */
static TimestampTz
far_due(int range, TimestampTz horizon, TimestampTz now)
{
	RangeState *state = NULL;
	TimestampTz found = DT_NOEND;
	bool		known = false;

	Assert(horizon >= now + DELAYSCHED_FAR_AHEAD);
	if (delaysched_shared != NULL && range < DELAYSCHED_MAX_RANGES)
	{
		TimestampTz far_added;

		state = &delaysched_shared->ranges[range];
		LWLockAcquire(delaysched_shared->ranges_lock, LW_EXCLUSIVE);
		far_added = delaysched_read_time(&state->far_added);
		if (state->far_checked_at != 0 && now >= state->far_checked_at &&
			now < state->far_checked_at + FAR_RECHECK &&
			state->far_due >= horizon && far_added >= horizon)
		{
			found = Min(state->far_due, far_added);
			known = true;
		}
		else
		{
			/* The search below sees every commit reported so far. */
			delaysched_write_time(&state->far_added, DT_NOEND);
		}
		LWLockRelease(delaysched_shared->ranges_lock);
	}
	if (known)
		return found;

	if (!first_pending(range, horizon, -1, &found))
		found = DT_NOEND;
	if (state != NULL)
	{
		LWLockAcquire(delaysched_shared->ranges_lock, LW_EXCLUSIVE);
		state->far_due = found;
		state->far_checked_at = now;
		LWLockRelease(delaysched_shared->ranges_lock);
	}
	return found;
}

/*
 * When the range's next pending task is due, after now, if it is within the
 * rest of the current second or the next one (one partition each); DT_NOEND
 * if none is.
 */
TimestampTz
delaysched_next_due_soon(int range, TimestampTz now)
{
	TimestampTz second = delaysched_second_of(now);
	TimestampTz found;

	if (first_due_in_second(range, now + 1, second + USECS_PER_SEC, &found) ||
		first_due_in_second(range, second + USECS_PER_SEC, second + 2 * USECS_PER_SEC, &found))
		return found;
	return DT_NOEND;
}

/*
 * When the range's next pending task is due, after now: looked for in the
 * rest of the current second and in the next one, one partition each, and
 * only if both are empty by the far search.  DT_NOEND if none.
 */
TimestampTz
delaysched_next_due_after(int range, TimestampTz now, TimestampTz ticked_again_by)
{
	TimestampTz horizon = delaysched_second_of(now) + 2 * USECS_PER_SEC;
	TimestampTz found = delaysched_next_due_soon(range, now);

	if (found != DT_NOEND)
		return found;

	/*
	 * Ticked again before the horizon, the range probes the seconds then
	 * ahead: nothing is due before the horizon, and what is after it is
	 * that tick's to find.
	 */
	if (ticked_again_by < horizon)
		return horizon;
	return far_due(range, horizon, now);
}

/*
 * The earliest pending task of a range in [from, before), DT_NOEND if none.
 * The search behind the pointer: over a few seconds, probed a partition at
 * a time (see "An idle range" above); over more, by the parent.
 */
static bool
first_pending_before(int range, TimestampTz from, TimestampTz before, TimestampTz *run_at)
{
	if (from >= before)
		return false;
	if (from > before - LATE_PROBE_SECONDS * USECS_PER_SEC)
	{
		for (TimestampTz second = delaysched_second_of(from); second < before; second += USECS_PER_SEC)
			if (first_due_in_second(range, Max(from, second),
									Min(second + USECS_PER_SEC, before), run_at))
				return true;
		return false;
	}
	return first_pending(range, from, -1, run_at) && *run_at < before;
}

/*
 * Walk the range's pointer up to now (see the file header), taking at most
 * "limit" rows (delivered, or parked for a paused type), at most "per_statement"
 * in one statement; adds to delivered and fills time_pointer, next_due and
 * cursor of *result, sets *taken_out to the rows taken, and returns the
 * earliest lease granted.
 */
static TimestampTz
walk(const TickRequest *request, TimestampTz pointer, int limit, int per_statement,
	 TickResult *result, int *taken_out)
{
	int			range = request->range;
	TimestampTz now = request->now;
	TimestampTz now_second = delaysched_second_of(now);
	TimestampTz after;
	int64		after_id;
	TimestampTz first_lease = DT_NOEND;
	TimestampTz new_pointer = pointer;
	int			taken = 0;

	if (request->cursor.valid && request->cursor.run_at >= pointer)
	{
		after = request->cursor.run_at;
		after_id = request->cursor.id;
	}
	else
	{
		after = pointer;
		after_id = -1;
	}

	for (int walked = 0;; walked++)
	{
		TimestampTz second = delaysched_second_of(after);
		int			room = limit - taken;
		Delivered	d;

		if (room <= 0)
		{
			/* The sweep's late tasks took the whole batch. */
			result->next_due = now;
			break;
		}

		if (second + USECS_PER_SEC < now_second || second > now_second)
		{
			/*
			 * Far behind: jump to the second of the next pending task.  (Or
			 * ahead of now, the clock having gone back: only look.)
			 */
			TimestampTz next;
			bool		found = first_pending(range, after, after_id, &next);

			if (!found || next > now)
			{
				/* Every second up to now is drained. */
				new_pointer = Max(new_pointer, now_second);
				result->next_due = found ? next : DT_NOEND;
				break;
			}
			second = delaysched_second_of(next);
			if (after < second)
			{
				after = second;
				after_id = -1;
			}
		}

		room = Min(room, Max(per_statement, 1));
		d = deliver(delaysched_bucket_of(second), range, after, after_id, second + USECS_PER_SEC,
					now, room, request->park_all);
		taken += d.count;
		result->delivered += d.notified;
		first_lease = Min(first_lease, d.first_lease);
		if (d.count > 0)
		{
			after = d.last_run_at;
			after_id = d.last_id;
		}

		if (d.count >= room)
		{
			/*
			 * A full statement: more may be due in this second, a backlog,
			 * which the next ticks share out by type if other types wait
			 * (fair_walk.c).
			 */
			new_pointer = Max(new_pointer, second);
			result->next_due = now;
			result->cursor.fair = true;
			break;
		}
		if (second < now_second)
		{
			/* A past second, drained (rows others hold go to the sweep). */
			new_pointer = second + USECS_PER_SEC;
			after = new_pointer;
			after_id = -1;
			if (walked + 1 >= WALK_MAX_SECONDS)
			{
				result->next_due = now;
				break;
			}
			continue;
		}
		/* The current second, drained up to now. */
		new_pointer = Max(new_pointer, second);
		result->next_due = delaysched_next_due_after(range, now, request->ticked_again_by);
		break;
	}

	*taken_out = taken;
	result->cursor.valid = true;
	result->cursor.run_at = after;
	result->cursor.id = after_id;
	/* (In a backlog the worker drops the cursor by its reach: the same here.) */
	result->cursor.reach = after;
	delaysched_move_pointer(range, pointer, new_pointer, result);
	return first_lease;
}

/*
 * Record the range's new pointer, if it moved on from "pointer", and put it
 * in *result.
 */
void
delaysched_move_pointer(int range, TimestampTz pointer, TimestampTz new_pointer,
						TickResult *result)
{
	if (new_pointer > pointer)
	{
		Datum		values[2];

		values[0] = Int32GetDatum(range);
		values[1] = TimestampTzGetDatum(new_pointer);
		if (SPI_execute_plan(plans.move_pointer, values, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not move the time pointer of range %d", range);
	}
	result->time_pointer = Max(new_pointer, pointer);
}

/*
 * The backstop: deliver up to "limit" pending tasks of the range behind its
 * pointer (added after their second was walked, left by a transaction that
 * held them, returned by a rollback, or released by sched.resume), second
 * by second in (run_at, id) order.  Rows that others hold are stepped over
 * and found again by a later sweep.
 */
static int
deliver_late(const TickRequest *request, TimestampTz pointer, int limit,
			 int64 *notified, TimestampTz *first_lease, TimestampTz *late_from)
{
	int			range = request->range;
	TimestampTz now = request->now;
	TimestampTz after = request->late_from;
	int			n = 0;

	/*
	 * The next sweep starts at the first late task found here, delivered or
	 * not (its row may be held), or at the pointer if there is none.
	 */
	*late_from = pointer;
	for (int seconds = 0; n < limit && seconds < WALK_MAX_SECONDS; seconds++)
	{
		TimestampTz next;
		TimestampTz second;
		Delivered	d;

		if (!first_pending_before(range, after, pointer, &next))
			break;
		if (seconds == 0)
			*late_from = next;
		second = delaysched_second_of(next);
		after = Max(after, second);
		d = deliver(delaysched_bucket_of(second), range, after, -1,
					Min(second + USECS_PER_SEC, pointer), now, limit - n, request->park_all);
		n += d.count;
		*notified += d.notified;
		*first_lease = Min(*first_lease, d.first_lease);
		after = second + USECS_PER_SEC;
	}
	return n;
}

/*
 * The earliest lease of a range that plan (first_lease or next_lease)
 * finds between from and to; DT_NOEND if none.
 */
static TimestampTz
lease_between(SPIPlanPtr plan, int range, TimestampTz from, TimestampTz to)
{
	Datum		values[3];
	TimestampTz found;

	values[0] = Int16GetDatum((int16) range);
	values[1] = TimestampTzGetDatum(from);
	values[2] = TimestampTzGetDatum(to);
	return delaysched_fetch_timestamp(plan, values, &found) ? found : DT_NOEND;
}

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
 * One tick on request->range, in the caller's transaction (with a snapshot
 * pushed).  The extension must be installed.
 */
void
delaysched_tick(const TickRequest *request, TickResult *result)
{
	Datum		values[6];
	TimestampTz pointer;
	TimestampTz first_lease = DT_NOEND;
	TimestampTz walked_lease;
	int			late = 0;

	memset(result, 0, sizeof(*result));
	result->next_due = DT_NOEND;
	result->urgent_at = DT_NOEND;
	result->next_sweep = DT_NOEND;
	result->late_from = request->late_from;
	result->lease_from = request->lease_from;
	result->purge_done_from = request->purge_done_from;
	result->purge_dead_from = request->purge_dead_from;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	prepare_plans();

	values[0] = Int32GetDatum(request->range);
	result->held = delaysched_fetch_timestamp(plans.lock_pointer, values, &pointer);
	if (!result->held)
	{
		SPI_finish();
		return;
	}

	/*
	 * Late tasks first: every one of them was due before anything the walk
	 * will find, and a range delivers in run_at order.
	 */
	if (request->sweep)
		late = deliver_late(request, pointer, request->batch, &result->delivered, &first_lease,
							&result->late_from);
	/*
	 * After a backlog, in fair shares while other types wait, else a whole
	 * batch a statement; otherwise a step a statement, so that the first
	 * statement of a burst does not keep the other ranges waiting for a
	 * whole batch (see "The walk" above).  (Not inside Min(), a macro: it
	 * would walk twice.)
	 */
	if (!request->cursor.fair ||
		!delaysched_fair_walk(request, pointer, request->batch - late, result, &walked_lease))
	{
		int			walked;
		int			room;

		walked_lease = walk(request, pointer, request->batch - late,
							request->cursor.fair ? request->batch : request->step, result,
							&walked);
		room = request->batch - late - walked;
		if (request->shares && !request->cursor.fair && result->cursor.fair && room > 0)
			walked_lease = Min(walked_lease, share_the_onset(request, room, result));
	}
	first_lease = Min(first_lease, walked_lease);

	/*
	 * The leases this tick granted: the worker must look again when the
	 * first of them runs out, sweep or not.
	 */
	result->next_sweep = first_lease;

	if (request->sweep)
	{
		int			expired = 0;
		int			purged = 0;
		TimestampTz sweep_end = TimestampTzPlusMilliseconds(request->now,
															delaysched_sweep_interval_ms);
		TimestampTz first;

		/*
		 * The first lease from where the last sweep left off up to the
		 * next regular sweep: if it has not run out, there is nothing to
		 * expire and it is when to look again (see "An idle range").
		 */
		first = lease_between(plans.first_lease, request->range, request->lease_from, sweep_end);
		if (first > request->now)
		{
			result->lease_from = request->now;
			result->next_sweep = Min(result->next_sweep, first);
		}
		else
		{
			values[0] = Int16GetDatum((int16) request->range);
			values[1] = TimestampTzGetDatum(request->now);
			values[2] = Int32GetDatum(request->batch);
			values[3] = BoolGetDatum(request->park_all);
			values[4] = TimestampTzGetDatum(request->lease_from);
			expired = delaysched_fetch_int(plans.expire_leases, values);

			/*
			 * Every lease that ran out by now is expired, but for rows
			 * others held: the next sweep starts at the first of those, or
			 * at now (leases granted from now on end later; see "A held
			 * horizon" above).
			 */
			if (expired < request->batch)
			{
				TimestampTz held = lease_between(plans.first_lease, request->range,
												 request->lease_from, request->now);

				result->lease_from = held == DT_NOEND ? request->now : held;
			}
		}

		if (request->range == 0)
		{
			values[0] = TimestampTzGetDatum(request->now);
			values[1] = Int32GetDatum(request->retention_s);
			values[2] = Int32GetDatum(request->dead_retention_s);
			values[3] = Int32GetDatum(request->batch);
			values[4] = TimestampTzGetDatum(request->purge_done_from);
			values[5] = TimestampTzGetDatum(request->purge_dead_from);
			purged = delaysched_fetch_int(plans.purge, values);
			if (purged < request->batch)
			{
				/* Everything past its retention is gone. */
				result->purge_done_from = request->now - PURGE_MARGIN -
					(int64) request->retention_s * USECS_PER_SEC;
				result->purge_dead_from = request->now - PURGE_MARGIN -
					(int64) request->dead_retention_s * USECS_PER_SEC;
			}
		}

		if (late >= request->batch || expired >= request->batch || purged >= request->batch)
			result->next_sweep = request->now;	/* a full batch: again at once */
		else if (first <= request->now)
		{
			/* Leases ran out: when does the next? */
			TimestampTz next_lease = lease_between(plans.next_lease, request->range,
												   request->now, sweep_end);

			result->next_sweep = Min(result->next_sweep, next_lease);
		}
	}

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
	request.park_all = !PG_ARGISNULL(8) && PG_GETARG_BOOL(8);
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
