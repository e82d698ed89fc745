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

extern PGDLLEXPORT void delaysched_http_main(Datum main_arg);

#endif							/* DELAYSCHED_HTTP_WORKER_H */
