/*-------------------------------------------------------------------------
 *
 * http_shmem.h
 *		The HTTP workers' shared memory: one slot per worker, with its
 *		counters for sched.workers and the ring through which scanners hand
 *		it leased tasks (http_handoff.c).
 *
 * Each database served has its own slots (cluster.h).
 *
 * Locking.  Each slot has an LWLock of its own (its database's
 * DELAYSCHED_LWLOCK_HTTP + the worker's index, see shmem.h), so that
 * scanners handing tasks to one worker never wait for another:
 *
 *	 lock guards pid, latch, in_flight, max_in_flight, handoff_head,
 *		handoff_tail and handoff_reserved.  The worker takes it exclusive to
 *		change them (at start and exit, after each round of its loop, to
 *		move handoff_tail); a scanner exclusive to reserve or give back
 *		places and, at commit, to put its tasks in the ring; backends and
 *		sched.workers shared, to read them.  It is held for a few
 *		assignments, or for copying one commit's tasks (at most one
 *		transaction's reservation, 64 per delivery statement) into the ring;
 *		never while setting a latch, nor across anything that can fail.
 *
 *	 handoff[]: the entries in [handoff_tail, handoff_head) are written
 *		before handoff_head moves past them (both under the lock) and are not
 *		written again until handoff_tail has moved past them, which only the
 *		worker does.  So the worker reads them without the lock: it reads
 *		handoff_head with the lock held, copies, then takes the lock again
 *		to move handoff_tail.  A scanner writes only at and after
 *		handoff_head, into places it reserved.
 *
 *	 Atomics: last_claim, sent, succeeded, handed, claimed are written by
 *		the worker only; claim_wanted is set by backends after a commit that
 *		parked http tasks, and cleared (exchanged) by the worker.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_HTTP_SHMEM_H
#define DELAYSCHED_HTTP_SHMEM_H

#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/lwlock.h"

#include "base/shmem.h"

/* The most tasks a scanner's commit may have handed to an HTTP worker
 * that the worker has not taken yet (see http_handoff.c). */
#define HTTP_HANDOFF_RING	1024

/* A task a scanner leased to an HTTP worker (see http_handoff.c). */
typedef struct HttpHandoff
{
	int64		id;
	TimestampTz lease_until;	/* the lease's end: which lease it is */
	int32		attempt;		/* the attempt the lease is for */
	int16		bucket;
} HttpHandoff;

/* One HTTP worker (http_worker.c). */
typedef struct HttpWorkerSlot
{
	LWLock	   *lock;

	/* Under lock. */
	pid_t		pid;			/* 0 while the worker does not run */
	Latch	   *latch;
	int			in_flight;		/* requests under way */
	int			max_in_flight;	/* its cap, after the file descriptor limit */

	/*
	 * Tasks handed over by scanners' commits: written at handoff_head,
	 * taken at handoff_tail (both counting up, modulo the ring), with
	 * handoff_reserved places kept for scanners' open transactions.  The
	 * worker's start empties the ring but never touches the reservations.
	 */
	uint64		handoff_head;
	uint64		handoff_tail;
	int			handoff_reserved;

	/* Atomics. */
	pg_atomic_uint64 last_claim;	/* a TimestampTz */
	pg_atomic_uint64 sent;		/* requests finished, whatever the outcome */
	pg_atomic_uint64 succeeded; /* of which 2xx */
	pg_atomic_uint64 handed;	/* requests started from a hand-off */
	pg_atomic_uint64 claimed;	/* requests started from a claim */
	pg_atomic_uint64 ticks;		/* claims and hand-offs taken (sched.workers) */
	pg_atomic_uint32 claim_wanted;	/* a commit parked http tasks: claim them */

	HttpHandoff handoff[HTTP_HANDOFF_RING];
} HttpWorkerSlot;

/*
 * The delaysched.http_workers slots of the database this process works
 * for (see cluster.h); NULL while it has none.
 */
extern HttpWorkerSlot *delaysched_http_slots;

extern Size delaysched_http_shmem_size(void);
extern void delaysched_http_init_slots(HttpWorkerSlot *slots, int database);
extern HttpWorkerSlot *delaysched_database_http_slots(int database);
extern void delaysched_http_wake_all(void);

#endif							/* DELAYSCHED_HTTP_SHMEM_H */
