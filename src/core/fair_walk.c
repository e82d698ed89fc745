/*-------------------------------------------------------------------------
 *
 * fair_walk.c
 *		The walk in fair shares: while more of a range is due than one
 *		statement delivers, every business type with due tasks gets its
 *		weight's share of every statement, oldest first within the type.
 *
 * Why.  The walk (walk.c) delivers a range in (run_at, id) order.  When one
 * type has 300,000 tasks due at once, a task of another type due a moment
 * later sits behind all of them in that order: it waited for the whole
 * backlog, seconds, whatever its type.  In fair shares it waits for one
 * statement.
 *
 * When.  A walk statement takes a step at most (the batch spread over the
 * ranges a worker takes in turn); one that comes back full (there may be
 * more due than it took: a backlog) marks the range's cursor fair, and the
 * same tick goes on here for half a step (tick.c, share_the_onset): a task
 * of another type due with the burst, after it in (run_at, id) order, is
 * served before the worker leaves the range, not after every range's first
 * statement.  The range's next ticks come here while more than one type
 * has pending tasks (the statistics' gauges say so), until one finds every
 * type's due tasks delivered up to now, which hands the range back to the
 * walk.  With one type alone the walk serves the backlog a whole batch a
 * statement, as before there were fair shares: fairness costs a type alone
 * nothing but the read of the types at each tick of a backlog.
 *
 * How.  The types are read from sched.biz, with their weights.  Each has a
 * place, (run_at, id): its tasks of the range before it are handled.  The
 * tick shares its batch out by weight (shares.c) and walks the seconds from
 * the earliest place up to now, a leaf partition per statement as the walk
 * does.  Each statement takes, for every type still wanting, up to what is
 * left of its share after its place, in (run_at, id) order, through
 * task_claimable_idx (biz_type, run_at, id, door): the other ranges' entries
 * are passed over in the index, not fetched from the table.  A type that
 * runs out in a second goes on in the next with the rest of its share; one
 * that fills its share stops there.  When the seconds up to now are walked
 * and the batch is not used up, what is left is shared again among the
 * types that filled their shares, FAIR_ROUNDS times at most: so with weights
 * 3 and 1 two backlogged types get 750 and 250 of a step of 1,000, and a
 * backlogged type beside one with 2 tasks due gets 998.  A tick takes a
 * batch in all, but a step when its range is urgent: when a task not of the
 * backlog falls due there (RangeState.urgent_at), the workers take the range
 * before the other ranges (scanner.c, pick_range), so that the task waits
 * for the ticks under way, not for the workers' turn of every range.
 *
 * Order.  Within a type, a range's tasks go out in (run_at, id) order, as
 * the walk sends them; across types, by share.
 *
 * The pointer.  It moves to the second of the earliest place among the types
 * that may still have due tasks, or to now's second when none has: every
 * task of the range before it is handled, as the walk promises.  Rows other
 * transactions hold are stepped over and left to the sweep, as the walk
 * does.
 *
 * Places between ticks.  The cursor keeps the place of the type furthest
 * behind (every type starts there) and, in its lanes, the places of up to
 * DELAYSCHED_FAIR_LANES types furthest ahead: a type that keeps up does not
 * re-read at every tick the index entries of its tasks delivered since the
 * laggard's place (a delivered task's entry stays until vacuum).  A commit
 * that reports a task at or before the furthest place (TickCursor.reach)
 * makes the worker drop the places: the types start again at the pointer.
 *
 * IDENTIFICATION
 *	  src/core/fair_walk.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "core/core.h"
#include "core/tick.h"
#include "stats/stats.h"

/* The most times a tick shares out what is left of its batch. */
#define FAIR_ROUNDS		3

/* The most seconds one round walks (as the walk: WALK_MAX_SECONDS). */
#define FAIR_MAX_SECONDS	64

/* One business type in one fair tick. */
typedef struct FairType
{
	char	   *name;
	int			weight;
	TimestampTz after;			/* its place: (after, after_id) */
	int64		after_id;
	bool		done;			/* its due tasks up to now are handled */
	int			quota;			/* what is left of its share */
	int			asked;			/* in the statement under way */
	int			got;
} FairType;

typedef struct FairTick
{
	FairType   *types;			/* sorted by name (strcmp) */
	int			ntypes;
	int			rotation;
	bool		keyed;			/* a statement took keyed tasks */
} FairTick;

static SPIPlanPtr types_plan = NULL;
static Oid	types_plan_extension = InvalidOid;

static int
compare_names(const void *a, const void *b)
{
	return strcmp(((const FairType *) a)->name, ((const FairType *) b)->name);
}

static FairType *
find_type(FairTick *tick, const char *name)
{
	FairType	key;

	key.name = (char *) name;
	return bsearch(&key, tick->types, tick->ntypes, sizeof(FairType), compare_names);
}

/*
 * Read the types and their weights; SPI connected.  Returns how many of
 * them have pending tasks, as the statistics' gauges count them (every type
 * when the gauges are not ready), counting no further than 2: the caller
 * asks only whether a type is alone, and this runs at every tick of a
 * backlog.
 */
static int
read_types(FairTick *tick)
{
	int			waiting = 0;

	Oid			extension = get_extension_oid("delaysched", false);
	TupleDesc	desc;

	if (types_plan == NULL || types_plan_extension != extension)
	{
		delaysched_free_plan(&types_plan);
		types_plan = delaysched_prepare_kept("SELECT b.name, b.weight FROM sched.biz b", 0, NULL);
		types_plan_extension = extension;
	}
	if (SPI_execute_plan(types_plan, NULL, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the business types");
	desc = SPI_tuptable->tupdesc;
	tick->ntypes = (int) SPI_processed;
	tick->types = palloc0(sizeof(FairType) * Max(1, tick->ntypes));
	for (int i = 0; i < tick->ntypes; i++)
	{
		bool		isnull;

		tick->types[i].name = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[i], desc, 1, &isnull));
		tick->types[i].weight = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], desc, 2, &isnull));
	}
	SPI_freetuptable(SPI_tuptable);
	qsort(tick->types, tick->ntypes, sizeof(FairType), compare_names);

	for (int i = 0; i < tick->ntypes && waiting < 2; i++)
	{
		int64		gauges[SS_COUNT];

		if (!delaysched_stats_gauges(MyDatabaseId, tick->types[i].name, gauges))
			return tick->ntypes;
		if (gauges[SS_STATE_PENDING] > 0)
			waiting++;
	}
	return waiting;
}

/*
 * Every type's place at the start of the tick: its lane's, or the cursor's
 * (the laggard's), never before the pointer.
 */
static void
start_places(FairTick *tick, const TickCursor *cursor, TimestampTz pointer)
{
	bool		keep = cursor->valid && cursor->run_at >= pointer;

	for (int i = 0; i < tick->ntypes; i++)
	{
		FairType   *t = &tick->types[i];

		t->after = keep ? cursor->run_at : pointer;
		t->after_id = keep ? cursor->id : -1;
		if (!keep)
			continue;
		for (int l = 0; l < cursor->nlanes; l++)
			if (strcmp(cursor->lanes[l].biz_type, t->name) == 0 &&
				place_before(t->after, t->after_id, cursor->lanes[l].run_at, cursor->lanes[l].id))
			{
				t->after = cursor->lanes[l].run_at;
				t->after_id = cursor->lanes[l].id;
				break;
			}
	}
}

/* Counts a statement's rows to their types, and moves their places. */
static void
count_rows(SPITupleTable *rows, uint64 nrows, void *arg)
{
	FairTick   *tick = (FairTick *) arg;
	TupleDesc	desc = rows->tupdesc;

	for (uint64 i = 0; i < nrows; i++)
	{
		bool		isnull;
		char	   *name = TextDatumGetCString(SPI_getbinval(rows->vals[i], desc, 2, &isnull));
		FairType   *t = find_type(tick, name);
		TimestampTz run_at = DatumGetTimestampTz(SPI_getbinval(rows->vals[i], desc, 3, &isnull));
		int64		id = DatumGetInt64(SPI_getbinval(rows->vals[i], desc, 1, &isnull));

		pfree(name);
		if (t == NULL)
			continue;			/* a type defined after the tick read them */
		t->got++;
		/* (The rows come in (run_at, id) order: the last is the furthest.) */
		t->after = run_at;
		t->after_id = id;
	}
}

static Datum
array_of(Datum *elements, int count, Oid type, int len, bool byval, char align)
{
	return PointerGetDatum(construct_array(elements, count, type, len, byval, align));
}

/*
 * One statement: the types still wanting whose place is in or before
 * "second" take from its partition.  Returns how many were taken.
 */
static int
deliver_second(FairTick *tick, const TickRequest *request, TimestampTz second,
			   TimestampTz *first_lease, int64 *notified)
{
	Datum	   *names = palloc(sizeof(Datum) * Max(1, tick->ntypes));
	Datum	   *quotas = palloc(sizeof(Datum) * Max(1, tick->ntypes));
	Datum	   *afters = palloc(sizeof(Datum) * Max(1, tick->ntypes));
	Datum	   *after_ids = palloc(sizeof(Datum) * Max(1, tick->ntypes));
	Datum		values[9];
	char		nulls[10] = "         ";
	int			n = 0;
	int			wanted = 0;
	TimestampTz end = second + USECS_PER_SEC;
	TimestampTz now_second = delaysched_second_of(request->now);
	Delivered	d;
	int			taken = 0;

	for (int i = 0; i < tick->ntypes; i++)
	{
		FairType   *t = &tick->types[i];

		t->asked = t->got = 0;
		if (t->done || t->quota <= 0 || t->after >= end)
			continue;
		t->asked = t->quota;
		wanted += t->quota;
		names[n] = CStringGetTextDatum(t->name);
		quotas[n] = Int32GetDatum(t->quota);
		afters[n] = TimestampTzGetDatum(t->after);
		after_ids[n] = Int64GetDatum(t->after_id);
		n++;
	}
	if (n == 0)
		return 0;

	values[0] = Int16GetDatum((int16) request->range);
	values[1] = array_of(names, n, TEXTOID, -1, false, TYPALIGN_INT);
	values[2] = array_of(quotas, n, INT4OID, sizeof(int32), true, TYPALIGN_INT);
	values[3] = array_of(afters, n, TIMESTAMPTZOID, sizeof(TimestampTz), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
	values[4] = array_of(after_ids, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
	values[5] = TimestampTzGetDatum(end);
	values[6] = TimestampTzGetDatum(request->now);
	values[7] = BoolGetDatum(request->park_all);
	d = delaysched_run_delivery(delaysched_fair_plan(delaysched_bucket_of(second)),
								values, nulls, 8, wanted, delaysched_bucket_of(second),
								request->now, count_rows, tick);
	*notified += d.notified;
	*first_lease = Min(*first_lease, d.first_lease);
	tick->keyed |= d.keyed > 0;

	for (int i = 0; i < tick->ntypes; i++)
	{
		FairType   *t = &tick->types[i];

		if (t->asked == 0)
			continue;
		taken += t->got;
		t->quota -= t->got;
		if (t->got >= t->asked)
			continue;			/* its share: more may be due */
		if (second < now_second)
		{
			/* Ran out in this second: on to the next. */
			t->after = end;
			t->after_id = -1;
		}
		else
			t->done = true;		/* ran out up to now */
	}
	return taken;
}

/*
 * One round: share "room" out among the types that may want more, and walk
 * the seconds from the earliest of their places up to now.  Returns how
 * many were taken.
 */
static int
fair_round(FairTick *tick, const TickRequest *request, int room,
		   TimestampTz *first_lease, int64 *notified)
{
	ShareClaim *claims = palloc(sizeof(ShareClaim) * Max(1, tick->ntypes));
	int		   *which = palloc(sizeof(int) * Max(1, tick->ntypes));
	int			nclaims = 0;
	TimestampTz from = DT_NOEND;
	TimestampTz now_second = delaysched_second_of(request->now);
	int			taken = 0;

	for (int i = 0; i < tick->ntypes; i++)
	{
		FairType   *t = &tick->types[i];

		t->quota = 0;
		if (t->done)
			continue;
		claims[nclaims].weight = t->weight;
		claims[nclaims].cap = room;
		which[nclaims++] = i;
		from = Min(from, t->after);
	}
	if (nclaims == 0)
		return 0;
	delaysched_share_out(claims, nclaims, room, &tick->rotation);
	for (int c = 0; c < nclaims; c++)
		tick->types[which[c]].quota = claims[c].share;

	from = delaysched_second_of(from);
	for (int walked = 0; from <= now_second && walked < FAIR_MAX_SECONDS;
		 from += USECS_PER_SEC, walked++)
	{
		taken += deliver_second(tick, request, from, first_lease, notified);
		if (taken >= room)
			break;
	}
	return taken;
}

/* Keep the places for the next tick in result->cursor (see the header). */
static void
keep_places(FairTick *tick, TickResult *result)
{
	TickCursor *cursor = &result->cursor;
	bool		first = true;

	cursor->valid = true;
	cursor->fair = true;
	cursor->nlanes = 0;
	for (int i = 0; i < tick->ntypes; i++)
	{
		FairType   *t = &tick->types[i];

		if (first || place_before(t->after, t->after_id, cursor->run_at, cursor->id))
		{
			cursor->run_at = t->after;
			cursor->id = t->after_id;
		}
		if (first || place_before(cursor->reach, PG_INT64_MAX, t->after, t->after_id))
			cursor->reach = t->after;
		first = false;
	}
	/* The lanes: the types furthest ahead, most advanced first. */
	for (int l = 0; l < DELAYSCHED_FAIR_LANES; l++)
	{
		FairType   *best = NULL;

		for (int i = 0; i < tick->ntypes; i++)
		{
			FairType   *t = &tick->types[i];
			bool		taken = false;

			if (!place_before(cursor->run_at, cursor->id, t->after, t->after_id))
				continue;		/* no further than the laggard */
			for (int k = 0; k < cursor->nlanes; k++)
				taken |= strcmp(cursor->lanes[k].biz_type, t->name) == 0;
			if (!taken && (best == NULL ||
						   place_before(best->after, best->after_id, t->after, t->after_id)))
				best = t;
		}
		if (best == NULL)
			break;
		strlcpy(cursor->lanes[l].biz_type, best->name, NAMEDATALEN);
		cursor->lanes[l].run_at = best->after;
		cursor->lanes[l].id = best->after_id;
		cursor->nlanes++;
	}
}

/*
 * A tick's walk in fair shares (see the file header), taking at most
 * "limit" rows; as delaysched_walk() in walk.c, adds to delivered and fills
 * time_pointer, next_due and cursor of *result, and sets *first_lease to the
 * earliest lease granted.  Returns false, having done nothing, when no other
 * type than one has tasks pending: the walk then serves the backlog alone.
 */
bool
delaysched_fair_walk(const TickRequest *request, TimestampTz pointer, int limit,
					 TickResult *result, TimestampTz *first_lease)
{
	FairTick	tick = {0};
	TimestampTz now_second = delaysched_second_of(request->now);
	TimestampTz new_pointer = now_second;
	int			room = request->urgent ? Min(limit, Max(request->step, 1)) : limit;
	bool		wanting = false;
	static int	rotation = 0;

	if (read_types(&tick) <= 1)
		return false;
	*first_lease = DT_NOEND;
	tick.rotation = rotation;
	start_places(&tick, &request->cursor, pointer);
	for (int round = 0; round < FAIR_ROUNDS && room > 0; round++)
	{
		int			taken = fair_round(&tick, request, room, first_lease, &result->delivered);

		room -= taken;
		if (taken == 0)
			break;
	}
	rotation = tick.rotation;
	result->keyed_walked |= tick.keyed;

	for (int i = 0; i < tick.ntypes; i++)
	{
		FairType   *t = &tick.types[i];

		if (t->done)
			continue;
		/* It filled its share, or its seconds were not all walked. */
		wanting = true;
		new_pointer = Min(new_pointer, delaysched_second_of(t->after));
	}
	new_pointer = Max(new_pointer, pointer);

	if (wanting)
	{
		result->next_due = request->now;
		keep_places(&tick, result);
		/* When a task not of the backlog falls due here: see the header. */
		result->urgent_at = delaysched_next_due_soon(request->range, request->now);
	}
	else
	{
		/* Every type's due tasks are handled: back to the walk. */
		result->cursor.valid = false;
		result->cursor.fair = false;
		result->next_due = delaysched_next_due_after(request->range, request->now,
													 request->ticked_again_by);
	}
	delaysched_move_pointer(request->range, pointer, new_pointer, result);
	return true;
}
