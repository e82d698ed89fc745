/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		Allocation and initialisation of delaysched's shared memory.
 *
 * Locking: DelayschedShared is one struct guarded by its spinlock (see
 * shmem.h); the token buckets (limiter.c) have an LWLock of their own.
 * Both are created once, under AddinShmemInitLock, by whichever process
 * attaches first.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "compat.h"
#include "limiter.h"
#include "shmem.h"

DelayschedShared *delaysched_shared = NULL;

static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
request_shmem(void)
{
	RequestAddinShmemSpace(add_size(MAXALIGN(sizeof(DelayschedShared)),
									delaysched_limiter_shmem_size()));
	delaysched_limiter_request_lock();
}

#ifdef DELAYSCHED_HAS_SHMEM_REQUEST_HOOK
static shmem_request_hook_type prev_shmem_request_hook = NULL;

static void
delaysched_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	request_shmem();
}
#endif

/*
 * Create or attach to the shared struct.
 */
static void
delaysched_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	delaysched_shared = ShmemInitStruct("delaysched",
										sizeof(DelayschedShared),
										&found);
	if (!found)
	{
		memset(delaysched_shared, 0, sizeof(DelayschedShared));
		SpinLockInit(&delaysched_shared->mutex);
		delaysched_shared->drain_at = DT_NOBEGIN;
		delaysched_shared->drainer = -1;
		for (int i = 0; i < DELAYSCHED_MAX_WORKERS; i++)
		{
			delaysched_shared->workers[i].status = SCANNER_STOPPED;
			delaysched_shared->workers[i].range = -1;
		}
		for (int i = 0; i < DELAYSCHED_MAX_RANGES; i++)
			delaysched_reset_range(&delaysched_shared->ranges[i]);
	}
	delaysched_limiter_shmem_init();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Forget what the workers knew of a range: its next tick looks afresh.
 * Called with the mutex held (or before anyone else can see the struct).
 */
void
delaysched_reset_range(RangeState *range)
{
	range->holder = -1;
	range->wake_at = DT_NOEND;
	range->next_due = DT_NOBEGIN;
	range->next_sweep = DT_NOEND;
	range->last_sweep = 0;
	range->pointer = DT_NOBEGIN;
	range->retry_at = 0;
	range->cursor_valid = false;
	range->late_from = DT_NOBEGIN;
	range->lease_from = DT_NOBEGIN;
	range->purge_done_from = DT_NOBEGIN;
	range->purge_dead_from = DT_NOBEGIN;
	range->full_sweep_at = 0;
	range->far_due = DT_NOEND;
	range->far_checked_at = 0;
	range->far_added = DT_NOEND;
}

/*
 * Ask for shared memory and install the hooks; called from _PG_init while
 * shared_preload_libraries is being processed.
 */
void
delaysched_shmem_register(void)
{
#ifdef DELAYSCHED_HAS_SHMEM_REQUEST_HOOK
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = delaysched_shmem_request;
#else
	request_shmem();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = delaysched_shmem_startup;
}
