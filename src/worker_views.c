/*-------------------------------------------------------------------------
 *
 * worker_views.c
 *		sched._workers(): what the workers are doing, read from shared
 *		memory, for the sched.workers view.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "shmem.h"

PG_FUNCTION_INFO_V1(delaysched_workers);

#define WORKERS_COLUMNS 8

static const char *
status_name(ScannerStatus status)
{
	switch (status)
	{
		case SCANNER_STOPPED:
			return "stopped";
		case SCANNER_WAITING_FOR_EXTENSION:
			return "waiting for extension";
		case SCANNER_DELIVERING:
			return "delivering";
		case SCANNER_SLEEPING:
			return "sleeping";
	}
	return "unknown";
}

/*
 * sched._workers() RETURNS TABLE(pid int, role text, holds text,
 *		state text, last_tick timestamptz, time_pointer timestamptz,
 *		delivered bigint, ticks bigint)
 *
 * One row per worker slot.  For now there is one scanner, which holds every
 * bucket.
 */
Datum
delaysched_workers(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[WORKERS_COLUMNS];
	bool		nulls[WORKERS_COLUMNS];
	pid_t		pid;
	ScannerStatus status;
	TimestampTz last_tick;
	TimestampTz time_pointer;
	int64		delivered;
	int64		ticks;

	if (delaysched_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delaysched must be loaded via \"shared_preload_libraries\"")));

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	SpinLockAcquire(&delaysched_shared->mutex);
	pid = delaysched_shared->scanner_pid;
	status = delaysched_shared->scanner_status;
	last_tick = delaysched_shared->last_tick;
	time_pointer = delaysched_shared->time_pointer;
	delivered = delaysched_shared->delivered;
	ticks = delaysched_shared->ticks;
	SpinLockRelease(&delaysched_shared->mutex);

	memset(nulls, 0, sizeof(nulls));
	values[0] = Int32GetDatum((int32) pid);
	nulls[0] = (pid == 0);
	values[1] = CStringGetTextDatum("scanner");
	values[2] = CStringGetTextDatum("all buckets");
	values[3] = CStringGetTextDatum(status_name(status));
	values[4] = TimestampTzGetDatum(last_tick);
	nulls[4] = (last_tick == 0);
	values[5] = TimestampTzGetDatum(time_pointer);
	nulls[5] = (time_pointer == 0 || TIMESTAMP_NOT_FINITE(time_pointer));
	values[6] = Int64GetDatum(delivered);
	values[7] = Int64GetDatum(ticks);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
