/*-------------------------------------------------------------------------
 *
 * utility.c
 *		The ProcessUtility hook: what delaysched does around the commands
 *		that change which databases it serves, or that need a database its
 *		workers are connected to.
 *
 * Extensions.  When a CREATE EXTENSION delaysched commits, the database
 * takes an entry in the table of databases served (base/shmem.h) and the
 * launcher is woken, so its workers start within a moment; CREATE
 * EXTENSION refuses to run, before it does anything, if the table is full.
 * ALTER EXTENSION delaysched (an UPDATE the workers were waiting for) wakes
 * the launcher and the database's workers.  When a DROP EXTENSION
 * delaysched commits, the launcher stops the database's workers.  (An
 * extension dropped some other way, by DROP SCHEMA ... CASCADE say, is
 * noticed by the workers themselves at their next look.)
 *
 * Prepared transactions.  A CREATE or DROP EXTENSION in a transaction that
 * is prepared (PREPARE TRANSACTION) does nothing at the PREPARE: it takes
 * effect at COMMIT PREPARED, perhaps in another session, which this hook
 * sees.  COMMIT PREPARED runs in the database where the transaction was
 * prepared; once it has committed, the hook looks whether the extension
 * is there now and the database not served (serve it when the statement's
 * own transaction commits), or the other way round (stop serving it).  It
 * also marks the database's numbers: the transaction's counters, kept in a
 * table until it committed, are to be counted (stats/stats_prepared.c).
 *
 * Databases.  Some commands fail while any other session is connected to
 * the database they name: DROP DATABASE (without FORCE), ALTER DATABASE ...
 * RENAME TO and SET TABLESPACE, CREATE DATABASE ... TEMPLATE.  PostgreSQL
 * waits up to five seconds for such sessions to go before it gives up, and
 * delaysched's workers would never go by themselves.  So before the command
 * runs, the hook marks the database's entry as needed by this backend
 * (DatabaseEntry.leaving_for), sends its workers SIGTERM and waits for
 * them to exit (up to five seconds too); neither the launcher nor a worker
 * starting late comes back while the mark is there.  When the command
 * ends, well or not, the mark goes and the launcher is woken: the workers
 * come back, or, after a DROP DATABASE, the entry is given back.  A
 * backend that dies meanwhile leaves its mark behind; the launcher removes
 * it.  The hook does this only for a role that owns the database (or a
 * superuser): another role's command would fail anyway, and must not be a
 * way to stop someone else's deliveries.
 *
 * CREATE DATABASE and every ALTER DATABASE wake the launcher when they
 * commit: a new database may have the extension (copied from its
 * template), and one that became a template, or refuses connections, is
 * served no more.
 *
 * IDENTIFICATION
 *	  src/cluster/utility.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "base/guc.h"
#include "base/shmem.h"
#include "cluster/cluster.h"
#include "stats/stats.h"

/* How long a command waits for a database's workers to exit. */
#define LEAVE_WAIT_MS		5000

static ProcessUtility_hook_type prev_utility_hook = NULL;

/* What this transaction's commit does for the current database. */
typedef enum AtCommit
{
	AT_COMMIT_NOTHING = 0,
	AT_COMMIT_SERVE,			/* CREATE or ALTER EXTENSION delaysched */
	AT_COMMIT_STOP				/* DROP EXTENSION delaysched */
} AtCommit;

static AtCommit at_commit = AT_COMMIT_NOTHING;
static bool rescan_at_commit = false;
static bool callback_registered = false;

static void
utility_xact_callback(XactEvent event, void *arg)
{
	AtCommit	action = at_commit;
	bool		rescan = rescan_at_commit;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PARALLEL_COMMIT && event != XACT_EVENT_PARALLEL_ABORT &&
		event != XACT_EVENT_PREPARE)
		return;
	at_commit = AT_COMMIT_NOTHING;
	rescan_at_commit = false;
	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_PARALLEL_COMMIT)
		return;

	if (action == AT_COMMIT_SERVE)
	{
		/* No catalog access here: the transaction is over. */
		int			index = delaysched_serve_database(MyDatabaseId);

		if (index < 0)
			ereport(WARNING,
					(errmsg("delaysched serves at most %d databases, and does not serve this one",
							delaysched_max_databases),
					 errhint("Raise delaysched.max_databases (a restart), or drop the extension in a database that does not need it.")));
		else
			delaysched_wake_database_workers(index);
	}
	else if (action == AT_COMMIT_STOP)
		delaysched_stop_database(MyDatabaseId);
	if (rescan)
		delaysched_wake_launcher();
}

static void
after_commit(AtCommit action, bool rescan)
{
	if (!callback_registered)
	{
		RegisterXactCallback(utility_xact_callback, NULL);
		callback_registered = true;
	}
	if (action != AT_COMMIT_NOTHING)
		at_commit = action;
	rescan_at_commit |= rescan;
}

/* Does delaysched.databases list the current database? */
static bool
listed_here(void)
{
	char	   *name = get_database_name(MyDatabaseId);

	return name != NULL && delaysched_database_listed(name);
}

/* Is "name" delaysched? */
static bool
is_delaysched(const char *name)
{
	return name != NULL && strcmp(name, "delaysched") == 0;
}

/* Does a DROP EXTENSION's list name delaysched? */
static bool
drops_delaysched(DropStmt *stmt)
{
	ListCell   *lc;

	if (stmt->removeType != OBJECT_EXTENSION)
		return false;
	foreach(lc, stmt->objects)
		if (is_delaysched(strVal(lfirst(lc))))
			return true;
	return false;
}

/*
 * The database a command needs to itself, if delaysched serves it and the
 * current role owns it; InvalidOid otherwise.
 */
static Oid
needed_database(const char *name)
{
	Oid			dboid;

	if (name == NULL)
		return InvalidOid;
	dboid = get_database_oid(name, true);
	if (!OidIsValid(dboid) || delaysched_find_database(dboid) < 0 ||
		!delaysched_owns_database(dboid))
		return InvalidOid;
	return dboid;
}

/* The value of option "name" among a CREATE or ALTER DATABASE's options. */
static const char *
database_option(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *option = lfirst_node(DefElem, lc);

		if (strcmp(option->defname, name) == 0 && option->arg != NULL)
			return defGetString(option);
	}
	return NULL;
}

/*
 * Mark database dboid's entry as needed by this backend, stop its workers
 * and wait until they have exited (or LEAVE_WAIT_MS have passed; the
 * command then meets them and says so itself).
 */
static void
leave_database(Oid dboid)
{
	int			index;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), LEAVE_WAIT_MS);

	LWLockAcquire(delaysched_cluster->lock, LW_EXCLUSIVE);
	index = delaysched_find_database(dboid);
	if (index >= 0)
		delaysched_cluster->databases[index].leaving_for = MyProcPid;
	LWLockRelease(delaysched_cluster->lock);
	if (index < 0)
		return;

	pgstat_report_activity(STATE_RUNNING, "delaysched: waiting for a database's workers to exit");
	for (;;)
	{
		DatabasePids pids;

		delaysched_database_pids(index, &pids);
		if (pids.total == 0 || GetCurrentTimestamp() >= deadline)
			break;
		for (int k = 0; k < WORKER_KINDS; k++)
			for (int i = 0; i < DELAYSCHED_MAX_WORKERS; i++)
				if (pids.pid[k][i] != 0)
					kill(pids.pid[k][i], SIGTERM);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * The command that needed dboid is over: remove this backend's mark, stop
 * serving the database if it was dropped, and wake the launcher.
 */
static void
return_database(Oid dboid, bool dropped)
{
	int			index;

	LWLockAcquire(delaysched_cluster->lock, LW_EXCLUSIVE);
	index = delaysched_find_database(dboid);
	if (index >= 0 && delaysched_cluster->databases[index].leaving_for == MyProcPid)
	{
		delaysched_cluster->databases[index].leaving_for = 0;
		if (dropped)
			delaysched_cluster->databases[index].want = DATABASE_STOP;
	}
	LWLockRelease(delaysched_cluster->lock);
	delaysched_wake_launcher();
}

/*
 * COMMIT PREPARED has just committed a transaction of this database's: did
 * it create or drop the extension?  (See "Prepared transactions" above.)
 */
static void
after_commit_prepared(void)
{
	bool		installed;
	bool		served = delaysched_find_database(MyDatabaseId) >= 0;

	/*
	 * The catalogs as of now, with the prepared transaction's changes.  (No
	 * room for the database: the commit says so, as after CREATE EXTENSION.)
	 */
	InvalidateCatalogSnapshot();
	installed = OidIsValid(get_extension_oid("delaysched", true));
	/* Its numbers, if it had any, wait to be counted (stats_prepared.c). */
	if (installed)
		delaysched_stats_mark_fold(MyDatabaseId);
	if (installed && !served && listed_here())
		after_commit(AT_COMMIT_SERVE, false);
	else if (!installed && served)
		after_commit(AT_COMMIT_STOP, false);
}

static void
delaysched_utility(DELAYSCHED_UTILITY_ARGS)
{
	Node	   *parsetree = pstmt->utilityStmt;
	volatile Oid needed = InvalidOid;
	volatile bool dropping = false;

	switch (nodeTag(parsetree))
	{
		case T_CreateExtensionStmt:
			if (is_delaysched(((CreateExtensionStmt *) parsetree)->extname) && listed_here())
			{
				if (!delaysched_database_has_room(MyDatabaseId))
					ereport(ERROR,
							(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
							 errmsg("delaysched serves at most %d databases", delaysched_max_databases),
							 errhint("Raise delaysched.max_databases (a restart), or drop the extension in a database that does not need it.")));
				after_commit(AT_COMMIT_SERVE, false);
			}
			break;
		case T_AlterExtensionStmt:
			if (is_delaysched(((AlterExtensionStmt *) parsetree)->extname) && listed_here())
				after_commit(AT_COMMIT_SERVE, false);
			break;
		case T_DropStmt:
			if (drops_delaysched((DropStmt *) parsetree))
				after_commit(AT_COMMIT_STOP, false);
			break;
		case T_DropdbStmt:
			needed = needed_database(((DropdbStmt *) parsetree)->dbname);
			dropping = true;
			break;
		case T_RenameStmt:
			if (((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
				needed = needed_database(((RenameStmt *) parsetree)->subname);
			break;
		case T_AlterDatabaseStmt:
			{
				AlterDatabaseStmt *stmt = (AlterDatabaseStmt *) parsetree;

				if (database_option(stmt->options, "tablespace") != NULL)
					needed = needed_database(stmt->dbname);
				after_commit(AT_COMMIT_NOTHING, true);
			}
			break;
		case T_CreatedbStmt:
			needed = needed_database(database_option(((CreatedbStmt *) parsetree)->options,
													  "template"));
			after_commit(AT_COMMIT_NOTHING, true);
			break;
		default:
			break;
	}

	PG_TRY();
	{
		if (OidIsValid(needed))
			leave_database(needed);
		if (prev_utility_hook)
			prev_utility_hook(DELAYSCHED_UTILITY_CALL);
		else
			standard_ProcessUtility(DELAYSCHED_UTILITY_CALL);
	}
	PG_CATCH();
	{
		if (OidIsValid(needed))
			return_database(needed, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (OidIsValid(needed))
		return_database(needed, dropping);
	if (IsA(parsetree, TransactionStmt) &&
		((TransactionStmt *) parsetree)->kind == TRANS_STMT_COMMIT_PREPARED)
		after_commit_prepared();
}

/* Install the hook; called from _PG_init. */
void
delaysched_install_utility_hook(void)
{
	prev_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = delaysched_utility;
}
