/*-------------------------------------------------------------------------
 *
 * http_origins.c
 *		How many requests an HTTP worker sends at once to each receiver:
 *		an allowance per origin (scheme, host and port) that starts small,
 *		grows while the receiver keeps up and halves when it does not, and
 *		a queue of the requests waiting for it.
 *
 * Why.  Two hundred webhooks due at once to one receiver used to open two
 * hundred connections at once.  A small receiver (Python's http.server,
 * whose listen backlog is 5) drops the connections its backlog cannot hold;
 * their SYNs are sent again after 1, 3 and 7 seconds, and a third of the
 * requests timed out.  A big receiver, on the other hand, takes hundreds at
 * once and should get them.  Neither can be told from the URL, so each
 * origin's allowance is learned, as TCP learns its congestion window:
 *
 *	 - It starts at FIRST_WINDOW requests in flight and grows by one for
 *	   every request that ended well while the allowance was in use: it
 *	   doubles every round trip (slow start, as the answers come back, so
 *	   that connections are opened no faster than the receiver answers).
 *	   After a cut, above its threshold (the allowance after the cut, and
 *	   FIRST_WINDOW at least), it grows by one per allowance's worth of such
 *	   requests instead.  Never above
 *	   delaysched.http_max_in_flight_per_host, the hard cap (0: no cap,
 *	   no allowance, no queue, nothing learnt: every request is sent at
 *	   once).
 *	 - It halves, down to one, when the receiver shows it is overwhelmed:
 *	   a connection took 0.9 s or more to open (the listen queue was full
 *	   and the SYN was sent again after a second), a connection was refused,
 *	   reset or closed without an answer, a request timed out, or the answer
 *	   was 429, 502, 503 or 504.  Once per round: only a request sent after
 *	   the last cut can cut it again, as the others were sent under the
 *	   larger allowance.
 *	 - A 429 or 503 with Retry-After also pauses the origin: nothing more is
 *	   sent to it for that long (MAX_PAUSE_S at most), so that its tasks do
 *	   not each get a 503 in turn and come back together (a retry storm).
 *	 - What says nothing of the receiver's load (a DNS failure, a TLS or
 *	   perimeter refusal, any other 4xx or 5xx) changes nothing.
 *
 * Connections are reused (libcurl's cache, keep-alive), and over TLS a
 * receiver offering HTTP/2 gets the requests multiplexed (http_request.c);
 * the allowance counts requests, so under HTTP/1.1 it is also the most
 * connections open to the origin.
 *
 * The queue.  A request beyond its origin's allowance waits in the worker,
 * never in libcurl: the type's timeout counts from when it is sent.  Its
 * lease was taken for the timeout and sched._http_lease's 30 seconds of
 * grace, so a request that waited MAX_WAIT (20 s) without being sent is
 * not sent at all: it is parked again with its attempt not counted
 * (error host_busy), for a later claim, never sent under a lease that may
 * run out.  Claims keep the queues short in the first place: a type gets
 * no more tasks than its origin can send within about ROOM_SECONDS
 * (delaysched_http_origin_room, for sched._http_claim).
 *
 * The table lives in the worker's memory, one entry per origin it sent to
 * in the last IDLE_FORGET; with several HTTP workers, each has its own
 * allowances (a receiver gets up to workers x cap).
 *
 * IDENTIFICATION
 *	  src/http/http_origins.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <float.h>

#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "base/guc.h"
#include "http/http.h"

/*
 * The allowance of an origin not seen before: fewer connections at once
 * than the smallest listen queue in common use (Python's http.server
 * holds 5 + 1; with 10 at once, one SYN in each of five runs was
 * dropped and waited its second).
 */
#define FIRST_WINDOW		4.0
/* A connection this slow to open met a full listen queue (a SYN resent). */
#define SLOW_CONNECT_US		(900 * 1000)
/* The longest a request waits for its origin (see the file header). */
#define MAX_WAIT_MS			(20 * 1000)
/* Claims take what an origin can send in about this long... */
#define ROOM_SECONDS		10.0
/* ...and never more than this many allowances' worth. */
#define ROOM_ROUNDS			8.0
/* The longest pause a Retry-After gets. */
#define MAX_PAUSE_S			300.0
/* An origin idle this long is forgotten. */
#define IDLE_FORGET_MS		(10 * 60 * 1000)

struct HttpOrigin
{
	char		key[HTTP_ORIGIN_SIZE];	/* scheme://host:port */
	double		window;			/* the allowance, before the hard cap */
	double		threshold;		/* slow start below it */
	int			in_flight;		/* sent, not ended */
	dlist_head	waiting;		/* queued requests, oldest first */
	int			n_waiting;
	bool		listed;			/* in origins_waiting */
	TimestampTz cut_at;			/* when the allowance was last halved */
	TimestampTz paused_until;	/* a Retry-After: nothing sent before it */
	double		mean_ms;		/* moving average of request durations */
	TimestampTz used_at;		/* a request was sent or ended */
};

static HTAB *origins = NULL;

/* The origins that have requests waiting (few): pumped after every pass. */
static HttpOrigin **origins_waiting = NULL;
static int	n_origins_waiting = 0;
static int	origins_waiting_size = 0;

/* Requests waiting, over every origin. */
static int	n_queued = 0;

static HttpOrigin *
find(const char *key, bool create)
{
	HttpOrigin *origin;
	bool		found;

	if (origins == NULL)
	{
		HASHCTL		ctl;

		if (!create)
			return NULL;
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = HTTP_ORIGIN_SIZE;
		ctl.entrysize = sizeof(HttpOrigin);
		ctl.hcxt = TopMemoryContext;
		origins = hash_create("delaysched HTTP origins", 64, &ctl,
							  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	origin = hash_search(origins, key, create ? HASH_ENTER : HASH_FIND, &found);
	if (create && !found)
	{
		origin->window = FIRST_WINDOW;
		origin->threshold = DBL_MAX;	/* slow start until the first cut */
		origin->in_flight = 0;
		dlist_init(&origin->waiting);
		origin->n_waiting = 0;
		origin->listed = false;
		origin->cut_at = 0;
		origin->paused_until = 0;
		origin->mean_ms = 0;
		origin->used_at = 0;
	}
	return origin;
}

/* How many requests the origin may have in flight now. */
static int
allowance(const HttpOrigin *origin, TimestampTz now)
{
	if (delaysched_http_max_in_flight_per_host == 0)
		return INT_MAX;			/* switched off */
	if (now < origin->paused_until)
		return 0;				/* it asked for a pause */
	return Max(1, Min((int) origin->window, delaysched_http_max_in_flight_per_host));
}

/*
 * A request is being sent: its attempt starts now (the first time; a
 * redirect's next request belongs to the same attempt), and its origin
 * judges its answer by when this request was sent.
 */
static void
mark_sent(HttpRequest *request, TimestampTz now)
{
	if (request->redirects == 0)
		request->started = now;
	request->sent = now;
}

/*
 * May the request (aimed, so its origin is known) be sent now?  Yes counts
 * it in flight; no queues it behind its origin's other requests, for
 * delaysched_http_origin_next.  Every request given to the driver comes
 * here once per url it is sent to (a redirect comes again).
 */
bool
delaysched_http_origin_admit(HttpRequest *request, TimestampTz now)
{
	HttpOrigin *origin = find(request->origin, true);

	origin->used_at = now;
	if (origin->n_waiting == 0 && origin->in_flight < allowance(origin, now))
	{
		origin->in_flight++;
		mark_sent(request, now);
		return true;
	}
	dlist_push_tail(&origin->waiting, &request->node);
	origin->n_waiting++;
	n_queued++;
	if (!origin->listed)
	{
		if (n_origins_waiting == origins_waiting_size)
		{
			origins_waiting_size = Max(16, origins_waiting_size * 2);
			origins_waiting = origins_waiting == NULL
				? MemoryContextAlloc(TopMemoryContext, sizeof(HttpOrigin *) * origins_waiting_size)
				: repalloc(origins_waiting, sizeof(HttpOrigin *) * origins_waiting_size);
		}
		origins_waiting[n_origins_waiting++] = origin;
		origin->listed = true;
	}
	return false;
}

/* What a request that ended says of its receiver's load. */
typedef enum Verdict
{
	KEPT_UP,
	OVERWHELMED,
	SAYS_NOTHING
} Verdict;

static Verdict
verdict(HttpRequest *request, CURLcode code)
{
	long		status = 0;
	long		os_errno = 0;
	curl_off_t	connect_us = 0;
	curl_off_t	lookup_us = 0;

	switch (code)
	{
		case CURLE_OK:
			curl_easy_getinfo(request->easy, CURLINFO_RESPONSE_CODE, &status);
			/* Too many requests, unavailable, a gateway that gave up. */
			if (status == 429 || status == 502 || status == 503 || status == 504)
				return OVERWHELMED;
			/* The handshake alone (0 when the connection was reused). */
			if (curl_easy_getinfo(request->easy, CURLINFO_CONNECT_TIME_T, &connect_us) == CURLE_OK &&
				curl_easy_getinfo(request->easy, CURLINFO_NAMELOOKUP_TIME_T, &lookup_us) == CURLE_OK &&
				connect_us - lookup_us >= SLOW_CONNECT_US)
				return OVERWHELMED;
			/* Any other error status says nothing of its load. */
			return status < 400 ? KEPT_UP : SAYS_NOTHING;
		case CURLE_COULDNT_CONNECT:
			curl_easy_getinfo(request->easy, CURLINFO_OS_ERRNO, &os_errno);
			/* Out of descriptors or memory here: nothing to do with it. */
			if (os_errno == EMFILE || os_errno == ENFILE || os_errno == ENOBUFS || os_errno == ENOMEM)
				return SAYS_NOTHING;
			return request->refusal[0] != '\0' ? SAYS_NOTHING : OVERWHELMED;
		case CURLE_OPERATION_TIMEDOUT:
		case CURLE_GOT_NOTHING:
		case CURLE_RECV_ERROR:
		case CURLE_SEND_ERROR:
			return OVERWHELMED;
		default:
			return SAYS_NOTHING;
	}
}

/*
 * A 429 or 503 with Retry-After asks the receiver's clients to wait: send
 * it nothing more for that long (MAX_PAUSE_S at most).  Its requests in
 * flight go on; the task of this one is retried after Retry-After too
 * (http_request.c).
 */
static void
pause_if_asked(HttpOrigin *origin, HttpRequest *request, CURLcode code, TimestampTz now)
{
	long		status = 0;
	TimestampTz until;

	if (code != CURLE_OK || request->retry_after_s < 0)
		return;
	curl_easy_getinfo(request->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status != 429 && status != 503)
		return;
	until = now + (TimestampTz) (Min(request->retry_after_s, MAX_PAUSE_S) * USECS_PER_SEC);
	if (until > origin->paused_until)
	{
		origin->paused_until = until;
		elog(DEBUG1, "delaysched HTTP worker: %s asked for a pause of %.0f s (Retry-After)",
			 origin->key, Min(request->retry_after_s, MAX_PAUSE_S));
	}
}

/*
 * A request sent by delaysched_http_origin_admit or _next ended (code is
 * libcurl's; CURLE_FAILED_INIT for one that could not be started): its
 * origin's allowance learns from it.  Returns the origin, whose queue may
 * move now.  Call before the easy handle is reused or freed.
 */
HttpOrigin *
delaysched_http_origin_ended(HttpRequest *request, CURLcode code, TimestampTz now)
{
	HttpOrigin *origin = find(request->origin, false);
	bool		was_full;
	double		ms;

	if (origin == NULL)
		elog(ERROR, "delaysched HTTP worker: a request to %s ended, an origin it does not know", request->origin);
	/*
	 * Its allowance held requests back: all of it in use, or requests
	 * waiting.  (The waiting count matters: the driver sends the next ones
	 * only after every transfer that ended in a pass is counted here.)
	 */
	was_full = origin->in_flight + origin->n_waiting >= allowance(origin, now);
	origin->in_flight--;
	origin->used_at = now;
	if (code == CURLE_FAILED_INIT)
		return origin;

	ms = (double) (now - request->sent) / 1000.0;
	origin->mean_ms = origin->mean_ms == 0 ? ms : origin->mean_ms + (ms - origin->mean_ms) / 8;
	/* Switched off: nothing to learn, and nothing learnt meanwhile. */
	if (delaysched_http_max_in_flight_per_host == 0)
		return origin;
	switch (verdict(request, code))
	{
		case OVERWHELMED:
			pause_if_asked(origin, request, code, now);
			if (request->sent > origin->cut_at)
			{
				/* Half of what it had: a cap lowered since is what it had. */
				double		had = Min(origin->window, (double) delaysched_http_max_in_flight_per_host);

				origin->window = Max(1.0, had / 2);
				/* Slow start again up to FIRST_WINDOW at least. */
				origin->threshold = Max(FIRST_WINDOW, origin->window);
				origin->cut_at = now;
				elog(DEBUG1, "delaysched HTTP worker: %s is overwhelmed: %d requests at once from now on",
					 origin->key, Max(1, Min((int) origin->window, delaysched_http_max_in_flight_per_host)));
			}
			break;
		case KEPT_UP:
			/* Grow only an allowance in use: unused, it proves nothing. */
			if (was_full && now >= origin->paused_until &&
				origin->window < delaysched_http_max_in_flight_per_host &&
				delaysched_http_max_in_flight_per_host > 0)
				origin->window += origin->window < origin->threshold ? 1.0 : 1.0 / origin->window;
			break;
		case SAYS_NOTHING:
			break;
	}
	return origin;
}

/*
 * Whether a request given to the driver at queued_at is too late to be
 * sent now: its lease may run out before its answer (see the file header).
 */
bool
delaysched_http_origin_too_late(const HttpRequest *request, TimestampTz now)
{
	return now >= TimestampTzPlusMilliseconds(request->queued_at, MAX_WAIT_MS);
}

/*
 * The next of the origin's waiting requests to send now (counted in
 * flight), or one that waited too long (*expired: park it again, unsent);
 * NULL when none may go.
 */
HttpRequest *
delaysched_http_origin_next(HttpOrigin *origin, TimestampTz now, bool *expired)
{
	HttpRequest *request;

	*expired = false;
	if (origin->n_waiting == 0)
		return NULL;
	request = dlist_container(HttpRequest, node, dlist_head_node(&origin->waiting));
	if (delaysched_http_origin_too_late(request, now))
		*expired = true;
	else if (origin->in_flight >= allowance(origin, now))
		return NULL;
	else
	{
		origin->in_flight++;
		mark_sent(request, now);
	}
	dlist_pop_head_node(&origin->waiting);
	origin->n_waiting--;
	n_queued--;
	origin->used_at = now;
	return request;
}

/*
 * The i-th origin that has requests waiting, NULL past the last.  Origins
 * whose queue emptied leave the list here, so walk it from 0 while taking
 * their requests, and go on from the same i when one is dropped.
 */
HttpOrigin *
delaysched_http_origin_waiting(int i)
{
	while (i < n_origins_waiting && origins_waiting[i]->n_waiting == 0)
	{
		origins_waiting[i]->listed = false;
		origins_waiting[i] = origins_waiting[--n_origins_waiting];
	}
	return i < n_origins_waiting ? origins_waiting[i] : NULL;
}

/*
 * When the driver must look at the queues again without a request ending:
 * the oldest waiting request runs out of time, or a pause ends; DT_NOEND
 * if no request waits.
 */
TimestampTz
delaysched_http_origins_expiry(void)
{
	TimestampTz first = DT_NOEND;
	TimestampTz now = GetCurrentTimestamp();

	for (int i = 0; i < n_origins_waiting; i++)
	{
		HttpOrigin *origin = origins_waiting[i];

		if (origin->n_waiting > 0)
		{
			HttpRequest *head = dlist_container(HttpRequest, node, dlist_head_node(&origin->waiting));

			first = Min(first, TimestampTzPlusMilliseconds(head->queued_at, MAX_WAIT_MS));
			/* The end of a pause lets requests go. */
			if (origin->paused_until > now)
				first = Min(first, origin->paused_until);
		}
	}
	return first;
}

/* Requests waiting for their origin, over every origin. */
int
delaysched_http_origins_queued(void)
{
	return n_queued;
}

/*
 * How many more tasks of a type whose url has this origin a claim should
 * lease: what the origin can send in about ROOM_SECONDS at its allowance
 * and its requests' usual duration (ROOM_ROUNDS allowances at most, one at
 * least), less what it has sent or queued.
 */
int
delaysched_http_origin_room(const char *key)
{
	HttpOrigin *origin = find(key, false);
	double		rounds;
	int			allowed;

	if (delaysched_http_max_in_flight_per_host == 0)
		return PG_INT32_MAX;
	if (origin == NULL)
		return (int) (FIRST_WINDOW * ROOM_ROUNDS);
	rounds = origin->mean_ms > 0 ? ROOM_SECONDS * 1000.0 / origin->mean_ms : ROOM_ROUNDS;
	rounds = Max(1.0, Min(ROOM_ROUNDS, rounds));
	allowed = allowance(origin, GetCurrentTimestamp());
	if (allowed == 0)
		return 0;
	return Max(0, (int) (allowed * rounds) - origin->in_flight - origin->n_waiting);
}

/* Forget the origins nothing was sent to for IDLE_FORGET_MS. */
void
delaysched_http_origins_forget_idle(TimestampTz now)
{
	HASH_SEQ_STATUS seq;
	HttpOrigin *origin;

	if (origins == NULL)
		return;
	hash_seq_init(&seq, origins);
	while ((origin = hash_seq_search(&seq)) != NULL)
		if (origin->in_flight == 0 && origin->n_waiting == 0 && !origin->listed &&
			now >= TimestampTzPlusMilliseconds(origin->used_at, IDLE_FORGET_MS))
			hash_search(origins, origin->key, HASH_REMOVE, NULL);
}
