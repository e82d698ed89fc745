/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		Allocation and initialisation of delaysched's shared memory.
 *
 * Three structs: DelayschedShared (ranges, scanner workers, drain; see
 * shmem.h for its locking rules), the HTTP workers' slots (http_shmem.h)
 * and the token buckets (limiter.c).  Their LWLocks are one named tranche,
 * "delaysched", requested here.  All are created once, under
 * AddinShmemInitLock, by whichever process attaches first.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "compat.h"
#include "http_shmem.h"
#include "limiter.h"
#include "shmem.h"

DelayschedShared *delaysched_shared = NULL;

static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
request_shmem(void)
{
	Size		size = MAXALIGN(sizeof(DelayschedShared));

	size = add_size(size, MAXALIGN(delaysched_http_shmem_size()));
	size = add_size(size, delaysched_limiter_shmem_size());
	RequestAddinShmemSpace(size);
	RequestNamedLWLockTranche("delaysched", DELAYSCHED_NUM_LWLOCKS);
}

/*
 * One of the LWLocks of the "delaysched" tranche (DELAYSCHED_LWLOCK_*).
 * Only while the shared structs are created: they keep the pointers.
 */
LWLock *
delaysched_lwlock(int index)
{
	Assert(index >= 0 && index < DELAYSCHED_NUM_LWLOCKS);
	return &(GetNamedLWLockTranche("delaysched"))[index].lock;
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
		delaysched_shared->ranges_lock = delaysched_lwlock(DELAYSCHED_LWLOCK_RANGES);
		delaysched_shared->workers_lock = delaysched_lwlock(DELAYSCHED_LWLOCK_WORKERS);
		pg_atomic_init_u64(&delaysched_shared->drain_at, (uint64) DT_NOBEGIN);
		delaysched_shared->drainer = -1;
		pg_atomic_init_u32(&delaysched_shared->drain_waits_for_slot, 0);
		pg_atomic_init_u32(&delaysched_shared->old_schema_reported, 0);
		for (int i = 0; i < DELAYSCHED_MAX_WORKERS; i++)
		{
			WorkerSlot *worker = &delaysched_shared->workers[i];

			worker->status = SCANNER_STOPPED;
			worker->range = -1;
			pg_atomic_init_u64(&worker->sleep_until, 0);
			pg_atomic_init_u64(&worker->last_tick, 0);
			pg_atomic_init_u64(&worker->delivered, 0);
			pg_atomic_init_u64(&worker->ticks, 0);
		}
		for (int i = 0; i < DELAYSCHED_MAX_RANGES; i++)
		{
			RangeState *range = &delaysched_shared->ranges[i];

			pg_atomic_init_u64(&range->wake_at, (uint64) DT_NOEND);
			pg_atomic_init_u64(&range->far_added, (uint64) DT_NOEND);
			delaysched_reset_range(range);
		}
	}
	delaysched_http_shmem_init();
	delaysched_limiter_shmem_init();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Forget what the workers knew of a range: its next tick looks afresh.
 * Called with ranges_lock held exclusive (or before anyone else can see the
 * struct, its atomics initialised).
 */
void
delaysched_reset_range(RangeState *range)
{
	range->holder = -1;
	delaysched_write_time(&range->wake_at, DT_NOEND);
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
	delaysched_write_time(&range->far_added, DT_NOEND);
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
