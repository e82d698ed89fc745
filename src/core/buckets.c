/*-------------------------------------------------------------------------
 *
 * buckets.c
 *		The task partitions (buckets): the second a time is in, and the
 *		bucket of that second's tasks, for the workers and for SQL
 *		(sched._bucket_of()).
 *
 * IDENTIFICATION
 *	  src/core/buckets.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/timestamp.h"

#include "core/tick.h"

/* The start of t's second. */
TimestampTz
delaysched_second_of(TimestampTz t)
{
	TimestampTz into = t % USECS_PER_SEC;

	return into < 0 ? t - into - USECS_PER_SEC : t - into;
}

/* The bucket of tasks due in t's second, of nbuckets: its Unix second mod nbuckets. */
int
delaysched_bucket_among(TimestampTz t, int nbuckets)
{
	int64		unix_seconds = delaysched_second_of(t) / USECS_PER_SEC +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;

	return (int) (((unix_seconds % nbuckets) + nbuckets) % nbuckets);
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
	PG_RETURN_INT16((int16) delaysched_bucket_among(run_at, nbuckets));
}
