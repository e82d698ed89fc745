/*-------------------------------------------------------------------------
 *
 * http_transfer.c
 *		The transfer driver of an HTTP worker: one libcurl multi handle, its
 *		sockets in an epoll set of their own, and its timer.
 *
 * libcurl's multi interface runs any number of requests in one thread.
 * It tells us which sockets it waits on (on_socket) and when it wants to be
 * called back without socket activity (on_timer); we call
 * curl_multi_socket_action() for every socket that is ready and when the
 * timer runs out, and collect the transfers that ended.
 *
 * The sockets go into an epoll set owned by this file.  An epoll file
 * descriptor is itself readable while any of its sockets is ready, so the
 * worker waits on that one descriptor in its WaitEventSet, beside its
 * latch and postmaster death: a wake-up, a shutdown request and network
 * activity all end the same wait.  (A WaitEventSet cannot drop a socket
 * once added, and libcurl opens and closes sockets all the time.)
 *
 * Connections are kept and reused between requests to the same host
 * (libcurl's connection cache, up to the worker's cap), and no more than
 * that many are ever open: CURLMOPT_MAX_TOTAL_CONNECTIONS.
 *
 * Each origin has an allowance of requests at once (http_origins.c): a
 * request given to the driver beyond it waits in its origin's queue, not
 * in libcurl, and is sent when one of the origin's requests ends; one that
 * waits too long comes back unsent.  Both count as in flight here, as both
 * hold one of the worker's slots.
 *
 * The callbacks run inside libcurl; like those of http_request.c they
 * neither allocate PostgreSQL memory nor raise errors.
 *
 * IDENTIFICATION
 *	  src/http/http_transfer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/epoll.h>
#include <unistd.h>

#include "utils/timestamp.h"

#include "http/http.h"

/* The most socket events handled per pass. */
#define EVENTS_PER_PASS 256

static struct
{
	CURLM	   *multi;
	int			epoll_fd;
	TimestampTz timer_at;		/* when libcurl wants a call; DT_NOEND none */
	int			in_flight;
	int			socket_errors;	/* epoll_ctl failures since the last look */
} driver = {NULL, -1, DT_NOEND, 0, 0};

/* libcurl: watch socket s for "what" (or stop watching it). */
static int
on_socket(CURL *easy, curl_socket_t s, int what, void *arg, void *socket_arg)
{
	struct epoll_event ev;

	if (what == CURL_POLL_REMOVE)
	{
		(void) epoll_ctl(driver.epoll_fd, EPOLL_CTL_DEL, s, NULL);
		curl_multi_assign(driver.multi, s, NULL);
		return 0;
	}
	memset(&ev, 0, sizeof(ev));
	ev.data.fd = s;
	if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
		ev.events |= EPOLLIN;
	if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
		ev.events |= EPOLLOUT;
	if (socket_arg == NULL)
	{
		if (epoll_ctl(driver.epoll_fd, EPOLL_CTL_ADD, s, &ev) != 0 &&
			(errno != EEXIST || epoll_ctl(driver.epoll_fd, EPOLL_CTL_MOD, s, &ev) != 0))
		{
			driver.socket_errors++;
			return -1;
		}
		curl_multi_assign(driver.multi, s, (void *) 1);
	}
	else if (epoll_ctl(driver.epoll_fd, EPOLL_CTL_MOD, s, &ev) != 0)
	{
		driver.socket_errors++;
		return -1;
	}
	return 0;
}

/* libcurl: call back in timeout_ms (-1: no need). */
static int
on_timer(CURLM *multi, long timeout_ms, void *arg)
{
	if (timeout_ms < 0)
		driver.timer_at = DT_NOEND;
	else
		driver.timer_at = GetCurrentTimestamp() + (TimestampTz) timeout_ms * 1000;
	return 0;
}

/*
 * Start the driver, for at most max_connections connections at once.
 * Returns the descriptor to wait on for socket activity.
 */
int
delaysched_http_driver_start(int max_connections)
{
	if (curl_global_init(CURL_GLOBAL_ALL) != CURLE_OK)
		elog(ERROR, "could not initialize libcurl");
	driver.multi = curl_multi_init();
	if (driver.multi == NULL)
		elog(ERROR, "could not create a libcurl multi handle");
	driver.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (driver.epoll_fd < 0)
		elog(ERROR, "epoll_create1 failed: %m");
	if (curl_multi_setopt(driver.multi, CURLMOPT_SOCKETFUNCTION, on_socket) != CURLM_OK ||
		curl_multi_setopt(driver.multi, CURLMOPT_TIMERFUNCTION, on_timer) != CURLM_OK ||
		curl_multi_setopt(driver.multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long) max_connections) != CURLM_OK ||
		curl_multi_setopt(driver.multi, CURLMOPT_MAXCONNECTS, (long) max_connections) != CURLM_OK)
		elog(ERROR, "could not set up the libcurl multi handle");
	driver.timer_at = DT_NOEND;
	driver.in_flight = 0;
	return driver.epoll_fd;
}

/* Change the connection cap (delaysched.http_max_in_flight was reloaded). */
void
delaysched_http_driver_set_cap(int max_connections)
{
	curl_multi_setopt(driver.multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long) max_connections);
	curl_multi_setopt(driver.multi, CURLMOPT_MAXCONNECTS, (long) max_connections);
}

/* Hand an admitted request to libcurl; false (with the reason) if it refused. */
static bool
send_now(HttpRequest *request, char *error, size_t errlen)
{
	CURLMcode	code = curl_multi_add_handle(driver.multi, request->easy);

	if (code != CURLM_OK)
	{
		snprintf(error, errlen, "local_error: could not start the request: %s", curl_multi_strerror(code));
		(void) delaysched_http_origin_ended(request, CURLE_FAILED_INIT, GetCurrentTimestamp());
		return false;
	}
	return true;
}

/*
 * Start a prepared (aimed) request, or queue it behind its origin's; false
 * (with the reason) if libcurl refused it.
 */
bool
delaysched_http_driver_add(HttpRequest *request, char *error, size_t errlen)
{
	TimestampTz now = GetCurrentTimestamp();

	if (request->queued_at == 0)
		request->queued_at = now;
	else if (delaysched_http_origin_too_late(request, now))
	{
		/* A redirect's next request, whose answer could outlive the lease. */
		snprintf(error, errlen,
				 "redirect_late: not followed to %s, %ld ms after the task was taken: its lease could run out first; parked again",
				 request->url, (long) ((now - request->queued_at) / 1000));
		return false;
	}
	if (delaysched_http_origin_admit(request, now) && !send_now(request, error, errlen))
		return false;
	driver.in_flight++;
	return true;
}

int
delaysched_http_driver_in_flight(void)
{
	return driver.in_flight;
}

/*
 * When the driver wants to run without socket activity: libcurl's timer,
 * or a queued request running out of time; DT_NOEND never.
 */
TimestampTz
delaysched_http_driver_timer(void)
{
	return Min(driver.timer_at, delaysched_http_origins_expiry());
}

/*
 * Send the queued requests their origins allow now, and hand back those
 * that waited too long (to on_unsent, with the reason).
 */
static void
send_queued(void (*on_unsent) (HttpRequest *request, const char *error, void *arg), void *arg)
{
	TimestampTz now = GetCurrentTimestamp();
	HttpOrigin *origin;

	for (int i = 0; (origin = delaysched_http_origin_waiting(i)) != NULL; i++)
	{
		HttpRequest *request;
		bool		expired;

		while ((request = delaysched_http_origin_next(origin, now, &expired)) != NULL)
		{
			char		error[256];

			if (expired)
				snprintf(error, sizeof(error),
						 "host_busy: not sent: waited %ld ms for a place among the requests to %s; parked again",
						 (long) ((now - request->queued_at) / 1000), request->origin);
			else if (send_now(request, error, sizeof(error)))
				continue;
			driver.in_flight--;
			on_unsent(request, error, arg);
		}
	}
}

/*
 * Let libcurl work: on the sockets that are ready, and on its timer if it
 * ran out.  Then hand every transfer that ended to on_done, which owns the
 * request from then on (it may start it again, for a redirect), send what
 * their origins' queues may send now, and hand every request that waited
 * too long there to on_unsent, which owns it from then on.
 */
void
delaysched_http_driver_run(void (*on_done) (HttpRequest *request, CURLcode code, void *arg),
						   void (*on_unsent) (HttpRequest *request, const char *error, void *arg),
						   void *arg)
{
	struct epoll_event events[EVENTS_PER_PASS];
	int			n;
	int			running;
	CURLMsg    *message;
	int			left;
	HttpRequest *ended[EVENTS_PER_PASS];
	CURLcode	codes[EVENTS_PER_PASS];

	n = epoll_wait(driver.epoll_fd, events, EVENTS_PER_PASS, 0);
	for (int i = 0; i < n; i++)
	{
		int			flags = 0;

		if (events[i].events & EPOLLIN)
			flags |= CURL_CSELECT_IN;
		if (events[i].events & EPOLLOUT)
			flags |= CURL_CSELECT_OUT;
		if (events[i].events & (EPOLLERR | EPOLLHUP))
			flags |= CURL_CSELECT_ERR;
		curl_multi_socket_action(driver.multi, events[i].data.fd, flags, &running);
	}
	if (driver.timer_at != DT_NOEND && GetCurrentTimestamp() >= driver.timer_at)
	{
		driver.timer_at = DT_NOEND;
		curl_multi_socket_action(driver.multi, CURL_SOCKET_TIMEOUT, 0, &running);
	}

	/* Collect first, then hand over: on_done may add handles again. */
	do
	{
		int			count = 0;

		while (count < EVENTS_PER_PASS &&
			   (message = curl_multi_info_read(driver.multi, &left)) != NULL)
		{
			HttpRequest *request = NULL;

			if (message->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **) &request);
			codes[count] = message->data.result;
			ended[count++] = request;
			(void) delaysched_http_origin_ended(request, message->data.result, GetCurrentTimestamp());
			curl_multi_remove_handle(driver.multi, message->easy_handle);
			driver.in_flight--;
		}
		for (int i = 0; i < count; i++)
			on_done(ended[i], codes[i], arg);
		if (count < EVENTS_PER_PASS)
			break;
	} while (true);
	send_queued(on_unsent, arg);

	if (driver.socket_errors > 0)
	{
		elog(LOG, "delaysched HTTP worker: %d epoll_ctl failures", driver.socket_errors);
		driver.socket_errors = 0;
	}
}
