/*-------------------------------------------------------------------------
 *
 * schedule_next.c
 *		Firings of schedule rules: the next one after an instant, and how
 *		many fall in a span of time (with the first and the last).
 *
 * An "every" rule fires at anchor + k * interval, k = 0, 1, 2, ...: elapsed
 * time, whatever the time zone says.  That is arithmetic.
 *
 * Cron and readable (JSON) rules match local date-times in the schedule's
 * zone.  The code works on two time lines: real instants (TimestampTz) and
 * local wall-clock times (a Timestamp whose fields are the local date and
 * time).  The zone is a series of segments of constant UTC offset, whose
 * ends pg_next_dst_boundary() gives; inside one segment local time is real
 * time plus the offset.  The matchers (cron_next_local, rule_next_local)
 * know only local time: they skip field by field to the next local time a
 * rule matches, never second by second.
 *
 * Two conventions map local matches to instants (as Debian's cron does):
 *
 * - A rule finer than hourly (cron whose hour field is '*' or a step, JSON
 *	 unit "hour") fires at every instant whose local time matches.  Local
 *	 times in a spring-forward gap do not exist and do not fire; local times
 *	 repeated by a fall-back fire in both passes.
 *
 * - A rule at specific local times (other cron rules, the other JSON units)
 *	 fires once per matching local time L, at f(L), the first instant whose
 *	 local time is L or later.  So a time in a gap fires when the gap ends,
 *	 and a repeated time fires in its first pass only; several times in one
 *	 gap give one firing.  f is non-decreasing, and f(L) >= t exactly when L
 *	 is later than M(t), the latest local time shown before t (the "high
 *	 water mark" of the local clock).  The firings at or after t therefore
 *	 come from the matches after M(t), which is how both the next firing and
 *	 a span are found.
 *
 * Both ways, a firing computed one step at a time and a firing counted in a
 * span are the same instants.  Searches stop at a horizon of 100 years.
 *
 * A span is counted, not walked, so that the work a catch-up does in a
 * worker's transaction does not grow with how far back it reaches (a
 * firing rescheduled to 4713 BC): see count_local.  The counts are exact.
 *
 * IDENTIFICATION
 *	  src/schedule/schedule_next.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"

#include "schedule/schedule.h"

/* How far ahead a search for the next firing looks: 100 years. */
#define SEARCH_HORIZON		(INT64CONST(36525) * USECS_PER_DAY)

/*
 * Local-time rules work on instants this far inside the timestamp range, so
 * that adding a UTC offset or looking two days back never overflows.
 */
#define SAFE_MARGIN			(INT64CONST(4) * USECS_PER_DAY)
#define SAFE_MIN			(MIN_TIMESTAMP + SAFE_MARGIN)
#define SAFE_END			(END_TIMESTAMP - SAFE_MARGIN)

/* How far back the high water mark of the local clock is looked for. */
#define HIGH_WATER_WINDOW	(INT64CONST(2) * USECS_PER_DAY)

/* Seconds from the Unix epoch to the PostgreSQL epoch (pg_time_t vs. us). */
#define EPOCH_DIFF_SECS		((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY)

/* A Monday, as days since 2000-01-01 (2000-01-03). */
#define REFERENCE_MONDAY	2

/*
 * A rule ready for evaluation: the defaults a JSON rule takes from its
 * anchor are resolved, and the holidays of its calendar loaded.
 */
struct ScheduleEval
{
	const ScheduleRule *rule;
	pg_tz	   *tz;
	TimestampTz anchor;

	/* JSON rules */
	uint64		days;			/* week: ISO weekdays; month, year: days */
	uint32		months;
	int			ntimes;
	int32		times[SCHEDULE_MAX_LIST];
	int64		origin;			/* the anchor's period (see rule_day_ok) */
	int			nholidays;		/* workday: the calendar's holidays that */
	int32	   *holidays;		/* fall on weekdays, ascending */
};

static inline int64
floor_div(int64 a, int64 b)
{
	int64		q = a / b;

	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

static inline int64
floor_mod(int64 a, int64 b)
{
	return a - floor_div(a, b) * b;
}

static inline int64
ceil_div(int64 a, int64 b)
{
	return -floor_div(-a, b);
}

/* The lowest bit set in mask at or above from (bits from..63), or -1. */
static inline int
next_bit(uint64 mask, int from)
{
	if (from > 63)
		return -1;
	mask &= ~UINT64CONST(0) << from;
	return mask ? pg_rightmost_one_pos64(mask) : -1;
}

static inline int
month_days(int year, int month)
{
	return day_tab[isleap(year) ? 1 : 0][month - 1];
}

/* Days since 2000-01-01 to a date, and back. */
static inline int64
day_number(int y, int m, int d)
{
	return (int64) date2j(y, m, d) - POSTGRES_EPOCH_JDATE;
}

static inline void
day_date(int64 day, int *y, int *m, int *d)
{
	j2date((int) (day + POSTGRES_EPOCH_JDATE), y, m, d);
}

/* ISO weekday of a day number: 1 = Monday ... 7 = Sunday. */
static inline int
iso_weekday(int64 day)
{
	return (int) floor_mod(day - REFERENCE_MONDAY, 7) + 1;
}

/* ---------------------------------------------------------------------
 * The time zone as segments of constant UTC offset
 * ---------------------------------------------------------------------
 */

/*
 * The UTC offset (in microseconds) in force at instant u, the instant after
 * u at which it next changes (DT_NOEND if never), and the offset from then.
 * Transitions that change only the DST flag or the abbreviation are not
 * boundaries here.
 */
static void
zone_segment(pg_tz *tz, TimestampTz u, int64 *off, TimestampTz *end, int64 *off_after)
{
	pg_time_t	t = (pg_time_t) floor_div(u, USECS_PER_SEC) + EPOCH_DIFF_SECS;
	bool		first = true;
	int			i;

	*end = DT_NOEND;
	*off_after = 0;
	for (i = 0; i < 10000; i++)
	{
		long int	before_gmtoff,
					after_gmtoff;
		int			before_isdst,
					after_isdst;
		pg_time_t	boundary;
		int			r;

		r = pg_next_dst_boundary(&t, &before_gmtoff, &before_isdst, &boundary,
								 &after_gmtoff, &after_isdst, tz);
		if (first)
			*off = (int64) before_gmtoff * USECS_PER_SEC;
		first = false;
		if (r != 1 || boundary <= t)
			return;
		if (boundary - EPOCH_DIFF_SECS >= SAFE_END / USECS_PER_SEC)
			return;
		if ((int64) after_gmtoff * USECS_PER_SEC != *off)
		{
			*end = (boundary - EPOCH_DIFF_SECS) * USECS_PER_SEC;
			*off_after = (int64) after_gmtoff * USECS_PER_SEC;
			return;
		}
		t = boundary;
	}
}

/* The local time at instant u. */
static Timestamp
local_time(pg_tz *tz, TimestampTz u)
{
	int64		off;
	TimestampTz end;
	int64		off_after;

	zone_segment(tz, u, &off, &end, &off_after);
	return u + off;
}

/*
 * M(t): the latest local time the clock showed before instant t.  It is
 * the local time just before t unless a fall-back turned the clock back
 * within the window before t.
 */
static Timestamp
high_water(pg_tz *tz, TimestampTz t)
{
	TimestampTz w = t - HIGH_WATER_WINDOW;
	Timestamp	m = PG_INT64_MIN;

	for (;;)
	{
		int64		off;
		TimestampTz end;
		int64		off_after;
		TimestampTz piece_end;

		zone_segment(tz, w, &off, &end, &off_after);
		piece_end = (end == DT_NOEND || end > t) ? t : end;
		m = Max(m, piece_end - 1 + off);
		if (piece_end >= t)
			return m;
		w = end;
	}
}

/*
 * f(L): the first instant at or after t whose local time is L or later, for
 * a local time L later than M(t).
 */
static TimestampTz
fire_instant(pg_tz *tz, Timestamp local, TimestampTz t)
{
	TimestampTz s = t;

	for (;;)
	{
		int64		off;
		TimestampTz end;
		int64		off_after;

		zone_segment(tz, s, &off, &end, &off_after);
		if (local <= s + off)
			return s;			/* in a gap that ended at s */
		if (end == DT_NOEND || local < end + off)
			return local - off;
		s = end;
	}
}

/* ---------------------------------------------------------------------
 * Cron: local-time matching
 * ---------------------------------------------------------------------
 */

static inline bool
cron_day_matches(const ScheduleRule *rule, int64 day, int d)
{
	bool		dom = (rule->mdays & (UINT64CONST(1) << d)) != 0;
	bool		dow = (rule->wdays & (UINT64CONST(1) << (iso_weekday(day) % 7))) != 0;

	if (rule->dom_restricted && rule->dow_restricted)
		return dom || dow;
	return dom && dow;
}

/*
 * The first local time at or after from that a cron rule matches; DT_NOEND
 * if there is none on or before limit's date.
 */
static Timestamp
cron_next_local(const ScheduleRule *rule, Timestamp from, Timestamp limit)
{
	int64		secs = ceil_div(from, USECS_PER_SEC);
	int64		day = floor_div(secs, SECS_PER_DAY);
	int64		limit_day = floor_div(limit, USECS_PER_DAY);
	int			tod = (int) (secs - day * SECS_PER_DAY);
	int			y,
				m,
				d;
	int			h = tod / SECS_PER_HOUR;
	int			mi = (tod / SECS_PER_MINUTE) % 60;
	int			s = tod % 60;

	day_date(day, &y, &m, &d);
	for (;;)
	{
		int			b;

		/* carry what the skips below pushed over */
		if (s > 59)
		{
			s = 0;
			mi++;
		}
		if (mi > 59)
		{
			mi = 0;
			h++;
		}
		if (h > 23)
		{
			h = 0;
			d++;
		}
		if (d > month_days(y, m))
		{
			d = 1;
			m++;
		}
		if (m > 12)
		{
			m = 1;
			y++;
		}
		day = day_number(y, m, d);
		if (day > limit_day)
			return DT_NOEND;

		if (!(rule->months & (1U << m)))
		{
			b = next_bit(rule->months, m + 1);
			m = (b < 0) ? 13 : b;
			d = 1;
			h = mi = s = 0;
			continue;
		}
		if (!cron_day_matches(rule, day, d))
		{
			if (!(rule->dom_restricted && rule->dow_restricted) &&
				!(rule->mdays & (UINT64CONST(1) << d)))
			{
				b = next_bit(rule->mdays, d + 1);
				d = (b < 0) ? 32 : b;
			}
			else
				d++;
			h = mi = s = 0;
			continue;
		}
		if (!(rule->hours & (1U << h)))
		{
			b = next_bit(rule->hours, h + 1);
			h = (b < 0) ? 24 : b;
			mi = s = 0;
			continue;
		}
		if (!(rule->minutes & (UINT64CONST(1) << mi)))
		{
			b = next_bit(rule->minutes, mi + 1);
			mi = (b < 0) ? 60 : b;
			s = 0;
			continue;
		}
		if (!(rule->seconds & (UINT64CONST(1) << s)))
		{
			b = next_bit(rule->seconds, s + 1);
			s = (b < 0) ? 60 : b;
			continue;
		}
		return (day * SECS_PER_DAY + h * SECS_PER_HOUR + mi * SECS_PER_MINUTE + s) *
			USECS_PER_SEC;
	}
}

/* A time of day (seconds) as hour, minute and second. */
static inline void
split_time(int tod, int *h, int *mi, int *s)
{
	*h = tod / SECS_PER_HOUR;
	*mi = (tod / SECS_PER_MINUTE) % 60;
	*s = tod % 60;
}

/* How many times of day before tod (seconds, 0..86400) a cron rule matches. */
static int64
cron_times_before(const ScheduleRule *rule, int tod)
{
	int			h,
				mi,
				s;
	int64		nmin = pg_popcount64(rule->minutes);
	int64		nsec = pg_popcount64(rule->seconds);
	int64		n;

	split_time(tod, &h, &mi, &s);
	if (h >= 24)
		return pg_popcount32(rule->hours) * nmin * nsec;
	n = pg_popcount32(rule->hours & ((1U << h) - 1)) * nmin * nsec;
	if (rule->hours & (1U << h))
	{
		n += pg_popcount64(rule->minutes & ((UINT64CONST(1) << mi) - 1)) * nsec;
		if (rule->minutes & (UINT64CONST(1) << mi))
			n += pg_popcount64(rule->seconds & ((UINT64CONST(1) << s) - 1));
	}
	return n;
}

/* The highest bit set in mask at or below bit at (0..62), or -1. */
static inline int
prev_bit(uint64 mask, int at)
{
	mask &= (UINT64CONST(2) << at) - 1;
	return mask ? pg_leftmost_one_pos64(mask) : -1;
}

/* The last time of day at or before tod (seconds) a cron rule matches, or -1. */
static int
cron_last_time(const ScheduleRule *rule, int tod)
{
	int			top_s = pg_leftmost_one_pos64(rule->seconds);
	int			top_mi = pg_leftmost_one_pos64(rule->minutes);
	int			h,
				mi,
				s,
				b;

	split_time(tod, &h, &mi, &s);

	if (rule->hours & (1U << h))
	{
		if (rule->minutes & (UINT64CONST(1) << mi))
		{
			b = prev_bit(rule->seconds, s);
			if (b >= 0)
				return h * SECS_PER_HOUR + mi * SECS_PER_MINUTE + b;
		}
		if (mi > 0 && (b = prev_bit(rule->minutes, mi - 1)) >= 0)
			return h * SECS_PER_HOUR + b * SECS_PER_MINUTE + top_s;
	}
	if (h == 0 || (b = prev_bit(rule->hours, h - 1)) < 0)
		return -1;
	return b * SECS_PER_HOUR + top_mi * SECS_PER_MINUTE + top_s;
}

/*
 * How many local times in [a, b] a cron rule matches, and the first and
 * the last: day by day, each day's count by arithmetic on the masks.  For
 * short spans (the work grows with the days).
 */
static int64
cron_count_local(const ScheduleRule *rule, Timestamp a, Timestamp b,
				 Timestamp *first, Timestamp *last)
{
	int64		sa = ceil_div(a, USECS_PER_SEC);
	int64		sb = floor_div(b, USECS_PER_SEC);
	int64		day;
	int64		n = 0;

	for (day = floor_div(sa, SECS_PER_DAY); day * SECS_PER_DAY <= sb; day++)
	{
		int64		start = day * SECS_PER_DAY;
		int			lo = (int) (Max(sa, start) - start);
		int			hi = (int) (Min(sb, start + SECS_PER_DAY - 1) - start);
		int64		k;
		int			y,
					m,
					d;

		CHECK_FOR_INTERRUPTS();
		day_date(day, &y, &m, &d);
		if (!(rule->months & (1U << m)) || !cron_day_matches(rule, day, d))
			continue;
		k = cron_times_before(rule, hi + 1) - cron_times_before(rule, lo);
		if (k == 0)
			continue;
		if (n == 0)
			*first = cron_next_local(rule, (start + lo) * USECS_PER_SEC,
									 (start + hi) * USECS_PER_SEC);
		*last = (start + cron_last_time(rule, hi)) * USECS_PER_SEC;
		n += k;
	}
	return n;
}

/* ---------------------------------------------------------------------
 * Readable (JSON) rules: local-time matching
 * ---------------------------------------------------------------------
 */

/* Weekdays (Monday to Friday) in the days before day, from a reference. */
static inline int64
weekdays_before(int64 day)
{
	int64		rel = day - REFERENCE_MONDAY;

	return floor_div(rel, 7) * 5 + Min(floor_mod(rel, 7), 5);
}

/* How many of the (weekday) holidays fall before day. */
static int
holidays_before(const ScheduleEval *ev, int64 day)
{
	int			lo = 0,
				hi = ev->nholidays;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (ev->holidays[mid] < day)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool
is_workday(const ScheduleEval *ev, int64 day)
{
	int			i;

	if (iso_weekday(day) > 5)
		return false;
	i = holidays_before(ev, day);
	return !(i < ev->nholidays && ev->holidays[i] == day);
}

/*
 * Whether a JSON rule may fire on a local date (its period is one of every
 * "every" counted from the anchor's, and the day is one of its days).
 * Returns day if so, else a later day to try next (no day in between can
 * fire).
 */
static int64
rule_day_ok(const ScheduleEval *ev, int64 day)
{
	const ScheduleRule *rule = ev->rule;
	int			every = rule->every;
	int64		k;
	int			y,
				m,
				d,
				b;

	switch (rule->unit)
	{
		case SCHEDULE_UNIT_HOUR:
			return day;			/* handled by rule_next_local */

		case SCHEDULE_UNIT_DAY:
			k = floor_mod(day - ev->origin, every);
			return (k == 0) ? day : day + every - k;

		case SCHEDULE_UNIT_WEEK:
			{
				int			iso = iso_weekday(day);
				int64		monday = day - (iso - 1);

				k = floor_mod((monday - ev->origin) / 7, every);
				if (k != 0)
					return monday + 7 * (every - k);
				if (ev->days & (UINT64CONST(1) << iso))
					return day;
				b = next_bit(ev->days, iso + 1);
				return (b < 0 || b > 7) ? monday + 7 : monday + (b - 1);
			}

		case SCHEDULE_UNIT_MONTH:
			{
				int64		idx;

				day_date(day, &y, &m, &d);
				idx = (int64) y * 12 + (m - 1);
				k = floor_mod(idx - ev->origin, every);
				if (k == 0)
				{
					if ((ev->days & (UINT64CONST(1) << d)))
						return day;
					b = next_bit(ev->days, d + 1);
					if (b > 0 && b <= month_days(y, m))
						return day + (b - d);
					k = every - 1;	/* to the first day of the next month */
				}
				idx += every - k;
				return day_number((int) floor_div(idx, 12), (int) floor_mod(idx, 12) + 1, 1);
			}

		case SCHEDULE_UNIT_YEAR:
			day_date(day, &y, &m, &d);
			k = floor_mod(y - ev->origin, every);
			if (k != 0)
				return day_number(y + (int) (every - k), 1, 1);
			if (!(ev->months & (1U << m)))
			{
				b = next_bit(ev->months, m + 1);
				return (b < 0) ? day_number(y + 1, 1, 1) : day_number(y, b, 1);
			}
			if (ev->days & (UINT64CONST(1) << d))
				return day;
			b = next_bit(ev->days, d + 1);
			if (b > 0 && b <= month_days(y, m))
				return day + (b - d);
			return (m == 12) ? day_number(y + 1, 1, 1) : day_number(y, m + 1, 1);

		case SCHEDULE_UNIT_WORKDAY:
			if (day < ev->origin)
				return ev->origin;
			if (!is_workday(ev, day))
				return day + 1;
			if (every > 1)
			{
				int64		index;

				index = (weekdays_before(day) - weekdays_before(ev->origin)) -
					(holidays_before(ev, day) - holidays_before(ev, ev->origin));
				if (index % every != 0)
					return day + 1;
			}
			return day;
	}
	return day;
}

/* The first of the rule's times at or after tod (seconds), or -1. */
static inline int32
time_at_or_after(const ScheduleEval *ev, int32 tod)
{
	int			i;

	for (i = 0; i < ev->ntimes; i++)
	{
		if (ev->times[i] >= tod)
			return ev->times[i];
	}
	return -1;
}

/*
 * The first local time at or after from that a JSON rule matches; DT_NOEND
 * if there is none on or before limit's date.
 */
static Timestamp
rule_next_local(const ScheduleEval *ev, Timestamp from, Timestamp limit)
{
	int64		secs = ceil_div(from, USECS_PER_SEC);
	int64		limit_secs = floor_div(limit, USECS_PER_SEC);
	int			every = ev->rule->every;

	if (ev->rule->unit == SCHEDULE_UNIT_HOUR)
	{
		int64		hour = floor_div(secs, SECS_PER_HOUR);
		int32		past = (int32) (secs - hour * SECS_PER_HOUR);

		for (;;)
		{
			int64		k = floor_mod(hour - ev->origin, every);
			int32		t;

			if (hour * SECS_PER_HOUR > limit_secs)
				return DT_NOEND;
			if (k != 0)
			{
				hour += every - k;
				past = 0;
				continue;
			}
			t = time_at_or_after(ev, past);
			if (t >= 0)
				return (hour * SECS_PER_HOUR + t) * USECS_PER_SEC;
			hour++;
			past = 0;
		}
	}
	else
	{
		int64		day = floor_div(secs, SECS_PER_DAY);
		int32		tod = (int32) (secs - day * SECS_PER_DAY);
		int64		limit_day = floor_div(limit_secs, SECS_PER_DAY);

		for (;;)
		{
			int64		ok;
			int32		t;

			if (day > limit_day)
				return DT_NOEND;
			ok = rule_day_ok(ev, day);
			if (ok != day)
			{
				day = ok;
				tod = 0;
				continue;
			}
			t = time_at_or_after(ev, tod);
			if (t >= 0)
				return (day * SECS_PER_DAY + t) * USECS_PER_SEC;
			day++;
			tod = 0;
		}
	}
}

/* ---------------------------------------------------------------------
 * Either kind of local-time rule
 * ---------------------------------------------------------------------
 */

static Timestamp
next_local(const ScheduleEval *ev, Timestamp from, Timestamp limit)
{
	if (ev->rule->kind == SCHEDULE_CRON)
		return cron_next_local(ev->rule, from, limit);
	return rule_next_local(ev, from, limit);
}

/*
 * How many local times in [a, b] the rule matches, and the first and the
 * last, one match (cron: one day) at a time.  For short spans: the work
 * grows with the matches (cron: with the days).
 */
static int64
walk_local(const ScheduleEval *ev, Timestamp a, Timestamp b,
			Timestamp *first, Timestamp *last)
{
	int64		n = 0;
	Timestamp	l;

	if (b < a)
		return 0;
	if (ev->rule->kind == SCHEDULE_CRON)
		return cron_count_local(ev->rule, a, b, first, last);
	for (l = rule_next_local(ev, a, b); l != DT_NOEND && l <= b;
		 l = rule_next_local(ev, l + USECS_PER_SEC, b))
	{
		CHECK_FOR_INTERRUPTS();
		if (n == 0)
			*first = l;
		*last = l;
		n++;
	}
	return n;
}

/*
 * Counting long spans.  A local-time rule matches the same times of day in
 * every day it matches at all (JSON unit hour: the same times past the hour
 * in every hour it matches): a span is the rest of its first unit, a run of
 * whole units and the start of its last, and only the whole units' matches
 * must be counted without walking them.  Which units match repeats with a
 * period (GREGORIAN_DAYS: the calendar repeats every 400 years, a whole
 * number of weeks), so at most two periods of units are walked, whatever
 * the span; workdays are counted by arithmetic on their index.
 */

/* Days in 400 Gregorian years (20871 weeks). */
#define GREGORIAN_DAYS		INT64CONST(146097)

/* Cron masks that restrict nothing: months 1-12, days of the month 1-31. */
#define CRON_ALL_MONTHS		UINT64CONST(0x1FFE)
#define CRON_ALL_MDAYS		UINT64CONST(0xFFFFFFFE)

/* Sentinel of next_unit: no unit matches. */
#define NO_UNIT				PG_INT64_MAX

/* The unit a span is counted in, in microseconds: a day, or an hour. */
static inline int64
unit_usecs(const ScheduleEval *ev)
{
	if (ev->rule->kind == SCHEDULE_RULE && ev->rule->unit == SCHEDULE_UNIT_HOUR)
		return USECS_PER_HOUR;
	return USECS_PER_DAY;
}

/* How many times the rule matches in each unit it matches. */
static int64
unit_matches(const ScheduleEval *ev)
{
	const ScheduleRule *rule = ev->rule;

	if (rule->kind == SCHEDULE_CRON)
		return (int64) pg_popcount32(rule->hours) * pg_popcount64(rule->minutes) *
			pg_popcount64(rule->seconds);
	return ev->ntimes;
}

/* The last time the rule matches in a unit it matches, from the unit's start. */
static int64
unit_last_time(const ScheduleEval *ev)
{
	const ScheduleRule *rule = ev->rule;

	if (rule->kind == SCHEDULE_CRON)
		return ((int64) pg_leftmost_one_pos32(rule->hours) * SECS_PER_HOUR +
				pg_leftmost_one_pos64(rule->minutes) * SECS_PER_MINUTE +
				pg_leftmost_one_pos64(rule->seconds)) * USECS_PER_SEC;
	return (int64) ev->times[ev->ntimes - 1] * USECS_PER_SEC;
}

static int64
gcd64(int64 a, int64 b)
{
	while (b != 0)
	{
		int64		t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/*
 * After how many units the matching units repeat (workday rules, whose
 * holidays do not repeat, are not asked).
 */
static int64
unit_period(const ScheduleEval *ev)
{
	const ScheduleRule *rule = ev->rule;
	int64		every = rule->every;

	if (rule->kind == SCHEDULE_CRON)
	{
		/* the weekdays alone decide, or the calendar does */
		if ((rule->months & CRON_ALL_MONTHS) == CRON_ALL_MONTHS &&
			(rule->mdays & CRON_ALL_MDAYS) == CRON_ALL_MDAYS)
			return 7;
		return GREGORIAN_DAYS;
	}
	switch (rule->unit)
	{
		case SCHEDULE_UNIT_HOUR:
		case SCHEDULE_UNIT_DAY:
			return every;
		case SCHEDULE_UNIT_WEEK:
			return 7 * every;
		case SCHEDULE_UNIT_MONTH:
			/* every-th month, and the calendar: lcm(every, 4800) months */
			return every / gcd64(every, 4800) * GREGORIAN_DAYS;
		case SCHEDULE_UNIT_YEAR:
			return every / gcd64(every, 400) * GREGORIAN_DAYS;
		case SCHEDULE_UNIT_WORKDAY:
			break;
	}
	elog(ERROR, "a workday rule has no period");
	return 0;					/* keep compiler quiet */
}

/* The first unit in [u, u1] the rule matches, or NO_UNIT. */
static int64
next_unit(const ScheduleEval *ev, int64 u, int64 u1)
{
	int64		uu = unit_usecs(ev);
	Timestamp	l;

	if (u > u1)
		return NO_UNIT;
	l = next_local(ev, u * uu, u1 * uu + (uu - 1));
	if (l == DT_NOEND || floor_div(l, uu) > u1)
		return NO_UNIT;
	return floor_div(l, uu);
}

/* How many units in [u0, u1] the rule matches, one at a time. */
static int64
walk_units(const ScheduleEval *ev, int64 u0, int64 u1, int64 *lastu)
{
	int64		n = 0;
	int64		u;

	for (u = next_unit(ev, u0, u1); u != NO_UNIT; u = next_unit(ev, u + 1, u1))
	{
		CHECK_FOR_INTERRUPTS();
		*lastu = u;
		n++;
	}
	return n;
}

/* Workdays in [origin, day): the index of day if it is one. */
static int64
workday_index(const ScheduleEval *ev, int64 day)
{
	return (weekdays_before(day) - weekdays_before(ev->origin)) -
		(holidays_before(ev, day) - holidays_before(ev, ev->origin));
}

/*
 * How many units in [u0, u1] (u0 < u1) the rule matches, and the last of
 * them (when there is one).  The work is bounded by two or three periods.
 */
static int64
count_units(const ScheduleEval *ev, int64 u0, int64 u1, int64 *lastu)
{
	int64		n = 0;
	int64		p,
				k;

	if (ev->rule->kind == SCHEDULE_RULE && ev->rule->unit == SCHEDULE_UNIT_WORKDAY)
	{
		int64		every = ev->rule->every;
		int64		i0,
					i1;

		/* the workdays have indexes i0 .. i1 - 1; every every-th fires */
		u0 = Max(u0, ev->origin);
		if (u1 < u0)
			return 0;
		i0 = workday_index(ev, u0);
		i1 = workday_index(ev, u1 + 1);
		n = ceil_div(i1, every) - ceil_div(i0, every);
		if (n > 0)
		{
			/* the last one is at most "every" workdays (and holidays) back */
			for (k = u1; rule_day_ok(ev, k) != k; k--)
				CHECK_FOR_INTERRUPTS();
			*lastu = k;
		}
		return n;
	}

	p = unit_period(ev);
	k = (u1 - u0 + 1) / p;
	if (k >= 2)
	{
		int64		per = walk_units(ev, u0, u0 + p - 1, lastu);

		if (per == 0)
			return 0;
		n = (k - 1) * per;
		u0 += (k - 1) * p;
	}
	/* the last period (or two) is walked, which finds the last unit too */
	return n + walk_units(ev, u0, u1, lastu);
}

/*
 * How many local times in [a, b] the rule matches, and the first and the
 * last.  The work is bounded whatever the span: two units are walked, the
 * whole units between counted by count_units.
 */
static int64
count_local(const ScheduleEval *ev, Timestamp a, Timestamp b,
			Timestamp *first, Timestamp *last)
{
	int64		uu = unit_usecs(ev);
	int64		ua,
				ub,
				lastu = 0,
				whole,
				n,
				k;
	Timestamp	f = 0,
				l = 0;

	if (b < a)
		return 0;
	ua = floor_div(a, uu);
	ub = floor_div(b, uu);
	if (ub - ua < 2)
		return walk_local(ev, a, b, first, last);

	n = walk_local(ev, a, (ua + 1) * uu - 1, first, last);
	whole = count_units(ev, ua + 1, ub - 1, &lastu);
	if (whole > 0)
	{
		if (n == 0)
			*first = next_local(ev, (ua + 1) * uu, ub * uu - 1);
		*last = lastu * uu + unit_last_time(ev);
		n += whole * unit_matches(ev);
	}
	k = walk_local(ev, ub * uu, b, &f, &l);
	if (k > 0)
	{
		if (n == 0)
			*first = f;
		*last = l;
		n += k;
	}
	return n;
}

/* ---------------------------------------------------------------------
 * Evaluation
 * ---------------------------------------------------------------------
 */

/*
 * Load the holidays of a calendar that fall on weekdays (the others change
 * nothing) from sched.holidays.
 */
static void
load_holidays(ScheduleEval *ev, const char *calendar)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	uint64		i;
	int			n = 0;
	int			ret;

	values[0] = CStringGetTextDatum(calendar);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	ret = SPI_execute_with_args("SELECT h.day FROM sched.holidays h "
								"WHERE h.calendar OPERATOR(pg_catalog.=) $1 "
								"ORDER BY h.day",
								1, argtypes, values, NULL, true, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "could not read sched.holidays: %s", SPI_result_code_string(ret));
	ev->holidays = MemoryContextAlloc(cxt, sizeof(int32) * Max(SPI_processed, 1));
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		DateADT		day;

		day = DatumGetDateADT(SPI_getbinval(SPI_tuptable->vals[i],
											SPI_tuptable->tupdesc, 1, &isnull));
		if (isnull || DATE_NOT_FINITE(day) || iso_weekday(day) > 5)
			continue;
		ev->holidays[n++] = day;
	}
	ev->nholidays = n;
	SPI_finish();
}

/*
 * Prepare a rule for evaluation with an anchor: resolve the defaults a
 * JSON rule takes from the anchor's local time, and load holidays.
 */
ScheduleEval *
delaysched_schedule_begin(const ScheduleRule *rule, pg_tz *tz, TimestampTz anchor)
{
	ScheduleEval *ev = palloc0(sizeof(ScheduleEval));
	Timestamp	la;
	int64		secs,
				day;
	int32		tod;
	int			y,
				m,
				d;

	ev->rule = rule;
	ev->tz = tz;
	ev->anchor = anchor;
	if (rule->kind != SCHEDULE_RULE)
		return ev;

	la = local_time(tz, Min(Max(anchor, SAFE_MIN), SAFE_END));
	secs = floor_div(la, USECS_PER_SEC);
	day = floor_div(secs, SECS_PER_DAY);
	tod = (int32) (secs - day * SECS_PER_DAY);
	day_date(day, &y, &m, &d);

	/* "at": the anchor's time of day (unit hour: past the hour) */
	if (rule->ntimes > 0)
	{
		ev->ntimes = rule->ntimes;
		memcpy(ev->times, rule->times, sizeof(int32) * rule->ntimes);
	}
	else
	{
		ev->ntimes = 1;
		ev->times[0] = (rule->unit == SCHEDULE_UNIT_HOUR) ? tod % SECS_PER_HOUR : tod;
	}
	/* "days": the anchor's weekday (week) or day of the month */
	if (rule->days_given)
		ev->days = rule->days;
	else if (rule->unit == SCHEDULE_UNIT_WEEK)
		ev->days = UINT64CONST(1) << iso_weekday(day);
	else
		ev->days = UINT64CONST(1) << d;
	/* "months": the anchor's month */
	ev->months = rule->months_given ? rule->months : (1U << m);

	switch (rule->unit)
	{
		case SCHEDULE_UNIT_HOUR:
			ev->origin = floor_div(secs, SECS_PER_HOUR);
			break;
		case SCHEDULE_UNIT_DAY:
			ev->origin = day;
			break;
		case SCHEDULE_UNIT_WEEK:
			ev->origin = day - (iso_weekday(day) - 1);
			break;
		case SCHEDULE_UNIT_MONTH:
			ev->origin = (int64) y * 12 + (m - 1);
			break;
		case SCHEDULE_UNIT_YEAR:
			ev->origin = y;
			break;
		case SCHEDULE_UNIT_WORKDAY:
			{
				int64		w;

				if (rule->calendar[0] != '\0')
					load_holidays(ev, rule->calendar);
				/* the first workday at or after the anchor's date */
				for (w = day; w < day + 36525 && !is_workday(ev, w); w++)
					;
				ev->origin = w;
			}
			break;
	}
	return ev;
}

/*
 * Free what delaysched_schedule_begin allocated (the rule is the caller's).
 */
void
delaysched_schedule_end(ScheduleEval *ev)
{
	if (ev->holidays != NULL)
		pfree(ev->holidays);
	pfree(ev);
}

/*
 * The first firing at or after t, at most limit; DT_NOEND if none.
 */
static TimestampTz
first_firing_from(ScheduleEval *ev, TimestampTz t, TimestampTz limit)
{
	const ScheduleRule *rule = ev->rule;
	TimestampTz s;

	if (rule->fixed_time)
	{
		Timestamp	l;
		TimestampTz r;

		l = next_local(ev, high_water(ev->tz, t) + 1, limit + SAFE_MARGIN / 2);
		if (l == DT_NOEND)
			return DT_NOEND;
		r = fire_instant(ev->tz, l, t);
		return (r <= limit) ? r : DT_NOEND;
	}

	/* finer than hourly: the first matching local time, segment by segment */
	for (s = t;;)
	{
		int64		off;
		TimestampTz end;
		int64		off_after;
		TimestampTz seg_last;
		Timestamp	l;

		CHECK_FOR_INTERRUPTS();
		zone_segment(ev->tz, s, &off, &end, &off_after);
		seg_last = (end == DT_NOEND || end > limit) ? limit : end - 1;
		l = next_local(ev, s + off, seg_last + off);
		if (l != DT_NOEND && l - off <= seg_last)
			return l - off;
		if (seg_last >= limit)
			return DT_NOEND;
		s = end;
	}
}

/*
 * The first firing strictly after "after" (and at or after the anchor);
 * DT_NOEND if there is none within the search horizon.
 */
TimestampTz
delaysched_schedule_eval_next(ScheduleEval *ev, TimestampTz after)
{
	TimestampTz t;
	TimestampTz limit;

	if (after >= END_TIMESTAMP - 1)
		return DT_NOEND;
	t = Max(after + 1, ev->anchor);

	if (ev->rule->kind == SCHEDULE_EVERY)
	{
		uint64		interval = (uint64) ev->rule->interval;
		uint64		k,
					offset;

		if (t <= ev->anchor)
			return ev->anchor;
		k = ((uint64) t - (uint64) ev->anchor + interval - 1) / interval;
		offset = k * interval;
		if (offset >= (uint64) END_TIMESTAMP - (uint64) ev->anchor)
			return DT_NOEND;
		return (TimestampTz) ((uint64) ev->anchor + offset);
	}

	t = Max(t, SAFE_MIN);
	if (t >= SAFE_END)
		return DT_NOEND;
	limit = (t >= SAFE_END - SEARCH_HORIZON) ? SAFE_END - 1 : t + SEARCH_HORIZON;
	return first_firing_from(ev, t, limit);
}

/*
 * How many firings fall in [from, to] (both included), with the first and
 * the last of them in *first and *last (left alone when there is none).
 */
int64
delaysched_schedule_eval_span(ScheduleEval *ev, TimestampTz from, TimestampTz to,
							  TimestampTz *first, TimestampTz *last)
{
	const ScheduleRule *rule = ev->rule;
	TimestampTz t0 = Max(from, ev->anchor);
	TimestampTz t1 = to;
	TimestampTz s;
	int64		n = 0;

	if (rule->kind == SCHEDULE_EVERY)
	{
		uint64		interval = (uint64) rule->interval;
		uint64		klo,
					khi;

		if (t1 < t0)
			return 0;
		klo = ((uint64) t0 - (uint64) ev->anchor + interval - 1) / interval;
		khi = ((uint64) t1 - (uint64) ev->anchor) / interval;
		if (khi < klo)
			return 0;
		*first = (TimestampTz) ((uint64) ev->anchor + klo * interval);
		*last = (TimestampTz) ((uint64) ev->anchor + khi * interval);
		return (int64) (khi - klo + 1);
	}

	t0 = Max(t0, SAFE_MIN);
	t1 = Min(t1, SAFE_END - 1);
	if (t1 < t0)
		return 0;

	if (rule->fixed_time)
	{
		Timestamp	lo = high_water(ev->tz, t0) + 1;
		Timestamp	hi = high_water(ev->tz, t1 + 1);
		Timestamp	lfirst = 0,
					llast = 0;

		n = count_local(ev, lo, hi, &lfirst, &llast);
		if (n == 0)
			return 0;

		/*
		 * The matches inside one spring-forward gap (and at its end) fire
		 * once, when the gap ends.
		 */
		for (s = t0 - 1;;)
		{
			int64		off;
			TimestampTz end;
			int64		off_after;

			zone_segment(ev->tz, s, &off, &end, &off_after);
			if (end == DT_NOEND || end > t1)
				break;
			if (off_after > off)
			{
				Timestamp	gf,
							gl;
				int64		k = count_local(ev, end + off, end + off_after, &gf, &gl);

				if (k > 1)
					n -= k - 1;
			}
			s = end;
		}
		*first = fire_instant(ev->tz, lfirst, t0);
		*last = fire_instant(ev->tz, llast, t0);
		return n;
	}

	/* finer than hourly: the matching local times of each segment */
	for (s = t0;;)
	{
		int64		off;
		TimestampTz end;
		int64		off_after;
		TimestampTz seg_last;
		Timestamp	lf = 0,
					ll = 0;
		int64		k;

		zone_segment(ev->tz, s, &off, &end, &off_after);
		seg_last = (end == DT_NOEND || end > t1) ? t1 : end - 1;
		k = count_local(ev, s + off, seg_last + off, &lf, &ll);
		if (k > 0)
		{
			if (n == 0)
				*first = lf - off;
			*last = ll - off;
			n += k;
		}
		if (seg_last >= t1)
			return n;
		s = end;
	}
}

/* ---------------------------------------------------------------------
 * The C API of schedule.h
 * ---------------------------------------------------------------------
 */

/*
 * The time zone of a schedule, by any name PostgreSQL knows (pg_tzset);
 * ereport if it is not one.
 */
pg_tz *
delaysched_schedule_zone(const char *name)
{
	pg_tz	   *tz = NULL;

	if (name[0] != '\0' && strlen(name) <= TZ_STRLEN_MAX)
		tz = pg_tzset(name);
	if (tz == NULL || !pg_tz_acceptable(tz))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time zone \"%s\" is not recognized", name),
				 errhint("Use a name from pg_timezone_names, such as 'Europe/Berlin'.")));
	return tz;
}

/*
 * The first firing strictly after "after" of a schedule starting at anchor;
 * DT_NOEND if there is none within 100 years.
 */
TimestampTz
delaysched_schedule_next_firing(const ScheduleRule *rule, pg_tz *tz,
								TimestampTz anchor, TimestampTz after)
{
	ScheduleEval *ev = delaysched_schedule_begin(rule, tz, anchor);
	TimestampTz r = delaysched_schedule_eval_next(ev, after);

	delaysched_schedule_end(ev);
	return r;
}

/*
 * How many firings of a schedule starting at anchor fall in [from, to], and
 * the first and the last of them (*first and *last are left alone when
 * there is none).
 */
int64
delaysched_schedule_span_firings(const ScheduleRule *rule, pg_tz *tz,
								 TimestampTz anchor, TimestampTz from,
								 TimestampTz to, TimestampTz *first,
								 TimestampTz *last)
{
	ScheduleEval *ev = delaysched_schedule_begin(rule, tz, anchor);
	int64		n = delaysched_schedule_eval_span(ev, from, to, first, last);

	delaysched_schedule_end(ev);
	return n;
}
