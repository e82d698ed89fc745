/*-------------------------------------------------------------------------
 *
 * http_store.h
 *		The statements of the HTTP workers: claim, fetch what was handed
 *		over, record, release.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_HTTP_STORE_H
#define DELAYSCHED_HTTP_STORE_H

#include "http/http.h"
#include "base/shmem.h"

extern int	delaysched_http_claim(Oid extension, int worker, int room, int max_in_flight,
								  HttpRequest ***requests, TimestampTz *next_claim, bool *held_back);
extern int	delaysched_http_fetch(Oid extension, int worker, HttpHandoff *handed, int n,
								  HttpRequest ***requests);
extern int	delaysched_http_record(Oid extension, int worker, HttpResult *results, int n);
extern int	delaysched_http_release(Oid extension, int worker);
extern void delaysched_http_count_in_flight(const char *biz_type, int delta);

#endif							/* DELAYSCHED_HTTP_STORE_H */
