/*-------------------------------------------------------------------------
 *
 * load.c
 *		Flow control by the database's own load: deliveries slow down while
 *		they make the application's statements wait, and speed up again
 *		when they do not (delaysched.load_control).
 *
 * The signal.  The launcher counts, every LOAD_SAMPLE_MS while deliveries
 * flow (every LOAD_IDLE_SAMPLE_MS otherwise), the client sessions that are
 * busy: a PGPROC among the first MaxConnections (the slots PostgreSQL gives
 * client backends only; background workers, autovacuum and WAL senders have
 * slots of their own) in use (its latch owned: a session that ended keeps
 * its pid in the slot, but disowns the latch) and not waiting for its
 * client (ClientRead: idle, or idle in a transaction).  A session running a
 * statement, or waiting for a lock, I/O or an LWLock inside one, is busy.
 * Sessions that consumed tasks (sched.ack, ack_many, nack, extend, claim:
 * they call sched._note_consumer()) are not counted: their work follows the
 * deliveries by design, and counting it would make the burst slow itself.
 * The reads are of two aligned words per slot, without a lock: a sample is
 * a statistic, and a torn one only shifts the mean by a session for 10 ms.
 *
 * By Little's law the mean number of busy sessions is the rate of the
 * application's statements times their mean duration; at the application's
 * own rate, a burst that makes its statements twice as long doubles it.
 * So the controller compares the mean over the last second (busy) with the
 * mean while delaysched was quiet (usual: delivering at most
 * delaysched.load_min_deliveries_per_second, an exponential mean over
 * LOAD_USUAL_TAU_S seconds), and deliveries are held back while
 *
 *		busy > usual * delaysched.load_max_slowdown + LOAD_SLACK_SESSIONS
 *
 * (the slack keeps a nearly idle database from reacting to one statement).
 *
 * The second signal: the standbys' replay lag.  Deliveries write WAL, and a
 * standby that replays it slower than it comes falls behind, which its
 * readers see as stale data and a synchronous_commit = remote_apply
 * application as slow commits.  At each control step the launcher reads the
 * WAL senders' shared slots (WalSndCtl, each under its own spinlock, as
 * pg_stat_replication does) and takes the largest distance, in bytes,
 * between this server's flushed WAL and what a watched standby has replayed:
 * the streaming physical standbys that synchronous_standby_names lists, or
 * all of them (delaysched.load_standbys).  Deliveries are held back while
 * it is above delaysched.load_max_standby_lag.  Bytes rather than the
 * senders' measured lag times: those are only updated as the standby
 * replays, so a standby that stopped replaying keeps showing the lag it had
 * before.  Lag is pressure even when delaysched is quiet: the next burst
 * then starts at the minimum, not at full speed.
 *
 * The controller, in three phases (LoadPhase), once a second:
 *	 open		nothing held back.  Under pressure, the allowance becomes
 *				(quiet, with a standby behind: the minimum)
 *				LOAD_CUT of the rate measured over the last second: holding.
 *				Quiet beside a busy application (usual at least
 *				LOAD_APPLICATION_SESSIONS), a slow start: starting.
 *	 starting	the allowance is LOAD_START_FACTOR times the minimum, and
 *				grows by LOAD_START_GROWTH a second while deliveries use at
 *				least half of it, so that a burst that falls due beside the
 *				application starts slowly, as a TCP connection does, instead
 *				of at full speed for the second the signal takes to rise.
 *				Under pressure: cut, holding.  With the application idle:
 *				open.
 *	 holding	under pressure, cut to LOAD_CUT of what is used (the allowance
 *				or the rate, the smaller), at most once a second; otherwise
 *				grown by LOAD_RAISE (at least the minimum).  Lifted (open)
 *				once deliveries used less than half of it three seconds
 *				running: the backlog is gone.
 * The allowance never goes below delaysched.load_min_deliveries_per_second.
 * When the application's load rises for reasons of its own, the allowance
 * falls to the minimum, delaysched is quiet again, usual learns the new
 * level, and the allowance recovers: the controller only keeps off the load
 * that deliveries add.
 *
 * The mechanism: a token bucket of the allowance (a tenth of a second of
 * it), cluster-wide.  Every scanner's tick takes tokens for its batch and
 * the drain for its share (load_take), and they give back what they did not
 * deliver (load_settle), which also counts every delivery for the rate.
 * While the allowance is unlimited, a take is one atomic read.  A take gets
 * nothing until the bucket holds half of itself (or all that is wanted):
 * deliveries then go in batches of at least a twentieth of a second of the
 * allowance, not in one transaction per token as it trickles in.  On a disk
 * whose flush is slow, many small commits were what slowed the
 * application's own commits most: they queue for the same WAL flush.
 *
 * Locking: LoadShared.mutex, a spinlock, guards the bucket and the figures
 * (a few instructions each hold).  "limited" and "delivered" are atomics
 * read without it; consumer_pid[] entries are written by their own session
 * and read without a lock.  Only the launcher writes the figures.
 *
 * IDENTIFICATION
 *	  src/stats/load.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "base/guc.h"
#include "stats/stats.h"

#define LOAD_SAMPLE_MS			10
#define LOAD_IDLE_SAMPLE_MS		100
#define LOAD_CONTROL_EVERY_MS	250
#define LOAD_CUT_EVERY_MS		1000
#define LOAD_CUT				0.7
#define LOAD_USUAL_TAU_S		10.0
#define LOAD_BUSY_TAU_S			1.0
#define LOAD_SLACK_SESSIONS		0.1
/* Growth a second without pressure, as a share of the allowance. */
#define LOAD_RAISE				0.1
/* Lifted when less than this share of it was used so many seconds running. */
#define LOAD_UNUSED				0.5
#define LOAD_UNUSED_STEPS		3
/*
 * Slow start: quiet beside an application with this many busy sessions or
 * more, the allowance starts at this many times the minimum, and grows by
 * half a second while it binds, until the first cut or this rate.
 */
#define LOAD_APPLICATION_SESSIONS 0.05
#define LOAD_START_FACTOR		10.0
#define LOAD_START_GROWTH		1.5
#define LOAD_START_LIFT			1000000.0
/* Quiet: delivering no more than the minimum allowance, and a bit. */
#define LOAD_QUIET_MARGIN		1.2
/* Deliveries flowed in the last this many ms: sample often. */
#define LOAD_ACTIVE_WINDOW_MS	10000

typedef struct LoadShared
{
	slock_t		mutex;
	pg_atomic_uint32 limited;	/* 1 while allowance > 0 */
	pg_atomic_uint64 delivered; /* every delivery counted, since start */
	double		allowance;		/* deliveries per second; 0: no limit */
	double		tokens;
	TimestampTz refilled_at;
	double		busy;			/* mean busy sessions, the last second */
	double		usual;			/* mean busy sessions while quiet */
	bool		usual_known;	/* enough quiet seen for usual to count */
	double		rate;			/* deliveries per second, the last second */
	int			phase;			/* LoadPhase */
	int			held_by;		/* LOAD_BY_* of the last cut */
	int64		standby_lag;	/* bytes; -1: no standby watched */
	uint64		cuts;
	pg_atomic_uint32 consumer_pid[FLEXIBLE_ARRAY_MEMBER];	/* by proc number */
} LoadShared;

static LoadShared *load = NULL;

/* The launcher's own state between calls. */
static TimestampTz last_sample_at = 0;
static TimestampTz last_control_at = 0;
static TimestampTz last_cut_at = 0;
static TimestampTz last_raise_at = 0;
static TimestampTz last_delivery_seen_at = 0;
static uint64 delivered_at_control = 0;
static bool usual_known = false;
static double usual_raw = 0;
static double usual_weight = 0;
static int	unused_steps = 0;

/* The delivered count at the controller's last steps, for the rate. */
#define RATE_RING (1000 / LOAD_CONTROL_EVERY_MS)
static TimestampTz ring_time[RATE_RING];
static uint64 ring_delivered[RATE_RING];
static int	ring_at = 0;

PG_FUNCTION_INFO_V1(delaysched_note_consumer_sql);
PG_FUNCTION_INFO_V1(delaysched_load_take_sql);
PG_FUNCTION_INFO_V1(delaysched_load_settle_sql);

Size
delaysched_load_shmem_size(void)
{
	return add_size(offsetof(LoadShared, consumer_pid),
					mul_size(sizeof(pg_atomic_uint32), MaxConnections));
}

/* Create or attach; called with AddinShmemInitLock held. */
void
delaysched_load_shmem_init(void)
{
	bool		found;

	load = ShmemInitStruct("delaysched load control", delaysched_load_shmem_size(), &found);
	if (!found)
	{
		memset(load, 0, offsetof(LoadShared, consumer_pid));
		load->standby_lag = -1;
		SpinLockInit(&load->mutex);
		pg_atomic_init_u32(&load->limited, 0);
		pg_atomic_init_u64(&load->delivered, 0);
		for (int i = 0; i < MaxConnections; i++)
			pg_atomic_init_u32(&load->consumer_pid[i], 0);
	}
}

static double
bucket_size(double allowance)
{
	return Max(1.0, allowance / 10.0);
}

/*
 * Up to want deliveries the load allows now.  0 sets *next_token to when
 * one will be allowed.
 */
int
delaysched_load_take(int want, TimestampTz now, TimestampTz *next_token)
{
	int			taken;
	double		least;

	*next_token = now;
	if (pg_atomic_read_u32(&load->limited) == 0 || want <= 0)
		return want;
	SpinLockAcquire(&load->mutex);
	if (load->allowance <= 0)
		taken = want;
	else
	{
		/* (The clock went back: refill from now on, rather than never.) */
		if (now < load->refilled_at)
			load->refilled_at = now;
		if (now > load->refilled_at)
		{
			load->tokens += (double) (now - load->refilled_at) / USECS_PER_SEC * load->allowance;
			load->refilled_at = now;
		}
		load->tokens = Min(load->tokens, bucket_size(load->allowance));
		/* Not less than half the bucket (or want): see the top of the file. */
		least = Min((double) want, Max(1.0, floor(bucket_size(load->allowance) / 2)));
		if (load->tokens >= least)
			taken = (int) Min((double) want, floor(load->tokens));
		else
		{
			taken = 0;
			*next_token = now + (TimestampTz) ceil((least - load->tokens) / load->allowance * USECS_PER_SEC);
		}
		load->tokens -= taken;
	}
	SpinLockRelease(&load->mutex);
	return taken;
}

/*
 * After a take of "taken": "used" deliveries were made.  The rest goes back
 * (more than taken is owed, and paid by the next refills).
 */
void
delaysched_load_settle(int taken, int64 used)
{
	if (used > 0)
		pg_atomic_fetch_add_u64(&load->delivered, (uint64) used);
	if (used == taken || pg_atomic_read_u32(&load->limited) == 0)
		return;
	SpinLockAcquire(&load->mutex);
	if (load->allowance > 0)
		load->tokens = Min(bucket_size(load->allowance), load->tokens + (taken - used));
	SpinLockRelease(&load->mutex);
}

/*
 * sched._load_take(want int, OUT taken int, OUT next_at timestamptz): the
 * HTTP and SQL workers' claims of parked tasks take from the same bucket
 * as the ticks and the drain (delaysched_load_take); next_at is when a
 * take that got nothing may try again.  Every take is settled by
 * sched._load_settle in the same transaction.
 */
Datum
delaysched_load_take_sql(PG_FUNCTION_ARGS)
{
	int			want = PG_GETARG_INT32(0);
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz next_token;
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int32GetDatum(delaysched_load_take(Max(want, 0), now, &next_token));
	values[1] = TimestampTzGetDatum(next_token);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/* sched._load_settle(taken int, used int): delaysched_load_settle. */
Datum
delaysched_load_settle_sql(PG_FUNCTION_ARGS)
{
	delaysched_load_settle(PG_GETARG_INT32(0), Max(PG_GETARG_INT32(1), 0));
	PG_RETURN_VOID();
}

/*
 * sched._note_consumer(): the session consumes tasks; the load signal does
 * not count it (see the top of this file).  Once per session.
 */
Datum
delaysched_note_consumer_sql(PG_FUNCTION_ARGS)
{
	static bool noted = false;
	int			slot = delaysched_my_proc_number();

	if (!noted && load != NULL && slot >= 0 && slot < MaxConnections)
	{
		pg_atomic_write_u32(&load->consumer_pid[slot], (uint32) MyProcPid);
		noted = true;
	}
	PG_RETURN_VOID();
}

/* Client sessions busy now, consumers left out. */
static int
busy_sessions(void)
{
	int			busy = 0;

	for (int i = 0; i < MaxConnections; i++)
	{
		PGPROC	   *proc = &ProcGlobal->allProcs[i];
		int			pid = proc->procLatch.owner_pid;
		uint32		wait = proc->wait_event_info;

		if (pid == 0 || wait == WAIT_EVENT_CLIENT_READ)
			continue;
		if (pg_atomic_read_u32(&load->consumer_pid[i]) == (uint32) pid)
			continue;
		busy++;
	}
	return busy;
}

/*
 * The most WAL, in bytes, a watched standby has yet to replay (see the top
 * of this file); -1 if none is watched or streaming.
 */
static int64
standby_lag(void)
{
	XLogRecPtr	flushed;
	int64		lag = -1;

	if (delaysched_load_max_standby_lag_kb < 0 || WalSndCtl == NULL || RecoveryInProgress())
		return -1;
	flushed = delaysched_flush_rec_ptr();
	for (int i = 0; i < max_wal_senders; i++)
	{
		WalSnd	   *sender = &WalSndCtl->walsnds[i];
		bool		watched;
		XLogRecPtr	replayed;

		SpinLockAcquire(&sender->mutex);
		watched = sender->pid != 0 && sender->state == WALSNDSTATE_STREAMING &&
			delaysched_walsnd_is_physical(sender) &&
			(delaysched_load_standbys == LOAD_STANDBYS_ALL || sender->sync_standby_priority > 0);
		replayed = sender->apply;
		SpinLockRelease(&sender->mutex);
		if (watched)
			lag = Max(lag, replayed != InvalidXLogRecPtr && replayed < flushed ?
					  (int64) (flushed - replayed) : (int64) 0);
	}
	return lag;
}

/* An exponential mean's step: weight of a new value after dt seconds. */
static double
ewma_weight(double dt_s, double tau_s)
{
	return 1.0 - exp(-Max(dt_s, 0.0) / tau_s);
}

/* held_by: why, for a cut (LOAD_BY_*); otherwise the last cut's reasons stay. */
static void
set_allowance(int phase, double allowance, int held_by, TimestampTz now)
{
	SpinLockAcquire(&load->mutex);
	if (load->allowance <= 0 && allowance > 0)
	{
		load->tokens = bucket_size(allowance);
		load->refilled_at = now;
	}
	load->phase = phase;
	load->allowance = allowance;
	if (held_by != 0)
	{
		load->cuts++;
		load->held_by = held_by;
	}
	if (phase != LOAD_HOLDING)
		load->held_by = 0;
	SpinLockRelease(&load->mutex);
	pg_atomic_write_u32(&load->limited, allowance > 0 ? 1 : 0);
}

/* Decide the allowance from the last second's figures. */
static void
control(TimestampTz now)
{
	double		busy;
	double		usual;
	double		rate;
	double		allowance;
	int			phase;
	double		floor_rate = delaysched_load_min_deliveries_per_second;
	uint64		delivered = pg_atomic_read_u64(&load->delivered);
	bool		pressure;
	bool		quiet;
	bool		application_busy;
	int64		lag;
	int			held_by = 0;

	if (now <= last_control_at)
		return;
	lag = standby_lag();
	/* The rate over the last second: the oldest of the ring's steps. */
	ring_at = (ring_at + 1) % RATE_RING;
	if (ring_time[ring_at] == 0)
	{
		ring_time[ring_at] = last_control_at;
		ring_delivered[ring_at] = delivered_at_control;
	}
	rate = (double) (delivered - ring_delivered[ring_at]) * USECS_PER_SEC /
		Max(now - ring_time[ring_at], 1);
	ring_time[ring_at] = now;
	ring_delivered[ring_at] = delivered;
	delivered_at_control = delivered;
	last_control_at = now;
	if (rate > 0)
		last_delivery_seen_at = now;

	SpinLockAcquire(&load->mutex);
	busy = load->busy;
	usual = load->usual;
	allowance = load->allowance;
	phase = load->phase;
	load->rate = rate;
	load->standby_lag = lag;
	SpinLockRelease(&load->mutex);

	if (usual_known && busy > usual * delaysched_load_max_slowdown + LOAD_SLACK_SESSIONS)
		held_by |= LOAD_BY_BUSY_SESSIONS;
	/* (lag is -1 while the setting is -1: standby_lag watches nothing.) */
	if (lag >= 0 && lag > (int64) delaysched_load_max_standby_lag_kb * 1024)
		held_by |= LOAD_BY_STANDBY_LAG;
	pressure = held_by != 0;
	/* Why it holds back is what presses now (a cut recorded it first). */
	if (pressure && phase == LOAD_HOLDING)
	{
		SpinLockAcquire(&load->mutex);
		load->held_by = held_by;
		SpinLockRelease(&load->mutex);
	}
	quiet = rate <= floor_rate * LOAD_QUIET_MARGIN;
	application_busy = usual_known && usual >= LOAD_APPLICATION_SESSIONS;

	if (pressure && now - last_cut_at >= (TimestampTz) LOAD_CUT_EVERY_MS * 1000 &&
		(rate > floor_rate || (held_by & LOAD_BY_STANDBY_LAG)) &&
		(phase != LOAD_HOLDING || allowance > floor_rate))
	{
		/*
		 * Cut what is used: other limits may keep the rate below it.  A
		 * standby behind while delaysched is quiet: the next burst starts
		 * at the minimum.  Held at the minimum already: nothing to cut (the
		 * rate may pass it a little, by the bucket and what is owed).
		 */
		double		base = phase == LOAD_OPEN ? rate : Min(allowance, rate);

		allowance = Max(floor_rate, base * LOAD_CUT);
		last_cut_at = now;
		last_raise_at = now;
		unused_steps = 0;
		set_allowance(LOAD_HOLDING, allowance, held_by, now);
		ereport(DEBUG1,
				(errmsg("delaysched: deliveries held back to %.0f a second", allowance),
				 errdetail("%.2f client sessions busy on average, usually %.2f; a standby %lld bytes behind.",
						   busy, usual, (long long) lag)));
		return;
	}
	if (pressure || now - last_raise_at < (TimestampTz) LOAD_CUT_EVERY_MS * 1000)
		return;
	last_raise_at = now;

	switch (phase)
	{
		case LOAD_OPEN:
			/* Quiet beside a busy application: the next burst starts slowly. */
			if (quiet && application_busy)
				set_allowance(LOAD_STARTING, floor_rate * LOAD_START_FACTOR, 0, now);
			break;
		case LOAD_STARTING:
			if (!application_busy)
				set_allowance(LOAD_OPEN, 0, 0, now);
			else if (rate >= allowance * LOAD_UNUSED)
			{
				/* It binds and nothing suffers: grow fast. */
				allowance *= LOAD_START_GROWTH;
				set_allowance(allowance >= LOAD_START_LIFT ? LOAD_OPEN : LOAD_STARTING,
							  allowance >= LOAD_START_LIFT ? 0 : allowance, 0, now);
			}
			break;
		case LOAD_HOLDING:
			unused_steps = rate < allowance * LOAD_UNUSED ? unused_steps + 1 : 0;
			allowance += Max(floor_rate, allowance * LOAD_RAISE);
			/*
			 * Lifted once nothing was held back for a while (the backlog is
			 * gone), not when it is back where the first cut was: that may
			 * have been a slow start's, far below what the server takes.
			 */
			if (unused_steps >= LOAD_UNUSED_STEPS || allowance >= LOAD_START_LIFT)
			{
				set_allowance(LOAD_OPEN, 0, 0, now);
				ereport(DEBUG1, (errmsg("delaysched: deliveries no longer held back")));
			}
			else
				set_allowance(LOAD_HOLDING, allowance, 0, now);
			break;
	}
}

/*
 * The launcher's part, called whenever it wakes: sample the busy sessions
 * and run the controller when they are due.  Returns when it should be
 * called next.
 */
TimestampTz
delaysched_load_step(TimestampTz now)
{
	bool		active;
	double		dt;
	int			busy;

	if (!delaysched_load_control)
	{
		if (load->phase != LOAD_OPEN)
			set_allowance(LOAD_OPEN, 0, 0, now);
		usual_known = false;
		usual_raw = 0;
		usual_weight = 0;
		SpinLockAcquire(&load->mutex);
		load->usual_known = false;
		load->standby_lag = -1;
		SpinLockRelease(&load->mutex);
		last_sample_at = 0;
		return DT_NOEND;
	}
	/* First call, or the clock went back: the figures' clocks start anew. */
	if (last_sample_at == 0 || now < last_sample_at || now < last_control_at)
	{
		last_sample_at = now;
		last_control_at = now;
		memset(ring_time, 0, sizeof(ring_time));
		delivered_at_control = pg_atomic_read_u64(&load->delivered);
	}
	last_cut_at = Min(last_cut_at, now);
	last_raise_at = Min(last_raise_at, now);
	last_delivery_seen_at = Min(last_delivery_seen_at, now);
	active = now - last_delivery_seen_at < (TimestampTz) LOAD_ACTIVE_WINDOW_MS * 1000;

	if (now - last_sample_at >= (TimestampTz) (active ? LOAD_SAMPLE_MS : LOAD_IDLE_SAMPLE_MS) * 1000)
	{
		bool		quiet;
		double		rate;

		dt = (double) (now - last_sample_at) / USECS_PER_SEC;
		busy = busy_sessions();
		last_sample_at = now;
		SpinLockAcquire(&load->mutex);
		rate = load->rate;
		SpinLockRelease(&load->mutex);

		/*
		 * usual: an exponential mean of the quiet samples, corrected for
		 * its start from 0 (divided by the weight its samples have so far),
		 * and known once they weigh half of it, about seven seconds of quiet:
		 * from 0, the first burst after a start would have seen pressure in
		 * any busy session.
		 */
		quiet = rate <= delaysched_load_min_deliveries_per_second * LOAD_QUIET_MARGIN;
		if (quiet)
		{
			double		w = ewma_weight(dt, LOAD_USUAL_TAU_S);

			usual_raw += (busy - usual_raw) * w;
			usual_weight += (1.0 - usual_weight) * w;
			usual_known = usual_weight >= 0.5;
		}
		{
			double		w = ewma_weight(dt, LOAD_BUSY_TAU_S);
			double		usual = usual_weight > 0 ? usual_raw / usual_weight : 0;

			SpinLockAcquire(&load->mutex);
			load->busy += (busy - load->busy) * w;
			load->usual = usual;
			load->usual_known = usual_known;
			SpinLockRelease(&load->mutex);
		}
	}
	if (now - last_control_at >= (TimestampTz) LOAD_CONTROL_EVERY_MS * 1000)
		control(now);

	return TimestampTzPlusMilliseconds(last_sample_at,
									   active ? LOAD_SAMPLE_MS : LOAD_IDLE_SAMPLE_MS);
}

/* What sched.cluster and the metrics show. */
void
delaysched_load_status(LoadStatus *status)
{
	SpinLockAcquire(&load->mutex);
	status->allowance = load->allowance;
	status->busy = load->busy;
	status->usual = load->usual;
	status->usual_known = load->usual_known;
	status->rate = load->rate;
	status->phase = load->phase;
	status->cuts = load->cuts;
	status->held_by = load->held_by;
	status->standby_lag = load->standby_lag;
	SpinLockRelease(&load->mutex);
	status->enabled = delaysched_load_control;
}
