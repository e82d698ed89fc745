/*-------------------------------------------------------------------------
 *
 * pace.c
 *		Consumer pace: how many deliveries of a notify or pull type may
 *		await acknowledgement while its consumers fall behind
 *		(delaysched.consumer_pace).
 *
 * A consumer that cannot keep up with what it is sent shows it before any
 * lease runs out: its acknowledgements come later and later after the
 * delivery, as what it was sent queues up in it.  The time from delivery to
 * acknowledgement is its work plus that queueing; the least of it over the
 * last 15 to 30 seconds (two windows of PACE_BASE_WINDOW_US) is taken for the
 * work, as TCP Vegas and BBR take the least round trip for the path's own.
 * An acknowledgement that took more than a quarter of the type's
 * ack_timeout beyond that least time (or a lease that runs out) is "late":
 * the consumer is
 * queueing.  A consumer whose work alone takes much of the lease is not
 * late for that, however many work at once.  A late one holds the type to a
 * cap of deliveries awaiting acknowledgement, adjusted as TCP adjusts a
 * window:
 *
 *	 - the cap starts at half the deliveries awaiting acknowledgement when
 *	   the drain or a claim first sees the hold (what the consumers hold is
 *	   more than they work through without queueing);
 *	 - a late acknowledgement (or an expired lease) of a delivery made
 *	   after the last cut halves it, at least 1; those of deliveries made
 *	   before the cut were sent under the old cap and say nothing new, so
 *	   one slow spell cuts once, not once per late acknowledgement;
 *	 - every "cap" acknowledgements in time raise it by one (one per round
 *	   of deliveries, additive increase);
 *	 - the hold ends when the type has nothing left waiting and its
 *	   consumers hold at most half the cap (the drain or a claim sees it).
 *
 * While a notify type is held, its due tasks are parked and the drain
 * delivers them within the cap, as for max_concurrency (core/drain.c): the
 * ticks' statements ask sched._pace_holds of each row's type, which costs
 * one atomic read while nothing is held anywhere; the other notify types
 * go on being delivered by the ticks.  A pull type's claims take no more than the cap leaves
 * (sched._claim).  max_concurrency stays the hard cap; the pace's is
 * adaptive and, for claims, not serialised (two claims at once may each
 * take the last slot).
 *
 * One entry per (database, type) whose deliveries were acknowledged, in a
 * hash in shared memory of at most delaysched.max_biz_types entries (its
 * delivery and ack_timeout as sched.biz said when the entry was made, its
 * least times, and its hold if it has one); sched.define_biz and
 * sched.drop_biz remove it.  Each acknowledgement is one call from
 * sched._finish's statement (sched._note_ack): a lookup under the shared
 * lock and a few assignments under the entry's spinlock.  A
 * type that finds no room is never held (it is delivered as if its
 * consumers kept up), and the log says so once.
 *
 * Locking: the pace lock (see Locks in base/shmem.h), shared to find an
 * entry, exclusive to make or remove one; an entry's fields under its
 * spinlock, for a few assignments.  held_anywhere (atomic) lets the ticks
 * and the drain skip the table while nothing is held.
 *
 * IDENTIFICATION
 *	  src/core/pace.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/spin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "base/guc.h"
#include "base/shmem.h"
#include "core/core.h"

PG_FUNCTION_INFO_V1(delaysched_note_ack_sql);
PG_FUNCTION_INFO_V1(delaysched_pace_holds_sql);
PG_FUNCTION_INFO_V1(delaysched_note_expired_sql);
PG_FUNCTION_INFO_V1(delaysched_consumer_cap_sql);
PG_FUNCTION_INFO_V1(delaysched_pace_start_sql);
PG_FUNCTION_INFO_V1(delaysched_pace_release_sql);

/* The windows over which the least acknowledgement time is kept. */
#define PACE_BASE_WINDOW_US		(15 * USECS_PER_SEC)

/* A type of a database: the hash key. */
typedef struct PaceKey
{
	Oid			database;
	char		name[NAMEDATALEN];
} PaceKey;

/* One type whose deliveries were acknowledged. */
typedef struct PaceEntry
{
	PaceKey		key;			/* hash key */
	char		delivery;		/* 'n'otify, 'p'ull, or 'o'ther (never held),
								 * as sched.biz said when the entry was made */
	int64		lease_us;		/* its ack_timeout, likewise */
	slock_t		mutex;			/* the fields below */
	bool		held;
	int			cap;			/* while held; 0: not set yet (the drain or a
								 * claim sets it) */
	int			on_time;		/* acknowledgements in time since the cap grew */
	TimestampTz cut_at;			/* when the cap was last set or cut */
	int64		least_us;		/* least acknowledgement time, this window */
	int64		least_before_us;	/* ... and the window before */
	TimestampTz window_at;		/* when this window began */
} PaceEntry;

typedef struct PaceShared
{
	LWLock	   *lock;
	pg_atomic_uint32 held_anywhere; /* entries held */
	pg_atomic_uint32 full_reported; /* the log said the table was full */
} PaceShared;

static PaceShared *pace;
static HTAB *entries;

Size
delaysched_pace_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(PaceShared)),
					hash_estimate_size(delaysched_max_biz_types, sizeof(PaceEntry)));
}

/* Create or attach; called with AddinShmemInitLock held. */
void
delaysched_pace_shmem_init(void)
{
	bool		found;
	HASHCTL		info;

	pace = ShmemInitStruct("delaysched consumer pace lock", sizeof(PaceShared), &found);
	if (!found)
	{
		pace->lock = delaysched_lwlock(DELAYSCHED_LWLOCK_PACE);
		pg_atomic_init_u32(&pace->held_anywhere, 0);
		pg_atomic_init_u32(&pace->full_reported, 0);
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(PaceKey);
	info.entrysize = sizeof(PaceEntry);
	entries = ShmemInitHash("delaysched consumer pace",
							delaysched_max_biz_types, delaysched_max_biz_types,
							&info, HASH_ELEM | HASH_BLOBS);
}

/* Seconds as microseconds, within int64 (a clock step may make them odd). */
static int64
seconds_to_us(double seconds)
{
	if (!(seconds > 0))
		return 0;
	if (seconds > (double) (PG_INT64_MAX / 2) / USECS_PER_SEC)
		return PG_INT64_MAX / 2;
	return (int64) (seconds * USECS_PER_SEC);
}

static void
make_key(PaceKey *key, const char *biz)
{
	memset(key, 0, sizeof(PaceKey));
	key->database = MyDatabaseId;
	strlcpy(key->name, biz, NAMEDATALEN);
}

/* Nothing is held while the setting is off, or anywhere at all. */
static inline bool
nothing_held(void)
{
	return !delaysched_consumer_pace ||
		pg_atomic_read_u32(&pace->held_anywhere) == 0;
}

/*
 * What sched.biz says of type biz now: its delivery ('n'otify, 'p'ull or
 * 'o'ther) and its ack_timeout; false if there is no such type.  Read when
 * a type's entry is made (sched.define_biz removes the entry, so that a new
 * definition is read again); the caller may read sched.biz (the functions
 * that acknowledge run as the extension's owner).
 */
static bool
read_definition(const char *biz, char *delivery, int64 *lease_us)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(biz)};
	bool		found = false;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT b.delivery, extract(epoch FROM b.ack_timeout)::float8"
							  " FROM sched.biz b WHERE b.name = $1",
							  1, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read business type \"%s\"", biz);
	if (SPI_processed == 1)
	{
		bool		isnull;
		char	   *kind = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		Datum		seconds = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);

		*delivery = strcmp(kind, "notify") == 0 ? 'n' : strcmp(kind, "pull") == 0 ? 'p' : 'o';
		*lease_us = isnull ? 0 : seconds_to_us(DatumGetFloat8(seconds));
		found = true;
	}
	SPI_finish();
	return found;
}

/*
 * The table is full: remove an entry that holds nothing, one of a type
 * whose consumers are not followed (http, sql) first, else the first not
 * held (its least times are learnt again).  Lock held exclusively, so no
 * spinlock is needed to read the entries.
 */
static void
make_room(void)
{
	HASH_SEQ_STATUS scan;
	PaceEntry  *entry;
	PaceEntry  *victim = NULL;

	hash_seq_init(&scan, entries);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		if (entry->delivery == 'o')
		{
			victim = entry;
			hash_seq_term(&scan);
			break;
		}
		if (victim == NULL && !entry->held)
			victim = entry;
	}
	if (victim != NULL)
		hash_search(entries, &victim->key, HASH_REMOVE, NULL);
}

/*
 * The entry of type biz, made if missing (NULL if there is no room, or no
 * such type).  On return the lock is held shared if an entry was found,
 * exclusive if one was made, and not at all on NULL.
 */
static PaceEntry *
find_or_make(const char *biz, TimestampTz now)
{
	PaceKey		key;
	PaceEntry  *entry;
	bool		found;
	char		delivery;
	int64		lease_us;

	make_key(&key, biz);
	LWLockAcquire(pace->lock, LW_SHARED);
	entry = hash_search(entries, &key, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;
	LWLockRelease(pace->lock);
	/* (Read with no lock held: it runs a statement.) */
	if (!read_definition(biz, &delivery, &lease_us))
		return NULL;
	LWLockAcquire(pace->lock, LW_EXCLUSIVE);
	entry = hash_search(entries, &key, HASH_FIND, NULL);
	if (entry == NULL && hash_get_num_entries(entries) >= delaysched_max_biz_types)
		make_room();
	entry = hash_search(entries, &key, HASH_ENTER_NULL, &found);
	if (entry == NULL || (!found && hash_get_num_entries(entries) > delaysched_max_biz_types))
	{
		if (entry != NULL)
			hash_search(entries, &key, HASH_REMOVE, NULL);
		LWLockRelease(pace->lock);
		if (pg_atomic_exchange_u32(&pace->full_reported, 1) == 0)
			ereport(LOG,
					(errmsg("delaysched: no room to follow the consumers of business type \"%s\"", biz),
					 errdetail("Its tasks are delivered as if its consumers kept up; every type in the table is held."),
					 errhint("Raise delaysched.max_biz_types.")));
		return NULL;
	}
	if (!found)
	{
		entry->delivery = delivery;
		entry->lease_us = lease_us;
		SpinLockInit(&entry->mutex);
		entry->held = false;
		entry->cap = 0;
		entry->on_time = 0;
		entry->cut_at = now;
		entry->least_us = PG_INT64_MAX;
		entry->least_before_us = PG_INT64_MAX;
		entry->window_at = now;
	}
	return entry;
}

/*
 * One acknowledgement of a delivery of type biz made at delivered_at, or
 * (expired) a lease of it that ran out.  Holds the type, or cuts or raises
 * its cap.  Returns whether the type is one whose consumers are followed
 * (notify or pull).
 */
bool
delaysched_note_ack(const char *biz, TimestampTz delivered_at, bool expired)
{
	PaceEntry  *entry;
	TimestampTz now;
	int64		took_us;
	bool		late;
	bool		now_held = false;

	if (!delaysched_consumer_pace)
		return false;
	now = GetCurrentTimestamp();
	entry = find_or_make(biz, now);
	if (entry == NULL)
		return false;
	if (entry->delivery == 'o')
	{
		LWLockRelease(pace->lock);
		return false;
	}
	took_us = Max(now - delivered_at, 0);

	SpinLockAcquire(&entry->mutex);
	if (now - entry->window_at >= PACE_BASE_WINDOW_US)
	{
		entry->least_before_us = entry->least_us;
		entry->least_us = PG_INT64_MAX;
		entry->window_at = now;
	}
	if (!expired)
		entry->least_us = Min(entry->least_us, took_us);
	late = expired ||
		took_us > Min(entry->least_us, entry->least_before_us) + entry->lease_us / 4;
	if (late && !entry->held)
	{
		entry->held = true;
		entry->cap = 0;
		entry->on_time = 0;
		entry->cut_at = now;
		now_held = true;
	}
	else if (late && entry->cap > 0 && delivered_at > entry->cut_at)
	{
		/* Multiplicative decrease, once per round of deliveries. */
		entry->cap = Max(1, entry->cap / 2);
		entry->on_time = 0;
		entry->cut_at = now;
	}
	else if (!late && entry->held && entry->cap > 0 && ++entry->on_time >= entry->cap)
	{
		/* Additive increase: one more for every cap acknowledgements in time. */
		entry->on_time = 0;
		if (entry->cap < PG_INT32_MAX / 2)
			entry->cap++;
	}
	SpinLockRelease(&entry->mutex);
	if (now_held)
		pg_atomic_fetch_add_u32(&pace->held_anywhere, 1);
	LWLockRelease(pace->lock);
	return true;
}

/*
 * The cap a held type's consumers are held to: -1 if the type is not held,
 * 0 if it is and the cap is still to be set (delaysched_pace_start).
 */
int
delaysched_pace_cap(const char *biz)
{
	PaceKey		key;
	PaceEntry  *entry;
	int			cap = -1;

	if (nothing_held())
		return -1;
	make_key(&key, biz);
	LWLockAcquire(pace->lock, LW_SHARED);
	entry = hash_search(entries, &key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		SpinLockAcquire(&entry->mutex);
		if (entry->held)
			cap = entry->cap;
		SpinLockRelease(&entry->mutex);
	}
	LWLockRelease(pace->lock);
	return cap;
}

/*
 * Set a held type's first cap from the deliveries awaiting acknowledgement
 * now (half of them, at least 1), unless it was set meanwhile; returns the
 * cap, -1 if the type is no longer held.
 */
int
delaysched_pace_start(const char *biz, int in_flight)
{
	PaceKey		key;
	PaceEntry  *entry;
	int			cap = -1;

	make_key(&key, biz);
	LWLockAcquire(pace->lock, LW_SHARED);
	entry = hash_search(entries, &key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		TimestampTz now = GetCurrentTimestamp();

		SpinLockAcquire(&entry->mutex);
		if (entry->held && entry->cap == 0)
		{
			entry->cap = Max(1, in_flight / 2);
			entry->on_time = 0;
			entry->cut_at = now;
		}
		if (entry->held)
			cap = entry->cap;
		SpinLockRelease(&entry->mutex);
	}
	LWLockRelease(pace->lock);
	return cap;
}

/*
 * The types whose entries go when the current transaction commits (it
 * defined or dropped them), and the callback that removes them: an
 * acknowledgement between sched.define_biz's removal and its commit would
 * make the entry again from the definition still committed.
 */
static List *forget_at_commit = NIL;
static bool forget_callback_registered = false;

static void
forget_xact_callback(XactEvent event, void *arg)
{
	List	   *names = forget_at_commit;
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			forget_at_commit = NIL;
			foreach(lc, names)
				delaysched_pace_release((const char *) lfirst(lc), true);
			list_free_deep(names);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			forget_at_commit = NIL;
			list_free_deep(names);
			break;
		default:
			break;
	}
}

static void
forget_when_committed(const char *biz)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	forget_at_commit = lappend(forget_at_commit, pstrdup(biz));
	MemoryContextSwitchTo(old);
	if (!forget_callback_registered)
	{
		RegisterXactCallback(forget_xact_callback, NULL);
		forget_callback_registered = true;
	}
}

/*
 * The type's consumers caught up: it is no longer held.  With forget (the
 * type was dropped or defined again), its entry goes too.
 */
void
delaysched_pace_release(const char *biz, bool forget)
{
	PaceKey		key;
	PaceEntry  *entry;
	bool		was_held = false;

	make_key(&key, biz);
	LWLockAcquire(pace->lock, forget ? LW_EXCLUSIVE : LW_SHARED);
	entry = hash_search(entries, &key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		SpinLockAcquire(&entry->mutex);
		was_held = entry->held;
		entry->held = false;
		entry->cap = 0;
		SpinLockRelease(&entry->mutex);
		if (forget)
			hash_search(entries, &key, HASH_REMOVE, NULL);
	}
	if (was_held)
		pg_atomic_fetch_sub_u32(&pace->held_anywhere, 1);
	LWLockRelease(pace->lock);
}

/* Is this entry a held notify type of this database?  Lock held. */
static bool
held_notify_here(PaceEntry *entry)
{
	bool		held;

	if (entry->key.database != MyDatabaseId || entry->delivery != 'n')
		return false;
	SpinLockAcquire(&entry->mutex);
	held = entry->held;
	SpinLockRelease(&entry->mutex);
	return held;
}

/*
 * The held notify types of this database (palloc'd names, *count of them),
 * for the drain, which looks at them whether or not they were hinted.
 */
char	  **
delaysched_paced_notify_types(int *count)
{
	HASH_SEQ_STATUS scan;
	PaceEntry  *entry;
	char	  **names;
	int			n = 0;

	*count = 0;
	if (nothing_held())
		return NULL;
	LWLockAcquire(pace->lock, LW_SHARED);
	names = palloc(sizeof(char *) * Max(1, hash_get_num_entries(entries)));
	hash_seq_init(&scan, entries);
	while ((entry = hash_seq_search(&scan)) != NULL)
		if (held_notify_here(entry))
			names[n++] = pstrdup(entry->key.name);
	LWLockRelease(pace->lock);
	*count = n;
	return names;
}

/*
 * sched._note_ack(biz_type text, delivered_at timestamptz) RETURNS boolean
 *
 * From sched._finish, for each task acknowledged (done from delivered);
 * true if its type's consumers are followed.
 */
Datum
delaysched_note_ack_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(delaysched_note_ack(text_to_cstring(PG_GETARG_TEXT_PP(0)),
									   PG_GETARG_TIMESTAMPTZ(1), false));
}

/*
 * sched._note_expired(biz_type text, delivered_at timestamptz) RETURNS void
 *
 * From sched._expire_leases: a lease of a notify or pull delivery ran out.
 */
Datum
delaysched_note_expired_sql(PG_FUNCTION_ARGS)
{
	delaysched_note_ack(text_to_cstring(PG_GETARG_TEXT_PP(0)), PG_GETARG_TIMESTAMPTZ(1), true);
	PG_RETURN_VOID();
}

/*
 * sched._pace_holds(biz_type text) RETURNS boolean
 *
 * Whether the type is held to its consumers' pace: the ticks' statements
 * park a held notify type's tasks for the drain (core/tick_plans.c).  Asked
 * for each row they deliver, so nothing is looked up (or allocated) while
 * nothing is held anywhere.
 */
Datum
delaysched_pace_holds_sql(PG_FUNCTION_ARGS)
{
	char	   *biz;
	bool		held;

	if (nothing_held())
		PG_RETURN_BOOL(false);
	biz = text_to_cstring(PG_GETARG_TEXT_PP(0));
	held = delaysched_pace_cap(biz) >= 0;
	pfree(biz);
	PG_RETURN_BOOL(held);
}

/*
 * sched._consumer_cap(biz_type text) RETURNS int
 *
 * The cap a type is held to by its consumers' pace: NULL if it is not held
 * (or the caller may not read the type), 0 while the cap is being set.
 * sched.biz_stats.consumer_cap, and sched._claim.
 */
Datum
delaysched_consumer_cap_sql(PG_FUNCTION_ARGS)
{
	char	   *biz = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int			cap;

	if (nothing_held() ||
		!delaysched_may_read(delaysched_readable_types(fcinfo), biz))
		PG_RETURN_NULL();
	cap = delaysched_pace_cap(biz);
	if (cap < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32(cap);
}

/* sched._pace_start(biz_type text, in_flight int) RETURNS int (NULL: not held) */
Datum
delaysched_pace_start_sql(PG_FUNCTION_ARGS)
{
	int			cap = delaysched_pace_start(text_to_cstring(PG_GETARG_TEXT_PP(0)),
										   PG_GETARG_INT32(1));

	if (cap < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32(cap);
}

/*
 * sched._pace_release(biz_type text, forget boolean) RETURNS void
 *
 * With forget (sched.define_biz, sched.drop_biz), the entry goes now and
 * again when the transaction commits.
 */
Datum
delaysched_pace_release_sql(PG_FUNCTION_ARGS)
{
	char	   *biz = text_to_cstring(PG_GETARG_TEXT_PP(0));
	bool		forget = PG_GETARG_BOOL(1);

	delaysched_pace_release(biz, forget);
	if (forget)
		forget_when_committed(biz);
	PG_RETURN_VOID();
}
