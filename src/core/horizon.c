/*-------------------------------------------------------------------------
 *
 * horizon.c
 *		Warn when something has held back the xmin horizon of the workers'
 *		database for longer than delaysched.xmin_warning.
 *
 * While a transaction keeps an old snapshot or transaction id, no row that
 * became dead after it began can be removed, by vacuum or by pruning: the
 * task tables and their indexes grow with every delivery and every
 * acknowledgement, and whatever reads past the dead entries slows down (see
 * doc/performance.md).  The tick's statements are built to step over as
 * few of them as they can, but nothing stops the tables from growing, so
 * the operator should hear of it, with the culprit named.
 *
 * Scanner worker 0 looks every delaysched.xmin_warning or 10 seconds,
 * whichever is sooner, in a short transaction of its own, at what can hold
 * the horizon of its database: sessions of this database with a snapshot
 * (backend_xmin) or a transaction id (backend_xid), WAL senders with a
 * standby's feedback (backend_xmin), prepared transactions of this
 * database, and replication slots with an xmin (hot standby feedback;
 * catalog_xmin holds back only the catalogs).  A session or
 * prepared transaction tells how long it has held it; a slot does not, so
 * the worker remembers since when it has seen the oldest slot's xmin
 * unchanged.  If the longest of them is past the threshold, it logs one
 * WARNING naming it, and not again before another threshold has passed.
 *
 * State is the worker's own (static): nothing here is shared.
 *
 * IDENTIFICATION
 *	  src/core/horizon.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/guc.h"
#include "core/core.h"

/* At most this long between two looks (µs). */
#define HORIZON_CHECK_MAX	(10 * USECS_PER_SEC)

/* The oldest slot xmin seen, and since when (see the file header). */
static char slot_name[NAMEDATALEN];
static TransactionId slot_xmin = InvalidTransactionId;
static TimestampTz slot_seen_since = 0;

/* When the last warning was logged (0: never). */
static TimestampTz last_warning = 0;

/*
 * Sessions and prepared transactions of this database that hold the
 * horizon, longest first.  A session holds it since its transaction began
 * if it has a transaction id or is not running a statement (an idle
 * REPEATABLE READ transaction keeps its snapshot); otherwise since its
 * statement began (a READ COMMITTED statement's snapshot).
 */
static const char holders_sql[] =
"SELECT h.kind, h.pid, h.name, h.since, h.state, h.application FROM ("
"  SELECT 'session' AS kind, a.pid, NULL::text AS name,"
"         CASE WHEN a.backend_xid IS NOT NULL OR a.state <> 'active'"
"              THEN a.xact_start ELSE a.query_start END AS since,"
"         a.state, a.application_name AS application"
"  FROM pg_catalog.pg_stat_activity a"
"  WHERE (a.datname = pg_catalog.current_database() OR a.backend_type = 'walsender')"
"    AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)"
"    AND a.pid <> pg_catalog.pg_backend_pid()"
"  UNION ALL"
"  SELECT 'prepared', NULL, p.gid, p.prepared, NULL, NULL"
"  FROM pg_catalog.pg_prepared_xacts p"
"  WHERE p.database = pg_catalog.current_database()"
") h WHERE h.since IS NOT NULL ORDER BY h.since LIMIT 1";

/* The replication slot with the oldest xmin. */
static const char slot_sql[] =
"SELECT s.slot_name::text, s.xmin::text::bigint, s.active_pid"
" FROM pg_catalog.pg_replication_slots s WHERE s.xmin IS NOT NULL"
" ORDER BY pg_catalog.age(s.xmin) DESC LIMIT 1";

/* A text column of the current SPI row, or NULL. */
static char *
column_text(int column)
{
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, column);
}

/*
 * Look at the slots: update what is remembered of the oldest, and return
 * since when its xmin has held (0 if no slot has one).
 */
static TimestampTz
oldest_slot(TimestampTz now, int *active_pid)
{
	bool		isnull;
	TransactionId xmin;
	char	   *name;

	if (SPI_execute(slot_sql, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_replication_slots");
	if (SPI_processed == 0)
	{
		slot_xmin = InvalidTransactionId;
		return 0;
	}
	name = column_text(1);
	xmin = (TransactionId) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													   SPI_tuptable->tupdesc, 2, &isnull));
	*active_pid = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 3, &isnull));
	if (isnull)
		*active_pid = 0;
	if (xmin != slot_xmin || strcmp(name, slot_name) != 0)
	{
		strlcpy(slot_name, name, sizeof(slot_name));
		slot_xmin = xmin;
		slot_seen_since = now;
	}
	return slot_seen_since;
}

/*
 * Look at what holds the horizon and warn if it is held too long (see the
 * file header).  In a transaction, with a snapshot, SPI not connected.
 * Returns when to look next.
 */
TimestampTz
delaysched_check_horizon(TimestampTz now)
{
	int64		threshold = (int64) delaysched_xmin_warning_s * USECS_PER_SEC;
	TimestampTz held_since = 0;
	char	   *kind = NULL;
	char	   *pid = NULL;
	char	   *name = NULL;
	char	   *state = NULL;
	char	   *application = NULL;
	TimestampTz slot_since;
	int			slot_pid = 0;

	if (threshold <= 0)
		return now + HORIZON_CHECK_MAX;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(holders_sql, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read what holds the xmin horizon");
	if (SPI_processed == 1)
	{
		bool		isnull;

		kind = column_text(1);
		pid = column_text(2);
		name = column_text(3);
		held_since = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
													   SPI_tuptable->tupdesc, 4, &isnull));
		state = column_text(5);
		application = column_text(6);
	}
	slot_since = oldest_slot(now, &slot_pid);

	if (last_warning == 0 || now - last_warning >= threshold)
	{
		if (slot_since != 0 && now - slot_since >= threshold &&
			(kind == NULL || slot_since <= held_since))
		{
			last_warning = now;
			ereport(WARNING,
					(errmsg("delaysched: replication slot \"%s\"%s has held back the xmin horizon for at least %d s",
							slot_name,
							slot_pid != 0 ? psprintf(" (process %d)", slot_pid) : "",
							(int) ((now - slot_since) / USECS_PER_SEC)),
					 errdetail("No row deleted or updated since then can be removed: the task tables and their indexes grow, and the scanners read more at every step."),
					 errhint("Check the standby that uses the slot (hot_standby_feedback), or drop the slot if it is abandoned.")));
		}
		else if (kind != NULL && now - held_since >= threshold)
		{
			int			held_s = (int) ((now - held_since) / USECS_PER_SEC);

			last_warning = now;
			if (strcmp(kind, "prepared") == 0)
				ereport(WARNING,
						(errmsg("delaysched: prepared transaction \"%s\" has held back the xmin horizon for %d s",
								name, held_s),
						 errdetail("No row deleted or updated since then can be removed: the task tables and their indexes grow, and the scanners read more at every step."),
						 errhint("Finish it with COMMIT PREPARED or ROLLBACK PREPARED.")));
			else
				ereport(WARNING,
						(errmsg("delaysched: process %s has held back the xmin horizon for %d s",
								pid, held_s),
						 errdetail("Its transaction is %s (application \"%s\"). No row deleted or updated since it began can be removed: the task tables and their indexes grow, and the scanners read more at every step.",
								   state ? state : "running",
								   application ? application : ""),
						 errhint("End that transaction, or the session with pg_terminate_backend(%s); idle_in_transaction_session_timeout ends idle ones by itself.",
								 pid)));
		}
	}
	SPI_finish();
	return now + Min(threshold, HORIZON_CHECK_MAX);
}
