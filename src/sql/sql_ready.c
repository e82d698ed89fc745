/*-------------------------------------------------------------------------
 *
 * sql_ready.c
 *		The ready ring: the jobs of sql types a scanner's commit parked,
 *		named to the SQL workers so that a worker leases one by its key
 *		(sched._sql_claim_one) instead of searching every type and
 *		partition for it (sched._sql_claim).
 *
 * Why.  A job that falls due is parked by the scanner's walk (state 'r')
 * and waits for an SQL worker's lease.  The search of sched._sql_claim
 * (weighted types, limits, the parked jobs of every partition) costs a
 * worker more than running a short job does; with 20 jobs due at once and
 * two workers, it set the start of the last one.  The walk knows which job
 * it parked, in which partition: it says so here, and the lease reads one
 * row by its primary key.
 *
 * What is noted.  The walk notes each job it parks of a type that is not
 * paused and has neither a rate limit nor a concurrency cap
 * (delaysched_sql_ready_note); at XACT_EVENT_COMMIT the wake-up callback
 * (core/wake.c) puts the notes into the database's ring as far as it has
 * room (delaysched_sql_ready_publish), before it sets the workers'
 * latches; an abort forgets them.  The ring is only a hint: a job not in
 * it (the ring was full, a worker died holding the entry, the type became
 * limited) waits for a claim, which finds every parked job, as before.
 *
 * What a worker does with an entry.  It takes the oldest
 * (delaysched_sql_ready_take) and leases that job if it is still parked
 * and its type still unlimited; otherwise nothing, and it takes the next.
 * An entry for a job due more than READY_FRESH_MS ago is dropped unused:
 * a backlog goes to the claims, whose weighted order over types is what
 * keeps one type's burst from holding up another type's jobs; the ring is
 * for jobs that have just fallen due, which start in due order.
 *
 * Locking: the ring, its head and its tail are under the database's
 * workers_lock (see base/shmem.h), held to copy at most one commit's
 * entries in, or one entry out.
 *
 * IDENTIFICATION
 *	  src/sql/sql_ready.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "base/shmem.h"
#include "sql/sql.h"

/* An entry older than this (since its run_at) goes to the claims instead. */
#define READY_FRESH_MS		1000

/* The jobs this transaction parked, for the ring at commit. */
static SqlReady noted[DELAYSCHED_SQL_READY_RING];
static int	nnoted = 0;

/*
 * Note a job the current transaction parked, to be named to the SQL workers
 * if it commits.  More than the ring holds are not noted: they wait for
 * the claims.
 */
void
delaysched_sql_ready_note(int64 id, int16 bucket, TimestampTz run_at)
{
	if (nnoted >= DELAYSCHED_SQL_READY_RING)
		return;
	noted[nnoted].id = id;
	noted[nnoted].bucket = bucket;
	noted[nnoted].run_at = run_at;
	nnoted++;
}

/* At an abort, or once published. */
void
delaysched_sql_ready_forget(void)
{
	nnoted = 0;
}

/*
 * After the commit, the noted jobs into the current database's ring, as
 * far as it has room.  Takes workers_lock exclusive.
 */
void
delaysched_sql_ready_publish(void)
{
	DelayschedShared *shared = delaysched_shared;
	int			n;

	if (nnoted == 0 || shared == NULL)
	{
		nnoted = 0;
		return;
	}
	LWLockAcquire(shared->workers_lock, LW_EXCLUSIVE);
	n = Min(nnoted, DELAYSCHED_SQL_READY_RING -
			(int) (shared->sql_ready_head - shared->sql_ready_tail));
	for (int i = 0; i < n; i++)
		shared->sql_ready[(shared->sql_ready_head + i) % DELAYSCHED_SQL_READY_RING] = noted[i];
	shared->sql_ready_head += n;
	LWLockRelease(shared->workers_lock);
	nnoted = 0;
}

/*
 * Take the oldest entry of the current database's ring that is fresh
 * enough into *out, dropping the stale ones before it; false if there is
 * none.  Takes workers_lock exclusive.
 */
bool
delaysched_sql_ready_take(SqlReady *out)
{
	DelayschedShared *shared = delaysched_shared;
	TimestampTz fresh_after = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), -READY_FRESH_MS);
	bool		found = false;

	LWLockAcquire(shared->workers_lock, LW_EXCLUSIVE);
	while (shared->sql_ready_tail < shared->sql_ready_head)
	{
		*out = shared->sql_ready[shared->sql_ready_tail % DELAYSCHED_SQL_READY_RING];
		shared->sql_ready_tail++;
		if (out->run_at >= fresh_after)
		{
			found = true;
			break;
		}
	}
	LWLockRelease(shared->workers_lock);
	return found;
}
