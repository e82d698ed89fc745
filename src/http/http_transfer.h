/*-------------------------------------------------------------------------
 *
 * http_transfer.h
 *		An HTTP worker's transfer driver: libcurl's multi interface behind
 *		one epoll descriptor.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_HTTP_TRANSFER_H
#define DELAYSCHED_HTTP_TRANSFER_H

#include "http/http.h"

extern int	delaysched_http_driver_start(int max_connections);
extern void delaysched_http_driver_set_cap(int max_connections);
extern bool delaysched_http_driver_add(HttpRequest *request, char *error, size_t errlen);
extern int	delaysched_http_driver_in_flight(void);
extern TimestampTz delaysched_http_driver_timer(void);
extern void delaysched_http_driver_run(void (*on_done) (HttpRequest *request, CURLcode code, void *arg),
									   void *arg);

#endif							/* DELAYSCHED_HTTP_TRANSFER_H */
