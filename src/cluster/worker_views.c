/*-------------------------------------------------------------------------
 *
 * worker_views.c
 *		sched._workers(): what the current database's scanner workers are
 *		doing and which range each works on, and what its HTTP workers have
 *		in flight, read from shared memory, for the sched.workers view; and
 *		sched._cluster(): the launcher and every database served, for the
 *		sched.cluster view.
 *
 * PostgreSQL checks EXECUTE on a function a view calls against the role
 * reading the view, so both functions are executable by PUBLIC, and each
 * checks for itself who may read it: sched._workers() a role that may
 * read sched.workers, sched._cluster() superusers and pg_monitor.
 *
 * IDENTIFICATION
 *	  src/cluster/worker_views.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "base/guc.h"
#include "base/shmem.h"
#include "cluster/cluster.h"
#include "stats/stats.h"

PG_FUNCTION_INFO_V1(delaysched_worker_status);
PG_FUNCTION_INFO_V1(delaysched_cluster_status);

#define WORKERS_COLUMNS 8

static const char *
status_name(ScannerStatus status)
{
	switch (status)
	{
		case SCANNER_STOPPED:
			return "stopped";
		case SCANNER_WAITING_FOR_EXTENSION:
			return "waiting for extension";
		case SCANNER_DELIVERING:
			return "delivering";
		case SCANNER_SLEEPING:
			return "sleeping";
	}
	return "unknown";
}

static void
require_shared_memory(void)
{
	if (delaysched_cluster == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delaysched must be loaded via \"shared_preload_libraries\"")));
}

/* A row for a worker that does not run (its database not served). */
static void
put_stopped(ReturnSetInfo *rsinfo, int worker, const char *role)
{
	Datum		values[WORKERS_COLUMNS];
	bool		nulls[WORKERS_COLUMNS];

	memset(nulls, true, sizeof(nulls));
	values[0] = Int32GetDatum(worker);
	nulls[0] = false;
	values[2] = CStringGetTextDatum(role);
	nulls[2] = false;
	values[4] = CStringGetTextDatum(status_name(SCANNER_STOPPED));
	nulls[4] = false;
	values[6] = Int64GetDatum(0);
	nulls[6] = false;
	values[7] = Int64GetDatum(0);
	nulls[7] = false;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * Refuse a current user that may not read view sched.<view>, as a query of
 * the view would (the view's own check: inside a SECURITY DEFINER function
 * it is the function's owner that must).
 */
static void
require_view_privilege(const char *view)
{
	Oid			relid = get_relname_relid(view, get_namespace_oid("sched", false));

	if (!OidIsValid(relid) || pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_VIEW, view);
}

/*
 * sched._workers() RETURNS TABLE(worker int, pid int, role text, holds text,
 *		state text, last_tick timestamptz, delivered bigint, ticks bigint)
 *
 * The current database's workers (base/shmem.h): one row per scanner worker
 * (delaysched.workers of them), then one per HTTP worker
 * (delaysched.http_workers), then one per SQL worker
 * (delaysched.sql_workers), numbered in that order; in a database not
 * served, every one stopped.  The
 * columns mean the same for both kinds: state is stopped, waiting for
 * extension, delivering (a scanner in a tick or the drain, an HTTP worker
 * with requests in flight) or sleeping; last_tick is when the latest unit
 * of work began (a tick; a claim or a hand-off taken), ticks how many
 * there were, and delivered the tasks delivered (an HTTP worker's: the
 * requests answered 2xx).  holds is what the worker has in hand: a
 * scanner's range or the drain, an HTTP worker's "N in flight of M; W
 * waiting for their receivers; H handed over, C claimed" (W of the N wait
 * for their receiver's allowance; the requests started from scanners'
 * hand-offs and from its own claims), an SQL worker's "job N" while it
 * runs one.  An
 * SQL worker is delivering while a job runs; its delivered are the runs
 * that committed, its ticks the runs ended, its last_tick the latest claim.
 *
 * For a role that may read sched.workers.  Takes workers_lock and each
 * HTTP worker's lock (see Locks in base/shmem.h) shared, one slot at a
 * time; the counters are atomics, read without them.
 */
Datum
delaysched_worker_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	bool		served;

	require_shared_memory();
	require_view_privilege("workers");
	InitMaterializedSRF(fcinfo, 0);
	served = delaysched_current_database();

	for (int i = 0; i < delaysched_workers; i++)
	{
		Datum		values[WORKERS_COLUMNS];
		bool		nulls[WORKERS_COLUMNS];
		WorkerSlot *shared = &delaysched_shared->workers[i];
		pid_t		pid;
		ScannerStatus status;
		int			range;
		bool		draining;
		TimestampTz last_tick;

		if (!served)
		{
			put_stopped(rsinfo, i, "scanner");
			continue;
		}
		LWLockAcquire(delaysched_shared->workers_lock, LW_SHARED);
		pid = shared->pid;
		status = shared->status;
		range = shared->range;
		draining = shared->draining;
		LWLockRelease(delaysched_shared->workers_lock);
		last_tick = delaysched_read_time(&shared->last_tick);

		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(i);
		values[1] = Int32GetDatum((int32) pid);
		nulls[1] = (pid == 0);
		values[2] = CStringGetTextDatum("scanner");
		if (range >= 0)
			values[3] = CStringGetTextDatum(psprintf("range %d", range));
		else if (draining)
			values[3] = CStringGetTextDatum("drain");
		else
			nulls[3] = true;
		values[4] = CStringGetTextDatum(status_name(pid == 0 ? SCANNER_STOPPED : status));
		values[5] = TimestampTzGetDatum(last_tick);
		nulls[5] = (last_tick == 0);
		values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&shared->delivered));
		values[7] = Int64GetDatum((int64) pg_atomic_read_u64(&shared->ticks));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}

	for (int i = 0; i < delaysched_http_workers; i++)
	{
		Datum		values[WORKERS_COLUMNS];
		bool		nulls[WORKERS_COLUMNS];
		HttpWorkerSlot *shared = &delaysched_http_slots[i];
		pid_t		pid;
		int			in_flight;
		int			waiting;
		int			max_in_flight;
		TimestampTz last_claim;

		if (!served)
		{
			put_stopped(rsinfo, delaysched_workers + i, "http");
			continue;
		}
		/* Not the ring. */
		LWLockAcquire(shared->lock, LW_SHARED);
		pid = shared->pid;
		in_flight = shared->in_flight;
		waiting = shared->waiting;
		max_in_flight = shared->max_in_flight;
		LWLockRelease(shared->lock);
		last_claim = delaysched_read_time(&shared->last_claim);

		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(delaysched_workers + i);
		values[1] = Int32GetDatum((int32) pid);
		nulls[1] = (pid == 0);
		values[2] = CStringGetTextDatum("http");
		values[3] = CStringGetTextDatum(psprintf("%d in flight of %d; %d waiting for their receivers; "
												 INT64_FORMAT " handed over, " INT64_FORMAT " claimed",
												 in_flight, max_in_flight, waiting,
												 (int64) pg_atomic_read_u64(&shared->handed),
												 (int64) pg_atomic_read_u64(&shared->claimed)));
		nulls[3] = (pid == 0);
		values[4] = CStringGetTextDatum(status_name(pid == 0 ? SCANNER_STOPPED :
													in_flight > 0 ? SCANNER_DELIVERING : SCANNER_SLEEPING));
		values[5] = TimestampTzGetDatum(last_claim);
		nulls[5] = (last_claim == 0);
		values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&shared->succeeded));
		values[7] = Int64GetDatum((int64) pg_atomic_read_u64(&shared->ticks));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}

	for (int i = 0; i < delaysched_sql_workers; i++)
	{
		Datum		values[WORKERS_COLUMNS];
		bool		nulls[WORKERS_COLUMNS];
		int			number = delaysched_workers + delaysched_http_workers + i;
		SqlWorkerSlot *shared = &delaysched_shared->sql_workers[i];
		pid_t		pid;
		uint64		running;
		TimestampTz last_claim;

		if (!served)
		{
			put_stopped(rsinfo, number, "sql");
			continue;
		}
		LWLockAcquire(delaysched_shared->workers_lock, LW_SHARED);
		pid = shared->pid;
		LWLockRelease(delaysched_shared->workers_lock);
		running = pg_atomic_read_u64(&shared->running);
		last_claim = delaysched_read_time(&shared->last_claim);

		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(number);
		values[1] = Int32GetDatum((int32) pid);
		nulls[1] = (pid == 0);
		values[2] = CStringGetTextDatum("sql");
		values[3] = CStringGetTextDatum(psprintf("job " INT64_FORMAT, (int64) running));
		nulls[3] = (pid == 0 || running == 0);
		values[4] = CStringGetTextDatum(status_name(pid == 0 ? SCANNER_STOPPED :
													running != 0 ? SCANNER_DELIVERING : SCANNER_SLEEPING));
		values[5] = TimestampTzGetDatum(last_claim);
		nulls[5] = (last_claim == 0);
		values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&shared->succeeded));
		values[7] = Int64GetDatum((int64) pg_atomic_read_u64(&shared->runs));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

#define CLUSTER_COLUMNS 21
/* The first of the launcher's load control columns (load_columns). */
#define CLUSTER_FLOW_CONTROL 14

/*
 * The earliest time pointer of database entry d's ranges; DT_NOEND if none
 * known.  Takes the entry's ranges_lock shared, the one reader of the
 * ranges that is not a worker (see Locks in base/shmem.h).
 */
static TimestampTz
oldest_pointer(int d)
{
	DelayschedShared *shared = delaysched_database_area(d);
	TimestampTz oldest = DT_NOEND;

	LWLockAcquire(shared->ranges_lock, LW_SHARED);
	for (int r = 0; r < shared->nranges; r++)
		if (shared->ranges[r].pointer != DT_NOBEGIN)
			oldest = Min(oldest, shared->ranges[r].pointer);
	LWLockRelease(shared->ranges_lock);
	return oldest;
}

/*
 * The launcher's row's load control columns (stats/load.c): "off", "open"
 * (deliveries not held back), "starting" (a slow start) or "holding back"
 * (cut), the deliveries per second
 * measured over the last second and allowed (NULL while not held back),
 * and the busy client sessions, now and usually (NULL until enough quiet
 * was seen for the usual number to count); while holding back, why ("busy
 * sessions", "standby lag" or both), and the watched standbys' replay lag
 * in bytes (NULL if none is watched).
 */
static void
load_columns(Datum *values, bool *nulls)
{
	LoadStatus	load;

	delaysched_load_status(&load);
	values[CLUSTER_FLOW_CONTROL] = CStringGetTextDatum(!load.enabled ? "off" :
													   load.phase == LOAD_HOLDING ? "holding back" :
													   load.phase == LOAD_STARTING ? "starting" : "open");
	nulls[CLUSTER_FLOW_CONTROL] = false;
	values[CLUSTER_FLOW_CONTROL + 1] = Float8GetDatum(load.rate);
	nulls[CLUSTER_FLOW_CONTROL + 1] = !load.enabled;
	values[CLUSTER_FLOW_CONTROL + 2] = Float8GetDatum(load.allowance);
	nulls[CLUSTER_FLOW_CONTROL + 2] = !(load.enabled && load.phase != LOAD_OPEN);
	values[CLUSTER_FLOW_CONTROL + 3] = Float8GetDatum(load.busy);
	nulls[CLUSTER_FLOW_CONTROL + 3] = !load.enabled;
	values[CLUSTER_FLOW_CONTROL + 4] = Float8GetDatum(load.usual);
	nulls[CLUSTER_FLOW_CONTROL + 4] = !(load.enabled && load.usual_known);
	nulls[CLUSTER_FLOW_CONTROL + 5] = !(load.enabled && load.phase == LOAD_HOLDING && load.held_by != 0);
	if (!nulls[CLUSTER_FLOW_CONTROL + 5])
		values[CLUSTER_FLOW_CONTROL + 5] =
			CStringGetTextDatum(load.held_by == (LOAD_BY_BUSY_SESSIONS | LOAD_BY_STANDBY_LAG) ?
								"busy sessions, standby lag" :
								load.held_by == LOAD_BY_STANDBY_LAG ? "standby lag" : "busy sessions");
	values[CLUSTER_FLOW_CONTROL + 6] = Int64GetDatum(load.standby_lag);
	nulls[CLUSTER_FLOW_CONTROL + 6] = !(load.enabled && load.standby_lag >= 0);
}

/*
 * sched._cluster() RETURNS TABLE(role text, database name, pid int,
 *		state text, scanners int, scanners_granted int, http_workers int,
 *		http_granted int, failures int, next_start timestamptz,
 *		pointer_lag interval, served_since timestamptz, sql_workers int,
 *		sql_granted int, flow_control text, deliveries_per_second float8,
 *		deliveries_allowed float8, busy_sessions float8,
 *		usual_busy_sessions float8, held_back_by text,
 *		standby_lag_bytes bigint)
 *
 * The launcher, then every database in the table of databases served
 * (base/shmem.h), for the sched.cluster view; superusers and members of
 * pg_monitor only, as the session's role (see base/caller.c).  Takes the
 * cluster's lock shared to copy each entry, then, with it released, the
 * entry's workers_lock, HTTP slot locks and ranges_lock shared, one at a
 * time.
 */
Datum
delaysched_cluster_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			caller = GetOuterUserId();
	TimestampTz now = GetCurrentTimestamp();
	Datum		values[CLUSTER_COLUMNS];
	bool		nulls[CLUSTER_COLUMNS];
	pid_t		launcher_pid;

	require_shared_memory();
	if (!superuser_arg(caller) && !has_privs_of_role(caller, ROLE_PG_MONITOR))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to read the databases delaysched serves"),
				 errhint("Only superusers and members of pg_monitor may.")));
	InitMaterializedSRF(fcinfo, 0);

	LWLockAcquire(delaysched_cluster->lock, LW_SHARED);
	launcher_pid = delaysched_cluster->launcher_pid;
	LWLockRelease(delaysched_cluster->lock);
	memset(nulls, true, sizeof(nulls));
	values[0] = CStringGetTextDatum("launcher");
	nulls[0] = false;
	values[2] = Int32GetDatum((int32) launcher_pid);
	nulls[2] = (launcher_pid == 0);
	values[3] = CStringGetTextDatum(launcher_pid != 0 ? "running" : "stopped");
	nulls[3] = false;
	load_columns(values, nulls);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);

	for (int d = 0; d < delaysched_cluster->max_databases; d++)
	{
		DatabaseEntry entry;
		Oid			dboid;
		char	   *name;
		DatabasePids pids;
		TimestampTz oldest;
		const char *state;

		LWLockAcquire(delaysched_cluster->lock, LW_SHARED);
		dboid = pg_atomic_read_u32(&delaysched_cluster->databases[d].dboid);
		entry.want = delaysched_cluster->databases[d].want;
		entry.leaving_for = delaysched_cluster->databases[d].leaving_for;
		entry.scanners_granted = delaysched_cluster->databases[d].scanners_granted;
		entry.http_granted = delaysched_cluster->databases[d].http_granted;
		entry.sql_granted = delaysched_cluster->databases[d].sql_granted;
		entry.waiting = delaysched_cluster->databases[d].waiting;
		entry.failures = delaysched_cluster->databases[d].failures;
		entry.retry_at = delaysched_cluster->databases[d].retry_at;
		entry.served_since = delaysched_cluster->databases[d].served_since;
		LWLockRelease(delaysched_cluster->lock);
		if (!OidIsValid(dboid))
			continue;
		name = get_database_name(dboid);
		delaysched_database_pids(d, &pids);
		oldest = oldest_pointer(d);

		if (entry.want != DATABASE_SERVE)
			state = "stopping";
		else if (entry.leaving_for != 0)
			state = "leaving";
		else if (entry.retry_at > now && pids.count[WORKER_SCANNER] == 0)
			state = "backing off";
		else if (entry.waiting == DATABASE_WAITING_SLOT && pids.count[WORKER_SCANNER] == 0)
			state = "waiting for a slot";
		else if (entry.waiting == DATABASE_WAITING_BUDGET && pids.count[WORKER_SCANNER] == 0)
			state = "waiting for budget";
		else
			state = "served";

		memset(nulls, false, sizeof(nulls));
		values[0] = CStringGetTextDatum("database");
		values[1] = DirectFunctionCall1(namein, CStringGetDatum(name != NULL ? name : psprintf("%u", dboid)));
		nulls[2] = true;
		values[3] = CStringGetTextDatum(state);
		values[4] = Int32GetDatum(pids.count[WORKER_SCANNER]);
		values[5] = Int32GetDatum(entry.scanners_granted);
		values[6] = Int32GetDatum(pids.count[WORKER_HTTP]);
		values[7] = Int32GetDatum(entry.http_granted);
		values[8] = Int32GetDatum(entry.failures);
		values[9] = TimestampTzGetDatum(entry.retry_at);
		nulls[9] = entry.retry_at <= now;
		if (oldest == DT_NOEND || oldest > now)
			nulls[10] = true;
		else
			values[10] = DirectFunctionCall2(timestamp_mi, TimestampTzGetDatum(now),
											 TimestampTzGetDatum(oldest));
		values[11] = TimestampTzGetDatum(entry.served_since);
		values[12] = Int32GetDatum(pids.count[WORKER_SQL]);
		values[13] = Int32GetDatum(entry.sql_granted);
		for (int c = CLUSTER_FLOW_CONTROL; c < CLUSTER_COLUMNS; c++)
			nulls[c] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
