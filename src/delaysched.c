/*-------------------------------------------------------------------------
 *
 * delaysched.c
 *		Entry point of the delaysched extension: checks that the library is
 *		preloaded, then defines the parameters, asks for shared memory,
 *		registers the launcher (which starts every database's workers) and
 *		installs the hook on database and extension commands.
 *
 * Shared memory: the table of databases served and the databases' areas
 * (base/shmem.c), the token buckets (core/limiter.c), the types held to
 * their consumers' pace (core/pace.c) and the numbers per
 * type (stats/stats.c) are asked for and created here, in one request and
 * one start-up hook, so that each family only knows its own part.  Their
 * locks are described once, in base/shmem.h (see Locks there).
 *
 * The map of src/, every file and which folder may include which, is in
 * doc/internals.md.
 *
 * The task store, the public functions and the sweep's statements are SQL,
 * in schema/ (one file per section; the Makefile builds
 * delaysched--<version>.sql and the update from them).
 *
 * IDENTIFICATION
 *	  src/delaysched.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "compat.h"
#include "base/guc.h"
#include "base/shmem.h"
#include "cluster/cluster.h"
#include "core/core.h"
#include "http/http.h"
#include "stats/stats.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Ask for every part's shared memory, and the "delaysched" LWLock tranche. */
static void
request_shmem(void)
{
	Size		size = delaysched_databases_shmem_size();

	size = add_size(size, delaysched_limiter_shmem_size());
	size = add_size(size, delaysched_load_shmem_size());
	size = add_size(size, delaysched_key_limiter_shmem_size());
	size = add_size(size, delaysched_pace_shmem_size());
	size = add_size(size, delaysched_stats_shmem_size());
	RequestAddinShmemSpace(size);
	RequestNamedLWLockTranche("delaysched", delaysched_lwlocks_needed());
}

#ifdef DELAYSCHED_HAS_SHMEM_REQUEST_HOOK
static shmem_request_hook_type prev_shmem_request_hook = NULL;

static void
delaysched_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	request_shmem();
}
#endif

/*
 * Create or attach to the shared structs, every part's, under
 * AddinShmemInitLock, by whichever process attaches first.
 */
static void
delaysched_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	delaysched_databases_shmem_init();
	delaysched_limiter_shmem_init();
	delaysched_load_shmem_init();
	delaysched_key_limiter_shmem_init();
	delaysched_pace_shmem_init();
	delaysched_stats_shmem_init();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Ask for shared memory and install the hooks; called from _PG_init while
 * shared_preload_libraries is being processed.
 */
static void
delaysched_shmem_register(void)
{
#ifdef DELAYSCHED_HAS_SHMEM_REQUEST_HOOK
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = delaysched_shmem_request;
#else
	request_shmem();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = delaysched_shmem_startup;
}

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
	delaysched_define_perimeter_gucs();
	delaysched_reserve_guc_prefix("delaysched");
	delaysched_shmem_register();
	delaysched_register_launcher();
	delaysched_register_router_follower();
	delaysched_install_utility_hook();
	delaysched_tally_init();
}
