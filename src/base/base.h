/*-------------------------------------------------------------------------
 *
 * base.h
 *		The ground every family stands on, but for shared memory (shmem.h)
 *		and the parameters (guc.h): the statements kept prepared
 *		(spi_plans.c), what every background worker shares (worker.c), and
 *		the message a delivery sends (message.c).
 *
 * IDENTIFICATION
 *	  src/base/base.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_BASE_H
#define DELAYSCHED_BASE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/jsonb.h"

/*
 * Small helpers for the statements the workers prepare once and keep
 * (spi_plans.c; used by the tick, the drain, the HTTP workers...).
 */

extern SPIPlanPtr delaysched_prepare_kept(const char *sql, int nargs, Oid *types);
extern SPIPlanPtr delaysched_prepare_kept_with(const char *sql, int nargs, Oid *types,
											   int cursor_options);
extern void delaysched_free_plan(SPIPlanPtr *plan);
extern int	delaysched_read_bucket_count(void);
extern char *delaysched_spi_text(HeapTuple tuple, TupleDesc desc, int column,
								 MemoryContext context);
extern bool delaysched_fetch_timestamp(SPIPlanPtr plan, Datum *values, TimestampTz *result);
extern int	delaysched_fetch_int(SPIPlanPtr plan, Datum *values);

/*
 * What every delaysched background worker shares (worker.c); the
 * scanners are in core/core.h, the HTTP workers in http/http.h.
 */

/*
 * The version of the extension's SQL objects this library works with: the
 * control file's default_version.  The workers wait while a database has
 * another (see delaysched_schema_ready).
 */
#define DELAYSCHED_SCHEMA_VERSION "0.3"

/*
 * After an error in a worker's transaction, the worker goes on this much
 * later (and a scanner's failed range waits as long).
 */
#define DELAYSCHED_ERROR_PAUSE_MS	1000

/*
 * What the launcher (launcher.c) tells a worker it starts, in bgw_extra:
 * its database, and that database's entry in the table of databases served
 * (cluster.h; -1 for a probe).
 */
typedef struct DelayschedWorkerArgs
{
	Oid			dboid;
	int32		entry;
} DelayschedWorkerArgs;

extern void delaysched_join_database(bool (*take_slot) (int index), int index);
extern bool delaysched_database_wanted(void);
extern bool delaysched_extension_installed(void);
extern void delaysched_recover_from_error(MemoryContext context);
extern bool delaysched_caught_lock_timeout(MemoryContext context);
extern bool delaysched_schema_ready(void);
extern bool delaysched_run_in_transaction(const char *activity, void (*work) (void *), void *arg);
extern void delaysched_setup_worker_session(void);
extern void delaysched_register_static_worker(const char *function, const char *name);

/*
 * Who calls (caller.c): the types the session's role may read, for the
 * internal functions the views call and any role may call directly.
 */
typedef struct ReadableTypes
{
	bool		all;			/* every type: an administrator */
	int			ntypes;
	char	  **types;			/* else these, sorted */
} ReadableTypes;

extern Oid	delaysched_extension_owner(void);
extern void delaysched_execute_as_owner(Oid owner, const char *sql, int nargs, Oid *types,
										Datum *values);
extern const ReadableTypes *delaysched_readable_types(FunctionCallInfo fcinfo);
extern bool delaysched_may_read(const ReadableTypes *readable, const char *biz_type);

/*
 * The NOTIFY payloads of deliveries and pull announcements, and the
 * body of an HTTP delivery (the same message).
 */

extern void delaysched_append_message(StringInfo buf, int64 id, const char *biz_type,
									  TimestampTz run_at, Jsonb *payload, int32 attempt,
									  const char *schedule, const char *key);
extern char *delaysched_delivery_message(int64 id, const char *biz_type, TimestampTz run_at,
										 Jsonb *payload, int32 attempt, const char *schedule,
										 const char *key, int *omitted_bytes);
extern void delaysched_note_payload_omitted(int64 id, int16 bucket, int omitted_bytes);
extern char *delaysched_ready_message(const char *biz_type);

#endif							/* DELAYSCHED_BASE_H */
