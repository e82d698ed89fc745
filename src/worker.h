/*-------------------------------------------------------------------------
 *
 * worker.h
 *		The scanner background workers (delaysched.workers of them).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_WORKER_H
#define DELAYSCHED_WORKER_H

#include "postgres.h"

extern void delaysched_register_scanner(void);
extern PGDLLEXPORT void delaysched_scanner_main(Datum main_arg);

#endif							/* DELAYSCHED_WORKER_H */
