/*-------------------------------------------------------------------------
 *
 * worker_views.c
 *		sched._workers(): what the scanner workers are doing and which range
 *		each works on, and what the HTTP workers have in flight, read from
 *		shared memory, for the sched.workers view.
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
#include "guc.h"
#include "shmem.h"

PG_FUNCTION_INFO_V1(delaysched_worker_status);

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

static void
require_shared_memory(void)
{
	if (delaysched_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delaysched must be loaded via \"shared_preload_libraries\"")));
}

/*
 * sched._workers() RETURNS TABLE(worker int, pid int, role text, holds text,
 *		state text, last_tick timestamptz, delivered bigint, ticks bigint)
 *
 * One row per scanner worker (delaysched.workers of them), then one per
 * HTTP worker (delaysched.http_workers), numbered after the scanners.  For
 * an HTTP worker, holds is "N in flight of M; H handed over, C claimed"
 * (requests started from scanners' hand-offs and from its own claims),
 * last_tick its last claim or hand-off, delivered the requests finished
 * and ticks those that succeeded (2xx).
 */
Datum
delaysched_worker_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	require_shared_memory();
	InitMaterializedSRF(fcinfo, 0);

	for (int i = 0; i < delaysched_workers; i++)
	{
		Datum		values[WORKERS_COLUMNS];
		bool		nulls[WORKERS_COLUMNS];
		WorkerSlot	slot;

		SpinLockAcquire(&delaysched_shared->mutex);
		slot = delaysched_shared->workers[i];
		SpinLockRelease(&delaysched_shared->mutex);

		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(i);
		values[1] = Int32GetDatum((int32) slot.pid);
		nulls[1] = (slot.pid == 0);
		values[2] = CStringGetTextDatum("scanner");
		if (slot.range >= 0)
			values[3] = CStringGetTextDatum(psprintf("range %d", slot.range));
		else if (slot.draining)
			values[3] = CStringGetTextDatum("drain");
		else
			nulls[3] = true;
		values[4] = CStringGetTextDatum(status_name(slot.pid == 0 ? SCANNER_STOPPED : slot.status));
		values[5] = TimestampTzGetDatum(slot.last_tick);
		nulls[5] = (slot.last_tick == 0);
		values[6] = Int64GetDatum(slot.delivered);
		values[7] = Int64GetDatum(slot.ticks);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}

	for (int i = 0; i < delaysched_http_workers; i++)
	{
		Datum		values[WORKERS_COLUMNS];
		bool		nulls[WORKERS_COLUMNS];
		HttpWorkerSlot *shared = &delaysched_shared->http_workers[i];
		HttpWorkerSlot slot;

		/* The counters only: not the ring. */
		SpinLockAcquire(&delaysched_shared->mutex);
		memcpy(&slot, shared, offsetof(HttpWorkerSlot, handoff_head));
		SpinLockRelease(&delaysched_shared->mutex);

		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(delaysched_workers + i);
		values[1] = Int32GetDatum((int32) slot.pid);
		nulls[1] = (slot.pid == 0);
		values[2] = CStringGetTextDatum("http");
		values[3] = CStringGetTextDatum(psprintf("%d in flight of %d; " INT64_FORMAT " handed over, " INT64_FORMAT " claimed",
												 slot.in_flight, slot.max_in_flight,
												 slot.handed, slot.claimed));
		nulls[3] = (slot.pid == 0);
		values[4] = CStringGetTextDatum(slot.pid == 0 ? "stopped" : slot.in_flight > 0 ? "sending" : "idle");
		values[5] = TimestampTzGetDatum(slot.last_claim);
		nulls[5] = (slot.last_claim == 0);
		values[6] = Int64GetDatum(slot.sent);
		values[7] = Int64GetDatum(slot.succeeded);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
