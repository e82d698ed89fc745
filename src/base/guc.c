/*-------------------------------------------------------------------------
 *
 * guc.c
 *		Definitions of the delaysched.* configuration parameters.
 *
 * Every parameter is documented in doc/configuration.md; keep the two in
 * step.  Parameters the workers read are PGC_SIGHUP so that a reload changes
 * them without a restart, except those that size shared memory
 * (delaysched.max_databases, http_workers, max_biz_types).  The HTTP
 * perimeter's lists are PGC_SUSET: a superuser's session may try a list
 * out (sched.define_biz checks literal addresses against it), and the HTTP
 * workers take the server's at a reload.  The SQL
 * functions read delaysched.buckets, delaysched.ranges and
 * delaysched.max_payload_size with current_setting().
 *
 * Two developer options (out of the sample file, as PostgreSQL's own are)
 * exist for the test suite: a test that must see the full sweep or a
 * missing extension noticed shortens the period instead of sleeping
 * through a minute.
 *
 * IDENTIFICATION
 *	  src/base/guc.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "commands/dbcommands.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/guc.h"
#include "utils/varlena.h"

#include "compat.h"
#include "base/guc.h"
#include "base/shmem.h"

char	   *delaysched_databases = NULL;
char	   *delaysched_database = NULL;
char	   *delaysched_router_database = NULL;
int			delaysched_router_follow_interval_ms = 1000;
int			delaysched_max_databases = 64;
int			delaysched_max_workers = 64;
int			delaysched_batch_size = 1000;
int			delaysched_sweep_interval_ms = 1000;
int			delaysched_retention_s = 3600;
int			delaysched_dead_retention_s = 7 * 24 * 3600;
int			delaysched_xmin_warning_s = 300;
int			delaysched_buckets = 60;
int			delaysched_ranges = 8;
int			delaysched_workers = 2;
int			delaysched_max_payload_kb = 1024;
int			delaysched_max_biz_types = 1000;
int			delaysched_max_keys = 100000;
int			delaysched_max_stats_types = 1000;
double		delaysched_max_deliveries_per_second = 0;
bool		delaysched_load_control = false;
bool		delaysched_consumer_pace = true;
double		delaysched_load_max_slowdown = 1.25;
double		delaysched_load_min_deliveries_per_second = 100;
int			delaysched_load_max_standby_lag_kb = 65536;
int			delaysched_load_standbys = LOAD_STANDBYS_SYNCHRONOUS;

static const struct config_enum_entry load_standbys_options[] = {
	{"synchronous", LOAD_STANDBYS_SYNCHRONOUS, false},
	{"all", LOAD_STANDBYS_ALL, false},
	{NULL, 0, false}
};
int			delaysched_http_workers = 1;
int			delaysched_sql_workers = 2;
int			delaysched_http_max_in_flight = 1000;
int			delaysched_http_max_in_flight_per_host = 256;
int			delaysched_full_sweep_interval_ms = 60 * 1000;
int			delaysched_extension_recheck_ms = 10 * 1000;
int			delaysched_debug_commit_wakeup_delay_ms = 0;

/* delaysched.databases: "*" or a list of names. */
static bool
delaysched_check_database_list(char **newval, void **extra, GucSource source)
{
	char	   *copy = pstrdup(*newval);
	List	   *names = NIL;
	bool		ok = SplitGUCList(copy, ',', &names);

	if (!ok)
		GUC_check_errdetail("The value must be \"*\" or a comma-separated list of database names.");
	list_free(names);
	pfree(copy);
	return ok;
}

/*
 * delaysched.database counts only if someone set it.  Its built-in value,
 * "postgres", is 0.1's, which the SQL functions of a database still at 0.1
 * compare with current_database(); left alone, it must not restrict what
 * 0.2 serves.  The check hook is told where a value comes from; the assign
 * hook keeps that.
 */
static bool delaysched_database_set = false;

static bool
delaysched_check_database(char **newval, void **extra, GucSource source)
{
	bool	   *set = delaysched_guc_extra_alloc(sizeof(bool));	/* GUC frees it */

	if (set == NULL)
		return false;
	*set = source > PGC_S_DEFAULT;
	*extra = set;
	return true;
}

static void
delaysched_assign_database(const char *newval, void *extra)
{
	delaysched_database_set = extra != NULL && *(bool *) extra;
}

/* Was the deprecated delaysched.database set (and not empty)? */
bool
delaysched_database_is_set(void)
{
	return delaysched_database_set && delaysched_database != NULL && delaysched_database[0] != '\0';
}

/*
 * Does delaysched serve the database called "name", as far as the
 * configuration says?  (The extension must be installed there too.)
 * delaysched.databases decides; while it is "*", the deprecated
 * delaysched.database, if set, names the one database.
 */
bool
delaysched_database_listed(const char *name)
{
	char	   *copy;
	List	   *names = NIL;
	ListCell   *lc;
	bool		listed = false;

	if (delaysched_databases == NULL || strcmp(delaysched_databases, "*") == 0)
		return !delaysched_database_is_set() || strcmp(delaysched_database, name) == 0;
	copy = pstrdup(delaysched_databases);
	if (SplitGUCList(copy, ',', &names))
		foreach(lc, names)
			if (strcmp((const char *) lfirst(lc), "*") == 0 ||
				strcmp((const char *) lfirst(lc), name) == 0)
				listed = true;
	list_free(names);
	pfree(copy);
	return listed;
}

PG_FUNCTION_INFO_V1(delaysched_database_listed_sql);

/*
 * sched._database_listed() RETURNS boolean
 *
 * Does the configuration let delaysched serve the current database?
 * (sched.add refuses tasks it would never deliver.)
 */
Datum
delaysched_database_listed_sql(PG_FUNCTION_ARGS)
{
	char	   *name = get_database_name(MyDatabaseId);

	PG_RETURN_BOOL(name != NULL && delaysched_database_listed(name));
}

/*
 * Define every delaysched.* parameter but the HTTP perimeter's two, which
 * http/http_perimeter.c defines beside their hooks.  Called once from
 * _PG_init, which then reserves the prefix.
 */
void
delaysched_define_gucs(void)
{
	DefineCustomStringVariable("delaysched.databases",
							   "Databases delaysched serves: \"*\" (every database where the extension is installed) or a comma-separated list.",
							   "A database must also have the extension installed; sched.add refuses to schedule tasks elsewhere.",
							   &delaysched_databases,
							   "*",
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   delaysched_check_database_list, NULL, NULL);

	DefineCustomStringVariable("delaysched.router_database",
							   "A database of this server with delaysched_router whose nodes a worker follows.",
							   "The worker runs sched.follow_nodes() there every delaysched.router_follow_interval; "
							   "empty: no such worker.",
							   &delaysched_router_database,
							   "",
							   PGC_POSTMASTER,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.router_follow_interval",
							"How often the router's worker runs a round of sched.follow_nodes().",
							"A node that stops answering gives its share of the split limits to the others "
							"within its lease and a round.",
							&delaysched_router_follow_interval_ms,
							1000, 100, 60 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("delaysched.database",
							   "Deprecated: one database to serve, as delaysched.databases = that name.",
							   "Used only while delaysched.databases is \"*\", and only if set.",
							   &delaysched_database,
							   "postgres",
							   PGC_SIGHUP,
							   0,
							   delaysched_check_database, delaysched_assign_database, NULL);

	DefineCustomIntVariable("delaysched.max_databases",
							"Most databases delaysched serves at once.",
							"Each has its ranges, workers and hand-off rings in shared memory; "
							"CREATE EXTENSION refuses a database beyond this many.",
							&delaysched_max_databases,
							64, 1, DELAYSCHED_MAX_DATABASES,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.max_workers",
							"Most delaysched workers (scanners and HTTP workers) across all databases.",
							"The launcher also leaves max_worker_processes room for itself and for one "
							"short-lived probe.  When short, every database gets one scanner before any gets two.",
							&delaysched_max_workers,
							64, 1, 4096,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.batch_size",
							"Most tasks delivered in one worker transaction.",
							"Smaller batches commit (and so notify) sooner; larger ones cost less per task.",
							&delaysched_batch_size,
							1000, 1, 100000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.sweep_interval",
							"How often the worker runs its backstop sweep.",
							"The sweep delivers tasks added behind the time pointer, expires "
							"unacknowledged deliveries and removes finished tasks past their retention.",
							&delaysched_sweep_interval_ms,
							1000, 10, 60 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.retention",
							"How long done and cancelled tasks stay visible in sched.tasks.",
							NULL,
							&delaysched_retention_s,
							3600, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.dead_retention",
							"How long dead tasks stay visible (and retryable) in sched.tasks.",
							NULL,
							&delaysched_dead_retention_s,
							7 * 24 * 3600, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.xmin_warning",
							"Warn when the xmin horizon has been held back this long; 0 never.",
							"A scanner names in the log the session, prepared transaction or "
							"replication slot that keeps dead rows from being removed.",
							&delaysched_xmin_warning_s,
							300, 0, INT_MAX / 2,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.buckets",
							"Number of task partitions (run-at second mod N), read by CREATE EXTENSION.",
							"Changing it later has no effect on an installed extension.",
							&delaysched_buckets,
							60, 1, 3600,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.ranges",
							"Number of ranges (door numbers) the scan is split into, read by CREATE EXTENSION.",
							"Each range has its own time pointer and is worked on by one worker at a time. "
							"Changing it later has no effect on an installed extension.",
							&delaysched_ranges,
							8, 1, DELAYSCHED_MAX_RANGES,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.workers",
							"Number of scanner workers per database served.",
							"They share the ranges; more workers drain a burst faster, up to the number of ranges.",
							&delaysched_workers,
							2, 1, DELAYSCHED_MAX_WORKERS,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.max_payload_size",
							"Largest task payload sched.add accepts.",
							NULL,
							&delaysched_max_payload_kb,
							1024, 1, 256 * 1024,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.max_biz_types",
							"Most business types with a rate limit at once.",
							"Each has a token bucket in shared memory; sched.define_biz refuses a rate "
							"limit beyond this many.",
							&delaysched_max_biz_types,
							1000, 16, 1000000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.max_keys",
							"Most keys with a token bucket at once (key_rate_limit), all databases together.",
							"A key's bucket is made when it first takes a token and dropped once it is full "
							"again; past this many busy buckets, a new key waits until one is.",
							&delaysched_max_keys,
							100000, 100, 10000000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.max_stats_types",
							"Most business types whose numbers are kept in shared memory, all databases together.",
							"sched.metrics() and sched.biz_stats read them; a database with more types "
							"counts its tables instead.",
							&delaysched_max_stats_types,
							1000, 16, 1000000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomRealVariable("delaysched.max_deliveries_per_second",
							 "Most notify deliveries per second across all business types; 0 for no cap.",
							 "Protects the database's other clients from a burst.  While it is set, "
							 "every type's due tasks are parked and shared out fairly by the drain.",
							 &delaysched_max_deliveries_per_second,
							 0, 0, 10000000,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("delaysched.consumer_pace",
							 "Holds a notify or pull type to what its consumers acknowledge in time.",
							 "An acknowledgement a quarter of ack_timeout later than the quickest, or a lease that runs "
							 "out, caps the deliveries awaiting acknowledgement; the cap grows again as they keep up.",
							 &delaysched_consumer_pace,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("delaysched.load_control",
							 "Slows deliveries down while they make the database's client sessions wait.",
							 "Compares the busy client sessions with their number while delaysched is quiet; "
							 "see delaysched.load_max_slowdown.",
							 &delaysched_load_control,
							 false,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomRealVariable("delaysched.load_max_slowdown",
							 "How much longer the client sessions' statements may take while deliveries run, as a factor.",
							 "Measured as busy client sessions against their usual number; above it, "
							 "deliveries per second are cut (delaysched.load_control).",
							 &delaysched_load_max_slowdown,
							 1.25, 1.0, 1000.0,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomRealVariable("delaysched.load_min_deliveries_per_second",
							 "Fewest deliveries per second that load control holds deliveries back to.",
							 NULL,
							 &delaysched_load_min_deliveries_per_second,
							 100, 1, 10000000,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.load_max_standby_lag",
							"Most WAL a watched standby may have left to replay before load control holds deliveries back.",
							"-1 leaves standbys out of load control; delaysched.load_standbys says which are watched.",
							&delaysched_load_max_standby_lag_kb,
							65536, -1, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("delaysched.load_standbys",
							 "Which standbys' replay lag load control watches: synchronous or all.",
							 "synchronous: those synchronous_standby_names lists; all: every streaming physical standby.",
							 &delaysched_load_standbys,
							 LOAD_STANDBYS_SYNCHRONOUS,
							 load_standbys_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.http_workers",
							"Number of HTTP workers per database served, which send the requests of http business types.",
							"Each drives many requests at once; 0 sends none (http tasks wait).",
							&delaysched_http_workers,
							1, 0, DELAYSCHED_MAX_HTTP_WORKERS,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.sql_workers",
							"Number of SQL workers per database served, which run the commands of sql business types.",
							"Each runs one job at a time; 0 runs none (sql jobs wait).",
							&delaysched_sql_workers,
							2, 0, DELAYSCHED_MAX_SQL_WORKERS,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.http_max_in_flight",
							"Most HTTP requests one HTTP worker has in flight at once.",
							"Capped further by the file descriptors the worker can open.",
							&delaysched_http_max_in_flight,
							1000, 1, 100000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.http_max_in_flight_per_host",
							"Most HTTP requests one HTTP worker has in flight at once to one origin (scheme, host and port).",
							"Within it, each origin's allowance starts small, grows while the receiver keeps up, and halves when it does not (see doc/flow-control.md); the requests beyond wait in the worker.  0 sends every request at once.",
							&delaysched_http_max_in_flight_per_host,
							256, 0, 100000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.full_sweep_interval",
							"Developer option: how often each range's sweep searches it from its lowest keys.",
							"Between full sweeps a sweep starts where the previous one stopped.",
							&delaysched_full_sweep_interval_ms,
							60 * 1000, 100, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.debug_commit_wakeup_delay",
							"Developer option: how long a committed transaction waits before it wakes the scanners.",
							"Widens the moment between a commit becoming visible and its wake-up, for tests of what a "
							"scanner does in it.",
							&delaysched_debug_commit_wakeup_delay_ms,
							0, 0, 10 * 1000,
							PGC_SUSET,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.extension_recheck_interval",
							"Developer option: how long a scanner waits before looking again for a missing extension.",
							NULL,
							&delaysched_extension_recheck_ms,
							10 * 1000, 100, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
}
