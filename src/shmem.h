/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		State shared between the scanner workers and ordinary backends.
 *
 * The workers share the ranges (door numbers, one row each in
 * sched.pointer) through this struct: a worker picks a range that is due,
 * marks itself its holder here, and then locks the range's row with
 * FOR UPDATE SKIP LOCKED in its tick's transaction.  The row lock is the
 * authority (it also keeps out sessions that are not workers, and dies with
 * its transaction); the holder field only keeps two workers from picking
 * the same range at the same moment.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_SHMEM_H
#define DELAYSCHED_SHMEM_H

#include "storage/latch.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

/* Upper bounds of delaysched.workers and delaysched.ranges. */
#define DELAYSCHED_MAX_WORKERS	64
#define DELAYSCHED_MAX_RANGES	256
/* Upper bound of delaysched.http_workers. */
#define DELAYSCHED_MAX_HTTP_WORKERS	16

/* What a worker is doing, for sched.workers. */
typedef enum ScannerStatus
{
	SCANNER_STOPPED = 0,
	SCANNER_WAITING_FOR_EXTENSION,
	SCANNER_DELIVERING,
	SCANNER_SLEEPING
} ScannerStatus;

/* One scanner worker. */
typedef struct WorkerSlot
{
	pid_t		pid;			/* 0 while the worker does not run */
	Latch	   *latch;
	ScannerStatus status;
	int			range;			/* the range it works on, or -1 */
	bool		draining;		/* running the drain (drain.c) */

	/*
	 * When the sleeping worker will wake by itself; 0 while it works.  A
	 * backend whose task is due before this sets the worker's latch.
	 */
	TimestampTz sleep_until;

	/* For sched.workers. */
	TimestampTz last_tick;
	int64		delivered;
	int64		ticks;
} WorkerSlot;

/* The most tasks a scanner's commit may have handed to an HTTP worker
 * that the worker has not taken yet (see handoff.c). */
#define HTTP_HANDOFF_RING	1024

/* A task a scanner leased to an HTTP worker (see handoff.c). */
typedef struct HttpHandoff
{
	int64		id;
	int32		attempt;		/* the attempt the lease is for */
	int16		bucket;
} HttpHandoff;

/* One HTTP worker (http_worker.c). */
typedef struct HttpWorkerSlot
{
	pid_t		pid;			/* 0 while the worker does not run */
	Latch	   *latch;
	int			in_flight;		/* requests under way */
	int			max_in_flight;	/* its cap, after the file descriptor limit */
	TimestampTz last_claim;
	int64		sent;			/* requests finished, whatever the outcome */
	int64		succeeded;		/* of which 2xx */
	int64		handed;			/* requests started from a hand-off */
	int64		claimed;		/* requests started from a claim */
	bool		claim_wanted;	/* a commit parked http tasks: claim them */

	/*
	 * Tasks handed over by scanners' commits: written at handoff_head,
	 * taken at handoff_tail (both counting up, modulo the ring), with
	 * handoff_reserved places kept for scanners' open transactions.  The
	 * worker's attach empties the ring but never touches the reservations.
	 * These fields come last: the attach clears the ones above.
	 */
	uint64		handoff_head;
	uint64		handoff_tail;
	int			handoff_reserved;
	HttpHandoff handoff[HTTP_HANDOFF_RING];
} HttpWorkerSlot;

/*
 * A run_at further ahead of the clock than this when it is scheduled is
 * reported to the scanner's far search (RangeState.far_added); the scanner
 * looks at least this far ahead directly (see next_due_after in tick.c).
 */
#define DELAYSCHED_FAR_AHEAD	USECS_PER_SEC

/*
 * A range's sweeps start where the previous one left off (late_from,
 * lease_from; see "A held horizon" in tick.c), but at least this often one
 * of them searches the range from its lowest keys.
 */
#define DELAYSCHED_FULL_SWEEP_EVERY	(60 * USECS_PER_SEC)

/* One range, as the workers know it between ticks. */
typedef struct RangeState
{
	int			holder;			/* worker index working on it, or -1 */

	/*
	 * Earliest run_at committed by any backend for this range since a worker
	 * last took it (DT_NOEND when none).  Backends lower it after commit.
	 */
	TimestampTz wake_at;

	/* From the range's last tick; DT_NOBEGIN until its first. */
	TimestampTz next_due;		/* next pending run_at, DT_NOEND if none */
	TimestampTz next_sweep;		/* next lease expiry, or now after a full
								 * sweep batch; DT_NOEND if nothing asks */
	TimestampTz last_sweep;
	TimestampTz pointer;
	TimestampTz retry_at;		/* after finding its row held by another
								 * transaction: not before this */

	/* Where the range's last delivery stopped (see tick.c). */
	bool		cursor_valid;
	TimestampTz cursor_run_at;
	int64		cursor_id;

	/*
	 * Where the range's next sweep starts looking for late tasks and for
	 * expired leases (DT_NOBEGIN: from the lowest keys), lowered to wake_at
	 * when a worker takes the range; and when it last swept in full.
	 */
	TimestampTz late_from;
	TimestampTz lease_from;
	TimestampTz purge_done_from;	/* range 0 only: where retention */
	TimestampTz purge_dead_from;	/* starts, for done and for dead */
	TimestampTz full_sweep_at;

	/*
	 * The far search (tick.c): the earliest pending task more than a
	 * second or two ahead, as a search of the whole table found it at
	 * far_checked_at (0: never; DT_NOEND: none), and the earliest run_at of
	 * such tasks committed since (DT_NOEND when none; see wake.c).
	 */
	TimestampTz far_due;
	TimestampTz far_checked_at;
	TimestampTz far_added;
} RangeState;

/*
 * One struct in shared memory.  Every field is protected by mutex; hold it
 * only to copy a few fields in or out, never across anything that can fail.
 */
typedef struct DelayschedShared
{
	slock_t		mutex;

	/* Ranges in the installed extension (rows of sched.pointer); 0 unknown. */
	int			nranges;

	/*
	 * The drain (drain.c): when it should next run (DT_NOBEGIN at start,
	 * DT_NOEND when nothing asks), the worker running it or -1, and whether
	 * a type waits at its concurrency cap, so that an acknowledgement should
	 * bring the drain back at once.
	 */
	TimestampTz drain_at;
	int			drainer;
	bool		drain_waits_for_slot;

	/*
	 * A worker found the extension at another version than this library's
	 * and said so in the log (once, until the versions match again).
	 */
	bool		old_schema_reported;

	WorkerSlot	workers[DELAYSCHED_MAX_WORKERS];
	RangeState	ranges[DELAYSCHED_MAX_RANGES];
	HttpWorkerSlot http_workers[DELAYSCHED_MAX_HTTP_WORKERS];
} DelayschedShared;

extern DelayschedShared *delaysched_shared;

extern void delaysched_shmem_register(void);
extern void delaysched_reset_range(RangeState *range);

#endif							/* DELAYSCHED_SHMEM_H */
