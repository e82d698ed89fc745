/*-------------------------------------------------------------------------
 *
 * firing.c
 *		The C side of a schedule's firing: the scanner's tick and the drain
 *		deliver tasks with one statement each, and the firings of schedules
 *		among the rows it delivered for the first time go to
 *		sched._fired(), in the same transaction, before anything is sent.
 *		sched._fired makes each schedule's next firing and says which
 *		firings must not be sent (a paused schedule, an unfinished previous
 *		firing, a later firing already due under catch_up 'latest' or
 *		'none'); it cancels those itself, and the caller sends the rest.
 *
 * The SQL paths that deliver (sched.claim, sched._http_claim) call
 * sched._fired themselves.  See schema/objects/09_schedules.sql for
 * the locking rules.
 *
 * IDENTIFICATION
 *	  src/schedule/firing.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "schedule/schedule.h"

/* The statement, prepared once per backend and extension object. */
static struct
{
	Oid			extension;
	SPIPlanPtr	fired;
} plans;

void
delaysched_firings_init(FiringBatch *batch)
{
	memset(batch, 0, sizeof(*batch));
}

/*
 * Note a firing delivered for the first time (biz_type and schedule are text
 * Datums: a schedule is known by its name within its type).
 */
void
delaysched_firings_add(FiringBatch *batch, int64 id, int16 bucket, TimestampTz run_at,
					   Datum biz_type, Datum schedule)
{
	if (batch->n == batch->capacity)
	{
		int			capacity = Max(16, batch->capacity * 2);

		if (batch->capacity == 0)
		{
			batch->ids = palloc(sizeof(Datum) * capacity);
			batch->buckets = palloc(sizeof(Datum) * capacity);
			batch->run_ats = palloc(sizeof(Datum) * capacity);
			batch->biz_types = palloc(sizeof(Datum) * capacity);
			batch->schedules = palloc(sizeof(Datum) * capacity);
		}
		else
		{
			batch->ids = repalloc(batch->ids, sizeof(Datum) * capacity);
			batch->buckets = repalloc(batch->buckets, sizeof(Datum) * capacity);
			batch->run_ats = repalloc(batch->run_ats, sizeof(Datum) * capacity);
			batch->biz_types = repalloc(batch->biz_types, sizeof(Datum) * capacity);
			batch->schedules = repalloc(batch->schedules, sizeof(Datum) * capacity);
		}
		batch->capacity = capacity;
	}
	batch->ids[batch->n] = Int64GetDatum(id);
	batch->buckets[batch->n] = Int16GetDatum(bucket);
	batch->run_ats[batch->n] = TimestampTzGetDatum(run_at);
	batch->biz_types[batch->n] = biz_type;
	batch->schedules[batch->n] = schedule;
	batch->n++;
}

static int
compare_ids(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return x < y ? -1 : (x > y ? 1 : 0);
}

/*
 * Run sched._fired over the batch (nothing when it is empty), as of "now"
 * (the caller's clock: a tick's now, the drain's stamp), and keep the ids
 * it suppressed.  SPI connected; SPI_tuptable is replaced, so a caller
 * keeps its own rows' table in a variable first.
 */
void
delaysched_firings_fire(FiringBatch *batch, TimestampTz now)
{
	Oid			extension;
	Datum		values[6];
	bool		isnull;
	Datum		result;

	if (batch->n == 0)
		return;

	extension = get_extension_oid("delaysched", false);
	if (plans.extension != extension)
	{
		Oid			types[] = {INT8ARRAYOID, INT2ARRAYOID, TIMESTAMPTZARRAYOID, TEXTARRAYOID,
		TEXTARRAYOID, TIMESTAMPTZOID};

		delaysched_free_plan(&plans.fired);
		plans.fired = delaysched_prepare_kept("SELECT sched._fired($1, $2, $3, $4, $5, $6)", 6, types);
		plans.extension = extension;
	}

	values[0] = PointerGetDatum(construct_array(batch->ids, batch->n, INT8OID, 8,
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[1] = PointerGetDatum(construct_array(batch->buckets, batch->n, INT2OID, 2,
												true, TYPALIGN_SHORT));
	values[2] = PointerGetDatum(construct_array(batch->run_ats, batch->n, TIMESTAMPTZOID, 8,
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[3] = PointerGetDatum(construct_array(batch->biz_types, batch->n, TEXTOID, -1,
												false, TYPALIGN_INT));
	values[4] = PointerGetDatum(construct_array(batch->schedules, batch->n, TEXTOID, -1,
												false, TYPALIGN_INT));
	values[5] = TimestampTzGetDatum(now);
	if (SPI_execute_plan(plans.fired, values, NULL, false, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not make the next firings of the schedules delivered");

	result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
	{
		ArrayType  *skipped = DatumGetArrayTypeP(result);
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		deconstruct_array(skipped, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
						  &elems, &nulls, &n);
		if (n > 0)
		{
			batch->suppressed = palloc(sizeof(int64) * n);
			for (int i = 0; i < n; i++)
				batch->suppressed[i] = DatumGetInt64(elems[i]);
			batch->nsuppressed = n;
			qsort(batch->suppressed, n, sizeof(int64), compare_ids);
		}
	}
	SPI_freetuptable(SPI_tuptable);
}

/* Must the delivery of task id not be sent (sched._fired cancelled it)? */
bool
delaysched_firing_suppressed(const FiringBatch *batch, int64 id)
{
	return batch->nsuppressed > 0 &&
		bsearch(&id, batch->suppressed, batch->nsuppressed, sizeof(int64), compare_ids) != NULL;
}
