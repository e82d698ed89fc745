/*-------------------------------------------------------------------------
 *
 * limiter.c
 *		Token buckets in shared memory, and the drain's hints of which
 *		business types have parked tasks.
 *
 * A rate-limited type has a bucket that holds at most "burst" tokens and
 * fills at "rate" tokens per second, computed from the time elapsed when it
 * is used (nothing ticks in the background).  Every delivery of the type
 * takes a token; the scanner workers, whichever of them delivers, take from
 * the same bucket, so the type's rate does not depend on their number.
 * delaysched.max_deliveries_per_second has one bucket of its own, which
 * every delivery by the drain takes from as well.  The rate and burst are
 * not stored here: the caller passes what it just read from sched.biz, so
 * a new definition takes effect at the next delivery; a bucket that sees a
 * smaller burst than before keeps no more than the new one.
 *
 * Hints.  A tick that parks tasks of a type (state 'r', waiting for a token
 * or a concurrency slot; see drain.c) notes the type, and when its
 * transaction commits the note becomes a hint: the type has a backlog.
 * The drain looks only at hinted types, so an idle rate limit costs
 * nothing.  Every parking bumps the hint's "marks", and the drain clears a
 * hint only if the marks did not change while it looked: a tick that parks
 * more while the drain finds the backlog empty keeps the hint.  When the
 * table has no room for a hint, or after a restart (which forgets them
 * all), the drain probes every type instead ("probe_all"), and it also does
 * so now and then as a backstop.
 *
 * Several databases.  Buckets and hints are per database: the hash key is
 * (database, type), and delaysched.max_biz_types counts the entries of
 * every database together.  Each database's drain reads its own hints and
 * its own probe flags (DelayschedShared.probe_all, last_full_probe).  The
 * global bucket of delaysched.max_deliveries_per_second is the cluster's:
 * the cap protects the one server.  Drains of several databases share it
 * (see take_global_tokens_locked).
 *
 * Locking: one LWLock, the limiter lock; see Locks in base/shmem.h.
 *
 * IDENTIFICATION
 *	  src/core/limiter.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "base/base.h"
#include "base/guc.h"
#include "base/shmem.h"
#include "core/core.h"

/* How often the drain probes every type, hinted or not. */
#define FULL_PROBE_EVERY_MS		5000

/* A business type of a database: the hash key. */
typedef struct BucketKey
{
	Oid			database;
	char		name[NAMEDATALEN];
} BucketKey;

/* One business type's bucket and hint. */
typedef struct TypeBucket
{
	BucketKey	key;			/* hash key */
	double		rate;			/* tokens per second; 0: a hint only */
	int			burst;
	double		tokens;
	TimestampTz refilled_at;
	bool		backlog;		/* parked tasks may be waiting */
	uint64		marks;			/* parkings noted so far */
} TypeBucket;

typedef struct LimiterShared
{
	LWLock	   *lock;
	double		global_rate;	/* as last used; 0 before */
	double		global_tokens;
	TimestampTz global_refilled_at;
} LimiterShared;

static LimiterShared *limiter = NULL;
static HTAB *buckets = NULL;

PG_FUNCTION_INFO_V1(delaysched_tokens_sql);
PG_FUNCTION_INFO_V1(delaysched_take_tokens_sql);
PG_FUNCTION_INFO_V1(delaysched_return_tokens_sql);
PG_FUNCTION_INFO_V1(delaysched_forget_bucket_sql);
PG_FUNCTION_INFO_V1(delaysched_buckets_elsewhere_sql);

Size
delaysched_limiter_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(LimiterShared)),
					hash_estimate_size(delaysched_max_biz_types, sizeof(TypeBucket)));
}

/* Create or attach; called with AddinShmemInitLock held. */
void
delaysched_limiter_shmem_init(void)
{
	bool		found;
	HASHCTL		info;

	limiter = ShmemInitStruct("delaysched limiter", sizeof(LimiterShared), &found);
	if (!found)
	{
		memset(limiter, 0, sizeof(LimiterShared));
		limiter->lock = delaysched_lwlock(DELAYSCHED_LWLOCK_LIMITER);
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(BucketKey);
	info.entrysize = sizeof(TypeBucket);
	buckets = ShmemInitHash("delaysched token buckets",
							delaysched_max_biz_types, delaysched_max_biz_types,
							&info, HASH_ELEM | HASH_BLOBS);
}

/* The key of type biz of the current database. */
static void
make_key(BucketKey *key, const char *biz)
{
	memset(key, 0, sizeof(BucketKey));
	key->database = MyDatabaseId;
	strlcpy(key->name, biz, NAMEDATALEN);
}

/*
 * A hint of database dboid was lost: its drain must look at every type.
 * Lock held exclusively.
 */
static void
hint_lost(Oid dboid)
{
	int			index = delaysched_find_database(dboid);

	if (index >= 0)
		delaysched_database_area(index)->probe_all = true;
}

static void
refill(double *tokens, TimestampTz *refilled_at, double rate, double burst, TimestampTz now)
{
	if (now > *refilled_at)
	{
		*tokens = Min(burst, *tokens + (double) (now - *refilled_at) / USECS_PER_SEC * rate);
		*refilled_at = now;
	}
	*tokens = Min(*tokens, burst);
}

/* When a bucket holding "tokens" will hold one whole token. */
static TimestampTz
next_token_at(double tokens, double rate, TimestampTz now)
{
	if (tokens >= 1.0)
		return now;
	return now + (TimestampTz) ceil((1.0 - tokens) / rate * USECS_PER_SEC);
}

/*
 * The entry of a type, made if missing.  When the table is full, a hint
 * that holds no bucket makes way (and the drain probes every type until it
 * has seen them all again); NULL if every entry holds a bucket.  Lock held
 * exclusively.
 */
static TypeBucket *
find_or_make(const char *biz)
{
	TypeBucket *entry;
	bool		found;
	BucketKey	key;

	make_key(&key, biz);
	entry = hash_search(buckets, &key, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;

	if (hash_get_num_entries(buckets) >= delaysched_max_biz_types)
	{
		HASH_SEQ_STATUS scan;
		TypeBucket *victim = NULL;

		hash_seq_init(&scan, buckets);
		while ((entry = hash_seq_search(&scan)) != NULL)
			if (entry->rate == 0)
			{
				victim = entry;
				hash_seq_term(&scan);
				break;
			}
		if (victim == NULL)
			return NULL;
		if (victim->backlog)
			hint_lost(victim->key.database);
		hash_search(buckets, &victim->key, HASH_REMOVE, NULL);
	}

	entry = hash_search(buckets, &key, HASH_ENTER, &found);
	if (!found)
	{
		entry->rate = 0;
		entry->burst = 0;
		entry->tokens = 0;
		entry->refilled_at = 0;
		entry->backlog = false;
		entry->marks = 0;
	}
	return entry;
}

/* delaysched_take_tokens with the lock held exclusively. */
static int
take_tokens_locked(const char *biz, double rate, int burst, int want,
				   TimestampTz now, TimestampTz *next_token)
{
	TypeBucket *entry;
	int			taken;

	Assert(rate > 0 && burst >= 1);
	entry = find_or_make(biz);
	if (entry == NULL)
	{
		*next_token = DT_NOEND;
		return -1;
	}
	if (entry->rate == 0)
	{
		/* A new bucket starts full. */
		entry->tokens = burst;
		entry->refilled_at = now;
	}
	entry->rate = rate;
	entry->burst = burst;
	refill(&entry->tokens, &entry->refilled_at, rate, burst, now);
	taken = (int) Min((double) want, floor(entry->tokens));
	taken = Max(taken, 0);
	entry->tokens -= taken;
	*next_token = next_token_at(entry->tokens, rate, now);
	return taken;
}

int
delaysched_take_tokens(const char *biz, double rate, int burst, int want,
					   TimestampTz now, TimestampTz *next_token)
{
	int			taken;

	LWLockAcquire(limiter->lock, LW_EXCLUSIVE);
	taken = take_tokens_locked(biz, rate, burst, want, now, next_token);
	LWLockRelease(limiter->lock);
	return taken;
}

void
delaysched_return_tokens(const char *biz, int n)
{
	TypeBucket *entry;

	BucketKey	key;

	if (n <= 0)
		return;
	make_key(&key, biz);
	LWLockAcquire(limiter->lock, LW_EXCLUSIVE);
	entry = hash_search(buckets, &key, HASH_FIND, NULL);
	if (entry != NULL && entry->rate > 0)
		entry->tokens = Min((double) entry->burst, entry->tokens + n);
	LWLockRelease(limiter->lock);
}

/*
 * The global bucket holds a tenth of a second of its rate (at least one
 * token), so that a burst after a quiet spell stays a small one.
 */
static double
global_burst(double rate)
{
	return Max(1.0, rate / 10.0);
}

/*
 * How many databases' drains wanted tokens of the global cap in the last
 * second, this one included.  Lock held.
 */
static int
databases_wanting(TimestampTz now)
{
	int			n = 0;

	for (int d = 0; d < delaysched_cluster->max_databases; d++)
	{
		if (!OidIsValid(pg_atomic_read_u32(&delaysched_cluster->databases[d].dboid)))
			continue;
		if (delaysched_database_area(d)->global_wanted_at > now - USECS_PER_SEC ||
			d == delaysched_database_index)
			n++;
	}
	return Max(n, 1);
}

/*
 * Take up to want tokens of the global cap for the current database's
 * drain.  The cap protects the one server, so its bucket is the cluster's.
 * While several databases' drains want tokens, each database also has a
 * bucket of its own share, filled at the cap divided by their number (and
 * holding as much of the burst), and takes no more than both hold: so none
 * starves the others, as the drain shares a database's tokens out between
 * its types, and one alone has the whole cap.  The lock held exclusively.
 */
static int
take_global_tokens_locked(double rate, int want, TimestampTz now, TimestampTz *next_token)
{
	int			taken;
	int			sharing;
	double		share_rate;
	double		share_burst;
	DelayschedShared *mine = delaysched_shared;

	if (limiter->global_rate == 0)
	{
		limiter->global_tokens = global_burst(rate);
		limiter->global_refilled_at = now;
	}
	limiter->global_rate = rate;
	refill(&limiter->global_tokens, &limiter->global_refilled_at, rate, global_burst(rate), now);

	sharing = databases_wanting(now);
	share_rate = rate / sharing;
	share_burst = Max(1.0, global_burst(rate) / sharing);
	if (mine->global_share_at == 0)
	{
		mine->global_share = share_burst;
		mine->global_share_at = now;
	}
	refill(&mine->global_share, &mine->global_share_at, share_rate, share_burst, now);
	mine->global_wanted_at = now;

	taken = (int) Min((double) want, floor(Min(mine->global_share, limiter->global_tokens)));
	taken = Max(taken, 0);
	limiter->global_tokens -= taken;
	mine->global_share -= taken;
	*next_token = Max(next_token_at(limiter->global_tokens, rate, now),
					  next_token_at(mine->global_share, share_rate, now));
	return taken;
}

/*
 * The drain's tokens, all in one hold of the lock: each type's from its own
 * bucket (types[i].want, for the rate-limited ones), then up to
 * Min(batch, what they got) from the global cap's when global_rate > 0.
 * The time the buckets are refilled to is read with the lock held, and
 * returned: it is the time the drain records its deliveries at.  So the
 * deliveries of every drain, in every database, are stamped in the order
 * their tokens were taken, and the busiest window of delivered_at never
 * holds more than a bucket's burst and rate allow (a time read before the
 * lock could be passed by another drain's, and its deliveries stamped
 * earlier than tokens it took after).
 */
TimestampTz
delaysched_take_drain_tokens(DrainTokens *types, int ntypes, double global_rate, int batch,
							 int *global_taken, TimestampTz *global_next)
{
	TimestampTz now;
	int			wanted = 0;

	LWLockAcquire(limiter->lock, LW_EXCLUSIVE);
	now = GetCurrentTimestamp();
	for (int i = 0; i < ntypes; i++)
	{
		DrainTokens *t = &types[i];

		t->taken = t->want;
		t->next_token = DT_NOEND;
		if (t->rate > 0 && t->want > 0)
			t->taken = take_tokens_locked(t->biz, t->rate, t->burst, t->want, now, &t->next_token);
		wanted = Min(batch, wanted + Max(t->taken, 0));
	}
	*global_taken = 0;
	*global_next = DT_NOEND;
	if (global_rate > 0 && ntypes > 0)
		*global_taken = take_global_tokens_locked(global_rate, wanted, now, global_next);
	LWLockRelease(limiter->lock);
	return now;
}

void
delaysched_return_global_tokens(int n)
{
	if (n <= 0)
		return;
	LWLockAcquire(limiter->lock, LW_EXCLUSIVE);
	if (limiter->global_rate > 0)
	{
		limiter->global_tokens = Min(global_burst(limiter->global_rate),
									 limiter->global_tokens + n);
		delaysched_shared->global_share += n;
	}
	LWLockRelease(limiter->lock);
}

/*
 * At commit (from wake.c's callback): turn the types the transaction
 * noted as parked (a List of names) into hints.  True if a type was not
 * hinted before.
 */
bool
delaysched_publish_hints(List *types)
{
	ListCell   *lc;
	bool		new_hint = false;

	if (types == NIL)
		return false;
	LWLockAcquire(limiter->lock, LW_EXCLUSIVE);
	foreach(lc, types)
	{
		TypeBucket *entry = find_or_make((const char *) lfirst(lc));

		if (entry == NULL)
		{
			hint_lost(MyDatabaseId);
			new_hint = true;
		}
		else
		{
			new_hint |= !entry->backlog;
			entry->backlog = true;
			entry->marks++;
		}
	}
	LWLockRelease(limiter->lock);
	return new_hint;
}

/*
 * The hinted types, palloc'd, and whether the drain should look at every
 * type instead (a hint was lost, or the periodic backstop is due; the
 * flag is cleared as it is handed out).
 *
 * The array is allocated before the lock is taken exclusive (nothing is
 * allocated under it: see Locks in base/shmem.h), as large as the table
 * was under a shared hold just before; should the table have grown by
 * the time the exclusive lock is held, the lock is let go and the array
 * made as large as the table then is.
 */
BacklogHint *
delaysched_backlog_hints(int *count, bool *probe_all, TimestampTz now)
{
	BacklogHint *hints = NULL;
	long		room = 0;
	HASH_SEQ_STATUS scan;
	TypeBucket *entry;
	int			n = 0;

	LWLockAcquire(limiter->lock, LW_SHARED);
	room = Max(1, hash_get_num_entries(buckets));
	LWLockRelease(limiter->lock);
	for (;;)
	{
		hints = palloc(sizeof(BacklogHint) * room);
		LWLockAcquire(limiter->lock, LW_EXCLUSIVE);
		if (hash_get_num_entries(buckets) <= room)
			break;
		room = hash_get_num_entries(buckets);
		LWLockRelease(limiter->lock);
		pfree(hints);
	}
	hash_seq_init(&scan, buckets);
	while ((entry = hash_seq_search(&scan)) != NULL)
		if (entry->backlog && entry->key.database == MyDatabaseId)
		{
			memcpy(hints[n].name, entry->key.name, NAMEDATALEN);
			hints[n].marks = entry->marks;
			n++;
		}
	*probe_all = delaysched_shared->probe_all ||
		now - delaysched_shared->last_full_probe >= (TimestampTz) FULL_PROBE_EVERY_MS * 1000 ||
		now < delaysched_shared->last_full_probe;
	if (*probe_all)
	{
		delaysched_shared->probe_all = false;
		delaysched_shared->last_full_probe = now;
	}
	LWLockRelease(limiter->lock);
	*count = n;
	return hints;
}

/*
 * The drain found biz's backlog empty: clear its hint, unless tasks were
 * parked since it read the hint's marks.  A hint that holds no bucket goes.
 */
void
delaysched_backlog_drained(const char *biz, uint64 marks)
{
	TypeBucket *entry;
	BucketKey	key;

	make_key(&key, biz);
	LWLockAcquire(limiter->lock, LW_EXCLUSIVE);
	entry = hash_search(buckets, &key, HASH_FIND, NULL);
	if (entry != NULL && entry->marks == marks)
	{
		entry->backlog = false;
		if (entry->rate == 0)
			hash_search(buckets, &key, HASH_REMOVE, NULL);
	}
	LWLockRelease(limiter->lock);
}

/*
 * sched._tokens(biz_type text, rate float8, burst int) RETURNS float8
 *
 * The tokens a type's bucket holds now (for sched.biz_stats): what a
 * delivery could take at once.  A bucket not used since the server started
 * is full.  NULL for a type the session's role may not read (any role may
 * call it: see base/caller.c).
 */
Datum
delaysched_tokens_sql(PG_FUNCTION_ARGS)
{
	char	   *biz = text_to_cstring(PG_GETARG_TEXT_PP(0));
	double		rate = PG_GETARG_FLOAT8(1);
	int			burst = PG_GETARG_INT32(2);
	double		tokens = burst;
	TypeBucket *entry;
	BucketKey	key;

	if (!(rate > 0) || burst < 1 ||
		!delaysched_may_read(delaysched_readable_types(fcinfo), biz))
		PG_RETURN_NULL();
	make_key(&key, biz);
	LWLockAcquire(limiter->lock, LW_SHARED);
	entry = hash_search(buckets, &key, HASH_FIND, NULL);
	if (entry != NULL && entry->rate > 0)
	{
		TimestampTz at = entry->refilled_at;

		tokens = entry->tokens;
		refill(&tokens, &at, rate, burst, GetCurrentTimestamp());
	}
	LWLockRelease(limiter->lock);
	PG_RETURN_FLOAT8(tokens);
}

/*
 * sched._take_tokens(biz_type text, rate float8, burst int, want int) RETURNS int
 *
 * For sched.claim on a rate-limited pull type: take up to want tokens.
 */
Datum
delaysched_take_tokens_sql(PG_FUNCTION_ARGS)
{
	char	   *biz = text_to_cstring(PG_GETARG_TEXT_PP(0));
	double		rate = PG_GETARG_FLOAT8(1);
	int			burst = PG_GETARG_INT32(2);
	int			want = PG_GETARG_INT32(3);
	TimestampTz next_token;
	int			taken;

	if (!(rate > 0) || burst < 1 || want < 0)
		elog(ERROR, "invalid token request for business type \"%s\"", biz);
	taken = delaysched_take_tokens(biz, rate, burst, want, GetCurrentTimestamp(), &next_token);
	if (taken < 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("no room for the token bucket of business type \"%s\"", biz),
				 errhint("Raise delaysched.max_biz_types, or remove the rate limits of types that do not need them.")));
	PG_RETURN_INT32(taken);
}

/*
 * sched._return_tokens(biz_type text, n int) RETURNS void
 *
 * Give back tokens taken and not used.
 */
Datum
delaysched_return_tokens_sql(PG_FUNCTION_ARGS)
{
	char	   *biz = text_to_cstring(PG_GETARG_TEXT_PP(0));

	delaysched_return_tokens(biz, PG_GETARG_INT32(1));
	PG_RETURN_VOID();
}

/*
 * sched._forget_bucket(biz_type text, dropped boolean) RETURNS void
 *
 * The type lost its rate limit, or was dropped: free its bucket, so that
 * the table has room for others.  The hint of a type that lost its limit
 * stays (its parked tasks are still to be drained); a dropped type's goes
 * (drop_biz cancelled its tasks).  If the caller rolls back, the bucket is
 * made again, full, at its next use.
 */
Datum
delaysched_forget_bucket_sql(PG_FUNCTION_ARGS)
{
	char	   *biz = text_to_cstring(PG_GETARG_TEXT_PP(0));
	bool		dropped = PG_GETARG_BOOL(1);
	TypeBucket *entry;
	BucketKey	key;

	make_key(&key, biz);
	LWLockAcquire(limiter->lock, LW_EXCLUSIVE);
	entry = hash_search(buckets, &key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		if (entry->backlog && !dropped)
			entry->rate = 0;
		else
			hash_search(buckets, &key, HASH_REMOVE, NULL);
	}
	LWLockRelease(limiter->lock);
	PG_RETURN_VOID();
}

/*
 * sched._buckets_elsewhere() RETURNS int
 *
 * The token buckets of rate-limited types of the other databases:
 * delaysched.max_biz_types counts the types of every database together, and
 * sched.define_biz adds this database's own from sched.biz.  (A type whose
 * bucket was not used since the server started has none yet, and is not
 * counted here; if the table turns out full when it is, its deliveries wait
 * and the drain says why, see drain.c.)
 */
Datum
delaysched_buckets_elsewhere_sql(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS scan;
	TypeBucket *entry;
	int			n = 0;

	LWLockAcquire(limiter->lock, LW_SHARED);
	hash_seq_init(&scan, buckets);
	while ((entry = hash_seq_search(&scan)) != NULL)
		if (entry->rate > 0 && entry->key.database != MyDatabaseId)
			n++;
	LWLockRelease(limiter->lock);
	PG_RETURN_INT32(n);
}
