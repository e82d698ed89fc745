/*-------------------------------------------------------------------------
 *
 * stats.c
 *		The numbers of every database and business type, in shared memory
 *		(see stats.h for what they are and where they come from).
 *
 * One hash table, keyed by (database, type).  Each database with numbers
 * also has an entry of its own, with the empty name, that holds its flags:
 * "ready" (its gauges were counted; see stats_recount.c), "stale" (they
 * must be counted again), "full" (a type found no room, so its gauges
 * are missing: the database stays not ready) and "fold" (committed
 * numbers of prepared transactions may wait in their table; see
 * stats_prepared.c).  delaysched.max_stats_types bounds the types of every
 * database together; the databases' own entries come on top
 * (delaysched.max_databases of them).
 *
 * Locking: one LWLock, the stats lock; see Locks in base/shmem.h.
 *
 * IDENTIFICATION
 *	  src/stats/stats.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"

#include "base/guc.h"
#include "base/shmem.h"
#include "stats/stats.h"

typedef struct StatsKey
{
	Oid			database;
	char		name[NAMEDATALEN];	/* "" for the database's own entry */
} StatsKey;

typedef struct StatsEntry
{
	StatsKey	key;			/* hash key */
	pg_atomic_uint32 kind;		/* STATS_KIND_*, or 0 */
	pg_atomic_uint32 ready;		/* database entry: gauges counted */
	pg_atomic_uint32 stale;		/* database entry: count again */
	pg_atomic_uint32 full;		/* database entry: a type had no room */
	pg_atomic_uint32 fold;		/* database entry: prepared numbers may wait */
	pg_atomic_uint64 v[SS_COUNT];
} StatsEntry;

typedef struct StatsShared
{
	LWLock	   *lock;
	int			ntypes;			/* entries that are types (exclusive lock) */
} StatsShared;

static StatsShared *stats = NULL;
static HTAB *entries = NULL;

const double delaysched_lateness_bounds[] = {STATS_LATENESS_BOUNDS};
const double delaysched_duration_bounds[] = {STATS_DURATION_BOUNDS};
const char *const delaysched_http_class_names[] = {"1xx", "2xx", "3xx", "4xx", "5xx", "none"};
const char *const delaysched_http_outcome_names[] = {"done", "retry", "dead", "requeued", "stale"};
const char *const delaysched_sql_outcome_names[] = {"done", "retry", "dead", "cancelled", "stale"};

/* The kind of a sched.biz.delivery (0 for NULL, not known). */
char
delaysched_stats_kind_of(const char *delivery)
{
	if (delivery == NULL)
		return 0;
	if (strcmp(delivery, "pull") == 0)
		return STATS_KIND_PULL;
	if (strcmp(delivery, "http") == 0)
		return STATS_KIND_HTTP;
	if (strcmp(delivery, "sql") == 0)
		return STATS_KIND_SQL;
	return STATS_KIND_NOTIFY;
}

/* A kind's name, as sched.biz.delivery says it (0: notify, as counted). */
const char *
delaysched_stats_kind_name(char kind)
{
	return kind == STATS_KIND_PULL ? "pull" : kind == STATS_KIND_HTTP ? "http" :
		kind == STATS_KIND_SQL ? "sql" : "notify";
}

StaticAssertDecl(lengthof(delaysched_lateness_bounds) == STATS_LATENESS_BUCKETS - 1,
				 "lateness buckets are the bounds and +Inf");
StaticAssertDecl(lengthof(delaysched_duration_bounds) == STATS_DURATION_BUCKETS - 1,
				 "duration buckets are the bounds and +Inf");

static long
capacity(void)
{
	return (long) delaysched_max_stats_types + delaysched_max_databases;
}

Size
delaysched_stats_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(StatsShared)),
					hash_estimate_size(capacity(), sizeof(StatsEntry)));
}

/* Create or attach; called with AddinShmemInitLock held. */
void
delaysched_stats_shmem_init(void)
{
	bool		found;
	HASHCTL		info;

	stats = ShmemInitStruct("delaysched stats", sizeof(StatsShared), &found);
	if (!found)
	{
		stats->lock = delaysched_lwlock(DELAYSCHED_LWLOCK_STATS);
		stats->ntypes = 0;
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(StatsKey);
	info.entrysize = sizeof(StatsEntry);
	entries = ShmemInitHash("delaysched stats entries", capacity(), capacity(),
							&info, HASH_ELEM | HASH_BLOBS);
}

/* The bucket of a histogram whose upper bounds are "bounds" (n of them). */
static int
histogram_bucket(const double *bounds, int n, double value)
{
	int			i;

	for (i = 0; i < n; i++)
		if (value <= bounds[i])
			return i;
	return n;					/* +Inf */
}

int
delaysched_stats_lateness_bucket(double seconds)
{
	return histogram_bucket(delaysched_lateness_bounds, STATS_LATENESS_BUCKETS - 1, seconds);
}

int
delaysched_stats_duration_bucket(double seconds)
{
	return histogram_bucket(delaysched_duration_bounds, STATS_DURATION_BUCKETS - 1, seconds);
}

static void
make_key(StatsKey *key, Oid dboid, const char *name)
{
	memset(key, 0, sizeof(StatsKey));
	key->database = dboid;
	strlcpy(key->name, name, NAMEDATALEN);
}

static StatsEntry *
find(Oid dboid, const char *name)
{
	StatsKey	key;

	make_key(&key, dboid, name);
	return hash_search(entries, &key, HASH_FIND, NULL);
}

/*
 * The entry of (dboid, name), made if missing; NULL if there is no room (a
 * type beyond delaysched.max_stats_types, or a full table).  Lock held
 * exclusive.
 */
static StatsEntry *
find_or_make(Oid dboid, const char *name)
{
	StatsKey	key;
	StatsEntry *entry;
	bool		found;
	bool		is_type = name[0] != '\0';

	make_key(&key, dboid, name);
	entry = hash_search(entries, &key, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;
	if (is_type && stats->ntypes >= delaysched_max_stats_types)
		return NULL;
	entry = hash_search(entries, &key, HASH_ENTER_NULL, &found);
	if (entry == NULL)
		return NULL;
	pg_atomic_init_u32(&entry->kind, 0);
	pg_atomic_init_u32(&entry->ready, 0);
	pg_atomic_init_u32(&entry->stale, 0);
	pg_atomic_init_u32(&entry->full, 0);
	/* A database's first look after a server start: numbers left behind? */
	pg_atomic_init_u32(&entry->fold, is_type ? 0 : 1);
	for (int i = 0; i < SS_COUNT; i++)
		pg_atomic_init_u64(&entry->v[i], 0);
	if (is_type)
		stats->ntypes++;
	return entry;
}

/* A type of dboid found no room: its gauges are missing.  Lock held exclusive. */
static void
note_full(Oid dboid)
{
	StatsEntry *db = find_or_make(dboid, "");

	if (db != NULL)
	{
		pg_atomic_write_u32(&db->full, 1);
		pg_atomic_write_u32(&db->ready, 0);
	}
}

/* Add a tally's delta to an entry, resolving what depends on the kind. */
static void
add_to(StatsEntry *entry, char kind, const int64 *delta)
{
	if (kind != 0)
		pg_atomic_write_u32(&entry->kind, (uint32) kind);
	else
		kind = (char) pg_atomic_read_u32(&entry->kind);

	for (int i = 0; i < SS_COUNT; i++)
	{
		int			slot = i;

		if (delta[i] == 0)
			continue;
		if (i == SS_TALLY_DELIVERED)
			slot = kind == STATS_KIND_NOTIFY ? SS_DELIVERED_NOTIFY :
				kind == STATS_KIND_PULL ? SS_DELIVERED_PULL :
				kind == STATS_KIND_HTTP ? SS_DELIVERED_HTTP :
				kind == STATS_KIND_SQL ? SS_DELIVERED_SQL : SS_DELIVERED_UNKNOWN;
		else if (i == SS_TALLY_ENTERED_READY)
		{
			/* A notify task only goes to 'r' when it is set aside. */
			if (kind != STATS_KIND_NOTIFY)
				continue;
			slot = SS_PARKED;
		}
		pg_atomic_fetch_add_u64(&entry->v[slot], delta[i]);
	}
}

/*
 * Add one committed transaction's tally of type biz_type in database dboid
 * ("kind" if the transaction defined the type's delivery kind, else 0).
 * At commit: must not fail.
 */
void
delaysched_stats_add(Oid dboid, const char *biz_type, char kind, const int64 *delta)
{
	StatsEntry *entry;

	LWLockAcquire(stats->lock, LW_SHARED);
	entry = find(dboid, biz_type);
	if (entry != NULL)
	{
		add_to(entry, kind, delta);
		LWLockRelease(stats->lock);
		return;
	}
	LWLockRelease(stats->lock);

	LWLockAcquire(stats->lock, LW_EXCLUSIVE);
	entry = find_or_make(dboid, biz_type);
	if (entry != NULL)
		add_to(entry, kind, delta);
	else
		note_full(dboid);
	LWLockRelease(stats->lock);
}

/* Copies of the numbers of every type of database dboid (a List of StatsCopy). */
List *
delaysched_stats_copy(Oid dboid)
{
	HASH_SEQ_STATUS scan;
	StatsEntry *entry;
	List	   *copies = NIL;

	LWLockAcquire(stats->lock, LW_SHARED);
	hash_seq_init(&scan, entries);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		StatsCopy  *copy;

		if (entry->key.database != dboid || entry->key.name[0] == '\0')
			continue;
		copy = palloc(sizeof(StatsCopy));
		strlcpy(copy->biz_type, entry->key.name, NAMEDATALEN);
		copy->kind = (char) pg_atomic_read_u32(&entry->kind);
		for (int i = 0; i < SS_COUNT; i++)
			copy->v[i] = (int64) pg_atomic_read_u64(&entry->v[i]);
		copies = lappend(copies, copy);
	}
	LWLockRelease(stats->lock);
	return copies;
}

/* Are the gauges of a database's entry (NULL: none) counted, and kept since? */
static bool
counted_and_kept(StatsEntry *db)
{
	return db != NULL && pg_atomic_read_u32(&db->ready) != 0 && pg_atomic_read_u32(&db->stale) == 0;
}

/* Were the gauges of database dboid counted, and kept since? */
bool
delaysched_stats_ready(Oid dboid)
{
	bool		ready;

	LWLockAcquire(stats->lock, LW_SHARED);
	ready = counted_and_kept(find(dboid, ""));
	LWLockRelease(stats->lock);
	return ready;
}

/*
 * Set a flag of database dboid's entry (made if need be): the one at
 * flag_offset in StatsEntry, stale or fold.  Worker 0 claims it.
 */
static void
mark_database(Oid dboid, size_t flag_offset)
{
	StatsEntry *db;

	LWLockAcquire(stats->lock, LW_EXCLUSIVE);
	db = find_or_make(dboid, "");
	if (db != NULL)
		pg_atomic_write_u32((pg_atomic_uint32 *) ((char *) db + flag_offset), 1);
	LWLockRelease(stats->lock);
}

/* The gauges of database dboid must be counted again (stats_recount.c). */
void
delaysched_stats_mark_stale(Oid dboid)
{
	mark_database(dboid, offsetof(StatsEntry, stale));
}

/*
 * Should database dboid's gauges be counted now: never counted, or marked
 * stale since?  If so, they are not ready from now until the count is
 * installed, and the mark is cleared: a mark made from now on asks for
 * another count.  (A database whose types found no room at its last count waits
 * for a mark: counting again would find no more room.)
 */
bool
delaysched_stats_claim_count(Oid dboid)
{
	StatsEntry *db;
	bool		need = false;	/* no room for the database: nothing to do */

	/* The common case, at every turn of worker 0's loop: nothing to do. */
	LWLockAcquire(stats->lock, LW_SHARED);
	db = find(dboid, "");
	if (db != NULL && pg_atomic_read_u32(&db->stale) == 0 &&
		(pg_atomic_read_u32(&db->ready) != 0 || pg_atomic_read_u32(&db->full) != 0))
	{
		LWLockRelease(stats->lock);
		return false;
	}
	LWLockRelease(stats->lock);

	LWLockAcquire(stats->lock, LW_EXCLUSIVE);
	db = find_or_make(dboid, "");
	if (db != NULL)
	{
		need = pg_atomic_read_u32(&db->stale) != 0 ||
			(pg_atomic_read_u32(&db->ready) == 0 && pg_atomic_read_u32(&db->full) == 0);
		if (need)
		{
			/* Not to be read until the count is in (it may wait a while). */
			pg_atomic_write_u32(&db->ready, 0);
			pg_atomic_write_u32(&db->stale, 0);
		}
	}
	LWLockRelease(stats->lock);
	return need;
}

/*
 * A transaction prepared in database dboid has committed (COMMIT
 * PREPARED): its numbers wait in sched._prepared_tally for scanner worker 0
 * to add them (stats_prepared.c).
 */
void
delaysched_stats_mark_fold(Oid dboid)
{
	mark_database(dboid, offsetof(StatsEntry, fold));
}

/*
 * May committed numbers of prepared transactions wait in database dboid
 * (marked since the last look, or never looked since the server started)?
 * If so the mark is cleared: one made from now on asks for another look.
 */
bool
delaysched_stats_claim_fold(Oid dboid)
{
	StatsEntry *db;
	bool		need;

	/* The common case, at every turn of worker 0's loop: nothing to do. */
	LWLockAcquire(stats->lock, LW_SHARED);
	db = find(dboid, "");
	if (db != NULL && pg_atomic_read_u32(&db->fold) == 0)
	{
		LWLockRelease(stats->lock);
		return false;
	}
	LWLockRelease(stats->lock);

	LWLockAcquire(stats->lock, LW_EXCLUSIVE);
	db = find_or_make(dboid, "");
	need = db != NULL && pg_atomic_exchange_u32(&db->fold, 0) != 0;
	LWLockRelease(stats->lock);
	return need;
}

/*
 * The names of a count's types (a List of StatsCopy) in a hash table of
 * this backend's, keyed by the zero-padded name: made before
 * delaysched_stats_install takes the lock, so that under it each entry is
 * looked up once, not compared with every counted name.
 */
static HTAB *
counted_names(List *counts)
{
	HASHCTL		info;
	HTAB	   *names;
	ListCell   *lc;

	memset(&info, 0, sizeof(info));
	info.keysize = NAMEDATALEN;
	info.entrysize = NAMEDATALEN;
	info.hcxt = CurrentMemoryContext;
	names = hash_create("delaysched counted types", Max(list_length(counts), 16), &info,
						HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	foreach(lc, counts)
	{
		char		name[NAMEDATALEN];

		memset(name, 0, sizeof(name));
		strlcpy(name, ((StatsCopy *) lfirst(lc))->biz_type, NAMEDATALEN);
		(void) hash_search(names, name, HASH_ENTER, NULL);
	}
	return names;
}

/*
 * Set the gauges of database dboid from a count ("counts", a List of
 * StatsCopy whose gauge slots and kind are set), taken while no change
 * could commit.  The types of the database that are not in the count
 * (dropped, and with no task left) lose their entries.  The database is
 * ready unless a type found no room.
 */
void
delaysched_stats_install(Oid dboid, List *counts)
{
	HASH_SEQ_STATUS scan;
	StatsEntry *entry;
	StatsEntry *db;
	ListCell   *lc;
	bool		full = false;
	HTAB	   *counted = counted_names(counts);

	LWLockAcquire(stats->lock, LW_EXCLUSIVE);
	hash_seq_init(&scan, entries);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		if (entry->key.database != dboid || entry->key.name[0] == '\0')
			continue;
		/* The key's name is zero-padded, as counted_names' keys are. */
		if (hash_search(counted, entry->key.name, HASH_FIND, NULL) == NULL)
		{
			hash_search(entries, &entry->key, HASH_REMOVE, NULL);
			stats->ntypes--;
		}
	}
	foreach(lc, counts)
	{
		StatsCopy  *count = lfirst(lc);

		entry = find_or_make(dboid, count->biz_type);
		if (entry == NULL)
		{
			full = true;
			continue;
		}
		if (count->kind != 0)
			pg_atomic_write_u32(&entry->kind, (uint32) count->kind);
		for (int i = SS_STATE_PENDING; i <= SS_KEPT_CANCELLED; i++)
			pg_atomic_write_u64(&entry->v[i], (uint64) count->v[i]);
	}
	db = find_or_make(dboid, "");
	if (db != NULL)
	{
		pg_atomic_write_u32(&db->full, full ? 1 : 0);
		pg_atomic_write_u32(&db->ready, full ? 0 : 1);
	}
	LWLockRelease(stats->lock);
	hash_destroy(counted);
}

/* Database dboid is served no more: its numbers go. */
void
delaysched_stats_forget_database(Oid dboid)
{
	HASH_SEQ_STATUS scan;
	StatsEntry *entry;

	LWLockAcquire(stats->lock, LW_EXCLUSIVE);
	hash_seq_init(&scan, entries);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		if (entry->key.database != dboid)
			continue;
		if (entry->key.name[0] != '\0')
			stats->ntypes--;
		hash_search(entries, &entry->key, HASH_REMOVE, NULL);
	}
	LWLockRelease(stats->lock);
}

/* Did a type of database dboid find no room?  (For sched.metrics().) */
bool
delaysched_stats_full(Oid dboid)
{
	StatsEntry *db;
	bool		full = false;

	LWLockAcquire(stats->lock, LW_SHARED);
	db = find(dboid, "");
	if (db != NULL)
		full = pg_atomic_read_u32(&db->full) != 0;
	LWLockRelease(stats->lock);
	return full;
}

/*
 * The gauges of type biz_type of database dboid (gauges[SS_STATE_PENDING
 * .. SS_KEPT_CANCELLED]; zeros for a type with no entry), if the
 * database's gauges are ready; false, and nothing set, if they are not.
 * One lookup by name: for sched._type_counts() and sched._task_status().
 */
bool
delaysched_stats_gauges(Oid dboid, const char *biz_type, int64 *gauges)
{
	StatsEntry *entry;
	bool		ready = false;

	LWLockAcquire(stats->lock, LW_SHARED);
	if (counted_and_kept(find(dboid, "")))
	{
		entry = find(dboid, biz_type);
		for (int i = SS_STATE_PENDING; i <= SS_KEPT_CANCELLED; i++)
			gauges[i] = entry != NULL ? (int64) pg_atomic_read_u64(&entry->v[i]) : 0;
		ready = true;
	}
	LWLockRelease(stats->lock);
	return ready;
}
