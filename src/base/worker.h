/*-------------------------------------------------------------------------
 *
 * worker.h
 *		What every delaysched background worker shares (worker.c); the
 *		scanners are in scanner.h, the HTTP workers in http_worker.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_WORKER_H
#define DELAYSCHED_WORKER_H

#include "postgres.h"

/*
 * The version of the extension's SQL objects this library works with: the
 * control file's default_version.  The workers wait while a database has
 * another (see delaysched_schema_ready).
 */
#define DELAYSCHED_SCHEMA_VERSION "0.2"

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
extern bool delaysched_schema_ready(void);
extern bool delaysched_run_in_transaction(const char *activity, void (*work) (void *), void *arg);
extern void delaysched_setup_worker_session(void);

#endif							/* DELAYSCHED_WORKER_H */
