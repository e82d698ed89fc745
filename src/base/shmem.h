/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		State shared between the scanner workers and ordinary backends: the
 *		ranges, the scanner workers and the drain.  (The HTTP workers' slots
 *		and rings are in http_shmem.h, the token buckets in limiter.c.)
 *
 * The workers share the ranges (door numbers, one row each in
 * sched.pointer) through this struct: a worker picks a range that is due,
 * marks itself its holder here, and then locks the range's row with
 * FOR UPDATE SKIP LOCKED in its tick's transaction.  The row lock is the
 * authority (it also keeps out sessions that are not workers, and dies with
 * its transaction); the holder field only keeps two workers from picking
 * the same range at the same moment.
 *
 * Locking.  delaysched's LWLocks are one named tranche, "delaysched"
 * (DELAYSCHED_LWLOCK_*, see delaysched_lwlock()).  Here:
 *
 *	 ranges_lock (LWLock) guards nranges and every RangeState field but the
 *		two atomics.  Only workers take it, exclusive: to pick a range (a walk
 *		of at most 256), to record a tick, to reset the table.
 *
 *	 workers_lock (LWLock) guards the WorkerSlot fields that are not atomics
 *		(pid, latch, status, range, draining) and drainer.  A worker takes it
 *		exclusive to change its own slot; sched.workers shared, to copy slots.
 *		Each worker writes only its own slot; drainer is set by the worker
 *		that takes the drain and cleared by it or at its exit or restart.
 *
 *	 Never hold both, nor either across anything that can fail; hold them
 *	 for a walk or a few assignments, never while reading the clock or
 *	 setting a latch.
 *
 *	 Atomics, read and written without a lock:
 *	   RangeState.wake_at and far_added: backends lower them after commit
 *		 (delaysched_lower_time, a compare-and-swap loop); the range's holder
 *		 takes (exchanges) or resets them, with ranges_lock held.
 *	   drain_at: lowered by backends and by the drainer; reset by the worker
 *		 that takes the drain, with workers_lock held.
 *	   WorkerSlot.sleep_until, last_tick, delivered, ticks: written by the
 *		 slot's worker only.
 *	   drain_waits_for_slot, old_schema_reported: flags (0 or 1).
 *	 Time stamps are stored as their int64 bit pattern in a pg_atomic_uint64
 *	 and compared as TimestampTz (they may be negative: -infinity, before
 *	 2000).
 *
 * The wake-up protocol (which the one spinlock used to give for free).  A
 * committing backend (wake.c) first lowers the ranges' wake_at (and
 * drain_at), then issues a full memory barrier, then reads the workers'
 * sleep_until and sets the latch of one that would sleep past its earliest
 * time.  A worker about to sleep (scanner.c, pick_range) first publishes its
 * sleep_until with an atomic exchange (a full barrier), then reads once more
 * the wake_at of the ranges its walk found free, and drain_at, and sleeps
 * no later than the earliest.  So either the worker sees the backend's time,
 * or the backend sees the worker's sleep_until.  A worker's latch pointer is
 * set at its start, before its sleep_until is first made non-zero, and
 * never cleared (its PGPROC's latch outlives it), so a backend may read it
 * without a lock after reading a non-zero sleep_until.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_SHMEM_H
#define DELAYSCHED_SHMEM_H

#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#include "core/tick.h"

/* Upper bounds of delaysched.workers and delaysched.ranges. */
#define DELAYSCHED_MAX_WORKERS	64
#define DELAYSCHED_MAX_RANGES	256
/* Upper bound of delaysched.http_workers. */
#define DELAYSCHED_MAX_HTTP_WORKERS	16

/*
 * The LWLocks of the "delaysched" tranche, by index: the limiter's
 * (limiter.c), the cluster's (cluster.h), the statistics' (stats.c), then for each database entry its
 * ranges_lock, its workers_lock and one per HTTP worker (http_shmem.h).
 */
#define DELAYSCHED_LWLOCK_LIMITER	0
#define DELAYSCHED_LWLOCK_CLUSTER	1
#define DELAYSCHED_LWLOCK_STATS		2
#define DELAYSCHED_LWLOCK_FIRST_DATABASE 3
#define DELAYSCHED_LWLOCK_RANGES	0	/* within a database's */
#define DELAYSCHED_LWLOCK_WORKERS	1
#define DELAYSCHED_LWLOCK_HTTP		2	/* + the HTTP worker's index */

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
	/* Under workers_lock. */
	pid_t		pid;			/* 0 while the worker does not run */
	Latch	   *latch;			/* set at start, never cleared */
	ScannerStatus status;
	int			range;			/* the range it works on, or -1 */
	bool		draining;		/* running the drain (drain.c) */

	/*
	 * When the sleeping worker will wake by itself; 0 while it works.  A
	 * backend whose task is due before this sets the worker's latch.
	 */
	pg_atomic_uint64 sleep_until;

	/* For sched.workers. */
	pg_atomic_uint64 last_tick;
	pg_atomic_uint64 delivered;
	pg_atomic_uint64 ticks;
} WorkerSlot;

/*
 * A run_at further ahead of the clock than this when it is scheduled is
 * reported to the scanner's far search (RangeState.far_added); the scanner
 * looks at least this far ahead directly (see next_due_after in tick.c).
 */
#define DELAYSCHED_FAR_AHEAD	USECS_PER_SEC

/* One range, as the workers know it between ticks. */
typedef struct RangeState
{
	int			holder;			/* worker index working on it, or -1 */

	/*
	 * Earliest run_at committed by any backend for this range since a worker
	 * last took it (DT_NOEND when none).  Backends lower it after commit.
	 * Atomic.
	 */
	pg_atomic_uint64 wake_at;

	/* From the range's last tick; DT_NOBEGIN until its first. */
	TimestampTz next_due;		/* next pending run_at, DT_NOEND if none */
	TimestampTz next_sweep;		/* next lease expiry, or now after a full
								 * sweep batch; DT_NOEND if nothing asks */
	TimestampTz last_sweep;
	TimestampTz pointer;
	TimestampTz retry_at;		/* after finding its row held by another
								 * transaction: not before this */

	/* Where the range's last delivery stopped (see tick.c, fair_walk.c). */
	TickCursor	cursor;

	/*
	 * While the range has a backlog: when a task of it falls due that is
	 * not part of the backlog (DT_NOEND: none known).  The workers take such
	 * a range before the others (scanner.c).
	 */
	TimestampTz urgent_at;

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
	 * such tasks committed since (DT_NOEND when none; see wake.c; atomic).
	 */
	TimestampTz far_due;
	TimestampTz far_checked_at;
	pg_atomic_uint64 far_added;
} RangeState;

/*
 * One struct in shared memory; see the top of this file for which lock
 * guards what.
 */
typedef struct DelayschedShared
{
	LWLock	   *ranges_lock;
	LWLock	   *workers_lock;

	/*
	 * Ranges in the installed extension (rows of sched.pointer); 0 unknown.
	 * Written under ranges_lock; a worker may read it without.
	 */
	int			nranges;

	/*
	 * The drain (drain.c): when it should next run (DT_NOBEGIN at start,
	 * DT_NOEND when nothing asks; atomic), the worker running it or -1
	 * (workers_lock), and whether a type waits at its concurrency cap, so
	 * that an acknowledgement should bring the drain back at once (atomic).
	 */
	pg_atomic_uint64 drain_at;
	int			drainer;
	pg_atomic_uint32 drain_waits_for_slot;

	/*
	 * A worker found the extension at another version than this library's
	 * and said so in the log (once, until the versions match again).
	 */
	pg_atomic_uint32 old_schema_reported;

	/*
	 * The limiter's, for this database, under the limiter's lock (see
	 * limiter.c): a hint was lost, so the drain looks at every type; when
	 * it last did; when its drain last wanted tokens of the global cap, and
	 * its share of that cap (tokens, and when last filled; 0: never).
	 */
	bool		probe_all;
	TimestampTz last_full_probe;
	TimestampTz global_wanted_at;
	double		global_share;
	TimestampTz global_share_at;

	WorkerSlot	workers[DELAYSCHED_MAX_WORKERS];
	RangeState	ranges[DELAYSCHED_MAX_RANGES];
} DelayschedShared;

/*
 * The state of the database this process works for (see cluster.h); NULL
 * while it has none.
 */
extern DelayschedShared *delaysched_shared;

extern void delaysched_shmem_register(void);
extern LWLock *delaysched_lwlock(int index);
extern LWLock *delaysched_database_lwlock(int database, int which);
extern DelayschedShared *delaysched_database_area(int database);
extern void delaysched_init_database_area(int database);
extern void delaysched_reset_range(RangeState *range);

/* Time stamps in atomics (see the top of this file). */
static inline TimestampTz
delaysched_read_time(pg_atomic_uint64 *var)
{
	return (TimestampTz) pg_atomic_read_u64(var);
}

static inline void
delaysched_write_time(pg_atomic_uint64 *var, TimestampTz value)
{
	pg_atomic_write_u64(var, (uint64) value);
}

static inline TimestampTz
delaysched_exchange_time(pg_atomic_uint64 *var, TimestampTz value)
{
	return (TimestampTz) pg_atomic_exchange_u64(var, (uint64) value);
}

/*
 * Lower *var to value if value is earlier.  No barrier when nothing
 * changes: a caller that needs one issues it.
 */
static inline void
delaysched_lower_time(pg_atomic_uint64 *var, TimestampTz value)
{
	uint64		old = pg_atomic_read_u64(var);

	while (value < (TimestampTz) old)
	{
		if (pg_atomic_compare_exchange_u64(var, &old, (uint64) value))
			break;
	}
}

#endif							/* DELAYSCHED_SHMEM_H */
