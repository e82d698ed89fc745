/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		Allocation and initialisation of delaysched's shared memory.
 *
 * Three parts: the table of databases served (cluster.h), and for each of
 * its delaysched.max_databases entries an area with that database's
 * DelayschedShared (ranges, scanner workers, drain; see shmem.h for its
 * locking rules) followed by its HTTP workers' slots (http_shmem.h); and
 * the token buckets (limiter.c), and the statistics (stats.c).  Their LWLocks are one named tranche,
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

#include "cluster/cluster.h"
#include "compat.h"
#include "base/guc.h"
#include "base/http_shmem.h"
#include "core/limiter.h"
#include "base/shmem.h"
#include "stats/stats.h"

DelayschedShared *delaysched_shared = NULL;

/* The databases' areas, one after the other. */
static char *database_areas = NULL;

static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* One database's area: its DelayschedShared, then its HTTP workers' slots. */
static Size
database_area_size(void)
{
	return add_size(MAXALIGN(sizeof(DelayschedShared)),
					MAXALIGN(delaysched_http_shmem_size()));
}

static int
lwlocks_per_database(void)
{
	return DELAYSCHED_LWLOCK_HTTP + delaysched_http_workers;
}

static int
num_lwlocks(void)
{
	return DELAYSCHED_LWLOCK_FIRST_DATABASE +
		delaysched_max_databases * lwlocks_per_database();
}

static void
request_shmem(void)
{
	Size		size = MAXALIGN(delaysched_cluster_shmem_size());

	size = add_size(size, mul_size(database_area_size(), delaysched_max_databases));
	size = add_size(size, delaysched_limiter_shmem_size());
	size = add_size(size, delaysched_stats_shmem_size());
	RequestAddinShmemSpace(size);
	RequestNamedLWLockTranche("delaysched", num_lwlocks());
}

/*
 * One of the LWLocks of the "delaysched" tranche (DELAYSCHED_LWLOCK_*).
 * Only while the shared structs are created: they keep the pointers.
 */
LWLock *
delaysched_lwlock(int index)
{
	Assert(index >= 0 && index < num_lwlocks());
	return &(GetNamedLWLockTranche("delaysched"))[index].lock;
}

/* A database entry's LWLock "which" (DELAYSCHED_LWLOCK_RANGES, ...). */
LWLock *
delaysched_database_lwlock(int database, int which)
{
	Assert(which >= 0 && which < lwlocks_per_database());
	return delaysched_lwlock(DELAYSCHED_LWLOCK_FIRST_DATABASE +
							 database * lwlocks_per_database() + which);
}

/* The DelayschedShared of database entry "database". */
DelayschedShared *
delaysched_database_area(int database)
{
	Assert(database >= 0 && database < delaysched_max_databases);
	return (DelayschedShared *) (database_areas + database * database_area_size());
}

/* The HTTP workers' slots of database entry "database". */
HttpWorkerSlot *
delaysched_database_http_slots(int database)
{
	return (HttpWorkerSlot *) ((char *) delaysched_database_area(database) +
							   MAXALIGN(sizeof(DelayschedShared)));
}

/*
 * Make database entry "database"'s area as new: no worker, no range known.
 * At start-up, and by whoever takes the entry for a database, with the
 * cluster's lock held exclusive and no worker of the entry running.
 */
void
delaysched_init_database_area(int database)
{
	DelayschedShared *shared = delaysched_database_area(database);

	/*
	 * The lock pointers are never zeroed, not even for a moment: a backend
	 * may still be using the entry it knew (see cluster.h).
	 */
	shared->ranges_lock = delaysched_database_lwlock(database, DELAYSCHED_LWLOCK_RANGES);
	shared->workers_lock = delaysched_database_lwlock(database, DELAYSCHED_LWLOCK_WORKERS);
	memset((char *) shared + offsetof(DelayschedShared, nranges), 0,
		   sizeof(DelayschedShared) - offsetof(DelayschedShared, nranges));
	pg_atomic_init_u64(&shared->drain_at, (uint64) DT_NOBEGIN);
	shared->drainer = -1;
	pg_atomic_init_u32(&shared->drain_waits_for_slot, 0);
	pg_atomic_init_u32(&shared->old_schema_reported, 0);
	shared->probe_all = true;	/* hints do not survive a restart */
	for (int i = 0; i < DELAYSCHED_MAX_WORKERS; i++)
	{
		WorkerSlot *worker = &shared->workers[i];

		worker->status = SCANNER_STOPPED;
		worker->range = -1;
		pg_atomic_init_u64(&worker->sleep_until, 0);
		pg_atomic_init_u64(&worker->last_tick, 0);
		pg_atomic_init_u64(&worker->delivered, 0);
		pg_atomic_init_u64(&worker->ticks, 0);
	}
	for (int i = 0; i < DELAYSCHED_MAX_RANGES; i++)
	{
		RangeState *range = &shared->ranges[i];

		pg_atomic_init_u64(&range->wake_at, (uint64) DT_NOEND);
		pg_atomic_init_u64(&range->far_added, (uint64) DT_NOEND);
		delaysched_reset_range(range);
	}
	delaysched_http_init_slots(delaysched_database_http_slots(database), database);
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
 * Create or attach to the shared structs.
 */
static void
delaysched_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	database_areas = ShmemInitStruct("delaysched databases",
									 mul_size(database_area_size(), delaysched_max_databases),
									 &found);
	if (!found)
	{
		for (int d = 0; d < delaysched_max_databases; d++)
			delaysched_init_database_area(d);
	}
	delaysched_cluster_shmem_init();
	delaysched_limiter_shmem_init();
	delaysched_stats_shmem_init();
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
	range->cursor.valid = false;
	range->cursor.fair = false;
	range->cursor.nlanes = 0;
	range->urgent_at = DT_NOEND;
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
