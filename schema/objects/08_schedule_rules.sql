-------------------------------------------------------------------------------
-- Schedules: the rule engine (src/schedule_*.c)
-------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION sched._check_schedule(schedule text, time_zone text) RETURNS text
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_check_schedule';
COMMENT ON FUNCTION sched._check_schedule(text, text) IS 'internal: refuse a schedule rule or time zone that is not valid; returns the kind of rule (cron, every or rule)';

CREATE OR REPLACE FUNCTION sched._schedule_next(schedule text, time_zone text, anchor timestamptz, after timestamptz)
RETURNS timestamptz
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_schedule_next';
COMMENT ON FUNCTION sched._schedule_next(text, text, timestamptz, timestamptz) IS 'internal: the first firing of a schedule anchored at anchor strictly after after; NULL if none';

CREATE OR REPLACE FUNCTION sched._schedule_span(schedule text, time_zone text, anchor timestamptz,
									 from_at timestamptz, to_at timestamptz,
									 OUT n bigint, OUT first_at timestamptz, OUT last_at timestamptz)
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_schedule_span';
COMMENT ON FUNCTION sched._schedule_span(text, text, timestamptz, timestamptz, timestamptz) IS 'internal: how many firings of a schedule fall in [from_at, to_at], and the first and last of them';

CREATE OR REPLACE FUNCTION sched._next_runs(schedule text, time_zone text, after timestamptz, n int, starts_at timestamptz)
RETURNS SETOF timestamptz
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_next_runs';
COMMENT ON FUNCTION sched._next_runs(text, text, timestamptz, int, timestamptz) IS 'internal: the body of sched.next_runs';

CREATE OR REPLACE FUNCTION sched.next_runs(schedule text, time_zone text DEFAULT 'UTC', after timestamptz DEFAULT pg_catalog.now(),
								n int DEFAULT 10, starts_at timestamptz DEFAULT NULL)
RETURNS SETOF timestamptz
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT sched._next_runs($1, $2, $3, $4, $5) $$;
COMMENT ON FUNCTION sched.next_runs(text, text, timestamptz, int, timestamptz) IS 'preview a schedule rule: its next n firings strictly after after, starting at starts_at (NULL: at after); no side effect';
