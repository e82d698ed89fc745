/*-------------------------------------------------------------------------
 *
 * tick_plans.c
 *		The statements a tick runs, and the plans of them this backend
 *		prepares once and keeps: per task partition (bucket) the walk's and
 *		the fair walk's delivery and the search of one second, and the
 *		range's pointer, the searches of the whole table and the sweep's.
 *
 * Statements.  Every statement a tick runs in the common case targets one
 * leaf partition (sched.task_NNNN, the bucket of one run-at second) through
 * a plan prepared once per backend and bucket and kept.  The same statement
 * on the parent would merge an index scan of every partition and, as a
 * generic plan, lock all of them at every execution; on a leaf it descends
 * one index and locks one table, so the cost of a tick grows with what is
 * due, not with what is pending.  The parent is searched only where a
 * search must span seconds: a pointer more than a second behind (after
 * downtime), the next due task when none is pending in the next two
 * seconds, and the sweep.
 *
 * IDENTIFICATION
 *	  src/core/tick_plans.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "core/core.h"
#include "core/tick.h"

/*
 * The plans this backend prepared, for the extension object they were made
 * for: recreating the extension (perhaps with another bucket count) makes
 * them all anew.
 */
TickPlans	delaysched_tick_plans;

/*
 * The second half of every statement of the walk (tick.c, fair_walk.c),
 * after a CTE "picked" (ids of one leaf partition, %s, locked) is opened:
 * deliver the picked tasks as their types say.  park_all and worker are
 * the statement's parameters saying whether every notify type's tasks are
 * parked, and which HTTP worker http tasks may be leased to (NULL: park
 * them all; see http_handoff.c).  A notify type held to its consumers'
 * pace is parked too (PACE_HOLDS; core/pace.c): sched._pace_holds is
 * STABLE, so that kinds stays a view the planner joins as before, and asks
 * per row one atomic read while nothing is held.
 *
 * The update goes by primary key: joining it to the chosen rows could plan
 * a hash join over the partition.  Which http tasks are leased to the HTTP
 * worker, sched._handoff_lease says row by row, within the places reserved
 * for the statement, giving the same answer for a row every time it is
 * asked.  The rows it does not deliver it parks, in the same update: the
 * transition is DELAYSCHED_LEASE_OR_PARK (core.h), written once for every
 * delivery.  (Two updates, one for the leased rows and one for the rest,
 * cost a notify type's tick 40% more CPU, for the second update's start-up
 * and hash joins.)  The rows come back in (run_at, id) order, in the
 * columns DC_* of delivery.c.
 */
#define PACE_HOLDS "b.delivery = 'notify' AND sched._pace_holds(b.name)"
#define DELAYSCHED_DELIVER_PICKED(park_all, worker) \
"), kinds AS (" \
"  SELECT b.name, b.channel, b.ack_timeout, b.timeout, b.delivery = 'pull' AS pull, b.paused," \
"         (b.limited OR " park_all " OR " PACE_HOLDS ") AS limited," \
"         b.delivery = 'http' AS http, b.delivery = 'sql' AS sql," \
"         (b.delivery = 'sql' AND NOT b.paused AND NOT b.limited) AS sql_ready," \
"         (b.delivery <> 'notify' OR b.paused OR b.limited OR " park_all " OR " PACE_HOLDS ") AS parks," \
"         (b.delivery = 'http' AND NOT b.paused AND NOT b.limited" \
"          AND " worker " IS NOT NULL) AS handable" \
"  FROM sched.biz b" \
"), taken AS (" \
"  UPDATE sched.%s t SET " \
DELAYSCHED_LEASE_OR_PARK("(NOT k.parks OR k.handable AND sched._handoff_lease(t.id))", \
						 "pg_catalog.clock_timestamp()", \
						 "CASE WHEN k.handable AND sched._handoff_lease(t.id)" \
						 " THEN sched._http_lease(k.timeout) ELSE k.ack_timeout END", \
						 "CASE WHEN k.handable AND sched._handoff_lease(t.id) THEN " worker " END") \
"  FROM kinds k" \
"  WHERE t.id = ANY (ARRAY(SELECT picked.id FROM picked)) AND k.name = t.biz_type" \
"  RETURNING t.id, t.biz_type, t.run_at, t.payload, t.attempt, t.lease_until," \
"            k.channel, k.pull, k.paused, k.limited, k.http, k.http AND t.state = 'd' AS handed," \
"            t.schedule, k.sql, k.sql_ready, t.key" \
") SELECT * FROM taken ORDER BY taken.run_at, taken.id"

/*
 * Statement text of a task partition; %s is its name.  Parameters:
 * $1 door, $2/$3 deliver after (run_at, id), $4 before run_at, $5 now,
 * $6 at most this many, $7 park every notify type's tasks, $8 the HTTP
 * worker to lease http tasks to (NULL: park them all; see http_handoff.c).
 * The ids are chosen first, in the range's (run_at, id) order; what is
 * done with them is DELAYSCHED_DELIVER_PICKED (above).
 */
static const char deliver_sql[] =
"WITH picked AS ("
"  SELECT t.id FROM sched.%s t"
"  WHERE t.door = $1 AND t.state = 'p' AND (t.run_at, t.id) > ($2, $3)"
"    AND t.run_at < $4 AND t.run_at <= $5"
"  ORDER BY t.run_at, t.id LIMIT $6"
"  FOR UPDATE SKIP LOCKED"
DELAYSCHED_DELIVER_PICKED("$7", "$8");

/* $1 door, $2 at or after run_at, $3 before run_at. */
static const char first_due_sql[] =
"SELECT t.run_at FROM sched.%s t"
" WHERE t.door = $1 AND t.state = 'p' AND t.run_at >= $2 AND t.run_at < $3"
" ORDER BY t.run_at LIMIT 1";

/*
 * The statement of a task partition (%s, twice).  "state IN ('p', 'r') AND
 * state <> 'r'" is state = 'p' written so that it cannot use
 * task_pending_idx, which would pass over every other type's entries of the
 * range, whatever a plan made while the partition looked empty thinks.
 * Parameters: $1 door,
 * $2 the types, $3 how many of each, $4/$5 each one's place (run_at, id),
 * $6 before run_at, $7 now, $8 park every notify type's tasks, $9 the HTTP
 * worker (as the walk's).
 */
static const char fair_deliver_sql[] =
"WITH picked AS ("
"  SELECT p.id"
"  FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::int4[]),"
"                  pg_catalog.unnest($4::timestamptz[]), pg_catalog.unnest($5::int8[]))"
"       AS w(biz_type, quota, after_run_at, after_id)"
"  CROSS JOIN LATERAL ("
"    SELECT t.id FROM sched.%s t"
"    WHERE t.biz_type = w.biz_type AND t.biz_type IS NOT NULL"
"      AND t.state IN ('p', 'r') AND t.state <> 'r' AND t.door = $1"
"      AND (t.run_at, t.id) > (w.after_run_at, w.after_id)"
"      AND t.run_at < $6 AND t.run_at <= $7"
"    ORDER BY t.run_at, t.id LIMIT w.quota"
"    FOR UPDATE OF t SKIP LOCKED) p"
DELAYSCHED_DELIVER_PICKED("$8", "$9");

/*
 * The lane of the keyed tasks ahead of a backlog (keys_ahead.c), for a task
 * partition (%s): the range's pending tasks with a key after a place, in
 * (run_at, id) order, at most so many, unlocked (the delivery locks the ones
 * it takes), and of each whether its key is free, that is has no pending
 * task of the range between the backlog's place and the key's first task
 * here.  One probe per key through task_keyed_idx, in the partitions of
 * the seconds between when they are at most AHEAD_NEAR_SECONDS (the second
 * %s: a list of parameters, which the generic plan prunes at execution,
 * where it would not prune by an array; it still locks every partition),
 * else in every partition.  "coalesce(t.key, '') <> ''" is "t.key IS NOT
 * NULL" (no key is empty) written so that it cannot prove task_keyed_idx's
 * predicate: a plan made while the partition had few keyed tasks took that
 * index, read whole, and sorted.  Parameters: $1 door, $2/$3 after (run_at,
 * id), $4 before run_at, $5 now, $6 at most this many, $7/$8 the backlog's
 * place, $9 to $16 the buckets of the seconds from the backlog's place on.
 */
static const char ahead_pick_sql[] =
"WITH cand AS MATERIALIZED ("
"  SELECT t.id, t.run_at, t.biz_type, t.key FROM sched.%s t"
"  WHERE t.door = $1 AND t.state = 'p' AND (t.run_at, t.id) > ($2, $3)"
"    AND t.run_at < $4 AND t.run_at <= $5 AND coalesce(t.key, '') <> ''"
"  ORDER BY t.run_at, t.id LIMIT $6"
"), firsts AS ("
"  SELECT DISTINCT ON (c.biz_type, c.key) c.biz_type, c.key, c.run_at, c.id"
"  FROM cand c ORDER BY c.biz_type, c.key, c.run_at, c.id"
"), held AS MATERIALIZED ("
"  SELECT f.biz_type, f.key FROM firsts f"
"  CROSS JOIN LATERAL ("
"    SELECT FROM sched.task e"
"    WHERE e.biz_type = f.biz_type AND e.key = f.key AND e.state = 'p' AND e.key IS NOT NULL"
"      AND e.door = $1 %s"
"      AND (e.run_at, e.id) >= ($7, $8) AND (e.run_at, e.id) < (f.run_at, f.id)"
"    LIMIT 1) e"
") SELECT c.id, c.run_at,"
"         NOT EXISTS (SELECT FROM held h WHERE h.biz_type = c.biz_type AND h.key = c.key) AS free"
"  FROM cand c ORDER BY c.run_at, c.id";

/*
 * Deliver the tasks of a task partition (%s, twice) that the lane chose, as
 * many of them as are still pending and due and not held by others:
 * $1 their ids, $2 now, $3 park every notify type's tasks, $4 the HTTP
 * worker (as the walk's).  They are found by primary key; "state IN ('p',
 * 'r') AND state <> 'r'" is state = 'p' written so that no plan can take
 * task_pending_idx for them (a generic plan did, and read the whole
 * partition of a burst for a few ids: 10 ms a statement).
 */
static const char ahead_deliver_sql[] =
"WITH picked AS ("
"  SELECT t.id FROM sched.%s t"
"  WHERE t.id = ANY ($1) AND t.state IN ('p', 'r') AND t.state <> 'r' AND t.run_at <= $2"
"  FOR UPDATE SKIP LOCKED"
DELAYSCHED_DELIVER_PICKED("$3", "$4");

/*
 * Make sure the plans belong to the installed extension; prepare the ones
 * that are not per bucket.  SPI connected.
 */
void
delaysched_prepare_tick_plans(void)
{
	Oid			extension = get_extension_oid("delaysched", false);

	if (delaysched_tick_plans.extension == extension)
		return;

	if (delaysched_tick_plans.buckets != NULL)
	{
		for (int b = 0; b < delaysched_tick_plans.nbuckets; b++)
		{
			delaysched_free_plan(&delaysched_tick_plans.buckets[b].deliver);
			delaysched_free_plan(&delaysched_tick_plans.buckets[b].first_due);
			delaysched_free_plan(&delaysched_tick_plans.buckets[b].fair_deliver);
			delaysched_free_plan(&delaysched_tick_plans.buckets[b].ahead_pick);
			delaysched_free_plan(&delaysched_tick_plans.buckets[b].ahead_pick_far);
			delaysched_free_plan(&delaysched_tick_plans.buckets[b].ahead_deliver);
		}
		pfree(delaysched_tick_plans.buckets);
		delaysched_tick_plans.buckets = NULL;
	}
	delaysched_free_plan(&delaysched_tick_plans.lock_pointer);
	delaysched_free_plan(&delaysched_tick_plans.forget_behind);
	delaysched_free_plan(&delaysched_tick_plans.move_pointer);
	delaysched_free_plan(&delaysched_tick_plans.first_pending);
	delaysched_free_plan(&delaysched_tick_plans.next_lease);
	delaysched_free_plan(&delaysched_tick_plans.first_lease);
	delaysched_free_plan(&delaysched_tick_plans.expire_leases);
	delaysched_free_plan(&delaysched_tick_plans.purge);
	delaysched_tick_plans.extension = InvalidOid;

	delaysched_tick_plans.nbuckets = delaysched_read_bucket_count();
	delaysched_tick_plans.buckets = MemoryContextAllocZero(TopMemoryContext,
										   sizeof(BucketPlans) * delaysched_tick_plans.nbuckets);

	{
		Oid			types[] = {INT4OID, TIMESTAMPTZOID};

		delaysched_tick_plans.lock_pointer = delaysched_prepare_kept(
			"SELECT p.pointer, p.behind_from FROM sched.pointer p WHERE p.range_id = $1"
			" FOR UPDATE SKIP LOCKED",
			1, types);
		delaysched_tick_plans.forget_behind = delaysched_prepare_kept(
			"UPDATE sched.pointer p SET behind_from = NULL WHERE p.range_id = $1",
			1, types);
		delaysched_tick_plans.move_pointer = delaysched_prepare_kept(
			"UPDATE sched.pointer p SET pointer = $2, updated_at = pg_catalog.clock_timestamp()"
			" WHERE p.range_id = $1",
			2, types);
	}
	{
		Oid			types[] = {INT2OID, TIMESTAMPTZOID, INT8OID};

		delaysched_tick_plans.first_pending = delaysched_prepare_kept(
			"SELECT t.run_at FROM sched.task t"
			" WHERE t.door = $1 AND t.state = 'p' AND (t.run_at, t.id) > ($2, $3)"
			" ORDER BY t.run_at, t.id LIMIT 1",
			3, types);
	}
	{
		Oid			types[] = {INT2OID, TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID};
		Oid			next_lease_types[] = {INT2OID, TIMESTAMPTZOID, TIMESTAMPTZOID};

		/*
		 * Strictly later than now: an expired lease that another transaction
		 * holds (an ack in progress) waits for the next regular sweep rather
		 * than waking the worker over and over.  No later than the next
		 * regular sweep, which comes anyway: the leases of acknowledged tasks
		 * stay in the index until vacuum, and a search without an end would
		 * read all of them while the horizon is held.
		 */
		delaysched_tick_plans.next_lease = delaysched_prepare_kept(
			"SELECT t.lease_until FROM sched.task t"
			" WHERE t.door = $1 AND t.state = 'd' AND t.lease_until > $2"
			"   AND t.lease_until <= $3"
			" ORDER BY t.lease_until LIMIT 1",
			3, next_lease_types);

		/*
		 * The earliest lease in [$2, $3]: before the expiry, whether any ran
		 * out and when the next will; after it, one still there, that is,
		 * one whose row another transaction held (an acknowledgement that
		 * may yet roll back), where the next sweep starts.
		 */
		delaysched_tick_plans.first_lease = delaysched_prepare_kept(
			"SELECT t.lease_until FROM sched.task t"
			" WHERE t.door = $1 AND t.state = 'd' AND t.lease_until >= $2"
			"   AND t.lease_until <= $3"
			" ORDER BY t.lease_until LIMIT 1",
			3, next_lease_types);
		delaysched_tick_plans.expire_leases = delaysched_prepare_kept("SELECT sched._expire_leases($1, $2, $3, $4)", 4, types);
	}
	{
		Oid			types[] = {TIMESTAMPTZOID, INT4OID, INT4OID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID};

		delaysched_tick_plans.purge = delaysched_prepare_kept("SELECT sched._purge($1, $2, $3, $4, $5, $6)", 6, types);
	}
	delaysched_tick_plans.extension = extension;
}

/* The name of a bucket's partition, as the install script makes them. */
static void
partition_name(int bucket, char *name)
{
	snprintf(name, NAMEDATALEN, "task_%04d", bucket);
}

/* The plans of one bucket, prepared when first used. */
BucketPlans *
delaysched_bucket_plans(int bucket)
{
	BucketPlans *bp = &delaysched_tick_plans.buckets[bucket];

	if (bp->deliver == NULL)
	{
		char		partition[NAMEDATALEN];
		Oid			deliver_types[] = {INT2OID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID,
		TIMESTAMPTZOID, INT4OID, BOOLOID, INT2OID};
		Oid			first_due_types[] = {INT2OID, TIMESTAMPTZOID, TIMESTAMPTZOID};

		partition_name(bucket, partition);
		bp->first_due = delaysched_prepare_kept(psprintf(first_due_sql, partition), 3, first_due_types);
		bp->deliver = delaysched_prepare_kept(psprintf(deliver_sql, partition, partition),
											  8, deliver_types);
	}
	return bp;
}

/* The fair walk's delivery statement of a bucket (fair_walk.c). */
SPIPlanPtr
delaysched_fair_plan(int bucket)
{
	BucketPlans *bp = &delaysched_tick_plans.buckets[bucket];

	if (bp->fair_deliver == NULL)
	{
		char		partition[NAMEDATALEN];
		Oid			types[] = {INT2OID, TEXTARRAYOID, INT4ARRAYOID, TIMESTAMPTZARRAYOID,
		INT8ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID, INT2OID};

		partition_name(bucket, partition);
		bp->fair_deliver = delaysched_prepare_kept(psprintf(fair_deliver_sql,
															partition, partition),
												   lengthof(types), types);
	}
	return bp->fair_deliver;
}

/*
 * The delivery of chosen tasks of a bucket, by id: the lanes' ahead of a
 * backlog (keys_ahead.c, firsts_ahead.c).
 */
SPIPlanPtr
delaysched_ahead_deliver_plan(int bucket)
{
	BucketPlans *bp = &delaysched_tick_plans.buckets[bucket];

	if (bp->ahead_deliver == NULL)
	{
		char		partition[NAMEDATALEN];
		Oid			deliver_types[] = {INT8ARRAYOID, TIMESTAMPTZOID, BOOLOID, INT2OID};

		partition_name(bucket, partition);
		bp->ahead_deliver = delaysched_prepare_kept(psprintf(ahead_deliver_sql, partition, partition),
													lengthof(deliver_types), deliver_types);
	}
	return bp->ahead_deliver;
}

/*
 * The keys' lane's statements of a bucket (keys_ahead.c): the one whose
 * probes keep to the partitions of AHEAD_NEAR_SECONDS seconds, the one
 * whose probes read every partition, and the delivery.
 */
BucketPlans *
delaysched_ahead_plans(int bucket)
{
	BucketPlans *bp = &delaysched_tick_plans.buckets[bucket];

	if (bp->ahead_pick == NULL)
	{
		char		partition[NAMEDATALEN];
		Oid			pick_types[] = {INT2OID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID,
			TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID, INT8OID,
		INT2OID, INT2OID, INT2OID, INT2OID, INT2OID, INT2OID, INT2OID, INT2OID};

		StaticAssertStmt(lengthof(pick_types) == AHEAD_PICK_PLACES + AHEAD_NEAR_SECONDS,
						 "one parameter per near second");
		partition_name(bucket, partition);
		(void) delaysched_ahead_deliver_plan(bucket);
		bp->ahead_pick_far = delaysched_prepare_kept(psprintf(ahead_pick_sql, partition, ""),
													 lengthof(pick_types), pick_types);
		bp->ahead_pick = delaysched_prepare_kept(psprintf(ahead_pick_sql, partition,
														  "AND e.bucket IN ($9, $10, $11, $12, $13, $14, $15, $16)"),
												 lengthof(pick_types), pick_types);
	}
	return bp;
}

/* The bucket of tasks due in t's second: what sched._bucket(t) computes. */
int
delaysched_bucket_of(TimestampTz t)
{
	return delaysched_bucket_among(t, delaysched_tick_plans.nbuckets);
}
