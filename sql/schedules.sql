-- schedules: define, replace, pause, resume and drop recurring schedules;
-- their firings are ordinary tasks that name the schedule; bad input is
-- refused and changes nothing; per-type grants decide who may schedule.
-- (The rule syntax and the firing instants are in schedule_rules.)
-- try() (from setup) prints "SQLSTATE: message [DETAIL: ...] [HINT: ...]".
SET timezone = 'UTC';

SELECT sched.define_biz('sch_notify', ack_timeout => '1 hour');
SELECT sched.define_biz('sch_pull', 'pull', ack_timeout => '1 hour');
SELECT sched.define_biz('sch_other');

-- a schedule returns its first firing, strictly after now without starts_at
SELECT sched.define_schedule('sch_hourly', 'sch_notify', 'every 1 hour', '{"report": "hourly"}')
       BETWEEN clock_timestamp() + interval '59 minutes' AND clock_timestamp() + interval '1 hour' AS first_in_an_hour;

-- with starts_at: the first firing at or after it
SELECT sched.define_schedule('sch_daily', 'sch_notify', '0 18 * * *', time_zone => 'Asia/Shanghai',
                             starts_at => '2100-03-23 18:00+08') AS first_firing;
SELECT sched.define_schedule('sch_seed', 'sch_notify',
                             '{"every": 2, "unit": "month", "days": [3, 5, 23], "at": "18:00"}',
                             time_zone => 'Asia/Shanghai', starts_at => '2100-03-23 17:00+08',
                             catch_up => 'all', allow_overlap => false) AS first_firing;
-- the next firing lies beyond ends_at: none is made
SELECT sched.define_schedule('sch_ended', 'sch_notify', '@yearly',
                             starts_at => '2100-03-01', ends_at => '2100-06-01') AS first_firing;

-- the view: every column, and the pending firing of each
SELECT name, biz_type, schedule, time_zone, catch_up, allow_overlap, paused, starts_at, ends_at,
       next_run_at IS NOT NULL AS has_next, last_run_at, last_task_id, runs, missed, payload
FROM sched.schedules ORDER BY name;
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'sched.schedules'::regclass AND attnum > 0 ORDER BY attnum;

-- each schedule has exactly one pending firing, a task of its type that names it
SELECT s.name, count(t.id) AS pending, bool_and(t.run_at = s.next_run_at) AS at_next_run,
       bool_and(t.biz_type = s.biz_type) AS of_its_type, bool_and(t.payload = s.payload) AS its_payload
FROM sched.schedules s LEFT JOIN sched.tasks t ON t.schedule = s.name AND t.state = 'pending'
GROUP BY s.name ORDER BY s.name;

-- replacing a schedule cancels its firing and makes a new one
SELECT id AS old_firing FROM sched.tasks WHERE schedule = 'sch_daily' AND state = 'pending' \gset
SELECT sched.define_schedule('sch_daily', 'sch_notify', '30 9 * * mon-fri', time_zone => 'Europe/Berlin',
                             starts_at => '2100-03-23') AS replaced_first_firing;
SELECT state, last_error FROM sched.tasks WHERE id = :old_firing;
SELECT count(*) AS pending FROM sched.tasks WHERE schedule = 'sch_daily' AND state = 'pending';
SELECT schedule, time_zone, next_run_at FROM sched.schedules WHERE name = 'sch_daily';

-- pause: the firing is cancelled and nothing is pending; twice is false
SELECT sched.pause_schedule('sch_daily') AS paused, sched.pause_schedule('sch_daily') AS again;
SELECT paused, next_run_at FROM sched.schedules WHERE name = 'sch_daily';
SELECT count(*) AS pending FROM sched.tasks WHERE schedule = 'sch_daily' AND state = 'pending';
-- replacing a paused schedule keeps it paused
SELECT sched.define_schedule('sch_daily', 'sch_notify', '30 9 * * mon-fri', time_zone => 'Europe/Berlin',
                             starts_at => '2100-03-23') AS first_firing;
SELECT paused FROM sched.schedules WHERE name = 'sch_daily';
SELECT count(*) AS pending FROM sched.tasks WHERE schedule = 'sch_daily' AND state = 'pending';
-- resume: nothing was missed (the firing lies ahead), so that one is made again
SELECT sched.resume_schedule('sch_daily') AS resumed, sched.resume_schedule('sch_daily') AS again;
SELECT paused, next_run_at, missed FROM sched.schedules WHERE name = 'sch_daily';
SELECT run_at FROM sched.tasks WHERE schedule = 'sch_daily' AND state = 'pending';

-- a firing delivered (here claimed from a pull type) makes the next one in
-- the same transaction, and the claim shows which schedule made it
SELECT sched.define_schedule('sch_pulled', 'sch_pull', 'every 1 hour',
                             starts_at => '2100-01-01 00:00+00') AS first_firing;
SELECT sched.reschedule(id, '2000-01-01 00:00+00') AS moved
FROM sched.tasks WHERE schedule = 'sch_pulled' AND state = 'pending';
SELECT wait_announced('sch_pull');
BEGIN;
SELECT run_at, payload, attempt, schedule FROM sched.claim('sch_pull');
SELECT run_at, state FROM sched.tasks WHERE schedule = 'sch_pulled' ORDER BY run_at;
SELECT runs, missed, last_run_at, next_run_at FROM sched.schedules WHERE name = 'sch_pulled';
COMMIT;
-- cancelling the pending firing counts it as missed and makes the next
SELECT sched.cancel(id) AS cancelled FROM sched.tasks WHERE schedule = 'sch_pulled' AND state = 'pending';
SELECT runs, missed, next_run_at FROM sched.schedules WHERE name = 'sch_pulled';
SELECT run_at, state FROM sched.tasks WHERE schedule = 'sch_pulled' ORDER BY run_at;

-- allow_overlap => false: a firing due while the previous one is unfinished
-- (claimed, not acknowledged) is skipped and counted missed; the next is made
SELECT sched.define_biz('sch_once', 'pull', ack_timeout => '1 hour');
SELECT sched.define_schedule('sch_single', 'sch_once', 'every 1 hour', starts_at => '2100-01-01 00:00+00',
                             allow_overlap => false) AS first_firing;
SELECT sched.reschedule(id, '2000-01-01 00:00+00') AS moved
FROM sched.tasks WHERE schedule = 'sch_single' AND state = 'pending';
SELECT wait_announced('sch_once');
SELECT id AS first_claimed, run_at FROM sched.claim('sch_once') \gset
SELECT sched.reschedule(id, '2000-01-01 00:00:01+00') AS moved
FROM sched.tasks WHERE schedule = 'sch_single' AND state = 'pending';
SELECT wait_announced('sch_once');
SELECT count(*) AS claimed_while_unfinished FROM sched.claim('sch_once');
SELECT run_at, state, last_error ~ 'is unfinished and allow_overlap is false' AS overlap_skip
FROM sched.tasks WHERE schedule = 'sch_single' ORDER BY run_at;
SELECT runs, missed, next_run_at FROM sched.schedules WHERE name = 'sch_single';
-- once the first is acknowledged, the next firing goes out
SELECT sched.ack(:first_claimed) AS acked;
SELECT sched.reschedule(id, '2000-01-01 00:00:02+00') AS moved
FROM sched.tasks WHERE schedule = 'sch_single' AND state = 'pending';
SELECT wait_announced('sch_once');
SELECT run_at, schedule FROM sched.claim('sch_once');
SELECT runs, missed FROM sched.schedules WHERE name = 'sch_single';
SELECT sched.drop_biz('sch_once', cancel_tasks => true) AS dropped_unfinished;

-- catch_up 'latest' when a firing waits (here for a pull consumer) past the
-- next instant: the stale firing is skipped and the latest instant due is
-- made at once; that one goes out however late it is claimed, so a
-- consumer slower than the period still gets firings.  (The sleeps are the
-- scenario: a consumer that comes late.)
SELECT sched.define_biz('sch_slow', 'pull', ack_timeout => '1 hour');
SELECT sched.define_schedule('sch_every_second', 'sch_slow', 'every 1 second', starts_at => '2000-01-01')
       > now() AS first_ahead;
SELECT pg_sleep(2.2);
SELECT wait_announced('sch_slow');
SELECT count(*) AS claimed_stale FROM sched.claim('sch_slow');
SELECT state, last_error FROM sched.tasks WHERE schedule = 'sch_every_second' AND state = 'cancelled';
SELECT count(*) AS pending, bool_and(run_at <= created_at) AS made_late
FROM sched.tasks WHERE schedule = 'sch_every_second' AND state = 'pending';
SELECT pg_sleep(1.2);
SELECT wait_announced('sch_slow');
SELECT count(*) AS claimed_late_catch_up FROM sched.claim('sch_slow');
SELECT runs, missed >= 1 AS missed_some FROM sched.schedules WHERE name = 'sch_every_second';
SELECT sched.drop_biz('sch_slow', cancel_tasks => true) > 0 AS dropped;

-- catch_up 'all': the firings of a catch-up batch claimed together each
-- count as a run, and last_task_id is the latest of them.  The pending
-- firing is moved back to the schedule's first instant, three and a half
-- hours ago; claiming it makes the three instants due since as one batch.
SELECT sched.define_biz('sch_batch', 'pull', ack_timeout => '1 hour');
SELECT sched.define_schedule('sch_all', 'sch_batch', 'every 1 hour', catch_up => 'all',
                             starts_at => date_trunc('second', now()) - interval '3 hours 30 minutes')
       > now() AS first_ahead;
SELECT sched.reschedule(t.id, s.starts_at) AS moved
FROM sched.tasks t JOIN sched.schedules s ON s.name = t.schedule
WHERE t.schedule = 'sch_all' AND t.state = 'pending';
SELECT wait_announced('sch_batch');
SELECT count(*) AS claimed_first FROM sched.claim('sch_batch');
SELECT count(*) AS batch_due FROM sched.tasks
WHERE schedule = 'sch_all' AND state = 'pending' AND run_at <= now();
SELECT wait_announced('sch_batch');
SELECT count(*) AS claimed_batch FROM sched.claim('sch_batch');
SELECT s.runs, s.missed, s.last_task_id = t.id AS last_is_latest, s.last_run_at = t.run_at AS last_run_at_latest,
       s.next_run_at > now() AS next_ahead
FROM sched.schedules s,
     LATERAL (SELECT x.id, x.run_at FROM sched.tasks x WHERE x.schedule = s.name AND x.state = 'delivered'
              ORDER BY x.run_at DESC LIMIT 1) t
WHERE s.name = 'sch_all';
SELECT count(*) AS pending, bool_and(run_at > now()) AS ahead FROM sched.tasks
WHERE schedule = 'sch_all' AND state = 'pending';
SELECT sched.drop_biz('sch_batch', cancel_tasks => true) > 0 AS dropped;

-- the NOTIFY message and webhook body of a firing name the schedule
SELECT sched._message(42, 'sch_notify', '2100-01-01 00:00+00', '{"n": 1}', 1, 'sch_hourly');
SELECT sched._message(42, 'sch_notify', '2100-01-01 00:00+00', jsonb_build_object('big', repeat('x', 9000)), 1, 'sch_hourly');

-- drop: its pending firing is cancelled; false for a schedule that is not there
SELECT sched.drop_schedule('sch_ended') AS dropped, sched.drop_schedule('sch_ended') AS again;
SELECT sched.drop_schedule('sch_hourly') AS dropped;
SELECT state, last_error FROM sched.tasks WHERE schedule = 'sch_hourly';

-- a type with schedules cannot be dropped unless told to cancel
SELECT try($$SELECT sched.drop_biz('sch_pull')$$, true);
SELECT try($$SELECT sched.drop_biz('sch_pull', cancel_tasks => true) IS NOT NULL$$);
SELECT count(*) AS left_over FROM sched.schedules WHERE biz_type = 'sch_pull';
SELECT count(*) AS unfinished FROM sched.tasks WHERE biz_type = 'sch_pull' AND finished_at IS NULL;

-- bad input: each refused, nothing stored
CREATE TEMP TABLE sch_fingerprint AS
SELECT (SELECT string_agg(format('%s %s %s %s %s %s', name, biz_type, rule, time_zone, catch_up, task_id),
                          ', ' ORDER BY name) FROM sched.schedule) AS schedules,
       (SELECT count(*) FROM sched.task) AS tasks,
       (SELECT count(*) FROM sched.finished) AS finished;
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.define_schedule(NULL, 'sch_notify', '@daily')$$),
  ($$SELECT sched.define_schedule('sch_x', NULL, '@daily')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', NULL)$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '@daily', NULL)$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '@daily', time_zone => NULL)$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '@daily', catch_up => NULL)$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '@daily', allow_overlap => NULL)$$),
  ($$SELECT sched.define_schedule('Sch X', 'sch_notify', '@daily')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_nope', '@daily')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '*/0 * * * *')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '60 * * * * *')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', 'every 0 seconds')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', 'every -1 hour')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '{"unit": "day", "at": "25:00"}')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '{"unit": "month", "days": [32]}')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '{"unit": "day", "colour": "red"}')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '@daily', time_zone => 'Mars/Olympus')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '@daily', catch_up => 'some')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '@daily', starts_at => '2100-02-01', ends_at => '2100-01-01')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '@daily', starts_at => 'infinity')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '@daily', ends_at => 'infinity')$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', '@daily', jsonb_build_object('big', repeat('x', 1100000)))$$),
  ($$SELECT sched.define_schedule('sch_x', 'sch_notify', repeat('*', 5000))$$),
  ($$SELECT sched.pause_schedule(NULL)$$),
  ($$SELECT sched.pause_schedule('sch_nope')$$),
  ($$SELECT sched.resume_schedule('sch_nope')$$),
  ($$SELECT sched.drop_schedule(NULL)$$)
) AS v(q);
-- replacing a schedule with a bad rule leaves the old one as it was
SELECT try($$SELECT sched.define_schedule('sch_daily', 'sch_notify', '0 0 30 2 *')$$);
SELECT (SELECT string_agg(format('%s %s %s %s %s %s', name, biz_type, rule, time_zone, catch_up, task_id),
                          ', ' ORDER BY name) FROM sched.schedule) = f.schedules AS schedules_unchanged,
       (SELECT count(*) FROM sched.task) = f.tasks AS tasks_unchanged,
       (SELECT count(*) FROM sched.finished) = f.finished AS finished_unchanged
FROM sch_fingerprint f;

-- per-type grants: a role may define schedules only onto the types it may schedule
CREATE ROLE regress_ds_sch NOLOGIN;
GRANT USAGE ON SCHEMA sched TO regress_ds_sch;
GRANT EXECUTE ON FUNCTION sched.define_schedule(text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean, text, int),
                          sched.drop_schedule(text, text), sched.pause_schedule(text, text),
                          sched.resume_schedule(text, text)
      TO regress_ds_sch;
GRANT SELECT ON sched.schedules TO regress_ds_sch;
SET ROLE regress_ds_sch;
SELECT try($$SELECT sched.define_schedule('sch_app', 'sch_other', '@daily')$$);
SELECT try($$SELECT sched.pause_schedule('sch_daily')$$);
SELECT try($$SELECT sched.drop_schedule('sch_daily')$$);
SELECT name FROM sched.schedules;
RESET ROLE;
SELECT sched.grant_biz('sch_other', 'regress_ds_sch');
SET ROLE regress_ds_sch;
SELECT sched.define_schedule('sch_app', 'sch_other', '@daily') IS NOT NULL AS defined;
-- (a name sch_notify has is another schedule in sch_other: no conflict)
SELECT try($$SELECT sched.define_schedule('sch_daily', 'sch_other', '@daily')$$);
SELECT sched.pause_schedule('sch_app') AS paused, sched.resume_schedule('sch_app') AS resumed;
SELECT name, biz_type FROM sched.schedules ORDER BY name;
SELECT sched.drop_schedule('sch_app') AS dropped, sched.drop_schedule('sch_daily') AS dropped_its_own;
RESET ROLE;
SELECT sched.revoke_biz('sch_other', 'regress_ds_sch');
REVOKE ALL ON SCHEMA sched FROM regress_ds_sch;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA sched FROM regress_ds_sch;
REVOKE ALL ON sched.schedules FROM regress_ds_sch;
DROP ROLE regress_ds_sch;

-- names are per business type (issue 32): two roles, each allowed to
-- schedule one type, both define "sch_nightly", and each works on its own:
-- fired, counted, paused, resumed and dropped, its firings cancelled, each
-- under its own schedule
-- (answer(): a statement's value, or its error as try() gives it, with the detail)
CREATE FUNCTION pg_temp.answer(q text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	v text; st text; msg text; det text; hnt text;
BEGIN
	EXECUTE q INTO v;
	RETURN coalesce(v, 'NULL');
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
	RETURN st || ': ' || msg || coalesce(' DETAIL: ' || nullif(det, ''), '') || coalesce(' HINT: ' || nullif(hnt, ''), '');
END
$$;
SELECT sched.define_biz('sch_team_a', 'pull', ack_timeout => '1 hour');
SELECT sched.define_biz('sch_team_b', 'pull', ack_timeout => '1 hour');
CREATE ROLE regress_ds_team_a NOLOGIN;
CREATE ROLE regress_ds_team_b NOLOGIN;
GRANT USAGE ON SCHEMA sched TO regress_ds_team_a, regress_ds_team_b;
GRANT EXECUTE ON FUNCTION sched.define_schedule(text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean, text, int),
                          sched.drop_schedule(text, text), sched.pause_schedule(text, text),
                          sched.resume_schedule(text, text)
      TO regress_ds_team_a, regress_ds_team_b;
GRANT SELECT ON sched.schedules TO regress_ds_team_a, regress_ds_team_b;
SELECT sched.grant_biz('sch_team_a', 'regress_ds_team_a'), sched.grant_biz('sch_team_b', 'regress_ds_team_b');
SET ROLE regress_ds_team_a;
SELECT sched.define_schedule('sch_nightly', 'sch_team_a', '0 3 * * *', '{"team": "a"}') > now() AS defined;
SET ROLE regress_ds_team_b;
SELECT sched.define_schedule('sch_nightly', 'sch_team_b', '0 4 * * *', '{"team": "b"}') > now() AS defined;
SELECT sched.define_schedule('sch_only_b', 'sch_team_b', '@daily') > now() AS defined;
SELECT name, biz_type, schedule FROM sched.schedules ORDER BY name;
RESET ROLE;
SELECT name, biz_type, schedule, payload FROM sched.schedules WHERE biz_type LIKE 'sch_team_%' ORDER BY name, biz_type;
-- each firing, due now, is claimed from its own type and counted by its own schedule
-- (holding every range's pointer row, so that no scanner holds a firing's
-- row, making it claimable, at the moment of a claim, which would skip it)
BEGIN;
SELECT count(*) > 0 AS holding FROM (SELECT FROM sched.pointer ORDER BY range_id FOR UPDATE) AS p;
SELECT sched.reschedule(id, now()) AS due FROM sched.tasks WHERE schedule = 'sch_nightly' ORDER BY biz_type;
SELECT biz_type, schedule, payload FROM sched.claim('sch_team_a');
SELECT biz_type, runs, last_task_id IS NOT NULL AS fired FROM sched.schedules WHERE name = 'sch_nightly' ORDER BY biz_type;
SELECT biz_type, schedule, payload FROM sched.claim('sch_team_b');
SELECT biz_type, runs, last_task_id IS NOT NULL AS fired FROM sched.schedules WHERE name = 'sch_nightly' ORDER BY biz_type;
COMMIT;
-- team a pauses and resumes its own, by name alone: team b's stays as it was
SET ROLE regress_ds_team_a;
SELECT sched.pause_schedule('sch_nightly') AS paused;
RESET ROLE;
SELECT biz_type, paused, next_run_at IS NOT NULL AS next FROM sched.schedules WHERE name = 'sch_nightly' ORDER BY biz_type;
SELECT biz_type, state, last_error FROM sched.tasks
WHERE schedule = 'sch_nightly' AND finished_at IS NOT NULL ORDER BY biz_type, id;
SELECT biz_type, count(*) AS pending FROM sched.tasks
WHERE schedule = 'sch_nightly' AND state = 'pending' GROUP BY biz_type ORDER BY biz_type;
SET ROLE regress_ds_team_a;
SELECT sched.resume_schedule('sch_nightly') AS resumed;
-- a name that exists only under a type the role may not change is
-- answered exactly as a name that exists nowhere (the name aside)
SELECT q, pg_temp.answer(format(q, 'sch_only_b')) AS theirs,
       replace(pg_temp.answer(format(q, 'sch_only_b')), 'sch_only_b', 'sch_nowhere')
         = pg_temp.answer(format(q, 'sch_nowhere')) AS same_as_nowhere
FROM (VALUES ('SELECT sched.drop_schedule(%L)'),
             ('SELECT sched.pause_schedule(%L)'),
             ('SELECT sched.resume_schedule(%L)'),
             ('SELECT sched.drop_schedule(%L, ''sch_team_b'')'),
             ('SELECT sched.pause_schedule(%L, ''sch_team_b'')'),
             ('SELECT sched.resume_schedule(%L, ''sch_team_b'')')) AS v(q);
-- (and the name is free in its own type)
SELECT sched.define_schedule('sch_only_b', 'sch_team_a', '@daily') > now() AS defined;
SELECT sched.drop_schedule('sch_only_b') AS dropped, sched.drop_schedule('sch_only_b', 'sch_team_a') AS again;
RESET ROLE;
SELECT biz_type, paused, runs FROM sched.schedules WHERE name = 'sch_only_b';
-- a name two types the caller may change both have: it must say which
SELECT try($$SELECT sched.drop_schedule('sch_nightly')$$, true);
SELECT try($$SELECT sched.pause_schedule('sch_nightly')$$, true);
SELECT sched.pause_schedule('sch_nightly', 'sch_team_b') AS paused,
       sched.resume_schedule('sch_nightly', 'sch_team_b') AS resumed;
-- team b drops its own: team a's stays, with its pending firing
SET ROLE regress_ds_team_b;
SELECT sched.drop_schedule('sch_nightly') AS dropped, sched.drop_schedule('sch_nightly') AS again;
RESET ROLE;
SELECT name, biz_type, paused, runs FROM sched.schedules WHERE biz_type LIKE 'sch_team_%' ORDER BY name, biz_type;
SELECT biz_type, state, last_error FROM sched.tasks
WHERE schedule = 'sch_nightly' AND (finished_at IS NULL OR last_error LIKE 'schedule_%') ORDER BY biz_type, id;
SELECT sched.drop_schedule('sch_nightly') AS dropped;
-- the scanner delivers the firings of two same-named schedules of two
-- types (in the same statements), and each schedule counts its own
SELECT sched.define_biz('sch_tick_a'), sched.define_biz('sch_tick_b');
SELECT sched.define_schedule('sch_every', 'sch_tick_a', 'every 1 second', '{"tick": "a"}') > now() AS defined,
       sched.define_schedule('sch_every', 'sch_tick_b', 'every 1 second', '{"tick": "b"}') > now() AS defined;
SELECT wait_until($$(SELECT count(*) FROM sched.schedules WHERE name = 'sch_every' AND runs >= 3) = 2$$);
SELECT sched.drop_schedule('sch_every', 'sch_tick_a') AS dropped_a;
-- (b's pending firing is made in the transaction that delivers the one before)
SELECT s.biz_type, EXISTS (SELECT FROM sched.tasks t WHERE t.id = s.next_task AND t.state = 'pending') AS pending
FROM (SELECT x.biz_type, (SELECT y.task_id FROM sched.schedule y WHERE y.name = x.name AND y.biz_type = x.biz_type) AS next_task
      FROM sched.schedules x WHERE x.name = 'sch_every') s;
SELECT sched.drop_schedule('sch_every') AS dropped_b;
-- (a firing held by a delivery at the drop is cancelled once delivered)
SELECT wait_until($$NOT EXISTS (SELECT FROM sched.tasks t WHERE t.schedule = 'sch_every' AND t.state = 'pending')$$);
SELECT count(*) AS crossed FROM sched.tasks t WHERE t.schedule = 'sch_every' AND t.payload->>'tick' <> right(t.biz_type, 1);
SELECT sched.drop_biz('sch_tick_a', cancel_tasks => true) >= 0 AS dropped,
       sched.drop_biz('sch_tick_b', cancel_tasks => true) >= 0 AS dropped;
-- and the HTTP workers' claim (their statement called here: this instance
-- runs no HTTP worker) counts each firing under its own schedule
SELECT sched.define_biz('sch_hook_a', 'http', url => 'http://127.0.0.1:9/a'),
       sched.define_biz('sch_hook_b', 'http', url => 'http://127.0.0.1:9/b');
SELECT sched.define_schedule('sch_hook', 'sch_hook_a', '@daily') > now() AS defined,
       sched.define_schedule('sch_hook', 'sch_hook_b', '@daily') > now() AS defined;
SELECT sched.reschedule(id, now()) AS due FROM sched.tasks WHERE schedule = 'sch_hook' ORDER BY biz_type;
SELECT wait_until($$(SELECT count(*) FROM sched.task WHERE schedule = 'sch_hook' AND state = 'r') = 2$$);
SELECT biz_type, schedule FROM sched._http_claim(5::smallint, 10, 100, '{}', '{}') ORDER BY biz_type;
SELECT biz_type, runs, next_run_at > now() AS next_made FROM sched.schedules WHERE name = 'sch_hook' ORDER BY biz_type;
SELECT sched.drop_biz('sch_hook_a', cancel_tasks => true) > 0 AS dropped,
       sched.drop_biz('sch_hook_b', cancel_tasks => true) > 0 AS dropped;
SELECT sched.drop_biz('sch_team_a', cancel_tasks => true) > 0 AS dropped,
       sched.drop_biz('sch_team_b', cancel_tasks => true) > 0 AS dropped;
REVOKE ALL ON SCHEMA sched FROM regress_ds_team_a, regress_ds_team_b;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA sched FROM regress_ds_team_a, regress_ds_team_b;
REVOKE ALL ON sched.schedules FROM regress_ds_team_a, regress_ds_team_b;
DROP ROLE regress_ds_team_a;
DROP ROLE regress_ds_team_b;

-- a firing moved into the far past (issue 32): its delivery counts the
-- firings missed since then without walking them, in milliseconds (it
-- took minutes, holding the delivering scanner), and exactly: under
-- 'latest' every second since 4713 BC but the latest is missed
SELECT sched.define_biz('sch_past', 'pull', ack_timeout => '1 hour');
SELECT sched.define_schedule('sch_ancient', 'sch_past', '* * * * * *', time_zone => 'Europe/Berlin',
                             starts_at => '4713-01-01 00:00+00 BC') > now() AS defined;
SELECT sched.define_schedule('sch_ancient_none', 'sch_past', '{"unit": "hour", "at": [":00", ":30"]}',
                             time_zone => 'Europe/Berlin', catch_up => 'none',
                             starts_at => '4713-01-01 00:00+00 BC') > now() AS defined;
SELECT sched.reschedule(id, '4713-01-01 00:00+00 BC') AS moved
FROM sched.tasks WHERE schedule IN ('sch_ancient', 'sch_ancient_none') AND state = 'pending';
SELECT wait_announced('sch_past');
SET statement_timeout = '5s';
SELECT schedule, run_at FROM sched.claim('sch_past', 10) ORDER BY schedule;
RESET statement_timeout;
SELECT name, runs, next_run_at <= now() AS made_due,
       missed = extract(epoch FROM next_run_at - '4713-01-01 00:00+00 BC') - 1 AS missed_every_second_but_one
FROM sched.schedules WHERE name = 'sch_ancient';
SELECT name, runs, next_run_at > now() AS ahead,
       missed = (SELECT s.n FROM sched._schedule_span(x.schedule, x.time_zone, x.starts_at, '4713-01-01 00:00:01+00 BC',
                                                      x.next_run_at - interval '1 microsecond') s) AS missed_all
FROM sched.schedules x WHERE name = 'sch_ancient_none';
SELECT sched.drop_biz('sch_past', cancel_tasks => true) > 0 AS dropped;

-- clean up
SELECT sched.drop_biz('sch_notify', cancel_tasks => true) >= 0 AS dropped;
SELECT sched.drop_biz('sch_other', cancel_tasks => true) >= 0 AS dropped;
SELECT count(*) AS schedules_left FROM sched.schedule;
