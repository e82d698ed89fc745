/*-------------------------------------------------------------------------
 *
 * delaysched.c
 *		Entry point of the delaysched extension: checks that the library is
 *		preloaded, then defines the parameters, asks for shared memory,
 *		registers the launcher (which starts every database's workers) and
 *		installs the hook on database and extension commands.
 *
 * Layout of src/:
 *	 cluster.c		the table of databases served, in shared memory
 *	 drain.c		the drain: parked tasks of limited types, as tokens allow
 *	 guc.c			the delaysched.* parameters
 *	 horizon.c		the warning when the xmin horizon is held too long
 *	 http_*.c		the HTTP workers (see http.h); http_perimeter.c
 *					is where webhooks may go
 *	 launcher.c		the launcher, which starts every database's workers,
 *					and the probe, which looks for the extension
 *	 lease.c		the lease transition (lease.h), sched._lease()
 *	 limiter.c		token buckets in shared memory
 *	 message.c		the NOTIFY payloads of deliveries and announcements
 *	 metrics.c		sched.metrics(): Prometheus's text format
 *	 spi_plans.c	helpers for the workers' kept statements
 *	 stats*.c		counters and gauges per type in shared memory (stats.h)
 *	 shmem.c		shared memory (the workers' slots and the ranges' state)
 *	 tick.c			one tick on one range: walk, deliver, sweep
 *	 utility.c		the hook on database and extension commands
 *	 wake.c			sched._wake(): wake a worker after a commit
 *	 scanner.c		the scanner workers' loop
 *	 worker.c		what every worker shares: sessions, transactions
 *	 worker_views.c	sched._workers(), behind the sched.workers view
 *	 compat.h		every PostgreSQL version check
 *
 * The task store, the public functions and the sweep's statements are SQL,
 * in delaysched--<version>.sql.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "compat.h"
#include "base/guc.h"
#include "cluster/launcher.h"
#include "base/shmem.h"
#include "stats/stats.h"
#include "cluster/utility.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	/* pg_upgrade loads libraries to check them; do nothing then. */
	if (IsBinaryUpgrade)
		return;

	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delaysched must be loaded via \"shared_preload_libraries\""),
				 errhint("Add delaysched to shared_preload_libraries in postgresql.conf and restart the server.")));

	delaysched_define_gucs();
	delaysched_shmem_register();
	delaysched_register_launcher();
	delaysched_install_utility_hook();
	delaysched_tally_init();
}
