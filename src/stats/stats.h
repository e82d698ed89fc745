/*-------------------------------------------------------------------------
 *
 * stats.h
 *		Counters, gauges and histograms per database and business type, in
 *		shared memory: what sched.metrics() and sched.biz_stats read.
 *
 * Every number of a business type is one slot of an array (StatsSlot).
 * A transaction never writes shared memory as it goes: it adds to its own
 * tally (stats_tally.c), and the tally is added to shared memory as the
 * transaction commits (just before its changes become visible), or dropped
 * when it aborts (a subtransaction's part with it).  So the numbers count committed work only, and a rolled-back
 * sched.add is not an added task.
 *
 * Where the numbers come from (stats_tally.c):
 *	 - the triggers on sched.task, sched.finished, sched.attempt and
 *	   sched.biz: every change of a task's state, whichever statement makes
 *	   it (the gauges, deliveries, lateness, finished tasks, HTTP requests,
 *	   each type's delivery kind);
 *	 - sched._tally(), called where the rows cannot tell: a task added
 *	   (a re-stored one is an insert too), a nack, a lease that ran out.
 *
 * The gauges (tasks per state) are kept by adding each committed change.
 * They are right only from a count taken while no change can commit:
 * scanner worker 0 takes it when it starts, and whenever a database's
 * gauges are marked stale (stats_recount.c).  Until then the database's
 * gauges are not "ready", and sched.biz_stats counts the tables instead.
 *
 * A transaction that is prepared (PREPARE TRANSACTION) adds nothing then:
 * its numbers go into a table as part of it, and count once COMMIT
 * PREPARED has made them visible (stats_prepared.c).
 *
 * Counters survive a worker's restart (they are in shared memory) and
 * start from zero at a server start, as Prometheus expects of a counter.
 *
 * IDENTIFICATION
 *	  src/stats/stats.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_STATS_H
#define DELAYSCHED_STATS_H

#include "nodes/pg_list.h"
#include "port/atomics.h"
#include "utils/timestamp.h"

/* Upper bounds, in seconds, of the lateness histogram's buckets (+Inf after). */
#define STATS_LATENESS_BOUNDS \
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60
#define STATS_LATENESS_BUCKETS	16

/* Upper bounds, in seconds, of the HTTP request duration histogram's buckets. */
#define STATS_DURATION_BOUNDS \
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60
#define STATS_DURATION_BUCKETS	14

/* HTTP requests by status class ("none": no answer) and outcome. */
#define STATS_HTTP_CLASSES		6	/* 1xx .. 5xx, none */
#define STATS_HTTP_OUTCOMES		5	/* done, retry, dead, requeued, stale */

/* SQL job runs by outcome (sched.attempt rows of sql types). */
#define STATS_SQL_OUTCOMES		5	/* done, retry, dead, cancelled, stale */

/* The slots of a business type's numbers. */
typedef enum StatsSlot
{
	/* Counters. */
	SS_ADDED,
	SS_DELIVERED_NOTIFY,
	SS_DELIVERED_PULL,
	SS_DELIVERED_HTTP,
	SS_DELIVERED_UNKNOWN,		/* before the type's delivery kind was known */
	SS_ACKED,					/* finished as done */
	SS_ACK_TIMEOUTS,			/* leases that ran out */
	SS_NACKED,
	SS_DEAD,
	SS_CANCELLED,
	SS_PARKED,					/* notify tasks set aside for limits or pause */

	/* Gauges: tasks stored now, by state. */
	SS_STATE_PENDING,			/* 'p' */
	SS_STATE_READY,				/* 'r': parked, or claimable */
	SS_STATE_DELIVERED,			/* 'd': awaiting acknowledgement */
	SS_KEPT_DONE,				/* in sched.finished, within retention */
	SS_KEPT_DEAD,
	SS_KEPT_CANCELLED,

	/* A tally's only, resolved by the type's delivery kind at commit. */
	SS_TALLY_DELIVERED,
	SS_TALLY_ENTERED_READY,

	/* Histograms: non-cumulative bucket counts, then the sum. */
	SS_LATENESS_FIRST,
	SS_LATENESS_SUM_US = SS_LATENESS_FIRST + STATS_LATENESS_BUCKETS,
	SS_DURATION_FIRST,
	SS_DURATION_SUM_US = SS_DURATION_FIRST + STATS_DURATION_BUCKETS,
	SS_HTTP_FIRST,				/* + class * STATS_HTTP_OUTCOMES + outcome */

	/* SQL jobs: deliveries (leases to an SQL worker), runs, their durations. */
	SS_DELIVERED_SQL = SS_HTTP_FIRST + STATS_HTTP_CLASSES * STATS_HTTP_OUTCOMES,
	SS_SQL_RUN_FIRST,			/* + outcome */
	SS_SQL_DURATION_FIRST = SS_SQL_RUN_FIRST + STATS_SQL_OUTCOMES,
	SS_SQL_DURATION_SUM_US = SS_SQL_DURATION_FIRST + STATS_DURATION_BUCKETS,
	SS_COUNT
} StatsSlot;

/*
 * The version of the slots' order above, stored with a prepared
 * transaction's numbers (sched._prepared_tally), which may be committed
 * after a restart with another library: change it with the order.
 */
#define STATS_SLOT_LAYOUT	2

/* A type's delivery kind as stored (0: not known yet). */
#define STATS_KIND_NOTIFY	'n'
#define STATS_KIND_PULL		'p'
#define STATS_KIND_HTTP		'h'
#define STATS_KIND_SQL		's'

/* The kind of a sched.biz.delivery (0 for NULL), and a kind's name. */
extern char delaysched_stats_kind_of(const char *delivery);
extern const char *delaysched_stats_kind_name(char kind);

/* A copy of one type's numbers, for the readers (metrics.c). */
typedef struct StatsCopy
{
	char		biz_type[NAMEDATALEN];
	char		kind;
	int64		v[SS_COUNT];
} StatsCopy;

/* Shared memory (stats.c). */
extern Size delaysched_stats_shmem_size(void);
extern void delaysched_stats_shmem_init(void);
extern void delaysched_stats_add(Oid dboid, const char *biz_type, char kind,
								 const int64 *delta);
extern List *delaysched_stats_copy(Oid dboid);
extern bool delaysched_stats_ready(Oid dboid);
extern void delaysched_stats_mark_stale(Oid dboid);
extern bool delaysched_stats_claim_count(Oid dboid);
extern void delaysched_stats_mark_fold(Oid dboid);
extern bool delaysched_stats_claim_fold(Oid dboid);
extern bool delaysched_stats_full(Oid dboid);
extern bool delaysched_stats_gauges(Oid dboid, const char *biz_type, int64 *gauges);
extern void delaysched_stats_install(Oid dboid, List *counts);
extern void delaysched_stats_forget_database(Oid dboid);
extern int	delaysched_stats_lateness_bucket(double seconds);
extern int	delaysched_stats_duration_bucket(double seconds);
extern const double delaysched_lateness_bounds[];
extern const double delaysched_duration_bounds[];
extern const char *const delaysched_sql_outcome_names[];
extern const char *const delaysched_http_class_names[];
extern const char *const delaysched_http_outcome_names[];

/* The transaction's tally (stats_tally.c). */
extern void delaysched_tally_init(void);
extern int64 *delaysched_tally_slots(const char *biz_type);

/* A prepared transaction's numbers, until it commits (stats_prepared.c). */
extern bool delaysched_prepared_save(List *tallies);
extern void delaysched_prepared_fold_if_needed(void);

/* The count that makes a database's gauges right (stats_recount.c). */
extern void delaysched_stats_recount_if_needed(void);

/*
 * Flow control by the database's load (load.c): a cluster-wide allowance
 * of deliveries per second that the launcher sets from the busy client
 * sessions, and the token bucket the scanners and the drain take from.
 */
typedef enum LoadPhase
{
	LOAD_OPEN,					/* nothing held back */
	LOAD_STARTING,				/* slow start: a burst begins slowly */
	LOAD_HOLDING				/* cut: sessions busier than usual, a standby behind */
} LoadPhase;

typedef struct LoadStatus
{
	bool		enabled;		/* delaysched.load_control */
	double		allowance;		/* deliveries per second; 0: not limited */
	double		busy;			/* mean busy client sessions, last second */
	double		usual;			/* the same while delaysched was quiet */
	bool		usual_known;	/* enough quiet seen for usual to count */
	double		rate;			/* deliveries per second, last second */
	LoadPhase	phase;
	int			held_by;		/* while holding: LOAD_BY_* of the last cut */
	int64		standby_lag;	/* bytes a watched standby has to replay; -1: none */
	uint64		cuts;			/* times the allowance was cut */
} LoadStatus;

/* What made a cut (LoadStatus.held_by). */
#define LOAD_BY_BUSY_SESSIONS	0x01
#define LOAD_BY_STANDBY_LAG		0x02

extern Size delaysched_load_shmem_size(void);
extern void delaysched_load_shmem_init(void);
extern int	delaysched_load_take(int want, TimestampTz now, TimestampTz *next_token);
extern void delaysched_load_settle(int taken, int64 used);
extern TimestampTz delaysched_load_step(TimestampTz now);
extern void delaysched_load_status(LoadStatus *status);


#endif							/* DELAYSCHED_STATS_H */
