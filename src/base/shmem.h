/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		delaysched's shared memory: its layout, the lookups every family
 *		uses, and the one description of its locks.
 *
 * Four parts, each created once at start-up (delaysched.c asks for them
 * and creates them, under AddinShmemInitLock):
 *
 *	 - the table of databases served (DelayschedCluster): one entry per
 *	   database where the extension is installed, taken when a CREATE
 *	   EXTENSION delaysched in it commits (cluster/utility.c) or when the launcher's
 *	   probe finds the extension there (cluster/launcher.c), given back by the
 *	   launcher once the database is no longer to be served (the extension
 *	   or the database was dropped, the database left delaysched.databases
 *	   or became a template) and none of its workers runs any more;
 *	 - for each of its delaysched.max_databases entries an area: that
 *	   database's DelayschedShared (ranges, scanner workers, drain, SQL
 *	   workers),
 *	   followed by its HTTP workers' slots (HttpWorkerSlot);
 *	 - the token buckets and hints (core/limiter.c);
 *	 - the numbers per type (stats/stats.c).
 *
 * The workers share the ranges (door numbers, one row each in
 * sched.pointer) through DelayschedShared: a worker picks a range that is
 * due, marks itself its holder here, and then locks the range's row with
 * FOR UPDATE SKIP LOCKED in its tick's transaction.  The row lock is the
 * authority (it also keeps out sessions that are not workers, and dies
 * with its transaction); the holder field only keeps two workers from
 * picking the same range at the same moment.
 *
 * Every process reaches its database's state through delaysched_shared and
 * delaysched_http_slots: a worker sets them once, at its start, to the
 * entry the launcher started it for; an ordinary backend looks its
 * database up when it first needs them (delaysched_current_database) and
 * checks the entry's dboid on every later use, since an entry given back
 * may be taken for another database.  A backend only lowers wake-up times
 * and sets latches there, so a stale entry costs at most a needless
 * wake-up.
 *
 * Locks
 * -----
 * This is the one description of delaysched's locks; the other files point
 * here.  The LWLocks are one named tranche, "delaysched" (DELAYSCHED_LWLOCK_*,
 * see delaysched_lwlock()).  Single values shared without a lock are
 * atomics.  One spinlock, load control's (below).
 *
 *	 cluster lock (DelayschedCluster.lock, DELAYSCHED_LWLOCK_CLUSTER) guards
 *		the table's entries but their atomic dboid (written with the lock held
 *		exclusive, read without it), and the launcher's pid and latch.
 *		Exclusive: to take, change or give back an entry (cluster/cluster.c,
 *		cluster/launcher.c, cluster/utility.c).  Shared: to look one up or
 *		read it (the launcher, sched.cluster, a worker attaching to its
 *		entry).  A worker
 *		attaching holds it shared while it takes its slot (base/worker.c), so
 *		that the launcher, which gives an entry back only with it exclusive
 *		and after finding every slot empty, cannot give the entry away
 *		meanwhile.
 *
 *	 ranges_lock (one per database, DELAYSCHED_LWLOCK_RANGES) guards nranges
 *		and every RangeState field but the atomics wake_at and far_added.
 *		Exclusive: a scanner worker to pick a range (a walk of at most 256),
 *		to record a tick or to reset the table (core/scanner.c); a tick's far
 *		search, for a few fields before and after its statement, not across
 *		it (core/next_due.c; also a backend running sched._tick()).  Shared:
 *		sched.cluster, to read the ranges' pointers (cluster/worker_views.c).
 *		A worker may read nranges without it.
 *
 *	 workers_lock (one per database, DELAYSCHED_LWLOCK_WORKERS) guards the
 *		WorkerSlot fields that are not atomics (pid, latch, status, range,
 *		draining), drainer, and the SqlWorkerSlot fields that are not
 *		atomics (pid, latch), and the SQL workers' ready ring (sql_ready,
 *		its head and tail).  Exclusive: a scanner or SQL worker, to change
 *		its own slot (it writes no other); a committing backend to put the
 *		jobs it parked in the ready ring (at most the ring's 256 entries),
 *		and an SQL worker to take one (sql/sql_ready.c); a scanner to take or give up
 *		the drain (drainer is set by the worker that takes it and cleared by
 *		it, at its exit or restart).  Shared: to read slots (sched.workers, sched.cluster, the
 *		launcher and the commands that need a database to themselves, through
 *		delaysched_database_pids; a backend setting the workers' latches after
 *		ALTER EXTENSION, delaysched_wake_database_workers), a committing
 *		backend that parked tasks, to read drainer (core/wake.c), and one
 *		waking the SQL workers or cancelling a job's statement, to read their
 *		pids and latches (sql/sql_signal.c).
 *
 *	 HTTP slot lock (HttpWorkerSlot.lock, one per HTTP worker,
 *		DELAYSCHED_LWLOCK_HTTP + its index) guards pid, latch, in_flight,
 *		waiting, max_in_flight, handoff_head, handoff_tail and
 *		handoff_reserved: one
 *		lock per worker, so that scanners handing tasks to one worker never
 *		wait for another.  Exclusive: the worker, to change them (at start and
 *		exit, after each round of its loop, to move handoff_tail); a scanner,
 *		to reserve or give back places and, at commit, to put its tasks in
 *		the ring (http/http_handoff.c).  Shared: backends, sched.workers and
 *		sched.cluster, to read them.  Held for a few assignments, or for
 *		copying one commit's tasks (at most one transaction's reservation, 64
 *		per delivery statement) into the ring.
 *		The ring's entries, handoff[]: those in [handoff_tail, handoff_head)
 *		are written before handoff_head moves past them (both under the lock)
 *		and are not written again until handoff_tail has moved past them,
 *		which only the worker does.  So the worker reads them without the
 *		lock: it reads handoff_head with the lock held, copies, then takes
 *		the lock again to move handoff_tail.  A scanner writes only at and
 *		after handoff_head, into places it reserved.
 *
 *	 limiter lock (DELAYSCHED_LWLOCK_LIMITER) guards the token buckets' hash
 *		table, the global bucket, and the limiter's fields of each database's
 *		DelayschedShared (probe_all, last_full_probe, global_wanted_at,
 *		global_share, global_share_at).  Exclusive: to take or give back
 *		tokens, publish or clear hints, make or drop a bucket
 *		(core/limiter.c); shared: to read a bucket or count them
 *		(sched._tokens(), sched._buckets_elsewhere(), the drain sizing its
 *		copy of the hints).  Held for a lookup and
 *		a few arithmetic operations (or a walk of the databases; for the
 *		drain's takes, a lookup per type with a backlog, and a walk of the
 *		table per type when it is full and the type has no bucket yet).
 *
 *	 keys lock (DELAYSCHED_LWLOCK_KEYS) guards the table of keys' token
 *		buckets and its counts (core/key_limiter.c).  Exclusive: to take or
 *		give back a pick's tokens (a lookup per key of the pick, and when
 *		the table is full, once per pick, a walk of the table that drops its
 *		idle buckets); shared: to count the buckets (sched._key_buckets()).
 *		Taken with no other delaysched lock held.
 *
 *	 pace lock (DELAYSCHED_LWLOCK_PACE) guards the table of types held to
 *		their consumers' pace (core/pace.c).  Exclusive: to hold a type,
 *		cut or raise its cap, or let it go (a lookup); shared: to read a
 *		cap (a lookup) or list a database's held types (a walk of the
 *		table, only while some type is held).  Taken with no other
 *		delaysched lock held.
 *
 *	 stats lock (DELAYSCHED_LWLOCK_STATS) guards the hash table of numbers
 *		(stats/stats.c).  Shared: to add to an entry that exists, and to read
 *		entries (the numbers are atomics, added with pg_atomic_fetch_add and
 *		read one by one: a reader may see one transaction's changes half
 *		added; Prometheus does not mind, and the next read has them all).
 *		Exclusive: to make or remove entries, and to set a database's gauges
 *		after a count (delaysched_stats_install: a hash lookup per entry).
 *
 *	 load control's mutex (LoadShared.mutex, a spinlock, stats/load.c)
 *		guards its token bucket and figures, for a refill and a take, or a
 *		few assignments: arithmetic only, never a call into PostgreSQL,
 *		never another lock.  Its "limited"
 *		flag and delivery count are atomics read without it; a session's
 *		consumer mark is written by that session only.
 *
 *	 Order and holding.  The cluster lock comes before any per-database lock
 *	 (ranges_lock, workers_lock, an HTTP slot lock), never after: the
 *	 launcher holds it exclusive while it reads an entry's slots before
 *	 giving the entry back, and an attaching worker holds it shared while it
 *	 takes its slot.  Of the per-database locks no process holds two at
 *	 once, and the limiter and stats locks are taken with no other of ours
 *	 held.  Every lock is held for a lookup, a walk or a few assignments,
 *	 never while setting a latch or sending a signal.  Held exclusive, a
 *	 lock is never held across anything that can fail: no allocation, no
 *	 ereport, no SPI (what a caller needs is allocated before the lock is
 *	 taken).  Held shared, only a reader's own copies are allocated under
 *	 it (delaysched_stats_copy); an error would release it with the rest.
 *
 *	 Atomics, read and written without a lock:
 *	   DatabaseEntry.dboid: see the cluster lock.  DelayschedCluster.rescan:
 *		 set by a backend whose commit changed what is served, exchanged
 *		 for 0 by the launcher.
 *	   RangeState.wake_at and far_added: backends lower them after commit
 *		 (delaysched_lower_time, a compare-and-swap loop); the range's holder
 *		 takes (exchanges) or resets them, with ranges_lock held.
 *	   drain_at: lowered by backends and by the drainer; reset by the worker
 *		 that takes the drain, with workers_lock held.
 *	   WorkerSlot.sleep_until, last_tick, delivered, ticks: written by the
 *		 slot's worker only.
 *	   drain_waits_for_slot, old_schema_reported: flags (0 or 1).
 *	   HttpWorkerSlot.last_claim, sent, succeeded, handed, claimed, ticks:
 *		 written by the worker only; claim_wanted is set by backends after a
 *		 commit that parked http tasks, and cleared (exchanged) by the worker.
 *	   SqlWorkerSlot.running, run_started, last_claim, runs, succeeded:
 *		 written by the worker only; claim_wanted as the HTTP workers'; cancel
 *		 is set by a backend in sched.cancel (to the id of the job to stop,
 *		 before it signals the worker) and read and cleared by the worker's
 *		 SIGINT handler, which stops the statement only if running is that
 *		 id, so that a cancellation meant for a job that has ended meanwhile
 *		 never stops the next one (see sql/sql_signal.c).
 *	   The stats entries' kind, flags and numbers: see the stats lock.
 *	 Time stamps are stored as their int64 bit pattern in a pg_atomic_uint64
 *	 and compared as TimestampTz (they may be negative: -infinity, before
 *	 2000).
 *
 *	 The wake-up protocol.  A committing backend (core/wake.c) first lowers
 *	 the ranges' wake_at (and drain_at), then issues a full memory barrier,
 *	 then reads the workers' sleep_until and sets the latch of one that
 *	 would sleep past its earliest time.  A worker about to sleep
 *	 (core/scanner.c, pick_range) first publishes its sleep_until with an
 *	 atomic exchange (a full barrier), then reads once more the wake_at of
 *	 the ranges its walk found free, and drain_at, and sleeps no later than
 *	 the earliest.  So either the worker sees the backend's time, or the
 *	 backend sees the worker's sleep_until.  A worker's latch pointer is set
 *	 at its start, before its sleep_until is first made non-zero, and never
 *	 cleared (its PGPROC's latch outlives it), so a backend may read it
 *	 without a lock after reading a non-zero sleep_until.
 *
 * IDENTIFICATION
 *	  src/base/shmem.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_SHMEM_H
#define DELAYSCHED_SHMEM_H

#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

/* Upper bounds of delaysched.workers and delaysched.ranges. */
#define DELAYSCHED_MAX_WORKERS	64
#define DELAYSCHED_MAX_RANGES	256
/* Upper bound of delaysched.http_workers. */
#define DELAYSCHED_MAX_HTTP_WORKERS	16
/* Upper bound of delaysched.sql_workers. */
#define DELAYSCHED_MAX_SQL_WORKERS	16
/* Upper bound of delaysched.max_databases. */
#define DELAYSCHED_MAX_DATABASES	1024

/*
 * The LWLocks of the "delaysched" tranche, by index: the limiter's, the
 * cluster's, the statistics', the keys', then for each database entry its
 * ranges_lock, its workers_lock and one per HTTP worker (see Locks above).
 */
#define DELAYSCHED_LWLOCK_LIMITER	0
#define DELAYSCHED_LWLOCK_CLUSTER	1
#define DELAYSCHED_LWLOCK_STATS		2
#define DELAYSCHED_LWLOCK_KEYS		3
#define DELAYSCHED_LWLOCK_PACE		4
#define DELAYSCHED_LWLOCK_FIRST_DATABASE 5
#define DELAYSCHED_LWLOCK_RANGES	0	/* within a database's */
#define DELAYSCHED_LWLOCK_WORKERS	1
#define DELAYSCHED_LWLOCK_HTTP		2	/* + the HTTP worker's index */

/* The table of databases served: see the top of this file. */

/* What should become of a database's workers. */
typedef enum DatabaseWant
{
	DATABASE_SERVE = 0,			/* run them (as many as granted) */
	DATABASE_STOP				/* stop them; the entry is then given back */
} DatabaseWant;

/* Why a database served has no scanner running (sched.cluster says). */
typedef enum DatabaseWaiting
{
	DATABASE_WAITING_NONE = 0,	/* it has its first scanner, or backs off */
	DATABASE_WAITING_BUDGET,	/* delaysched.max_workers or max_worker_processes leave none */
	DATABASE_WAITING_SLOT		/* the server has no background worker slot free */
} DatabaseWaiting;

/* One database served (or being stopped). */
typedef struct DatabaseEntry
{
	/* The database; InvalidOid while the entry is free.  Atomic. */
	pg_atomic_uint32 dboid;

	/* Under cluster->lock. */
	DatabaseWant want;

	/*
	 * A backend running a command that needs the database to itself (DROP
	 * DATABASE, ALTER DATABASE RENAME or SET TABLESPACE, CREATE DATABASE
	 * from it as a template): its workers leave and none starts until it
	 * is 0 again.  See cluster/utility.c.
	 */
	pid_t		leaving_for;

	/* The launcher's, for the sched.cluster view. */
	int			scanners_granted;
	int			http_granted;
	int			sql_granted;
	DatabaseWaiting waiting;
	int			failures;		/* workers that ended early in a row */
	TimestampTz retry_at;		/* no worker starts before this */
	TimestampTz served_since;
} DatabaseEntry;

typedef struct DelayschedCluster
{
	LWLock	   *lock;

	/* Under lock. */
	pid_t		launcher_pid;	/* 0 while it does not run */
	Latch	   *launcher_latch;

	/*
	 * Set by a backend whose commit changed what is served (an extension
	 * created or dropped, a database created, dropped or altered); the
	 * launcher exchanges it for 0 and looks at pg_database again.  Atomic.
	 */
	pg_atomic_uint32 rescan;

	int			max_databases;	/* entries below */
	DatabaseEntry databases[FLEXIBLE_ARRAY_MEMBER];
} DelayschedCluster;

/* The types whose own place a range remembers in fair shares (core/fair_walk.c). */
#define DELAYSCHED_FAIR_LANES	8

/* Where one type's deliveries of a range stopped (core/fair_walk.c). */
typedef struct FairLane
{
	char		biz_type[NAMEDATALEN];
	TimestampTz run_at;
	int64		id;
} FairLane;

/*
 * Where a range's previous tick stopped delivering: the walk resumes after
 * it while it is at or after the range's pointer.
 *
 * After a backlog (fair is set: more was due than one statement delivers),
 * run_at and id are the place of the type furthest behind, every type's
 * tasks before it are handled, and the lanes give the places of the types
 * furthest ahead; reach is the furthest of them all.  A task reported at
 * or before reach drops the places (valid = false), not the fair shares.
 * In a backlog, ahead is where the lane of the keyed tasks after it stopped
 * (core/keys_ahead.c), and firsts where the lane of the tasks that go first
 * did (core/firsts_ahead.c); a task reported at or before either moves it
 * back.
 */
typedef struct TickCursor
{
	bool		valid;
	TimestampTz run_at;
	int64		id;
	bool		fair;
	TimestampTz reach;
	int			nlanes;
	FairLane	lanes[DELAYSCHED_FAIR_LANES];
	bool		ahead_valid;
	TimestampTz ahead_run_at;
	int64		ahead_id;
	TimestampTz ahead_seen_at;	/* when the lane last found a keyed task */
	bool		firsts_valid;
	TimestampTz firsts_run_at;
	int64		firsts_id;
	TimestampTz firsts_next_at; /* that lane's next look, unless a task is
								 * reported before its place */
} TickCursor;

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
	bool		draining;		/* running the drain (core/drain.c) */

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
 * What a session worker (sql/sql_session.c) reports of the run it made for
 * an SQL worker: written by the session worker before it exits, state last
 * (after a write barrier); read by the SQL worker once the session worker
 * has exited, state first (then a read barrier).
 */
typedef struct SqlSessionReport
{
	pg_atomic_uint32 state;		/* SqlRunEnd + 1; 0: nothing reported */
	char		outcome[16];
	char		sqlstate[6];
	char		error[512];
	int64		rows;
	TimestampTz started;
	double		duration_ms;
} SqlSessionReport;

/*
 * A job of an sql type that a scanner's commit parked, for the SQL workers
 * to lease before they search (see sql/sql_ready.c).
 */
#define DELAYSCHED_SQL_READY_RING	256

typedef struct SqlReady
{
	int64		id;
	int16		bucket;
	TimestampTz run_at;
} SqlReady;

/* One SQL worker (sql/sql_worker.c). */
typedef struct SqlWorkerSlot
{
	/* Under workers_lock. */
	pid_t		pid;			/* 0 while the worker does not run */
	Latch	   *latch;

	/* Atomics. */
	pg_atomic_uint64 running;	/* the job whose command runs, or 0 */
	pg_atomic_uint64 cancel;	/* the job sched.cancel stops, or 0 */
	pg_atomic_uint64 run_started;	/* a TimestampTz, while running */
	pg_atomic_uint64 last_claim;	/* a TimestampTz */
	pg_atomic_uint64 runs;		/* runs ended, whatever the outcome */
	pg_atomic_uint64 succeeded; /* of which committed */
	pg_atomic_uint32 claim_wanted;	/* a commit parked sql tasks: claim them */

	/* The run of this worker's session worker, if it started one. */
	SqlSessionReport report;
} SqlWorkerSlot;

/*
 * A run_at further ahead of the clock than this when it is scheduled is
 * reported to the scanner's far search (RangeState.far_added); the scanner
 * looks at least this far ahead directly (see delaysched_next_due_after in core/next_due.c).
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

	/* Where the range's last delivery stopped (see core/walk.c, core/fair_walk.c). */
	TickCursor	cursor;

	/*
	 * While the range has a backlog: when a task of it falls due that is
	 * not part of the backlog (DT_NOEND: none known).  The workers take such
	 * a range before the others (core/scanner.c).
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
	 * The far search (core/next_due.c): the earliest pending task more than a
	 * second or two ahead, as a search of the whole table found it at
	 * far_checked_at (0: never; DT_NOEND: none), and the earliest run_at of
	 * such tasks committed since (DT_NOEND when none; see wake.c; atomic).
	 */
	TimestampTz far_due;
	TimestampTz far_checked_at;
	pg_atomic_uint64 far_added;
} RangeState;

/*
 * One struct in shared memory; see Locks at the top of this file for which lock
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
	 * The drain (core/drain.c): when it should next run (DT_NOBEGIN at start,
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
	 * Until when a following router has leased this database its shares of
	 * the split limits, on the monotonic clock in microseconds
	 * (cluster/share_lease.c); 0: never since the entry was taken.  Atomic.
	 */
	pg_atomic_uint64 share_lease_until;

	/*
	 * The split whose shares this database was last given (the router's
	 * number for it); 0: none since the entry was taken.  Atomic.
	 */
	pg_atomic_uint64 share_generation;

	/*
	 * The limiter's, for this database, under the limiter's lock (see
	 * core/limiter.c): a hint was lost, so the drain looks at every type; when
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
	SqlWorkerSlot sql_workers[DELAYSCHED_MAX_SQL_WORKERS];

	/*
	 * The SQL workers' ready ring (sql/sql_ready.c), under workers_lock:
	 * entries in [sql_ready_tail, sql_ready_head), both counting up, modulo
	 * the ring.
	 */
	uint64		sql_ready_head;
	uint64		sql_ready_tail;
	SqlReady	sql_ready[DELAYSCHED_SQL_READY_RING];
} DelayschedShared;

/* The most tasks a scanner's commit may have handed to an HTTP worker
 * that the worker has not taken yet (see http/http_handoff.c). */
#define HTTP_HANDOFF_RING	1024

/* A task a scanner leased to an HTTP worker (see http/http_handoff.c). */
typedef struct HttpHandoff
{
	int64		id;
	TimestampTz lease_until;	/* the lease's end: which lease it is */
	int32		attempt;		/* the attempt the lease is for */
	int16		bucket;
} HttpHandoff;

/* One HTTP worker (http/http_worker.c). */
typedef struct HttpWorkerSlot
{
	LWLock	   *lock;

	/* Under lock. */
	pid_t		pid;			/* 0 while the worker does not run */
	Latch	   *latch;
	int			in_flight;		/* requests under way */
	int			waiting;		/* of them, waiting for their receiver's
								 * allowance (http/http_origins.c) */
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

/* The table of databases served; NULL until shared memory is attached. */
extern DelayschedCluster *delaysched_cluster;

/* The entry of the database this process works for, or -1. */
extern int	delaysched_database_index;

/*
 * The state of the database this process works for, and its
 * delaysched.http_workers HTTP slots; NULL while it has none.
 */
extern DelayschedShared *delaysched_shared;
extern HttpWorkerSlot *delaysched_http_slots;

/* Creating the table and the databases' areas (delaysched.c asks). */
extern Size delaysched_databases_shmem_size(void);
extern int	delaysched_lwlocks_needed(void);
extern void delaysched_databases_shmem_init(void);

/* Lookups. */
extern LWLock *delaysched_lwlock(int index);
extern LWLock *delaysched_database_lwlock(int database, int which);
extern DelayschedShared *delaysched_database_area(int database);
extern HttpWorkerSlot *delaysched_database_http_slots(int database);
extern int	delaysched_find_database(Oid dboid);
extern void delaysched_use_database(int index);
extern bool delaysched_current_database(void);

/* Making state as new. */
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
