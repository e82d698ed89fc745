/*-------------------------------------------------------------------------
 *
 * stats_prepared.c
 *		The numbers of a prepared transaction: kept in a table as part of
 *		the transaction until it commits, then added to the counters by
 *		scanner worker 0.
 *
 * A transaction's tally is added to shared memory as it commits
 * (stats_tally.c).  A transaction that is prepared (PREPARE TRANSACTION)
 * does not commit then: COMMIT PREPARED or ROLLBACK PREPARED decides, maybe
 * in another session, maybe after a server restart, and an extension can
 * attach nothing of its own to the prepared state but table rows.  So at
 * PRE_PREPARE the tally goes into sched._prepared_tally, one row per type,
 * written by the transaction itself: COMMIT PREPARED makes the rows
 * visible, ROLLBACK PREPARED takes them away with everything else.
 *
 * The rows hold the counters and histograms only.  The gauges need no row:
 * a prepared transaction that changed tasks marks them stale, and they are
 * counted again once it has ended (stats_recount.c), which sees its tasks
 * if it committed and not if it rolled back; likewise a type's delivery
 * kind.
 *
 * Scanner worker 0 adds the committed rows to the counters and deletes them
 * in one transaction of its own: it adds them to its own tally, which
 * counts at its commit, when the rows go (so neither happens without the
 * other, and two workers never count a row twice: the second's DELETE
 * finds it gone).  It looks when COMMIT PREPARED has run in its database
 * (the ProcessUtility hook marks the database, cluster/utility.c), when it
 * starts, and once after each server start; a look that fails is tried
 * again a second later.  A transaction prepared and committed before a
 * restart whose rows were not yet counted is counted after it, from zero
 * with the rest.
 *
 * The rows are written as the extension's owner: the preparing role may be
 * any role that may add a task, and must not need, nor have, any right on
 * the table (which would let it write counters of its choosing).
 *
 * IDENTIFICATION
 *	  src/stats/stats_prepared.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "stats/stats.h"

/* After a look that failed, wait this long (ms). */
#define FOLD_RETRY_MS	1000

static const char save_sql[] =
"INSERT INTO sched._prepared_tally (xact, biz_type, layout, slots)"
" VALUES (pg_catalog.pg_current_xact_id(), $1, $2, $3)";

static const char fold_sql[] =
"DELETE FROM sched._prepared_tally RETURNING biz_type, layout, slots";

/* Is slot i a gauge (counted again, never kept in a row)? */
static bool
is_gauge(int i)
{
	return i >= SS_STATE_PENDING && i <= SS_KEPT_CANCELLED;
}

/* The counters and histograms of a tally as a bigint[] (zeros for the gauges). */
static Datum
slots_array(const int64 *v, bool *any)
{
	Datum		elems[SS_COUNT];

	*any = false;
	for (int i = 0; i < SS_COUNT; i++)
	{
		int64		n = is_gauge(i) ? 0 : v[i];

		elems[i] = Int64GetDatum(n);
		*any |= n != 0;
	}
	return PointerGetDatum(construct_array(elems, SS_COUNT, INT8OID, sizeof(int64),
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * PRE_PREPARE: write the transaction's tallies (a List of StatsCopy) into
 * sched._prepared_tally, as part of the transaction.  False, and nothing
 * written, if the table is not there (the database's extension predates
 * it): the caller then counts them at PREPARE, as that version did.
 */
bool
delaysched_prepared_save(List *tallies)
{
	Oid			schema = get_namespace_oid("sched", true);
	Oid			owner;
	Oid			save_userid;
	int			save_sec_context;
	bool		save_read_only = XactReadOnly;
	Oid			types[3] = {TEXTOID, INT4OID, INT8ARRAYOID};
	ListCell   *lc;

	if (!OidIsValid(schema) || !OidIsValid(get_relname_relid("_prepared_tally", schema)))
		return false;
	owner = delaysched_extension_owner();
	if (!OidIsValid(owner))
		return false;

	/* No statement runs at PRE_PREPARE: the INSERT needs a snapshot of its own. */
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);

	/*
	 * The rows are bookkeeping of writes the transaction has made: a SET
	 * TRANSACTION READ ONLY after them must not make its PREPARE fail.  (An
	 * error ends the transaction, which sets both back.)
	 */
	XactReadOnly = false;
	foreach(lc, tallies)
	{
		StatsCopy  *tally = lfirst(lc);
		Datum		values[3];
		bool		any;
		int			ret;

		values[2] = slots_array(tally->v, &any);
		if (!any)
			continue;			/* gauges or a kind only: counted again */
		values[0] = CStringGetTextDatum(tally->biz_type);
		values[1] = Int32GetDatum(STATS_SLOT_LAYOUT);
		ret = SPI_execute_with_args(save_sql, 3, types, values, NULL, false, 0);
		if (ret != SPI_OK_INSERT)
			elog(ERROR, "could not save a prepared transaction's numbers: %s",
				 SPI_result_code_string(ret));
	}
	XactReadOnly = save_read_only;
	SetUserIdAndSecContext(save_userid, save_sec_context);
	SPI_finish();
	PopActiveSnapshot();
	return true;
}

/* Add one committed row's numbers to this transaction's tally. */
static void
fold_row(HeapTuple row, TupleDesc desc)
{
	char	   *biz_type = SPI_getvalue(row, desc, 1);
	bool		isnull;
	int32		layout = DatumGetInt32(SPI_getbinval(row, desc, 2, &isnull));
	ArrayType  *array = DatumGetArrayTypeP(SPI_getbinval(row, desc, 3, &isnull));
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int64	   *v;

	deconstruct_array(array, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, &nulls, &n);
	if (layout != STATS_SLOT_LAYOUT || n != SS_COUNT)
	{
		/* Written by a library that orders its numbers otherwise. */
		ereport(WARNING,
				(errmsg("delaysched: the numbers of a prepared transaction of type \"%s\" are in a layout this library does not know (%d, %d numbers), and are not counted",
						biz_type, layout, n)));
		return;
	}
	v = delaysched_tally_slots(biz_type);
	for (int i = 0; i < SS_COUNT; i++)
		if (!is_gauge(i) && !nulls[i])
			v[i] += DatumGetInt64(elems[i]);
}

/* Worker 0's unit of work: take the committed rows.  *(bool *) arg: done. */
static void
fold_work(void *arg)
{
	bool	   *folded = (bool *) arg;

	SPI_connect();
	if (SPI_execute(fold_sql, false, 0) != SPI_OK_DELETE_RETURNING)
		elog(ERROR, "could not read the numbers of prepared transactions");
	for (uint64 i = 0; i < SPI_processed; i++)
		fold_row(SPI_tuptable->vals[i], SPI_tuptable->tupdesc);
	SPI_finish();
	*folded = true;
}

/*
 * Scanner worker 0, between ticks: count the committed numbers of prepared
 * transactions, if COMMIT PREPARED ran since the last look, or if this
 * worker or the server has just started.
 */
void
delaysched_prepared_fold_if_needed(void)
{
	static bool looked = false; /* since this worker started */
	static TimestampTz retry_at = 0;
	TimestampTz now = GetCurrentTimestamp();
	bool		folded = false;

	if (now < retry_at)
		return;
	if (!delaysched_stats_claim_fold(MyDatabaseId) && looked)
		return;
	looked = true;
	if (!delaysched_run_in_transaction("delaysched: counting committed prepared transactions",
									   fold_work, &folded) || !folded)
	{
		delaysched_stats_mark_fold(MyDatabaseId);
		retry_at = TimestampTzPlusMilliseconds(now, FOLD_RETRY_MS);
	}
}
