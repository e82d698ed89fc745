/*-------------------------------------------------------------------------
 *
 * drain.c
 *		The drain: delivers the parked tasks of rate-limited and
 *		concurrency-capped business types as tokens and slots allow, in
 *		run-at order within each type and in fair shares across types.
 *
 * Why parking.  A tick (tick.c) that meets a due task of a limited type does
 * not wait for a token: it parks the task (state 'r'), which takes it out
 * of the index the walk follows, and notes the type (limiter.c).  So the
 * walk never re-reads a throttled backlog, however large, to find the few
 * tasks it may deliver, and other types' tasks go out as if the backlog
 * were not there.  While delaysched.max_deliveries_per_second is set, every
 * notify type is parked this way, so that the cap is shared out fairly.
 *
 * One drain, in one transaction:
 *	 1. reads the types that have (or may have) parked tasks: the hinted
 *		ones and those held to their consumers' pace, or every notify type
 *		that has any when a full probe is due;
 *		paused types are left alone.  Their sched.biz rows are locked
 *		FOR NO KEY UPDATE SKIP LOCKED, which serialises the drain with
 *		sched.define_biz, sched.pause and sched.drop_biz (sched.add's
 *		FOR KEY SHARE does not conflict) and reads the type's current
 *		limits, so a new definition applies at the next drain;
 *	 2. works out what each type may have: the tokens its bucket gives, the
 *		slots its concurrency cap leaves (deliveries awaiting
 *		acknowledgement are counted), and its consumers' pace cap while it
 *		is held to one (pace.c), at most a batch;
 *	 3. shares the batch, and the global cap's tokens, across the types by
 *		weighted water-filling (shares.c): every type gets its weight's
 *		share, and what a type cannot use goes to the others;
 *	 4. delivers each type's share, oldest first (run_at, id), as a tick
 *		does a notify delivery (lease, attempt + 1, NOTIFY at commit), and
 *		gives back the tokens it did not use;
 *	 5. says when it should run next: at once if a share was cut by the
 *		batch, when the next token is due for a type that ran out of them,
 *		after an acknowledgement for a type at its cap -- but not sooner than
 *		DRAIN_MIN_INTERVAL_MS, so that a slow rate is served in small
 *		batches rather than by a transaction per token.
 *
 * Only one worker drains at a time (see scanner.c), so a type's tasks go out
 * in run-at order across its whole backlog, whichever range they are in.
 *
 * IDENTIFICATION
 *	  src/core/drain.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "base/guc.h"
#include "stats/stats.h"
#include "base/shmem.h"
#include "cluster/cluster.h"
#include "core/core.h"
#include "schedule/schedule.h"

/* The least time between two drains that are not cut short by the batch. */
#define DRAIN_MIN_INTERVAL_MS	10

/* While a type waits for a slot: look again this often even if no ack wakes us. */
#define SLOT_RECHECK_MS			1000

/* While a parked task is held by another transaction: look again this often. */
#define HELD_ROW_RECHECK_MS		1000

/* While hints remain: look again at least this often. */
#define HINT_RECHECK_MS			5000

/*
 * A type newly held to its consumers' pace: its deliveries awaiting
 * acknowledgement are counted up to this many to set its first cap.
 */
#define PACE_START_COUNT_MAX	100000

/* What held a type back in this drain. */
typedef enum DrainLimit
{
	LIMIT_NONE = 0,				/* its backlog ran out */
	LIMIT_TOKENS,				/* its bucket is empty */
	LIMIT_SLOTS,				/* its concurrency cap is reached */
	LIMIT_GLOBAL,				/* the global cap's bucket is empty */
	LIMIT_BATCH,				/* its share of the batch */
	LIMIT_NO_BUCKET,			/* no room for its bucket */
	LIMIT_LEASE					/* its split limits' lease is not in force */
} DrainLimit;

/* One type in one drain. */
typedef struct DrainType
{
	char	   *name;
	char	   *channel;
	Datum		ack_timeout;
	double		rate;			/* 0: no rate limit */
	int			burst;
	int			max_concurrency;	/* 0: no cap */
	int			pace_cap;		/* its consumers' pace (pace.c); -1: not held */
	int			in_flight;		/* deliveries awaiting acknowledgement, counted
								 * up to the caps (-1: not counted) */
	bool		keys_capped;	/* each key has a cap (key_max_concurrency) */
	bool		keys_rate_limited;	/* each key has a bucket (key_rate_limit) */
	bool		share_lapsed;	/* split limits whose router lease is not in
								 * force (cluster/share_lease.c) */
	int			weight;
	bool		hinted;
	uint64		marks;
	int			allowed;		/* by its own bucket and cap */
	int			tokens_taken;	/* from its own bucket */
	int			share;			/* after the fair share */
	DrainLimit	limit;
	TimestampTz next_token;
} DrainType;

static struct
{
	Oid			extension;
	SPIPlanPtr	types;
	SPIPlanPtr	in_flight;
	SPIPlanPtr	deliver;
	SPIPlanPtr	parked_left;
	SPIPlanPtr	parked_types;
} plans;

/*
 * Parameters: $1 look at every notify type with parked tasks, $2 the
 * hinted types.
 */
static const char types_sql[] =
"SELECT b.name, b.channel, b.ack_timeout, b.rate_limit, b.burst, b.max_concurrency, b.weight,"
"       b.key_max_concurrency IS NOT NULL, b.key_rate_limit IS NOT NULL,"
"       (b.rate_limit IS NOT NULL OR b.max_concurrency IS NOT NULL) AND sched._share_lapsed()"
" FROM sched.biz b"
" WHERE b.delivery = 'notify' AND NOT b.paused"
"   AND (b.name = ANY ($2)"
"        OR ($1 AND EXISTS (SELECT FROM sched.task t WHERE t.biz_type = b.name AND t.state = 'r')))"
" ORDER BY b.name"
" FOR NO KEY UPDATE OF b SKIP LOCKED";

/*
 * The notify types with parked tasks, their rows not locked: what a probe of
 * every type would drain if no other transaction held a type's row.
 */
static const char parked_types_sql[] =
"SELECT b.name FROM sched.biz b"
" WHERE b.delivery = 'notify' AND NOT b.paused"
"   AND EXISTS (SELECT FROM sched.task t WHERE t.biz_type = b.name AND t.state = 'r')";

/* $1 type, $2 its cap: deliveries awaiting acknowledgement, counted up to the cap. */
static const char in_flight_sql[] =
"SELECT count(*)::int FROM (SELECT FROM sched.task t"
" WHERE t.biz_type = $1 AND t.state = 'd' LIMIT $2) s";

/*
 * $1 type, $2 at most this many, $3 its ack_timeout, $4 when the tokens
 * were taken, which is the delivery time recorded.  sched._pick chooses
 * and locks the parked tasks, by priority and in turns by key, and the
 * messages go in its order.  The update goes by id
 * (unique across partitions) and by the buckets the chosen rows are in,
 * which prunes the partitions it visits.
 */
static const char deliver_sql[] =
"WITH picked AS MATERIALIZED ("
"  SELECT p.bucket, p.id, pg_catalog.row_number() OVER () AS ord"
"  FROM sched._pick((SELECT b FROM sched.biz b WHERE b.name = $1), $2) p"
"), taken AS ("
"  UPDATE sched.task t SET " DELAYSCHED_LEASE("$4", "$3", "NULL::smallint")
"  WHERE t.bucket = ANY (ARRAY(SELECT picked.bucket FROM picked))"
"    AND t.id = ANY (ARRAY(SELECT picked.id FROM picked))"
"  RETURNING t.id, t.run_at, t.payload, t.attempt, t.schedule, t.bucket, t.key"
") SELECT taken.* FROM taken JOIN picked ON picked.id = taken.id ORDER BY picked.ord";

/*
 * $1 type: after its share found fewer parked tasks than it could take, are
 * some left?  Only rows another transaction holds (a cancellation not
 * committed yet, say), which the deliver statement skipped.
 */
static const char parked_left_sql[] =
"SELECT (EXISTS (SELECT FROM sched.task t WHERE t.biz_type = $1 AND t.state = 'r'))::int";

static void
prepare_plans(void)
{
	Oid			extension = get_extension_oid("delaysched", false);

	if (plans.extension == extension)
		return;
	delaysched_free_plan(&plans.types);
	delaysched_free_plan(&plans.in_flight);
	delaysched_free_plan(&plans.deliver);
	delaysched_free_plan(&plans.parked_left);
	delaysched_free_plan(&plans.parked_types);
	plans.extension = InvalidOid;
	{
		Oid			types[] = {BOOLOID, TEXTARRAYOID};

		plans.types = delaysched_prepare_kept(types_sql, 2, types);
	}
	{
		Oid			types[] = {TEXTOID, INT4OID, INTERVALOID, TIMESTAMPTZOID};

		plans.in_flight = delaysched_prepare_kept(in_flight_sql, 2, types);
		plans.deliver = delaysched_prepare_kept(deliver_sql, 4, types);
		plans.parked_left = delaysched_prepare_kept(parked_left_sql, 1, types);
	}
	plans.parked_types = delaysched_prepare_kept(parked_types_sql, 0, NULL);
	plans.extension = extension;
}

/* The hinted names and the held ones (paced) as a text[] parameter. */
static Datum
hint_array(BacklogHint *hints, int count, char **paced, int npaced)
{
	Datum	   *names = palloc(sizeof(Datum) * Max(1, count + npaced));

	for (int i = 0; i < count; i++)
		names[i] = CStringGetTextDatum(hints[i].name);
	for (int i = 0; i < npaced; i++)
		names[count + i] = CStringGetTextDatum(paced[i]);
	return PointerGetDatum(construct_array(names, count + npaced, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * After a probe of every type: a type with parked tasks that the probe did
 * not return had its row held by another transaction (sched.define_biz, a
 * router giving this node its shares) and was stepped over.  Nothing else
 * may wake the drain for it (after a restart no tick parks its tasks again,
 * and no hint is left), so it becomes a hint when this drain commits, which
 * also wakes the drain; while its row is held the hint stays, and the drain
 * looks again now and then (HINT_RECHECK_MS).
 */
static void
hint_skipped_types(DrainType *types, int ntypes)
{
	SPITupleTable *rows;

	if (SPI_execute_plan(plans.parked_types, NULL, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the business types with parked tasks");
	rows = SPI_tuptable;
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		char	   *name = TextDatumGetCString(SPI_getbinval(rows->vals[i], rows->tupdesc, 1, &isnull));
		bool		seen = false;

		for (int j = 0; j < ntypes && !seen; j++)
			seen = strcmp(types[j].name, name) == 0;
		if (!seen)
			delaysched_note_parked(name);
	}
	SPI_freetuptable(rows);
}

/*
 * Read the types to drain (step 1): the hinted ones, those held to their
 * consumers' pace (paced, npaced) and, if probe_all, every notify type with
 * parked tasks.
 */
static DrainType *
read_types(BacklogHint *hints, int nhints, char **paced, int npaced, bool probe_all, int *count)
{
	Datum		values[2];
	DrainType  *types;
	TupleDesc	desc;

	values[0] = BoolGetDatum(probe_all);
	values[1] = hint_array(hints, nhints, paced, npaced);
	if (SPI_execute_plan(plans.types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the business types to drain");

	desc = SPI_tuptable->tupdesc;
	types = palloc0(sizeof(DrainType) * Max(1, SPI_processed));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		DrainType  *t = &types[i];
		bool		isnull;
		Datum		value;

		t->name = TextDatumGetCString(SPI_getbinval(tuple, desc, 1, &isnull));
		t->channel = TextDatumGetCString(SPI_getbinval(tuple, desc, 2, &isnull));
		/* An interval is passed by reference: copy it out of the tuple. */
		t->ack_timeout = datumCopy(SPI_getbinval(tuple, desc, 3, &isnull), false, sizeof(Interval));
		value = SPI_getbinval(tuple, desc, 4, &isnull);
		t->rate = isnull ? 0 : DatumGetFloat8(value);
		value = SPI_getbinval(tuple, desc, 5, &isnull);
		t->burst = isnull ? 0 : DatumGetInt32(value);
		value = SPI_getbinval(tuple, desc, 6, &isnull);
		t->max_concurrency = isnull ? 0 : DatumGetInt32(value);
		t->weight = DatumGetInt32(SPI_getbinval(tuple, desc, 7, &isnull));
		t->keys_capped = DatumGetBool(SPI_getbinval(tuple, desc, 8, &isnull));
		t->keys_rate_limited = DatumGetBool(SPI_getbinval(tuple, desc, 9, &isnull));
		t->share_lapsed = DatumGetBool(SPI_getbinval(tuple, desc, 10, &isnull));
		t->pace_cap = npaced > 0 ? delaysched_pace_cap(t->name) : -1;
		t->in_flight = -1;
		for (int h = 0; h < nhints; h++)
			if (strcmp(hints[h].name, t->name) == 0)
			{
				t->hinted = true;
				t->marks = hints[h].marks;
				break;
			}
	}
	*count = (int) SPI_processed;
	SPI_freetuptable(SPI_tuptable);
	return types;
}

/*
 * What one type may have by its concurrency cap and its consumers' pace
 * (step 2); its rate limit is applied by take_tokens, below.
 */
static void
allow(DrainType *t, int batch, bool *waits_for_slot)
{
	t->allowed = batch;
	t->limit = LIMIT_BATCH;
	if (t->share_lapsed)
	{
		/* A following router has not renewed this node's shares. */
		t->allowed = 0;
		t->limit = LIMIT_LEASE;
		return;
	}
	if (t->keys_capped && !*waits_for_slot)
	{
		/* A delivery that ends may free a key's slot (sched._pick counts). */
		pg_atomic_write_u32(&delaysched_shared->drain_waits_for_slot, 1);
		pg_memory_barrier();
		*waits_for_slot = true;
	}
	if (t->max_concurrency > 0 || t->pace_cap >= 0)
	{
		Datum		values[2];
		int			room;
		int			cap = t->max_concurrency > 0 ? t->max_concurrency : PG_INT32_MAX;

		/*
		 * Say that an acknowledgement should wake the drain before counting,
		 * so that one committed after the count cannot go unheard.
		 */
		if (!*waits_for_slot)
		{
			pg_atomic_write_u32(&delaysched_shared->drain_waits_for_slot, 1);
			/* Before the count below (an acknowledgement reads the flag). */
			pg_memory_barrier();
			*waits_for_slot = true;
		}
		values[0] = CStringGetTextDatum(t->name);
		/* A hold whose cap is not set yet counts what its consumers hold. */
		if (t->pace_cap == 0)
			values[1] = Int32GetDatum(Max(PACE_START_COUNT_MAX, t->max_concurrency));
		else
			values[1] = Int32GetDatum(t->pace_cap > 0 ? Min(cap, t->pace_cap) : cap);
		t->in_flight = delaysched_fetch_int(plans.in_flight, values);
		if (t->pace_cap == 0)
			t->pace_cap = delaysched_pace_start(t->name, t->in_flight);
		if (t->pace_cap > 0)
			cap = Min(cap, t->pace_cap);
		room = cap - t->in_flight;
		if (room < t->allowed)
		{
			t->allowed = Max(room, 0);
			t->limit = LIMIT_SLOTS;
		}
	}
}

/*
 * A type held to its consumers' pace that the drain did not read (dropped,
 * paused, no longer a notify type, or being redefined) is let go: a hold
 * would otherwise keep the database's ticks parking every notify type, and
 * a late acknowledgement holds it again if its consumers still lag.
 */
static void
release_unseen_holds(char **paced, int npaced, DrainType *types, int ntypes)
{
	for (int p = 0; p < npaced; p++)
	{
		bool		seen = false;

		for (int i = 0; i < ntypes && !seen; i++)
			seen = strcmp(types[i].name, paced[p]) == 0;
		if (!seen)
			delaysched_pace_release(paced[p], false);
	}
}

/*
 * Say in the log when the split limits' lease lapses and comes back, as the
 * drain sees it in the types with split limits it reads.
 */
static void
note_lease(DrainType *types, int ntypes)
{
	bool		split_seen = false;
	bool		lapsed = false;

	for (int i = 0; i < ntypes; i++)
		if (types[i].rate > 0 || types[i].max_concurrency > 0)
		{
			split_seen = true;
			lapsed = lapsed || types[i].share_lapsed;
		}
	if (split_seen)
		delaysched_note_share_lapse(lapsed);
}

/*
 * Every type's tokens (the rate-limited ones') and the global cap's, in
 * one hold of the limiter's lock (delaysched_take_drain_tokens); returns
 * the time they were taken at, which the deliveries are recorded at, and
 * how many of the global cap's were taken (0 if there is no cap).
 */
static TimestampTz
take_tokens(DrainType *types, int ntypes, int batch, double global_rate,
			int *global_taken, TimestampTz *global_next)
{
	DrainTokens *want = palloc(sizeof(DrainTokens) * Max(1, ntypes));
	TimestampTz stamp;

	for (int i = 0; i < ntypes; i++)
	{
		want[i].biz = types[i].name;
		want[i].rate = types[i].rate;
		want[i].burst = types[i].burst;
		want[i].want = types[i].allowed;
	}
	stamp = delaysched_take_drain_tokens(want, ntypes, global_rate, batch,
										 global_taken, global_next);
	for (int i = 0; i < ntypes; i++)
	{
		DrainType  *t = &types[i];
		int			taken = want[i].taken;

		if (t->rate <= 0 || t->allowed <= 0)
			continue;
		t->next_token = want[i].next_token;
		if (taken < 0)
		{
			ereport(WARNING,
					(errmsg("no room for the token bucket of business type \"%s\"", t->name),
					 errdetail("Its tasks are held back until there is."),
					 errhint("Raise delaysched.max_biz_types, or remove the rate limits of types that do not need them.")));
			taken = 0;
			t->limit = LIMIT_NO_BUCKET;
		}
		else if (taken < t->allowed)
			t->limit = LIMIT_TOKENS;
		t->tokens_taken = taken;
		t->allowed = taken;
	}
	pfree(want);
	return stamp;
}

/*
 * Share "total" across the types (step 3) by their weights (shares.c): what
 * a type cannot use goes to the others.
 */
static void
share_out(DrainType *types, int count, int total, DrainLimit cut_by)
{
	static int	rotation = 0;
	ShareClaim *claims = palloc(sizeof(ShareClaim) * Max(1, count));

	for (int i = 0; i < count; i++)
	{
		claims[i].weight = types[i].weight;
		claims[i].cap = types[i].allowed;
	}
	delaysched_share_out(claims, count, total, &rotation);
	for (int i = 0; i < count; i++)
	{
		types[i].share = claims[i].share;
		if (types[i].share < types[i].allowed)
			types[i].limit = cut_by;
	}
	pfree(claims);
}

/*
 * Deliver up to t->share of a type's parked tasks (step 4), as of "stamp";
 * how many it took, and in *skipped how many of those were firings their
 * schedules did not send (firing.c: cancelled as stale, say, or put off).
 * The schedules whose firings go make their next ones first.
 */
static int
deliver(DrainType *t, TimestampTz stamp, int *skipped)
{
	Datum		values[4];
	TupleDesc	desc;
	SPITupleTable *rows;
	uint64		nrows;
	FiringBatch firings;
	int			n;

	values[0] = CStringGetTextDatum(t->name);
	values[1] = Int32GetDatum(t->share);
	values[2] = t->ack_timeout;
	values[3] = TimestampTzGetDatum(stamp);
	if (SPI_execute_plan(plans.deliver, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "the drain could not deliver the tasks of \"%s\"", t->name);
	rows = SPI_tuptable;
	nrows = SPI_processed;
	desc = rows->tupdesc;

	delaysched_firings_init(&firings);
	for (uint64 i = 0; i < nrows; i++)
	{
		HeapTuple	tuple = rows->vals[i];
		bool		isnull;
		Datum		schedule = SPI_getbinval(tuple, desc, 5, &isnull);

		if (!isnull && DatumGetInt32(SPI_getbinval(tuple, desc, 4, &isnull)) == 1)
			delaysched_firings_add(&firings,
								   DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull)),
								   DatumGetInt16(SPI_getbinval(tuple, desc, 6, &isnull)),
								   DatumGetTimestampTz(SPI_getbinval(tuple, desc, 2, &isnull)),
								   values[0],
								   schedule);
	}
	delaysched_firings_fire(&firings, stamp);

	for (uint64 i = 0; i < nrows; i++)
	{
		HeapTuple	tuple = rows->vals[i];
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
		TimestampTz run_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 2, &isnull));
		Jsonb	   *payload = DatumGetJsonbP(SPI_getbinval(tuple, desc, 3, &isnull));
		int32		attempt = DatumGetInt32(SPI_getbinval(tuple, desc, 4, &isnull));
		Datum		schedule = SPI_getbinval(tuple, desc, 5, &isnull);
		char	   *message;
		int			omitted;

		if (delaysched_firing_suppressed(&firings, id))
		{
			(*skipped)++;		/* a firing its schedule did not send */
			continue;
		}
		message = delaysched_delivery_message(id, t->name, run_at, payload, attempt,
											  isnull ? NULL : TextDatumGetCString(schedule),
											  delaysched_spi_text(tuple, desc, 7, CurrentMemoryContext),
											  &omitted);
		if (omitted > 0)
			delaysched_note_payload_omitted(id, DatumGetInt16(SPI_getbinval(tuple, desc, 6, &isnull)),
											omitted);
		Async_Notify(t->channel, message);
		pfree(message);
	}
	/*
	 * Every row taken counts against the share (the backlog is judged by
	 * it); only those sent use tokens (the caller gives back the rest).
	 */
	n = (int) nrows;
	SPI_freetuptable(rows);
	return n;
}

/*
 * One drain, in the caller's transaction (with a snapshot pushed).  The
 * extension must be installed.
 */
void
delaysched_drain(TimestampTz now, int batch, DrainResult *result)
{
	BacklogHint *hints;
	int			nhints;
	char	  **paced;
	int			npaced;
	bool		probe_all;
	DrainType  *types;
	int			ntypes;
	int			total = batch;
	int			global_taken = 0;
	TimestampTz global_next = DT_NOEND;
	TimestampTz next = DT_NOEND;
	TimestampTz stamp;
	bool		waits_for_slot = false;
	bool		slot_limited = false;
	double		global_rate = delaysched_max_deliveries_per_second;
	int			load_taken = 0;
	TimestampTz load_next = DT_NOEND;
	bool		global_limited = false;

	result->delivered = 0;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	prepare_plans();

	hints = delaysched_backlog_hints(&nhints, &probe_all, now);
	paced = delaysched_paced_notify_types(&npaced);
	types = read_types(hints, nhints, paced, npaced, probe_all, &ntypes);
	if (probe_all)
		hint_skipped_types(types, ntypes);
	release_unseen_holds(paced, npaced, types, ntypes);
	note_lease(types, ntypes);

	/*
	 * One time for the whole drain: the buckets are refilled up to it and the
	 * deliveries recorded at it.  It is read with the limiter's lock held,
	 * after the concurrency caps' counts, so that the buckets never count
	 * tokens for time the drain spent before it could deliver, and so that
	 * no drain of another database stamps deliveries earlier than tokens it
	 * took after this one (either would let a window of a second see a few
	 * more deliveries than the rate).
	 */
	for (int i = 0; i < ntypes; i++)
		allow(&types[i], batch, &waits_for_slot);
	stamp = take_tokens(types, ntypes, batch, global_rate, &global_taken, &global_next);
	if (global_rate > 0 && ntypes > 0)
		total = Min(total, global_taken);
	/* ... and as many as the database's load allows (stats/load.c). */
	if (ntypes > 0)
	{
		load_taken = delaysched_load_take(total, stamp, &load_next);
		if (load_taken < total)
		{
			total = load_taken;
			global_limited = true;
		}
	}
	share_out(types, ntypes, total,
			  global_limited || (global_rate > 0 && global_taken < batch) ? LIMIT_GLOBAL : LIMIT_BATCH);
	if (global_limited)
		global_next = Min(global_next, load_next);

	for (int i = 0; i < ntypes; i++)
	{
		DrainType  *t = &types[i];
		int			skipped = 0;
		int			taken = t->share > 0 ? deliver(t, stamp, &skipped) : 0;
		int			sent = taken - skipped;
		TimestampTz key_token = delaysched_key_tokens_next();

		result->delivered += sent;
		global_taken -= sent;
		if (t->rate > 0)
			delaysched_return_tokens(t->name, t->tokens_taken - sent);
		if (t->share > 0 && taken < t->share)
		{
			Datum		name = CStringGetTextDatum(t->name);

			/*
			 * Its backlog ran out, unless it skipped rows that others hold:
			 * those keep the hint, and the drain comes back for them (no
			 * commit will wake it when such a transaction rolls back).
			 */
			if (delaysched_fetch_int(plans.parked_left, &name) == 0)
			{
				if (t->hinted)
					delaysched_backlog_drained(t->name, t->marks);
				/* Held to its consumers' pace, and they caught up. */
				if (t->pace_cap > 0 && t->in_flight + sent <= t->pace_cap / 2)
					delaysched_pace_release(t->name, false);
				continue;
			}
			if (!t->hinted)
				delaysched_note_parked(t->name);
			if (t->keys_capped || t->keys_rate_limited)
			{
				/*
				 * Held back by its keys' limits, it seems: again when a key
				 * gets its next token, or a delivery ends (and the drain is
				 * woken), with the held rows' recheck as the backstop.
				 */
				if (t->keys_capped)
					slot_limited = true;
				next = Min(next, key_token);
			}
			next = Min(next, TimestampTzPlusMilliseconds(now, HELD_ROW_RECHECK_MS));
			continue;
		}

		/* Tasks may be left: make sure the next drain looks at the type. */
		if (!t->hinted)
			delaysched_note_parked(t->name);
		switch (t->limit)
		{
			case LIMIT_TOKENS:
				next = Min(next, t->next_token);
				break;
			case LIMIT_SLOTS:
				slot_limited = true;
				next = Min(next, TimestampTzPlusMilliseconds(now, SLOT_RECHECK_MS));
				break;
			case LIMIT_GLOBAL:
				next = Min(next, global_next);
				break;
			case LIMIT_NO_BUCKET:
			case LIMIT_LEASE:
				next = Min(next, TimestampTzPlusMilliseconds(now, SLOT_RECHECK_MS));
				break;
			case LIMIT_BATCH:
			case LIMIT_NONE:
				next = now;
				break;
		}
	}
	if (global_taken > 0)
		delaysched_return_global_tokens(global_taken);
	delaysched_load_settle(load_taken, result->delivered);

	if (!slot_limited)
	{
		pg_atomic_write_u32(&delaysched_shared->drain_waits_for_slot, 0);
	}

	/*
	 * A hinted type the statement did not return (paused, being redefined,
	 * dropped) keeps its hint: look again now and then, so that no parked
	 * task waits for an unrelated commit to wake the drain.
	 */
	if (nhints > 0)
		next = Min(next, TimestampTzPlusMilliseconds(now, HINT_RECHECK_MS));
	/* A held type's hold ends only when a drain sees its consumers caught up. */
	if (npaced > 0)
		next = Min(next, TimestampTzPlusMilliseconds(now, SLOT_RECHECK_MS));

	/* A batch cut short: again at once; otherwise not too often. */
	if (next > now)
		next = Max(next, TimestampTzPlusMilliseconds(now, DRAIN_MIN_INTERVAL_MS));
	result->next = next;
	SPI_finish();
}
