-------------------------------------------------------------------------------
-- Statistics (src/stats*.c, src/metrics.c): counters and gauges per business
-- type in shared memory, kept by the triggers below and sched._tally(),
-- read by sched.metrics() and sched.biz_stats.  See doc/monitoring.md.
-------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION sched._stats_trigger() RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'delaysched_stats_trigger';
COMMENT ON FUNCTION sched._stats_trigger() IS 'internal: count a change of a task, a finished task, an HTTP attempt or a business type in the transaction''s tally';

CREATE OR REPLACE FUNCTION sched._tally(biz_type text, event text, n bigint) RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_tally_sql';
COMMENT ON FUNCTION sched._tally(text, text, bigint) IS 'internal: count n events (added, nacked, ack_timeout) of a type, at commit';

CREATE OR REPLACE FUNCTION sched._type_counts(biz_types text[], OUT biz_type text, OUT pending bigint,
								   OUT ready bigint, OUT delivered bigint, OUT done bigint,
								   OUT dead bigint, OUT cancelled bigint, OUT counted boolean)
RETURNS SETOF record
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_type_counts_sql';
COMMENT ON FUNCTION sched._type_counts(text[]) IS 'internal: the tasks by state of the given types, from shared memory; counted is false while the gauges are not ready';

CREATE OR REPLACE FUNCTION sched.recount_stats() RETURNS void
LANGUAGE c VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'delaysched_recount_stats_sql';
COMMENT ON FUNCTION sched.recount_stats() IS 'count this database''s task gauges again (after something bypassed the triggers that keep them)';

CREATE OR REPLACE FUNCTION sched.metrics() RETURNS text
LANGUAGE c VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'delaysched_metrics_sql';
COMMENT ON FUNCTION sched.metrics() IS 'this database''s delaysched counters, gauges and histograms in Prometheus''s text format';

CREATE OR REPLACE FUNCTION sched._task_status(id bigint, biz_type text, state "char", run_at timestamptz,
								   attempt int, lease_until timestamptz, delivery text, paused boolean,
								   rate_limited boolean, max_concurrency int)
RETURNS text
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_task_status_sql';
COMMENT ON FUNCTION sched._task_status(bigint, text, "char", timestamptz, int, timestamptz, text, boolean, boolean, int) IS 'internal: where an unfinished task is and why (sched.tasks.status)';

CREATE OR REPLACE FUNCTION sched.metric_samples(OUT family text, OUT metric text, OUT biz_type text,
									 OUT labels jsonb, OUT value float8)
RETURNS SETOF record
LANGUAGE c VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'delaysched_metric_samples_sql';
COMMENT ON FUNCTION sched.metric_samples() IS 'the samples of sched.metrics() as rows: family, metric, business type, other labels, value';

-- AFTER ROW, so as not to lock each row first (stats_tally.c).
CREATE OR REPLACE TRIGGER stats AFTER INSERT OR DELETE OR UPDATE OF state, attempt, bucket ON sched.task
	FOR EACH ROW EXECUTE FUNCTION sched._stats_trigger('task');
CREATE OR REPLACE TRIGGER stats_truncate BEFORE TRUNCATE ON sched.task
	FOR EACH STATEMENT EXECUTE FUNCTION sched._stats_trigger('task');
CREATE OR REPLACE TRIGGER stats AFTER INSERT OR DELETE ON sched.finished
	FOR EACH ROW EXECUTE FUNCTION sched._stats_trigger('finished');
CREATE OR REPLACE TRIGGER stats_truncate BEFORE TRUNCATE ON sched.finished
	FOR EACH STATEMENT EXECUTE FUNCTION sched._stats_trigger('finished');
CREATE OR REPLACE TRIGGER stats AFTER INSERT ON sched.attempt
	FOR EACH ROW EXECUTE FUNCTION sched._stats_trigger('attempt');
CREATE OR REPLACE TRIGGER stats AFTER INSERT OR UPDATE OF delivery ON sched.biz
	FOR EACH ROW EXECUTE FUNCTION sched._stats_trigger('biz');

/*
 * Every type's tasks by state, counted from the tables: what the gauges
 * start from (stats_recount.c), and what is read while they are not ready.
 */
CREATE OR REPLACE VIEW sched._task_counts AS
	SELECT u.biz_type, max(u.delivery) AS delivery,
		   sum(u.pending)::bigint AS pending, sum(u.ready)::bigint AS ready,
		   sum(u.delivered)::bigint AS delivered, sum(u.done)::bigint AS done,
		   sum(u.dead)::bigint AS dead, sum(u.cancelled)::bigint AS cancelled
	FROM (SELECT t.biz_type, NULL::text AS delivery,
				 count(*) FILTER (WHERE t.state = 'p') AS pending,
				 count(*) FILTER (WHERE t.state = 'r') AS ready,
				 count(*) FILTER (WHERE t.state = 'd') AS delivered,
				 0 AS done, 0 AS dead, 0 AS cancelled
		  FROM sched.task t GROUP BY t.biz_type
		  UNION ALL
		  SELECT f.biz_type, NULL, 0, 0, 0,
				 count(*) FILTER (WHERE f.state = 'done'),
				 count(*) FILTER (WHERE f.state = 'dead'),
				 count(*) FILTER (WHERE f.state = 'cancelled')
		  FROM sched.finished f GROUP BY f.biz_type
		  UNION ALL
		  SELECT b.name, b.delivery, 0, 0, 0, 0, 0, 0 FROM sched.biz b) u
	GROUP BY u.biz_type;
COMMENT ON VIEW sched._task_counts IS 'internal: every type''s tasks by state, counted from the tables';

/*
 * Every defined type's tasks by state: from shared memory when the gauges
 * are ready, or counted from the tables while they are not (after a server
 * start, on a standby).  Both branches test the one answer of
 * sched._type_counts(); the second is a one-time filter, so the tables
 * are not read when the gauges are ready.  sched.biz_stats reads it: the
 * function runs as the role reading that view, and answers only about the
 * types that role may read, the rows the view shows it.
 */
CREATE OR REPLACE VIEW sched._counts AS
	WITH c AS MATERIALIZED (
		SELECT * FROM sched._type_counts(ARRAY(SELECT b.name FROM sched.biz b))
	)
	SELECT c.biz_type, c.pending, c.ready, c.delivered, c.done, c.dead, c.cancelled
	FROM c WHERE c.counted
	UNION ALL
	SELECT k.biz_type, k.pending, k.ready, k.delivered, k.done, k.dead, k.cancelled
	FROM sched._task_counts k WHERE NOT (SELECT coalesce(bool_and(c.counted), true) FROM c);
COMMENT ON VIEW sched._counts IS 'internal: every type''s tasks by state, from shared memory or counted';

/*
 * Pending tasks due now, per type: an index search of each range's pending
 * tasks up to now(), which finds only the due ones (the backlog).
 */
CREATE OR REPLACE VIEW sched._due AS
	SELECT t.biz_type, count(*) AS due
	FROM sched.task t
	WHERE t.state = 'p' AND t.run_at <= now()
	  AND t.door = ANY (ARRAY(SELECT p.range_id::smallint FROM sched.pointer p))
	GROUP BY t.biz_type;
COMMENT ON VIEW sched._due IS 'internal: pending tasks due now, per type';
