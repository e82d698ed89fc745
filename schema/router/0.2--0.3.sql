/*
 * schema/router/0.2--0.3.sql
 *		What the update of delaysched_router from 0.2 to 0.3 does.
 *
 * There is no 0.3 install script: CREATE EXTENSION delaysched_router runs
 * the released delaysched_router--0.2.sql and then this update (PostgreSQL
 * follows the update path), so a fresh install and an updated router are
 * the same by construction.  The Makefile builds
 * delaysched_router--0.2--0.3.sql from this file between the halves of
 * keep-privileges (schema/update/), which give what an administrator
 * granted on a function dropped here to the function of the same name made
 * again.
 *
 * Since 0.2, following delaysched 0.3: a schedule's name is its own within
 * its business type, so drop_schedule, pause_schedule and resume_schedule
 * take biz_type as a node's do (NULL: the only schedule of that name among
 * the types the caller may change).  Every schedule of one name defined
 * through the router lives on one node, the name's home in
 * sched.schedule_home (as before: a name defined again under another type
 * goes where the name lives), so a call naming no type goes to that node,
 * which finds the caller's schedule among them.  And sched.schedule_home is
 * no longer readable by every role: it listed every name defined through
 * the router, whatever its type; sched._schedule_node reads it as the
 * extension's owner.
 *
 * And SQL jobs (delaysched 0.3's delivery 'sql'): sched.add_sql goes where
 * sched.add would (the owner of its dedupe key, else a node at random), so
 * sched._add, their one body, takes which call it makes and the command;
 * sched.define_schedule takes command and sched.run_now is new, both to
 * the schedule's node; define_biz's timeout defaults to NULL (the node
 * picks: 10 seconds for http, 1 hour for sql).  sched.tasks and
 * sched.schedules gain command and run_as, so the node calls behind them
 * (_tasks_on, _schedules_on) return two columns more, and drop_biz, which
 * reads _schedules_on's rows, names them.  A role crosses to the router by
 * name, as everywhere here: run_as is the router's role of that name, NULL
 * if it has none.
 *
 * sched.add, add_after, add_many, add_sql and define_schedule take a key
 * and a priority (the schedule: its firings' priority), and claim returns
 * them, as a node's; sched.tasks shows them, sched.schedules the priority.
 *
 * sched.add and add_after take on_duplicate and max_wait, passed on to
 * the node (the owner of the dedupe key).  And a consumer's lease
 * extension, sched.extend, to the node the id
 * names (as sched.ack); sched.cancel_by_key to the node that owns the
 * dedupe key (where sched.add put the task).
 *
 * sched.biz_stats shows consumer_cap, the nodes' consumer pace (at the end).
 */

DROP FUNCTION sched.drop_schedule(text);
DROP FUNCTION sched.pause_schedule(text);
DROP FUNCTION sched.resume_schedule(text);
DROP FUNCTION sched._drop_schedule_on(int, text);
DROP FUNCTION sched._pause_schedule_on(int, text);
DROP FUNCTION sched._resume_schedule_on(int, text);

CREATE FUNCTION sched._drop_schedule_on(p int, name text, biz_type text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.drop_schedule(name, biz_type); $$;
CREATE FUNCTION sched._pause_schedule_on(p int, name text, biz_type text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.pause_schedule(name, biz_type); $$;
CREATE FUNCTION sched._resume_schedule_on(p int, name text, biz_type text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.resume_schedule(name, biz_type); $$;
-- (As every internal function but the administrators' in 0.2: a call
-- reaches the node as its caller, which checks that role there.)
GRANT EXECUTE ON FUNCTION sched._drop_schedule_on(int, text, text), sched._pause_schedule_on(int, text, text),
	sched._resume_schedule_on(int, text, text) TO PUBLIC;

CREATE FUNCTION sched.drop_schedule(name text, biz_type text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_dropped boolean;
BEGIN
	v_dropped := sched._on_schedule_node(name, pg_catalog.format('SELECT sched._drop_schedule_on($1, %L, %L)',
																 name, biz_type));
	PERFORM sched._set_schedule_home(name);
	RETURN v_dropped;
END
$$;
COMMENT ON FUNCTION sched.drop_schedule(text, text) IS 'drop a recurring schedule on its node, cancelling its pending firing (biz_type: of that type; NULL: the only one of that name the caller may change); false if there was none';

CREATE FUNCTION sched.pause_schedule(name text, biz_type text DEFAULT NULL) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT sched._on_schedule_node(name, pg_catalog.format('SELECT sched._pause_schedule_on($1, %L, %L)',
															 name, biz_type))::boolean $$;
COMMENT ON FUNCTION sched.pause_schedule(text, text) IS 'stop a schedule firing, on its node (biz_type: of that type; NULL: the only one of that name the caller may change); false if it was paused already';

CREATE FUNCTION sched.resume_schedule(name text, biz_type text DEFAULT NULL) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT sched._on_schedule_node(name, pg_catalog.format('SELECT sched._resume_schedule_on($1, %L, %L)',
															 name, biz_type))::boolean $$;
COMMENT ON FUNCTION sched.resume_schedule(text, text) IS 'let a paused schedule fire again, on its node (biz_type: of that type; NULL: the only one of that name the caller may change); false if it was not paused';

-- As the 0.2 script leaves every public function: for administrators to grant.
REVOKE ALL ON FUNCTION sched.drop_schedule(text, text), sched.pause_schedule(text, text),
	sched.resume_schedule(text, text) FROM PUBLIC;

-- Where each name lives is the router's to know, not every role's.
REVOKE SELECT ON sched.schedule_home FROM PUBLIC;
ALTER FUNCTION sched._schedule_node(text) SECURITY DEFINER;


-------------------------------------------------------------------------------
-- SQL jobs
-------------------------------------------------------------------------------

-- define_biz: timeout NULL by default, as a node's, and each key's limits
-- (key_max_concurrency, key_rate_limit, key_burst), which every node gets
-- whole: a key's tasks are wherever sched.add put them, so a key's limits
-- hold on each node (see doc/scale-out.md).  Its grants go to the new one
-- by keep-privileges-restore.sql.
ALTER TABLE sched.biz ADD COLUMN key_max_concurrency int, ADD COLUMN key_rate_limit float8,
	ADD COLUMN key_burst int;
DROP FUNCTION sched.define_biz(text, text, text, int, interval, float8, int, int, text, jsonb, interval,
							   interval, interval, text, boolean, int);
DROP FUNCTION sched._define_biz_on(int, text, text, text, int, interval, float8, int, int, text, jsonb,
								   interval, interval, interval, text, boolean, int);
CREATE FUNCTION sched._define_biz_on(p int, name text, delivery text, channel text, max_attempts int,
	ack_timeout interval, rate_limit float8, burst int, max_concurrency int, url text, headers jsonb,
	timeout interval, min_backoff interval, max_backoff interval, secret text, follow_redirects boolean,
	weight int, key_max_concurrency int, key_rate_limit float8, key_burst int)
RETURNS void
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT sched.define_biz(name, delivery, channel, max_attempts, ack_timeout, rate_limit, burst,
		max_concurrency, url, headers, timeout, min_backoff, max_backoff, secret, follow_redirects,
		weight, key_max_concurrency, key_rate_limit, key_burst); $$;
-- (Not granted: as in 0.2, for the administrators' calls only.)
REVOKE ALL ON FUNCTION sched._define_biz_on(int, text, text, text, int, interval, float8, int, int, text, jsonb,
											interval, interval, interval, text, boolean, int, int, float8, int)
	FROM PUBLIC;

CREATE OR REPLACE FUNCTION sched._define_call(b sched.biz) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT pg_catalog.format(
		'SELECT sched._define_biz_on($1, %L, %L, %L, %L, %L, sched._share(%L::float8, $1), sched._share(%L::int, $1),'
		' sched._share(%L::int, $1), %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L)',
		b.name, b.delivery, b.channel, b.max_attempts, b.ack_timeout, b.rate_limit, b.burst,
		b.max_concurrency, b.url, b.headers, b.timeout, b.min_backoff, b.max_backoff, b.secret,
		b.follow_redirects, b.weight, b.key_max_concurrency, b.key_rate_limit, b.key_burst)
$$;

CREATE FUNCTION sched.define_biz(
	name text,
	delivery text DEFAULT 'notify',
	channel text DEFAULT NULL,
	max_attempts int DEFAULT 10,
	ack_timeout interval DEFAULT '30 seconds',
	rate_limit float8 DEFAULT NULL,
	burst int DEFAULT NULL,
	max_concurrency int DEFAULT NULL,
	url text DEFAULT NULL,
	headers jsonb DEFAULT NULL,
	timeout interval DEFAULT NULL,
	min_backoff interval DEFAULT '1 second',
	max_backoff interval DEFAULT '1 hour',
	secret text DEFAULT NULL,
	follow_redirects boolean DEFAULT false,
	weight int DEFAULT 1,
	key_max_concurrency int DEFAULT NULL,
	key_rate_limit float8 DEFAULT NULL,
	key_burst int DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	b sched.biz;
BEGIN
	b := ROW(name, delivery, channel, max_attempts, ack_timeout, rate_limit, burst, max_concurrency, url,
			 headers, timeout, min_backoff, max_backoff, secret, follow_redirects,
			 coalesce((SELECT x.paused FROM sched.biz x WHERE x.name = define_biz.name), false),
			 pg_catalog.now(), weight, key_max_concurrency, key_rate_limit, key_burst);
	PERFORM sched._check_limits(rate_limit, burst, max_concurrency);
	PERFORM sched._on_every_node('define_biz', sched._define_call(b));
	-- (an update, not a delete and insert: the type's grants stay recorded)
	INSERT INTO sched.biz SELECT b.*
	ON CONFLICT ON CONSTRAINT biz_pkey DO UPDATE SET delivery = excluded.delivery, channel = excluded.channel,
		max_attempts = excluded.max_attempts, ack_timeout = excluded.ack_timeout,
		rate_limit = excluded.rate_limit, burst = excluded.burst, max_concurrency = excluded.max_concurrency,
		url = excluded.url, headers = excluded.headers, timeout = excluded.timeout,
		min_backoff = excluded.min_backoff, max_backoff = excluded.max_backoff, secret = excluded.secret,
		follow_redirects = excluded.follow_redirects, updated_at = excluded.updated_at,
		weight = excluded.weight, key_max_concurrency = excluded.key_max_concurrency,
		key_rate_limit = excluded.key_rate_limit, key_burst = excluded.key_burst;
END
$$;
COMMENT ON FUNCTION sched.define_biz(text, text, text, int, interval, float8, int, int, text, jsonb, interval,
									 interval, interval, text, boolean, int, int, float8, int) IS 'create or change a business type on every node; rate_limit, burst and max_concurrency are for the whole cluster, split across the nodes; the keys'' limits hold on each node';
REVOKE ALL ON FUNCTION sched.define_biz(text, text, text, int, interval, float8, int, int, text, jsonb, interval,
										interval, interval, text, boolean, int, int, float8, int) FROM PUBLIC;

-- The node calls that change: each takes the command, or returns the two
-- columns more.  (Dropped first: their arguments or result change.)
DROP FUNCTION sched._add(boolean, text, timestamptz, interval, jsonb, text);
DROP FUNCTION sched._define_schedule_on(int, text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean);
DROP FUNCTION sched.define_schedule(text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean);
DROP FUNCTION sched._tasks_on(int);
DROP FUNCTION sched._schedules_on(int);

-- (sched.add and add_after take on_duplicate and max_wait too.)
DROP FUNCTION sched._add_on(int, text, timestamptz, jsonb, text);
DROP FUNCTION sched._add_after_on(int, text, interval, jsonb, text);
CREATE FUNCTION sched._add_on(p int, biz_type text, run_at timestamptz, payload jsonb, dedupe_key text,
	on_duplicate text, max_wait interval, key text, priority int) RETURNS bigint
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT sched.add(biz_type, run_at, payload, dedupe_key, on_duplicate, max_wait, key, priority); $$;
CREATE FUNCTION sched._add_after_on(p int, biz_type text, delay interval, payload jsonb, dedupe_key text,
	on_duplicate text, max_wait interval, key text, priority int) RETURNS bigint
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT sched.add_after(biz_type, delay, payload, dedupe_key, on_duplicate, max_wait, key, priority); $$;
CREATE FUNCTION sched._add_sql_on(p int, biz_type text, run_at timestamptz, command text, dedupe_key text,
	key text, priority int)
RETURNS bigint
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT sched.add_sql(biz_type, run_at, command, dedupe_key, key, priority); $$;
CREATE FUNCTION sched._define_schedule_on(p int, name text, biz_type text, schedule text, payload jsonb,
	time_zone text, catch_up text, starts_at timestamptz, ends_at timestamptz, allow_overlap boolean,
	command text, priority int)
RETURNS timestamptz
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT sched.define_schedule(name, biz_type, schedule, payload, time_zone, catch_up, starts_at,
		ends_at, allow_overlap, command, priority); $$;
CREATE FUNCTION sched._run_now_on(p int, schedule text, biz_type text) RETURNS bigint
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.run_now(schedule, biz_type); $$;
-- (run_as by name: an oid means nothing on another server.)
CREATE FUNCTION sched._tasks_on(p int)
RETURNS TABLE(id bigint, biz_type text, run_at timestamptz, state text, attempt int, payload jsonb,
	dedupe_key text, created_at timestamptz, delivered_at timestamptz, last_error text,
	lease_until timestamptz, finished_at timestamptz, schedule text, status text, command text,
	run_as text, key text, priority smallint)
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT t.id, t.biz_type, t.run_at, t.state, t.attempt, t.payload, t.dedupe_key, t.created_at,
		t.delivered_at, t.last_error, t.lease_until, t.finished_at, t.schedule, t.status, t.command,
		t.run_as::text AS run_as, t.key, t.priority FROM sched.tasks t; $$;
CREATE FUNCTION sched._schedules_on(p int)
RETURNS TABLE(name text, biz_type text, schedule text, time_zone text, catch_up text, allow_overlap boolean,
	paused boolean, starts_at timestamptz, ends_at timestamptz, next_run_at timestamptz,
	last_run_at timestamptz, last_task_id bigint, runs bigint, missed bigint, payload jsonb,
	created_at timestamptz, updated_at timestamptz, command text, run_as text, priority smallint)
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT s.name, s.biz_type, s.schedule, s.time_zone, s.catch_up, s.allow_overlap, s.paused,
		s.starts_at, s.ends_at, s.next_run_at, s.last_run_at, s.last_task_id, s.runs, s.missed,
		s.payload, s.created_at, s.updated_at, s.command, s.run_as::text AS run_as, s.priority
	FROM sched.schedules s; $$;

-- sched.add, add_after and add_sql: with a dedupe key, on the key's owner;
-- without, on a node picked at random, or the next that answers.  p_call
-- names the node function; each call is written out, static, so that its
-- plan is kept.
CREATE FUNCTION sched._add(p_call text, p_biz text, p_run_at timestamptz, p_delay interval,
						   p_payload jsonb, p_command text, p_dedupe_key text,
						   p_on_duplicate text DEFAULT 'keep', p_max_wait interval DEFAULT NULL,
						   p_key text DEFAULT NULL, p_priority int DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n sched.node;
	v_tried text[] := '{}';
	e_state text; e_message text; e_detail text; e_hint text;
BEGIN
	FOR n IN (SELECT x.* FROM sched.node x WHERE p_dedupe_key IS NULL ORDER BY pg_catalog.random())
			 UNION ALL (SELECT * FROM sched._owner(p_biz, p_dedupe_key) WHERE p_dedupe_key IS NOT NULL) LOOP
		BEGIN
			CASE p_call
				WHEN 'add' THEN
					RETURN sched._add_on(n.position, p_biz, p_run_at, p_payload, p_dedupe_key,
										 p_on_duplicate, p_max_wait, p_key, p_priority);
				WHEN 'add_after' THEN
					RETURN sched._add_after_on(n.position, p_biz, p_delay, p_payload, p_dedupe_key,
											   p_on_duplicate, p_max_wait, p_key, p_priority);
				WHEN 'add_sql' THEN
					RETURN sched._add_sql_on(n.position, p_biz, p_run_at, p_command, p_dedupe_key,
											 p_key, p_priority);
			END CASE;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
									e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
			IF p_dedupe_key IS NOT NULL OR NOT sched._not_sent(e_state, e_message) THEN
				PERFORM sched._raise_node_error(n.node, e_state, e_message, e_detail, e_hint);
			END IF;
			v_tried := v_tried || sched._label(n.node);
		END;
	END LOOP;
	PERFORM sched._all_unavailable(v_tried);
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION sched._add(text, text, timestamptz, interval, jsonb, text, text, text, interval, text, int) IS 'internal: the body of sched.add, sched.add_after and sched.add_sql';

-- (As every internal function but the administrators' in 0.2: a call
-- reaches the node as its caller, which checks that role there.)
GRANT EXECUTE ON FUNCTION sched._add(text, text, timestamptz, interval, jsonb, text, text, text, interval, text, int),
	sched._add_on(int, text, timestamptz, jsonb, text, text, interval, text, int),
	sched._add_after_on(int, text, interval, jsonb, text, text, interval, text, int),
	sched._add_sql_on(int, text, timestamptz, text, text, text, int),
	sched._define_schedule_on(int, text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean, text, int),
	sched._run_now_on(int, text, text), sched._tasks_on(int), sched._schedules_on(int) TO PUBLIC;

-- sched.add and add_after: with on_duplicate and max_wait, as a node's (the
-- grants on the 0.2 functions go to these by keep-privileges-restore.sql).
DROP FUNCTION sched.add(text, timestamptz, jsonb, text);
DROP FUNCTION sched.add_after(text, interval, jsonb, text);
CREATE FUNCTION sched.add(biz_type text, run_at timestamptz, payload jsonb DEFAULT '{}',
						  dedupe_key text DEFAULT NULL, on_duplicate text DEFAULT 'keep',
						  max_wait interval DEFAULT NULL, key text DEFAULT NULL, priority int DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN sched._add('add', biz_type, run_at, NULL, payload, NULL, dedupe_key, on_duplicate, max_wait,
							  key, priority); END $$;
COMMENT ON FUNCTION sched.add(text, timestamptz, jsonb, text, text, interval, text, int) IS 'schedule a task on one of the nodes (with a dedupe key, on the node that owns the key, which keeps, replaces or debounces the task holding it as on_duplicate says); returns its id, which carries the node';

CREATE FUNCTION sched.add_after(biz_type text, delay interval, payload jsonb DEFAULT '{}',
								dedupe_key text DEFAULT NULL, on_duplicate text DEFAULT 'keep',
								max_wait interval DEFAULT NULL, key text DEFAULT NULL, priority int DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN sched._add('add_after', biz_type, NULL, delay, payload, NULL, dedupe_key, on_duplicate, max_wait,
							  key, priority); END $$;
COMMENT ON FUNCTION sched.add_after(text, interval, jsonb, text, text, interval, text, int) IS 'schedule a task for delay from now on one of the nodes, as sched.add; returns its id, which carries the node';

CREATE FUNCTION sched.add_sql(biz_type text, run_at timestamptz, command text, dedupe_key text DEFAULT NULL,
							  key text DEFAULT NULL, priority int DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN sched._add('add_sql', biz_type, run_at, NULL, NULL, command, dedupe_key, 'keep', NULL,
							  key, priority); END $$;
COMMENT ON FUNCTION sched.add_sql(text, timestamptz, text, text, text, int) IS 'schedule a one-shot SQL job on one of the nodes (with a dedupe key, on the node that owns the key): command runs there at run_at as the calling role; returns its id, which carries the node';

CREATE FUNCTION sched.define_schedule(name text, biz_type text, schedule text, payload jsonb DEFAULT '{}',
									  time_zone text DEFAULT 'UTC', catch_up text DEFAULT 'latest',
									  starts_at timestamptz DEFAULT NULL, ends_at timestamptz DEFAULT NULL,
									  allow_overlap boolean DEFAULT true, command text DEFAULT NULL,
									  priority int DEFAULT 0)
RETURNS timestamptz
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_next timestamptz;
BEGIN
	v_next := sched._on_schedule_node(name, pg_catalog.format(
		'SELECT sched._define_schedule_on($1, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L)',
		name, biz_type, schedule, payload, time_zone, catch_up, starts_at, ends_at, allow_overlap, command,
		priority));
	PERFORM sched._set_schedule_home(name);
	RETURN v_next;
END
$$;
COMMENT ON FUNCTION sched.define_schedule(text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean, text, int) IS 'create or change a recurring schedule on its node (for an sql type, runs of command, as the calling role); returns its next firing';

CREATE FUNCTION sched.run_now(schedule text, biz_type text DEFAULT NULL) RETURNS bigint
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT sched._on_schedule_node(schedule, pg_catalog.format('SELECT sched._run_now_on($1, %L, %L)',
																 schedule, biz_type))::bigint $$;
COMMENT ON FUNCTION sched.run_now(text, text) IS 'add one firing of a schedule due at once, on its node (biz_type: of that type; NULL: the only one of that name the caller may change); returns its id, which carries the node';

-- As the 0.2 script leaves every public function: for administrators to
-- grant (what was granted on define_schedule before goes to this one, by
-- keep-privileges-restore.sql).
REVOKE ALL ON FUNCTION sched.add(text, timestamptz, jsonb, text, text, interval, text, int),
	sched.add_after(text, interval, jsonb, text, text, interval, text, int),
	sched.add_sql(text, timestamptz, text, text, text, int),
	sched.define_schedule(text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean, text, int),
	sched.run_now(text, text) FROM PUBLIC;

-- The views: two columns more, at the end (replaced in place, so their
-- grants stay).
CREATE OR REPLACE VIEW sched.tasks AS
	SELECT t.id, t.biz_type, t.run_at, t.state, t.attempt, t.payload, t.dedupe_key, t.created_at,
		   t.delivered_at, t.last_error, t.lease_until, t.finished_at, t.schedule, t.status, t.command,
		   pg_catalog.to_regrole(t.run_as) AS run_as, t.key, t.priority
	FROM sched._gather('tasks') AS t(node int, id bigint, biz_type text, run_at timestamptz, state text,
		attempt int, payload jsonb, dedupe_key text, created_at timestamptz, delivered_at timestamptz,
		last_error text, lease_until timestamptz, finished_at timestamptz, schedule text, status text,
		command text, run_as text, key text, priority smallint);

CREATE OR REPLACE VIEW sched.schedules AS
	SELECT s.name, s.biz_type, s.schedule, s.time_zone, s.catch_up, s.allow_overlap, s.paused,
		   s.starts_at, s.ends_at, s.next_run_at, s.last_run_at, s.last_task_id, s.runs, s.missed,
		   s.payload, s.created_at, s.updated_at, s.command, pg_catalog.to_regrole(s.run_as) AS run_as,
		   s.priority
	FROM sched._gather('schedules') AS s(node int, name text, biz_type text, schedule text, time_zone text,
		catch_up text, allow_overlap boolean, paused boolean, starts_at timestamptz, ends_at timestamptz,
		next_run_at timestamptz, last_run_at timestamptz, last_task_id bigint, runs bigint, missed bigint,
		payload jsonb, created_at timestamptz, updated_at timestamptz, command text, run_as text,
		priority smallint);

-- drop_biz reads _schedules_on's rows: with their columns as they are now.
CREATE OR REPLACE FUNCTION sched.drop_biz(name text, cancel_tasks boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_busy text;
	v_counts text[];
BEGIN
	PERFORM sched._check_nodes();
	-- Refuse before any node drops it, where a node would refuse.
	IF NOT coalesce(cancel_tasks, false) THEN
		SELECT pg_catalog.string_agg(pg_catalog.format('"%s"', s.name), ', ') INTO v_busy
		FROM sched._gather('schedules') AS s(node int, name text, biz_type text, schedule text, time_zone text,
			catch_up text, allow_overlap boolean, paused boolean, starts_at timestamptz, ends_at timestamptz,
			next_run_at timestamptz, last_run_at timestamptz, last_task_id bigint, runs bigint, missed bigint,
			payload jsonb, created_at timestamptz, updated_at timestamptz, command text, run_as text,
		priority smallint)
		WHERE s.biz_type = drop_biz.name;
		IF v_busy IS NOT NULL THEN
			RAISE EXCEPTION 'business type "%" still has schedules', name
				USING ERRCODE = 'object_in_use', DETAIL = 'Schedules making tasks of it: ' || v_busy || '.',
					  HINT = pg_catalog.format('Drop them with sched.drop_schedule, or drop them and cancel every task with SELECT sched.drop_biz(%L, cancel_tasks => true);', name);
		END IF;
		SELECT pg_catalog.string_agg(pg_catalog.format('%s on node %s', s.unfinished, s.node), ', ')
		INTO v_busy
		FROM sched._gather_stats() s WHERE s.biz_type = drop_biz.name AND s.unfinished > 0;
		IF v_busy IS NOT NULL THEN
			RAISE EXCEPTION 'business type "%" still has unfinished tasks', name
				USING ERRCODE = 'object_in_use', DETAIL = 'Unfinished: ' || v_busy || '.',
					  HINT = 'Wait for them, or drop it with cancel_tasks => true to cancel them.';
		END IF;
	END IF;
	v_counts := sched._on_every_node('drop_biz',
		pg_catalog.format('SELECT sched._drop_biz_on($1, %L, %L)', name, cancel_tasks));
	DELETE FROM sched.biz x WHERE x.name = drop_biz.name;
	RETURN (SELECT sum(c::bigint) FROM pg_catalog.unnest(v_counts) c);
END
$$;

-------------------------------------------------------------------------------
-- Leases a consumer extends, cancelling by dedupe key
-------------------------------------------------------------------------------

CREATE FUNCTION sched._extend_on(p int, id bigint, by interval) RETURNS timestamptz
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.extend(id, by); $$;
CREATE FUNCTION sched._cancel_by_key_on(p int, biz_type text, dedupe_key text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.cancel_by_key(biz_type, dedupe_key); $$;
GRANT EXECUTE ON FUNCTION sched._extend_on(int, bigint, interval),
	sched._cancel_by_key_on(int, text, text) TO PUBLIC;

CREATE FUNCTION sched.extend(id bigint, by interval) RETURNS timestamptz
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n sched.node := sched._node_of_id(id);
	e_state text; e_message text; e_detail text; e_hint text;
BEGIN
	RETURN sched._extend_on(n.position, id, extend.by);
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
							e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
	PERFORM sched._raise_node_error(n.node, e_state, e_message, e_detail, e_hint);
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION sched.extend(bigint, interval) IS 'extend the lease of a delivered notify or pull task, on its node, to "by" from now; returns the new lease_until, or NULL if no delivery of this id awaits acknowledgement';

CREATE FUNCTION sched.cancel_by_key(biz_type text, dedupe_key text) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n sched.node;
	e_state text; e_message text; e_detail text; e_hint text;
BEGIN
	PERFORM sched._require(biz_type, 'biz_type');
	PERFORM sched._require(dedupe_key, 'dedupe_key');
	n := sched._owner(biz_type, dedupe_key);
	RETURN sched._cancel_by_key_on(n.position, biz_type, dedupe_key);
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
							e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
	IF n.node IS NULL THEN
		RAISE;
	END IF;
	PERFORM sched._raise_node_error(n.node, e_state, e_message, e_detail, e_hint);
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION sched.cancel_by_key(text, text) IS 'cancel the pending task of a business type that holds a dedupe key, on the node that owns the key; false if there is none';

-- For administrators to grant, as every public function.
REVOKE ALL ON FUNCTION sched.extend(bigint, interval), sched.cancel_by_key(text, text) FROM PUBLIC;

-------------------------------------------------------------------------------
-- Keys and priorities
-------------------------------------------------------------------------------

-- sched.add_many takes keys and priorities, and sched.claim returns each
-- task's key and priority, as a node's: made anew (the grants on the 0.2
-- functions go to these by keep-privileges-restore.sql).  add_many's body
-- is 0.2's, with the two arrays split as the others are.
DROP FUNCTION sched.add_many(text, timestamptz[], jsonb[], text[]);
DROP FUNCTION sched._add_many_on(int, text, timestamptz[], jsonb[], text[]);
DROP FUNCTION sched.claim(text, int);
DROP FUNCTION sched._claim(text, int);
DROP FUNCTION sched._claim_on(int, text, int);

CREATE FUNCTION sched._add_many_on(p int, biz_type text, run_ats timestamptz[], payloads jsonb[], dedupe_keys text[],
	keys text[], priorities int[])
RETURNS SETOF bigint
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT a AS _add_many_on FROM sched.add_many(biz_type, run_ats, payloads, dedupe_keys, keys, priorities) a; $$;
CREATE FUNCTION sched._claim_on(p int, biz_type text, max_tasks int)
RETURNS TABLE(id bigint, biz_type text, run_at timestamptz, payload jsonb, attempt int, schedule text,
			  key text, priority smallint)
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT c.id, c.biz_type, c.run_at, c.payload, c.attempt, c.schedule, c.key, c.priority
	FROM sched.claim(biz_type, max_tasks) c; $$;

CREATE FUNCTION sched.add_many(biz_type text, run_ats timestamptz[], payloads jsonb[] DEFAULT NULL,
							   dedupe_keys text[] DEFAULT NULL, keys text[] DEFAULT NULL,
							   priorities int[] DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_count int;
	v_nodes sched.node[];
	v_target int[];			-- per element: the node's index in v_nodes, negative without a key
	v_spread int;
	v_ids bigint[];
	v_part bigint[];
	v_stored text[] := '{}';
	v_tried text[];
	v_ord int[];
	v_first int;
	v_keyed boolean;
	k int;
	i int;
	n sched.node;
	e_state text; e_message text; e_detail text; e_hint text;
BEGIN
	PERFORM sched._require(run_ats, 'run_ats');
	v_count := coalesce(cardinality(run_ats), 0);
	IF payloads IS NOT NULL AND cardinality(payloads) <> v_count THEN
		RAISE EXCEPTION 'payloads has % elements but run_ats has %', cardinality(payloads), v_count
			USING ERRCODE = 'array_subscript_error';
	END IF;
	IF dedupe_keys IS NOT NULL AND cardinality(dedupe_keys) <> v_count THEN
		RAISE EXCEPTION 'dedupe_keys has % elements but run_ats has %', cardinality(dedupe_keys), v_count
			USING ERRCODE = 'array_subscript_error';
	END IF;
	IF keys IS NOT NULL AND cardinality(keys) <> v_count THEN
		RAISE EXCEPTION 'keys has % elements but run_ats has %', cardinality(keys), v_count
			USING ERRCODE = 'array_subscript_error';
	END IF;
	IF priorities IS NOT NULL AND cardinality(priorities) <> v_count THEN
		RAISE EXCEPTION 'priorities has % elements but run_ats has %', cardinality(priorities), v_count
			USING ERRCODE = 'array_subscript_error';
	END IF;
	IF v_count = 0 OR sched._odd_array(run_ats) OR sched._odd_array(payloads) OR sched._odd_array(dedupe_keys)
	   OR sched._odd_array(keys) OR sched._odd_array(priorities) THEN
		-- An empty batch, or arrays a node refuses (several dimensions, or
		-- subscripts not from 1): one node, which says what is wrong.
		RETURN QUERY SELECT sched._add_many_on(
			(SELECT x.position FROM sched._nodes_in_turn() x LIMIT 1), biz_type, run_ats, payloads, dedupe_keys,
			keys, priorities);
		RETURN;
	END IF;
	SELECT pg_catalog.array_agg(x ORDER BY x.position) INTO v_nodes FROM sched.node x;
	IF v_nodes IS NULL THEN
		PERFORM sched._no_nodes();
	END IF;
	v_first := pg_catalog.floor(pg_catalog.random() * cardinality(v_nodes));
	v_spread := v_count - coalesce(cardinality(pg_catalog.array_remove(dedupe_keys, NULL)), 0);
	v_target := pg_catalog.array_fill(0, ARRAY[v_count]);
	k := 0;
	FOR i IN 1 .. v_count LOOP
		IF dedupe_keys[i] IS NOT NULL THEN
			v_target[i] := (sched._owner(biz_type, dedupe_keys[i])).position + 1;
		ELSE
			v_target[i] := -((k * cardinality(v_nodes) / v_spread + v_first) % cardinality(v_nodes) + 1);
			k := k + 1;
		END IF;
	END LOOP;

	v_ids := pg_catalog.array_fill(NULL::bigint, ARRAY[v_count]);
	FOR k IN SELECT DISTINCT t FROM pg_catalog.unnest(v_target) t ORDER BY 1 LOOP
		SELECT pg_catalog.array_agg(g ORDER BY g) INTO v_ord
		FROM pg_catalog.generate_series(1, v_count) g WHERE v_target[g] = k;
		v_keyed := k > 0;
		v_tried := '{}';
		v_part := NULL;
		-- A run with keys goes to their owner only; one without, to the
		-- next node when its own cannot be reached.
		FOR n IN SELECT (v_nodes[(abs(k) - 1 + j) % cardinality(v_nodes) + 1]).*
				 FROM pg_catalog.generate_series(0, CASE WHEN v_keyed THEN 0 ELSE cardinality(v_nodes) - 1 END) j LOOP
			BEGIN
				v_part := ARRAY(SELECT sched._add_many_on(n.position, biz_type,
					ARRAY(SELECT run_ats[o] FROM pg_catalog.unnest(v_ord) WITH ORDINALITY u(o, r) ORDER BY r),
					CASE WHEN payloads IS NOT NULL THEN
						ARRAY(SELECT payloads[o] FROM pg_catalog.unnest(v_ord) WITH ORDINALITY u(o, r) ORDER BY r) END,
					CASE WHEN dedupe_keys IS NOT NULL THEN
						ARRAY(SELECT dedupe_keys[o] FROM pg_catalog.unnest(v_ord) WITH ORDINALITY u(o, r) ORDER BY r) END,
					CASE WHEN keys IS NOT NULL THEN
						ARRAY(SELECT keys[o] FROM pg_catalog.unnest(v_ord) WITH ORDINALITY u(o, r) ORDER BY r) END,
					CASE WHEN priorities IS NOT NULL THEN
						ARRAY(SELECT priorities[o] FROM pg_catalog.unnest(v_ord) WITH ORDINALITY u(o, r) ORDER BY r) END));
				EXIT;
			EXCEPTION WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
										e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
				IF NOT v_keyed AND sched._not_sent(e_state, e_message) THEN
					v_tried := v_tried || sched._label(n.node);
					CONTINUE;
				END IF;
				IF cardinality(v_stored) > 0 THEN
					RAISE EXCEPTION 'add_many failed on %: %', sched._label(n.node),
							pg_catalog.rtrim(pg_catalog.regexp_replace(e_message, '^.*(REMOTE ERROR|PQconnectStart|PQconnectPoll): ', ''), E' \t\n')
						USING ERRCODE = CASE WHEN sched._unreachable(e_state, e_message) THEN 'connection_failure' ELSE e_state END,
							  DETAIL = 'Stored before: ' || pg_catalog.array_to_string(v_stored, '; ') || '.',
							  HINT = 'A batch is stored whole on each node, not across nodes: with dedupe keys, the same batch again adds only what is missing.';
				END IF;
				PERFORM sched._raise_node_error(n.node, e_state, e_message, e_detail, e_hint);
			END;
		END LOOP;
		IF v_part IS NULL THEN
			PERFORM sched._all_unavailable(v_tried);
		END IF;
		FOR i IN 1 .. cardinality(v_ord) LOOP
			v_ids[v_ord[i]] := v_part[i];
		END LOOP;
		v_stored := v_stored || pg_catalog.format('%s tasks on node %s', cardinality(v_ord), n.node);
	END LOOP;
	RETURN QUERY SELECT u FROM pg_catalog.unnest(v_ids) u;
END
$$;
COMMENT ON FUNCTION sched.add_many(text, timestamptz[], jsonb[], text[], text[], int[]) IS 'schedule many tasks of one type, split across the nodes (one call per node); returns their ids in input order';

CREATE FUNCTION sched._claim(p_biz text, p_max int)
RETURNS TABLE(id bigint, biz_type text, run_at timestamptz, payload jsonb, attempt int, schedule text,
			  key text, priority smallint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
	n sched.node;
	v_left int := p_max;
	v_got int;
	v_asked int := 0;
	e_state text; e_message text; e_detail text; e_hint text;
BEGIN
	FOR n IN SELECT * FROM sched._nodes_in_turn() LOOP
		v_asked := v_asked + 1;
		BEGIN
			RETURN QUERY SELECT * FROM sched._claim_on(n.position, p_biz, v_left);
			GET DIAGNOSTICS v_got = ROW_COUNT;
			v_left := v_left - v_got;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
									e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
			IF sched._unreachable(e_state, e_message) THEN
				RAISE WARNING '% is unavailable: its tasks were not claimed', sched._label(n.node);
			ELSIF v_left < p_max THEN
				-- Tasks taken from other nodes are leased already: return
				-- them rather than lose them to their ack_timeout.
				RAISE WARNING '% refused the claim: %', sched._label(n.node),
					pg_catalog.regexp_replace(e_message, '^.*REMOTE ERROR: ', '');
				EXIT;
			ELSE
				PERFORM sched._raise_node_error(n.node, e_state, e_message, e_detail, e_hint);
			END IF;
		END;
		EXIT WHEN v_left <= 0;
	END LOOP;
	IF v_asked = 0 THEN
		PERFORM sched._no_nodes();
	END IF;
END
$$;
COMMENT ON FUNCTION sched._claim(text, int) IS 'internal: the body of sched.claim';

CREATE FUNCTION sched.claim(biz_type text, max_tasks int DEFAULT 100)
RETURNS TABLE(id bigint, biz_type text, run_at timestamptz, payload jsonb, attempt int, schedule text,
			  key text, priority smallint)
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM sched._claim($1, $2) $$;
COMMENT ON FUNCTION sched.claim(text, int) IS 'take up to max_tasks due tasks of a type from the nodes in turn (on each, by priority and in turns by key), each leased for the type''s ack_timeout';

-- As the 0.2 script leaves them: the internal ones to every role (a call
-- reaches the node as its caller, which checks that role there), the
-- public ones for administrators to grant.
GRANT EXECUTE ON FUNCTION sched._add_many_on(int, text, timestamptz[], jsonb[], text[], text[], int[]),
	sched._claim_on(int, text, int), sched._claim(text, int) TO PUBLIC;
REVOKE ALL ON FUNCTION sched.add_many(text, timestamptz[], jsonb[], text[], text[], int[]),
	sched.claim(text, int) FROM PUBLIC;

-- sched.biz_stats gains consumer_cap (the nodes' consumer pace), at the end:
-- summed over the nodes, NULL where none holds the type.  The node call
-- returns it; the view reads the nodes' rows itself (replaced in place, so
-- its grants stay), which frees _gather_stats, drop_biz's reader, to be
-- made again with the column too.
DROP FUNCTION sched._biz_stats_on(int);
CREATE FUNCTION sched._biz_stats_on(p int)
RETURNS TABLE(biz_type text, delivery text, channel text, paused boolean, pending bigint, due_now bigint,
	awaiting_ack bigint, done bigint, dead bigint, delivered_per_sec numeric, lateness_p50 interval,
	lateness_p99 interval, rate_limit float8, burst int, max_concurrency int, tokens numeric,
	throttled bigint, current_rate numeric, weight int, consumer_cap int)
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT s.biz_type, s.delivery, s.channel, s.paused, s.pending, s.due_now, s.awaiting_ack, s.done,
		s.dead, s.delivered_per_sec, s.lateness_p50, s.lateness_p99, s.rate_limit, s.burst,
		s.max_concurrency, s.tokens, s.throttled, s.current_rate, s.weight, s.consumer_cap
	FROM sched.biz_stats s; $$;

CREATE OR REPLACE VIEW sched.biz_stats AS
	SELECT s.biz_type, max(s.delivery) AS delivery, max(s.channel) AS channel, bool_or(s.paused) AS paused,
		   sum(s.pending)::bigint AS pending, sum(s.due_now)::bigint AS due_now,
		   sum(s.awaiting_ack)::bigint AS awaiting_ack, sum(s.done)::bigint AS done, sum(s.dead)::bigint AS dead,
		   sum(s.delivered_per_sec) AS delivered_per_sec,
		   max(s.lateness_p50) AS lateness_p50, max(s.lateness_p99) AS lateness_p99,
		   sum(s.rate_limit) AS rate_limit, sum(s.burst)::int AS burst, sum(s.max_concurrency)::int AS max_concurrency,
		   sum(s.tokens) AS tokens, sum(s.throttled)::bigint AS throttled, sum(s.current_rate) AS current_rate,
		   max(s.weight) AS weight, sum(s.consumer_cap)::int AS consumer_cap
	FROM sched._gather('biz_stats') AS s(node int, biz_type text, delivery text, channel text,
		paused boolean, pending bigint, due_now bigint, awaiting_ack bigint, done bigint, dead bigint,
		delivered_per_sec numeric, lateness_p50 interval, lateness_p99 interval, rate_limit float8,
		burst int, max_concurrency int, tokens numeric, throttled bigint, current_rate numeric, weight int,
		consumer_cap int)
	GROUP BY s.biz_type;

DROP FUNCTION sched._gather_stats();
CREATE FUNCTION sched._gather_stats()
RETURNS TABLE(node int, biz_type text, delivery text, channel text, paused boolean, pending bigint,
	due_now bigint, awaiting_ack bigint, done bigint, dead bigint, delivered_per_sec numeric,
	lateness_p50 interval, lateness_p99 interval, rate_limit float8, burst int, max_concurrency int,
	tokens numeric, throttled bigint, current_rate numeric, weight int, consumer_cap int, unfinished bigint)
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT s.*, s.pending + s.awaiting_ack
	FROM sched._gather('biz_stats') AS s(node int, biz_type text, delivery text, channel text,
		paused boolean, pending bigint, due_now bigint, awaiting_ack bigint, done bigint, dead bigint,
		delivered_per_sec numeric, lateness_p50 interval, lateness_p99 interval, rate_limit float8,
		burst int, max_concurrency int, tokens numeric, throttled bigint, current_rate numeric, weight int,
		consumer_cap int)
$$;
COMMENT ON FUNCTION sched._gather_stats() IS 'internal: sched.biz_stats of every node that answers, with the node';
GRANT EXECUTE ON FUNCTION sched._biz_stats_on(int), sched._gather_stats() TO PUBLIC;


-------------------------------------------------------------------------------
-- Following the nodes (new in 0.3; doc/scale-out.md, "A router that follows
-- its nodes").  A type's rate_limit, burst and max_concurrency are split
-- over the nodes.  While this router follows them (sched.set_following),
-- they are split over the nodes counted (sched.node_follow): a node that
-- stops answering gives its share to the others once the lease it last had
-- has run out, and a node that answers again takes it back once the others
-- have given it up.  Each round (sched.follow_nodes: a worker of the
-- router's server runs one every delaysched.router_follow_interval) leases
-- every counted node that answers its shares for sched.follow.lease; a node
-- without a lease in force delivers nothing of a type with those limits
-- (src/cluster/share_lease.c), so that the cluster never delivers more than
-- its limits while nodes come and go.
-------------------------------------------------------------------------------

CREATE TABLE sched.follow (
	following	boolean PRIMARY KEY DEFAULT true CHECK (following),
	lease		interval NOT NULL CHECK (lease >= interval '1 second' AND lease <= interval '1 hour'),
	since		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	generation	int NOT NULL DEFAULT 0	-- of the split: a new number whenever the counted nodes change
);
COMMENT ON TABLE sched.follow IS 'a row while this router follows its nodes (sched.set_following): how long each lease of a node''s shares lasts';

CREATE TABLE sched.node_follow (
	node		int PRIMARY KEY,
	counted		boolean NOT NULL DEFAULT true,
	generation	int,		-- of the split its shares were last given for
	lease_until	timestamptz,
	answered_at	timestamptz,
	checked_at	timestamptz,
	down_since	timestamptz,	-- when a call to it first failed, since it last answered
	last_error	text
);
COMMENT ON TABLE sched.node_follow IS 'while this router follows its nodes: whether each is counted in the split of the limits, the split its shares were last given for, its lease (by this router''s clock), when it last answered';
REVOKE ALL ON sched.follow, sched.node_follow FROM PUBLIC;
-- Dumped: a router restored from a dump follows its nodes as before (its
-- first round asks every node again).
SELECT pg_catalog.pg_extension_config_dump('sched.follow', '');
SELECT pg_catalog.pg_extension_config_dump('sched.node_follow', '');
-- A split's number comes from a sequence, which a round that rolls back does
-- not take back: its number may already be on nodes, with its shares, and the
-- next round's split (other nodes counted) must not have it too.
CREATE SEQUENCE sched.follow_generation_seq AS int;
REVOKE ALL ON SEQUENCE sched.follow_generation_seq FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('sched.follow_generation_seq', '');

-- The rounds call the nodes through sched._node_query (the router's own
-- library, src/router/delaysched_router.c), not PL/Proxy: each call ends
-- within a second, connecting included, whatever the node does (PL/Proxy has
-- no connect timeout, and cancels by a blocking call to the node), so that a
-- node that hangs does not hold the round up, nor make the others' leases
-- lapse meanwhile.
CREATE FUNCTION sched._node_query(conninfo text, query text, params text[], timeout_ms int) RETURNS text
LANGUAGE c
AS '$libdir/delaysched_router', 'delaysched_node_query';
COMMENT ON FUNCTION sched._node_query(text, text, text[], int) IS 'internal: run a query (its parameters as text, or NULL) on a node within timeout_ms, connecting included; the first value of its last result';
CREATE FUNCTION sched._node_queries(conninfos text[], queries text[], timeout_ms int,
									 OUT ord int, OUT answer text, OUT error text) RETURNS SETOF record
LANGUAGE c STRICT
AS '$libdir/delaysched_router', 'delaysched_node_queries';
COMMENT ON FUNCTION sched._node_queries(text[], text[], int) IS 'internal: run queries on nodes all at once, each within timeout_ms; a row each, its answer or its error';
REVOKE ALL ON FUNCTION sched._node_query(text, text, text[], int), sched._node_queries(text[], text[], int) FROM PUBLIC;

-- A round's call to the node at a position: a second at most.
CREATE FUNCTION sched._follow_query(p int, query text, params text[]) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_conninfo text := (SELECT n.conninfo FROM sched.node n WHERE n.position = p);
BEGIN
	IF v_conninfo IS NULL THEN
		RAISE EXCEPTION 'no node at position %', p USING ERRCODE = 'undefined_object';
	END IF;
	RETURN sched._node_query(v_conninfo, query, params, 1000);
END
$$;
COMMENT ON FUNCTION sched._follow_query(int, text, text[]) IS 'internal: a follow round''s call to the node at a position, within a second';

-- What a round asks a node: renew its lease if it has the shares of split
-- "generation" (-1: only say what it holds); the answer is a jsonb object
-- of sched._share_lease's columns (renewed, remaining, node, generation).
CREATE FUNCTION sched._share_lease_query(seconds float8, generation bigint) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT pg_catalog.format('SELECT pg_catalog.to_jsonb(s) FROM sched._share_lease(%L::float8, %L::bigint) s',
							 seconds, generation)
$$;
COMMENT ON FUNCTION sched._share_lease_query(float8, bigint) IS 'internal: the call that asks a node to renew its lease on its shares';
CREATE FUNCTION sched._share_unfollow_on(p int) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched._share_unfollow(); $$;
REVOKE ALL ON FUNCTION sched._follow_query(int, text, text[]), sched._share_unfollow_on(int) FROM PUBLIC;

-- The nodes the limits are split over: every node, or, while this router
-- follows them, those counted; and a node's place among them.
CREATE FUNCTION sched._split_count() RETURNS int
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT GREATEST(1, count(*))::int
	FROM sched.node n LEFT JOIN sched.node_follow f ON f.node = n.node
	WHERE NOT EXISTS (SELECT FROM sched.follow) OR coalesce(f.counted, true)
$$;
COMMENT ON FUNCTION sched._split_count() IS 'internal: how many nodes the limits are split over';

CREATE FUNCTION sched._split_rank(p_position int) RETURNS int
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT count(*)::int
	FROM sched.node n LEFT JOIN sched.node_follow f ON f.node = n.node
	WHERE n.position < p_position
	  AND (NOT EXISTS (SELECT FROM sched.follow) OR coalesce(f.counted, true))
$$;
COMMENT ON FUNCTION sched._split_rank(int) IS 'internal: how many of the nodes the limits are split over come before a position';

CREATE OR REPLACE FUNCTION sched._share(p_limit float8, p_position int) RETURNS float8
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT p_limit / sched._split_count() $$;

CREATE OR REPLACE FUNCTION sched._share(p_limit int, p_position int) RETURNS int
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT GREATEST(1, p_limit / c + CASE WHEN sched._split_rank(p_position) < p_limit % c THEN 1 ELSE 0 END)::int
	FROM (SELECT sched._split_count() AS c) n
$$;

-- Give one node its share of every type's limits (as it stands in
-- sched.node_follow), and then the split's number, in one transaction
-- there.  Its error, if any, as text.
CREATE FUNCTION sched._give_shares(p_position int, p_generation bigint) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_types jsonb;
	e_message text;
BEGIN
	-- (The types go as a parameter, not in the statement's text: a webhook's
	-- secret and headers are not in the node's log of it.)
	SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
			'name', b.name, 'delivery', b.delivery, 'channel', b.channel, 'max_attempts', b.max_attempts,
			'ack_timeout', b.ack_timeout, 'rate_limit', sched._share(b.rate_limit, p_position),
			'burst', sched._share(b.burst, p_position),
			'max_concurrency', sched._share(b.max_concurrency, p_position), 'url', b.url,
			'headers', b.headers, 'timeout', b.timeout, 'min_backoff', b.min_backoff,
			'max_backoff', b.max_backoff, 'secret', b.secret, 'follow_redirects', b.follow_redirects,
			'weight', b.weight, 'key_max_concurrency', b.key_max_concurrency,
			'key_rate_limit', b.key_rate_limit, 'key_burst', b.key_burst) ORDER BY b.name), '[]')
	INTO v_types
	FROM sched.biz b
	WHERE b.rate_limit IS NOT NULL OR b.burst IS NOT NULL OR b.max_concurrency IS NOT NULL;
	PERFORM sched._follow_query(p_position,
		'SELECT sched._set_share_generation($2::bigint)'
		' FROM (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_to_recordset($1::jsonb) AS b(name text, delivery text,'
		' channel text, max_attempts int, ack_timeout interval, rate_limit float8, burst int, max_concurrency int,'
		' url text, headers jsonb, timeout interval, min_backoff interval, max_backoff interval, secret text,'
		' follow_redirects boolean, weight int, key_max_concurrency int, key_rate_limit float8, key_burst int),'
		' LATERAL (SELECT sched.define_biz(b.name, b.delivery, b.channel, b.max_attempts, b.ack_timeout,'
		' b.rate_limit, b.burst, b.max_concurrency, b.url, b.headers, b.timeout, b.min_backoff, b.max_backoff,'
		' b.secret, b.follow_redirects, b.weight, b.key_max_concurrency, b.key_rate_limit, b.key_burst)) d) n',
		ARRAY[v_types::text, p_generation::text]);
	RETURN NULL;
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS e_message = MESSAGE_TEXT;
	RETURN e_message;
END
$$;
COMMENT ON FUNCTION sched._give_shares(int, bigint) IS 'internal: give a node its share of every split limit, and the split''s number; its error, or NULL';

-- Whether a node out of reach may still hold a lease: the one this router
-- recorded, or one it did not (see sched.follow_nodes, step 2); a node it
-- never marked may be delivering its old share.
CREATE FUNCTION sched._may_hold_lease(x sched.node_follow, p_lease interval) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT x.lease_until IS NULL OR x.down_since IS NULL
		   OR pg_catalog.clock_timestamp() < GREATEST(x.lease_until, x.down_since + p_lease)
$$;
COMMENT ON FUNCTION sched._may_hold_lease(sched.node_follow, interval) IS 'internal: whether a node out of reach may still hold a lease on its shares';
REVOKE ALL ON FUNCTION sched._may_hold_lease(sched.node_follow, interval) FROM PUBLIC;

/*
 * One round of following.  Returns how many nodes the limits are split over
 * after it; NULL if this router does not follow its nodes.  The rule: a node
 * keeps its lease while it has the current split's shares, and a node gets
 * a new one only while no node may hold a lease on another split's.  A split
 * is numbered (sched.follow.generation): one more whenever the nodes counted
 * change, since a node's whole-number shares (burst, max_concurrency) depend
 * on which nodes are counted, not only how many.  Each node knows the number
 * of the split whose shares it has and the lease it holds, and says both at
 * every call (sched.node_follow records what it said): the router's records
 * follow the nodes, whatever became of an earlier round's own transaction.
 *   1. Every node is asked, all at once (sched._share_lease): one counted whose record
 *      says it has the current split's shares and a lease renews it, if it
 *      does have them; any other only says what lease it holds (and is
 *      marked followed: one never marked may still deliver its old share,
 *      so it stays counted until then).  A node that answers as another is
 *      not answering.  (The lease is recorded by this router's clock from
 *      what the node says is left of it.)
 *   2. Counted from now on: the nodes that answered, and those that did not
 *      but may still hold a lease (sched._may_hold_lease).  A node that
 *      answered and was not counted joins only if no node out of reach may
 *      hold one.  A change makes a new split.
 *   3. Each counted node that answered and has another split's shares gets
 *      this one's, those counted before first (they give up what a joining
 *      node takes).
 *   4. Each counted node that answered, has this split's shares and was not
 *      renewed in 1 gets a lease, unless a node may hold one on another
 *      split's shares (giving it this one's failed: it must run out first).
 * One round at a time, and none while a type's limits are being defined (the
 * row of sched.follow is locked, and sched.biz against writes).
 */
CREATE FUNCTION sched.follow_nodes() RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	f sched.follow;
	n record;
	v_round timestamptz := pg_catalog.clock_timestamp();
	v_seconds float8;
	v_before int[];
	v_after int[];
	v_holding boolean;
	v_error text;
	v_renewed int[] := '{}';
	v_nodes int[];
	v_conninfos text[];
	v_queries text[];
	v_answer jsonb;
	v_failure text;
BEGIN
	SELECT * INTO f FROM sched.follow FOR UPDATE;
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;
	LOCK TABLE sched.biz IN SHARE MODE;
	v_seconds := extract(epoch FROM f.lease);
	v_before := ARRAY(SELECT x.node FROM sched.node_follow x WHERE x.counted ORDER BY x.node);
	DELETE FROM sched.node_follow x WHERE NOT EXISTS (SELECT FROM sched.node sn WHERE sn.node = x.node);
	INSERT INTO sched.node_follow (node) SELECT sn.node FROM sched.node sn ON CONFLICT DO NOTHING;

	-- 1. (Every node at once: a round takes the slowest answer, a second at most.)
	SELECT pg_catalog.array_agg(x.node ORDER BY x.position), pg_catalog.array_agg(x.conninfo ORDER BY x.position),
		   pg_catalog.array_agg(sched._share_lease_query(v_seconds,
				CASE WHEN y.counted AND y.generation = f.generation
						  AND coalesce(y.lease_until > pg_catalog.clock_timestamp(), false)
					 THEN f.generation ELSE -1 END) ORDER BY x.position)
	INTO v_nodes, v_conninfos, v_queries
	FROM sched.node x JOIN sched.node_follow y ON y.node = x.node;
	FOR n IN SELECT v_nodes[q.ord] AS node, q.answer, q.error
			 FROM sched._node_queries(coalesce(v_conninfos, '{}'), coalesce(v_queries, '{}'), 1000) q LOOP
		v_failure := n.error;
		-- (An answer that cannot be read is that node's failure, not the round's.)
		BEGIN
			v_answer := CASE WHEN v_failure IS NULL THEN n.answer::jsonb END;
			IF v_failure IS NULL AND (v_answer->>'node')::int IS DISTINCT FROM n.node THEN
				v_failure := pg_catalog.format('answers as node %s', coalesce(v_answer->>'node', 'NULL'));
			END IF;
			IF v_failure IS NULL THEN
				UPDATE sched.node_follow
				SET lease_until = pg_catalog.clock_timestamp()
								  + pg_catalog.make_interval(secs => (v_answer->>'remaining')::float8),
					generation = NULLIF((v_answer->>'generation')::bigint, 0),
					answered_at = v_round, checked_at = v_round, down_since = NULL, last_error = NULL
				WHERE node = n.node;
				IF (v_answer->>'renewed')::boolean THEN
					v_renewed := v_renewed || n.node;
				END IF;
			END IF;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS v_failure = MESSAGE_TEXT;
			v_failure := 'its answer could not be read: ' || v_failure;
		END;
		IF v_failure IS NOT NULL THEN
			UPDATE sched.node_follow
			SET checked_at = v_round, down_since = coalesce(down_since, pg_catalog.clock_timestamp()),
				last_error = v_failure
			WHERE node = n.node;
		END IF;
	END LOOP;

	-- 2.
	v_holding := EXISTS (SELECT FROM sched.node_follow x
						 WHERE x.counted AND x.answered_at IS DISTINCT FROM v_round
						   AND sched._may_hold_lease(x, f.lease));
	UPDATE sched.node_follow x
	SET counted = CASE WHEN x.answered_at = v_round THEN x.counted OR NOT v_holding
					   ELSE x.counted AND sched._may_hold_lease(x, f.lease) END;
	UPDATE sched.node_follow x SET generation = NULL WHERE NOT x.counted AND x.generation IS NOT NULL;
	v_after := ARRAY(SELECT x.node FROM sched.node_follow x WHERE x.counted ORDER BY x.node);
	IF v_after IS DISTINCT FROM v_before THEN
		UPDATE sched.follow SET generation = pg_catalog.nextval('sched.follow_generation_seq') RETURNING * INTO f;
		RAISE LOG 'delaysched_router: the limits are split over nodes %, were %',
			pg_catalog.array_to_string(v_after, ', '), pg_catalog.array_to_string(v_before, ', ');
	END IF;

	-- 3.
	FOR n IN SELECT x.node, x.position
			 FROM sched.node x JOIN sched.node_follow y ON y.node = x.node
			 WHERE y.counted AND y.answered_at = v_round AND y.generation IS DISTINCT FROM f.generation
			 ORDER BY x.node = ANY (v_before) DESC, x.position LOOP
		v_error := sched._give_shares(n.position, f.generation);
		IF v_error IS NULL THEN
			UPDATE sched.node_follow SET generation = f.generation WHERE node = n.node;
		ELSE
			UPDATE sched.node_follow SET last_error = v_error WHERE node = n.node;
		END IF;
	END LOOP;

	-- 4.
	-- (A node never marked has the shares of a split over every node, no
	-- larger than this split's, in which it is counted: it does not hold
	-- the others back.)
	IF NOT EXISTS (SELECT FROM sched.node_follow x
				   WHERE x.generation IS DISTINCT FROM f.generation AND x.lease_until IS NOT NULL
					 AND CASE WHEN x.answered_at = v_round THEN x.lease_until > pg_catalog.clock_timestamp()
							  ELSE sched._may_hold_lease(x, f.lease) END) THEN
		SELECT pg_catalog.array_agg(x.node ORDER BY x.position), pg_catalog.array_agg(x.conninfo ORDER BY x.position),
			   pg_catalog.array_agg(sched._share_lease_query(v_seconds, f.generation) ORDER BY x.position)
		INTO v_nodes, v_conninfos, v_queries
		FROM sched.node x JOIN sched.node_follow y ON y.node = x.node
		WHERE y.counted AND y.answered_at = v_round AND y.generation = f.generation
		  AND NOT x.node = ANY (v_renewed);
		FOR n IN SELECT v_nodes[q.ord] AS node, q.answer, q.error
				 FROM sched._node_queries(coalesce(v_conninfos, '{}'), coalesce(v_queries, '{}'), 1000) q LOOP
			v_failure := n.error;
			IF v_failure IS NULL THEN
				BEGIN
					v_answer := n.answer::jsonb;
					UPDATE sched.node_follow
					SET lease_until = pg_catalog.clock_timestamp()
									  + pg_catalog.make_interval(secs => (v_answer->>'remaining')::float8),
						generation = NULLIF((v_answer->>'generation')::bigint, 0),
						last_error = CASE WHEN (v_answer->>'renewed')::boolean THEN NULL
										  ELSE 'did not take its lease: it has another split''s shares' END
					WHERE node = n.node;
				EXCEPTION WHEN OTHERS THEN
					GET STACKED DIAGNOSTICS v_failure = MESSAGE_TEXT;
					v_failure := 'its answer could not be read: ' || v_failure;
				END;
			END IF;
			IF v_failure IS NOT NULL THEN
				-- (It may have taken the lease before the answer was lost.)
				UPDATE sched.node_follow
				SET last_error = v_failure, lease_until = pg_catalog.clock_timestamp() + f.lease
				WHERE node = n.node;
			END IF;
		END LOOP;
	END IF;
	RETURN pg_catalog.cardinality(v_after);
END
$$;
COMMENT ON FUNCTION sched.follow_nodes() IS 'one round of following the nodes: lease each its shares, and split the limits anew over those that answer; the number of nodes they are split over (NULL: not following)';
REVOKE ALL ON FUNCTION sched._give_shares(int, bigint), sched.follow_nodes() FROM PUBLIC;
-- (As sched._share, which every administrator's define_biz calls; they
-- read only how many nodes are counted, as their owner.)
GRANT EXECUTE ON FUNCTION sched._split_count(), sched._split_rank(int) TO PUBLIC;

/*
 * Start or stop following the nodes.  Starting counts every node and gives
 * no lease yet: the first round does.  Stopping needs every node to answer
 * (each is told it needs no lease any more, then given its share of a
 * split over every node), as the other administration calls do.
 */
CREATE FUNCTION sched.set_following(follow boolean, lease interval DEFAULT '3 seconds') RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	b sched.biz;
	v_was boolean := EXISTS (SELECT FROM sched.follow);
BEGIN
	PERFORM sched._require(follow, 'follow');
	PERFORM sched._require(lease, 'lease');
	IF lease < interval '1 second' OR lease > interval '1 hour' THEN
		RAISE EXCEPTION 'lease must be between 1 second and 1 hour, not %', lease
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'A node that stops answering gives its share to the others after its lease; a few seconds suit a round a second.';
	END IF;
	IF follow THEN
		-- (A split number of its own: nodes may still have the last one of an
		-- earlier following, and 0 is what a node says when it has none.)
		INSERT INTO sched.follow (lease, generation)
		VALUES (set_following.lease, pg_catalog.nextval('sched.follow_generation_seq'))
		ON CONFLICT (following) DO UPDATE SET lease = excluded.lease;
		IF NOT v_was THEN
			DELETE FROM sched.node_follow;
			INSERT INTO sched.node_follow (node) SELECT n.node FROM sched.node n;
		END IF;
		RETURN NOT v_was;
	END IF;
	IF NOT v_was THEN
		RETURN false;
	END IF;
	-- Every node split over again, then told it needs no lease.
	DELETE FROM sched.follow;
	DELETE FROM sched.node_follow;
	FOR b IN SELECT * FROM sched.biz x
			 WHERE x.rate_limit IS NOT NULL OR x.burst IS NOT NULL OR x.max_concurrency IS NOT NULL
			 ORDER BY x.name LOOP
		PERFORM sched._on_every_node('set_following', sched._define_call(b));
	END LOOP;
	PERFORM sched._on_every_node('set_following', 'SELECT sched._share_unfollow_on($1)::text');
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.set_following(boolean, interval) IS 'start or stop following the nodes (sched.follow_nodes): split the limits over the nodes that answer, each holding its shares under a lease; true if it changed';
REVOKE ALL ON FUNCTION sched.set_following(boolean, interval) FROM PUBLIC;

-- Which nodes the limits are split over, as the last round saw them.
CREATE VIEW sched.node_shares AS
	SELECT n.node, n.position, f.counted, f.lease_until, f.answered_at, f.checked_at, f.down_since, f.last_error
	FROM sched.node n JOIN sched.node_follow f ON f.node = n.node;
COMMENT ON VIEW sched.node_shares IS 'while this router follows its nodes: whether each is counted in the split of the limits, its lease, when it last answered and why not';
REVOKE ALL ON sched.node_shares FROM PUBLIC;
