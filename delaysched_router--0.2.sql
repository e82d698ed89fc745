/*
 * delaysched_router--0.2.sql
 *		A router database for several delaysched nodes, over PL/Proxy.
 *
 * The router offers delaysched's public functions and views with the same
 * signatures and columns, and sends each call to the node it concerns:
 *	 - adds with a dedupe key to the owner of (biz_type, dedupe_key), chosen
 *	   by rendezvous hashing over the node numbers; adds without one to a
 *	   node picked at random, the next one if it cannot be reached;
 *	 - calls that take a task id to the node whose number the id carries
 *	   (id = node * 2^48 + the node's own id, see sched.set_node_number on
 *	   the nodes);
 *	 - administration (define_biz, drop_biz, pause, resume, grant_biz,
 *	   revoke_biz) to every node, one after the other, after checking that
 *	   every node answers; rate limits are split across the nodes;
 *	 - the views gather every node's rows.
 *
 * Tables (the router's own, kept by pg_dump):
 *	 sched.node			the node list: number, position, conninfo
 *	 sched.biz			business types as defined through the router (the
 *						cluster-wide limits; set_nodes re-applies them)
 *	 sched.biz_grant	grants made through the router
 *	 sched.schedule_home	which node each schedule lives on
 *	 sched.node_version	the version of the list PL/Proxy is told
 *	 sched.node_zero	a row once a node 0 has been given
 *
 * PL/Proxy's cluster "delaysched" is configured by the functions PL/Proxy
 * looks for, plproxy.get_cluster_version/partitions/config, which read
 * sched.node: partition i is the node at position i (modular_mapping, so
 * any number of nodes).  The version is new at every set_nodes, so every
 * session sees a new list at its next call (and a rolled-back one goes).
 * Not a foreign server: a role with USAGE on one could map itself to
 * another user; here PL/Proxy always connects as the current user.
 *
 * Every function runs as its caller: PL/Proxy connects to the nodes as
 * the current user, and each node checks that role's privileges as if it
 * had connected directly.  The exceptions, SECURITY DEFINER, only read the
 * node list for PL/Proxy (plproxy.get_cluster_version, _partitions) or
 * record what a node says (sched._set_schedule_home).
 *
 * See doc/scale-out.md.
 */

\echo Use "CREATE EXTENSION delaysched_router" to load this file. \quit

DO $$
BEGIN
	IF EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'delaysched') THEN
		RAISE EXCEPTION 'delaysched_router cannot be created in a database that has delaysched'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Make the router a database of its own; the nodes keep delaysched.';
	END IF;
END
$$;

-------------------------------------------------------------------------------
-- The router's tables
-------------------------------------------------------------------------------

CREATE TABLE sched.node (
	node		int PRIMARY KEY CHECK (node BETWEEN 0 AND 32767),
	position	int NOT NULL UNIQUE CHECK (position >= 0),
	conninfo	text NOT NULL,
	added_at	timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE sched.node IS 'the delaysched nodes behind this router (change with sched.set_nodes): the number their task ids carry, and their PL/Proxy partition';

-- New node numbers; set_nodes moves it past every number a node reports.
CREATE SEQUENCE sched.node_number_seq MINVALUE 1 MAXVALUE 32767;

CREATE TABLE sched.biz (
	name			text PRIMARY KEY,
	delivery		text NOT NULL,
	channel			text,
	max_attempts	int,
	ack_timeout		interval,
	rate_limit		float8,
	burst			int,
	max_concurrency	int,
	url				text,
	headers			jsonb,
	timeout			interval,
	min_backoff		interval,
	max_backoff		interval,
	secret			text,
	follow_redirects boolean,
	paused			boolean NOT NULL DEFAULT false,
	updated_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	weight			int NOT NULL DEFAULT 1
);
COMMENT ON TABLE sched.biz IS 'business types defined through the router, with their cluster-wide limits (each node gets its share)';

CREATE TABLE sched.biz_grant (
	biz_type	text NOT NULL REFERENCES sched.biz ON DELETE CASCADE,
	role_name	text NOT NULL,
	privilege	text NOT NULL,
	PRIMARY KEY (biz_type, role_name, privilege)
);
COMMENT ON TABLE sched.biz_grant IS 'grants made through the router (sched.grant_biz), given to every node';

CREATE TABLE sched.schedule_home (
	name	text PRIMARY KEY,
	node	int NOT NULL
);
COMMENT ON TABLE sched.schedule_home IS 'the node each recurring schedule defined through the router lives on';

-- The version PL/Proxy is told the node list has, written with it by
-- sched.set_nodes (read before every call to a node, so kept rather than
-- computed).  PL/Proxy loads the list again when the version differs from
-- the one it has, so a list rolled back is loaded back too; a sequence
-- gives it, so that no version is given twice (a session that saw a list
-- that was rolled back must not take a later list for it).
CREATE TABLE sched.node_version (
	one		boolean PRIMARY KEY DEFAULT true CHECK (one),
	version	int NOT NULL
);
COMMENT ON TABLE sched.node_version IS 'the version of the node list PL/Proxy sees';
CREATE SEQUENCE sched.node_version_seq AS int;

-- A row once a node 0 has been given (see sched.set_nodes): another
-- database that made ids as node 0 is refused after that.
CREATE TABLE sched.node_zero (
	given boolean PRIMARY KEY CHECK (given)
);
COMMENT ON TABLE sched.node_zero IS 'a row once this router has had a node 0';

SELECT pg_catalog.pg_extension_config_dump('sched.node', '');
SELECT pg_catalog.pg_extension_config_dump('sched.node_zero', '');
SELECT pg_catalog.pg_extension_config_dump('sched.node_version', '');
SELECT pg_catalog.pg_extension_config_dump('sched.node_version_seq', '');
SELECT pg_catalog.pg_extension_config_dump('sched.node_number_seq', '');
SELECT pg_catalog.pg_extension_config_dump('sched.biz', '');
SELECT pg_catalog.pg_extension_config_dump('sched.biz_grant', '');
SELECT pg_catalog.pg_extension_config_dump('sched.schedule_home', '');

-------------------------------------------------------------------------------
-- PL/Proxy's cluster "delaysched": the functions PL/Proxy calls (as the
-- calling role, hence SECURITY DEFINER to read sched.node).
-------------------------------------------------------------------------------

DO $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = 'plproxy') THEN
		CREATE SCHEMA plproxy;
	ELSIF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
					  WHERE n.nspname = 'plproxy' AND r.rolsuper) THEN
		-- Its owner could replace the functions that say where the nodes are.
		RAISE EXCEPTION 'schema plproxy exists and is not owned by a superuser'
			USING ERRCODE = 'insufficient_privilege',
				  HINT = 'delaysched_router defines PL/Proxy''s cluster functions in it; drop it, or give it to a superuser.';
	ELSIF EXISTS (SELECT FROM pg_catalog.pg_proc WHERE proname LIKE 'get\_cluster\_%'
					AND pronamespace = 'plproxy'::regnamespace) THEN
		RAISE EXCEPTION 'this database has PL/Proxy cluster functions already'
			USING ERRCODE = 'duplicate_function',
				  HINT = 'delaysched_router defines plproxy.get_cluster_version, get_cluster_partitions and get_cluster_config; make the router a database of its own.';
	END IF;
END
$$;

CREATE FUNCTION sched._cluster_check(cluster_name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF cluster_name IS DISTINCT FROM 'delaysched' THEN
		RAISE EXCEPTION 'unknown PL/Proxy cluster "%"', cluster_name
			USING ERRCODE = 'undefined_object',
				  HINT = 'This router database knows one cluster, "delaysched".';
	END IF;
END
$$;
COMMENT ON FUNCTION sched._cluster_check(text) IS 'internal: only the cluster "delaysched" is known';

-- (plpgsql, not sql: PL/Proxy calls it before every call to a node, and a
-- plpgsql function keeps its plan where a sql one is planned each time.)
CREATE FUNCTION plproxy.get_cluster_version(cluster_name text) RETURNS int
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF cluster_name IS DISTINCT FROM 'delaysched' THEN
		PERFORM sched._cluster_check(cluster_name);
	END IF;
	RETURN coalesce((SELECT v.version FROM sched.node_version v), 0);
END
$$;
COMMENT ON FUNCTION plproxy.get_cluster_version(text) IS 'PL/Proxy: the version of the delaysched node list (a new one at every sched.set_nodes)';

CREATE FUNCTION plproxy.get_cluster_partitions(cluster_name text) RETURNS SETOF text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT n.conninfo FROM sched.node n, (SELECT sched._cluster_check(cluster_name)) c ORDER BY n.position
$$;
COMMENT ON FUNCTION plproxy.get_cluster_partitions(text) IS 'PL/Proxy: the delaysched nodes, in position order';

CREATE FUNCTION plproxy.get_cluster_config(cluster_name text, OUT key text, OUT val text) RETURNS SETOF record
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT 'modular_mapping', '1' FROM (SELECT sched._cluster_check(cluster_name)) c
$$;
COMMENT ON FUNCTION plproxy.get_cluster_config(text) IS 'PL/Proxy: any number of nodes (modular_mapping)';

-------------------------------------------------------------------------------
-- Routing
-------------------------------------------------------------------------------

CREATE FUNCTION sched._require(value anyelement, what text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF value IS NULL THEN
		RAISE EXCEPTION '% must not be null', what USING ERRCODE = 'null_value_not_allowed';
	END IF;
END
$$;
COMMENT ON FUNCTION sched._require(anyelement, text) IS 'internal: null_value_not_allowed unless value is given';

CREATE FUNCTION sched._no_nodes() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	RAISE EXCEPTION 'this router has no nodes'
		USING ERRCODE = 'object_not_in_prerequisite_state',
			  HINT = 'Give it its nodes with SELECT sched.set_nodes(ARRAY[''host=... dbname=...'', ...]).';
END
$$;
COMMENT ON FUNCTION sched._no_nodes() IS 'internal: the error of a call made before sched.set_nodes';

CREATE FUNCTION sched.node_of(id bigint) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (id >> 48)::int $$;
COMMENT ON FUNCTION sched.node_of(bigint) IS 'the number of the node that made a task id';

-- The node of a task id, or a clear error for an id no node of the list made.
CREATE FUNCTION sched._node_of_id(p_id bigint) RETURNS sched.node
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n sched.node;
BEGIN
	PERFORM sched._require(p_id, 'id');
	IF p_id <= 0 THEN
		RAISE EXCEPTION 'invalid task id %', p_id
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Task ids are positive; they come from sched.add, sched.claim or a NOTIFY message.';
	END IF;
	SELECT * INTO n FROM sched.node x WHERE x.node = sched.node_of(p_id);
	IF NOT FOUND THEN
		IF NOT EXISTS (SELECT FROM sched.node) THEN
			PERFORM sched._no_nodes();
		END IF;
		RAISE EXCEPTION 'task id % belongs to node %, which is not in this router''s node list', p_id, sched.node_of(p_id)
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'An id carries the number of the node that made it (sched.node_of). A removed node''s tasks are reached on the node itself.';
	END IF;
	RETURN n;
END
$$;
COMMENT ON FUNCTION sched._node_of_id(bigint) IS 'internal: the node that made a task id; an error if no listed node did';

-- The owner of a dedupe key: the node with the highest hash of (key, node
-- number).  Adding a node moves only the keys it now wins; removing one,
-- only its own.
CREATE FUNCTION sched._owner(p_biz text, p_key text) RETURNS sched.node
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n sched.node;
BEGIN
	SELECT * INTO n FROM sched.node x
	ORDER BY pg_catalog.hashtextextended(p_biz || ':' || p_key, x.node) DESC, x.node
	LIMIT 1;
	IF NOT FOUND THEN
		PERFORM sched._no_nodes();
	END IF;
	RETURN n;
END
$$;
COMMENT ON FUNCTION sched._owner(text, text) IS 'internal: the node that holds the tasks of a (biz_type, dedupe_key)';

-- Every node, in a random order: where adds without a dedupe key go (the
-- next when one does not answer, so the others share its part), and the
-- order claims visit them.
CREATE FUNCTION sched._nodes_in_turn() RETURNS SETOF sched.node
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT x.* FROM sched.node x ORDER BY pg_catalog.random() $$;
COMMENT ON FUNCTION sched._nodes_in_turn() IS 'internal: every node, in a random order';

CREATE FUNCTION sched._label(p_node int) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT pg_catalog.format('node %s (%s)', p_node,
							 coalesce((SELECT x.conninfo FROM sched.node x WHERE x.node = p_node), 'not listed'))
$$;
COMMENT ON FUNCTION sched._label(int) IS 'internal: a node as errors name it';

-------------------------------------------------------------------------------
-- Errors from the nodes.  PL/Proxy reports a node's own error with its
-- SQLSTATE and "...: [db] REMOTE ERROR: " before the message; a failure to
-- reach the node (connect, lost connection, timeout) as XX000 "PL/Proxy
-- function ...".
-------------------------------------------------------------------------------

CREATE FUNCTION sched._unreachable(p_state text, p_message text) RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT p_state = 'XX000' AND p_message LIKE 'PL/Proxy function %'
		   AND pg_catalog.strpos(p_message, 'REMOTE ERROR: ') = 0
$$;
COMMENT ON FUNCTION sched._unreachable(text, text) IS 'internal: is a PL/Proxy error a failure to reach the node (not the node''s own error)';

-- A failure to connect: the call never reached the node, so it may go to
-- another.  (A connection lost after the call was sent may have committed
-- there: not this.)
CREATE FUNCTION sched._not_sent(p_state text, p_message text) RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT sched._unreachable(p_state, p_message)
		   AND p_message ~ '(PQconnectStart|PQconnectPoll|connect timeout|connect failed)'
$$;
COMMENT ON FUNCTION sched._not_sent(text, text) IS 'internal: did a PL/Proxy call fail before it reached the node (so another node may take it)';

-- RAISE with the options that are given (an option cannot be null).
CREATE FUNCTION sched._raise_as(p_state text, p_message text, p_detail text, p_hint text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF p_detail IS NULL AND p_hint IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = p_state, MESSAGE = p_message;
	ELSIF p_hint IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = p_state, MESSAGE = p_message, DETAIL = p_detail;
	ELSIF p_detail IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = p_state, MESSAGE = p_message, HINT = p_hint;
	END IF;
	RAISE EXCEPTION USING ERRCODE = p_state, MESSAGE = p_message, DETAIL = p_detail, HINT = p_hint;
END
$$;
COMMENT ON FUNCTION sched._raise_as(text, text, text, text) IS 'internal: raise an error with the detail and hint that are not null';

/*
 * Raise again an error a call to node p_node gave: the node's own error as
 * the node gave it (SQLSTATE, message, detail, hint), without PL/Proxy's
 * prefixes; a failure to reach it as connection_failure naming the node.
 */
CREATE FUNCTION sched._raise_node_error(p_node int, p_state text, p_message text, p_detail text, p_hint text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_at int := pg_catalog.strpos(p_message, 'REMOTE ERROR: ');
BEGIN
	IF v_at > 0 THEN
		PERFORM sched._raise_as(p_state, pg_catalog.substr(p_message, v_at + 14),
								pg_catalog.regexp_replace(nullif(p_detail, ''), '^Remote detail: ', ''),
								pg_catalog.regexp_replace(nullif(p_hint, ''), '^Remote hint: ', ''));
	ELSIF sched._unreachable(p_state, p_message) THEN
		PERFORM sched._raise_as('08006', sched._label(p_node) || ' is unavailable',
			pg_catalog.rtrim(pg_catalog.regexp_replace(p_message, '^PL/Proxy function [^:]*: (\[[^]]*\] )?', ''), E' \n'),
			coalesce(nullif(p_hint, ''),
					 'Its tasks stay stored on it and are delivered when it is back; calls for its ids and its dedupe keys work again then.'));
	END IF;
	PERFORM sched._raise_as(p_state, p_message, nullif(p_detail, ''), nullif(p_hint, ''));
END
$$;
COMMENT ON FUNCTION sched._raise_node_error(int, text, text, text, text) IS 'internal: raise again, cleanly and naming the node, an error a node call gave';

-------------------------------------------------------------------------------
-- The calls PL/Proxy sends.  Each takes the node's position (its partition)
-- first, and runs the node's function of the same name with the rest.
-- Roles go by name: an oid means nothing on another server.
-------------------------------------------------------------------------------

CREATE FUNCTION sched._set_node_number_at(conninfo text, node int) RETURNS boolean
LANGUAGE plproxy AS $$ CONNECT conninfo; SELECT sched.set_node_number(node); $$;
CREATE FUNCTION sched._node_number_on(p int) RETURNS int
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.node_number(); $$;

CREATE FUNCTION sched._add_on(p int, biz_type text, run_at timestamptz, payload jsonb, dedupe_key text) RETURNS bigint
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.add(biz_type, run_at, payload, dedupe_key); $$;
CREATE FUNCTION sched._add_after_on(p int, biz_type text, delay interval, payload jsonb, dedupe_key text) RETURNS bigint
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.add_after(biz_type, delay, payload, dedupe_key); $$;
CREATE FUNCTION sched._add_many_on(p int, biz_type text, run_ats timestamptz[], payloads jsonb[], dedupe_keys text[])
RETURNS SETOF bigint
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT a AS _add_many_on FROM sched.add_many(biz_type, run_ats, payloads, dedupe_keys) a; $$;
CREATE FUNCTION sched._cancel_on(p int, id bigint) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.cancel(id); $$;
CREATE FUNCTION sched._reschedule_on(p int, id bigint, run_at timestamptz) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.reschedule(id, run_at); $$;
CREATE FUNCTION sched._ack_on(p int, id bigint) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.ack(id); $$;
CREATE FUNCTION sched._ack_many_on(p int, ids bigint[]) RETURNS int
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.ack_many(ids); $$;
CREATE FUNCTION sched._nack_on(p int, id bigint, retry_in interval, error text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.nack(id, retry_in, error); $$;
CREATE FUNCTION sched._retry_on(p int, id bigint) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.retry(id); $$;
CREATE FUNCTION sched._claim_on(p int, biz_type text, max_tasks int)
RETURNS TABLE(id bigint, biz_type text, run_at timestamptz, payload jsonb, attempt int, schedule text)
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT c.id, c.biz_type, c.run_at, c.payload, c.attempt, c.schedule FROM sched.claim(biz_type, max_tasks) c; $$;

CREATE FUNCTION sched._define_biz_on(p int, name text, delivery text, channel text, max_attempts int,
	ack_timeout interval, rate_limit float8, burst int, max_concurrency int, url text, headers jsonb,
	timeout interval, min_backoff interval, max_backoff interval, secret text, follow_redirects boolean,
	weight int)
RETURNS void
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT sched.define_biz(name, delivery, channel, max_attempts, ack_timeout, rate_limit, burst,
		max_concurrency, url, headers, timeout, min_backoff, max_backoff, secret, follow_redirects,
		weight); $$;
CREATE FUNCTION sched._drop_biz_on(p int, name text, cancel_tasks boolean) RETURNS bigint
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.drop_biz(name, cancel_tasks); $$;
CREATE FUNCTION sched._pause_on(p int, biz_type text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.pause(biz_type); $$;
CREATE FUNCTION sched._resume_on(p int, biz_type text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.resume(biz_type); $$;
CREATE FUNCTION sched._grant_biz_on(p int, biz_type text, role_name text, privilege text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT sched.grant_biz(biz_type, role_name::regrole, privilege); $$;
CREATE FUNCTION sched._revoke_biz_on(p int, biz_type text, role_name text, privilege text) RETURNS int
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT sched.revoke_biz(biz_type, role_name::regrole, privilege); $$;

CREATE FUNCTION sched._define_schedule_on(p int, name text, biz_type text, schedule text, payload jsonb,
	time_zone text, catch_up text, starts_at timestamptz, ends_at timestamptz, allow_overlap boolean)
RETURNS timestamptz
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT sched.define_schedule(name, biz_type, schedule, payload, time_zone, catch_up, starts_at,
		ends_at, allow_overlap); $$;
CREATE FUNCTION sched._drop_schedule_on(p int, name text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.drop_schedule(name); $$;
CREATE FUNCTION sched._pause_schedule_on(p int, name text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.pause_schedule(name); $$;
CREATE FUNCTION sched._resume_schedule_on(p int, name text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.resume_schedule(name); $$;
CREATE FUNCTION sched._next_runs_on(p int, schedule text, time_zone text, after timestamptz, n int,
	starts_at timestamptz)
RETURNS SETOF timestamptz
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT r AS _next_runs_on FROM sched.next_runs(schedule, time_zone, after, n, starts_at) r; $$;

CREATE FUNCTION sched._tasks_on(p int)
RETURNS TABLE(id bigint, biz_type text, run_at timestamptz, state text, attempt int, payload jsonb,
	dedupe_key text, created_at timestamptz, delivered_at timestamptz, last_error text,
	lease_until timestamptz, finished_at timestamptz, schedule text, status text)
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT t.id, t.biz_type, t.run_at, t.state, t.attempt, t.payload, t.dedupe_key, t.created_at,
		t.delivered_at, t.last_error, t.lease_until, t.finished_at, t.schedule, t.status FROM sched.tasks t; $$;
CREATE FUNCTION sched._biz_stats_on(p int)
RETURNS TABLE(biz_type text, delivery text, channel text, paused boolean, pending bigint, due_now bigint,
	awaiting_ack bigint, done bigint, dead bigint, delivered_per_sec numeric, lateness_p50 interval,
	lateness_p99 interval, rate_limit float8, burst int, max_concurrency int, tokens numeric,
	throttled bigint, current_rate numeric, weight int)
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT s.biz_type, s.delivery, s.channel, s.paused, s.pending, s.due_now, s.awaiting_ack, s.done,
		s.dead, s.delivered_per_sec, s.lateness_p50, s.lateness_p99, s.rate_limit, s.burst,
		s.max_concurrency, s.tokens, s.throttled, s.current_rate, s.weight FROM sched.biz_stats s; $$;
CREATE FUNCTION sched._schedules_on(p int)
RETURNS TABLE(name text, biz_type text, schedule text, time_zone text, catch_up text, allow_overlap boolean,
	paused boolean, starts_at timestamptz, ends_at timestamptz, next_run_at timestamptz,
	last_run_at timestamptz, last_task_id bigint, runs bigint, missed bigint, payload jsonb,
	created_at timestamptz, updated_at timestamptz)
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p;
	SELECT s.name, s.biz_type, s.schedule, s.time_zone, s.catch_up, s.allow_overlap, s.paused,
		s.starts_at, s.ends_at, s.next_run_at, s.last_run_at, s.last_task_id, s.runs, s.missed,
		s.payload, s.created_at, s.updated_at FROM sched.schedules s; $$;

-------------------------------------------------------------------------------
-- Calls on every node (administration).
--
-- The guarantee: first every node must answer, as the node its number says
-- (else an error naming it, and nothing is changed); then the call runs on
-- the nodes one after the other, in position order, each in its own
-- transaction there.  An error every node would give (bad input) comes from
-- the first, before any node changed.  A node that fails after others have
-- changed is named, with the nodes that did change; the calls are
-- idempotent, so the same call again finishes the job.
-------------------------------------------------------------------------------

CREATE FUNCTION sched._check_nodes() RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n sched.node;
	v_count int := 0;
	v_number int;
	e_state text; e_message text; e_detail text; e_hint text;
BEGIN
	FOR n IN SELECT * FROM sched.node x ORDER BY x.position LOOP
		BEGIN
			v_number := sched._node_number_on(n.position);
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
									e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
			PERFORM sched._raise_node_error(n.node, e_state, e_message, e_detail, e_hint);
		END;
		IF v_number <> n.node THEN
			RAISE EXCEPTION '% answers as node %', sched._label(n.node), v_number
				USING ERRCODE = 'object_not_in_prerequisite_state',
					  HINT = 'Its conninfo reaches another database now; call sched.set_nodes again.';
		END IF;
		v_count := v_count + 1;
	END LOOP;
	IF v_count = 0 THEN
		PERFORM sched._no_nodes();
	END IF;
	RETURN v_count;
END
$$;
COMMENT ON FUNCTION sched._check_nodes() IS 'internal: check that every node answers as itself; the number of nodes';

-- Run p_call (a statement of one value, $1 the node's position) on every
-- node, as above; the values in position order, as text.
CREATE FUNCTION sched._on_every_node(p_what text, p_call text) RETURNS text[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n sched.node;
	v_value text;
	v_values text[] := '{}';
	v_done int[] := '{}';
	e_state text; e_message text; e_detail text; e_hint text;
BEGIN
	PERFORM sched._check_nodes();
	FOR n IN SELECT * FROM sched.node x ORDER BY x.position LOOP
		BEGIN
			EXECUTE p_call INTO v_value USING n.position;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
									e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
			IF v_done = '{}' THEN
				PERFORM sched._raise_node_error(n.node, e_state, e_message, e_detail, e_hint);
			END IF;
			RAISE EXCEPTION '% failed on %: %', p_what, sched._label(n.node),
					pg_catalog.regexp_replace(e_message, '^.*REMOTE ERROR: ', '')
				USING ERRCODE = CASE WHEN sched._unreachable(e_state, e_message) THEN 'connection_failure' ELSE e_state END,
					  DETAIL = pg_catalog.format('It was done on node%s %s; not on this node or those after it.',
												 CASE WHEN cardinality(v_done) > 1 THEN 's' ELSE '' END,
												 pg_catalog.array_to_string(v_done, ', ')),
					  HINT = 'The same call again does the rest: on a node that has it already, it changes nothing.';
		END;
		v_values := v_values || v_value;
		v_done := v_done || n.node;
	END LOOP;
	RETURN v_values;
END
$$;
COMMENT ON FUNCTION sched._on_every_node(text, text) IS 'internal: run a call on every node in turn, naming a node that fails and those already done';

-- A node's share of a cluster-wide limit: rate limits divide; whole
-- numbers divide with the remainder to the first nodes, at least 1 each.
CREATE FUNCTION sched._share(p_limit float8, p_position int) RETURNS float8
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT p_limit / (SELECT count(*) FROM sched.node) $$;
COMMENT ON FUNCTION sched._share(float8, int) IS 'internal: a node''s share of a cluster-wide rate limit';

CREATE FUNCTION sched._share(p_limit int, p_position int) RETURNS int
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT GREATEST(1, p_limit / c + CASE WHEN p_position < p_limit % c THEN 1 ELSE 0 END)::int
	FROM (SELECT count(*)::int AS c FROM sched.node) n
$$;
COMMENT ON FUNCTION sched._share(int, int) IS 'internal: a node''s share of a cluster-wide burst or max_concurrency';

-- The cluster-wide limits, checked before they are split (a node checks
-- its share; a share the node would refuse, or one it would accept from a
-- value it should not, is the cluster value's fault).
CREATE FUNCTION sched._check_limits(p_rate float8, p_burst int, p_max_concurrency int) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_nodes int := (SELECT count(*) FROM sched.node);
BEGIN
	IF p_rate IS NOT NULL AND p_rate NOT IN ('NaN', 'Infinity', '-Infinity')
	   AND v_nodes > 0 AND p_rate / v_nodes < 0.001 THEN
		RAISE EXCEPTION 'rate_limit % split over % nodes is % per node, below the 0.001 a node takes', p_rate, v_nodes, p_rate / v_nodes
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Give a rate_limit of at least 0.001 times the number of nodes.';
	END IF;
	IF p_burst < 1 OR p_burst > 1000000 THEN
		RAISE EXCEPTION 'burst must be between 1 and 1000000, not %', p_burst
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF p_max_concurrency < 1 OR p_max_concurrency > 100000 THEN
		RAISE EXCEPTION 'max_concurrency must be between 1 and 100000, not %', p_max_concurrency
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
END
$$;
COMMENT ON FUNCTION sched._check_limits(float8, int, int) IS 'internal: check cluster-wide limits before they are split';

-- The call that gives a node its share of a type (the define_biz of every
-- node, and of set_nodes).
CREATE FUNCTION sched._define_call(b sched.biz) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT pg_catalog.format(
		'SELECT sched._define_biz_on($1, %L, %L, %L, %L, %L, sched._share(%L::float8, $1), sched._share(%L::int, $1),'
		' sched._share(%L::int, $1), %L, %L, %L, %L, %L, %L, %L, %L)',
		b.name, b.delivery, b.channel, b.max_attempts, b.ack_timeout, b.rate_limit, b.burst,
		b.max_concurrency, b.url, b.headers, b.timeout, b.min_backoff, b.max_backoff, b.secret,
		b.follow_redirects, b.weight)
$$;
COMMENT ON FUNCTION sched._define_call(sched.biz) IS 'internal: the call that defines a type on a node, with the node''s share of its limits';

-------------------------------------------------------------------------------
-- The node list
-------------------------------------------------------------------------------

-- Give one node everything defined through the router: each type with the
-- node's share of its limits, its pause, and its grants.
CREATE FUNCTION sched._sync_node(n sched.node) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	b sched.biz;
	g sched.biz_grant;
	e_state text; e_message text; e_detail text; e_hint text;
BEGIN
	FOR b IN SELECT * FROM sched.biz x ORDER BY x.name LOOP
		EXECUTE sched._define_call(b) USING n.position;
		IF b.paused THEN
			PERFORM sched._pause_on(n.position, b.name);
		ELSE
			PERFORM sched._resume_on(n.position, b.name);
		END IF;
	END LOOP;
	FOR g IN SELECT * FROM sched.biz_grant x ORDER BY x.biz_type, x.role_name, x.privilege LOOP
		PERFORM sched._grant_biz_on(n.position, g.biz_type, g.role_name, g.privilege);
	END LOOP;
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
							e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
	PERFORM sched._raise_node_error(n.node, e_state, e_message, e_detail, e_hint);
END
$$;
COMMENT ON FUNCTION sched._sync_node(sched.node) IS 'internal: give a node every type, pause and grant defined through the router';

-- A conninfo set_nodes accepts: key=value pairs of the keywords below,
-- values without quotes, spaces or "=".  Not user or service: PL/Proxy
-- connects as the calling role only when the conninfo names no user (it
-- looks for "user=" anywhere in it), and a service file can name one.
-- Not password: every role can read the node list.  Not options: they
-- could set what the node lets no client set for itself.  Not a URI.
CREATE FUNCTION sched._check_conninfo(p_conninfo text, p_index int) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_pair text;
	v_key text;
BEGIN
	IF p_conninfo IS NULL OR pg_catalog.btrim(p_conninfo) = '' THEN
		RAISE EXCEPTION 'conninfos[%] is empty', p_index USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF p_conninfo ~* '^\s*postgres(ql)?://' THEN
		RAISE EXCEPTION 'conninfos[%] is a URI', p_index
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Give key=value pairs, such as ''host=10.0.0.1 port=5432 dbname=app''.';
	END IF;
	FOR v_pair IN SELECT x FROM pg_catalog.regexp_split_to_table(pg_catalog.btrim(p_conninfo), '\s+') x LOOP
		IF v_pair !~ '^[a-z_]+=[^''"\\=]+$' THEN
			RAISE EXCEPTION 'conninfos[%] has "%", not a key=value pair', p_index, v_pair
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'Give key=value pairs separated by spaces, the values without quotes, spaces or =.';
		END IF;
		v_key := pg_catalog.split_part(v_pair, '=', 1);
		IF v_key IN ('password', 'sslpassword') THEN
			RAISE EXCEPTION 'conninfos[%] holds a password', p_index
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'Every role of the router can read the node list. Keep passwords in the .pgpass file of the router''s server account (or name one with passfile=).';
		END IF;
		IF v_key IN ('user', 'service') THEN
			RAISE EXCEPTION 'conninfos[%] names a % for the connection', p_index, v_key
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'The router connects to a node as the role calling it, so that the node checks that role''s privileges; a user here would make every role that user.';
		END IF;
		IF v_key NOT IN ('host', 'hostaddr', 'port', 'dbname', 'connect_timeout', 'application_name',
						 'passfile', 'sslmode', 'sslcert', 'sslkey', 'sslrootcert', 'sslcrl', 'sslcrldir',
						 'sslsni', 'sslcompression', 'requirepeer', 'channel_binding', 'gssencmode',
						 'krbsrvname', 'target_session_attrs', 'keepalives', 'keepalives_idle',
						 'keepalives_interval', 'keepalives_count', 'tcp_user_timeout', 'client_encoding') THEN
			RAISE EXCEPTION 'conninfos[%] has the keyword "%", which a node''s conninfo may not have', p_index, v_key
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'Allowed: host, hostaddr, port, dbname, connect_timeout, application_name, passfile, the ssl and gss settings, target_session_attrs, keepalives, tcp_user_timeout, client_encoding.';
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION sched._check_conninfo(text, int) IS 'internal: refuse a node conninfo that names a user, a service or a password, or is not plain key=value pairs';

CREATE FUNCTION sched._node_state_at(conninfo text, OUT node int, OUT made_ids boolean, OUT joined boolean)
LANGUAGE plproxy AS $$ CONNECT conninfo; SELECT s.node, s.made_ids, s.joined FROM sched._node_state() s; $$;

-- The state of the database a conninfo reaches, or a clear error.
CREATE FUNCTION sched._ask_node(p_conninfo text, p_index int, OUT node int, OUT made_ids boolean, OUT joined boolean)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	e_state text; e_message text;
BEGIN
	SELECT * INTO node, made_ids, joined FROM sched._node_state_at(p_conninfo);
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT;
	RAISE EXCEPTION 'cannot use node conninfos[%] (%): %', p_index, p_conninfo,
			pg_catalog.rtrim(pg_catalog.regexp_replace(e_message, '^.*(REMOTE ERROR|PQconnectStart|PQconnectPoll): ', ''), E' \t\n')
		USING ERRCODE = CASE WHEN sched._unreachable(e_state, e_message) THEN 'connection_failure' ELSE e_state END,
			  HINT = 'A node needs delaysched 0.2 (CREATE EXTENSION delaysched, or ALTER EXTENSION delaysched UPDATE) and must accept the connection as this role.';
END
$$;
COMMENT ON FUNCTION sched._ask_node(text, int) IS 'internal: a node''s state, asked by conninfo';

/*
 * Node numbers.  A node keeps the number it has.  A database without one
 * (0) that has made task ids keeps 0, so that its ids stay valid, if this
 * router has never had another node 0 (a node 0 that joined is marked on
 * the node, by sched.set_node_number(0)); two such in one list, or one
 * after another node 0, cannot both be 0, and their ids would mix: an
 * error.  A database that has made no id gets a new number, after every
 * number any node has or this router gave.
 */
CREATE FUNCTION sched.set_nodes(conninfos text[])
RETURNS TABLE(node int, "position" int, conninfo text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
	v_count int;
	v_state record;
	v_numbers int[] := '{}';
	v_made boolean[] := '{}';
	v_joined boolean[] := '{}';
	v_number int;
	v_zero int;
	i int;
	n sched.node;
BEGIN
	PERFORM sched._require(conninfos, 'conninfos');
	-- One change of the list at a time (this mode conflicts with itself,
	-- not with the reads of routed calls).
	LOCK TABLE sched.node IN SHARE ROW EXCLUSIVE MODE;
	v_count := coalesce(cardinality(conninfos), 0);
	IF v_count = 0 OR pg_catalog.array_ndims(conninfos) <> 1 THEN
		RAISE EXCEPTION 'conninfos must list at least one node'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Give one libpq connection string per node, such as ARRAY[''host=10.0.0.1 dbname=app'', ''host=10.0.0.2 dbname=app''].';
	END IF;
	IF v_count > 1024 THEN
		RAISE EXCEPTION 'conninfos lists % nodes; at most 1024', v_count
			USING ERRCODE = 'program_limit_exceeded';
	END IF;
	FOR i IN 1 .. v_count LOOP
		PERFORM sched._check_conninfo(conninfos[i], i);
		IF conninfos[i] = ANY (conninfos[1 : i - 1]) THEN
			RAISE EXCEPTION 'conninfos[%] repeats an earlier entry', i USING ERRCODE = 'invalid_parameter_value';
		END IF;
	END LOOP;

	FOR i IN 1 .. v_count LOOP
		v_state := sched._ask_node(conninfos[i], i);
		v_numbers := v_numbers || v_state.node;
		v_made := v_made || v_state.made_ids;
		v_joined := v_joined || v_state.joined;
	END LOOP;
	FOR i IN 1 .. v_count LOOP
		IF (v_numbers[i] <> 0 OR v_joined[i]) AND EXISTS (
				SELECT FROM pg_catalog.generate_series(1, i - 1) g
				WHERE v_numbers[g] = v_numbers[i] AND (v_numbers[g] <> 0 OR v_joined[g])) THEN
			RAISE EXCEPTION 'conninfos[%] and conninfos[%] reach the same node %',
				(SELECT min(g) FROM pg_catalog.generate_series(1, i - 1) g
				 WHERE v_numbers[g] = v_numbers[i] AND (v_numbers[g] <> 0 OR v_joined[g])), i, v_numbers[i]
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'Each node is listed once. A copy of a node (a promoted standby, a restored dump) carries its number too.';
		END IF;
	END LOOP;

	-- Node 0: the one that joined as 0, else one that has made ids as 0.
	SELECT min(g) INTO v_zero FROM pg_catalog.generate_series(1, v_count) g WHERE v_numbers[g] = 0 AND v_joined[g];
	FOR i IN 1 .. v_count LOOP
		CONTINUE WHEN v_numbers[i] <> 0 OR v_joined[i] OR NOT v_made[i];
		IF v_zero IS NOT NULL OR EXISTS (SELECT FROM sched.node_zero) THEN
			RAISE EXCEPTION 'conninfos[%] has made task ids as node 0, and node 0 is another database', i
				USING ERRCODE = 'object_in_use',
					  HINT = 'Its ids would be taken for the other node 0''s. If it is this router''s node 0 restored from a backup, run SELECT sched.set_node_number(0) on it first; otherwise drain it, or use a database that has made no task yet.';
		END IF;
		v_zero := i;
	END LOOP;
	IF v_zero IS NOT NULL AND NOT v_joined[v_zero] THEN
		PERFORM sched._set_node_number_at(conninfos[v_zero], 0);
	END IF;
	IF v_zero IS NOT NULL THEN
		INSERT INTO sched.node_zero VALUES (true) ON CONFLICT DO NOTHING;
	END IF;

	-- New numbers come after every number a node has, and every number given.
	SELECT GREATEST(max(x), (SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END FROM sched.node_number_seq s))
	INTO v_number FROM pg_catalog.unnest(v_numbers) x;
	IF v_number > 0 THEN
		PERFORM pg_catalog.setval('sched.node_number_seq', v_number);
	END IF;
	FOR i IN 1 .. v_count LOOP
		CONTINUE WHEN v_numbers[i] <> 0 OR i = v_zero;
		-- (Asked again: an earlier conninfo may have reached the same
		-- database and numbered it just now.)
		v_state := sched._ask_node(conninfos[i], i);
		IF v_state.node <> 0 THEN
			RAISE EXCEPTION 'conninfos[%] and conninfos[%] reach the same node %',
				pg_catalog.array_position(v_numbers, v_state.node), i, v_state.node
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'Each node is listed once.';
		END IF;
		v_number := pg_catalog.nextval('sched.node_number_seq');
		PERFORM sched._set_node_number_at(conninfos[i], v_number);
		v_numbers[i] := v_number;
	END LOOP;

	-- Routed calls read a node's position here and PL/Proxy reads the list
	-- again: none may run between the two while the list changes, so they
	-- wait for this transaction from here on.
	LOCK TABLE sched.node IN ACCESS EXCLUSIVE MODE;
	DELETE FROM sched.node;
	INSERT INTO sched.node (node, position, conninfo)
		SELECT v_numbers[g], g - 1, conninfos[g] FROM pg_catalog.generate_series(1, v_count) g;
	INSERT INTO sched.node_version (version) VALUES (pg_catalog.nextval('sched.node_version_seq'))
	ON CONFLICT (one) DO UPDATE SET version = excluded.version;
	-- Every node gets every type, with its share of the limits as they are
	-- split now.
	FOR n IN SELECT * FROM sched.node x ORDER BY x.position LOOP
		PERFORM sched._sync_node(n);
	END LOOP;
	RETURN QUERY SELECT x.node, x.position, x.conninfo FROM sched.node x ORDER BY x.position;
END
$$;
COMMENT ON FUNCTION sched.set_nodes(text[]) IS 'set the delaysched nodes behind this router; gives new nodes their numbers and every node its share of each type''s limits';

CREATE FUNCTION sched.sync_nodes() RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n sched.node;
	v_count int;
BEGIN
	LOCK TABLE sched.node IN SHARE ROW EXCLUSIVE MODE;
	v_count := sched._check_nodes();
	FOR n IN SELECT * FROM sched.node x ORDER BY x.position LOOP
		PERFORM sched._sync_node(n);
	END LOOP;
	RETURN v_count;
END
$$;
COMMENT ON FUNCTION sched.sync_nodes() IS 'give every node again the types, limits, pauses and grants defined through the router (after a failed call or a restore); the number of nodes';

-- A node as sched.nodes shows it: up, unavailable, or another node now.
CREATE FUNCTION sched._node_status(n sched.node) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_number int;
	e_state text; e_message text;
BEGIN
	v_number := sched._node_number_on(n.position);
	IF v_number <> n.node THEN
		RETURN 'answers as node ' || v_number;
	END IF;
	RETURN 'up';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT;
	IF e_state = '42501' THEN
		-- (sched.node_number() on a node is for its administrators)
		RETURN 'answers (its number is for administrators to check)';
	END IF;
	RETURN 'unavailable: ' || pg_catalog.regexp_replace(e_message, '^PL/Proxy function [^:]*: (\[[^]]*\] )?', '');
END
$$;
COMMENT ON FUNCTION sched._node_status(sched.node) IS 'internal: is a node up and itself';

-------------------------------------------------------------------------------
-- Public functions: tasks (one node each, or every node for claim)
-------------------------------------------------------------------------------

CREATE FUNCTION sched._all_unavailable(p_tried text[]) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF cardinality(p_tried) = 0 THEN
		PERFORM sched._no_nodes();
	END IF;
	RAISE EXCEPTION 'no node is available'
		USING ERRCODE = 'connection_failure',
			  DETAIL = 'Tried ' || pg_catalog.array_to_string(p_tried, ', ') || '.';
END
$$;
COMMENT ON FUNCTION sched._all_unavailable(text[]) IS 'internal: the error when no node could be reached';

-- sched.add and sched.add_after: with a dedupe key, on the key's owner;
-- without, on a node picked at random, or the next that answers.
CREATE FUNCTION sched._add(p_after boolean, p_biz text, p_run_at timestamptz, p_delay interval,
						   p_payload jsonb, p_dedupe_key text)
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
			IF p_after THEN
				RETURN sched._add_after_on(n.position, p_biz, p_delay, p_payload, p_dedupe_key);
			END IF;
			RETURN sched._add_on(n.position, p_biz, p_run_at, p_payload, p_dedupe_key);
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
COMMENT ON FUNCTION sched._add(boolean, text, timestamptz, interval, jsonb, text) IS 'internal: the body of sched.add and sched.add_after';

-- (plpgsql wrappers, not sql: a sql function with a SET clause is parsed
-- and planned at every call.)
CREATE FUNCTION sched.add(biz_type text, run_at timestamptz, payload jsonb DEFAULT '{}',
						  dedupe_key text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN sched._add(false, biz_type, run_at, NULL, payload, dedupe_key); END $$;
COMMENT ON FUNCTION sched.add(text, timestamptz, jsonb, text) IS 'schedule a task on one of the nodes (with a dedupe key, on the node that owns the key); returns its id, which carries the node';

CREATE FUNCTION sched.add_after(biz_type text, delay interval, payload jsonb DEFAULT '{}',
								dedupe_key text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN sched._add(true, biz_type, NULL, delay, payload, dedupe_key); END $$;
COMMENT ON FUNCTION sched.add_after(text, interval, jsonb, text) IS 'schedule a task for delay from now (the node''s clock) on one of the nodes; returns its id';

-- An array a node's add_many refuses: several dimensions, or subscripts
-- that do not start at 1 (elements are matched by subscript).
CREATE FUNCTION sched._odd_array(p anyarray) RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce(pg_catalog.array_ndims(p) > 1 OR pg_catalog.array_lower(p, 1) <> 1, false) $$;
COMMENT ON FUNCTION sched._odd_array(anyarray) IS 'internal: an array add_many sends whole to one node, for its error';

/*
 * Split a batch across the nodes, one call per node (two where a node gets
 * keyed and unkeyed elements), and return the ids in input order.
 * Elements with a dedupe key go to the key's owner; the rest in equal runs
 * to the nodes in turn from a random one (a run whose node cannot be
 * reached goes to the next).  Each node stores its part in one
 * transaction: a node failing after others stored theirs is named, with
 * what was stored.
 */
CREATE FUNCTION sched.add_many(biz_type text, run_ats timestamptz[], payloads jsonb[] DEFAULT NULL,
							   dedupe_keys text[] DEFAULT NULL)
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
	IF v_count = 0 OR sched._odd_array(run_ats) OR sched._odd_array(payloads) OR sched._odd_array(dedupe_keys) THEN
		-- An empty batch, or arrays a node refuses (several dimensions, or
		-- subscripts not from 1): one node, which says what is wrong.
		RETURN QUERY SELECT sched._add_many_on(
			(SELECT x.position FROM sched._nodes_in_turn() x LIMIT 1), biz_type, run_ats, payloads, dedupe_keys);
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
						ARRAY(SELECT dedupe_keys[o] FROM pg_catalog.unnest(v_ord) WITH ORDINALITY u(o, r) ORDER BY r) END));
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
COMMENT ON FUNCTION sched.add_many(text, timestamptz[], jsonb[], text[]) IS 'schedule many tasks of one type, split across the nodes (one call per node); returns their ids in input order';

-- The calls for one task id go to the node the id names: one body for the
-- five, each PL/Proxy call written out (static, so that its plan is kept).
CREATE FUNCTION sched._by_id(p_call text, p_id bigint, p_run_at timestamptz, p_retry_in interval,
							 p_error text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n sched.node := sched._node_of_id(p_id);
	e_state text; e_message text; e_detail text; e_hint text;
BEGIN
	CASE p_call
		WHEN 'ack' THEN RETURN sched._ack_on(n.position, p_id);
		WHEN 'cancel' THEN RETURN sched._cancel_on(n.position, p_id);
		WHEN 'reschedule' THEN RETURN sched._reschedule_on(n.position, p_id, p_run_at);
		WHEN 'nack' THEN RETURN sched._nack_on(n.position, p_id, p_retry_in, p_error);
		WHEN 'retry' THEN RETURN sched._retry_on(n.position, p_id);
	END CASE;
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
							e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
	PERFORM sched._raise_node_error(n.node, e_state, e_message, e_detail, e_hint);
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION sched._by_id(text, bigint, timestamptz, interval, text) IS 'internal: the body of ack, cancel, reschedule, nack and retry: the call on the node the id names';

CREATE FUNCTION sched.cancel(id bigint) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN sched._by_id('cancel', id, NULL, NULL, NULL); END $$;
COMMENT ON FUNCTION sched.cancel(bigint) IS 'cancel a pending task, on its node; false if there was no pending task with this id';

CREATE FUNCTION sched.reschedule(id bigint, run_at timestamptz) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN sched._by_id('reschedule', id, run_at, NULL, NULL); END $$;
COMMENT ON FUNCTION sched.reschedule(bigint, timestamptz) IS 'move a pending task to a new run_at, on its node; false if there was no pending task with this id';

CREATE FUNCTION sched.ack(id bigint) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN sched._by_id('ack', id, NULL, NULL, NULL); END $$;
COMMENT ON FUNCTION sched.ack(bigint) IS 'acknowledge a delivered task, on its node; false if no delivery of this id awaits acknowledgement';

CREATE FUNCTION sched.nack(id bigint, retry_in interval DEFAULT NULL, error text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN sched._by_id('nack', id, NULL, retry_in, error); END $$;
COMMENT ON FUNCTION sched.nack(bigint, interval, text) IS 'give a delivered task back for another attempt, on its node; false if no delivery of this id awaits acknowledgement';

CREATE FUNCTION sched.retry(id bigint) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN sched._by_id('retry', id, NULL, NULL, NULL); END $$;
COMMENT ON FUNCTION sched.retry(bigint) IS 'bring a dead task back to life, on its node; false if there was no dead task with this id';

-- One call per node with that node's ids; the acknowledged in all.
CREATE FUNCTION sched.ack_many(ids bigint[]) RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	g record;
	v_acked int := 0;
	e_state text; e_message text; e_detail text; e_hint text;
BEGIN
	PERFORM sched._require(ids, 'ids');
	-- Every id is checked before any node is called.
	FOR g IN
		SELECT (sched._node_of_id(u)).*, pg_catalog.array_agg(u) AS node_ids
		FROM pg_catalog.unnest(ids) u WHERE u IS NOT NULL
		GROUP BY 1, 2, 3, 4 ORDER BY 2
	LOOP
		BEGIN
			v_acked := v_acked + sched._ack_many_on(g.position, g.node_ids);
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
									e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
			PERFORM sched._raise_node_error(g.node, e_state, e_message, e_detail,
				CASE WHEN v_acked > 0 THEN pg_catalog.format('%s tasks of other nodes were acknowledged before; acknowledging them again changes nothing.', v_acked) ELSE e_hint END);
		END;
	END LOOP;
	RETURN v_acked;
END
$$;
COMMENT ON FUNCTION sched.ack_many(bigint[]) IS 'acknowledge many delivered tasks, one call per node; returns how many were acknowledged';

/*
 * Take due tasks from the nodes in turn, from a random one, until
 * max_tasks are taken or every node was asked.  A node that does not
 * answer is passed over with a warning; an error of a node's own is raised
 * (tasks already taken from other nodes then come back after their lease).
 */
CREATE FUNCTION sched._claim(p_biz text, p_max int)
RETURNS TABLE(id bigint, biz_type text, run_at timestamptz, payload jsonb, attempt int, schedule text)
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
RETURNS TABLE(id bigint, biz_type text, run_at timestamptz, payload jsonb, attempt int, schedule text)
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM sched._claim($1, $2) $$;
COMMENT ON FUNCTION sched.claim(text, int) IS 'take up to max_tasks due tasks of a type from the nodes in turn, each leased for the type''s ack_timeout';

-------------------------------------------------------------------------------
-- Public functions: business types (administrators; on every node)
-------------------------------------------------------------------------------

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
	timeout interval DEFAULT '10 seconds',
	min_backoff interval DEFAULT '1 second',
	max_backoff interval DEFAULT '1 hour',
	secret text DEFAULT NULL,
	follow_redirects boolean DEFAULT false,
	weight int DEFAULT 1)
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
			 pg_catalog.now(), weight);
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
		weight = excluded.weight;
END
$$;
COMMENT ON FUNCTION sched.define_biz(text, text, text, int, interval, float8, int, int, text, jsonb, interval, interval, interval, text, boolean, int) IS 'create or change a business type on every node; rate_limit, burst and max_concurrency are for the whole cluster, split across the nodes';

CREATE FUNCTION sched.drop_biz(name text, cancel_tasks boolean DEFAULT false)
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
			payload jsonb, created_at timestamptz, updated_at timestamptz)
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
COMMENT ON FUNCTION sched.drop_biz(text, boolean) IS 'drop a business type on every node; with cancel_tasks, its unfinished tasks are cancelled first; returns how many were cancelled';

CREATE FUNCTION sched._set_paused(p_biz text, p_paused boolean) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_changed text[];
BEGIN
	v_changed := sched._on_every_node(CASE WHEN p_paused THEN 'pause' ELSE 'resume' END,
		pg_catalog.format('SELECT sched.%I($1, %L)', CASE WHEN p_paused THEN '_pause_on' ELSE '_resume_on' END, p_biz));
	UPDATE sched.biz x SET paused = p_paused, updated_at = pg_catalog.now() WHERE x.name = p_biz;
	RETURN 'true' = ANY (v_changed);
END
$$;
COMMENT ON FUNCTION sched._set_paused(text, boolean) IS 'internal: pause or resume a type on every node; true if any node changed';

CREATE FUNCTION sched.pause(biz_type text) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT sched._set_paused(biz_type, true) $$;
COMMENT ON FUNCTION sched.pause(text) IS 'stop delivering the tasks of a type on every node until sched.resume; false if every node had it paused already';

CREATE FUNCTION sched.resume(biz_type text) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT sched._set_paused(biz_type, false) $$;
COMMENT ON FUNCTION sched.resume(text) IS 'deliver the tasks of a paused type again on every node; false if no node had it paused';

CREATE FUNCTION sched.grant_biz(biz_type text, role regrole, privilege text DEFAULT 'schedule')
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_changed text[];
BEGIN
	v_changed := sched._on_every_node('grant_biz',
		pg_catalog.format('SELECT sched._grant_biz_on($1, %L, %L, %L)', biz_type, role::text, privilege));
	INSERT INTO sched.biz_grant
		SELECT x.name, role::text, privilege FROM sched.biz x WHERE x.name = grant_biz.biz_type
		ON CONFLICT DO NOTHING;
	RETURN 'true' = ANY (v_changed);
END
$$;
COMMENT ON FUNCTION sched.grant_biz(text, regrole, text) IS 'let a role (by name, on every node) schedule, consume or read the tasks of a type; false if every node had the grant';

CREATE FUNCTION sched.revoke_biz(biz_type text, role regrole, privilege text DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_counts text[];
BEGIN
	v_counts := sched._on_every_node('revoke_biz',
		pg_catalog.format('SELECT sched._revoke_biz_on($1, %L, %L, %L)', biz_type, role::text, privilege));
	DELETE FROM sched.biz_grant g
		WHERE g.biz_type = revoke_biz.biz_type AND g.role_name = role::text
		  AND (revoke_biz.privilege IS NULL OR g.privilege = revoke_biz.privilege);
	RETURN (SELECT sum(c::int) FROM pg_catalog.unnest(v_counts) c);
END
$$;
COMMENT ON FUNCTION sched.revoke_biz(text, regrole, text) IS 'take back grants on a type from a role on every node (every privilege if none is named); the number revoked, summed over the nodes';

-------------------------------------------------------------------------------
-- Public functions: schedules (each lives on one node)
-------------------------------------------------------------------------------

-- Record where a schedule lives, or forget it: the truth as its node
-- tells it, so that any role may call this (as the extension's owner, which
-- may read sched.schedule_home and see every schedule of the node), after
-- its own define_schedule or drop_schedule there.
CREATE FUNCTION sched._set_schedule_home(p_name text) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n sched.node := sched._schedule_node(p_name);
BEGIN
	IF EXISTS (SELECT FROM sched._schedules_on(n.position) s WHERE s.name = p_name) THEN
		INSERT INTO sched.schedule_home (name, node) VALUES (p_name, n.node) ON CONFLICT DO NOTHING;
	ELSE
		DELETE FROM sched.schedule_home h WHERE h.name = p_name;
	END IF;
END
$$;
COMMENT ON FUNCTION sched._set_schedule_home(text) IS 'internal: record where a schedule lives, or forget it, as its node says';

-- The node of a schedule: where it was defined through this router, else
-- the owner of its name.
CREATE FUNCTION sched._schedule_node(p_name text) RETURNS sched.node
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n sched.node;
	v_home int;
BEGIN
	PERFORM sched._require(p_name, 'name');
	SELECT h.node INTO v_home FROM sched.schedule_home h WHERE h.name = p_name;
	IF NOT FOUND THEN
		RETURN sched._owner('', p_name);
	END IF;
	SELECT * INTO n FROM sched.node x WHERE x.node = v_home;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'schedule "%" lives on node %, which is not in this router''s node list', p_name, v_home
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Manage it on that node, or put the node back in the list.';
	END IF;
	RETURN n;
END
$$;
COMMENT ON FUNCTION sched._schedule_node(text) IS 'internal: the node a schedule lives on';

/*
 * One call to the node of a schedule: p_call is a statement of one value,
 * $1 the node's position.  (Schedule calls are few: dynamic SQL is cheap
 * enough here, not on the task paths above.)
 */
CREATE FUNCTION sched._on_schedule_node(p_name text, p_call text) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n sched.node := sched._schedule_node(p_name);
	v_value text;
	e_state text; e_message text; e_detail text; e_hint text;
BEGIN
	EXECUTE p_call INTO v_value USING n.position;
	RETURN v_value;
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
							e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
	PERFORM sched._raise_node_error(n.node, e_state, e_message, e_detail, e_hint);
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION sched._on_schedule_node(text, text) IS 'internal: run a call on the node of a schedule';

CREATE FUNCTION sched.define_schedule(name text, biz_type text, schedule text, payload jsonb DEFAULT '{}',
									  time_zone text DEFAULT 'UTC', catch_up text DEFAULT 'latest',
									  starts_at timestamptz DEFAULT NULL, ends_at timestamptz DEFAULT NULL,
									  allow_overlap boolean DEFAULT true)
RETURNS timestamptz
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_next timestamptz;
BEGIN
	v_next := sched._on_schedule_node(name, pg_catalog.format(
		'SELECT sched._define_schedule_on($1, %L, %L, %L, %L, %L, %L, %L, %L, %L)',
		name, biz_type, schedule, payload, time_zone, catch_up, starts_at, ends_at, allow_overlap));
	PERFORM sched._set_schedule_home(name);
	RETURN v_next;
END
$$;
COMMENT ON FUNCTION sched.define_schedule(text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean) IS 'create or change a recurring schedule on its node; returns its next firing';

CREATE FUNCTION sched.drop_schedule(name text) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_dropped boolean;
BEGIN
	v_dropped := sched._on_schedule_node(name, pg_catalog.format('SELECT sched._drop_schedule_on($1, %L)', name));
	PERFORM sched._set_schedule_home(name);
	RETURN v_dropped;
END
$$;
COMMENT ON FUNCTION sched.drop_schedule(text) IS 'drop a recurring schedule on its node, cancelling its pending firing; false if there was none';

CREATE FUNCTION sched.pause_schedule(name text) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT sched._on_schedule_node(name, pg_catalog.format('SELECT sched._pause_schedule_on($1, %L)', name))::boolean $$;
COMMENT ON FUNCTION sched.pause_schedule(text) IS 'stop a schedule firing, on its node; false if it was paused already';

CREATE FUNCTION sched.resume_schedule(name text) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT sched._on_schedule_node(name, pg_catalog.format('SELECT sched._resume_schedule_on($1, %L)', name))::boolean $$;
COMMENT ON FUNCTION sched.resume_schedule(text) IS 'let a paused schedule fire again, on its node; false if it was not paused';

CREATE FUNCTION sched.next_runs(schedule text, time_zone text DEFAULT 'UTC', after timestamptz DEFAULT pg_catalog.now(),
								n int DEFAULT 10, starts_at timestamptz DEFAULT NULL)
RETURNS SETOF timestamptz
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	x sched.node;
	v_tried text[] := '{}';
	e_state text; e_message text; e_detail text; e_hint text;
BEGIN
	-- A pure function of its arguments: any node that answers.
	FOR x IN SELECT * FROM sched._nodes_in_turn() LOOP
		BEGIN
			RETURN QUERY SELECT * FROM sched._next_runs_on(x.position, schedule, time_zone, after, n, starts_at);
			RETURN;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
									e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
			IF NOT sched._unreachable(e_state, e_message) THEN
				PERFORM sched._raise_node_error(x.node, e_state, e_message, e_detail, e_hint);
			END IF;
			v_tried := v_tried || sched._label(x.node);
		END;
	END LOOP;
	PERFORM sched._all_unavailable(v_tried);
END
$$;
COMMENT ON FUNCTION sched.next_runs(text, text, timestamptz, int, timestamptz) IS 'the next n instants a schedule rule fires after a time (computed by any node)';

-------------------------------------------------------------------------------
-- Views: every node's rows (sched._gather: the node's number, then the
-- view's columns).  A node that does not answer is left out with a warning
-- naming it.
-------------------------------------------------------------------------------

CREATE FUNCTION sched._gather(p_view text) RETURNS SETOF record
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n sched.node;
	e_state text; e_message text; e_detail text; e_hint text;
BEGIN
	FOR n IN SELECT * FROM sched.node x ORDER BY x.position LOOP
		BEGIN
			RETURN QUERY EXECUTE pg_catalog.format('SELECT $2, * FROM sched.%I($1)', '_' || p_view || '_on')
				USING n.position, n.node;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
									e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
			IF NOT sched._unreachable(e_state, e_message) THEN
				PERFORM sched._raise_node_error(n.node, e_state, e_message, e_detail, e_hint);
			END IF;
			RAISE WARNING '% is unavailable: sched.% leaves out its rows', sched._label(n.node), p_view;
		END;
	END LOOP;
END
$$;
COMMENT ON FUNCTION sched._gather(text) IS 'internal: a view''s rows from every node that answers, each after the node''s number';

CREATE VIEW sched.tasks AS
	SELECT t.id, t.biz_type, t.run_at, t.state, t.attempt, t.payload, t.dedupe_key, t.created_at,
		   t.delivered_at, t.last_error, t.lease_until, t.finished_at, t.schedule, t.status
	FROM sched._gather('tasks') AS t(node int, id bigint, biz_type text, run_at timestamptz, state text,
		attempt int, payload jsonb, dedupe_key text, created_at timestamptz, delivered_at timestamptz,
		last_error text, lease_until timestamptz, finished_at timestamptz, schedule text, status text);
COMMENT ON VIEW sched.tasks IS 'every task of every node the querying role may see (sched.node_of(id) is its node)';

CREATE VIEW sched.schedules AS
	SELECT s.name, s.biz_type, s.schedule, s.time_zone, s.catch_up, s.allow_overlap, s.paused,
		   s.starts_at, s.ends_at, s.next_run_at, s.last_run_at, s.last_task_id, s.runs, s.missed,
		   s.payload, s.created_at, s.updated_at
	FROM sched._gather('schedules') AS s(node int, name text, biz_type text, schedule text, time_zone text,
		catch_up text, allow_overlap boolean, paused boolean, starts_at timestamptz, ends_at timestamptz,
		next_run_at timestamptz, last_run_at timestamptz, last_task_id bigint, runs bigint, missed bigint,
		payload jsonb, created_at timestamptz, updated_at timestamptz);
COMMENT ON VIEW sched.schedules IS 'every recurring schedule of every node the querying role may see';

-- One row per node and type (drop_biz's check, and sched.biz_stats).
CREATE FUNCTION sched._gather_stats()
RETURNS TABLE(node int, biz_type text, delivery text, channel text, paused boolean, pending bigint,
	due_now bigint, awaiting_ack bigint, done bigint, dead bigint, delivered_per_sec numeric,
	lateness_p50 interval, lateness_p99 interval, rate_limit float8, burst int, max_concurrency int,
	tokens numeric, throttled bigint, current_rate numeric, weight int, unfinished bigint)
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT s.*, s.pending + s.awaiting_ack
	FROM sched._gather('biz_stats') AS s(node int, biz_type text, delivery text, channel text,
		paused boolean, pending bigint, due_now bigint, awaiting_ack bigint, done bigint, dead bigint,
		delivered_per_sec numeric, lateness_p50 interval, lateness_p99 interval, rate_limit float8,
		burst int, max_concurrency int, tokens numeric, throttled bigint, current_rate numeric, weight int)
$$;
COMMENT ON FUNCTION sched._gather_stats() IS 'internal: sched.biz_stats of every node that answers, with the node';

CREATE VIEW sched.biz_stats AS
	SELECT s.biz_type, max(s.delivery) AS delivery, max(s.channel) AS channel, bool_or(s.paused) AS paused,
		   sum(s.pending)::bigint AS pending, sum(s.due_now)::bigint AS due_now,
		   sum(s.awaiting_ack)::bigint AS awaiting_ack, sum(s.done)::bigint AS done, sum(s.dead)::bigint AS dead,
		   sum(s.delivered_per_sec) AS delivered_per_sec,
		   max(s.lateness_p50) AS lateness_p50, max(s.lateness_p99) AS lateness_p99,
		   sum(s.rate_limit) AS rate_limit, sum(s.burst)::int AS burst, sum(s.max_concurrency)::int AS max_concurrency,
		   sum(s.tokens) AS tokens, sum(s.throttled)::bigint AS throttled, sum(s.current_rate) AS current_rate,
		   max(s.weight) AS weight
	FROM sched._gather_stats() s
	GROUP BY s.biz_type;
COMMENT ON VIEW sched.biz_stats IS 'per business type, over every node: counts and rates summed, limits summed (the cluster-wide limit), lateness the worst node''s';

CREATE VIEW sched.nodes AS
	SELECT n.node, n.position, n.conninfo, n.added_at, sched._node_status(n) AS status
	FROM sched.node n;
COMMENT ON VIEW sched.nodes IS 'the nodes behind this router: number, PL/Proxy partition, conninfo, and whether each answers now';

-------------------------------------------------------------------------------
-- Privileges.  Nothing for PUBLIC but what routing needs: a call reaches a
-- node as the calling role, and the node checks that role's privileges, so
-- routing grants nothing a role did not have on the node.  Administrators
-- grant the public functions and views as on a node (doc/scale-out.md).
-- The CONNECT functions take any conninfo: administrators only.
-------------------------------------------------------------------------------

REVOKE ALL ON ALL TABLES IN SCHEMA sched FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA sched FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA sched FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA plproxy FROM PUBLIC;
GRANT USAGE ON SCHEMA plproxy TO PUBLIC;
GRANT EXECUTE ON FUNCTION plproxy.get_cluster_version(text), plproxy.get_cluster_partitions(text),
	plproxy.get_cluster_config(text), sched._cluster_check(text) TO PUBLIC;
GRANT SELECT ON sched.node, sched.schedule_home TO PUBLIC;
DO $$
DECLARE
	f regprocedure;
BEGIN
	FOR f IN
		SELECT p.oid FROM pg_catalog.pg_proc p
		WHERE p.pronamespace = 'sched'::regnamespace AND p.proname LIKE '\_%'
		  AND p.proname NOT IN ('_node_state_at', '_set_node_number_at', '_ask_node', '_sync_node', '_check_nodes',
								'_on_every_node', '_define_call', '_set_paused', '_define_biz_on',
								'_drop_biz_on', '_pause_on', '_resume_on', '_grant_biz_on', '_revoke_biz_on')
	LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', f);
	END LOOP;
END
$$;
