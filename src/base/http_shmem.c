/*-------------------------------------------------------------------------
 *
 * http_shmem.c
 *		The HTTP workers' slots of a database in shared memory (allocated
 *		with the database's area, shmem.c), and the wake-up of every HTTP
 *		worker after a commit that parked http tasks.
 *		The locking rules are in http_shmem.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/shmem.h"

#include "base/guc.h"
#include "base/http_shmem.h"

HttpWorkerSlot *delaysched_http_slots = NULL;

/* The slots of one database: delaysched.http_workers of them. */
Size
delaysched_http_shmem_size(void)
{
	return mul_size(sizeof(HttpWorkerSlot), delaysched_http_workers);
}

/*
 * Make one database's slots as new (see delaysched_init_database_area);
 * their LWLocks are that database entry's.
 */
void
delaysched_http_init_slots(HttpWorkerSlot *slots, int database)
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
 * Ask every running HTTP worker to claim, and set its latch.  Takes each
 * slot's lock shared in turn, and sets the latches after releasing it.
 */
void
delaysched_http_wake_all(void)
{
	Latch	   *latches[DELAYSCHED_MAX_HTTP_WORKERS];
	int			n = 0;

	if (delaysched_http_slots == NULL)
		return;
	for (int i = 0; i < delaysched_http_workers; i++)
	{
		HttpWorkerSlot *slot = &delaysched_http_slots[i];

		LWLockAcquire(slot->lock, LW_SHARED);
		if (slot->pid != 0 && slot->latch != NULL)
		{
			/* Before the latch: the worker clears it after its wait. */
			pg_atomic_write_u32(&slot->claim_wanted, 1);
			latches[n++] = slot->latch;
		}
		LWLockRelease(slot->lock);
	}
	for (int i = 0; i < n; i++)
		SetLatch(latches[i]);
}
