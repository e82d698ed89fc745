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
#include "http_shmem.h"
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
 * HTTP worker (delaysched.http_workers), numbered after the scanners.  The
 * columns mean the same for both kinds: state is stopped, waiting for
 * extension, delivering (a scanner in a tick or the drain, an HTTP worker
 * with requests in flight) or sleeping; last_tick is when the latest unit
 * of work began (a tick; a claim or a hand-off taken), ticks how many
 * there were, and delivered the tasks delivered (an HTTP worker's: the
 * requests answered 2xx).  holds is what the worker has in hand: a
 * scanner's range or the drain, an HTTP worker's "N in flight of M; H
 * handed over, C claimed" (requests started from scanners' hand-offs and
 * from its own claims).
 *
 * Takes workers_lock (shmem.h) and each HTTP worker's lock (http_shmem.h)
 * shared, one slot at a time; the counters are atomics, read without them.
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
		WorkerSlot *shared = &delaysched_shared->workers[i];
		pid_t		pid;
		ScannerStatus status;
		int			range;
		bool		draining;
		TimestampTz last_tick;

		LWLockAcquire(delaysched_shared->workers_lock, LW_SHARED);
		pid = shared->pid;
		status = shared->status;
		range = shared->range;
		draining = shared->draining;
		LWLockRelease(delaysched_shared->workers_lock);
		last_tick = delaysched_read_time(&shared->last_tick);

		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(i);
		values[1] = Int32GetDatum((int32) pid);
		nulls[1] = (pid == 0);
		values[2] = CStringGetTextDatum("scanner");
		if (range >= 0)
			values[3] = CStringGetTextDatum(psprintf("range %d", range));
		else if (draining)
			values[3] = CStringGetTextDatum("drain");
		else
			nulls[3] = true;
		values[4] = CStringGetTextDatum(status_name(pid == 0 ? SCANNER_STOPPED : status));
		values[5] = TimestampTzGetDatum(last_tick);
		nulls[5] = (last_tick == 0);
		values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&shared->delivered));
		values[7] = Int64GetDatum((int64) pg_atomic_read_u64(&shared->ticks));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}

	for (int i = 0; i < delaysched_http_workers; i++)
	{
		Datum		values[WORKERS_COLUMNS];
		bool		nulls[WORKERS_COLUMNS];
		HttpWorkerSlot *shared = &delaysched_http_slots[i];
		pid_t		pid;
		int			in_flight;
		int			max_in_flight;
		TimestampTz last_claim;

		/* Not the ring. */
		LWLockAcquire(shared->lock, LW_SHARED);
		pid = shared->pid;
		in_flight = shared->in_flight;
		max_in_flight = shared->max_in_flight;
		LWLockRelease(shared->lock);
		last_claim = delaysched_read_time(&shared->last_claim);

		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(delaysched_workers + i);
		values[1] = Int32GetDatum((int32) pid);
		nulls[1] = (pid == 0);
		values[2] = CStringGetTextDatum("http");
		values[3] = CStringGetTextDatum(psprintf("%d in flight of %d; " INT64_FORMAT " handed over, " INT64_FORMAT " claimed",
												 in_flight, max_in_flight,
												 (int64) pg_atomic_read_u64(&shared->handed),
												 (int64) pg_atomic_read_u64(&shared->claimed)));
		nulls[3] = (pid == 0);
		values[4] = CStringGetTextDatum(status_name(pid == 0 ? SCANNER_STOPPED :
													in_flight > 0 ? SCANNER_DELIVERING : SCANNER_SLEEPING));
		values[5] = TimestampTzGetDatum(last_claim);
		nulls[5] = (last_claim == 0);
		values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&shared->succeeded));
		values[7] = Int64GetDatum((int64) pg_atomic_read_u64(&shared->ticks));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
