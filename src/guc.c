/*-------------------------------------------------------------------------
 *
 * guc.c
 *		Definitions of the delaysched.* configuration parameters.
 *
 * Every parameter is documented in doc/configuration.md; keep the two in
 * step.  Parameters the worker reads are PGC_SIGHUP so that a reload changes
 * them without a restart, except delaysched.database and the worker counts,
 * which decide what the postmaster starts and so need a restart.  The HTTP
 * perimeter's lists are PGC_SUSET: a superuser's session may try a list
 * out (sched.define_biz checks literal addresses against it), and the HTTP
 * workers take the server's at a reload.  The SQL
 * functions read delaysched.buckets, delaysched.ranges and
 * delaysched.max_payload_size with current_setting().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "compat.h"
#include "guc.h"
#include "http_perimeter.h"
#include "shmem.h"

char	   *delaysched_database = NULL;
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
double		delaysched_max_deliveries_per_second = 0;
int			delaysched_http_workers = 1;
int			delaysched_http_max_in_flight = 1000;

/*
 * Define every delaysched.* parameter.  Called once from _PG_init.
 */
void
delaysched_define_gucs(void)
{
	DefineCustomStringVariable("delaysched.database",
							   "Database whose tasks the delaysched workers deliver.",
							   "sched.add refuses to schedule tasks in any other database.",
							   &delaysched_database,
							   "postgres",
							   PGC_POSTMASTER,
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
							"Number of scanner workers.",
							"They share the ranges; more workers drain a burst faster, up to the number of ranges.",
							&delaysched_workers,
							2, 1, DELAYSCHED_MAX_WORKERS,
							PGC_POSTMASTER,
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

	DefineCustomRealVariable("delaysched.max_deliveries_per_second",
							 "Most notify deliveries per second across all business types; 0 for no cap.",
							 "Protects the database's other clients from a burst.  While it is set, "
							 "every type's due tasks are parked and shared out fairly by the drain.",
							 &delaysched_max_deliveries_per_second,
							 0, 0, 10000000,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("delaysched.http_workers",
							"Number of HTTP workers, which send the requests of http business types.",
							"Each drives many requests at once; 0 sends none (http tasks wait).",
							&delaysched_http_workers,
							1, 0, DELAYSCHED_MAX_HTTP_WORKERS,
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

	DefineCustomStringVariable("delaysched.http_allowed_hosts",
							   "Where webhooks may go: \"*\", host names, \"*.domain\", addresses or networks.",
							   "Checked against the URL's host and, after DNS resolution, the address.",
							   &delaysched_http_allowed_hosts,
							   "*",
							   PGC_SUSET,
							   0,
							   delaysched_check_host_list, delaysched_assign_allowed_hosts, NULL);

	DefineCustomStringVariable("delaysched.http_denied_hosts",
							   "Addresses and networks webhooks never reach, whatever http_allowed_hosts says.",
							   "Checked after DNS resolution, at every connection and redirect.",
							   &delaysched_http_denied_hosts,
							   DELAYSCHED_DEFAULT_DENIED_HOSTS,
							   PGC_SUSET,
							   0,
							   delaysched_check_denied_list, delaysched_assign_denied_hosts, NULL);

	delaysched_reserve_guc_prefix("delaysched");
}
