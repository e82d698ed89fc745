/*-------------------------------------------------------------------------
 *
 * limiter.h
 *		Token buckets in shared memory: one per rate-limited business type
 *		and one for delaysched.max_deliveries_per_second, and the hints that
 *		tell the drain which types have parked tasks (see limiter.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_LIMITER_H
#define DELAYSCHED_LIMITER_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "nodes/pg_list.h"

/* A type with parked tasks, as the drain is told of it. */
typedef struct BacklogHint
{
	char		name[NAMEDATALEN];
	uint64		marks;			/* the hint's count of parkings when read */
} BacklogHint;

extern Size delaysched_limiter_shmem_size(void);
extern void delaysched_limiter_shmem_init(void);

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

#endif							/* DELAYSCHED_LIMITER_H */
