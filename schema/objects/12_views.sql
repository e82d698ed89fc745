-------------------------------------------------------------------------------
-- Views
-------------------------------------------------------------------------------

/*
 * What the querying role may see.  As in the functions, that role is the
 * session's (sched._caller(): the login role, or the one set with SET ROLE),
 * also when a SECURITY DEFINER function of the user's reads the view:
 * superusers and members of the extension's owner see every type, also the
 * finished tasks of dropped ones (_viewer); any other role the types it
 * holds a grant on (_viewer_types; see sched.grant_biz).  The views below
 * filter with both: the first is computed once, the second hashed.  Each
 * is a security barrier, so that a function in a query's WHERE clause --
 * one that raises its arguments in a NOTICE, say -- sees only the rows the
 * view lets through.
 */
CREATE OR REPLACE VIEW sched._viewer AS
	SELECT EXISTS (SELECT FROM pg_catalog.pg_roles r, pg_catalog.pg_extension e
				   WHERE r.oid = sched._caller() AND e.extname = 'delaysched'
					 AND (r.rolsuper OR pg_catalog.pg_has_role(r.oid, e.extowner, 'USAGE'))) AS sees_all;
COMMENT ON VIEW sched._viewer IS 'internal: does the querying role see every business type';

CREATE OR REPLACE VIEW sched._viewer_types AS
	SELECT DISTINCT g.biz_type FROM sched.biz_grant g
	WHERE g.grantee IN (SELECT r.oid FROM pg_catalog.pg_roles r)
	  AND pg_catalog.pg_has_role(sched._caller(), g.grantee, 'USAGE');
COMMENT ON VIEW sched._viewer_types IS 'internal: the business types the querying role holds a grant on';

-- (A barrier on a UNION ALL would be flattened away with the union: the
-- filter stands above it, in the one query the barrier keeps whole.)
CREATE OR REPLACE VIEW sched.tasks WITH (security_barrier) AS
	SELECT u.id, u.biz_type, u.run_at, u.state, u.attempt, u.payload, u.dedupe_key, u.created_at,
		   u.delivered_at, u.last_error, u.lease_until, u.finished_at, u.schedule, u.status,
		   u.command, u.run_as, u.key, u.priority
	FROM (SELECT t.id, t.biz_type, t.run_at,
				 CASE t.state WHEN 'd' THEN 'delivered' ELSE 'pending' END AS state,
				 t.attempt, t.payload, t.dedupe_key, t.created_at, t.delivered_at, t.last_error,
				 t.lease_until, NULL::timestamptz AS finished_at, t.schedule,
				 sched._task_status(t.id, t.biz_type, t.state, t.run_at, t.attempt, t.lease_until,
									b.delivery, b.paused,
									b.rate_limit IS NOT NULL OR b.key_rate_limit IS NOT NULL
									OR b.key_max_concurrency IS NOT NULL,
									b.max_concurrency) AS status,
				 t.command, t.run_as, t.key, t.priority
		  FROM sched.task t LEFT JOIN sched.biz b ON b.name = t.biz_type
		  UNION ALL
		  SELECT f.id, f.biz_type, f.run_at, f.state, f.attempt, f.payload, f.dedupe_key,
				 f.created_at, f.delivered_at, f.last_error, NULL::timestamptz, f.finished_at, f.schedule,
				 f.state, f.command, f.run_as, f.key, f.priority
		  FROM sched.finished f) u
	WHERE ((SELECT v.sees_all FROM sched._viewer v) OR u.biz_type IN (SELECT vt.biz_type FROM sched._viewer_types vt));
COMMENT ON VIEW sched.tasks IS 'every delaysched task the querying role may see: unfinished ones, and finished ones within their retention';

CREATE OR REPLACE VIEW sched.schedules WITH (security_barrier) AS
	SELECT s.name, s.biz_type, s.rule AS schedule, s.time_zone, s.catch_up, s.allow_overlap, s.paused,
		   s.starts_at, s.ends_at,
		   CASE WHEN NOT s.paused THEN s.next_run_at END AS next_run_at,
		   s.last_run_at, s.last_task_id, s.runs, s.missed, s.payload, s.created_at, s.updated_at,
		   s.command, s.run_as, s.priority
	FROM sched.schedule s
	WHERE ((SELECT v.sees_all FROM sched._viewer v) OR s.biz_type IN (SELECT vt.biz_type FROM sched._viewer_types vt));
COMMENT ON VIEW sched.schedules IS 'every recurring schedule the querying role may see: its rule, next and last firing, firings made and missed';

CREATE OR REPLACE VIEW sched.biz_stats WITH (security_barrier) AS
	WITH recent AS (
		SELECT t.biz_type, t.attempt, t.delivered_at, t.delivered_at - t.run_at AS lateness
		FROM sched.task t
		WHERE t.state = 'd' AND t.delivered_at >= now() - interval '1 minute'
		UNION ALL
		SELECT f.biz_type, f.attempt, f.delivered_at, f.delivered_at - f.run_at
		FROM sched.finished f
		-- (a task finishes after its delivery: the narrower of two searches)
		WHERE f.delivered_at >= now() - interval '1 minute' AND f.finished_at >= now() - interval '1 minute'
	), rates AS (
		SELECT r.biz_type,
			   round(count(*) / 60.0, 2) AS delivered_per_sec,
			   round(count(*) FILTER (WHERE r.delivered_at >= now() - interval '10 seconds') / 10.0, 1) AS current_rate,
			   percentile_cont(0.5) WITHIN GROUP (ORDER BY r.lateness) FILTER (WHERE r.attempt = 1) AS lateness_p50,
			   percentile_cont(0.99) WITHIN GROUP (ORDER BY r.lateness) FILTER (WHERE r.attempt = 1) AS lateness_p99
		FROM recent r GROUP BY r.biz_type
	)
	SELECT b.name AS biz_type, b.delivery, b.channel, b.paused,
		   coalesce(counts.pending + counts.ready, 0) AS pending,
		   coalesce(counts.ready + due.due, counts.ready, 0) AS due_now,
		   coalesce(counts.delivered, 0) AS awaiting_ack,
		   coalesce(counts.done, 0) AS done,
		   coalesce(counts.dead, 0) AS dead,
		   coalesce(rates.delivered_per_sec, 0) AS delivered_per_sec,
		   rates.lateness_p50,
		   rates.lateness_p99,
		   b.rate_limit, b.burst, b.max_concurrency,
		   round(sched._tokens(b.name, b.rate_limit, b.burst)::numeric, 1) AS tokens,
		   CASE WHEN b.delivery = 'notify' AND NOT b.paused THEN coalesce(counts.ready, 0) ELSE 0 END AS throttled,
		   coalesce(rates.current_rate, 0) AS current_rate,
		   b.weight,
		   CASE WHEN b.delivery IN ('notify', 'pull') THEN sched._consumer_cap(b.name) END AS consumer_cap
	FROM sched.biz b
	LEFT JOIN sched._counts counts ON counts.biz_type = b.name
	LEFT JOIN sched._due due ON due.biz_type = b.name
	LEFT JOIN rates ON rates.biz_type = b.name
	WHERE ((SELECT v.sees_all FROM sched._viewer v) OR b.name IN (SELECT vt.biz_type FROM sched._viewer_types vt));
COMMENT ON VIEW sched.biz_stats IS 'per business type: task counts, delivery rate and lateness over the last minute, limits, tokens, throttled tasks and the cap its consumers'' pace holds it to';

CREATE OR REPLACE VIEW sched.attempts WITH (security_barrier) AS
	SELECT a.task_id AS id, a.biz_type, a.attempt, a.started_at, a.duration, a.http_status,
		   a.outcome, a.error, a.sqlstate, a.rows
	FROM sched.attempt a
	WHERE ((SELECT v.sees_all FROM sched._viewer v) OR a.biz_type IN (SELECT vt.biz_type FROM sched._viewer_types vt));
COMMENT ON VIEW sched.attempts IS 'every HTTP request and SQL job run delaysched made for a task: when, how long, the status or SQLSTATE, the rows, the outcome and the error';

CREATE OR REPLACE VIEW sched.biz_grants AS
	SELECT g.biz_type, g.grantee AS role, g.privilege, g.granted_at
	FROM sched.biz_grant g
	WHERE g.grantee IN (SELECT r.oid FROM pg_catalog.pg_roles r);
COMMENT ON VIEW sched.biz_grants IS 'who may schedule, consume or read the tasks of which business type (sched.grant_biz)';

CREATE OR REPLACE VIEW sched.workers AS
	SELECT w.worker, w.pid, w.role, w.holds, w.state, w.last_tick, w.delivered, w.ticks
	FROM sched._workers() w;
COMMENT ON VIEW sched.workers IS 'the delaysched background workers and the range each is working on';

CREATE OR REPLACE VIEW sched.cluster AS
	SELECT c.role, c.database, c.pid, c.state, c.scanners, c.scanners_granted, c.http_workers,
		   c.http_granted, c.failures, c.next_start, c.pointer_lag, c.served_since, c.sql_workers,
		   c.sql_granted, c.flow_control, c.deliveries_per_second, c.deliveries_allowed, c.busy_sessions,
		   c.usual_busy_sessions, c.held_back_by, c.standby_lag_bytes
	FROM sched._cluster() c;
COMMENT ON VIEW sched.cluster IS 'the delaysched launcher and every database it serves in the cluster: workers running and granted, failures, pointer lag; and on the launcher''s row, load control (superusers and pg_monitor)';

CREATE OR REPLACE VIEW sched.time_pointer AS
	SELECT p.range_id, p.pointer, p.updated_at, now() - p.pointer AS lag
	FROM sched.pointer p;
COMMENT ON VIEW sched.time_pointer IS 'every range''s persisted time pointer (range r is door number r) and how far behind now it is';
