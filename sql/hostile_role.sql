-- hostile_role: an ordinary role with a grant on one business type tries to
-- read another type's rows through the views with a leaky function -- one
-- that is cheap enough for the planner to run it before the view's own
-- filter, and raises its argument in a NOTICE.  Every filtering view is a
-- security barrier: the function sees only the rows the view lets through.
SET timezone = 'UTC';
CREATE ROLE regress_ds_spy NOLOGIN;
SELECT sched.define_biz('spy_mine', ack_timeout => '1 hour');
SELECT sched.define_biz('spy_secret', ack_timeout => '1 hour');
SELECT sched.add('spy_mine', '2100-01-01', '{"mine": 1}') > 0 AS added;
SELECT sched.add('spy_secret', '2100-01-01', '{"secret": "task"}') > 0 AS added;
SELECT sched.define_schedule('spy_secret_schedule', 'spy_secret', '@yearly', '{"secret": "schedule"}') IS NOT NULL AS defined;
SELECT sched.define_schedule('spy_mine_schedule', 'spy_mine', '@yearly', '{"mine": 2}') IS NOT NULL AS defined;
-- an HTTP attempt of the secret type, as an HTTP worker would record it
INSERT INTO sched.attempt (task_id, attempt, biz_type, started_at, duration, http_status, error, outcome)
VALUES (1, 1, 'spy_secret', now(), '1 ms', 500, 'secret error', 'retry'),
       (2, 1, 'spy_mine', now(), '1 ms', 500, 'mine error', 'retry');
SELECT sched.grant_biz('spy_mine', 'regress_ds_spy', 'read');
GRANT USAGE ON SCHEMA sched TO regress_ds_spy;
GRANT SELECT ON sched.tasks, sched.schedules, sched.biz_stats, sched.attempts TO regress_ds_spy;
GRANT EXECUTE ON FUNCTION sched._tokens(text, float8, int), sched._type_counts(text[]) TO regress_ds_spy;  -- read by sched.biz_stats
GRANT EXECUTE ON FUNCTION sched._task_status TO regress_ds_spy;  -- read by sched.tasks

SET ROLE regress_ds_spy;
CREATE FUNCTION pg_temp.leak(v anyelement) RETURNS boolean
LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN
	RAISE NOTICE 'leaked: %', v;
	RETURN true;
END
$$;
-- Each query sees, and leaks, only spy_mine's rows.
SELECT biz_type, payload FROM sched.tasks WHERE pg_temp.leak(payload) ORDER BY biz_type, payload::text;
SELECT name, payload FROM sched.schedules WHERE pg_temp.leak(payload) ORDER BY name;
SELECT biz_type FROM sched.biz_stats WHERE pg_temp.leak(biz_type) ORDER BY biz_type;
SELECT biz_type, error FROM sched.attempts WHERE pg_temp.leak(error) ORDER BY biz_type;
DROP FUNCTION pg_temp.leak(anyelement);
RESET ROLE;

-- every view that filters by grant is a security barrier
SELECT c.relname, coalesce('security_barrier=true' = ANY (c.reloptions), false) AS barrier
FROM pg_class c
WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind = 'v'
  AND pg_get_viewdef(c.oid) LIKE '%_viewer%' AND c.relname NOT LIKE '\_%'
ORDER BY c.relname;

-- clean up
DELETE FROM sched.attempt WHERE biz_type IN ('spy_mine', 'spy_secret');
SELECT sched.drop_biz('spy_mine', cancel_tasks => true) > 0 AS dropped;
SELECT sched.drop_biz('spy_secret', cancel_tasks => true) > 0 AS dropped;
REVOKE ALL ON sched.tasks, sched.schedules, sched.biz_stats, sched.attempts FROM regress_ds_spy;
REVOKE ALL ON FUNCTION sched._tokens(text, float8, int), sched._type_counts(text[]), sched._task_status FROM regress_ds_spy;
REVOKE ALL ON SCHEMA sched FROM regress_ds_spy;
DROP ROLE regress_ds_spy;
