/*-------------------------------------------------------------------------
 *
 * http_request.c
 *		One webhook request: what it sends, how libcurl is set up for it,
 *		and what its end means for the task.
 *
 * The request.  POST to the type's url with the task's message as body --
 * the same JSON a LISTENer of a notify type receives:
 *
 *	 {"id" : 42, "biz_type" : "orders", "run_at" : "...", "payload" : {...},
 *	  "attempt" : 1}
 *
 * and the headers
 *
 *	 Content-Type: application/json		(unless the type sets its own)
 *	 Idempotency-Key: <task id>			the same on every attempt
 *	 X-Delaysched-Attempt: <attempt>
 *	 X-Delaysched-Timestamp: <unix seconds when the request was made>
 *	 X-Delaysched-Signature: v1=<hex>		only with a secret
 *
 * then the type's configured headers.  The signature is HMAC-SHA256 with
 * the type's secret as key over "<timestamp>.<body>", in lowercase hex
 * (doc/http.md shows how a receiver checks it).
 *
 * The outcome (delaysched_http_request_outcome):
 *	 2xx									done
 *	 408, 429, 5xx, timeouts, connection
 *	 and DNS failures						retry after a backoff: exponential
 *											from min_backoff, capped at
 *											max_backoff, with jitter; on 429
 *											and 503 a Retry-After header sets
 *											it (within the same bounds)
 *	 3xx with follow_redirects				the same POST to the new location,
 *											checked like the first; at most
 *											HTTP_MAX_REDIRECTS times; once it
 *											leaves the origin of the type's
 *											url, without the type's headers
 *	 other 3xx and 4xx, a destination the
 *	 perimeter refuses						dead at once
 *	 a local failure (no memory, no file
 *	 descriptor)							requeued, the attempt not counted
 *
 * Connections are made by open_socket(), which asks the perimeter
 * (http_perimeter.c) about every address libcurl is about to connect to, after
 * DNS resolution; libcurl follows no redirect and uses no proxy by itself.
 *
 * The libcurl callbacks run inside curl_multi_socket_action(): they never
 * allocate memory from PostgreSQL or raise an error (a longjmp through
 * libcurl would leave it broken); they fill fixed buffers in the request.
 *
 * IDENTIFICATION
 *	  src/http/http_request.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "compat.h"
#include "base/base.h"
#include "http/http.h"

/*
 * libcurl 7.68 on.  It takes the protocols a request may use as strings
 * from 7.85, which deprecated the bit masks: requests use http(s) only.
 */
#if LIBCURL_VERSION_NUM >= 0x075500
#define delaysched_curl_http_only(easy) \
	(curl_easy_setopt((easy), CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK && \
	 curl_easy_setopt((easy), CURLOPT_REDIR_PROTOCOLS_STR, "http,https") == CURLE_OK)
#else
#define delaysched_curl_http_only(easy) \
	(curl_easy_setopt((easy), CURLOPT_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS)) == CURLE_OK && \
	 curl_easy_setopt((easy), CURLOPT_REDIR_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS)) == CURLE_OK)
#endif

#ifdef DELAYSCHED_HAS_HMAC
#include "common/hmac.h"
#include "common/sha2.h"
#endif

PG_FUNCTION_INFO_V1(delaysched_check_url);

/* The longest URL a type may have. */
#define URL_MAX_LENGTH	2048

static MemoryContext http_memory = NULL;

/* Requests, their bodies and results live here, outside any transaction. */
static MemoryContext
memory(void)
{
	if (http_memory == NULL)
		http_memory = AllocSetContextCreate(TopMemoryContext, "delaysched HTTP requests",
											ALLOCSET_DEFAULT_SIZES);
	return http_memory;
}

/* Drop one reference to a type's definition; free it with the last. */
void
delaysched_http_typedef_release(HttpTypeDef *def)
{
	if (--def->refcount > 0)
		return;
	curl_slist_free_all(def->headers);
	if (def->url)
		pfree(def->url);
	if (def->secret)
		pfree(def->secret);
	pfree(def);
}

/*
 * The host of url, lowercase, in buf; false if url does not parse as an
 * http(s) URL with a host, without credentials and without port 0 (and
 * then, with errors, a message in error).  libcurl's parser takes
 * "http:///x" for host "x": an empty authority is refused before it.
 * With origin (of size HTTP_ORIGIN_SIZE), also the URL's origin there:
 * scheme://host:port, lowercase, the port always written.
 */
static bool
url_host(const char *url, char *buf, size_t buflen, const char **error, char *origin)
{
	CURLU	   *parsed = curl_url();
	const char *authority = strstr(url, "://");
	char	   *scheme = NULL;
	char	   *host = NULL;
	char	   *part = NULL;
	char	   *port = NULL;
	bool		ok = false;

	*error = NULL;
	if (parsed == NULL)
	{
		*error = "out of memory";
		return false;
	}
	if (curl_url_set(parsed, CURLUPART_URL, url, 0) != CURLUE_OK)
		*error = "it does not parse as an absolute URL";
	else if (curl_url_get(parsed, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
			 (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0))
		*error = "its scheme is not http or https";
	else if (authority == NULL || authority[3] == '/' || authority[3] == '\0' ||
			 curl_url_get(parsed, CURLUPART_HOST, &host, 0) != CURLUE_OK || host[0] == '\0')
		*error = "it has no host";
	else if (curl_url_get(parsed, CURLUPART_PORT, &port, 0) == CURLUE_OK && atoi(port) == 0)
		*error = "its port is 0";
	else if (curl_url_get(parsed, CURLUPART_USER, &part, 0) == CURLUE_OK ||
			 curl_url_get(parsed, CURLUPART_PASSWORD, &part, 0) == CURLUE_OK)
		*error = "it carries credentials";
	else
	{
		size_t		len = strlen(host);

		if (origin != NULL)
		{
			char	   *origin_port = NULL;

			if (curl_url_get(parsed, CURLUPART_PORT, &origin_port, CURLU_DEFAULT_PORT) != CURLUE_OK)
				origin_port = NULL;
			snprintf(origin, HTTP_ORIGIN_SIZE, "%s://%s:%s", scheme, host, origin_port ? origin_port : "");
			for (char *p = origin; *p; p++)
				*p = pg_tolower((unsigned char) *p);
			curl_free(origin_port);
		}
		/* An IPv6 literal comes in brackets. */
		if (host[0] == '[' && len > 2 && host[len - 1] == ']')
		{
			host[len - 1] = '\0';
			strlcpy(buf, host + 1, buflen);
		}
		else
			strlcpy(buf, host, buflen);
		for (char *p = buf; *p; p++)
			*p = pg_tolower((unsigned char) *p);
		ok = true;
	}
	curl_free(port);
	curl_free(part);
	curl_free(host);
	curl_free(scheme);
	curl_url_cleanup(parsed);
	return ok;
}

/*
 * The origin of url (see url_host) in origin, of size HTTP_ORIGIN_SIZE;
 * false if url is not usable.
 */
bool
delaysched_http_url_origin(const char *url, char *origin)
{
	char		host[256];
	const char *why;

	return url_host(url, host, sizeof(host), &why, origin);
}

/* ---- libcurl callbacks: no palloc, no ereport ---- */

/* Keep the start of the response body for the error message. */
static size_t
on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	HttpRequest *request = (HttpRequest *) arg;
	size_t		n = size * nmemb;
	size_t		room = sizeof(request->snippet) - 1 - request->snippet_len;
	size_t		take = Min(n, room);

	memcpy(request->snippet + request->snippet_len, data, take);
	request->snippet_len += take;
	request->snippet[request->snippet_len] = '\0';
	return n;
}

/* Note a Retry-After header: delay-seconds or an HTTP date. */
static size_t
on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	HttpRequest *request = (HttpRequest *) arg;
	size_t		n = size * nmemb;
	static const char name[] = "retry-after:";
	char		value[128];
	size_t		len;
	char	   *end;
	double		seconds;

	/* A new response (after a 100 Continue, say) forgets the last one's. */
	if (n > 5 && pg_strncasecmp(data, "HTTP/", 5) == 0)
		request->retry_after_s = -1;
	if (n <= sizeof(name) - 1 || pg_strncasecmp(data, name, sizeof(name) - 1) != 0)
		return n;
	len = Min(n - (sizeof(name) - 1), sizeof(value) - 1);
	memcpy(value, data + sizeof(name) - 1, len);
	value[len] = '\0';
	while (len > 0 && (value[len - 1] == '\r' || value[len - 1] == '\n' || value[len - 1] == ' '))
		value[--len] = '\0';
	end = value;
	while (*end == ' ' || *end == '\t')
		end++;
	if (*end >= '0' && *end <= '9')
	{
		seconds = strtod(end, &end);
		if (*end == '\0')
			request->retry_after_s = seconds;
	}
	else
	{
		time_t		when = curl_getdate(end, NULL);

		if (when != -1)
			request->retry_after_s = Max(0, (double) (when - time(NULL)));
	}
	return n;
}

/* Open a connection only where the perimeter allows. */
static curl_socket_t
open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *address)
{
	HttpRequest *request = (HttpRequest *) arg;

	if (delaysched_address_refusal(&address->addr, request->allowed_by_name,
								   request->refusal, sizeof(request->refusal)) != NULL)
		return CURL_SOCKET_BAD;
	return socket(address->family, address->socktype, address->protocol);
}

/* ---- building a request ---- */

#ifdef DELAYSCHED_HAS_HMAC
/*
 * The signature header: "v1=" and the hex HMAC-SHA256 of
 * "<timestamp>.<body>" under secret, into line.
 */
static void
signature_header(const char *secret, const char *timestamp, const char *body, size_t body_len,
				 char *line, size_t linelen)
{
	pg_hmac_ctx *ctx = pg_hmac_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char		hex[PG_SHA256_DIGEST_LENGTH * 2 + 1];

	if (ctx == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	if (pg_hmac_init(ctx, (const uint8 *) secret, strlen(secret)) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) timestamp, strlen(timestamp)) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) ".", 1) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) body, body_len) < 0 ||
		pg_hmac_final(ctx, digest, sizeof(digest)) < 0)
	{
		pg_hmac_free(ctx);
		elog(ERROR, "could not compute an HMAC-SHA256 signature");
	}
	pg_hmac_free(ctx);
	for (int i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
		snprintf(hex + i * 2, 3, "%02x", digest[i]);
	snprintf(line, linelen, "X-Delaysched-Signature: v1=%s", hex);
}
#endif

/*
 * A request for a task just leased, with its body and headers; libcurl is
 * set up by delaysched_http_request_prepare.
 */
HttpRequest *
delaysched_http_request_new(const HttpTask *task, HttpTypeDef *def)
{
	MemoryContext old = MemoryContextSwitchTo(memory());
	HttpRequest *request = palloc0(sizeof(HttpRequest));
	StringInfoData body;
	char		timestamp[32];
	char		line[128];
	struct curl_slist *headers = NULL;
	struct curl_slist *own = NULL;
	bool		ok = true;

	request->def = def;
	def->refcount++;
	request->id = task->id;
	request->bucket = task->bucket;
	request->attempt = task->attempt;
	request->started = GetCurrentTimestamp();
	request->retry_after_s = -1;
	request->url = pstrdup(def->url);

	initStringInfo(&body);
	delaysched_append_message(&body, task->id, task->biz_type, task->run_at, task->payload,
							  task->attempt, task->schedule[0] != '\0' ? task->schedule : NULL,
							  task->key);
	request->body = body.data;
	request->body_len = body.len;

	snprintf(timestamp, sizeof(timestamp), INT64_FORMAT, (int64) time(NULL));

	/*
	 * curl_slist_append copies each line; NULL means it ran out of memory.
	 * Our headers go in both lists, the type's in the whole one only.
	 */
#define APPEND_TO(list, text) \
	do { \
		struct curl_slist *longer = ok ? curl_slist_append((list), (text)) : NULL; \
		if (longer == NULL) \
			ok = false; \
		else \
			(list) = longer; \
	} while (0)
#define ADD_HEADER(text) \
	do { \
		APPEND_TO(headers, text); \
		APPEND_TO(own, text); \
	} while (0)

	if (!def->has_content_type)
		ADD_HEADER("Content-Type: application/json");
	snprintf(line, sizeof(line), "Idempotency-Key: " INT64_FORMAT, task->id);
	ADD_HEADER(line);
	snprintf(line, sizeof(line), "X-Delaysched-Attempt: %d", task->attempt);
	ADD_HEADER(line);
	snprintf(line, sizeof(line), "X-Delaysched-Timestamp: %s", timestamp);
	ADD_HEADER(line);
	/* No "100 Continue" round trip before a large body. */
	ADD_HEADER("Expect:");
#ifdef DELAYSCHED_HAS_HMAC
	if (def->secret != NULL)
	{
		signature_header(def->secret, timestamp, request->body, request->body_len,
						 line, sizeof(line));
		ADD_HEADER(line);
	}
#endif
	for (struct curl_slist *h = def->headers; h != NULL; h = h->next)
		APPEND_TO(headers, h->data);
#undef ADD_HEADER
#undef APPEND_TO
	if (!ok)
	{
		curl_slist_free_all(headers);
		curl_slist_free_all(own);
		headers = own = NULL;
	}
	request->request_headers = headers;
	request->own_headers = own;
	MemoryContextSwitchTo(old);
	return request;
}

/*
 * Whether two absolute URLs have the same origin: scheme, host and port
 * (the scheme's default port if none is written), as libcurl parses them.
 * False if either does not parse.
 */
static bool
same_origin(const char *a, const char *b)
{
	static const CURLUPart parts[] = {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT};
	CURLU	   *ua = curl_url();
	CURLU	   *ub = curl_url();
	bool		same = ua != NULL && ub != NULL &&
		curl_url_set(ua, CURLUPART_URL, a, 0) == CURLUE_OK &&
		curl_url_set(ub, CURLUPART_URL, b, 0) == CURLUE_OK;

	for (size_t i = 0; same && i < lengthof(parts); i++)
	{
		char	   *pa = NULL;
		char	   *pb = NULL;

		same = curl_url_get(ua, parts[i], &pa, CURLU_DEFAULT_PORT) == CURLUE_OK &&
			curl_url_get(ub, parts[i], &pb, CURLU_DEFAULT_PORT) == CURLUE_OK &&
			pg_strcasecmp(pa, pb) == 0;
		curl_free(pa);
		curl_free(pb);
	}
	curl_url_cleanup(ua);
	curl_url_cleanup(ub);
	return same;
}

/*
 * Before a redirect to location: the type's headers (an Authorization, an
 * API key) are for the origin of its url, so a redirect elsewhere gets ours
 * alone, from then on (said in the log once per request, if the type has
 * headers).  False if libcurl would not take the shorter list.
 */
static bool
withhold_headers_elsewhere(HttpRequest *request, const char *location)
{
	if (request->headers_withheld || same_origin(request->def->url, location))
		return true;
	if (curl_easy_setopt(request->easy, CURLOPT_HTTPHEADER, request->own_headers) != CURLE_OK)
		return false;
	request->headers_withheld = true;
	if (request->def->headers != NULL)
		ereport(LOG,
				(errmsg("delaysched: task " INT64_FORMAT " was redirected away from the origin of its type's url, to %s: the type's headers are not sent there",
						request->id, location)));
	return true;
}

/* Point the easy handle at request->url; false with the reason in error. */
static bool
aim(HttpRequest *request, char *error, size_t errlen)
{
	char		host[256];
	const char *why;

	if (!url_host(request->url, host, sizeof(host), &why, request->origin))
	{
		snprintf(error, errlen, "url \"%s\" is not usable: %s", request->url, why);
		return false;
	}
	request->allowed_by_name = delaysched_host_allowed_by_name(host);
	request->refusal[0] = '\0';
	request->curl_error[0] = '\0';
	request->snippet[0] = '\0';
	request->snippet_len = 0;
	request->retry_after_s = -1;
	return curl_easy_setopt(request->easy, CURLOPT_URL, request->url) == CURLE_OK;
}

/*
 * Make the request's easy handle.  False if it could not be made (the
 * reason in error): a local failure, or a URL that no longer parses.
 */
bool
delaysched_http_request_prepare(HttpRequest *request, char *error, size_t errlen)
{
	CURL	   *easy;
	bool		ok;
	char		why[256];

#ifndef DELAYSCHED_HAS_HMAC
	if (request->def->secret != NULL)
	{
		snprintf(error, errlen, "local_error: signing requests needs PostgreSQL 14 or later");
		return false;
	}
#endif
	if (request->request_headers == NULL || request->own_headers == NULL)
	{
		snprintf(error, errlen, "local_error: out of memory building the request headers");
		return false;
	}
	easy = request->easy = curl_easy_init();
	if (easy == NULL)
	{
		snprintf(error, errlen, "local_error: out of memory: could not make a libcurl handle");
		return false;
	}
	ok = curl_easy_setopt(easy, CURLOPT_PRIVATE, request) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_POST, 1L) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_POSTFIELDS, request->body) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) request->body_len) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_HTTPHEADER, request->request_headers) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_USERAGENT, "delaysched/" DELAYSCHED_SCHEMA_VERSION) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, request->def->timeout_ms) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_PROXY, "") == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, request->curl_error) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_WRITEDATA, request) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_HEADERDATA, request) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_socket) == CURLE_OK &&
		curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, request) == CURLE_OK &&
		delaysched_curl_http_only(easy);
	if (!ok)
	{
		snprintf(error, errlen, "local_error: could not set up a libcurl handle");
		return false;
	}

	/*
	 * HTTP/2 where a TLS receiver offers it (ALPN), multiplexed; HTTP/1.1
	 * otherwise.  libcurl's default when built with HTTP/2, which refuses
	 * the option when built without: then HTTP/1.1 it is.  (Not
	 * CURLOPT_PIPEWAIT: a request would wait for a connection that has not
	 * answered yet, a hung one's for ever, to learn whether it
	 * multiplexes.)
	 */
	(void) curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_2TLS);
	if (!aim(request, why, sizeof(why)))
	{
		snprintf(error, errlen, "bad_url: %s", why);
		return false;
	}
	return true;
}

void
delaysched_http_request_free(HttpRequest *request)
{
	if (request->easy)
		curl_easy_cleanup(request->easy);
	curl_slist_free_all(request->request_headers);
	curl_slist_free_all(request->own_headers);
	delaysched_http_typedef_release(request->def);
	pfree(request->url);
	pfree(request->body);
	pfree(request);
}

/* Fill the parts of *result every outcome shares. */
static void
result_of(HttpRequest *request, HttpOutcome outcome, int status, char *error, HttpResult *result)
{
	TimestampTz now = GetCurrentTimestamp();

	result->id = request->id;
	result->bucket = request->bucket;
	result->attempt = request->attempt;
	strlcpy(result->biz_type, request->def->name, sizeof(result->biz_type));
	result->outcome = outcome;
	result->retry_at = 0;
	result->status = status;
	result->error = error;
	result->started = request->started;
	result->duration_ms = (double) (now - request->started) / 1000.0;
}

/* A request that failed before or without being sent. */
void
delaysched_http_request_fail(HttpRequest *request, HttpOutcome outcome, const char *error,
							 HttpResult *result)
{
	result_of(request, outcome, 0, MemoryContextStrdup(memory(), error), result);
}

/*
 * When to try again after this attempt failed: exponential from the type's
 * min_backoff with jitter, capped at max_backoff; or what Retry-After said,
 * within the same bounds.
 */
static TimestampTz
retry_time(HttpRequest *request, bool honour_retry_after)
{
	const HttpTypeDef *def = request->def;
	double		delay_us;

	if (honour_retry_after && request->retry_after_s >= 0)
		delay_us = request->retry_after_s * USECS_PER_SEC;
	else
	{
		/* min_backoff * 2^(attempt - 1), then somewhere in its upper half. */
		double		base = (double) def->min_backoff_us *
			pow(2.0, Min(request->attempt - 1, 40));

		base = Min(base, (double) def->max_backoff_us);
		delay_us = base * (0.5 + 0.5 * delaysched_random_fraction());
	}
	delay_us = Max(delay_us, (double) def->min_backoff_us);
	delay_us = Min(delay_us, (double) def->max_backoff_us);
	return GetCurrentTimestamp() + (TimestampTz) delay_us;
}

/* The response text for an error message: printable, on one line. */
static const char *
cleaned_snippet(HttpRequest *request)
{
	for (size_t i = 0; i < request->snippet_len; i++)
		if ((unsigned char) request->snippet[i] < 0x20 || request->snippet[i] == 0x7f)
			request->snippet[i] = ' ';
	return request->snippet;
}

/*
 * The stable code (doc/monitoring.md, "Error codes") of a transfer that
 * got no answer, by libcurl's reason.
 */
static const char *
failure_code(CURLcode code)
{
	switch (code)
	{
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_COULDNT_RESOLVE_PROXY:
			return "dns_failed";
		case CURLE_COULDNT_CONNECT:
			return "connect_failed";
		case CURLE_SSL_CONNECT_ERROR:
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CERTPROBLEM:
		case CURLE_SSL_CIPHER:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_ENGINE_NOTFOUND:
		case CURLE_SSL_ENGINE_SETFAILED:
			return "tls_failed";
		case CURLE_UNSUPPORTED_PROTOCOL:
		case CURLE_URL_MALFORMAT:
			return "bad_url";
		case CURLE_OUT_OF_MEMORY:
		case CURLE_FAILED_INIT:
			return "local_error";
		default:
			return "transfer_failed";
	}
}

/*
 * What a finished transfer means (see the file header).  Returns false
 * when the request is to be sent again to a redirect's location: the easy
 * handle is aimed there, for the caller to add to the multi handle again.
 * Otherwise fills *result.
 */
bool
delaysched_http_request_outcome(HttpRequest *request, CURLcode code, HttpResult *result)
{
	MemoryContext old = MemoryContextSwitchTo(memory());
	long		status = 0;
	HttpOutcome outcome;
	char	   *error = NULL;
	bool		honour_retry_after = false;

	if (code == CURLE_OK)
	{
		curl_easy_getinfo(request->easy, CURLINFO_RESPONSE_CODE, &status);
		if (status >= 200 && status < 300)
			outcome = HTTP_DONE;
		else if (status >= 300 && status < 400)
		{
			char	   *location = NULL;

			curl_easy_getinfo(request->easy, CURLINFO_REDIRECT_URL, &location);
			outcome = HTTP_DEAD;
			if (location == NULL)
				error = psprintf("http_%ld: a redirect without a usable Location", status);
			else if (!request->def->follow_redirects)
				error = psprintf("http_%ld: redirect to %s not followed (the type's follow_redirects is off)",
								 status, location);
			else if (request->redirects >= HTTP_MAX_REDIRECTS)
				error = psprintf("http_%ld: more than %d redirects", status, HTTP_MAX_REDIRECTS);
			else if (!withhold_headers_elsewhere(request, location))
			{
				outcome = HTTP_REQUEUED;
				error = pstrdup("local_error: could not set up a libcurl handle for a redirect");
			}
			else
			{
				char		why[256];

				pfree(request->url);
				request->url = pstrdup(location);
				request->redirects++;
				if (aim(request, why, sizeof(why)))
				{
					MemoryContextSwitchTo(old);
					return false;
				}
				error = psprintf("http_%ld: redirect refused: %s", status, why);
			}
		}
		else
		{
			bool		retryable = status == 408 || status == 429 || status >= 500;

			outcome = retryable ? HTTP_RETRY : HTTP_DEAD;
			honour_retry_after = (status == 429 || status == 503);
			error = request->snippet_len > 0
				? psprintf("http_%ld: %s", status, cleaned_snippet(request))
				: psprintf("http_%ld", status);
		}
	}
	else if (request->refusal[0] != '\0')
	{
		outcome = HTTP_DEAD;
		error = psprintf("blocked_destination: %s", request->refusal);
	}
	else
	{
		const char *detail = request->curl_error[0] ? request->curl_error : curl_easy_strerror(code);
		long		os_errno = 0;

		curl_easy_getinfo(request->easy, CURLINFO_OS_ERRNO, &os_errno);
		switch (code)
		{
			case CURLE_OUT_OF_MEMORY:
			case CURLE_FAILED_INIT:
				outcome = HTTP_REQUEUED;
				break;
			case CURLE_COULDNT_CONNECT:
				outcome = (os_errno == EMFILE || os_errno == ENFILE ||
						   os_errno == ENOBUFS || os_errno == ENOMEM) ? HTTP_REQUEUED : HTTP_RETRY;
				break;
			case CURLE_UNSUPPORTED_PROTOCOL:
			case CURLE_URL_MALFORMAT:
				outcome = HTTP_DEAD;
				break;
			default:
				outcome = HTTP_RETRY;
				break;
		}
		if (code == CURLE_OPERATION_TIMEDOUT)
			error = psprintf("timeout: timed out after %ld ms: %s", request->def->timeout_ms, detail);
		else
			error = psprintf("%s: %s: %s", failure_code(code), curl_easy_strerror(code), detail);
	}

	result_of(request, outcome, (int) status, error, result);
	if (outcome == HTTP_RETRY)
		result->retry_at = retry_time(request, honour_retry_after);
	MemoryContextSwitchTo(old);
	return true;
}

/*
 * sched._check_url(url text) RETURNS void
 *
 * Refuse a webhook URL that is not http(s) to a host, carries credentials,
 * is too long or has control characters or spaces, or names an address
 * the perimeter refuses.
 */
Datum
delaysched_check_url(PG_FUNCTION_ARGS)
{
	char	   *url = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char		host[256];
	const char *why;
	struct sockaddr_storage addr;
	char		refusal[160];

	if (strlen(url) > URL_MAX_LENGTH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("url must be at most %d bytes long", URL_MAX_LENGTH)));
	for (const char *p = url; *p; p++)
		if ((unsigned char) *p <= 0x20 || *p == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("url must not contain spaces or control characters"),
					 errhint("Percent-encode them, as %%20 for a space.")));
	if (!url_host(url, host, sizeof(host), &why, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid url \"%s\": %s", url, why),
				 strcmp(why, "it carries credentials") == 0
				 ? errhint("Send credentials in a header instead, for example headers => '{\"Authorization\": \"Bearer ...\"}'.")
				 : errhint("A webhook url is http:// or https://, then a host, for example https://hooks.example.com/orders.")));

	/* A literal address is checked now; a name when it is resolved. */
	memset(&addr, 0, sizeof(addr));
	if (inet_pton(AF_INET, host, &((struct sockaddr_in *) &addr)->sin_addr) == 1)
		addr.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *) &addr)->sin6_addr) == 1)
		addr.ss_family = AF_INET6;
	if (addr.ss_family != 0 &&
		delaysched_address_refusal((struct sockaddr *) &addr, delaysched_host_allowed_by_name(host),
								   refusal, sizeof(refusal)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid url \"%s\": %s", url, refusal),
				 errhint("An administrator can change delaysched.http_allowed_hosts and delaysched.http_denied_hosts.")));
	PG_RETURN_VOID();
}
