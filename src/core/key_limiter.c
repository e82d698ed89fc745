/*-------------------------------------------------------------------------
 *
 * key_limiter.c
 *		The token buckets of keys: one per key of a type with a
 *		key_rate_limit, in a table of bounded size in shared memory.
 *
 * A type's key_rate_limit gives every key of the type a bucket of its own,
 * holding at most key_burst tokens and filling at key_rate_limit tokens per
 * second (refilled from the time elapsed when it is used, as the types'
 * buckets in limiter.c).  Keys need no definition and may be any number, so
 * a key's bucket is made when the key first takes a token, and forgotten
 * once it is idle: a bucket that has filled up again says no more than a
 * new one would, which also starts full.
 *
 * The table holds delaysched.max_keys buckets, of every database.  When a
 * key finds no room, its take drops every idle bucket (one walk of the
 * table) and tries again; if every bucket is still busy, the key gets no
 * token, and its tasks wait (sched._pick leaves them parked) until some
 * bucket falls idle: when depends on the busy buckets' keys and rates, of
 * any type and database, not on the refused key's.  Past the table's size
 * keys are therefore served later, never faster than their rate.
 *
 * A bucket is named by its database and a 64-bit hash of the type and the
 * key, not by the key (up to 512 bytes): two keys whose hashes collide
 * share one bucket (of one type: one rate together; of two types with
 * different rates, the bucket refills at the rate of the last take).
 *
 * The takes of one pick (sched._pick) are made in one hold of the lock,
 * for all of its keys.  The earliest time a key that was held back gets its
 * next token is kept in this backend (key_next_token), for the drain and
 * the workers' claims to know when to look again (sched._key_tokens_next).
 *
 * Locking: one LWLock, the keys lock; see Locks in base/shmem.h.
 *
 * IDENTIFICATION
 *	  src/core/key_limiter.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "base/guc.h"
#include "base/shmem.h"
#include "core/core.h"

/* A key's bucket: the hash key. */
typedef struct KeyBucketTag
{
	Oid			database;
	uint32		spare;			/* zero: the tag is hashed as bytes */
	uint64		hash;			/* of the type's name and the key */
} KeyBucketTag;

typedef struct KeyBucket
{
	KeyBucketTag tag;			/* hash key */
	double		rate;			/* as last used */
	int			burst;
	double		tokens;
	TimestampTz refilled_at;
} KeyBucket;

typedef struct KeyLimiterShared
{
	LWLock	   *lock;
	uint64		made;			/* buckets made since start */
	uint64		dropped;		/* idle buckets dropped to make room */
	uint64		refused;		/* takes that found no room, all busy */
} KeyLimiterShared;

static KeyLimiterShared *key_limiter = NULL;
static HTAB *key_buckets = NULL;

/* The earliest next token of a key held back in this backend's last takes. */
static TimestampTz key_next_token = DT_NOEND;

PG_FUNCTION_INFO_V1(delaysched_take_key_tokens_sql);
PG_FUNCTION_INFO_V1(delaysched_return_key_tokens_sql);
PG_FUNCTION_INFO_V1(delaysched_key_tokens_next_sql);
PG_FUNCTION_INFO_V1(delaysched_key_buckets_sql);

Size
delaysched_key_limiter_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(KeyLimiterShared)),
					hash_estimate_size(delaysched_max_keys, sizeof(KeyBucket)));
}

/* Create or attach; called with AddinShmemInitLock held. */
void
delaysched_key_limiter_shmem_init(void)
{
	bool		found;
	HASHCTL		info;

	key_limiter = ShmemInitStruct("delaysched key limiter", sizeof(KeyLimiterShared), &found);
	if (!found)
	{
		memset(key_limiter, 0, sizeof(KeyLimiterShared));
		key_limiter->lock = delaysched_lwlock(DELAYSCHED_LWLOCK_KEYS);
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(KeyBucketTag);
	info.entrysize = sizeof(KeyBucket);
	key_buckets = ShmemInitHash("delaysched key buckets",
								delaysched_max_keys, delaysched_max_keys,
								&info, HASH_ELEM | HASH_BLOBS);
}

/* The tag of key "key" of type "biz" in the current database. */
static void
make_tag(KeyBucketTag *tag, const char *biz, const char *key, int keylen)
{
	uint64		seed = hash_bytes_extended((const unsigned char *) biz, strlen(biz), 0);

	memset(tag, 0, sizeof(KeyBucketTag));
	tag->database = MyDatabaseId;
	tag->hash = hash_bytes_extended((const unsigned char *) key, keylen, seed);
}

/* The tokens a bucket holds now, at its own rate and burst. */
static double
tokens_now(const KeyBucket *bucket, TimestampTz now)
{
	double		tokens = bucket->tokens;

	if (now > bucket->refilled_at)
		tokens += (double) (now - bucket->refilled_at) / USECS_PER_SEC * bucket->rate;
	return Min(tokens, (double) bucket->burst);
}

/* Drop every idle bucket (full again); the lock held exclusively. */
static void
drop_idle(TimestampTz now)
{
	HASH_SEQ_STATUS scan;
	KeyBucket  *bucket;

	hash_seq_init(&scan, key_buckets);
	while ((bucket = hash_seq_search(&scan)) != NULL)
		if (tokens_now(bucket, now) >= bucket->burst)
		{
			/* (Removing the entry just returned is allowed during a scan.) */
			hash_search(key_buckets, &bucket->tag, HASH_REMOVE, NULL);
			key_limiter->dropped++;
		}
}

/*
 * The bucket of a tag, made full if missing; NULL if the table has no room
 * even after its idle buckets are dropped.  The lock held exclusively.
 */
static KeyBucket *
find_or_make(const KeyBucketTag *tag, double rate, int burst, TimestampTz now, bool *swept)
{
	KeyBucket  *bucket;
	bool		found;

	bucket = hash_search(key_buckets, tag, HASH_FIND, NULL);
	if (bucket != NULL)
		return bucket;
	if (hash_get_num_entries(key_buckets) >= delaysched_max_keys)
	{
		if (*swept)
			return NULL;
		drop_idle(now);
		*swept = true;
		if (hash_get_num_entries(key_buckets) >= delaysched_max_keys)
			return NULL;
	}
	bucket = hash_search(key_buckets, tag, HASH_ENTER_NULL, &found);
	if (bucket == NULL)
		return NULL;
	if (!found)
	{
		bucket->rate = rate;
		bucket->burst = burst;
		bucket->tokens = burst;
		bucket->refilled_at = now;
		key_limiter->made++;
	}
	return bucket;
}

/*
 * sched._take_key_tokens(biz text, keys text[], wants int[], rate float8,
 *						  burst int) RETURNS int[]
 *
 * Takes up to wants[i] tokens from the bucket of keys[i] of type biz, for
 * every i in one hold of the lock, and returns how many each got.  A key
 * without room in the table gets none.  Notes in this backend when the
 * first key held back gets its next token.
 */
Datum
delaysched_take_key_tokens_sql(PG_FUNCTION_ARGS)
{
	char	   *biz = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ArrayType  *keys = PG_GETARG_ARRAYTYPE_P(1);
	ArrayType  *wants = PG_GETARG_ARRAYTYPE_P(2);
	double		rate = PG_GETARG_FLOAT8(3);
	int			burst = PG_GETARG_INT32(4);
	Datum	   *key_values;
	bool	   *key_nulls;
	Datum	   *want_values;
	bool	   *want_nulls;
	int			nkeys;
	int			nwants;
	Datum	   *taken;
	TimestampTz now = GetCurrentTimestamp();
	bool		swept = false;

	if (!(rate > 0) || burst < 1)
		elog(ERROR, "a key's bucket needs a rate above 0 and a burst of at least 1");
	deconstruct_array(keys, TEXTOID, -1, false, TYPALIGN_INT, &key_values, &key_nulls, &nkeys);
	deconstruct_array(wants, INT4OID, 4, true, TYPALIGN_INT, &want_values, &want_nulls, &nwants);
	if (nkeys != nwants)
		elog(ERROR, "keys and wants differ in length");
	taken = palloc(sizeof(Datum) * Max(1, nkeys));

	LWLockAcquire(key_limiter->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nkeys; i++)
	{
		int			want = want_nulls[i] ? 0 : Max(DatumGetInt32(want_values[i]), 0);
		int			got = 0;
		KeyBucketTag tag;
		KeyBucket  *bucket;

		if (key_nulls[i] || want == 0)
		{
			taken[i] = Int32GetDatum(0);
			continue;
		}
		make_tag(&tag, biz, VARDATA_ANY(DatumGetPointer(key_values[i])),
				 VARSIZE_ANY_EXHDR(DatumGetPointer(key_values[i])));
		bucket = find_or_make(&tag, rate, burst, now, &swept);
		if (bucket == NULL)
		{
			key_limiter->refused++;
			/* A bucket falls idle within a burst's time at this rate. */
			key_next_token = Min(key_next_token,
								 now + (TimestampTz) ceil((double) burst / rate * USECS_PER_SEC));
		}
		else
		{
			bucket->tokens = tokens_now(bucket, now);
			bucket->refilled_at = Max(bucket->refilled_at, now);
			bucket->rate = rate;
			bucket->burst = burst;
			bucket->tokens = Min(bucket->tokens, (double) burst);
			got = (int) Min((double) want, floor(bucket->tokens));
			got = Max(got, 0);
			bucket->tokens -= got;
			if (got < want)
				key_next_token = Min(key_next_token,
									 now + (TimestampTz) ceil((1.0 - bucket->tokens) / rate * USECS_PER_SEC));
		}
		taken[i] = Int32GetDatum(got);
	}
	LWLockRelease(key_limiter->lock);

	PG_RETURN_ARRAYTYPE_P(construct_array(taken, nkeys, INT4OID, 4, true, TYPALIGN_INT));
}

/*
 * sched._return_key_tokens(biz text, keys text[], counts int[]) RETURNS void
 *
 * Gives back tokens taken and not used (a pick that found fewer tasks).
 */
Datum
delaysched_return_key_tokens_sql(PG_FUNCTION_ARGS)
{
	char	   *biz = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ArrayType  *keys = PG_GETARG_ARRAYTYPE_P(1);
	ArrayType  *counts = PG_GETARG_ARRAYTYPE_P(2);
	Datum	   *key_values;
	bool	   *key_nulls;
	Datum	   *count_values;
	bool	   *count_nulls;
	int			nkeys;
	int			ncounts;

	deconstruct_array(keys, TEXTOID, -1, false, TYPALIGN_INT, &key_values, &key_nulls, &nkeys);
	deconstruct_array(counts, INT4OID, 4, true, TYPALIGN_INT, &count_values, &count_nulls, &ncounts);
	if (nkeys != ncounts)
		elog(ERROR, "keys and counts differ in length");

	LWLockAcquire(key_limiter->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nkeys; i++)
	{
		KeyBucketTag tag;
		KeyBucket  *bucket;

		if (key_nulls[i] || count_nulls[i] || DatumGetInt32(count_values[i]) <= 0)
			continue;
		make_tag(&tag, biz, VARDATA_ANY(DatumGetPointer(key_values[i])),
				 VARSIZE_ANY_EXHDR(DatumGetPointer(key_values[i])));
		bucket = hash_search(key_buckets, &tag, HASH_FIND, NULL);
		if (bucket != NULL)
			bucket->tokens = Min((double) bucket->burst,
								 bucket->tokens + DatumGetInt32(count_values[i]));
	}
	LWLockRelease(key_limiter->lock);
	PG_RETURN_VOID();
}

/*
 * sched._key_tokens_next() RETURNS timestamptz
 *
 * When the first key held back by this backend's takes since the last call
 * gets its next token (NULL: none was held back), and forget it.
 */
Datum
delaysched_key_tokens_next_sql(PG_FUNCTION_ARGS)
{
	TimestampTz next = delaysched_key_tokens_next();

	if (next == DT_NOEND)
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(next);
}

TimestampTz
delaysched_key_tokens_next(void)
{
	TimestampTz next = key_next_token;

	key_next_token = DT_NOEND;
	return next;
}

/*
 * sched._key_buckets() RETURNS TABLE(buckets bigint, capacity int,
 *		made bigint, dropped bigint, refused bigint)
 *
 * The table of keys' buckets, every database's: how many there are, how
 * many it holds, and since the start, how many were made, dropped idle to
 * make room, and refused for want of room.
 */
Datum
delaysched_key_buckets_sql(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "sched._key_buckets must return a row");
	LWLockAcquire(key_limiter->lock, LW_SHARED);
	values[0] = Int64GetDatum((int64) hash_get_num_entries(key_buckets));
	values[1] = Int32GetDatum(delaysched_max_keys);
	values[2] = Int64GetDatum((int64) key_limiter->made);
	values[3] = Int64GetDatum((int64) key_limiter->dropped);
	values[4] = Int64GetDatum((int64) key_limiter->refused);
	LWLockRelease(key_limiter->lock);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
