/*-------------------------------------------------------------------------
 *
 * lease.c
 *		sched._lease(): lease the given tasks, for the functions written in
 *		SQL that deliver (sched.claim, sched._http_claim).  The transition itself is DELAYSCHED_LEASE
 *		(core.h), which the walk and the drain use in their own statements.
 *
 * The caller has locked the rows (FOR UPDATE, in its transaction) and says
 * which states it leases from, so that a row changed meanwhile by the same
 * transaction (a firing put off by sched._fired, say) is left alone, as
 * are the ids in p_skip.  Returns the rows leased, in no order.  NULLs
 * mean what they mean in the statement: no tasks given, none leased.
 *
 * IDENTIFICATION
 *	  src/core/lease.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"

#include "compat.h"
#include "base/base.h"
#include "core/core.h"

PG_FUNCTION_INFO_V1(delaysched_lease_sql);

/*
 * $1 buckets, $2 ids, $3 the states leased from, $4 at, $5 for, $6 owner,
 * $7 the error to record (NULL: keep the last one), $8 ids to leave alone.
 * The buckets prune the partitions the update visits.
 */
static const char lease_sql[] =
"UPDATE sched.task t SET "
DELAYSCHED_LEASE("$4", "$5", "$6") ","
" last_error = coalesce($7, t.last_error)"
" WHERE t.bucket = ANY ($1) AND t.id = ANY ($2) AND t.state = ANY ($3)"
"   AND t.id <> ALL (coalesce($8, '{}'))"
" RETURNING t.id, t.bucket, t.biz_type, t.run_at, t.payload, t.attempt, t.schedule";

#define LEASE_NARGS 8
#define LEASE_COLUMNS 7

/* Kept for the backend's life; PostgreSQL's plan cache replans it after DDL. */
static SPIPlanPtr lease_plan = NULL;

Datum
delaysched_lease_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[LEASE_NARGS];
	char		nulls[LEASE_NARGS];
	int			rc;

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < LEASE_NARGS; i++)
	{
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}

	SPI_connect();
	if (lease_plan == NULL)
	{
		Oid			types[LEASE_NARGS] = {INT2ARRAYOID, INT8ARRAYOID, CHARARRAYOID,
			TIMESTAMPTZOID, INTERVALOID, INT2OID, TEXTOID, INT8ARRAYOID};

		lease_plan = delaysched_prepare_kept(lease_sql, LEASE_NARGS, types);
	}
	rc = SPI_execute_plan(lease_plan, values, nulls, false, 0);
	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "sched._lease: the update failed: %s", SPI_result_code_string(rc));

	for (uint64 row = 0; row < SPI_processed; row++)
	{
		Datum		columns[LEASE_COLUMNS];
		bool		isnull[LEASE_COLUMNS];

		heap_deform_tuple(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, columns, isnull);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, columns, isnull);
	}
	SPI_finish();
	return (Datum) 0;
}
