/*-------------------------------------------------------------------------
 *
 * http_handoff.c
 *		The hand-off: a scanner's walk leases an http type's due task to an
 *		HTTP worker itself, and tells that worker through shared memory when
 *		its transaction commits, so that the request leaves without waiting
 *		for a claim transaction of the worker's own (sched._http_claim).
 *
 * The scanner's side.  Before a delivery statement, the tick reserves
 * places in one HTTP worker's ring (delaysched_handoff_reserve): 64 at
 * most, and half of what is free, in the ring and in the worker's slots up
 * to three quarters of its cap (the last quarter stays for claims, so that
 * the fair shares of sched._http_claim still mean something when slots are
 * scarce).  The statement leases at most that many tasks to the worker
 * (state 'd', lease_owner), asking sched._handoff_lease row by row, and
 * the tick notes each (delaysched_handoff_add)
 * and gives the places it did not use back (delaysched_handoff_settle).
 * The rest of the http tasks are parked for the claims.  At
 * XACT_EVENT_COMMIT, which PostgreSQL fires once the commit is visible,
 * the noted tasks go into the ring and the worker's latch is set; an abort
 * gives the reservation back and forgets them.
 *
 * The worker's side.  The worker takes what the ring holds
 * (delaysched_handoff_take) as its slots allow, reads the tasks in a short
 * read-only transaction, and sends those still under the lease they were
 * handed over with (the same attempt and lease_until): a task that was
 * cancelled, finished, or parked again in the meantime is not sent, nor
 * one parked and leased again since, to this worker by a claim of its own
 * (which sent it: a worker starting parks its previous run's leases and
 * claims them at once, with the attempt they had).  A worker starting empties its ring
 * (delaysched_handoff_clear) before it parks what its previous run leased
 * (sched._http_release): a task whose lease committed before the release is
 * parked by it and skipped from the ring; one that committed after is
 * still leased to the worker, and sent.  A scanner that dies between its
 * commit and the ring leaves a lease that runs out (timeout + 30 s) and is
 * parked by the sweep: late, never lost.
 *
 * Locking: each worker's slot and ring has an LWLock of its own; see Locks
 * in base/shmem.h.
 *
 * IDENTIFICATION
 *	  src/http/http_handoff.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "utils/memutils.h"

#include "base/guc.h"
#include "base/shmem.h"
#include "http/http.h"

/* The most tasks one delivery statement hands over. */
#define HANDOFF_MAX			64

/*
 * The delivery statement running: the places reserved for it, and the ids
 * sched._handoff_lease said yes to.
 */
static int	stmt_places = 0;
static int	stmt_nleased = 0;
static int64 stmt_leased[HANDOFF_MAX];

/* This backend's open transaction: the worker it hands to, -1 if none. */
static int	xact_worker = -1;
/* Places reserved in that worker's ring and not given back. */
static int	xact_reserved = 0;
/* The tasks leased to it, to put in the ring at commit. */
static HttpHandoff *xact_tasks = NULL;
static int	xact_ntasks = 0;
static int	xact_tasks_size = 0;
static bool callback_registered = false;

static void handoff_xact_callback(XactEvent event, void *arg);

PG_FUNCTION_INFO_V1(delaysched_handoff_lease);

/* The places a worker's ring could give one more task now; its lock held. */
static int
free_places(const HttpWorkerSlot *slot)
{
	int			queued = (int) (slot->handoff_head - slot->handoff_tail);
	int			in_ring = HTTP_HANDOFF_RING - queued - slot->handoff_reserved;
	int			in_slots = slot->max_in_flight - slot->max_in_flight / 4 -
		slot->in_flight - queued - slot->handoff_reserved;

	if (slot->pid == 0 || slot->latch == NULL)
		return 0;
	return Max(0, Min(in_ring, in_slots));
}

/*
 * Give back n of this transaction's reserved places; the slot's lock held
 * exclusive.
 */
static void
give_back(HttpWorkerSlot *slot, int n)
{
	slot->handoff_reserved = Max(0, slot->handoff_reserved - n);
	xact_reserved -= n;
}

/*
 * Reserve up to "want" places for the tasks a delivery statement is about
 * to lease (sched._handoff_lease hands them out).  Returns the HTTP worker
 * they are for, or -1 when no worker has room (the tasks are parked).  The
 * tasks of one transaction all go to one worker.  Takes each worker's lock
 * shared in turn to choose, then the chosen one's exclusive.
 */
int
delaysched_handoff_reserve(int want)
{
	int			worker = -1;
	int			granted = 0;

	stmt_places = stmt_nleased = 0;
	if (delaysched_http_slots == NULL || want <= 0)
		return -1;
	if (!callback_registered)
	{
		RegisterXactCallback(handoff_xact_callback, NULL);
		callback_registered = true;
	}

	if (xact_worker >= 0)
		worker = xact_worker;
	else
	{
		int			best = 0;

		for (int i = 0; i < delaysched_http_workers; i++)
		{
			HttpWorkerSlot *slot = &delaysched_http_slots[i];
			int			places;

			LWLockAcquire(slot->lock, LW_SHARED);
			places = free_places(slot);
			LWLockRelease(slot->lock);
			if (places > best)
			{
				best = places;
				worker = i;
			}
		}
	}
	if (worker >= 0)
	{
		HttpWorkerSlot *slot = &delaysched_http_slots[worker];

		LWLockAcquire(slot->lock, LW_EXCLUSIVE);

		/*
		 * Half of what is free at most: another scanner's statement may be
		 * running too, and most of a reservation is given back at once.
		 * And no more than HANDOFF_MAX per statement: the hand-off saves a
		 * task a millisecond or two, which matters when a few fall due at
		 * a time; a burst goes faster through the claims' larger batches.
		 */
		granted = Min(Min(want, HANDOFF_MAX), (free_places(slot) + 1) / 2);
		slot->handoff_reserved += granted;
		xact_reserved += granted;
		xact_worker = worker;
		LWLockRelease(slot->lock);
	}
	stmt_places = granted;
	return granted > 0 ? worker : -1;
}

/*
 * sched._handoff_lease(id bigint) RETURNS boolean
 *
 * Whether the delivery statement running leases task id to the HTTP worker
 * it reserved places with: yes while places are left, and the same answer
 * for an id every time the statement asks.
 */
Datum
delaysched_handoff_lease(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);

	for (int i = 0; i < stmt_nleased; i++)
		if (stmt_leased[i] == id)
			PG_RETURN_BOOL(true);
	if (stmt_nleased >= stmt_places)
		PG_RETURN_BOOL(false);
	stmt_leased[stmt_nleased++] = id;
	PG_RETURN_BOOL(true);
}

/* Note a task the statement leased to this transaction's worker. */
void
delaysched_handoff_add(int64 id, int16 bucket, int32 attempt, TimestampTz lease_until)
{
	if (xact_ntasks >= xact_reserved)
		elog(ERROR, "delaysched leased more tasks to an HTTP worker than it reserved places for");
	if (xact_ntasks == xact_tasks_size)
	{
		xact_tasks_size = Max(64, xact_tasks_size * 2);
		xact_tasks = xact_tasks == NULL
			? MemoryContextAlloc(TopMemoryContext, sizeof(HttpHandoff) * xact_tasks_size)
			: repalloc(xact_tasks, sizeof(HttpHandoff) * xact_tasks_size);
	}
	xact_tasks[xact_ntasks].id = id;
	xact_tasks[xact_ntasks].bucket = bucket;
	xact_tasks[xact_ntasks].attempt = attempt;
	xact_tasks[xact_ntasks].lease_until = lease_until;
	xact_ntasks++;
}

/*
 * After a statement: give back the places no task was leased for.  Takes
 * the worker's lock.
 */
void
delaysched_handoff_settle(void)
{
	HttpWorkerSlot *slot;

	stmt_places = stmt_nleased = 0;
	if (xact_worker < 0 || xact_reserved == xact_ntasks)
		return;
	slot = &delaysched_http_slots[xact_worker];
	LWLockAcquire(slot->lock, LW_EXCLUSIVE);
	give_back(slot, xact_reserved - xact_ntasks);
	LWLockRelease(slot->lock);
}

static void
forget(void)
{
	xact_worker = -1;
	xact_reserved = 0;
	xact_ntasks = 0;
	if (xact_tasks_size > 1024)
	{
		pfree(xact_tasks);
		xact_tasks = NULL;
		xact_tasks_size = 0;
	}
}

/*
 * At commit, the tasks go into the ring and the worker is woken; at an
 * abort (or a PREPARE: the leases commit later, elsewhere, and run out
 * unless that commit comes first) only the reservation is given back.
 * Takes the worker's lock; sets its latch after releasing it.
 */
static void
handoff_xact_callback(XactEvent event, void *arg)
{
	Latch	   *latch = NULL;
	HttpWorkerSlot *slot;

	if (xact_worker < 0)
		return;
	slot = &delaysched_http_slots[xact_worker];
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			/* Most ticks hold nothing by now: no webhook was due. */
			if (xact_ntasks == 0 && xact_reserved == 0)
				break;
			LWLockAcquire(slot->lock, LW_EXCLUSIVE);
			for (int i = 0; i < xact_ntasks; i++)
				slot->handoff[(slot->handoff_head + i) % HTTP_HANDOFF_RING] = xact_tasks[i];
			slot->handoff_head += xact_ntasks;
			give_back(slot, xact_reserved);
			if (xact_ntasks > 0)
				latch = slot->latch;
			LWLockRelease(slot->lock);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			if (xact_reserved == 0)
				break;
			LWLockAcquire(slot->lock, LW_EXCLUSIVE);
			give_back(slot, xact_reserved);
			LWLockRelease(slot->lock);
			break;
		default:
			return;
	}
	forget();
	if (latch != NULL)
		SetLatch(latch);
}

/*
 * An HTTP worker starting: what its ring holds was for its previous run,
 * whose leases sched._http_release parks.  Takes the worker's lock.
 */
void
delaysched_handoff_clear(int worker)
{
	HttpWorkerSlot *slot = &delaysched_http_slots[worker];

	LWLockAcquire(slot->lock, LW_EXCLUSIVE);
	slot->handoff_tail = slot->handoff_head;
	LWLockRelease(slot->lock);
}

/*
 * Take up to max tasks from a worker's ring into out; returns how many.
 * Only the worker itself calls it: it reads the ends of the ring under its
 * lock, copies the entries between them without it (no one writes there
 * until handoff_tail moves, see Locks in base/shmem.h), then moves
 * handoff_tail.
 */
int
delaysched_handoff_take(int worker, HttpHandoff *out, int max)
{
	HttpWorkerSlot *slot = &delaysched_http_slots[worker];
	uint64		tail;
	int			n;

	LWLockAcquire(slot->lock, LW_SHARED);
	tail = slot->handoff_tail;
	n = Min(max, (int) (slot->handoff_head - tail));
	LWLockRelease(slot->lock);
	if (n <= 0)
		return 0;

	for (int i = 0; i < n; i++)
		out[i] = slot->handoff[(tail + i) % HTTP_HANDOFF_RING];

	LWLockAcquire(slot->lock, LW_EXCLUSIVE);
	slot->handoff_tail = tail + n;
	LWLockRelease(slot->lock);
	return n;
}

/*
 * Ask every running HTTP worker of the current database to claim, and set
 * its latch: after a commit that parked http tasks (core/wake.c).  Takes
 * each slot's lock shared in turn, and sets the latches after releasing it.
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
