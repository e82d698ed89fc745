/*-------------------------------------------------------------------------
 *
 * http_worker.h
 *		The HTTP workers (delaysched.http_workers of them).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_HTTP_WORKER_H
#define DELAYSCHED_HTTP_WORKER_H

#include "postgres.h"

extern void delaysched_register_http_workers(void);
extern PGDLLEXPORT void delaysched_http_main(Datum main_arg);

#endif							/* DELAYSCHED_HTTP_WORKER_H */
