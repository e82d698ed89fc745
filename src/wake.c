/*-------------------------------------------------------------------------
 *
 * wake.c
 *		Wake the scanner when a transaction that made a task due sooner
 *		commits -- after the commit, never before, so that the scanner's next
 *		snapshot is sure to see the task.
 *
 * sched.add and the other functions that set a task's run_at call
 * sched._wake(run_at).  This only remembers the earliest such run_at in
 * backend-local memory; a transaction callback publishes it to shared
 * memory at XACT_EVENT_COMMIT (which PostgreSQL fires after the commit is
 * visible to other sessions) and sets the scanner's latch if the scanner is
 * busy or would otherwise sleep past that time.  An abort forgets it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "shmem.h"
#include "wake.h"

PG_FUNCTION_INFO_V1(delaysched_wake);

/* Earliest run_at this transaction scheduled, DT_NOEND if none. */
static TimestampTz pending_wake_at = DT_NOEND;
static bool callback_registered = false;

/*
 * Publish pending_wake_at once the transaction's work is visible.
 */
static void
wake_xact_callback(XactEvent event, void *arg)
{
	TimestampTz wake_at = pending_wake_at;
	Latch	   *latch = NULL;

	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/*
			 * A prepared transaction commits later, perhaps in another
			 * session; the scanner's next walk or sweep finds its tasks.
			 */
			pending_wake_at = DT_NOEND;
			return;
		default:
			return;
	}

	pending_wake_at = DT_NOEND;
	if (wake_at == DT_NOEND || delaysched_shared == NULL)
		return;

	SpinLockAcquire(&delaysched_shared->mutex);
	if (wake_at < delaysched_shared->wake_at)
		delaysched_shared->wake_at = wake_at;
	if (wake_at < delaysched_shared->sleep_until ||
		delaysched_shared->sleep_until == 0)
		latch = delaysched_shared->scanner_latch;
	SpinLockRelease(&delaysched_shared->mutex);

	if (latch != NULL)
		SetLatch(latch);
}

/*
 * sched._wake(run_at timestamptz) RETURNS void
 *
 * Note that the calling transaction schedules a task due at run_at.
 */
Datum
delaysched_wake(PG_FUNCTION_ARGS)
{
	TimestampTz run_at = PG_GETARG_TIMESTAMPTZ(0);

	if (!callback_registered)
	{
		RegisterXactCallback(wake_xact_callback, NULL);
		callback_registered = true;
	}
	if (run_at < pending_wake_at)
		pending_wake_at = run_at;

	PG_RETURN_VOID();
}
