/*-------------------------------------------------------------------------
 *
 * schedule.h
 *		The schedule rule engine: parsing the three rule syntaxes (cron,
 *		"every N unit" and the readable JSON repeat rule) and computing a
 *		schedule's firing instants in its time zone.
 *
 * A schedule fires at the instants its rule matches that are at or after
 * its anchor (the schedule's start).  schedule_parse.c turns the text of a
 * rule into a ScheduleRule; schedule_next.c finds firings; schedule_sql.c
 * exposes both to SQL.  doc/schedule_rules.md describes the syntax and the
 * behaviour on daylight saving time transitions.
 *
 * IDENTIFICATION
 *	  src/schedule/schedule.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_SCHEDULE_H
#define DELAYSCHED_SCHEDULE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "pgtime.h"
#include "utils/timestamp.h"

/* The longest schedule text accepted, in bytes. */
#define SCHEDULE_MAX_LENGTH		4096

/* The most entries a list of a JSON rule ("days", "months", "at") may have. */
#define SCHEDULE_MAX_LIST		100

/* The longest calendar name of a workday rule (a name in sched.holidays). */
#define SCHEDULE_CALENDAR_LEN	64

typedef enum ScheduleKind
{
	SCHEDULE_CRON,				/* five or six cron fields, or a macro */
	SCHEDULE_EVERY,				/* "every N unit": a fixed elapsed interval */
	SCHEDULE_RULE				/* a readable repeat rule (JSON object) */
} ScheduleKind;

typedef enum ScheduleUnit
{
	SCHEDULE_UNIT_HOUR,
	SCHEDULE_UNIT_DAY,
	SCHEDULE_UNIT_WEEK,
	SCHEDULE_UNIT_MONTH,
	SCHEDULE_UNIT_YEAR,
	SCHEDULE_UNIT_WORKDAY
} ScheduleUnit;

/*
 * A parsed rule.  Sets of values are bit masks (bit n set: value n
 * matches).  A JSON rule's defaults that depend on the anchor ("days",
 * "months", "at" left out) are resolved when firings are computed, so one
 * parsed rule serves any anchor.
 */
typedef struct ScheduleRule
{
	ScheduleKind kind;

	/* SCHEDULE_CRON */
	uint64		seconds;		/* bits 0-59 */
	uint64		minutes;		/* bits 0-59 */
	uint32		hours;			/* bits 0-23 */
	uint32		mdays;			/* bits 1-31 */
	uint32		months;			/* bits 1-12 (also SCHEDULE_RULE, unit year) */
	uint32		wdays;			/* bits 0-6, 0 = Sunday */
	bool		dom_restricted; /* day-of-month field does not start with '*' */
	bool		dow_restricted; /* day-of-week field does not start with '*' */

	/*
	 * Fixed-time rules fire once per local date-time (a time in a DST gap
	 * fires when the gap ends; a time repeated by a fall-back fires the
	 * first time only); the others fire at every real instant whose local
	 * time matches.
	 */
	bool		fixed_time;

	/* SCHEDULE_EVERY */
	int64		interval;		/* microseconds */

	/* SCHEDULE_RULE */
	ScheduleUnit unit;
	int			every;			/* 1..1000 */
	uint64		days;			/* week: bits 1-7 (ISO); month, year: bits 1-31 */
	bool		days_given;
	bool		months_given;
	int			ntimes;			/* 0: "at" not given */
	int32		times[SCHEDULE_MAX_LIST];	/* seconds after midnight (unit
											 * hour: after the hour), sorted,
											 * distinct */
	char		calendar[SCHEDULE_CALENDAR_LEN];	/* workday; "" if none */
} ScheduleRule;

/* schedule_parse.c */
extern ScheduleRule *delaysched_parse_schedule(const char *text);
extern const char *delaysched_schedule_kind_name(const ScheduleRule *rule);

/*
 * A rule prepared for one anchor (schedule_next.c): the defaults a JSON
 * rule takes from the anchor resolved and a workday calendar's holidays
 * loaded, for computing many firings in a row.
 */
typedef struct ScheduleEval ScheduleEval;

/* schedule_next.c */
extern pg_tz *delaysched_schedule_zone(const char *name);
extern ScheduleEval *delaysched_schedule_begin(const ScheduleRule *rule, pg_tz *tz,
											   TimestampTz anchor);
extern TimestampTz delaysched_schedule_eval_next(ScheduleEval *eval, TimestampTz after);
extern int64 delaysched_schedule_eval_span(ScheduleEval *eval, TimestampTz from,
										   TimestampTz to, TimestampTz *first,
										   TimestampTz *last);
extern void delaysched_schedule_end(ScheduleEval *eval);

/*
 * One-shot forms of the two above.  (Not named delaysched_schedule_next and
 * delaysched_schedule_span: those are the C symbols of the SQL functions.)
 */
extern TimestampTz delaysched_schedule_next_firing(const ScheduleRule *rule, pg_tz *tz,
												   TimestampTz anchor, TimestampTz after);
extern int64 delaysched_schedule_span_firings(const ScheduleRule *rule, pg_tz *tz,
											  TimestampTz anchor, TimestampTz from,
											  TimestampTz to, TimestampTz *first,
											  TimestampTz *last);

/*
 * Telling the schedules that their firings are being delivered, from
 * the C paths that deliver (see firing.c).
 */

/* The first deliveries of schedule firings among one statement's rows. */
typedef struct FiringBatch
{
	int			n;
	int			capacity;
	Datum	   *ids;
	Datum	   *buckets;
	Datum	   *run_ats;
	Datum	   *biz_types;		/* a firing's schedule is its name in its type */
	Datum	   *schedules;
	int			nsuppressed;
	int64	   *suppressed;		/* sorted: the ids not to send */
} FiringBatch;

extern void delaysched_firings_init(FiringBatch *batch);
extern void delaysched_firings_add(FiringBatch *batch, int64 id, int16 bucket,
								   TimestampTz run_at, Datum biz_type, Datum schedule);
extern void delaysched_firings_fire(FiringBatch *batch, TimestampTz now);
extern bool delaysched_firing_suppressed(const FiringBatch *batch, int64 id);

#endif							/* DELAYSCHED_SCHEDULE_H */
