/*-------------------------------------------------------------------------
 *
 * stats_tally.c
 *		A transaction's own tally of its numbers, added to shared memory
 *		when it commits (stats.c); the triggers and sched._tally() that
 *		fill it.
 *
 * The tally is a hash table of (business type, subtransaction level) to a
 * StatsSlot array of deltas, kept in this backend.  When a subtransaction
 * commits, its entries join its parent's; when it aborts, they go.  When
 * the top transaction commits, every entry is added to shared memory (at
 * PRE_COMMIT: see tally_xact_callback); when it aborts, they go.  A
 * transaction that is prepared (two-phase commit) adds nothing at PREPARE:
 * its counters go into a table as part of it, to count only if it commits
 * (stats_prepared.c), and its database's gauges are marked stale: they are
 * counted again once it has committed or rolled back (the count waits for
 * its locks; see stats_recount.c).
 *
 * The triggers (sched._stats_trigger(), AFTER ROW, one per table) see
 * every change of a task's state, whichever statement makes it:
 *	 sched.task	  INSERT, DELETE: the gauge of the row's state.
 *				  UPDATE: the gauges of the old and the new state; a lease
 *				  (a new attempt in state 'd') is a delivery, and a first
 *				  one's lateness (delivered_at - run_at) goes in the
 *				  histogram; a move into 'r' is a parking, if the type is a
 *				  notify type (known at commit).  An UPDATE that moves the
 *				  row to another partition is left to the DELETE and INSERT
 *				  triggers PostgreSQL fires for it.
 *	 sched.finished	 INSERT: done (acknowledged), dead or cancelled, and
 *				  the gauge of finished tasks kept; DELETE: that gauge.
 *	 sched.attempt	 INSERT: an HTTP request, its status class, outcome and
 *				  duration.
 *	 sched.biz	  INSERT, UPDATE: the type's delivery kind.
 * and TRUNCATE of sched.task or sched.finished, which fires no row
 * trigger, marks the gauges stale.
 * AFTER, not BEFORE: before a BEFORE UPDATE or DELETE row trigger runs,
 * PostgreSQL locks the row, which writes a WAL record of its own: one more
 * per delivery and per acknowledgement, a sixth of a burst's rate.  An
 * AFTER row trigger runs at the end of the statement on the rows as
 * written (read again by their TIDs).  If the (sub)transaction then
 * aborts, its tally goes with it.
 *
 * IDENTIFICATION
 *	  src/stats/stats_tally.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/tuptable.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "stats/stats.h"

typedef struct TallyKey
{
	char		biz_type[NAMEDATALEN];
	int			level;			/* subtransaction nesting level */
} TallyKey;

typedef struct Tally
{
	TallyKey	key;			/* hash key */
	char		kind;			/* delivery kind the transaction set, or 0 */
	int64		v[SS_COUNT];
} Tally;

static HTAB *tallies = NULL;
static Tally *last_tally = NULL;	/* the last one used, or NULL */

PG_FUNCTION_INFO_V1(delaysched_stats_trigger);
PG_FUNCTION_INFO_V1(delaysched_tally_sql);

static Tally *
tally_for(const char *biz_type, int level)
{
	TallyKey	key;
	Tally	   *tally;
	bool		found;

	if (last_tally != NULL && last_tally->key.level == level &&
		strcmp(last_tally->key.biz_type, biz_type) == 0)
		return last_tally;

	memset(&key, 0, sizeof(key));
	strlcpy(key.biz_type, biz_type, NAMEDATALEN);
	key.level = level;
	tally = hash_search(tallies, &key, HASH_ENTER, &found);
	if (!found)
	{
		tally->kind = 0;
		memset(tally->v, 0, sizeof(tally->v));
	}
	last_tally = tally;
	return tally;
}

/* The tally of type biz_type in the current (sub)transaction, to add to. */
int64 *
delaysched_tally_slots(const char *biz_type)
{
	return tally_for(biz_type, GetCurrentTransactionNestLevel())->v;
}

static void
forget_all(void)
{
	HASH_SEQ_STATUS scan;
	Tally	   *tally;

	last_tally = NULL;
	if (hash_get_num_entries(tallies) == 0)
		return;
	hash_seq_init(&scan, tallies);
	while ((tally = hash_seq_search(&scan)) != NULL)
		hash_search(tallies, &tally->key, HASH_REMOVE, NULL);
}

/*
 * What this transaction has added to shared memory before its commit
 * (copies of its tallies, in TopMemoryContext), kept until the commit is
 * done, to be taken back if the transaction fails after all.
 */
static List *published = NIL;

/* Does a tally change a gauge? */
static bool
changes_gauges(const Tally *tally)
{
	for (int i = SS_STATE_PENDING; i <= SS_KEPT_CANCELLED; i++)
		if (tally->v[i] != 0)
			return true;
	return false;
}

/*
 * Add every tally to shared memory, and forget them; with keep, remember
 * what was added (see "published").  Must not fail but for lack of memory.
 */
static void
publish_all(bool prepared, bool keep)
{
	HASH_SEQ_STATUS scan;
	Tally	   *tally;
	bool		gauges = false;

	if (hash_get_num_entries(tallies) == 0)
		return;
	hash_seq_init(&scan, tallies);
	while ((tally = hash_seq_search(&scan)) != NULL)
	{
		delaysched_stats_add(MyDatabaseId, tally->key.biz_type, tally->kind, tally->v);
		gauges |= changes_gauges(tally);
		if (keep)
		{
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
			Tally	   *copy = palloc(sizeof(Tally));

			memcpy(copy, tally, sizeof(Tally));
			published = lappend(published, copy);
			MemoryContextSwitchTo(old);
		}
	}
	if (prepared && gauges)
		delaysched_stats_mark_stale(MyDatabaseId);
	forget_all();
}

/* The transaction failed after its tallies were added: take them back. */
static void
unpublish_all(void)
{
	ListCell   *lc;

	foreach(lc, published)
	{
		Tally	   *copy = lfirst(lc);
		int64		negated[SS_COUNT];

		for (int i = 0; i < SS_COUNT; i++)
			negated[i] = -copy->v[i];
		delaysched_stats_add(MyDatabaseId, copy->key.biz_type, 0, negated);
	}
	list_free_deep(published);
	published = NIL;
}

/*
 * Saved at PRE_PREPARE (stats_prepared.c), the tallies of a transaction
 * that changed a gauge or a type's delivery kind: counted again once it
 * has ended (marked stale at PREPARE).
 */
static bool saved_changes = false;

/*
 * PRE_PREPARE: the tallies go into sched._prepared_tally, as part of the
 * transaction, and are forgotten here.  If the table is not there yet (an
 * extension not updated), they stay, to be added at PREPARE.
 */
static void
save_all(void)
{
	HASH_SEQ_STATUS scan;
	Tally	   *tally;
	List	   *copies = NIL;
	bool		changes = false;

	if (hash_get_num_entries(tallies) == 0)
		return;
	hash_seq_init(&scan, tallies);
	while ((tally = hash_seq_search(&scan)) != NULL)
	{
		StatsCopy  *copy = palloc(sizeof(StatsCopy));

		strlcpy(copy->biz_type, tally->key.biz_type, NAMEDATALEN);
		copy->kind = tally->kind;
		memcpy(copy->v, tally->v, sizeof(copy->v));
		copies = lappend(copies, copy);
		changes |= tally->kind != 0 || changes_gauges(tally);
	}
	if (delaysched_prepared_save(copies))
	{
		saved_changes = changes;
		forget_all();
	}
	list_free_deep(copies);
}

/*
 * The tallies are added at PRE_COMMIT, while the transaction still holds
 * its locks and before its changes become visible: whoever sees a change
 * committed finds it counted (sched.tasks.status reads the gauges), and
 * the count of stats_recount.c, which waits for those locks, never misses
 * one.  Should the commit fail after that, they are taken back at ABORT.
 * A prepared transaction's are saved at PRE_PREPARE, at the same point.
 */
static void
tally_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			publish_all(false, true);
			break;
		case XACT_EVENT_COMMIT:
			/* (Nothing is tallied after PRE_COMMIT; whatever was, now.) */
			publish_all(false, false);
			list_free_deep(published);
			published = NIL;
			break;
		case XACT_EVENT_PRE_PREPARE:
			save_all();
			break;
		case XACT_EVENT_PREPARE:
			/* (Only if they could not be saved: counted now, as 0.2 did.) */
			publish_all(true, false);
			if (saved_changes)
				delaysched_stats_mark_stale(MyDatabaseId);
			saved_changes = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			unpublish_all();
			forget_all();
			saved_changes = false;
			break;
		default:
			break;
	}
}

/*
 * A subtransaction ends: its tallies (level "level" and deeper) join its
 * parent's if it committed, or go if it aborted.
 */
static void
tally_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int			level;
	HASH_SEQ_STATUS scan;
	Tally	   *tally;
	List	   *ended = NIL;
	ListCell   *lc;

	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	if (tallies == NULL || hash_get_num_entries(tallies) == 0)
		return;

	level = GetCurrentTransactionNestLevel();
	hash_seq_init(&scan, tallies);
	while ((tally = hash_seq_search(&scan)) != NULL)
		if (tally->key.level >= level)
			ended = lappend(ended, tally);
	last_tally = NULL;

	foreach(lc, ended)
	{
		Tally		copy;

		memcpy(&copy, lfirst(lc), sizeof(Tally));
		hash_search(tallies, &copy.key, HASH_REMOVE, NULL);
		if (event == SUBXACT_EVENT_COMMIT_SUB)
		{
			Tally	   *parent = tally_for(copy.key.biz_type, level - 1);

			if (copy.kind != 0)
				parent->kind = copy.kind;
			for (int i = 0; i < SS_COUNT; i++)
				parent->v[i] += copy.v[i];
		}
	}
	list_free(ended);
	last_tally = NULL;
}

/* Called from _PG_init: every backend keeps a tally. */
void
delaysched_tally_init(void)
{
	HASHCTL		info;

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(TallyKey);
	info.entrysize = sizeof(Tally);
	info.hcxt = TopMemoryContext;
	tallies = hash_create("delaysched tally", 16, &info, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	RegisterXactCallback(tally_xact_callback, NULL);
	RegisterSubXactCallback(tally_subxact_callback, NULL);
}

/*
 * The attribute numbers of the columns a trigger reads, by name, found
 * again only when the relation changes (a partition of sched.task need not
 * number its columns as its parent does).
 */
#define TRIGGER_COLUMNS 6

typedef struct ColumnCache
{
	Oid			relid;
	int			attnum[TRIGGER_COLUMNS];
} ColumnCache;

static void
find_columns(Relation rel, ColumnCache *cache, const char *const *names)
{
	if (cache->relid == RelationGetRelid(rel))
		return;
	for (int i = 0; i < TRIGGER_COLUMNS && names[i] != NULL; i++)
	{
		cache->attnum[i] = SPI_fnumber(RelationGetDescr(rel), names[i]);
		if (cache->attnum[i] <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("delaysched: table \"%s\" has no column \"%s\"",
							RelationGetRelationName(rel), names[i])));
	}
	cache->relid = RelationGetRelid(rel);
}

/* A column of a trigger's row (its slot deforms the row once). */
static Datum
column(TupleTableSlot *row, int attnum, bool *isnull)
{
	return slot_getattr(row, attnum, isnull);
}

/* A text column into a NAMEDATALEN buffer ("" if NULL). */
static void
text_column(TupleTableSlot *row, int attnum, char *buf)
{
	bool		isnull;
	Datum		value = column(row, attnum, &isnull);

	if (isnull)
		buf[0] = '\0';
	else
		text_to_cstring_buffer(DatumGetTextPP(value), buf, NAMEDATALEN);
}

/* The gauge of a sched.task state. */
static int
task_state_slot(char state)
{
	switch (state)
	{
		case 'p':
			return SS_STATE_PENDING;
		case 'r':
			return SS_STATE_READY;
		default:
			return SS_STATE_DELIVERED;
	}
}

/* sched.task: the columns the trigger reads. */
enum
{
	TASK_BIZ_TYPE, TASK_STATE, TASK_ATTEMPT, TASK_BUCKET, TASK_RUN_AT, TASK_DELIVERED_AT
};
static const char *const task_columns[TRIGGER_COLUMNS] =
{"biz_type", "state", "attempt", "bucket", "run_at", "delivered_at"};
static ColumnCache task_cache;

static void
count_task(TriggerData *td)
{
	TupleTableSlot *old = td->tg_trigslot;
	TupleTableSlot *new = td->tg_newslot;
	char		biz_type[NAMEDATALEN];
	bool		isnull;
	int64	   *v;

	find_columns(td->tg_relation, &task_cache, task_columns);
#define TASK_COL(row, c) column((row), task_cache.attnum[c], &isnull)

	if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
	{
		text_column(old, task_cache.attnum[TASK_BIZ_TYPE], biz_type);
		v = delaysched_tally_slots(biz_type);
		v[task_state_slot(DatumGetChar(TASK_COL(old, TASK_STATE)))]++;
	}
	else if (TRIGGER_FIRED_BY_DELETE(td->tg_event))
	{
		text_column(old, task_cache.attnum[TASK_BIZ_TYPE], biz_type);
		v = delaysched_tally_slots(biz_type);
		v[task_state_slot(DatumGetChar(TASK_COL(old, TASK_STATE)))]--;
	}
	else
	{
		char		old_state = DatumGetChar(TASK_COL(old, TASK_STATE));
		char		new_state = DatumGetChar(TASK_COL(new, TASK_STATE));
		int32		old_attempt = DatumGetInt32(TASK_COL(old, TASK_ATTEMPT));
		int32		new_attempt = DatumGetInt32(TASK_COL(new, TASK_ATTEMPT));

		/* Moved to another partition: the DELETE and INSERT triggers count it. */
		if (DatumGetInt16(TASK_COL(old, TASK_BUCKET)) != DatumGetInt16(TASK_COL(new, TASK_BUCKET)))
			return;

		text_column(new, task_cache.attnum[TASK_BIZ_TYPE], biz_type);
		v = delaysched_tally_slots(biz_type);
		if (old_state != new_state)
		{
			v[task_state_slot(old_state)]--;
			v[task_state_slot(new_state)]++;
			if (new_state == 'r')
				v[SS_TALLY_ENTERED_READY]++;
		}
		if (new_state == 'd' && new_attempt > old_attempt)
		{
			v[SS_TALLY_DELIVERED]++;
			if (new_attempt == 1)
			{
				TimestampTz run_at = DatumGetTimestampTz(TASK_COL(new, TASK_RUN_AT));
				Datum		delivered = TASK_COL(new, TASK_DELIVERED_AT);

				if (!isnull)
				{
					int64		late_us = Max(0, DatumGetTimestampTz(delivered) - run_at);

					v[SS_LATENESS_FIRST +
					  delaysched_stats_lateness_bucket((double) late_us / USECS_PER_SEC)]++;
					v[SS_LATENESS_SUM_US] += late_us;
				}
			}
		}
	}
#undef TASK_COL
}

/* sched.finished */
enum
{
	FINISHED_BIZ_TYPE, FINISHED_STATE
};
static const char *const finished_columns[TRIGGER_COLUMNS] = {"biz_type", "state"};
static ColumnCache finished_cache;

static void
count_finished(TriggerData *td)
{
	TupleTableSlot *row = td->tg_trigslot;
	char		biz_type[NAMEDATALEN];
	char		state[NAMEDATALEN];
	int			kept;
	int			ended;
	int64	   *v;

	find_columns(td->tg_relation, &finished_cache, finished_columns);
	text_column(row, finished_cache.attnum[FINISHED_BIZ_TYPE], biz_type);
	text_column(row, finished_cache.attnum[FINISHED_STATE], state);
	if (strcmp(state, "done") == 0)
		kept = SS_KEPT_DONE, ended = SS_ACKED;
	else if (strcmp(state, "dead") == 0)
		kept = SS_KEPT_DEAD, ended = SS_DEAD;
	else
		kept = SS_KEPT_CANCELLED, ended = SS_CANCELLED;

	v = delaysched_tally_slots(biz_type);
	if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
	{
		v[kept]++;
		v[ended]++;
	}
	else if (TRIGGER_FIRED_BY_DELETE(td->tg_event))
		v[kept]--;
}

/* sched.attempt */
enum
{
	ATTEMPT_BIZ_TYPE, ATTEMPT_HTTP_STATUS, ATTEMPT_OUTCOME, ATTEMPT_DURATION, ATTEMPT_SQLSTATE,
	ATTEMPT_ROWS
};
static const char *const attempt_columns[TRIGGER_COLUMNS] =
{"biz_type", "http_status", "outcome", "duration", "sqlstate", "rows"};
static ColumnCache attempt_cache;

static void
count_attempt(TriggerData *td)
{
	TupleTableSlot *row = td->tg_trigslot;
	char		biz_type[NAMEDATALEN];
	char		outcome_name[NAMEDATALEN];
	bool		isnull;
	Datum		status;
	int			class = STATS_HTTP_CLASSES - 1;	/* none */
	int			outcome = 0;
	Interval   *duration;
	double		seconds;
	int64	   *v;

	if (!TRIGGER_FIRED_BY_INSERT(td->tg_event))
		return;
	find_columns(td->tg_relation, &attempt_cache, attempt_columns);
	text_column(row, attempt_cache.attnum[ATTEMPT_BIZ_TYPE], biz_type);
	text_column(row, attempt_cache.attnum[ATTEMPT_OUTCOME], outcome_name);
	duration = DatumGetIntervalP(column(row, attempt_cache.attnum[ATTEMPT_DURATION], &isnull));
	seconds = isnull ? 0 :
		Max(0, (double) duration->time / USECS_PER_SEC +
			(double) duration->day * SECS_PER_DAY);
	v = delaysched_tally_slots(biz_type);

	/* An SQL job's run has its SQLSTATE (failed) or its rows (committed). */
	(void) column(row, attempt_cache.attnum[ATTEMPT_SQLSTATE], &isnull);
	if (isnull)
		(void) column(row, attempt_cache.attnum[ATTEMPT_ROWS], &isnull);
	if (!isnull)
	{
		for (int i = 0; i < STATS_SQL_OUTCOMES; i++)
			if (strcmp(outcome_name, delaysched_sql_outcome_names[i]) == 0)
				outcome = i;
		v[SS_SQL_RUN_FIRST + outcome]++;
		v[SS_SQL_DURATION_FIRST + delaysched_stats_duration_bucket(seconds)]++;
		v[SS_SQL_DURATION_SUM_US] += (int64) (seconds * USECS_PER_SEC);
		return;
	}

	status = column(row, attempt_cache.attnum[ATTEMPT_HTTP_STATUS], &isnull);
	if (!isnull && DatumGetInt32(status) >= 100 && DatumGetInt32(status) < 600)
		class = DatumGetInt32(status) / 100 - 1;
	for (int i = 0; i < STATS_HTTP_OUTCOMES; i++)
		if (strcmp(outcome_name, delaysched_http_outcome_names[i]) == 0)
			outcome = i;
	v[SS_HTTP_FIRST + class * STATS_HTTP_OUTCOMES + outcome]++;
	v[SS_DURATION_FIRST + delaysched_stats_duration_bucket(seconds)]++;
	v[SS_DURATION_SUM_US] += (int64) (seconds * USECS_PER_SEC);
}

/* sched.biz */
enum
{
	BIZ_NAME, BIZ_DELIVERY
};
static const char *const biz_columns[TRIGGER_COLUMNS] = {"name", "delivery"};
static ColumnCache biz_cache;

static void
count_biz(TriggerData *td)
{
	TupleTableSlot *row = TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newslot : td->tg_trigslot;
	char		name[NAMEDATALEN];
	char		delivery[NAMEDATALEN];

	if (TRIGGER_FIRED_BY_DELETE(td->tg_event))
		return;
	find_columns(td->tg_relation, &biz_cache, biz_columns);
	text_column(row, biz_cache.attnum[BIZ_NAME], name);
	text_column(row, biz_cache.attnum[BIZ_DELIVERY], delivery);
	tally_for(name, GetCurrentTransactionNestLevel())->kind = delaysched_stats_kind_of(delivery);
}

/*
 * sched._stats_trigger(): AFTER ROW trigger of sched.task, sched.finished,
 * sched.attempt and sched.biz, and TRUNCATE trigger of the first two; its
 * argument names the table.
 */
Datum
delaysched_stats_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	const char *table;

	if (!CALLED_AS_TRIGGER(fcinfo) || td->tg_trigger->tgnargs != 1)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("sched._stats_trigger() must be a trigger with one argument")));

	/*
	 * TRUNCATE removes rows without a row trigger: count again.  The count
	 * waits for this transaction's lock, so it sees what it leaves.
	 */
	if (TRIGGER_FIRED_BY_TRUNCATE(td->tg_event))
	{
		delaysched_stats_mark_stale(MyDatabaseId);
		return PointerGetDatum(NULL);
	}
	if (!TRIGGER_FIRED_FOR_ROW(td->tg_event) || !TRIGGER_FIRED_AFTER(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("sched._stats_trigger() must be an AFTER row trigger, or a TRUNCATE trigger")));

	table = td->tg_trigger->tgargs[0];
	if (strcmp(table, "task") == 0)
		count_task(td);
	else if (strcmp(table, "finished") == 0)
		count_finished(td);
	else if (strcmp(table, "attempt") == 0)
		count_attempt(td);
	else if (strcmp(table, "biz") == 0)
		count_biz(td);

	return PointerGetDatum(NULL);	/* ignored after the row */
}

/*
 * sched._tally(biz_type, event, n): what the rows cannot tell.  "added"
 * (sched.add and friends, schedule firings: a task re-stored by a move is
 * an INSERT too), "nacked", "ack_timeout" (a lease ran out).
 */
Datum
delaysched_tally_sql(PG_FUNCTION_ARGS)
{
	char		biz_type[NAMEDATALEN];
	char	   *event;
	int			slot;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		PG_RETURN_VOID();
	text_to_cstring_buffer(PG_GETARG_TEXT_PP(0), biz_type, NAMEDATALEN);
	event = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (strcmp(event, "added") == 0)
		slot = SS_ADDED;
	else if (strcmp(event, "nacked") == 0)
		slot = SS_NACKED;
	else if (strcmp(event, "ack_timeout") == 0)
		slot = SS_ACK_TIMEOUTS;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown delaysched event \"%s\"", event)));
	delaysched_tally_slots(biz_type)[slot] += PG_GETARG_INT64(2);
	PG_RETURN_VOID();
}
