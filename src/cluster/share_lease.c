/*-------------------------------------------------------------------------
 *
 * share_lease.c
 *		A node's lease on its shares of the split limits, from a router that
 *		follows its nodes (delaysched_router's sched.follow_nodes; see
 *		doc/scale-out.md).
 *
 * A router splits a type's rate_limit, burst and max_concurrency over its
 * nodes.  A router that follows its nodes re-splits them over the nodes
 * that answer, so that a node that is down gives its share to the others,
 * and takes it back when it answers again.  That is safe only if a node
 * that the router cannot reach stops using its share before the router
 * gives it to the others, and if a node that starts again does not use its
 * old share before the router has taken it back from the others.  So the
 * router leases each node its shares, for a few seconds at a time, at every
 * round: sched._share_lease(seconds, generation) here, which renews the lease
 * only if the node has its shares of the router's current split (numbered:
 * sched._set_share_generation, after the router gave them), and says how
 * long the lease it holds has left, so that the router's record of it is
 * the node's, whatever the router's own transactions did.
 *
 * A followed node (one with the row of sched.router_follow, which the first
 * lease writes and sched._share_unfollow removes) whose lease is not in
 * force delivers nothing of a type with a rate limit or a concurrency cap:
 * sched._share_lapsed() is true, and the drain (core/drain.c) and the
 * claims (sched._claim_allowance) hold such types back.  The lease itself
 * is in this database's shared area, not in a table: a restart forgets it,
 * so a node that comes back waits for the router's next round.  Types
 * without those limits are not split, and never wait for a lease.
 *
 * Locking: the lease is one atomic word of the database's area (its end on
 * the monotonic clock), written by the router's calls and read by the drain
 * and the claims.
 *
 * IDENTIFICATION
 *	  src/cluster/share_lease.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <time.h>

#include "fmgr.h"
#include "utils/timestamp.h"

#include "base/shmem.h"
#include "cluster/cluster.h"

/* The longest lease a router may give, in seconds. */
#define SHARE_LEASE_MAX_SECONDS 3600

PG_FUNCTION_INFO_V1(delaysched_set_share_lease_sql);
PG_FUNCTION_INFO_V1(delaysched_share_lease_until_sql);
PG_FUNCTION_INFO_V1(delaysched_share_lease_left_sql);
PG_FUNCTION_INFO_V1(delaysched_set_share_generation_sql);
PG_FUNCTION_INFO_V1(delaysched_share_generation_sql);

/* Whether this process said in the log that the lease lapsed. */
static bool lapse_reported = false;

/*
 * Now on the monotonic clock, in microseconds: a lease runs for its seconds
 * whatever the wall clock does meanwhile (a step back would otherwise make
 * it outlast the router's record of it).
 */
static int64
monotonic_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		elog(ERROR, "clock_gettime(CLOCK_MONOTONIC) failed: %m");
	return (int64) ts.tv_sec * USECS_PER_SEC + ts.tv_nsec / 1000;
}

/* Error out unless delaysched serves this database. */
static void
require_served(void)
{
	if (!delaysched_current_database())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delaysched does not serve this database"),
				 errhint("Check delaysched.databases and that delaysched is in shared_preload_libraries.")));
}

/*
 * sched._set_share_lease(seconds float8) RETURNS timestamptz
 *
 * Lease this database its shares for seconds from now; returns until when.
 * (sched._share_lease, which also marks the node followed, calls it.)
 */
Datum
delaysched_set_share_lease_sql(PG_FUNCTION_ARGS)
{
	double		seconds = PG_GETARG_FLOAT8(0);
	TimestampTz until;

	if (isnan(seconds) || seconds <= 0 || seconds > SHARE_LEASE_MAX_SECONDS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a share lease must last more than 0 and at most %d seconds, not %g",
						SHARE_LEASE_MAX_SECONDS, seconds)));
	require_served();
	pg_atomic_write_u64(&delaysched_shared->share_lease_until,
						(uint64) (monotonic_us() + (int64) (seconds * USECS_PER_SEC)));
	until = GetCurrentTimestamp() + (TimestampTz) (seconds * USECS_PER_SEC);
	PG_RETURN_TIMESTAMPTZ(until);
}

/*
 * What is left of this database's lease, in microseconds (0 or less: none
 * in force); PG_INT64_MIN if it has had none since its entry was taken.
 */
static int64
lease_left_us(void)
{
	uint64		deadline;

	if (!delaysched_current_database())
		return PG_INT64_MIN;
	deadline = pg_atomic_read_u64(&delaysched_shared->share_lease_until);
	if (deadline == 0)
		return PG_INT64_MIN;
	return (int64) deadline - monotonic_us();
}

/*
 * sched._share_lease_left() RETURNS float8: the seconds left of this
 * database's lease (0: none in force).
 */
Datum
delaysched_share_lease_left_sql(PG_FUNCTION_ARGS)
{
	int64		left = lease_left_us();

	PG_RETURN_FLOAT8(left > 0 ? (double) left / USECS_PER_SEC : 0.0);
}

/*
 * sched._share_lease_until() RETURNS timestamptz: until when this database's
 * lease is in force, by the wall clock now (for people: the lease runs on the
 * monotonic clock); NULL if it has had none since the server started (or the
 * database is not served).
 */
Datum
delaysched_share_lease_until_sql(PG_FUNCTION_ARGS)
{
	int64		left = lease_left_us();

	if (left == PG_INT64_MIN)
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(GetCurrentTimestamp() + left);
}

/*
 * sched._set_share_generation(generation bigint) RETURNS void: the router
 * gave this database its shares of its split number "generation".
 */
Datum
delaysched_set_share_generation_sql(PG_FUNCTION_ARGS)
{
	require_served();
	pg_atomic_write_u64(&delaysched_shared->share_generation, (uint64) PG_GETARG_INT64(0));
	PG_RETURN_VOID();
}

/* sched._share_generation() RETURNS bigint: the split last given; 0: none. */
Datum
delaysched_share_generation_sql(PG_FUNCTION_ARGS)
{
	if (!delaysched_current_database())
		PG_RETURN_INT64(0);
	PG_RETURN_INT64((int64) pg_atomic_read_u64(&delaysched_shared->share_generation));
}

/*
 * The drain saw whether the lease is lapsed: say so in the log once when it
 * lapses, and once when it is in force again.
 */
void
delaysched_note_share_lapse(bool lapsed)
{
	if (lapsed && !lapse_reported)
		ereport(LOG,
				(errmsg("delaysched: this node's lease on its shares of the split limits is not in force"),
				 errdetail("Types with a rate limit or a concurrency cap wait until the router renews it."),
				 errhint("Check that the router (sched.follow_nodes) runs and reaches this node.")));
	else if (!lapsed && lapse_reported)
		ereport(LOG,
				(errmsg("delaysched: this node's lease on its shares of the split limits is in force again")));
	lapse_reported = lapsed;
}
