/*-------------------------------------------------------------------------
 *
 * cluster.c
 *		What the table of databases served is asked to do: take an entry
 *		for a database, stop serving one, wake the launcher, read or wake a
 *		database's workers.  What the entries hold, the lookups and the
 *		locks are in base/shmem.h (see Locks there); the launcher, which
 *		acts on the entries, is launcher.c.
 *
 * IDENTIFICATION
 *	  src/cluster/cluster.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"

#include "base/guc.h"
#include "base/shmem.h"
#include "cluster/cluster.h"

/*
 * Is there an entry for dboid, or a free one?  (CREATE EXTENSION asks
 * before it runs.)
 */
bool
delaysched_database_has_room(Oid dboid)
{
	if (delaysched_find_database(dboid) >= 0)
		return true;
	return delaysched_find_database(InvalidOid) >= 0;
}

/* Set the launcher's latch and ask it to look at pg_database again. */
void
delaysched_wake_launcher(void)
{
	Latch	   *latch = NULL;

	if (delaysched_cluster == NULL)
		return;
	pg_atomic_write_u32(&delaysched_cluster->rescan, 1);
	LWLockAcquire(delaysched_cluster->lock, LW_SHARED);
	if (delaysched_cluster->launcher_pid != 0)
		latch = delaysched_cluster->launcher_latch;
	LWLockRelease(delaysched_cluster->lock);
	if (latch != NULL)
		SetLatch(latch);
}

/*
 * Serve database dboid: take an entry for it if it has none (its area made
 * as new), and wake the launcher.  Returns the entry, or -1 if every entry
 * is taken.
 */
int
delaysched_serve_database(Oid dboid)
{
	int			index;

	LWLockAcquire(delaysched_cluster->lock, LW_EXCLUSIVE);
	index = delaysched_find_database(dboid);
	if (index < 0)
	{
		index = delaysched_find_database(InvalidOid);
		if (index >= 0)
		{
			DatabaseEntry *entry = &delaysched_cluster->databases[index];

			/* A free entry has no worker running (launcher.c gives it back). */
			delaysched_init_database_area(index);
			entry->leaving_for = 0;
			entry->scanners_granted = 0;
			entry->http_granted = 0;
			entry->waiting = DATABASE_WAITING_NONE;
			entry->failures = 0;
			entry->retry_at = 0;
			entry->served_since = GetCurrentTimestamp();
			pg_atomic_write_u32(&entry->dboid, dboid);
		}
	}
	if (index >= 0)
		delaysched_cluster->databases[index].want = DATABASE_SERVE;
	LWLockRelease(delaysched_cluster->lock);
	delaysched_wake_launcher();
	return index;
}

/*
 * Stop serving database dboid (its extension was dropped, say): the
 * launcher stops its workers and gives the entry back.
 */
void
delaysched_stop_database(Oid dboid)
{
	int			index;

	LWLockAcquire(delaysched_cluster->lock, LW_EXCLUSIVE);
	index = delaysched_find_database(dboid);
	if (index >= 0)
		delaysched_cluster->databases[index].want = DATABASE_STOP;
	LWLockRelease(delaysched_cluster->lock);
	if (index >= 0)
		delaysched_wake_launcher();
}

/*
 * The pids in database entry "index"'s slots, scanners and HTTP workers.
 * Takes the entry's workers_lock and each HTTP slot's lock, shared, in
 * turn.  (The launcher, sched.cluster and the commands that need a
 * database to themselves all read them here.)
 */
void
delaysched_database_pids(int index, DatabasePids *pids)
{
	DelayschedShared *shared = delaysched_database_area(index);
	HttpWorkerSlot *slots = delaysched_database_http_slots(index);

	memset(pids, 0, sizeof(DatabasePids));
	LWLockAcquire(shared->workers_lock, LW_SHARED);
	for (int i = 0; i < DELAYSCHED_MAX_WORKERS; i++)
		pids->pid[WORKER_SCANNER][i] = shared->workers[i].pid;
	for (int i = 0; i < DELAYSCHED_MAX_SQL_WORKERS; i++)
		pids->pid[WORKER_SQL][i] = shared->sql_workers[i].pid;
	LWLockRelease(shared->workers_lock);
	for (int i = 0; i < delaysched_http_workers; i++)
	{
		LWLockAcquire(slots[i].lock, LW_SHARED);
		pids->pid[WORKER_HTTP][i] = slots[i].pid;
		LWLockRelease(slots[i].lock);
	}
	for (int k = 0; k < WORKER_KINDS; k++)
		for (int i = 0; i < DELAYSCHED_MAX_WORKERS; i++)
			if (pids->pid[k][i] != 0)
			{
				pids->count[k]++;
				pids->total++;
			}
}

/* How many workers of a kind every database wants (the parameters). */
int
delaysched_workers_wanted(WorkerKind kind)
{
	switch (kind)
	{
		case WORKER_SCANNER:
			return delaysched_workers;
		case WORKER_HTTP:
			return delaysched_http_workers;
		case WORKER_SQL:
			return delaysched_sql_workers;
		case WORKER_KINDS:
			break;
	}
	return 0;
}

/*
 * Set the latches of database entry "index"'s workers: something they wait
 * for (an ALTER EXTENSION ... UPDATE, say) has committed.
 */
void
delaysched_wake_database_workers(int index)
{
	DelayschedShared *shared = delaysched_database_area(index);
	HttpWorkerSlot *slots = delaysched_database_http_slots(index);
	Latch	   *latches[DELAYSCHED_MAX_WORKERS + DELAYSCHED_MAX_HTTP_WORKERS + DELAYSCHED_MAX_SQL_WORKERS];
	int			n = 0;

	LWLockAcquire(shared->workers_lock, LW_SHARED);
	for (int i = 0; i < DELAYSCHED_MAX_WORKERS; i++)
		if (shared->workers[i].pid != 0 && shared->workers[i].latch != NULL)
			latches[n++] = shared->workers[i].latch;
	for (int i = 0; i < DELAYSCHED_MAX_SQL_WORKERS; i++)
		if (shared->sql_workers[i].pid != 0 && shared->sql_workers[i].latch != NULL)
			latches[n++] = shared->sql_workers[i].latch;
	LWLockRelease(shared->workers_lock);
	for (int i = 0; i < delaysched_http_workers; i++)
	{
		LWLockAcquire(slots[i].lock, LW_SHARED);
		if (slots[i].pid != 0 && slots[i].latch != NULL)
			latches[n++] = slots[i].latch;
		LWLockRelease(slots[i].lock);
	}
	for (int i = 0; i < n; i++)
		SetLatch(latches[i]);
}
