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

extern void delaysched_register_workers(int count, const char *function, const char *kind);
extern void delaysched_register_scanner(void);
extern PGDLLEXPORT void delaysched_scanner_main(Datum main_arg);
extern bool delaysched_run_in_transaction(const char *activity, void (*work) (void *), void *arg);
extern void delaysched_setup_worker_session(void);

#endif							/* DELAYSCHED_WORKER_H */
