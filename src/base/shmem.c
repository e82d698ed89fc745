/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		The table of databases served and the databases' areas in shared
 *		memory: their sizes, their creation, the lookups every family uses
 *		(a lock of the "delaysched" tranche, a database's area and HTTP
 *		slots, the entry of a database), and making an area as new.
 *
 * What the structs hold, and which lock guards what, is in shmem.h (see
 * Locks there).  delaysched.c asks for this memory beside the limiter's
 * and the statistics', and creates all of it at start-up.
 *
 * IDENTIFICATION
 *	  src/base/shmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "base/guc.h"
#include "base/shmem.h"

DelayschedCluster *delaysched_cluster = NULL;
int			delaysched_database_index = -1;
DelayschedShared *delaysched_shared = NULL;
HttpWorkerSlot *delaysched_http_slots = NULL;

/* The databases' areas, one after the other. */
static char *database_areas = NULL;

static void init_http_slots(HttpWorkerSlot *slots, int database);

/* The table of databases served. */
static Size
cluster_size(void)
{
	return add_size(offsetof(DelayschedCluster, databases),
					mul_size(sizeof(DatabaseEntry), delaysched_max_databases));
}

/* The HTTP slots of one database: delaysched.http_workers of them. */
static Size
http_slots_size(void)
{
	return mul_size(sizeof(HttpWorkerSlot), delaysched_http_workers);
}

/* One database's area: its DelayschedShared, then its HTTP workers' slots. */
static Size
database_area_size(void)
{
	return add_size(MAXALIGN(sizeof(DelayschedShared)),
					MAXALIGN(http_slots_size()));
}

static int
lwlocks_per_database(void)
{
	return DELAYSCHED_LWLOCK_HTTP + delaysched_http_workers;
}

/* The size of the table of databases and of every database's area. */
Size
delaysched_databases_shmem_size(void)
{
	return add_size(MAXALIGN(cluster_size()),
					mul_size(database_area_size(), delaysched_max_databases));
}

/* The LWLocks of the "delaysched" tranche (DELAYSCHED_LWLOCK_*). */
int
delaysched_lwlocks_needed(void)
{
	return DELAYSCHED_LWLOCK_FIRST_DATABASE +
		delaysched_max_databases * lwlocks_per_database();
}

/*
 * Create or attach to the databases' areas and the table of databases;
 * called with AddinShmemInitLock held.
 */
void
delaysched_databases_shmem_init(void)
{
	bool		found;

	database_areas = ShmemInitStruct("delaysched databases",
									 mul_size(database_area_size(), delaysched_max_databases),
									 &found);
	if (!found)
	{
		for (int d = 0; d < delaysched_max_databases; d++)
			delaysched_init_database_area(d);
	}

	delaysched_cluster = ShmemInitStruct("delaysched cluster", cluster_size(), &found);
	if (found)
		return;
	memset(delaysched_cluster, 0, cluster_size());
	delaysched_cluster->lock = delaysched_lwlock(DELAYSCHED_LWLOCK_CLUSTER);
	pg_atomic_init_u32(&delaysched_cluster->rescan, 0);
	delaysched_cluster->max_databases = delaysched_max_databases;
	for (int d = 0; d < delaysched_max_databases; d++)
	{
		pg_atomic_init_u32(&delaysched_cluster->databases[d].dboid, InvalidOid);
		delaysched_cluster->databases[d].want = DATABASE_STOP;
	}
}

/*
 * One of the LWLocks of the "delaysched" tranche (DELAYSCHED_LWLOCK_*).
 * Only while the shared structs are created: they keep the pointers.
 */
LWLock *
delaysched_lwlock(int index)
{
	Assert(index >= 0 && index < delaysched_lwlocks_needed());
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
 * The entry of database dboid, or -1 (InvalidOid: a free entry).  No lock
 * needed: dboid is atomic, and
 * a caller that must be sure the entry stays its database's holds the
 * cluster's lock.
 */
int
delaysched_find_database(Oid dboid)
{
	if (delaysched_cluster == NULL)
		return -1;
	for (int d = 0; d < delaysched_cluster->max_databases; d++)
		if (pg_atomic_read_u32(&delaysched_cluster->databases[d].dboid) == dboid)
			return d;
	return -1;
}

/* Work for database entry "index" (-1: none) from now on. */
void
delaysched_use_database(int index)
{
	delaysched_database_index = index;
	delaysched_shared = index >= 0 ? delaysched_database_area(index) : NULL;
	delaysched_http_slots = index >= 0 ? delaysched_database_http_slots(index) : NULL;
}

/*
 * Make delaysched_shared and delaysched_http_slots those of the current
 * database, if it is served; false if it is not.  For ordinary backends,
 * which only lower wake-up times and set latches there (see the top of
 * shmem.h); a worker's database never changes.
 */
bool
delaysched_current_database(void)
{
	int			index = delaysched_database_index;

	if (delaysched_cluster == NULL || !OidIsValid(MyDatabaseId))
		return false;
	if (index >= 0 &&
		pg_atomic_read_u32(&delaysched_cluster->databases[index].dboid) == MyDatabaseId)
		return true;
	delaysched_use_database(delaysched_find_database(MyDatabaseId));
	return delaysched_database_index >= 0;
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
	 * may still be using the entry it knew (see the top of shmem.h).
	 */
	shared->ranges_lock = delaysched_database_lwlock(database, DELAYSCHED_LWLOCK_RANGES);
	shared->workers_lock = delaysched_database_lwlock(database, DELAYSCHED_LWLOCK_WORKERS);
	memset((char *) shared + offsetof(DelayschedShared, nranges), 0,
		   sizeof(DelayschedShared) - offsetof(DelayschedShared, nranges));
	pg_atomic_init_u64(&shared->drain_at, (uint64) DT_NOBEGIN);
	shared->drainer = -1;
	pg_atomic_init_u32(&shared->drain_waits_for_slot, 0);
	pg_atomic_init_u32(&shared->old_schema_reported, 0);
	pg_atomic_init_u64(&shared->share_lease_until, 0);
	pg_atomic_init_u64(&shared->share_generation, 0);
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
	for (int i = 0; i < DELAYSCHED_MAX_SQL_WORKERS; i++)
	{
		SqlWorkerSlot *slot = &shared->sql_workers[i];

		pg_atomic_init_u64(&slot->running, 0);
		pg_atomic_init_u64(&slot->cancel, 0);
		pg_atomic_init_u64(&slot->run_started, 0);
		pg_atomic_init_u64(&slot->last_claim, 0);
		pg_atomic_init_u64(&slot->runs, 0);
		pg_atomic_init_u64(&slot->succeeded, 0);
		pg_atomic_init_u32(&slot->claim_wanted, 0);
		pg_atomic_init_u32(&slot->report.state, 0);
	}
	init_http_slots(delaysched_database_http_slots(database), database);
}

/*
 * Make one database's HTTP slots as new (see delaysched_init_database_area);
 * their LWLocks are that database entry's.
 */
static void
init_http_slots(HttpWorkerSlot *slots, int database)
{
	for (int i = 0; i < delaysched_http_workers; i++)
	{
		HttpWorkerSlot *slot = &slots[i];

		/* The lock pointer is never zeroed (see delaysched_init_database_area). */
		slot->lock = delaysched_database_lwlock(database, DELAYSCHED_LWLOCK_HTTP + i);
		memset((char *) slot + offsetof(HttpWorkerSlot, pid), 0,
			   offsetof(HttpWorkerSlot, handoff) - offsetof(HttpWorkerSlot, pid));
		pg_atomic_init_u64(&slot->last_claim, 0);
		pg_atomic_init_u64(&slot->sent, 0);
		pg_atomic_init_u64(&slot->succeeded, 0);
		pg_atomic_init_u64(&slot->handed, 0);
		pg_atomic_init_u64(&slot->claimed, 0);
		pg_atomic_init_u64(&slot->ticks, 0);
		pg_atomic_init_u32(&slot->claim_wanted, 0);
	}
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
	range->cursor.ahead_valid = false;
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
