-- schedule_rules: the schedule rule engine (src/schedule_*.c).  Cron,
-- "every N unit" and readable JSON rules, their firings in a time zone
-- across daylight saving time, counting firings in a span, and every error.
-- try() (from setup) prints "SQLSTATE: message [DETAIL: ...] [HINT: ...]".

SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';

-- helper: the next n firings of a rule strictly after "after" (the schedule
-- starting at starts_at, or at after), as local times in the rule's zone
CREATE FUNCTION local_runs(rule text, zone text, after timestamptz, n int DEFAULT 5,
                           starts_at timestamptz DEFAULT NULL) RETURNS text
LANGUAGE sql AS $$
	SELECT string_agg(to_char(t AT TIME ZONE zone, 'Dy YYYY-MM-DD HH24:MI:SS'), ', ' ORDER BY t)
	FROM sched.next_runs(rule, zone, after, n, starts_at) t
$$;

-- helper: the same firings one a row, in UTC and local time
CREATE FUNCTION dst_runs(rule text, zone text, after timestamptz, n int DEFAULT 4)
RETURNS TABLE (utc timestamptz, local_time timestamp) LANGUAGE sql AS $$
	SELECT t, t AT TIME ZONE zone FROM sched.next_runs(rule, zone, after, n) t
$$;

-- the kind of each syntax
SELECT rule, sched._check_schedule(rule, 'UTC') AS kind
FROM (VALUES ('*/15 * * * *'), ('0 */15 * * * *'), ('  @DAILY  '), (E'0\t9  *  * \t mon-fri'),
             ('every 30 seconds'), ('EVERY 2 Hours'), ('{"unit": "day", "at": "09:00"}')) AS v(rule);

-- time zones: any name PostgreSQL knows, in any case; POSIX zone specs too
SELECT zone, sched._check_schedule('@hourly', zone) AS kind
FROM (VALUES ('UTC'), ('Europe/Berlin'), ('america/new_york'), ('EST5EDT'), ('UTC+3')) AS v(zone);

----------------------------------------------------------------------------
-- cron (all in UTC, after Wednesday 2025-01-01 00:00)
----------------------------------------------------------------------------
SELECT rule, local_runs(rule, 'UTC', '2025-01-01') AS runs
FROM (VALUES
	('*/15 * * * *'),			-- steps over a whole field
	('0,20,40 9 * * *'),		-- lists
	('0 9-11 * * *'),			-- ranges
	('0 8-18/4 * * *'),			-- a stepped range
	('30 5/6 * * *'),			-- a/n: 5 through 23, every 6
	('0 12 1 jan,JUL *'),		-- month names, any case
	('0 0 1 jan-sep/4 *'),		-- a range of names with a step
	('0 9 * * mon-fri'),		-- weekday names in a range
	('0 10 * * 0'),				-- Sunday is 0 ...
	('0 10 * * 7'),				-- ... or 7
	('0 10 * * sun'),
	('0 0 13 * fri'),			-- both days restricted: the 13th OR a Friday
	('0 0 */2 * mon'),			-- day of month starts with '*': odd days AND Mondays
	('0 0 1-7 * mon'),			-- both restricted: days 1-7 OR Mondays
	('*/20 * * * * *'),			-- 6 fields: seconds first
	('30 0 12 * * *'),
	('15,45 30 8 * * 1-5')
) AS v(rule);

-- the macros
SELECT rule, local_runs(rule, 'UTC', '2025-01-01', 3) AS runs
FROM (VALUES ('@yearly'), ('@annually'), ('@monthly'), ('@weekly'), ('@daily'),
             ('@midnight'), ('@hourly')) AS v(rule);

-- leap days: February 29 comes every four years (2100 is not a leap year)
SELECT local_runs('0 0 29 2 *', 'UTC', '2023-01-01', 3) AS leap_days,
       local_runs('0 0 29 2 *', 'UTC', '2096-03-01', 1) AS after_2096;

-- the 31st of each month that has one
SELECT local_runs('0 12 31 * *', 'UTC', '2025-01-01', 7) AS month_ends;

----------------------------------------------------------------------------
-- every N unit: elapsed time from the anchor (the schedule's start)
----------------------------------------------------------------------------
SELECT rule, local_runs(rule, 'UTC', '2025-01-01', 4, '2025-01-01') AS runs
FROM (VALUES ('every 30 seconds'), ('every 1 second'), ('every 90 minutes'), ('every 1 minute'),
             ('every 2 hours'), ('every 1 hour'), ('every 1 day'), ('every 3 days'),
             ('every 2 weeks'), ('every 1 week')) AS v(rule);

-- firings are anchor + k * interval; before the anchor nothing fires
SELECT local_runs('every 1 hour', 'UTC', '2025-01-01 12:00', 3, '2025-01-01 00:00:07') AS anchored_at_7s,
       local_runs('every 1 hour', 'UTC', '2025-01-01 00:00', 3, '2025-01-01 05:30') AS starts_later;

-- the longest interval is 10 years of 365.25 days
SELECT sched._check_schedule('every 3652 days', 'UTC') AS days_3652,
       sched._check_schedule('every 521 weeks', 'UTC') AS weeks_521,
       sched._check_schedule('every 87660 hours', 'UTC') AS hours_87660;

----------------------------------------------------------------------------
-- readable rules (JSON)
----------------------------------------------------------------------------
-- unit hour: "at" is minutes (and seconds) past the hour; every 3rd hour
-- counted from the anchor's hour
SELECT local_runs('{"unit": "hour", "every": 3, "at": [":30:15", ":00"]}', 'UTC',
                  '2025-01-01 10:20', 5) AS every_3_hours,
       local_runs('{"unit": "hour"}', 'UTC', '2025-01-01 10:19:59', 3, '2025-01-01 10:20:05') AS default_at;

-- unit day
SELECT local_runs('{"unit": "day", "every": 2, "at": ["17:30", "09:00"]}', 'UTC',
                  '2025-01-01 10:00', 5) AS every_2_days,
       local_runs('{"unit": "day"}', 'UTC', '2025-01-01 08:00', 3, '2025-01-01 08:15') AS default_at;

-- unit week: ISO weekdays (1 = Monday); every 2nd week counted from the
-- anchor's week (Monday to Sunday)
SELECT local_runs('{"unit": "week", "every": 2, "days": [5, 1], "at": "09:00"}', 'UTC',
                  '2025-01-01', 5) AS every_2_weeks,
       local_runs('{"unit": "week"}', 'UTC', '2025-01-01 11:00', 3, '2025-01-01 12:00') AS default_wednesday,
       local_runs('{"unit": "week", "days": [6, 7, 7], "at": ["08:00", "08:00"]}', 'UTC',
                  '2025-01-01', 4) AS duplicates_are_fine;

-- unit month: a day a month lacks is skipped in that month
SELECT local_runs('{"unit": "month", "days": [29, 30, 31], "at": "12:00"}', 'UTC',
                  '2025-01-15', 9) AS month_ends;
SELECT local_runs('{"unit": "month", "days": 29, "at": "00:00"}', 'UTC', '2023-12-01', 4) AS leap_2024,
       local_runs('{"unit": "month", "days": 29, "at": "00:00"}', 'UTC', '2025-01-01', 3) AS no_leap_2025;
-- defaults: the anchor's day of the month and time of day
SELECT local_runs('{"unit": "month", "every": 2}', 'UTC', '2025-01-31 09:00', 4, '2025-01-31 10:00') AS default_31st;

-- the seed example: every second month on the 3rd, 5th and 23rd at 18:00
-- Shanghai time, starting 2022-03-23 18:00 (which fires)
SELECT local_runs('{"every": 2, "unit": "month", "days": [3, 5, 23], "at": "18:00"}', 'Asia/Shanghai',
                  '2022-03-23 17:59+08', 8, '2022-03-23 18:00+08') AS seed_example;

-- unit year: "months" and "days" combined; defaults from the anchor
SELECT local_runs('{"unit": "year", "months": [8, 2], "days": [1, 29], "at": "06:00"}', 'UTC',
                  '2023-01-01', 7) AS feb_aug,
       local_runs('{"unit": "year", "every": 2, "months": 7}', 'UTC', '2025-01-01', 3, '2025-03-04 05:06:07') AS every_2_years;
SELECT local_runs('{"unit": "year"}', 'UTC', '2024-02-28', 3, '2024-02-29 12:00') AS default_feb_29;

-- unit workday: Monday to Friday, minus a calendar's holidays
INSERT INTO sched.holidays (calendar, day) VALUES
	('test_cal', '2025-01-06'), ('test_cal', '2025-01-08'), ('test_cal', '2025-01-11');
SELECT local_runs('{"unit": "workday", "at": "09:00"}', 'UTC', '2025-01-02 12:00', 6) AS mon_to_fri,
       local_runs('{"unit": "workday", "at": "09:00", "calendar": "test_cal"}', 'UTC',
                  '2025-01-02 12:00', 6) AS with_holidays;
-- every 2nd workday, counted from the first workday at or after the anchor
-- (Saturday 2025-01-04: the first is Tuesday the 7th, as the 6th is a holiday)
SELECT local_runs('{"unit": "workday", "every": 2, "at": ["09:00", "15:00"], "calendar": "test_cal"}', 'UTC',
                  '2025-01-04', 6) AS every_2nd_workday,
       local_runs('{"unit": "workday", "calendar": "no_such_calendar"}', 'UTC', '2025-01-03 17:00', 3,
                  '2025-01-03 18:00') AS unknown_calendar;

----------------------------------------------------------------------------
-- time zones and daylight saving time
----------------------------------------------------------------------------
-- a specific local time fires once per local date: in the spring-forward
-- gap (New York 2025-03-09 02:00-03:00 EST->EDT) when the gap ends, 03:00 EDT
SELECT * FROM dst_runs('30 2 * * *', 'America/New_York', '2025-03-07 12:00');
-- times in one gap collapse into one firing
SELECT * FROM dst_runs('0,30 2 * * *', 'America/New_York', '2025-03-08 12:00', 3);
SELECT * FROM dst_runs('{"unit": "day", "at": ["02:15", "02:45", "03:00"]}', 'America/New_York', '2025-03-09 05:00', 3);
-- in the fall-back overlap (01:00-02:00 happens twice), the first pass only
SELECT * FROM dst_runs('30 1 * * *', 'America/New_York', '2025-11-01 00:00', 3);
SELECT * FROM dst_runs('{"unit": "week", "days": 7, "at": "01:30"}', 'America/New_York', '2025-10-20 00:00', 3);

-- finer than hourly: every instant whose local time matches; nothing for
-- the gap, both passes of the overlap
SELECT * FROM dst_runs('30 * * * *', 'America/New_York', '2025-03-09 05:00');
SELECT * FROM dst_runs('30 * * * *', 'America/New_York', '2025-11-02 04:00', 5);
-- (an hour field with a step is finer than hourly too)
SELECT * FROM dst_runs('0 1-23/2 * * *', 'America/New_York', '2025-11-02 03:00', 3);
SELECT * FROM dst_runs('{"unit": "hour", "at": ":30"}', 'America/New_York', '2025-11-02 04:00', 5);

-- Berlin: 2025-03-30 02:00 CET -> 03:00 CEST; 2025-10-26 03:00 CEST -> 02:00 CET
SELECT * FROM dst_runs('30 2 * * *', 'Europe/Berlin', '2025-03-29 00:00', 3);
SELECT * FROM dst_runs('30 2 * * *', 'Europe/Berlin', '2025-10-25 00:00', 3);
SELECT * FROM dst_runs('30 * * * *', 'Europe/Berlin', '2025-03-29 23:00', 4);
SELECT * FROM dst_runs('30 * * * *', 'Europe/Berlin', '2025-10-25 23:00', 4);

-- every N unit counts elapsed time: the zone does not matter
SELECT * FROM dst_runs('every 1 hour', 'America/New_York', '2025-03-09 05:00');
SELECT * FROM dst_runs('every 1 hour', 'America/New_York', '2025-11-02 04:00');
SELECT * FROM dst_runs('every 1 hour', 'Europe/Berlin', '2025-03-29 23:00');
SELECT * FROM dst_runs('every 1 hour', 'Europe/Berlin', '2025-10-25 23:00');

----------------------------------------------------------------------------
-- sched._schedule_next and sched._schedule_span
----------------------------------------------------------------------------
SELECT sched._schedule_next('@daily', 'UTC', '2025-01-01', '2025-01-01') AS strictly_after,
       sched._schedule_next('@daily', 'UTC', '2025-01-05', '2025-01-01') AS not_before_anchor,
       sched._schedule_next('every 10 minutes', 'UTC', '2025-01-01 00:03', '2025-01-01 00:20') AS every,
       sched._schedule_next('every 10 minutes', 'UTC', '2025-01-01 00:03', '2024-01-01') AS at_anchor,
       sched._schedule_next('0 0 29 2 *', 'UTC', '2024-01-01', '2024-03-01') AS next_leap_day;
-- nothing within 100 years: NULL
SELECT sched._schedule_next('{"unit": "year", "every": 1000}', 'UTC', '2025-01-01', '2025-01-01') AS beyond_horizon;

-- counts: a per-second rule over one day, a daily one over a year
SELECT * FROM sched._schedule_span('* * * * * *', 'UTC', '2025-01-01', '2025-06-01', '2025-06-01 23:59:59.999999');
SELECT * FROM sched._schedule_span('every 1 second', 'UTC', '2025-06-01', '2025-06-01', '2025-06-01 23:59:59');
SELECT * FROM sched._schedule_span('0 9 * * *', 'Europe/Berlin', '2025-01-01', '2025-01-01', '2025-12-31 23:59:59');
SELECT * FROM sched._schedule_span('@daily', 'UTC', '2024-01-01', '2024-01-01', '2024-12-31 23:59:59');
-- a week of per-second firings over a DST change: real seconds, ends included
SELECT * FROM sched._schedule_span('* * * * * *', 'Europe/Berlin', '2025-03-27', '2025-03-27', '2025-04-03');
-- the anchor bounds the span; an empty span
SELECT * FROM sched._schedule_span('@hourly', 'UTC', '2025-01-01 05:30', '2025-01-01', '2025-01-01 10:00');
SELECT * FROM sched._schedule_span('@hourly', 'UTC', '2025-01-01', '2025-01-01 10:00', '2025-01-01 09:00');
-- DST: the gap's two times fire once; the overlap fires once (fixed time)
-- or twice (finer than hourly)
SELECT * FROM sched._schedule_span('0,30 2 * * *', 'America/New_York', '2025-03-01', '2025-03-01 05:00', '2025-04-01 05:00');
SELECT * FROM sched._schedule_span('30 1 * * *', 'America/New_York', '2025-11-01', '2025-11-01 04:00', '2025-12-01 05:00');
SELECT * FROM sched._schedule_span('30 * * * *', 'America/New_York', '2025-11-01', '2025-11-02 04:00', '2025-11-03 05:00');

-- a span counts exactly what sched.next_runs lists, whatever the rule
SELECT rule, zone,
       (SELECT n FROM sched._schedule_span(rule, zone, '2025-03-01', '2025-03-01', '2025-04-15')) AS span,
       (SELECT count(*) FROM sched.next_runs(rule, zone, '2025-02-28 23:59:59.999999', 10000, '2025-03-01') t
         WHERE t <= '2025-04-15') AS listed
FROM (VALUES ('*/7 1-3 * * *'), ('0,30 2 * * *'), ('*/20 * * * *'), ('{"unit": "day", "at": ["02:00", "02:30", "03:00"]}'),
             ('{"unit": "hour", "at": [":00", ":45"]}'), ('every 45 minutes')) AS r(rule),
     (VALUES ('America/New_York'), ('Europe/Berlin'), ('Australia/Lord_Howe')) AS z(zone)
ORDER BY 1, 2;

-- long spans are counted, not walked (issue 32): the days between a span's
-- first and last are counted by arithmetic, so 6,700 years take
-- milliseconds; they took minutes.  Every real second matches '* * * * * *'
-- and every local date '30 2 * * *' (once, in a gap at its end); the
-- counts are checked against that.
SET statement_timeout = '5s';
SELECT s.n = extract(epoch FROM timestamptz '2026-01-01 00:00+00' - timestamptz '4713-01-01 00:00+00 BC') + 1 AS every_second,
       s.first_at, s.last_at
FROM sched._schedule_span('* * * * * *', 'Europe/Berlin', '4713-01-01 00:00+00 BC', '4713-01-01 00:00+00 BC',
                          '2026-01-01 00:00+00') s;
SELECT s.n = date '2026-01-01' - date '4713-01-01 BC' AS every_day, s.first_at, s.last_at
FROM sched._schedule_span('30 2 * * *', 'Europe/Berlin', '4713-01-01 00:00+00 BC', '4713-01-01 00:00+00 BC',
                          '2025-12-31 22:59:59+00') s;
SELECT s.n = (date '2026-01-01' - date '4713-01-01 BC') * 2 AS every_day_twice, s.first_at, s.last_at
FROM sched._schedule_span('{"unit": "day", "at": ["02:30", "09:00"]}', 'America/New_York',
                          '4713-01-01 00:00+00 BC', '4713-01-01 00:00+00 BC', '2026-01-01 05:00+00') s;
-- the whole range of timestamps, and a zone whose rules go back as far
SELECT * FROM sched._schedule_span('* * * * *', 'UTC', '4713-01-01 00:00+00 BC', '4713-01-01 00:00+00 BC',
                                   '294276-12-31 23:59:59+00');
SELECT * FROM sched._schedule_span('*/5 * * * * *', 'CET-1CEST,M3.5.0,M10.5.0/3', '4713-01-01 00:00+00 BC',
                                   '4713-01-01 00:00+00 BC', '2026-01-01 00:00+00');
SELECT * FROM sched._schedule_span('0 9 * 1-11 *', 'Europe/Berlin', '4713-01-01 00:00+00 BC', '4713-01-01 00:00+00 BC',
                                   '294276-12-31 23:59:59+00');
SELECT * FROM sched._schedule_span('{"unit": "hour", "every": 7, "at": [":00", ":59:59"]}', 'Europe/Berlin',
                                   '4713-01-01 00:00+00 BC', '4713-01-01 00:00+00 BC', '2026-01-01 00:00+00');
SELECT * FROM sched._schedule_span('{"unit": "month", "every": 7, "days": [29, 30, 31], "at": "09:00"}', 'UTC',
                                   '4713-01-01 00:00+00 BC', '4713-01-01 00:00+00 BC', '2026-01-01 00:00+00');
SELECT * FROM sched._schedule_span('{"unit": "workday", "every": 3, "at": ["08:00", "16:00"], "calendar": "test_cal"}',
                                   'Europe/Berlin', '4713-01-01 00:00+00 BC', '4713-01-01 00:00+00 BC', '2026-01-01 00:00+00');
RESET statement_timeout;

-- and they count what sched.next_runs lists: spans of up to 10,000
-- firings, across DST changes, leap days, whole periods of the rule (400
-- years for a leap day) and, for workdays, holidays
SELECT rule, zone, span.n AS span, listed.n AS listed,
       span.first_at = listed.first_at AND span.last_at = listed.last_at AS same_ends
FROM (VALUES
	('* * * * *', 'Europe/Berlin', '2024-03-28 10:17:33+00', '2024-04-03 12:00+00'),
	('*/7 * * * * *', 'Europe/Berlin', '2025-10-25 10:17:33+00', '2025-10-26 03:00+00'),
	('15 2 * * *', 'Europe/Berlin', '2000-01-01 00:00+00', '2026-01-01 00:00+00'),
	('30 2 * * 0', 'Europe/Berlin', '2000-01-05 13:00+00', '2026-01-01 00:00+00'),
	('30 2 29 2 *', 'Europe/Berlin', '1000-01-01 00:00+00', '3000-01-01 00:00+00'),
	('0 0 29 2 1', 'UTC', '0100-01-01 00:00+00', '2026-01-01 00:00+00'),
	('0 9,17 1-7 * 1', 'America/New_York', '1990-01-01 00:00+00', '2026-01-01 00:00+00'),
	('0 9 13 * 5', 'UTC', '1900-01-02 12:00+00', '2026-01-01 00:00+00'),
	('0 0 31 */2 *', 'UTC', '1000-01-01 00:00+00', '2026-01-01 00:00+00'),
	('0 */5 * * *', 'Europe/Berlin', '2023-01-01 00:00+00', '2024-01-01 00:00+00'),
	('{"unit": "hour", "every": 3, "at": [":00", ":30:15"]}', 'Europe/Berlin', '2025-03-01 00:00+00', '2025-04-30 00:00+00'),
	('{"unit": "hour", "every": 7, "at": [":59:59"]}', 'Europe/Berlin', '2025-03-02 00:00+00', '2025-11-30 00:00+00'),
	('{"unit": "day", "every": 3, "at": ["02:30", "17:30"]}', 'Europe/Berlin', '1990-01-01 05:00+00', '2026-01-01 00:00+00'),
	('{"unit": "week", "every": 2, "days": [1, 7], "at": "02:30"}', 'Europe/Berlin', '1950-01-01 00:00+00', '2026-01-01 00:00+00'),
	('{"unit": "month", "every": 7, "days": [29, 30, 31], "at": "09:00"}', 'UTC', '1000-01-01 00:00+00', '2026-01-01 00:00+00'),
	('{"unit": "month", "days": [31], "at": ["02:30", "03:00"]}', 'Europe/Berlin', '1500-01-01 00:00+00', '2026-01-01 00:00+00'),
	('{"unit": "year", "every": 3, "months": [2], "days": [29]}', 'UTC', '0001-01-01 00:00+00', '2026-01-01 00:00+00'),
	('{"unit": "workday", "at": "08:00"}', 'Europe/Berlin', '1990-01-01 00:00+00', '2026-01-01 00:00+00'),
	('{"unit": "workday", "every": 3, "at": ["08:00", "16:00"], "calendar": "test_cal"}', 'Europe/Berlin',
	 '2024-06-01 00:00+00', '2026-01-01 00:00+00')
	) AS c(rule, zone, from_at, to_at),
	LATERAL sched._schedule_span(c.rule, c.zone, c.from_at::timestamptz - interval '10 days',
								 c.from_at::timestamptz, c.to_at::timestamptz) span,
	LATERAL (SELECT count(*) AS n, min(r) AS first_at, max(r) AS last_at
			 FROM sched._next_runs(c.rule, c.zone, c.from_at::timestamptz - interval '1 microsecond', 10000,
								   c.from_at::timestamptz - interval '10 days') r
			 WHERE r <= c.to_at::timestamptz) listed
ORDER BY 1, 2;

----------------------------------------------------------------------------
-- errors
----------------------------------------------------------------------------
-- cron
SELECT q, try(q, true) FROM (VALUES
	($$SELECT sched._check_schedule('60 * * * * *', 'UTC')$$),
	($$SELECT sched._check_schedule('0 60 * * *', 'UTC')$$),
	($$SELECT sched._check_schedule('0 0 0 * *', 'UTC')$$),
	($$SELECT sched._check_schedule('0 0 * 13 *', 'UTC')$$),
	($$SELECT sched._check_schedule('0 0 * * 8', 'UTC')$$),
	($$SELECT sched._check_schedule('*/0 * * * *', 'UTC')$$),
	($$SELECT sched._check_schedule('5-2 * * * *', 'UTC')$$),
	($$SELECT sched._check_schedule('* * * *', 'UTC')$$),
	($$SELECT sched._check_schedule('* * * * * * *', 'UTC')$$),
	($$SELECT sched._check_schedule('1,,2 * * * *', 'UTC')$$),
	($$SELECT sched._check_schedule('1, * * * *', 'UTC')$$),
	($$SELECT sched._check_schedule('1x * * * *', 'UTC')$$),
	($$SELECT sched._check_schedule('0 0 * * funday', 'UTC')$$),
	($$SELECT sched._check_schedule('0 0 * * fri-mon', 'UTC')$$),
	($$SELECT sched._check_schedule('0 0 30 2 *', 'UTC')$$),
	($$SELECT sched._check_schedule('0 0 31 4,6 *', 'UTC')$$),
	($$SELECT sched._check_schedule('@reboot', 'UTC')$$),
	($$SELECT sched._check_schedule('   ', 'UTC')$$)
) AS v(q);

-- every N unit
SELECT q, try(q, true) FROM (VALUES
	($$SELECT sched._check_schedule('every 0 seconds', 'UTC')$$),
	($$SELECT sched._check_schedule('every -1 hour', 'UTC')$$),
	($$SELECT sched._check_schedule('every 1.5 hours', 'UTC')$$),
	($$SELECT sched._check_schedule('every 3 fortnights', 'UTC')$$),
	($$SELECT sched._check_schedule('every hour', 'UTC')$$),
	($$SELECT sched._check_schedule('every', 'UTC')$$),
	($$SELECT sched._check_schedule('every 3653 days', 'UTC')$$)
) AS v(q);

-- readable rules (a list may have up to 100 entries)
SELECT sched._check_schedule('{"unit": "month", "days": ' || (SELECT json_agg(1)::text FROM generate_series(1, 100)) || '}', 'UTC') AS days_100;
SELECT q, try(q, true) FROM (VALUES
	($$SELECT sched._check_schedule('{"unit": "day", "colour": "blue"}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "fortnight"}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": 1}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"every": 2}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "month", "days": [0]}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "month", "days": [1, 32]}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "week", "days": [8]}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "week", "days": ["mon"]}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "month", "days": []}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "day", "days": [1]}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "month", "months": [1]}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "year", "months": [2], "days": [30, 31]}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "day", "at": "25:00"}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "day", "at": "9am"}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "hour", "at": "10:15"}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "day", "every": 0}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "day", "every": 1001}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "day", "every": 1.5}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "day", "calendar": "fr"}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "workday", "calendar": "Not-A-Name"}', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "month", "days": ' || (SELECT json_agg(1)::text FROM generate_series(1, 101)) || '}', 'UTC')$$),
	($$SELECT sched._check_schedule('["unit", "day"]', 'UTC')$$),
	($$SELECT sched._check_schedule('{"unit": "day",}', 'UTC')$$)
) AS v(q);

-- time zones, arguments
SELECT q, try(q, true) FROM (VALUES
	($$SELECT sched._check_schedule('@daily', 'Mars/Olympus')$$),
	($$SELECT sched._check_schedule('@daily', '')$$),
	($$SELECT sched._check_schedule(NULL, 'UTC')$$),
	($$SELECT sched._check_schedule('@daily', NULL)$$),
	($$SELECT sched._check_schedule(repeat(' ', 4090) || '@daily', 'UTC')$$),
	($$SELECT sched._check_schedule(repeat(' ', 4091) || '@daily', 'UTC')$$),
	($$SELECT * FROM sched.next_runs('@daily', 'UTC', '2025-01-01', 0)$$),
	($$SELECT * FROM sched.next_runs('@daily', 'UTC', '2025-01-01', 10001)$$),
	($$SELECT * FROM sched.next_runs('@daily', 'UTC', '2025-01-01', NULL)$$),
	($$SELECT * FROM sched.next_runs('@daily', 'UTC', NULL)$$),
	($$SELECT * FROM sched.next_runs('@daily', 'UTC', 'infinity')$$),
	($$SELECT * FROM sched.next_runs('@daily', 'UTC', '2025-01-01', 1, '-infinity')$$),
	($$SELECT sched._schedule_next('@daily', 'UTC', NULL, '2025-01-01')$$),
	($$SELECT sched._schedule_next('@daily', 'UTC', '2025-01-01', 'infinity')$$),
	($$SELECT sched._schedule_span('@daily', 'UTC', '2025-01-01', NULL, '2025-02-01')$$),
	($$SELECT sched._schedule_span('@daily', 'UTC', '2025-01-01', '2025-01-01', 'infinity')$$)
) AS v(q);

DROP FUNCTION local_runs(text, text, timestamptz, int, timestamptz);
DROP FUNCTION dst_runs(text, text, timestamptz, int);
DELETE FROM sched.holidays WHERE calendar = 'test_cal';
RESET datestyle;
RESET timezone;
