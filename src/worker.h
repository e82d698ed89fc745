/*-------------------------------------------------------------------------
 *
 * worker.h
 *		The scanner background workers (delaysched.workers of them), and
 *		what every delaysched worker shares.
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

extern void delaysched_register_workers(int count, const char *function, const char *kind);
extern void delaysched_register_scanner(void);
extern PGDLLEXPORT void delaysched_scanner_main(Datum main_arg);
extern bool delaysched_schema_ready(void);
extern bool delaysched_run_in_transaction(const char *activity, void (*work) (void *), void *arg);
extern void delaysched_setup_worker_session(void);

#endif							/* DELAYSCHED_WORKER_H */
