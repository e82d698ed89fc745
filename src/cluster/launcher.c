/*-------------------------------------------------------------------------
 *
 * launcher.c
 *		The launcher: one background worker, connected to no database (it
 *		reads the shared catalog pg_database only), that starts and stops the
 *		workers of every database delaysched serves.  Also the probe, a
 *		short-lived worker that looks for the extension in one database.
 *
 * Which databases.  Those that pg_database says accept connections, are not
 * templates and are not half-dropped, that delaysched.databases lists (or
 * "*"), and where the extension is installed.  The last the launcher cannot
 * see from where it stands: it knows it for a database that has an entry in
 * the table of databases served (base/shmem.h).  An entry is taken by the
 * commit of CREATE EXTENSION delaysched (utility.c), or by a probe: at its
 * start, and for every database that appears later (a CREATE DATABASE,
 * perhaps from a template that has the extension), the launcher starts a
 * probe in each servable database without an entry, one at a time; the
 * probe connects, looks in pg_extension, takes an entry if it finds the
 * extension, and exits.  A database probed without the extension is not
 * probed again while it stays servable without an entry (its CREATE
 * EXTENSION will take the entry itself); once it is not servable, or has
 * an entry, that is forgotten, so that a database released (connections
 * disallowed, made a template, taken out of delaysched.databases) and then
 * allowed again is probed again, as at the launcher's start.
 *
 * How many workers.  Each database wants delaysched.workers scanners,
 * delaysched.http_workers HTTP workers and delaysched.sql_workers SQL
 * workers (the kinds of cluster.h).  The launcher grants them from a
 * budget, min(delaysched.max_workers, max_worker_processes - 2: one slot
 * for itself, one for a probe), in rounds: every database's first scanner,
 * then every database's first HTTP worker, then second scanners, and so on,
 * so that every database gets a scanner before any gets two; then, in
 * rounds again, the SQL workers (a job waits for an SQL worker, a task for
 * nothing but its scanner).  A database
 * still to be probed counts in the first round too (a scanner's slot is
 * kept for it, unstarted), so that after a restart the first databases
 * found do not take the slots the probes of the others need.  Granted
 * workers that do not run are started, in the same order; running ones
 * beyond the grant are stopped.
 *
 * Slots held by others.  max_worker_processes is shared with the logical
 * replication launcher, other extensions' workers and parallel queries, so
 * the budget may promise slots that are not there.  When the postmaster
 * refuses a worker a slot, the launcher takes the number of workers it
 * holds then as a ceiling on the budget (slot_ceiling), so that the grant,
 * in its order, decides which databases keep their workers: the last
 * granted are stopped to give every database its first scanner.  When it
 * refuses a probe, the ceiling is one fewer (but never below the first
 * scanners), so that the probe gets a slot.  Every SLOT_RETRY_SECS the
 * launcher tries for one slot more, and the ceiling rises when it gets it.
 * When the budget or the slots are short the log says so once, and again
 * only when the figures change; sched.cluster shows a database left
 * without a scanner as waiting for budget or for a slot.
 *
 * Starting and stopping.  Workers are dynamic background workers that the
 * postmaster never restarts (BGW_NEVER_RESTART); the launcher does, about a
 * second after one ends.  A worker that ends within EARLY_EXIT_SECS of its
 * start counts as a failure of its database, which then waits twice as
 * long as after the previous one before any of its workers starts again,
 * up to MAX_BACKOFF_SECS; the other databases do not wait.  A database
 * that is no longer to be served has its workers sent SIGTERM, and its
 * entry is given back once none runs.  So is one whose entry a command
 * needs to itself (utility.c), until the command ends.
 *
 * Restarts.  The launcher itself is a static worker that the postmaster
 * starts again a second after it ends.  A new launcher adopts the workers
 * that run: it knows them from their slots' pids, not from handles (which
 * it has only for the workers it started), so it neither starts a second
 * one for a slot nor loses track of one.  A worker started by a previous
 * launcher that has not attached yet finds its slot taken if the new one
 * started another meanwhile, and exits.
 *
 * IDENTIFICATION
 *	  src/cluster/launcher.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "base/base.h"
#include "base/guc.h"
#include "base/shmem.h"
#include "cluster/cluster.h"
#include "stats/stats.h"

/* How long the launcher sleeps when nothing wakes it. */
#define LAUNCHER_NAP_MS		1000
/* A worker that ends sooner than this after its start has failed. */
#define EARLY_EXIT_SECS		10
/* The longest a failing database waits before its workers start again. */
#define MAX_BACKOFF_SECS	60
/* How often the launcher tries for a slot above its ceiling. */
#define SLOT_RETRY_SECS		10

/* Each kind's main function, and its name in bgw_name and bgw_type. */
static const char *const kind_function[WORKER_KINDS] = {
	"delaysched_scanner_main", "delaysched_http_main", "delaysched_sql_main"
};
static const char *const kind_name[WORKER_KINDS] = {"scanner", "http", "sql"};

/* Each database's grant: how many workers of each kind. */
typedef int Grant[WORKER_KINDS];

/*
 * The grant's phases: in each, rounds of its kinds, every database's first
 * of each kind, then every database's second ...
 */
#define PHASES 2
static const int phase_kinds[PHASES][WORKER_KINDS + 1] = {
	{WORKER_SCANNER, WORKER_HTTP, -1},
	{WORKER_SQL, -1}
};

/* The most rounds a phase has (the largest count its kinds want). */
static int
phase_rounds(int phase)
{
	int			rounds = 0;

	for (const int *k = phase_kinds[phase]; *k >= 0; k++)
		rounds = Max(rounds, delaysched_workers_wanted(*k));
	return rounds;
}

/* A worker this launcher started. */
typedef struct Started
{
	BackgroundWorkerHandle *handle;
	TimestampTz started_at;
	bool		stopped;		/* the launcher stopped it: not a failure */
} Started;

/* The launcher's own knowledge of one database entry. */
typedef struct EntryLocal
{
	Oid			dboid;			/* the database the handles are for */
	Started		workers[WORKER_KINDS][DELAYSCHED_MAX_WORKERS];
	int			reported_failures;	/* last figure logged */
	DatabaseWaiting reported_waiting;	/* last logged */
} EntryLocal;

/* A database as the last look at pg_database saw it. */
typedef struct SeenDatabase
{
	Oid			oid;
	NameData	name;
	bool		servable;
} SeenDatabase;

static EntryLocal *locals = NULL;
static SeenDatabase *seen = NULL;
static int	nseen = 0;
static int	seen_size = 0;

/*
 * Databases probed without finding the extension, that have stayed
 * servable without an entry since.
 */
static Oid *probed_empty = NULL;
static int	nprobed_empty = 0;
static int	probed_empty_size = 0;

/* The probe in flight, if any. */
static BackgroundWorkerHandle *probe = NULL;
static Oid	probe_oid = InvalidOid;

/*
 * The most workers the launcher could hold when the postmaster last refused
 * one a slot (see "Slots held by others" above); -1 while none is known.
 * When it last tried for one more.
 */
static int	slot_ceiling = -1;
static TimestampTz slot_tried_at = 0;

/* The last database a probe found no slot for. */
static Oid	probe_refused_oid = InvalidOid;

/* The last round's databases to serve, and the workers it stopped. */
static int	launched_active = 0;
static int	launched_stopped = 0;

/* The shortfall last logged: workers wanted, granted, and the ceiling. */
static int	reported_wanted = -1;
static int	reported_granted = -1;
static int	reported_ceiling = -1;

/*
 * Register the launcher with the postmaster; called from _PG_init.
 */
void
delaysched_register_launcher(void)
{
	/* (Once recovery has finished: a standby cannot deliver, it cannot write.) */
	delaysched_register_static_worker("delaysched_launcher_main", "delaysched launcher");
}

/* Start a dynamic worker of this launcher; NULL if the postmaster has no slot. */
static BackgroundWorkerHandle *
start_worker(const char *function, const char *kind, int index, Oid dboid, int entry)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	DelayschedWorkerArgs args;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	worker.bgw_main_arg = Int32GetDatum(index);
	worker.bgw_notify_pid = MyProcPid;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "delaysched");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker.bgw_name, BGW_MAXLEN, "delaysched %s %d", kind, index);
	snprintf(worker.bgw_type, BGW_MAXLEN, "delaysched %s", kind);
	args.dboid = dboid;
	args.entry = entry;
	memcpy(worker.bgw_extra, &args, sizeof(args));
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		return NULL;
	return handle;
}

/* The delaysched.* parameters may have changed; so may what is served. */
static void
reload_if_asked(void)
{
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
		pg_atomic_write_u32(&delaysched_cluster->rescan, 1);
	}
}

static bool
servable(Form_pg_database db)
{
	return db->datallowconn && !db->datistemplate &&
		!delaysched_database_is_invalid(db) &&
		delaysched_database_listed(NameStr(db->datname));
}

/* Read pg_database into seen[]. */
static void
scan_databases(void)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tuple;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	nseen = 0;
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tuple);

		if (nseen == seen_size)
		{
			seen_size = Max(16, seen_size * 2);
			seen = seen == NULL
				? MemoryContextAlloc(TopMemoryContext, seen_size * sizeof(SeenDatabase))
				: repalloc(seen, seen_size * sizeof(SeenDatabase));
		}
		seen[nseen].oid = db->oid;
		seen[nseen].name = db->datname;
		seen[nseen].servable = servable(db);
		nseen++;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
}

static bool
seen_servable(Oid dboid)
{
	for (int i = 0; i < nseen; i++)
		if (seen[i].oid == dboid)
			return seen[i].servable;
	return false;
}

/* A database's name as last seen, for the log. */
static const char *
seen_name(Oid dboid)
{
	for (int i = 0; i < nseen; i++)
		if (seen[i].oid == dboid)
			return NameStr(seen[i].name);
	return psprintf("with OID %u", dboid);
}

static bool
was_probed_empty(Oid dboid)
{
	for (int i = 0; i < nprobed_empty; i++)
		if (probed_empty[i] == dboid)
			return true;
	return false;
}

static void
note_probed_empty(Oid dboid)
{
	if (was_probed_empty(dboid))
		return;
	if (nprobed_empty == probed_empty_size)
	{
		probed_empty_size = Max(16, probed_empty_size * 2);
		probed_empty = probed_empty == NULL
			? MemoryContextAlloc(TopMemoryContext, probed_empty_size * sizeof(Oid))
			: repalloc(probed_empty, probed_empty_size * sizeof(Oid));
	}
	probed_empty[nprobed_empty++] = dboid;
	ereport(DEBUG1,
			(errmsg_internal("delaysched: database \"%s\" does not have the extension",
							 seen_name(dboid))));
}

/* Is seen[i] a database still to be probed (servable, no entry, not found empty)? */
static bool
to_probe(int i)
{
	return seen[i].servable && !was_probed_empty(seen[i].oid) &&
		delaysched_find_database(seen[i].oid) < 0;
}

/* How many databases are still to be probed. */
static int
count_to_probe(void)
{
	int			n = 0;

	for (int i = 0; i < nseen; i++)
		if (to_probe(i))
			n++;
	return n;
}

/*
 * Forget that a database was probed empty once it is not servable (or
 * gone), or has an entry (its CREATE EXTENSION took one): when it is
 * servable again without an entry, a probe looks again.  Without this, a
 * database created while the server runs (probed before its CREATE
 * EXTENSION) and then released would never be served again until the
 * launcher restarts.
 */
static void
forget_probed_empty(void)
{
	int			kept = 0;

	for (int i = 0; i < nprobed_empty; i++)
		if (seen_servable(probed_empty[i]) &&
			delaysched_find_database(probed_empty[i]) < 0)
			probed_empty[kept++] = probed_empty[i];
	nprobed_empty = kept;
}

/*
 * Mark the entries of databases that are no longer servable to be stopped,
 * and forget a command's claim on an entry whose backend is gone.
 */
static void
reconcile_entries(void)
{
	pid_t		leaving[DELAYSCHED_MAX_DATABASES];
	int			n = delaysched_cluster->max_databases;

	LWLockAcquire(delaysched_cluster->lock, LW_EXCLUSIVE);
	for (int d = 0; d < n; d++)
	{
		DatabaseEntry *entry = &delaysched_cluster->databases[d];
		Oid			dboid = pg_atomic_read_u32(&entry->dboid);

		leaving[d] = 0;
		if (!OidIsValid(dboid))
			continue;
		if (!seen_servable(dboid))
			entry->want = DATABASE_STOP;
		leaving[d] = entry->leaving_for;
	}
	LWLockRelease(delaysched_cluster->lock);

	/* A command that needed an entry to itself ended without saying so. */
	for (int d = 0; d < n; d++)
	{
		if (leaving[d] == 0 || BackendPidGetProc(leaving[d]) != NULL)
			continue;
		LWLockAcquire(delaysched_cluster->lock, LW_EXCLUSIVE);
		if (delaysched_cluster->databases[d].leaving_for == leaving[d])
			delaysched_cluster->databases[d].leaving_for = 0;
		LWLockRelease(delaysched_cluster->lock);
	}
}

/* Forget the handles of entry d's workers (the entry changed hands). */
static void
forget_local(int d, Oid dboid)
{
	EntryLocal *local = &locals[d];

	for (int k = 0; k < WORKER_KINDS; k++)
		for (int i = 0; i < DELAYSCHED_MAX_WORKERS; i++)
			if (local->workers[k][i].handle != NULL)
				pfree(local->workers[k][i].handle);
	memset(local, 0, sizeof(EntryLocal));
	local->dboid = dboid;
}

/*
 * Has the worker behind *started ended?  Then forget its handle, and count
 * an early end as a failure of its database (entry d, still to be served),
 * unless the launcher stopped it.
 */
static void
reap(Started *started, int d, TimestampTz now)
{
	pid_t		pid;
	DatabaseEntry *entry = &delaysched_cluster->databases[d];

	if (started->handle == NULL ||
		GetBackgroundWorkerPid(started->handle, &pid) != BGWH_STOPPED)
		return;
	pfree(started->handle);
	started->handle = NULL;

	LWLockAcquire(delaysched_cluster->lock, LW_EXCLUSIVE);
	/* A worker the launcher stopped itself did not fail. */
	if (!started->stopped && entry->want == DATABASE_SERVE && entry->leaving_for == 0)
	{
		if (now - started->started_at < EARLY_EXIT_SECS * USECS_PER_SEC)
		{
			int			backoff = Min(MAX_BACKOFF_SECS, 1 << Min(entry->failures, 10));

			entry->failures++;
			entry->retry_at = now + (TimestampTz) backoff * USECS_PER_SEC;
		}
		else
		{
			entry->failures = 0;
			entry->retry_at = now + USECS_PER_SEC;
		}
	}
	LWLockRelease(delaysched_cluster->lock);
}

/* Is a worker of entry d running or about to (slot pid, or a live handle)? */
static bool
running(pid_t slot_pid, const Started *started)
{
	pid_t		pid;

	if (slot_pid != 0)
		return true;
	return started->handle != NULL &&
		GetBackgroundWorkerPid(started->handle, &pid) != BGWH_STOPPED;
}

/* Stop one worker: by its pid if it has attached, else by its handle. */
static void
stop(pid_t slot_pid, Started *started)
{
	started->stopped = true;
	if (slot_pid != 0)
		kill(slot_pid, SIGTERM);
	else if (started->handle != NULL)
		TerminateBackgroundWorker(started->handle);
}

/*
 * Entry d is not to run workers now (to be stopped, or a command needs its
 * database): stop those that run, and give the entry back once none does
 * if it is to be stopped.
 */
static void
stop_entry(int d, bool give_back)
{
	EntryLocal *local = &locals[d];
	DatabasePids pids;
	bool		any = false;
	Oid			given_back = InvalidOid;

	delaysched_database_pids(d, &pids);
	for (int k = 0; k < WORKER_KINDS; k++)
		for (int i = 0; i < DELAYSCHED_MAX_WORKERS; i++)
			if (running(pids.pid[k][i], &local->workers[k][i]))
			{
				stop(pids.pid[k][i], &local->workers[k][i]);
				any = true;
			}
	if (any || !give_back)
		return;

	/* None runs: give the entry back, unless it is wanted again. */
	LWLockAcquire(delaysched_cluster->lock, LW_EXCLUSIVE);
	delaysched_database_pids(d, &pids);
	if (delaysched_cluster->databases[d].want == DATABASE_STOP && pids.total == 0)
	{
		given_back = pg_atomic_read_u32(&delaysched_cluster->databases[d].dboid);
		pg_atomic_write_u32(&delaysched_cluster->databases[d].dboid, InvalidOid);
		delaysched_cluster->databases[d].scanners_granted = 0;
		delaysched_cluster->databases[d].http_granted = 0;
		delaysched_cluster->databases[d].sql_granted = 0;
	}
	LWLockRelease(delaysched_cluster->lock);
	/* Its numbers go with it (a new CREATE EXTENSION counts afresh). */
	if (OidIsValid(given_back))
		delaysched_stats_forget_database(given_back);
}

/*
 * Share the budget out between the databases to serve (nactive of them, in
 * entry order), in rounds; sets granted[a] to each one's grant of each
 * kind.  The first round keeps a scanner's place in the budget for each of
 * the nprobe databases not found yet, after the first scanners of those
 * found.  No more than ceiling workers are granted in all, if it is not -1
 * (the slots the launcher can have).  Returns how many workers were wanted
 * in all by the databases found.
 */
static int
grant(int nactive, int nprobe, int budget, int ceiling, Grant *granted)
{
	int			wanted = 0;
	int			left = ceiling < 0 ? budget : Min(budget, ceiling);

	for (int k = 0; k < WORKER_KINDS; k++)
		wanted += nactive * delaysched_workers_wanted(k);
	memset(granted, 0, sizeof(Grant) * nactive);
	for (int p = 0; p < PHASES; p++)
		for (int r = 0; r < phase_rounds(p) && budget > 0 && left > 0; r++)
			for (const int *k = phase_kinds[p]; *k >= 0; k++)
			{
				for (int a = 0; a < nactive && budget > 0 && left > 0; a++)
					if (r < delaysched_workers_wanted(*k))
					{
						granted[a][*k]++;
						budget--;
						left--;
					}
				if (*k == WORKER_SCANNER && r == 0 && delaysched_workers > 0)
					budget -= Min(budget, nprobe);
			}
	return wanted;
}

/*
 * Stop the workers of entry d beyond its grant (the budget moved to other
 * databases, or the settings shrank); how many.
 */
static int
trim_entry(int d, const Grant granted)
{
	EntryLocal *local = &locals[d];
	DatabasePids pids;
	int			stopped = 0;

	delaysched_database_pids(d, &pids);
	for (int k = 0; k < WORKER_KINDS; k++)
		for (int i = granted[k]; i < DELAYSCHED_MAX_WORKERS; i++)
			if (running(pids.pid[k][i], &local->workers[k][i]))
			{
				stop(pids.pid[k][i], &local->workers[k][i]);
				stopped++;
			}
	return stopped;
}

/* Start one worker of entry d into *started; false if the postmaster had no slot. */
static bool
start_one(Started *started, const char *function, const char *kind, int i,
		  Oid dboid, int d, TimestampTz now)
{
	if (started->handle != NULL)
		pfree(started->handle);
	started->handle = start_worker(function, kind, i, dboid, d);
	started->started_at = now;
	started->stopped = false;
	return started->handle != NULL;
}

/*
 * Start the granted workers that do not run, in the grant's order (every
 * database's first scanner, then every database's first HTTP worker, then
 * second scanners, and so on; then the SQL workers in the same way), but
 * not those of a database that backs off.
 * Stops at the first the postmaster has no slot for: false then.
 */
static bool
fill(const int *active, const Oid *active_oid, int nactive, const Grant *granted, TimestampTz now)
{
	bool		may_start[DELAYSCHED_MAX_DATABASES];

	LWLockAcquire(delaysched_cluster->lock, LW_SHARED);
	for (int a = 0; a < nactive; a++)
		may_start[a] = now >= delaysched_cluster->databases[active[a]].retry_at;
	LWLockRelease(delaysched_cluster->lock);

	for (int p = 0; p < PHASES; p++)
		for (int r = 0; r < phase_rounds(p); r++)
			for (const int *k = phase_kinds[p]; *k >= 0; k++)
				for (int a = 0; a < nactive; a++)
				{
					int			d = active[a];
					DatabasePids pids;
					Started    *started;

					if (!may_start[a] || r >= granted[a][*k])
						continue;
					delaysched_database_pids(d, &pids);
					started = &locals[d].workers[*k][r];
					if (running(pids.pid[*k][r], started))
						continue;
					if (!start_one(started, kind_function[*k], kind_name[*k], r, active_oid[a], d, now))
						return false;
				}
	return true;
}

/*
 * How many workers of every entry run or are about to: the slots of
 * max_worker_processes the launcher holds (but a probe's).
 */
static int
held_workers(void)
{
	int			held = 0;

	for (int d = 0; d < delaysched_cluster->max_databases; d++)
	{
		DatabasePids pids;

		if (!OidIsValid(locals[d].dboid))
			continue;
		delaysched_database_pids(d, &pids);
		for (int k = 0; k < WORKER_KINDS; k++)
			for (int i = 0; i < DELAYSCHED_MAX_WORKERS; i++)
				if (running(pids.pid[k][i], &locals[d].workers[k][i]))
					held++;
	}
	return held;
}

/* Does the probe started last still hold its slot? */
static bool
probe_in_flight(void)
{
	pid_t		pid;

	return probe != NULL && GetBackgroundWorkerPid(probe, &pid) != BGWH_STOPPED;
}

/*
 * Say once that not every worker wanted runs, and again only when the
 * figures change; by_slots if the slots, not the budget, hold it back.
 */
static void
report_shortfall(int wanted, int granted, int budget, bool by_slots)
{
	if (granted < wanted &&
		(wanted != reported_wanted || granted != reported_granted ||
		 slot_ceiling != reported_ceiling))
	{
		if (by_slots)
			ereport(LOG,
					(errmsg("delaysched: %d of the %d workers wanted run: the server had background worker slots for only %d",
							granted, wanted, slot_ceiling),
					 errdetail("Other processes hold the rest of max_worker_processes (%d): the logical replication launcher, other extensions' workers, parallel queries.  Every database served has a scanner before any has two, as far as the slots go; the launcher tries for another slot every %d seconds.",
							   max_worker_processes, SLOT_RETRY_SECS),
					 errhint("Raise max_worker_processes (a restart).")));
		else
			ereport(LOG,
					(errmsg("delaysched: %d of the %d workers wanted run: max_worker_processes (%d) and delaysched.max_workers (%d) leave room for %d",
							granted, wanted, max_worker_processes, delaysched_max_workers, budget),
					 errdetail("Every database served has at least one scanner before any has two."),
					 errhint("Raise max_worker_processes (a restart) or delaysched.max_workers, or lower delaysched.workers.")));
	}
	reported_wanted = wanted;
	reported_granted = granted;
	reported_ceiling = slot_ceiling;
}

/*
 * Entry d is left without a scanner for lack of budget or slots, or not
 * (waiting): record it for sched.cluster, and say so when it changes.
 */
static void
report_waiting(int d, Oid dboid, DatabaseWaiting waiting)
{
	LWLockAcquire(delaysched_cluster->lock, LW_EXCLUSIVE);
	delaysched_cluster->databases[d].waiting = waiting;
	LWLockRelease(delaysched_cluster->lock);
	if (waiting == locals[d].reported_waiting)
		return;
	if (waiting == DATABASE_WAITING_BUDGET)
		ereport(LOG,
				(errmsg("delaysched: database \"%s\" waits for a scanner: the budget is spent",
						seen_name(dboid)),
				 errdetail("delaysched.max_workers (%d) and max_worker_processes (%d) leave room for fewer scanners than there are databases to serve.",
						   delaysched_max_workers, max_worker_processes),
				 errhint("Raise max_worker_processes (a restart) or delaysched.max_workers.")));
	else if (waiting == DATABASE_WAITING_SLOT)
		ereport(LOG,
				(errmsg("delaysched: database \"%s\" waits for a scanner: the server has no background worker slot free",
						seen_name(dboid)),
				 errdetail("Other processes hold the slots of max_worker_processes (%d) that delaysched's budget counts on.",
						   max_worker_processes),
				 errhint("Raise max_worker_processes (a restart).")));
	else if (locals[d].reported_waiting != DATABASE_WAITING_NONE)
		ereport(LOG,
				(errmsg("delaysched: database \"%s\" no longer waits for a scanner",
						seen_name(dboid))));
	locals[d].reported_waiting = waiting;
}

/* Say once per failure count that a database's workers keep ending early. */
static void
report_failures(int d, Oid dboid)
{
	int			failures;
	TimestampTz retry_at;

	LWLockAcquire(delaysched_cluster->lock, LW_SHARED);
	failures = delaysched_cluster->databases[d].failures;
	retry_at = delaysched_cluster->databases[d].retry_at;
	LWLockRelease(delaysched_cluster->lock);
	if (failures == locals[d].reported_failures)
		return;
	locals[d].reported_failures = failures;
	if (failures >= 2 && (failures & (failures - 1)) == 0)
		ereport(LOG,
				(errmsg("delaysched: the workers of database \"%s\" ended early %d times in a row; the next start waits until %s",
						seen_name(dboid), failures, timestamptz_to_str(retry_at)),
				 errhint("The server log says why they ended.")));
}

/*
 * One round: stop what must stop, grant and start what must run.  Returns
 * when to look again at the latest.
 */
static TimestampTz
launch(TimestampTz now)
{
	int			active[DELAYSCHED_MAX_DATABASES];
	Oid			active_oid[DELAYSCHED_MAX_DATABASES];
	static Grant tried_grant[DELAYSCHED_MAX_DATABASES];
	static Grant shown_grant[DELAYSCHED_MAX_DATABASES];
	static Grant budget_grant[DELAYSCHED_MAX_DATABASES];
	int			nactive = 0;
	int			budget = Min(delaysched_max_workers, max_worker_processes - 2);
	int			tried;
	int			budget_granted = 0;
	int			tried_granted = 0;
	int			nprobe = count_to_probe();
	int			wanted;
	int			granted = 0;
	int			stopped = 0;
	bool		refused = false;
	TimestampTz next = now + LAUNCHER_NAP_MS * (TimestampTz) 1000;
	int			n = delaysched_cluster->max_databases;

	budget = Max(budget, 0);
	for (int d = 0; d < n; d++)
	{
		DatabaseEntry *entry = &delaysched_cluster->databases[d];
		Oid			dboid;
		DatabaseWant want;
		pid_t		leaving_for;
		TimestampTz retry_at;

		LWLockAcquire(delaysched_cluster->lock, LW_SHARED);
		dboid = pg_atomic_read_u32(&entry->dboid);
		want = entry->want;
		leaving_for = entry->leaving_for;
		retry_at = entry->retry_at;
		LWLockRelease(delaysched_cluster->lock);

		if (locals[d].dboid != dboid)
			forget_local(d, dboid);
		if (!OidIsValid(dboid))
			continue;
		for (int k = 0; k < WORKER_KINDS; k++)
			for (int i = 0; i < DELAYSCHED_MAX_WORKERS; i++)
				reap(&locals[d].workers[k][i], d, now);
		report_failures(d, dboid);

		if (want != DATABASE_SERVE || leaving_for != 0)
		{
			stop_entry(d, want != DATABASE_SERVE);
			continue;
		}
		if (retry_at > now)
			next = Min(next, retry_at);
		active[nactive] = d;
		active_oid[nactive] = dboid;
		nactive++;
	}

	/*
	 * The budget, under the ceiling the slots set (shown in sched.cluster
	 * and the log); once every SLOT_RETRY_SECS, one worker more is tried
	 * for: granted and started if the postmaster has a slot, but shown only
	 * once it is had.
	 */
	tried = slot_ceiling;
	if (slot_ceiling >= 0 && now - slot_tried_at >= SLOT_RETRY_SECS * USECS_PER_SEC)
	{
		tried = slot_ceiling + 1;
		slot_tried_at = now;
	}
	(void) grant(nactive, nprobe, budget, -1, budget_grant);
	wanted = grant(nactive, nprobe, budget, slot_ceiling, shown_grant);
	(void) grant(nactive, nprobe, budget, tried, tried_grant);
	for (int a = 0; a < nactive; a++)
	{
		DatabaseEntry *entry = &delaysched_cluster->databases[active[a]];

		LWLockAcquire(delaysched_cluster->lock, LW_EXCLUSIVE);
		entry->scanners_granted = shown_grant[a][WORKER_SCANNER];
		entry->http_granted = shown_grant[a][WORKER_HTTP];
		entry->sql_granted = shown_grant[a][WORKER_SQL];
		LWLockRelease(delaysched_cluster->lock);
		for (int k = 0; k < WORKER_KINDS; k++)
		{
			granted += shown_grant[a][k];
			budget_granted += budget_grant[a][k];
			tried_granted += tried_grant[a][k];
		}
	}
	/*
	 * Stop first, start next time: the slots of the workers stopped are the
	 * postmaster's again only once they have exited (which wakes the
	 * launcher).
	 */
	for (int a = 0; a < nactive; a++)
		stopped += trim_entry(active[a], tried_grant[a]);
	if (stopped == 0)
		refused = !fill(active, active_oid, nactive, tried_grant, now);

	/*
	 * The postmaster refused a slot: what the launcher holds now is the
	 * ceiling (unless a probe holds one: it is about to give it back, and
	 * its exit wakes the launcher).  Or it refused none: the launcher holds
	 * what it tried for, and the ceiling, if any, rises to it.
	 */
	if (refused && probe_in_flight())
		refused = false;
	else if (refused)
	{
		slot_ceiling = held_workers();
		slot_tried_at = now;
	}
	else if (slot_ceiling >= 0 && stopped == 0)
	{
		/*
		 * fill() started every worker tried for: the ceiling rises to what
		 * is held, and is gone once it holds back nothing.
		 */
		slot_ceiling = Max(slot_ceiling, held_workers());
		if (tried_granted >= budget_granted)
			slot_ceiling = -1;
	}

	/*
	 * The shortfall, but not while a probe is due (it may find more), nor
	 * when a slot was just refused (the next round, with the ceiling, has
	 * the figures).
	 */
	if (nprobe == 0 && !refused)
		report_shortfall(wanted, granted, budget, granted < budget_granted);

	/* Which databases have no scanner for lack of budget or of slots. */
	for (int a = 0; a < nactive; a++)
	{
		int			d = active[a];
		DatabaseWaiting waiting = DATABASE_WAITING_NONE;

		if (delaysched_workers == 0)
			;					/* no database has a scanner to wait for */
		else if (shown_grant[a][WORKER_SCANNER] == 0)
			waiting = budget_grant[a][WORKER_SCANNER] > 0 ? DATABASE_WAITING_SLOT : DATABASE_WAITING_BUDGET;
		else if (refused)
		{
			DatabasePids pids;

			delaysched_database_pids(d, &pids);
			if (!running(pids.pid[WORKER_SCANNER][0], &locals[d].workers[WORKER_SCANNER][0]))
				waiting = DATABASE_WAITING_SLOT;
		}
		report_waiting(d, active_oid[a], waiting);
	}
	launched_active = nactive;
	launched_stopped = stopped;
	return next;
}

/*
 * Start a probe in the next servable database that has no entry and was
 * not found empty, if no probe is in flight and no worker the last round
 * stopped is still on its way out (its slot is the probe's).  If the
 * postmaster has no slot for it, lower the ceiling by one (never below a
 * scanner for each database served), so that the next round stops the
 * last-granted worker to make room.
 */
static void
probe_next(TimestampTz now)
{
	if (probe != NULL)
	{
		pid_t		pid;

		if (GetBackgroundWorkerPid(probe, &pid) != BGWH_STOPPED)
			return;
		pfree(probe);
		probe = NULL;
		if (delaysched_find_database(probe_oid) < 0)
			note_probed_empty(probe_oid);
	}
	if (launched_stopped > 0)
		return;
	for (int i = 0; i < nseen; i++)
	{
		int			held;
		int			firsts;

		if (!to_probe(i))
			continue;
		probe = start_worker("delaysched_probe_main", "probe", 0, seen[i].oid, -1);
		probe_oid = seen[i].oid;
		if (probe != NULL)
		{
			probe_refused_oid = InvalidOid;
			return;
		}

		held = held_workers();
		firsts = delaysched_workers > 0 ? launched_active : 0;
		if (held - 1 >= firsts && (slot_ceiling < 0 || held - 1 < slot_ceiling))
		{
			slot_ceiling = held - 1;
			slot_tried_at = now;
			pg_atomic_write_u32(&delaysched_cluster->rescan, 1);
		}
		if (probe_refused_oid != seen[i].oid)
			ereport(LOG,
					(errmsg("delaysched: the server had no background worker slot free to look for the extension in database \"%s\"",
							NameStr(seen[i].name)),
					 held - 1 >= firsts
					 ? errdetail("One of delaysched's %d workers is stopped to make room.", held)
					 : errdetail("Other processes hold the slots of max_worker_processes (%d) that delaysched's workers, a scanner for each database served, leave.",
								 max_worker_processes),
					 errhint("Raise max_worker_processes (a restart).")));
		probe_refused_oid = seen[i].oid;
		return;
	}
}

static void
launcher_detach(int code, Datum arg)
{
	LWLockAcquire(delaysched_cluster->lock, LW_EXCLUSIVE);
	if (delaysched_cluster->launcher_pid == MyProcPid)
		delaysched_cluster->launcher_pid = 0;
	LWLockRelease(delaysched_cluster->lock);
}

/*
 * Wait until "until" (at most LAUNCHER_NAP_MS), a latch or a rescan,
 * stepping the load control (stats/load.c) whenever it asks meanwhile: its
 * samples are taken every few milliseconds while deliveries flow, far more
 * often than the launcher has other work.
 */
static void
nap(TimestampTz until)
{
	TimestampTz now = GetCurrentTimestamp();

	until = Min(until, TimestampTzPlusMilliseconds(now, LAUNCHER_NAP_MS));
	while (now < until && pg_atomic_read_u32(&delaysched_cluster->rescan) == 0 &&
		   !ConfigReloadPending)
	{
		TimestampTz wake = Min(until, delaysched_load_step(now));
		long		timeout_ms;
		int			rc;

		now = GetCurrentTimestamp();
		timeout_ms = wake <= now ? 0 : (long) ((wake - now + 999) / 1000);
		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					   Max(timeout_ms, 1), PG_WAIT_EXTENSION);
		/* Reset only a latch seen set: one set since is seen next time. */
		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			break;
		}
		CHECK_FOR_INTERRUPTS();
		now = GetCurrentTimestamp();
	}
}

/*
 * Entry point of the launcher.
 */
void
delaysched_launcher_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* No database: the shared catalogs only. */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("delaysched launcher");

	LWLockAcquire(delaysched_cluster->lock, LW_EXCLUSIVE);
	delaysched_cluster->launcher_pid = MyProcPid;
	delaysched_cluster->launcher_latch = MyLatch;
	LWLockRelease(delaysched_cluster->lock);
	before_shmem_exit(launcher_detach, (Datum) 0);

	locals = MemoryContextAllocZero(TopMemoryContext,
									sizeof(EntryLocal) * delaysched_cluster->max_databases);
	for (int d = 0; d < delaysched_cluster->max_databases; d++)
		locals[d].dboid = pg_atomic_read_u32(&delaysched_cluster->databases[d].dboid);

	if (delaysched_database_is_set())
		ereport(WARNING,
				(errmsg("delaysched.database is deprecated: use delaysched.databases"),
				 errdetail("While delaysched.databases is \"*\", delaysched.database names the one database served.")));

	for (;;)
	{
		TimestampTz now;
		TimestampTz next;

		CHECK_FOR_INTERRUPTS();
		reload_if_asked();
		(void) pg_atomic_exchange_u32(&delaysched_cluster->rescan, 0);

		pgstat_report_activity(STATE_RUNNING, "delaysched: reading pg_database");
		scan_databases();
		pgstat_report_activity(STATE_IDLE, NULL);
		reconcile_entries();
		forget_probed_empty();
		now = GetCurrentTimestamp();
		next = launch(now);
		probe_next(now);

		nap(Max(next, TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 10)));
	}
}

/*
 * Entry point of a probe: is the extension installed in the database
 * (bgw_extra) the launcher started it for?  If so, take an entry for it.
 */
void
delaysched_probe_main(Datum main_arg)
{
	DelayschedWorkerArgs args;
	bool		installed;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof(args));
	BackgroundWorkerInitializeConnectionByOid(args.dboid, InvalidOid, 0);
	pgstat_report_appname("delaysched probe");

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	installed = delaysched_extension_installed();
	CommitTransactionCommand();

	if (installed)
		(void) delaysched_serve_database(MyDatabaseId);
	proc_exit(0);
}
