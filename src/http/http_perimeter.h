/*-------------------------------------------------------------------------
 *
 * http_perimeter.h
 *		Where the HTTP workers may send requests: delaysched.http_allowed_hosts
 *		and delaysched.http_denied_hosts, checked against a URL's host before
 *		a request and against every address after DNS resolution.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_HTTP_PERIMETER_H
#define DELAYSCHED_HTTP_PERIMETER_H

#include <sys/socket.h>

#include "utils/guc.h"

extern char *delaysched_http_allowed_hosts;
extern char *delaysched_http_denied_hosts;

/* The default deny list: link-local and cloud metadata addresses. */
#define DELAYSCHED_DEFAULT_DENIED_HOSTS \
	"169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200, 192.0.0.192, 0.0.0.0/8, ::/128"

extern bool delaysched_check_host_list(char **newval, void **extra, GucSource source);
extern bool delaysched_check_denied_list(char **newval, void **extra, GucSource source);
extern void delaysched_assign_allowed_hosts(const char *newval, void *extra);
extern void delaysched_assign_denied_hosts(const char *newval, void *extra);
extern void delaysched_define_perimeter_gucs(void);

/*
 * Is a URL's host name allowed by name?  True when the allow list has "*",
 * or names this host (or a "*.suffix" of it).  When false, the host may
 * still be allowed by address (delaysched_address_refusal).
 */
extern bool delaysched_host_allowed_by_name(const char *host);

/*
 * Why a connection to addr must not be made, or NULL if it may: addr is in
 * the deny list, or neither the host (allowed_by_name) nor the address is
 * allowed.  Writes the reason into buf (of size buflen) and returns buf.
 * Safe to call from a libcurl callback: it neither allocates nor raises.
 */
extern const char *delaysched_address_refusal(const struct sockaddr *addr, bool allowed_by_name,
											  char *buf, size_t buflen);

#endif							/* DELAYSCHED_HTTP_PERIMETER_H */
