-- metrics: the numbers in shared memory (sched.metrics(), the gauges behind
-- sched.biz_stats) follow every change of a task, count committed work
-- only, and say the same as a count of the tables.

-- A sample of sched.metrics() by name and labels (NULL if absent).
CREATE FUNCTION metric(name text, labels text) RETURNS numeric
LANGUAGE sql AS $$
	SELECT (regexp_match(sched.metrics(),
		'(?:^|\n)' || name || '\{database="contrib_regression"' ||
		CASE WHEN labels = '' THEN '' ELSE ',' || labels END || '\} ([-0-9.e+]+)(?:\n|$)'))[1]::numeric
$$;

-- What shared memory says and what the tables say of this test's types,
-- where they differ (no rows: they agree).  Called when no task of them is
-- due, so that no worker changes them meanwhile.
CREATE FUNCTION gauges_differ() RETURNS TABLE (source text, biz_type text, pending bigint, ready bigint,
											   delivered bigint, done bigint, dead bigint, cancelled bigint)
LANGUAGE sql AS $$
	WITH memory AS (
		SELECT s.biz_type, s.pending, s.ready, s.delivered, s.done, s.dead, s.cancelled
		FROM sched._type_counts(ARRAY(SELECT k.biz_type FROM sched._task_counts k
									  WHERE k.biz_type LIKE 'm\_%')) s
	), tables AS (
		SELECT k.biz_type, k.pending, k.ready, k.delivered, k.done, k.dead, k.cancelled
		FROM sched._task_counts k WHERE k.biz_type LIKE 'm\_%'
	)
	(SELECT 'shared memory', * FROM memory EXCEPT SELECT 'shared memory', * FROM tables)
	UNION ALL
	(SELECT 'tables', * FROM tables EXCEPT SELECT 'tables', * FROM memory)
$$;

-- Scanner worker 0 counts the gauges when it starts.
SELECT wait_until($$(SELECT bool_and(c.counted) FROM sched._type_counts('{any}') c)$$) AS counted;

SELECT sched.define_biz('m_orders', max_attempts => 2);
SELECT sched.define_biz('m_jobs', 'pull');

-- Adds: one at a time, many, a duplicate by dedupe key (not added).
SELECT sched.add('m_orders', now() - interval '1 second', '{"n": 1}') AS o1 \gset
SELECT sched.add('m_orders', now() - interval '1 second', '{"n": 2}', dedupe_key => 'k2') AS o2 \gset
SELECT sched.add('m_orders', now() - interval '1 second', '{"n": 2}', dedupe_key => 'k2') = :o2 AS same_task;
SELECT sched.add('m_orders', now() + interval '1 hour', '{"n": 3}') AS o3 \gset
SELECT sched.add('m_orders', now() + interval '2 hours', '{"n": 4}') AS o4 \gset
SELECT count(*) AS added_many
FROM sched.add_many('m_orders', ARRAY[now() - interval '1 second', now() - interval '1 second']);
SELECT count(*) AS added_jobs FROM sched.add_many('m_jobs', ARRAY[now(), now(), now() + interval '1 day']);
-- rolled back: not added, whole or in part
BEGIN;
SELECT count(*) AS rolled_back FROM sched.add_many('m_orders', ARRAY[now(), now(), now()]);
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT sched.add('m_orders', now() + interval '1 day') IS NOT NULL AS added_then_undone;
ROLLBACK TO SAVEPOINT s;
SELECT sched.add('m_orders', now() + interval '3 hours') AS o5 \gset
COMMIT;

SELECT metric('delaysched_tasks_added_total', 'biz_type="m_orders"') AS orders_added,
	   metric('delaysched_tasks_added_total', 'biz_type="m_jobs"') AS jobs_added;

-- The scanner delivers the four due orders and announces the two due jobs.
SELECT wait_until($$(SELECT count(*) = 4 FROM sched.task WHERE biz_type = 'm_orders' AND state = 'd')$$) AS delivered;
SELECT wait_announced('m_jobs');
SELECT metric('delaysched_tasks_delivered_total', 'biz_type="m_orders",delivery="notify"') AS notified,
	   metric('delaysched_lateness_seconds_count', 'biz_type="m_orders"') AS first_deliveries,
	   metric('delaysched_lateness_seconds_bucket', 'biz_type="m_orders",le="\+Inf"') AS in_the_inf_bucket,
	   metric('delaysched_lateness_seconds_sum', 'biz_type="m_orders"') >= 4 AS at_least_1s_late_each;
SELECT * FROM gauges_differ();

-- Claims, acknowledgements, nacks, cancels, moves, a retry.
SELECT count(*) AS claimed FROM sched.claim('m_jobs', 1);
SELECT sched.ack(:o1) AS acked;
SELECT sched.ack_many(ARRAY(SELECT id FROM sched.task WHERE biz_type = 'm_orders' AND state = 'd'
							AND id <> :o2 ORDER BY id LIMIT 1)) AS acked_many;
SELECT sched.nack(:o2, '1 hour', 'busy') AS nacked;   -- attempt 1 of 2: pending again, moved
SELECT sched.cancel(:o3) AS cancelled;
SELECT sched.reschedule(:o4, now() + interval '5 hours') AS rescheduled;  -- moved, not added
SELECT sched.reschedule(:o2, now() - interval '1 second') AS due_again;
SELECT wait_until(format('(SELECT state = %L FROM sched.task WHERE id = %s)', 'd', :o2)) AS redelivered;
SELECT sched.nack(:o2, error => 'gave up') AS nacked_to_death;   -- attempt 2 of 2: dead
SELECT sched.retry(:o2) AS retried;
SELECT wait_until(format('(SELECT state = %L FROM sched.task WHERE id = %s)', 'd', :o2)) AS delivered_after_retry;
SELECT * FROM gauges_differ();

SELECT metric('delaysched_tasks_added_total', 'biz_type="m_orders"') AS orders_added,
	   metric('delaysched_tasks_acked_total', 'biz_type="m_orders"') AS acked,
	   metric('delaysched_tasks_nacked_total', 'biz_type="m_orders"') AS nacked,
	   metric('delaysched_tasks_dead_total', 'biz_type="m_orders"') AS dead,
	   metric('delaysched_tasks_cancelled_total', 'biz_type="m_orders"') AS cancelled,
	   metric('delaysched_tasks_delivered_total', 'biz_type="m_jobs",delivery="pull"') AS claimed;

-- The gauges of sched.metrics() and sched.biz_stats, against the tasks.
SELECT metric('delaysched_tasks_pending', 'biz_type="m_orders"') = count(*) FILTER (WHERE state = 'pending') AS pending_right,
	   metric('delaysched_tasks_awaiting_ack', 'biz_type="m_orders"') = count(*) FILTER (WHERE state = 'delivered') AS awaiting_right,
	   metric('delaysched_finished_tasks', 'biz_type="m_orders",state="done"') = count(*) FILTER (WHERE state = 'done') AS done_right,
	   metric('delaysched_tasks_due', 'biz_type="m_orders"') = count(*) FILTER (WHERE state = 'pending' AND run_at <= now()) AS due_right
FROM sched.tasks WHERE biz_type = 'm_orders';
SELECT s.pending = count(*) FILTER (WHERE t.state = 'pending') AS pending_right,
	   s.due_now = count(*) FILTER (WHERE t.state = 'pending' AND t.run_at <= now()) AS due_right,
	   s.awaiting_ack = count(*) FILTER (WHERE t.state = 'delivered') AS awaiting_right,
	   s.done = count(*) FILTER (WHERE t.state = 'done') AS done_right,
	   s.dead = count(*) FILTER (WHERE t.state = 'dead') AS dead_right
FROM sched.biz_stats s JOIN sched.tasks t USING (biz_type)
WHERE s.biz_type IN ('m_orders', 'm_jobs') GROUP BY s.biz_type, s.pending, s.due_now, s.awaiting_ack, s.done, s.dead
ORDER BY s.biz_type;

-- Paused: its due tasks are set aside (parked), which the counter counts.
SELECT sched.pause('m_orders');
SELECT sched.add('m_orders', now() - interval '1 second') AS o6 \gset
SELECT wait_until(format('(SELECT state = %L FROM sched.task WHERE id = %s)', 'r', :o6)) AS parked;
SELECT metric('delaysched_tasks_parked_total', 'biz_type="m_orders"') AS parked_total,
	   metric('delaysched_biz_paused', 'biz_type="m_orders"') AS paused,
	   metric('delaysched_tasks_throttled', 'biz_type="m_orders"') AS throttled_while_paused;
SELECT sched.resume('m_orders');
SELECT wait_until(format('(SELECT state = %L FROM sched.task WHERE id = %s)', 'd', :o6)) AS delivered_after_resume;
SELECT * FROM gauges_differ();

-- Counted again on demand: not ready until scanner worker 0 has, which it
-- cannot while a transaction that added a task holds sched.task.
BEGIN;
SELECT sched.add('m_orders', now() + interval '1 day') IS NOT NULL AS added;
SELECT sched.recount_stats();
SELECT pg_sleep(0.5);  -- time for a count that should not happen
SELECT (SELECT bool_and(c.counted) FROM sched._type_counts('{m_orders}') c) AS counted_while_held;
SELECT metric('delaysched_stats_ready', '') AS ready_metric;
COMMIT;
SELECT wait_until($$(SELECT bool_and(c.counted) FROM sched._type_counts('{m_orders}') c)$$) AS counted;
SELECT * FROM gauges_differ();

-- A dropped type's tasks are cancelled, and counted so.
SELECT sched.drop_biz('m_jobs', cancel_tasks => true) AS jobs_cancelled;
SELECT metric('delaysched_tasks_cancelled_total', 'biz_type="m_jobs"') AS jobs_cancelled_total;
SELECT * FROM gauges_differ();

-- The text exposition format: every line a comment or a sample; each
-- family has its HELP and TYPE; counters end in _total.
SELECT count(*) FILTER (WHERE l !~ '^(# (HELP|TYPE) [a-z_]+ .+|[a-z_]+\{([a-z_]+="([^"\\]|\\.)*",?)+\} -?[0-9.e+]+)$') AS bad_lines,
	   count(*) FILTER (WHERE l ~ '^# TYPE [a-z_]+ counter$' AND l !~ '_total counter$') AS counters_not_total,
	   count(*) FILTER (WHERE l ~ '^# HELP') = count(*) FILTER (WHERE l ~ '^# TYPE') AS help_per_type
FROM regexp_split_to_table(rtrim(sched.metrics(), E'\n'), E'\n') AS l;

-- The same samples as rows (those of this test's types, which no worker
-- changes between the two calls).
SELECT (SELECT string_agg(m.metric || '{database="' || current_database() || '"' ||
						  coalesce(',biz_type="' || m.biz_type || '"', '') ||
						  (SELECT coalesce(string_agg(',' || l.key || '="' || l.value || '"', '' ORDER BY l.ordinality), '')
						   FROM jsonb_each_text(m.labels) WITH ORDINALITY l) ||
						  '} ' || CASE WHEN m.value = round(m.value) THEN round(m.value)::text ELSE to_char(m.value, 'FM999999999990.000000') END,
						  E'\n' ORDER BY m.ordinality)
		FROM sched.metric_samples() WITH ORDINALITY m
		WHERE m.biz_type LIKE 'm\_%') =
	   (SELECT string_agg(l, E'\n') FROM regexp_split_to_table(rtrim(sched.metrics(), E'\n'), E'\n') l
		WHERE l ~ 'biz_type="m_')
	   AS rows_are_the_text;

-- Load control, off by default: the launcher's row of sched.cluster says
-- so and has no figures, the databases' rows none either; its metrics say
-- nothing is held back.  Its settings are the server's (reload), not a
-- session's.
SELECT current_setting('delaysched.load_control') AS load_control,
	   current_setting('delaysched.load_max_slowdown') AS max_slowdown,
	   current_setting('delaysched.load_min_deliveries_per_second') AS min_rate,
	   current_setting('delaysched.load_max_standby_lag') AS max_standby_lag,
	   current_setting('delaysched.load_standbys') AS standbys;
SELECT flow_control, deliveries_per_second IS NULL AS no_rate, deliveries_allowed IS NULL AS no_allowance,
	   busy_sessions IS NULL AND usual_busy_sessions IS NULL AS no_sessions,
	   held_back_by IS NULL AND standby_lag_bytes IS NULL AS no_reason_no_lag
FROM sched.cluster WHERE role = 'launcher';
SELECT bool_and(flow_control IS NULL AND deliveries_allowed IS NULL AND busy_sessions IS NULL
				AND held_back_by IS NULL AND standby_lag_bytes IS NULL) AS databases_rows_have_none
FROM sched.cluster WHERE role = 'database';
SELECT metric('delaysched_load_deliveries_allowed', '') AS allowed_metric,
	   metric('delaysched_load_cuts_total', '') IS NOT NULL AS cuts_metric,
	   metric('delaysched_load_standby_lag_bytes', '') AS lag_metric;
DO $$ BEGIN SET delaysched.load_control = on; EXCEPTION WHEN OTHERS THEN RAISE NOTICE '% (%)', SQLERRM, SQLSTATE; END $$;

-- For pg_monitor, and nobody else.
CREATE ROLE regress_ds_monitor IN ROLE pg_monitor;
CREATE ROLE regress_ds_outsider;
GRANT USAGE ON SCHEMA sched TO regress_ds_outsider;
SET ROLE regress_ds_monitor;
SELECT sched.metrics() LIKE '# HELP delaysched_%' AS monitor_reads,
	   (SELECT count(*) > 0 FROM sched.metric_samples()) AS monitor_reads_rows;
RESET ROLE;
SET ROLE regress_ds_outsider;
SELECT try('SELECT sched.metrics()'), try('SELECT sched.metric_samples()');
RESET ROLE;
REVOKE USAGE ON SCHEMA sched FROM regress_ds_outsider;
DROP ROLE regress_ds_monitor, regress_ds_outsider;

SELECT sched.drop_biz('m_orders', cancel_tasks => true) > 0 AS orders_dropped;
