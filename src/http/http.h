/*-------------------------------------------------------------------------
 *
 * http.h
 *		The HTTP delivery path: what the HTTP workers know of an http
 *		business type, a task being sent, and the result of one request.
 *
 *	 http_worker.c		the workers' loop: claim, send, record
 *	 http_handoff.c		tasks a scanner's commit hands a worker directly
 *	 http_transfer.c	libcurl's multi interface behind an epoll set
 *	 http_origins.c		each receiver's allowance of requests at once
 *	 http_request.c		one request: body, headers, signature, outcome;
 *						sched._check_url()
 *	 http_store.c		the SQL the workers run (claim, record, release)
 *	 http_perimeter.c		where requests may go
 *
 * IDENTIFICATION
 *	  src/http/http.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_HTTP_H
#define DELAYSCHED_HTTP_H

#include "postgres.h"

#include <sys/socket.h>
#include <curl/curl.h>

#include "fmgr.h"
#include "lib/ilist.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "base/shmem.h"

/* The most redirects one request follows (with follow_redirects). */
#define HTTP_MAX_REDIRECTS	5

/* The size of an origin, "scheme://host:port" (a host name is at most 253). */
#define HTTP_ORIGIN_SIZE	300

/* The size of the response text kept for an error message. */
#define HTTP_SNIPPET_SIZE	200

/*
 * An http business type as one claim read it.  Requests under way keep the
 * definition they started with (refcount); a new one replaces it for the
 * requests that follow.  In TopMemoryContext.
 */
typedef struct HttpTypeDef
{
	int			refcount;		/* the type table's reference + requests */
	char		name[NAMEDATALEN];
	char	   *url;
	char		origin[HTTP_ORIGIN_SIZE];	/* url's; "" if url is not usable */
	struct curl_slist *headers; /* "Name: value" of the configured headers */
	bool		has_content_type;	/* they set Content-Type themselves */
	char	   *secret;			/* NULL: no signature */
	long		timeout_ms;
	int64		min_backoff_us;
	int64		max_backoff_us;
	bool		follow_redirects;
	TimestampTz updated_at;		/* sched.biz.updated_at it was read at */
} HttpTypeDef;

/* How a request ended, as sched._http_record takes it. */
typedef enum HttpOutcome
{
	HTTP_DONE,					/* 2xx */
	HTTP_RETRY,					/* try again at retry_at */
	HTTP_DEAD,					/* a failure no retry can mend */
	HTTP_REQUEUED				/* a local failure: park again, not counted */
} HttpOutcome;

/* One finished request, waiting to be recorded. */
typedef struct HttpResult
{
	int64		id;
	int16		bucket;
	int32		attempt;
	char		biz_type[NAMEDATALEN];
	HttpOutcome outcome;
	TimestampTz retry_at;		/* HTTP_RETRY */
	int			status;			/* HTTP status, 0 if none came */
	char	   *error;			/* NULL on success; palloc'd */
	TimestampTz started;
	double		duration_ms;
	bool		held;			/* not recorded: another transaction holds
								 * the task's row (sched._http_record) */
} HttpResult;

/* One task leased to this worker, as the claim returned it. */
typedef struct HttpTask
{
	int64		id;
	int16		bucket;
	char		biz_type[NAMEDATALEN];
	TimestampTz run_at;
	Jsonb	   *payload;
	int32		attempt;
	char		schedule[NAMEDATALEN];	/* "" unless a schedule's firing */
	char	   *key;			/* NULL unless added with a key */
} HttpTask;

/*
 * One request under way: a libcurl easy handle and everything it points
 * to, which must live until the transfer ends.
 */
typedef struct HttpRequest
{
	dlist_node	node;			/* in its origin's queue, while it waits */
	CURL	   *easy;
	HttpTypeDef *def;
	int64		id;
	int16		bucket;
	int32		attempt;
	TimestampTz queued_at;		/* first given to the transfer driver */
	TimestampTz started;		/* the attempt's first request sent */
	TimestampTz sent;			/* the request to its latest url sent */
	char	   *body;
	size_t		body_len;
	struct curl_slist *request_headers; /* ours, then the type's */
	struct curl_slist *own_headers; /* ours alone: for another origin */
	bool		headers_withheld;	/* a redirect left the type's origin */
	char	   *url;			/* where it goes now (changes on a redirect) */
	char		origin[HTTP_ORIGIN_SIZE];	/* url's scheme://host:port */
	int			redirects;
	bool		allowed_by_name;	/* the host of url passes the allow list */

	/* Filled by libcurl callbacks, which must not allocate or raise. */
	char		refusal[160];	/* the perimeter refused a connection */
	char		curl_error[CURL_ERROR_SIZE];
	char		snippet[HTTP_SNIPPET_SIZE];
	size_t		snippet_len;
	double		retry_after_s;	/* from a Retry-After header; < 0 if none */
} HttpRequest;

/* http_request.c */
extern HttpRequest *delaysched_http_request_new(const HttpTask *task, HttpTypeDef *def);
extern bool delaysched_http_request_prepare(HttpRequest *request, char *error, size_t errlen);
extern void delaysched_http_request_free(HttpRequest *request);
extern bool delaysched_http_request_outcome(HttpRequest *request, CURLcode code, HttpResult *result);
extern void delaysched_http_request_fail(HttpRequest *request, HttpOutcome outcome,
										 const char *error, HttpResult *result);
extern void delaysched_http_typedef_release(HttpTypeDef *def);
extern bool delaysched_http_url_origin(const char *url, char *origin);

/*
 * A scanner's commit handing leased http tasks straight to an HTTP
 * worker (see http_handoff.c).
 */

/* The scanner's side, in a tick's transaction. */
extern int	delaysched_handoff_reserve(int want);
extern Datum delaysched_handoff_lease(PG_FUNCTION_ARGS);
extern void delaysched_handoff_add(int64 id, int16 bucket, int32 attempt,
								   TimestampTz lease_until);
extern void delaysched_handoff_settle(void);

/* The HTTP worker's side. */
extern void delaysched_handoff_clear(int worker);
extern int	delaysched_handoff_take(int worker, HttpHandoff *out, int max);
extern void delaysched_http_wake_all(void);

/*
 * Where the HTTP workers may send requests: delaysched.http_allowed_hosts
 * and delaysched.http_denied_hosts, checked against a URL's host before
 * a request and against every address after DNS resolution.
 */

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

/*
 * The statements of the HTTP workers: claim, fetch what was handed
 * over, record, release.
 */

extern int	delaysched_http_claim(Oid extension, int worker, int room, int max_in_flight,
								  HttpRequest ***requests, TimestampTz *next_claim, bool *held_back);
extern int	delaysched_http_fetch(Oid extension, int worker, HttpHandoff *handed, int n,
								  HttpRequest ***requests);
extern int	delaysched_http_record(Oid extension, int worker, HttpResult *results, int n);
extern int	delaysched_http_release(Oid extension, int worker);
extern void delaysched_http_count_in_flight(const char *biz_type, int delta);

/*
 * An HTTP worker's transfer driver: libcurl's multi interface behind
 * one epoll descriptor.
 */

extern int	delaysched_http_driver_start(int max_connections);
extern void delaysched_http_driver_set_cap(int max_connections);
extern bool delaysched_http_driver_add(HttpRequest *request, char *error, size_t errlen);
extern int	delaysched_http_driver_in_flight(void);
extern TimestampTz delaysched_http_driver_timer(void);
extern void delaysched_http_driver_run(void (*on_done) (HttpRequest *request, CURLcode code, void *arg),
									   void (*on_unsent) (HttpRequest *request, const char *error, void *arg),
									   void *arg);

/*
 * Each origin's allowance of requests in flight at once, and the requests
 * waiting for it (http_origins.c), kept by the transfer driver.
 */

typedef struct HttpOrigin HttpOrigin;

extern bool delaysched_http_origin_admit(HttpRequest *request, TimestampTz now);
extern HttpOrigin *delaysched_http_origin_ended(HttpRequest *request, CURLcode code,
												TimestampTz now);
extern HttpRequest *delaysched_http_origin_next(HttpOrigin *origin, TimestampTz now, bool *expired);
extern bool delaysched_http_origin_too_late(const HttpRequest *request, TimestampTz now);
extern HttpOrigin *delaysched_http_origin_waiting(int i);
extern TimestampTz delaysched_http_origins_expiry(void);
extern int	delaysched_http_origins_queued(void);
extern int	delaysched_http_origin_room(const char *origin);
extern void delaysched_http_origins_forget_idle(TimestampTz now);

/*
 * The HTTP workers (delaysched.http_workers of them).
 */

extern PGDLLEXPORT void delaysched_http_main(Datum main_arg);

#endif							/* DELAYSCHED_HTTP_H */
