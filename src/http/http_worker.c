/*-------------------------------------------------------------------------
 *
 * http_worker.c
 *		The HTTP workers: delaysched.http_workers background workers that
 *		POST the tasks of http business types to their webhooks.
 *
 * How a task gets here.  Usually it is handed over: when an http type's
 * task falls due, the scanner's walk leases it to a worker with free slots
 * (state 'd', attempt + 1, lease_owner) and, when its transaction commits,
 * puts it in that worker's ring in shared memory (http_handoff.c); the worker
 * reads the tasks it takes from there in a short read-only transaction and
 * starts their requests.  Otherwise (a limited type, full slots, a local
 * failure, a release) the task is parked (state 'r', see tick.c) and the
 * commit wakes these workers; a worker then, in one short transaction,
 * leases as many parked tasks as it has free slots (sched._http_claim),
 * shared fairly between the types that have some, within their rate limits
 * and concurrency caps; commits; and only then starts the requests.  The
 * results of the requests that ended are recorded a batch at a time
 * (sched._http_record: done, retry later, dead, or parked again): in a
 * transaction of their own, never ahead of a claim or a hand-off, or during
 * a burst at the start of a claim's.  No transaction is open while
 * requests are in flight; a lease outlives its request by the type's
 * timeout and a grace, and a worker that starts again empties its ring and
 * parks at once the tasks its previous run had leased
 * (sched._http_release).
 *
 * The wait.  Every request runs in libcurl's multi interface
 * (http_transfer.c), whose sockets sit behind one epoll descriptor; the
 * worker's WaitEventSet holds that descriptor, its latch and postmaster
 * death.  It wakes when a socket is ready, when libcurl's timer runs out,
 * when a hand-off comes or a commit parks http tasks (the latch: a park
 * also sets claim_wanted), every POLL_MS to look for
 * work it was not told of, when a rate-limited type's next token comes,
 * and RECORD_WAIT_MS after a result came in.  When the last claim found
 * work, it claims again after recording (the requests that ended freed
 * their slots, and their types' concurrency caps), or sooner, once an
 * eighth of its slots (100 at most) ended since that claim.
 *
 * Slots.  A worker has at most delaysched.http_max_in_flight requests in
 * flight, and never more than its file descriptors allow: at start it
 * raises its soft RLIMIT_NOFILE to the hard limit and keeps what
 * PostgreSQL's own files may use (max_safe_fds) and a margin.  libcurl
 * opens no more connections than that (CURLMOPT_MAX_TOTAL_CONNECTIONS); a
 * request that still fails for want of a descriptor or memory is parked
 * again with its attempt not counted, never lost.
 *
 * Shutdown.  SIGTERM ends the wait at once; the worker records the
 * results it has, and exits (to be started again a second later, unless
 * the server is shutting down).  Requests still in flight are sent again by
 * the next run (a duplicate after a stop, which the at-least-once promise
 * allows).
 *
 * IDENTIFICATION
 *	  src/http/http_worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/resource.h>

#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "base/base.h"
#include "base/guc.h"
#include "base/shmem.h"
#include "http/http.h"

/* Look for parked tasks this often even if no commit said so. */
#define POLL_MS				1000
/* Record results at most this long after the first came in... */
#define RECORD_WAIT_MS		20
/* ...or as soon as this many are waiting. */
#define RECORD_BATCH		1000
/* A claim records the results first when this many wait (a burst). */
#define RECORD_ALONG		100
/* A result whose task's row a user's transaction held: try again this much later. */
#define HELD_RESULT_RETRY_MS	500
/* After a local failure (no descriptor, no memory), claim again after this. */
#define LOCAL_FAILURE_PAUSE_MS 200
/* Look for origins to forget (see http_origins.c) this often. */
#define FORGET_ORIGINS_MS	(60 * 1000)
/* Descriptors kept free beyond PostgreSQL's own files. */
#define SPARE_DESCRIPTORS	64

static int	my_index = -1;
static Oid	extension_oid = InvalidOid;

/* Results not recorded yet. */
static HttpResult *results = NULL;
static int	n_results = 0;
static int	results_size = 0;
/* When the results waiting should be recorded (see add_result). */
static TimestampTz record_at = 0;
static bool local_failure = false;
/* Requests that ended since the last claim (their slots are free). */
static int	ended_since_claim = 0;

/* Shorthand: this worker's slot (see Locks in base/shmem.h). */
#define MY_SLOT (&delaysched_http_slots[my_index])

/* before_shmem_exit callback: this worker is gone.  Takes its slot's lock. */
static void
http_detach(int code, Datum arg)
{
	LWLockAcquire(MY_SLOT->lock, LW_EXCLUSIVE);
	MY_SLOT->pid = 0;
	MY_SLOT->latch = NULL;
	MY_SLOT->in_flight = 0;
	MY_SLOT->waiting = 0;
	LWLockRelease(MY_SLOT->lock);
}

/* The in-flight cap http_attach records; set before it runs. */
static int	attach_cap = 0;

/*
 * Take slot "index" of this database's HTTP workers for this process, its
 * counters at zero; false if another worker has it.  Takes its slot's lock.
 */
static bool
http_attach(int index)
{
	HttpWorkerSlot *slot;

	if (index < 0 || index >= delaysched_http_workers)
		return false;
	slot = &delaysched_http_slots[index];
	LWLockAcquire(slot->lock, LW_EXCLUSIVE);
	if (slot->pid != 0)
	{
		LWLockRelease(slot->lock);
		return false;
	}
	slot->pid = MyProcPid;
	slot->latch = NULL;
	LWLockRelease(slot->lock);

	my_index = index;
	/* What the previous run was handed is for sched._http_release. */
	delaysched_handoff_clear(my_index);
	pg_atomic_write_u64(&MY_SLOT->last_claim, 0);
	pg_atomic_write_u64(&MY_SLOT->sent, 0);
	pg_atomic_write_u64(&MY_SLOT->succeeded, 0);
	pg_atomic_write_u64(&MY_SLOT->handed, 0);
	pg_atomic_write_u64(&MY_SLOT->claimed, 0);
	pg_atomic_write_u64(&MY_SLOT->ticks, 0);
	pg_atomic_write_u32(&MY_SLOT->claim_wanted, 0);
	/* Not the ring: scanners' open transactions hold places in it. */
	LWLockAcquire(MY_SLOT->lock, LW_EXCLUSIVE);
	MY_SLOT->latch = MyLatch;
	MY_SLOT->in_flight = 0;
	MY_SLOT->waiting = 0;
	MY_SLOT->max_in_flight = attach_cap;
	LWLockRelease(MY_SLOT->lock);
	before_shmem_exit(http_detach, (Datum) 0);
	return true;
}

/*
 * How many requests this worker may have in flight: the parameter, within
 * the file descriptors it can open (see the file header).
 */
static int
in_flight_cap(void)
{
	struct rlimit limit;
	int64		spare;

	if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
		return delaysched_http_max_in_flight;
	if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < limit.rlim_max)
	{
		struct rlimit raised = limit;

		raised.rlim_cur = limit.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
			limit = raised;
	}
	if (limit.rlim_cur == RLIM_INFINITY)
		return delaysched_http_max_in_flight;
	spare = (int64) limit.rlim_cur - max_safe_fds - SPARE_DESCRIPTORS;
	if (spare < delaysched_http_max_in_flight)
	{
		ereport(LOG,
				(errmsg("delaysched HTTP worker %d: at most " INT64_FORMAT " requests in flight, not %d, for want of file descriptors",
						my_index, Max(spare, 1), delaysched_http_max_in_flight),
				 errhint("Raise the open files limit (ulimit -n) of the server.")));
		return (int) Max(spare, 1);
	}
	return delaysched_http_max_in_flight;
}

/*
 * Keep a result for the next record; local_fault: the request failed here
 * (no descriptor, no memory), and claims pause a moment.
 */
static void
add_result(const HttpResult *result, bool local_fault)
{
	if (n_results == results_size)
	{
		results_size = Max(64, results_size * 2);
		results = results == NULL
			? MemoryContextAlloc(TopMemoryContext, sizeof(HttpResult) * results_size)
			: repalloc(results, sizeof(HttpResult) * results_size);
	}
	if (n_results == 0)
		record_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), RECORD_WAIT_MS);
	if (local_fault)
		local_failure = true;
	results[n_results] = *result;
	results[n_results].held = false;
	n_results++;
}

/*
 * A request is over (or could not start): its result, and free it.  A
 * request parked again (requeued) failed here, unless it was handed back
 * unsent by the transfer driver (unsent).
 */
static void
finish_request(HttpRequest *request, const HttpResult *result, bool unsent)
{
	add_result(result, result->outcome == HTTP_REQUEUED && !unsent);
	ended_since_claim++;
	delaysched_http_count_in_flight(request->def->name, -1);
	delaysched_http_request_free(request);
	pg_atomic_fetch_add_u64(&MY_SLOT->sent, 1);
	if (result->outcome == HTTP_DONE)
		pg_atomic_fetch_add_u64(&MY_SLOT->succeeded, 1);
}

/* The transfer driver's callback: a transfer ended. */
static void
on_done(HttpRequest *request, CURLcode code, void *arg)
{
	HttpResult	result;
	char		error[256];

	if (delaysched_http_request_outcome(request, code, &result))
	{
		finish_request(request, &result, false);
		return;
	}
	/* A redirect to follow: the same request, to its new location. */
	if (!delaysched_http_driver_add(request, error, sizeof(error)))
	{
		delaysched_http_request_fail(request, HTTP_REQUEUED, error, &result);
		finish_request(request, &result, false);
	}
}

/* The transfer driver's callback: a request waited too long to be sent. */
static void
on_unsent(HttpRequest *request, const char *error, void *arg)
{
	HttpResult	result;

	delaysched_http_request_fail(request, HTTP_REQUEUED, error, &result);
	finish_request(request, &result, true);
}

/* What one transaction of the worker does and learns. */
typedef struct StoreCall
{
	bool		release;		/* first of this run: release the last run's */
	bool		record;			/* record the results waiting */
	int			room;			/* claim up to this many; 0: do not claim */
	int			max_in_flight;
	HttpRequest **claimed;		/* out */
	int			n_claimed;		/* out */
	TimestampTz next_token;		/* out: a rate-limited type's next token */
	bool		held_back;		/* out: a type waits at its share or cap */
} StoreCall;

static void
store_work(void *arg)
{
	StoreCall  *call = (StoreCall *) arg;
	Oid			extension = get_extension_oid("delaysched", false);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (call->release)
	{
		int			released = delaysched_http_release(extension, my_index);

		if (released > 0)
			ereport(LOG,
					(errmsg("delaysched HTTP worker %d: sending again %d requests its previous run left unfinished",
							my_index, released)));
	}
	if (call->record && n_results > 0)
		delaysched_http_record(extension, my_index, results, n_results);
	if (call->room > 0)
		call->n_claimed = delaysched_http_claim(extension, my_index, call->room,
												call->max_in_flight, &call->claimed,
												&call->next_token, &call->held_back);
	SPI_finish();
	extension_oid = extension;
}

/* The tasks a scanner handed over, read in a transaction of their own. */
typedef struct FetchCall
{
	HttpHandoff *handed;
	int			n;
	HttpRequest **requests;		/* out */
	int			n_requests;		/* out */
} FetchCall;

static void
fetch_work(void *arg)
{
	FetchCall  *call = (FetchCall *) arg;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	call->n_requests = delaysched_http_fetch(get_extension_oid("delaysched", false), my_index,
											 call->handed, call->n, &call->requests);
	SPI_finish();
}

/* The recorded results are gone: free their errors. */
static void
forget_results(void)
{
	for (int i = 0; i < n_results; i++)
		if (results[i].error != NULL)
			pfree(results[i].error);
	n_results = 0;
}

/*
 * After a transaction that recorded the results: forget the recorded ones,
 * and keep those whose task's row another transaction held, to record them
 * HELD_RESULT_RETRY_MS later.
 */
static void
forget_recorded_results(void)
{
	int			kept = 0;

	for (int i = 0; i < n_results; i++)
	{
		if (results[i].held)
		{
			results[kept] = results[i];
			results[kept].held = false;
			kept++;
		}
		else if (results[i].error != NULL)
			pfree(results[i].error);
	}
	n_results = kept;
	if (kept > 0)
		record_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), HELD_RESULT_RETRY_MS);
}

/*
 * Start the requests just claimed or handed over (their leases are
 * committed), and free the array.
 */
static void
start_requests(HttpRequest **requests, int n, bool handed)
{
	pg_atomic_fetch_add_u64(handed ? &MY_SLOT->handed : &MY_SLOT->claimed, n);
	for (int i = 0; i < n; i++)
	{
		HttpRequest *request = requests[i];
		char		error[256];
		HttpResult	result;

		if (!delaysched_http_request_prepare(request, error, sizeof(error)) ||
			!delaysched_http_driver_add(request, error, sizeof(error)))
		{
			delaysched_http_request_fail(request, HTTP_REQUEUED, error, &result);
			finish_request(request, &result, false);
		}
	}
	if (requests != NULL)
		pfree(requests);
}

/*
 * Start the requests of the tasks scanners handed over (see http_handoff.c), up
 * to room of them.  Returns false if there were none.
 */
static bool
start_handed(int room)
{
	static HttpHandoff handed[HTTP_HANDOFF_RING];
	FetchCall	call = {handed, 0, NULL, 0};

	call.n = delaysched_handoff_take(my_index, handed, Min(room, HTTP_HANDOFF_RING));
	if (call.n == 0)
		return false;
	if (delaysched_run_in_transaction("delaysched: reading handed-over HTTP requests",
									  fetch_work, &call))
		start_requests(call.requests, call.n_requests, true);
	delaysched_write_time(&MY_SLOT->last_claim, GetCurrentTimestamp());
	pg_atomic_fetch_add_u64(&MY_SLOT->ticks, 1);
	delaysched_http_driver_run(on_done, on_unsent, NULL);
	return true;
}

static long
ms_until(TimestampTz when, TimestampTz now)
{
	if (when <= now)
		return 0;
	return (long) Min((when - now + 999) / 1000, (TimestampTz) INT_MAX);
}

/*
 * Entry point of an HTTP worker; main_arg is its index.
 */
void
delaysched_http_main(Datum main_arg)
{
	WaitEventSet *set;
	WaitEvent	events[4];
	int			cap;
	bool		released = false;
	bool		want_claim = true;
	bool		maybe_more = false;
	TimestampTz next_poll = 0;
	TimestampTz claim_not_before = 0;
	TimestampTz forget_origins_at = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	cap = attach_cap = in_flight_cap();
	delaysched_join_database(http_attach, DatumGetInt32(main_arg));
	pgstat_report_appname("delaysched http");
	delaysched_setup_worker_session();

	set = delaysched_create_wait_event_set(3);
	AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(set, WL_SOCKET_READABLE, delaysched_http_driver_start(cap), NULL, NULL);

	for (;;)
	{
		TimestampTz now;
		TimestampTz wake;
		int			in_flight = delaysched_http_driver_in_flight();
		int			room;
		bool		claim_due;
		bool		record_due;
		int			n;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			cap = in_flight_cap();
			delaysched_http_driver_set_cap(cap);
		}
		/* The launcher stops a database's workers; this spares a round. */
		if (!delaysched_database_wanted())
			ShutdownRequestPending = true;
		if (ShutdownRequestPending)
		{
			if (n_results > 0)
			{
				StoreCall	call = {false, true, 0, cap, NULL, 0, DT_NOEND, false};

				(void) delaysched_run_in_transaction("delaysched: recording HTTP results",
													 store_work, &call);
				forget_results();
			}
			/* The launcher starts it again if its database is still served. */
			proc_exit(0);
		}
		CHECK_FOR_INTERRUPTS();

		now = GetCurrentTimestamp();
		if (now >= forget_origins_at)
		{
			delaysched_http_origins_forget_idle(now);
			forget_origins_at = TimestampTzPlusMilliseconds(now, FORGET_ORIGINS_MS);
		}
		if (local_failure)
		{
			/*
			 * No descriptor or no memory: give the system a moment, then
			 * claim what was parked again.
			 */
			if (claim_not_before <= now)
				claim_not_before = TimestampTzPlusMilliseconds(now, LOCAL_FAILURE_PAUSE_MS);
			want_claim = true;
			local_failure = false;
		}
		room = Min(cap - in_flight, delaysched_batch_size);
		/* Handed over first: they are leased already, and due. */
		if (released && room > 0 && start_handed(room))
		{
			in_flight = delaysched_http_driver_in_flight();
			room = Min(cap - in_flight, delaysched_batch_size);
		}
		/*
		 * The last claim found work, and many requests ended since: claim
		 * again now, not after their results are recorded (a burst).
		 */
		if (maybe_more && ended_since_claim >= Min(RECORD_ALONG, Max(1, cap / 8)))
			want_claim = true;
		claim_due = room > 0 && (want_claim || now >= next_poll) && now >= claim_not_before;
		record_due = n_results > 0 &&
			(n_results >= RECORD_BATCH ||
			 now >= record_at);

		if (!released || claim_due)
		{
			/*
			 * A claim: the tasks it leases are due now.  It goes alone,
			 * unless many results wait (a burst), which it records first in
			 * the same transaction.
			 */
			StoreCall	call = {!released, n_results >= RECORD_ALONG, claim_due ? room : 0, cap,
			NULL, 0, DT_NOEND, false};

			if (!delaysched_run_in_transaction("delaysched: claiming HTTP requests", store_work, &call))
			{
				/* No extension (yet): look again later. */
				want_claim = false;
				next_poll = TimestampTzPlusMilliseconds(now, 10 * POLL_MS);
			}
			else
			{
				released = true;
				if (call.record)
					forget_recorded_results();
				if (claim_due)
					ended_since_claim = 0;
				start_requests(call.claimed, call.n_claimed, false);
				/* A full claim: more may be waiting. */
				want_claim = claim_due && call.n_claimed >= room;
				/* Held back by a limit, or took some: claim again when slots free. */
				maybe_more = call.n_claimed > 0 || call.held_back;
				next_poll = Min(TimestampTzPlusMilliseconds(now, POLL_MS), call.next_token);
				delaysched_write_time(&MY_SLOT->last_claim, now);
				pg_atomic_fetch_add_u64(&MY_SLOT->ticks, 1);
			}
			/* Send what was claimed before anything else. */
			delaysched_http_driver_run(on_done, on_unsent, NULL);
		}
		else if (record_due)
		{
			StoreCall	call = {false, true, 0, cap, NULL, 0, DT_NOEND, false};

			if (delaysched_run_in_transaction("delaysched: recording HTTP results", store_work, &call))
				forget_recorded_results();
			else
				forget_results();	/* the leases run out, and the sweep sends again */
			/* The requests that ended freed slots (and concurrency caps). */
			if (maybe_more)
				want_claim = true;
		}

		in_flight = delaysched_http_driver_in_flight();
		LWLockAcquire(MY_SLOT->lock, LW_EXCLUSIVE);
		MY_SLOT->in_flight = in_flight;
		MY_SLOT->waiting = delaysched_http_origins_queued();
		MY_SLOT->max_in_flight = cap;
		LWLockRelease(MY_SLOT->lock);

		/* Sleep until something needs doing. */
		now = GetCurrentTimestamp();
		wake = delaysched_http_driver_timer();
		if (delaysched_http_driver_in_flight() < cap)
			wake = Min(wake, Max(want_claim ? now : next_poll, claim_not_before));
		if (n_results > 0)
			wake = Min(wake, record_at);
		pgstat_report_activity(STATE_IDLE, NULL);
		n = WaitEventSetWait(set, wake == DT_NOEND ? -1 : ms_until(wake, now),
							 events, lengthof(events), PG_WAIT_EXTENSION);
		for (int i = 0; i < n; i++)
		{
			if (events[i].events & WL_LATCH_SET)
			{
				/* A hand-off is taken at the top of the loop; a park wants a claim. */
				ResetLatch(MyLatch);
				if (pg_atomic_exchange_u32(&MY_SLOT->claim_wanted, 0) != 0)
					want_claim = true;
			}
		}
		delaysched_http_driver_run(on_done, on_unsent, NULL);
	}
}
