/*-------------------------------------------------------------------------
 *
 * router_follower.c
 *		The router's follower: a background worker of the router's server
 *		that runs a round of delaysched_router's sched.follow_nodes() in
 *		delaysched.router_database every delaysched.router_follow_interval,
 *		so that the split limits follow the nodes that answer (see
 *		cluster/share_lease.c for the nodes' side, doc/scale-out.md).
 *
 * It runs only where delaysched.router_database names a database (the
 * router needs delaysched in shared_preload_libraries for it, and for
 * nothing else), as the bootstrap superuser, which the rounds' calls
 * (src/router/delaysched_router.c) connect to the nodes as: that role must
 * be able to log in to every node.  A round
 * that fails (a node's error the round does not catch, a lock held) is
 * logged and the worker goes on at its next round; while the database has
 * no delaysched_router, or not at 0.3, it waits, and says so once.
 *
 * IDENTIFICATION
 *	  src/cluster/router_follower.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "base/base.h"
#include "base/guc.h"
#include "cluster/cluster.h"

PGDLLEXPORT void delaysched_router_follower_main(Datum main_arg);

/* Whether this worker said it waits for delaysched_router 0.3. */
static bool waiting_reported = false;

/* Register the follower if delaysched.router_database names a database. */
void
delaysched_register_router_follower(void)
{
	if (delaysched_router_database == NULL || delaysched_router_database[0] == '\0')
		return;
	delaysched_register_static_worker("delaysched_router_follower_main", "delaysched router follower");
}

/* Is delaysched_router installed here at a version with sched.follow_nodes? */
static bool
router_ready(void)
{
	Oid			extension = get_extension_oid("delaysched_router", true);
	bool		ready;

	ready = OidIsValid(extension) &&
		SPI_execute("SELECT FROM pg_catalog.pg_proc"
					" WHERE proname = 'follow_nodes' AND pronamespace = 'sched'::pg_catalog.regnamespace",
					true, 1) == SPI_OK_SELECT && SPI_processed == 1;
	if (!ready && !waiting_reported)
		ereport(LOG,
				(errmsg("delaysched router follower: database \"%s\" has no delaysched_router 0.3 yet; waiting",
						delaysched_router_database),
				 errhint("CREATE EXTENSION delaysched_router there, or ALTER EXTENSION delaysched_router UPDATE.")));
	waiting_reported = !ready;
	return ready;
}

/* One round, in a transaction of its own; an error is logged, not raised. */
static void
follow_once(void)
{
	MemoryContext context = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, "SELECT sched.follow_nodes()");
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		if (router_ready() &&
			SPI_execute("SELECT sched.follow_nodes()", false, 0) != SPI_OK_SELECT)
			elog(ERROR, "sched.follow_nodes() failed");
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		delaysched_recover_from_error(context);
	}
	PG_END_TRY();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

void
delaysched_router_follower_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(delaysched_router_database, NULL, 0);
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	/*
	 * A round must not wait long for a lock an administrator's call holds
	 * (sched.define_biz writes sched.biz, which a round locks against
	 * writes): it gives up and the next round tries again.  Nor may a
	 * database or role default cut a round short.
	 */
	SetConfigOption("lock_timeout", "2s", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	pgstat_report_appname("delaysched router follower");

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		follow_once();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 delaysched_router_follow_interval_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
