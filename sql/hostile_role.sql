-- hostile_role: an ordinary role with a grant on one business type tries to
-- read another type's rows through the views with a leaky function -- one
-- that is cheap enough for the planner to run it before the view's own
-- filter, and raises its argument in a NOTICE.  Every filtering view is a
-- security barrier: the function sees only the rows the view lets through.
-- The role holds USAGE on the schema and SELECT on the views, nothing more:
-- the internal functions the views call are open to every role and answer
-- a direct call only about the types the role may read.
SET timezone = 'UTC';
CREATE ROLE regress_ds_spy NOLOGIN;
SELECT sched.define_biz('spy_mine', ack_timeout => '1 hour');
SELECT sched.define_biz('spy_secret', ack_timeout => '1 hour', rate_limit => 1, burst => 7, max_concurrency => 1);
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
GRANT SELECT ON sched.tasks, sched.schedules, sched.biz_stats, sched.attempts, sched.biz_grants,
	sched.workers, sched.time_pointer TO regress_ds_spy;
-- a delivery of the secret type awaiting acknowledgement: its type is at
-- its max_concurrency, a fact only shared memory has
SELECT sched.add('spy_secret', '2000-01-01', '{"secret": "delivered"}') AS secret_delivered \gset
SELECT wait_until($c$(SELECT state = 'delivered' FROM sched.tasks WHERE id = $c$ || :secret_delivered || $c$)$c$) AS delivered;
SELECT wait_until($c$(SELECT delivered = 1 FROM sched._type_counts('{spy_secret}'))$c$) AS counted;

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
-- SELECT on each view is enough to read every column of it
SELECT biz_type, state, status, payload FROM sched.tasks ORDER BY biz_type, payload::text;
SELECT biz_type, pending, due_now, awaiting_ack, tokens, throttled FROM sched.biz_stats;
SELECT name, biz_type, schedule, next_run_at IS NOT NULL AS next FROM sched.schedules;
SELECT biz_type, http_status, outcome, error FROM sched.attempts;
SELECT biz_type, role, privilege FROM sched.biz_grants;
SELECT count(*) > 0 AS workers, count(DISTINCT role) AS roles FROM sched.workers;
SELECT count(*) > 0 AS pointers FROM sched.time_pointer;
-- Called directly, the functions the views call tell nothing of a type
-- the role holds no grant on: its tasks' counts, its token bucket, whether
-- its deliveries fill its max_concurrency.
SELECT * FROM sched._type_counts('{spy_mine,spy_secret,spy_nope}') ORDER BY biz_type;
SELECT sched._tokens('spy_secret', 1, 7) AS secret_tokens, sched._tokens('spy_mine', 1, 7) AS mine_tokens;
SELECT sched._task_status(1, 'spy_secret', 'r', now(), 0, NULL, 'notify', false, false, 1) AS secret_status,
       sched._task_status(1, 'spy_mine', 'r', now(), 0, NULL, 'notify', false, false, 1) AS mine_status;
-- (and NULLs, which the view never passes, are no crash)
SELECT sched._task_status(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) AS null_status;
RESET ROLE;
-- (what the administrator sees of the same)
SELECT biz_type, delivered FROM sched._type_counts('{spy_mine,spy_secret}') ORDER BY biz_type;
SELECT sched._task_status(1, 'spy_secret', 'r', now(), 0, NULL, 'notify', false, false, 1) AS secret_status;

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
REVOKE ALL ON sched.tasks, sched.schedules, sched.biz_stats, sched.attempts, sched.biz_grants,
	sched.workers, sched.time_pointer FROM regress_ds_spy;
REVOKE ALL ON SCHEMA sched FROM regress_ds_spy;
DROP ROLE regress_ds_spy;
