/*-------------------------------------------------------------------------
 *
 * core.h
 *		The delivery core, but for the tick (tick.h): the scanner workers,
 *		the drain, the token buckets, the wake-ups after commit, the shares
 *		by weight, the xmin horizon's warning and the lease transition.
 *
 * IDENTIFICATION
 *	  src/core/core.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_CORE_H
#define DELAYSCHED_CORE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "nodes/pg_list.h"

/*
 * The scanner background workers (delaysched.workers of them per
 * database, started by the launcher), which walk the ranges and
 * deliver tasks as they fall due (scanner.c).
 */

extern PGDLLEXPORT void delaysched_scanner_main(Datum main_arg);

/*
 * The drain: delivering parked tasks of limited business types as
 * tokens and slots allow (see drain.c).
 */

typedef struct DrainResult
{
	int64		delivered;
	TimestampTz next;			/* when the drain should run again; DT_NOEND
								 * if only a commit should bring it back */
} DrainResult;

extern void delaysched_drain(TimestampTz now, int batch, DrainResult *result);

/*
 * Token buckets in shared memory: one per rate-limited business type
 * and one for delaysched.max_deliveries_per_second, and the hints that
 * tell the drain which types have parked tasks (see limiter.c).
 */

/* A type with parked tasks, as the drain is told of it. */
typedef struct BacklogHint
{
	char		name[NAMEDATALEN];
	uint64		marks;			/* the hint's count of parkings when read */
} BacklogHint;

extern Size delaysched_limiter_shmem_size(void);
extern void delaysched_limiter_shmem_init(void);

/* key_limiter.c: the keys' token buckets */
extern Size delaysched_key_limiter_shmem_size(void);
extern void delaysched_key_limiter_shmem_init(void);
extern TimestampTz delaysched_key_tokens_next(void);

/*
 * Take up to "want" tokens of a type's bucket (rate per second, burst the
 * most it holds), refilled up to now; returns how many were taken, and sets
 * *next_token to when the next whole token will be there.  -1 if there is
 * no room for the type's bucket (see delaysched.max_biz_types).
 */
extern int	delaysched_take_tokens(const char *biz, double rate, int burst, int want,
								   TimestampTz now, TimestampTz *next_token);
extern void delaysched_return_tokens(const char *biz, int n);

/* The bucket of delaysched.max_deliveries_per_second: tokens go back. */
extern void delaysched_return_global_tokens(int n);

/* One type's part of the drain's takes (delaysched_take_drain_tokens). */
typedef struct DrainTokens
{
	const char *biz;
	double		rate;			/* 0: no bucket of its own */
	int			burst;
	int			want;
	int			taken;			/* out: -1 if there is no room for its bucket */
	TimestampTz next_token;		/* out: when its next whole token comes */
} DrainTokens;

/*
 * Every type's tokens and then the global cap's (if global_rate > 0), in
 * one hold of the lock, refilled to a time read under it, which is
 * returned: the drain's deliveries are recorded at it.  *global_taken is 0
 * when there is no cap.
 */
extern TimestampTz delaysched_take_drain_tokens(DrainTokens *types, int ntypes,
												double global_rate, int batch,
												int *global_taken,
												TimestampTz *global_next);

/* Hints: the types a transaction noted as parked (wake.c), at its commit. */
extern bool delaysched_publish_hints(List *types);
extern BacklogHint *delaysched_backlog_hints(int *count, bool *probe_all, TimestampTz now);
extern void delaysched_backlog_drained(const char *biz, uint64 marks);

extern Datum delaysched_tokens_sql(PG_FUNCTION_ARGS);
extern Datum delaysched_take_tokens_sql(PG_FUNCTION_ARGS);
extern Datum delaysched_return_tokens_sql(PG_FUNCTION_ARGS);
extern Datum delaysched_forget_bucket_sql(PG_FUNCTION_ARGS);

/*
 * Consumer pace: notify and pull types held to what their consumers
 * acknowledge in time (see pace.c).
 */

extern Size delaysched_pace_shmem_size(void);
extern void delaysched_pace_shmem_init(void);
extern bool delaysched_note_ack(const char *biz, TimestampTz delivered_at, bool expired);
extern int	delaysched_pace_cap(const char *biz);
extern int	delaysched_pace_start(const char *biz, int in_flight);
extern void delaysched_pace_release(const char *biz, bool forget);
extern char **delaysched_paced_notify_types(int *count);

/*
 * Waking the scanner after a commit that added a task due sooner, and
 * the drain after one that parked tasks or freed a slot, the HTTP
 * workers after one that parked tasks of an http type (wake.c).
 */

extern void delaysched_drain_after_commit(void);
extern void delaysched_note_parked(const char *biz);
extern void delaysched_http_after_commit(void);
extern void delaysched_sql_after_commit(void);
extern Datum delaysched_wake(PG_FUNCTION_ARGS);
extern Datum delaysched_wake_drain(PG_FUNCTION_ARGS);

/*
 * Sharing a number of deliveries across business types by weight
 * (see shares.c).
 */

/* One type's claim on a share-out. */
typedef struct ShareClaim
{
	int			weight;			/* sched.biz.weight, at least 1 */
	int			cap;			/* the most it can use */
	int			share;			/* out: what it gets */
} ShareClaim;

extern void delaysched_share_out(ShareClaim *claims, int count, int total, int *rotation);

/*
 * The warning about a held xmin horizon (see horizon.c).
 */

extern TimestampTz delaysched_check_horizon(TimestampTz now);

/*
 * The lease transition, written once.
 *
 * A task is delivered by leasing it, whichever way it goes out: NOTIFY from
 * the walk (walk.c) or from the drain (drain.c), a pull claim
 * (sched.claim), a hand-off to an HTTP worker (delivery.c) or its claim
 * (sched._http_claim), an SQL worker's lease (sql_plans.c).  Every one
 * sets the same columns the same way:
 *
 *	 state = 'd', attempt = attempt + 1, delivered_at = AT,
 *	 lease_until = AT + FOR, lease_owner = OWNER
 *
 * (OWNER is the HTTP worker sending it; NULL for the others.)  The walk and
 * the drain write their statements in C and use the macros below; the
 * functions written in SQL call sched._lease (lease.c), whose statement is
 * built from the same macro.  The row being updated must be aliased "t".
 *
 * The walk parks, in the same statement, the tasks it does not deliver
 * (state 'r', no lease, as for the drain or the HTTP workers): one UPDATE
 * costs a notify tick 40% less CPU than one for each.  So the transition
 * is written as "lease where LEASES holds, park elsewhere", and a plain
 * lease is that with LEASES = true, which the planner folds away.
 *
 * The arguments are SQL expressions; AT is evaluated once per column.
 *
 * The reverse, a delivered task that waits again (its lease ran out, an
 * HTTP worker gave it back, a firing's delivery was put off), is written
 * once too, in SQL: sched._unlease (schema/objects/03_task_operations.sql).
 */

#define DELAYSCHED_LEASE_OR_PARK(leases, at, lease_for, owner) \
	"state = CASE WHEN " leases " THEN 'd' ELSE 'r' END::\"char\"," \
	" attempt = t.attempt + CASE WHEN " leases " THEN 1 ELSE 0 END," \
	" delivered_at = CASE WHEN " leases " THEN " at " ELSE t.delivered_at END," \
	" lease_until = CASE WHEN " leases " THEN " at " + " lease_for " END," \
	" lease_owner = CASE WHEN " leases " THEN " owner " END"

#define DELAYSCHED_LEASE(at, lease_for, owner) \
	DELAYSCHED_LEASE_OR_PARK("true", at, lease_for, owner)

#endif							/* DELAYSCHED_CORE_H */
