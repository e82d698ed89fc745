/*-------------------------------------------------------------------------
 *
 * spi_plans.c
 *		Small helpers for the statements the workers prepare once and keep
 *		(tick.c, drain.c, sql_plans.c, http_store.c): prepare and keep,
 *		free, run a statement that returns one value, read the bucket
 *		count, copy a text column out of a row.  SPI connected.
 *
 * IDENTIFICATION
 *	  src/base/spi_plans.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/base.h"

SPIPlanPtr
delaysched_prepare_kept(const char *sql, int nargs, Oid *types)
{
	return delaysched_prepare_kept_with(sql, nargs, types, 0);
}

/*
 * The same with cursor options: CURSOR_OPT_GENERIC_PLAN for a statement
 * whose generic plan serves every call, and which a session that is not a
 * scanner's (whose plan_cache_mode is the server's) runs too rarely per
 * plan for the plan cache to stop planning it afresh.
 */
SPIPlanPtr
delaysched_prepare_kept_with(const char *sql, int nargs, Oid *types, int cursor_options)
{
	SPIPlanPtr	plan = SPI_prepare_cursor(sql, nargs, types, cursor_options);

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql,
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed for \"%s\"", sql);
	return plan;
}

void
delaysched_free_plan(SPIPlanPtr *plan)
{
	if (*plan != NULL)
		SPI_freeplan(*plan);
	*plan = NULL;
}

/* Run a plan that returns at most one timestamptz; false if none. */
bool
delaysched_fetch_timestamp(SPIPlanPtr plan, Datum *values, TimestampTz *result)
{
	bool		isnull;

	if (SPI_execute_plan(plan, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "a delaysched probe failed");
	if (SPI_processed == 0)
		return false;
	*result = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1, &isnull));
	return !isnull;
}

/* Run a plan that returns one int (0 if NULL). */
int
delaysched_fetch_int(SPIPlanPtr plan, Datum *values)
{
	bool		isnull;
	Datum		value;

	if (SPI_execute_plan(plan, values, NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "a delaysched statement returning a count failed");
	value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetInt32(value);
}

/* The bucket count of the installed extension (sched._bucket_count()). */
int
delaysched_read_bucket_count(void)
{
	bool		isnull;
	int			nbuckets;

	if (SPI_execute("SELECT sched._bucket_count()", true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read the bucket count of delaysched");
	nbuckets = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_freetuptable(SPI_tuptable);
	return nbuckets;
}

/* A text column of an SPI row, copied into context; NULL if null. */
char *
delaysched_spi_text(HeapTuple tuple, TupleDesc desc, int column, MemoryContext context)
{
	bool		isnull;
	Datum		value = SPI_getbinval(tuple, desc, column, &isnull);
	MemoryContext old;
	char	   *copy;

	if (isnull)
		return NULL;
	old = MemoryContextSwitchTo(context);
	copy = TextDatumGetCString(value);
	MemoryContextSwitchTo(old);
	return copy;
}
