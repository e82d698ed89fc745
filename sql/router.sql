-- router: the SQL surface of delaysched_router (doc/scale-out.md) on two
-- node databases and a router database of this instance: the node numbers
-- (sched.node_number, sched.set_node_number), set_nodes and its bad input,
-- routing by dedupe key and by id, errors as the nodes give them, SQL jobs
-- (add_sql, a schedule's command, run_now), a node that cannot be reached,
-- and what an ordinary role can and cannot do.
-- (TAP test 020 has three servers, delivery, limits and a stopped node.)
SET client_min_messages = warning;
CREATE DATABASE regress_ds_node1;
CREATE DATABASE regress_ds_node2;
CREATE DATABASE regress_ds_router;
CREATE ROLE regress_router_app LOGIN;
CREATE ROLE regress_router_mallory LOGIN;
SELECT format('host=%s port=%s dbname=', split_part(current_setting('unix_socket_directories'), ',', 1),
			  current_setting('port')) AS base \gset
\set node_grants 'GRANT USAGE ON SCHEMA sched TO regress_router_app, regress_router_mallory; GRANT EXECUTE ON FUNCTION sched.add(text, timestamptz, jsonb, text, text, interval, text, int), sched.ack(bigint), sched.claim(text, int) TO regress_router_app, regress_router_mallory; GRANT EXECUTE ON FUNCTION sched.define_schedule(text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean, text, int), sched.drop_schedule(text, text) TO regress_router_app;'

-- A router cannot live beside delaysched.  (Without the error's context:
-- PostgreSQL 18 adds the script's statement and line to it.)
\set SHOW_CONTEXT never
CREATE EXTENSION delaysched_router CASCADE;
\set SHOW_CONTEXT errors
-- This database has made task ids as node 0: it can be no other node.
SELECT sched.define_biz('r_here');
SELECT sched.add('r_here', now() + interval '1 day') > 0 AS added;
SELECT sched.node_number();
SELECT sched.set_node_number(5);
SELECT sched.set_node_number(-1);
SELECT sched.set_node_number(32768);
SELECT sched.set_node_number(NULL);

-- node1: new, no id made yet.
\c regress_ds_node1
SET client_min_messages = warning;
CREATE EXTENSION delaysched;
SELECT sched.node_number();
-- what an application role needs on a node (doc/privileges.md), but its grants on types
:node_grants
-- node2: ran alone, and made a task id.
\c regress_ds_node2
SET client_min_messages = warning;
CREATE EXTENSION delaysched;
SELECT sched.define_biz('r_solo');
SELECT sched.add('r_solo', now() + interval '1 day') AS solo_id \gset
-- the same on node2
:node_grants

\c regress_ds_router
SET client_min_messages = warning;
CREATE EXTENSION delaysched_router CASCADE;
SET timezone = 'UTC';
-- Errors as SQLSTATE and message, the node's conninfo masked.
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || regexp_replace(regexp_replace(SQLERRM, '\((host|conninfos)[^)]*\)', '(...)', 'g'),
											  'socket "[^"]*"', 'socket "..."');
END
$$;

-- Before set_nodes.
SELECT pg_temp.try($$SELECT sched.add('r_orders', now())$$);
SELECT pg_temp.try($$SELECT sched.ack(5)$$);
SELECT pg_temp.try($$SELECT * FROM sched.claim('r_orders')$$);
SELECT pg_temp.try($$SELECT sched.define_biz('r_orders')$$);
SELECT count(*) FROM sched.tasks;

-- set_nodes: bad input changes nothing.
SELECT pg_temp.try($$SELECT sched.set_nodes(NULL)$$);
SELECT pg_temp.try($$SELECT sched.set_nodes('{}')$$);
SELECT pg_temp.try($$SELECT sched.set_nodes(ARRAY[['a'], ['b']])$$);
SELECT pg_temp.try($$SELECT sched.set_nodes(ARRAY['dbname=x', NULL])$$);
SELECT pg_temp.try($$SELECT sched.set_nodes(ARRAY['dbname=x', ' '])$$);
SELECT pg_temp.try($$SELECT sched.set_nodes(ARRAY['dbname=x', 'dbname=x'])$$);
SELECT pg_temp.try($$SELECT sched.set_nodes(ARRAY['host=h dbname=x password=secret'])$$);
SELECT pg_temp.try($$SELECT sched.set_nodes(ARRAY['postgresql://u:secret@h/x'])$$);
SELECT pg_temp.try($$SELECT sched.set_nodes(ARRAY['postgresql://h/x'])$$);
SELECT pg_temp.try($$SELECT sched.set_nodes(ARRAY['host=h dbname=x sslpassword=s'])$$);
-- a user (or a service that names one) would make every role that user on the node
SELECT pg_temp.try($$SELECT sched.set_nodes(ARRAY['host=h dbname=x user=postgres'])$$);
SELECT pg_temp.try($$SELECT sched.set_nodes(ARRAY['service=nodes'])$$);
SELECT pg_temp.try($$SELECT sched.set_nodes(ARRAY['dbname=''x user=postgres'''])$$);
SELECT pg_temp.try($$SELECT sched.set_nodes(ARRAY['host=h options=-crole=postgres'])$$);
SELECT pg_temp.try($$SELECT sched.set_nodes(ARRAY['host=h dbname'])$$);
SELECT pg_temp.try(format('SELECT sched.set_nodes(ARRAY[%L])', :'base' || 'regress_ds_missing'));
-- a database without delaysched
SELECT pg_temp.try(format('SELECT sched.set_nodes(ARRAY[%L])', :'base' || 'regress_ds_router'));
-- the same node twice under two conninfos
SELECT pg_temp.try(format('SELECT sched.set_nodes(ARRAY[%L, %L])', :'base' || 'regress_ds_node1',
						  :'base' || 'regress_ds_node1 application_name=again'));
SELECT count(*) FROM sched.node;
-- two databases that made ids as node 0 (node2, and this suite's own)
SELECT pg_temp.try(format('SELECT sched.set_nodes(ARRAY[%L, %L, %L])', :'base' || 'regress_ds_node1',
						  :'base' || 'regress_ds_node2', :'base' || 'contrib_regression'));
SELECT (SELECT count(*) FROM sched.node) AS nodes, (SELECT count(*) FROM sched.node_zero) AS zero_given;

-- Two nodes: node2, which made ids alone, keeps 0 (listed second); node1,
-- new, gets the first free number (it got 1 above, and keeps it).
SELECT node, position FROM sched.set_nodes(ARRAY[:'base' || 'regress_ds_node1', :'base' || 'regress_ds_node2']);
SELECT node, position, status FROM sched.nodes ORDER BY position;
SELECT count(*) AS node_zero_given FROM sched.node_zero;
-- node2's id from before it joined reaches it through the router.
SELECT sched.cancel(:solo_id);

-- A type on every node; limits split.
SELECT sched.define_biz('r_orders', rate_limit => 5, burst => 3, max_concurrency => 1);
SELECT biz_type, rate_limit, burst, max_concurrency FROM sched.biz_stats;
SELECT pg_temp.try($$SELECT sched.define_biz('R bad')$$);
SELECT pg_temp.try($$SELECT sched.define_biz('r_x', delivery => 'carrier pigeon')$$);
-- limits are checked before they are split (a share of 0 would become 1)
SELECT pg_temp.try($$SELECT sched.define_biz('r_x', rate_limit => 5, burst => 0)$$);
SELECT pg_temp.try($$SELECT sched.define_biz('r_x', max_concurrency => -3)$$);
SELECT pg_temp.try($$SELECT sched.define_biz('r_x', rate_limit => 0.0015)$$);
SELECT count(*) FROM sched.biz;

-- Adds: ids carry the node; a dedupe key is added once, on its owner.
SELECT sched.node_of(sched.add('r_orders', now() + interval '1 day', '{}', 'k1'))
	 = (sched._owner('r_orders', 'k1')).node AS on_owner;
SELECT count(DISTINCT sched.add('r_orders', now() + interval '1 day', '{}', 'k' || g % 3)) FROM generate_series(1, 30) g;
SELECT count(DISTINCT sched.node_of(a)) FROM sched.add_many('r_orders', array_fill(now() + interval '1 day', ARRAY[10])) a;
SELECT count(*) FROM sched.add_many('r_orders', '{}');
SELECT pg_temp.try($$SELECT sched.add_many('r_orders', ARRAY[now()], ARRAY['{}'::jsonb, '{}'])$$);
SELECT pg_temp.try($$SELECT sched.add_many('r_orders', ARRAY[now()], NULL, ARRAY['a', 'b'])$$);
SELECT pg_temp.try($$SELECT sched.add_many('r_orders', NULL)$$);
SELECT pg_temp.try($$SELECT sched.add('r_orders', NULL)$$);
SELECT pg_temp.try($$SELECT sched.add('r_nope', now())$$);
SELECT pg_temp.try($$SELECT sched.add_after('r_orders', interval '-1 second')$$);
SELECT pg_temp.try($$SELECT sched.add('r_orders', now(), '{}', repeat('k', 2000))$$);
SELECT count(*) FROM sched.tasks WHERE biz_type = 'r_orders' AND state = 'pending';

-- By id.
SELECT pg_temp.try($$SELECT sched.ack(NULL)$$);
SELECT pg_temp.try($$SELECT sched.ack(0)$$);
SELECT pg_temp.try($$SELECT sched.cancel(-5)$$);
SELECT pg_temp.try(format('SELECT sched.nack(%s)', (5::bigint << 48) + 1));
SELECT pg_temp.try($$SELECT sched.ack_many(ARRAY[1, 9223372036854775807])$$);
SELECT sched.ack(60), sched.nack(60), sched.retry(60);
SELECT sched.ack((1::bigint << 48) + 60), sched.nack((1::bigint << 48) + 60);
SELECT sched.cancel(id) FROM sched.tasks WHERE dedupe_key = 'k1';
SELECT state FROM sched.tasks WHERE dedupe_key = 'k1';
SELECT pg_temp.try(format('SELECT sched.reschedule(%s, NULL)', (SELECT min(id) FROM sched.tasks WHERE state = 'pending')));

-- Schedules live on one node.
SELECT sched.define_schedule('r_nightly', 'r_orders', '0 3 * * *') > now() AS defined;
SELECT name, biz_type, schedule FROM sched.schedules;
SELECT h.node = (sched._owner('', 'r_nightly')).node AS home_is_owner FROM sched.schedule_home h WHERE h.name = 'r_nightly';
SELECT sched.pause_schedule('r_nightly'), sched.resume_schedule('r_nightly');
SELECT * FROM sched.next_runs('0 3 * * *', 'UTC', '2026-01-01', 2);
SELECT pg_temp.try($$SELECT sched.define_schedule('r_bad', 'r_orders', 'not a rule')$$);
-- Names are per type, as on a node: the same name under another type is
-- another schedule, on the node where the name lives; by name alone, a
-- call must say which.
SELECT sched.define_biz('r_reports');
SELECT sched.define_schedule('r_nightly', 'r_reports', '0 4 * * *') > now() AS defined;
SELECT name, biz_type, schedule FROM sched.schedules ORDER BY biz_type;
SELECT count(*) AS homes FROM sched.schedule_home;
SELECT pg_temp.try($$SELECT sched.pause_schedule('r_nightly')$$);
SELECT sched.pause_schedule('r_nightly', 'r_reports'), sched.resume_schedule('r_nightly', 'r_reports');
SELECT sched.drop_schedule('r_nightly', 'r_reports');
SELECT count(*) AS homes FROM sched.schedule_home;
SELECT sched.drop_schedule('r_nightly'), sched.drop_schedule('r_nightly');
SELECT count(*) FROM sched.schedule_home;
SELECT sched.drop_biz('r_reports');

-- SQL jobs: a type that runs commands, on every node (its timeout left to
-- each node: NULL); add_sql goes where add would, its id carrying the
-- node; a schedule with a command and run_now go to the schedule's node;
-- the views show each job's command and the role it runs as (the caller).
SELECT sched.define_biz('r_jobs', delivery => 'sql');
SELECT name, delivery, timeout FROM sched.biz WHERE name = 'r_jobs';
SELECT sched.node_of(sched.add_sql('r_jobs', now() + interval '1 day', 'SELECT 1', 'j1'))
	 = (sched._owner('r_jobs', 'j1')).node AS on_owner;
SELECT count(DISTINCT sched.add_sql('r_jobs', now() + interval '1 day', 'SELECT ' || g, 'j' || g % 3))
FROM generate_series(1, 30) g;
SELECT sched.node_of(sched.add_sql('r_jobs', now() + interval '1 day', 'SELECT 2')) IN (SELECT node FROM sched.node) AS on_a_node;
SELECT dedupe_key, command, run_as = current_user::regrole AS runs_as_caller
FROM sched.tasks WHERE biz_type = 'r_jobs' ORDER BY dedupe_key;
SELECT pg_temp.try($$SELECT sched.add_sql('r_orders', now(), 'SELECT 1')$$);
SELECT pg_temp.try($$SELECT sched.add_sql('r_jobs', now(), NULL)$$);
SELECT pg_temp.try($$SELECT sched.add('r_jobs', now())$$);
SELECT sched.define_schedule('r_job_nightly', 'r_jobs', '0 3 * * *', command => 'SELECT 3') > now() AS defined;
SELECT name, biz_type, command, run_as = current_user::regrole AS runs_as_caller
FROM sched.schedules WHERE biz_type = 'r_jobs';
SELECT pg_temp.try($$SELECT sched.define_schedule('r_job_none', 'r_jobs', '@daily')$$);
SELECT pg_temp.try($$SELECT sched.define_schedule('r_job_notify', 'r_orders', '@daily', command => 'SELECT 1')$$);
SELECT sched.node_of(sched.run_now('r_job_nightly'))
	 = (SELECT h.node FROM sched.schedule_home h WHERE h.name = 'r_job_nightly') AS on_its_node;
SELECT count(*) AS firings FROM sched.tasks WHERE schedule = 'r_job_nightly' AND command = 'SELECT 3';
SELECT pg_temp.try($$SELECT sched.run_now('r_job_none')$$);
SELECT sched.drop_schedule('r_job_nightly');
SELECT sched.drop_biz('r_jobs', cancel_tasks => true) AS cancelled;

-- A node that cannot be reached: adds without a key go to the other, its
-- ids and keys fail naming it, administration changes no node.
BEGIN;
UPDATE sched.node SET conninfo = :'base' || 'regress_ds_gone' WHERE node = 0;
-- (a new version, for PL/Proxy to read the list again, as set_nodes writes)
UPDATE sched.node_version SET version = version + 1000;
SELECT count(*) FROM (SELECT sched.add('r_orders', now() + interval '1 day') FROM generate_series(1, 20)) a;
SELECT pg_temp.try($$SELECT sched.ack(61)$$);
SELECT pg_temp.try(format($$SELECT sched.add('r_orders', now(), '{}', %L)$$,
	(SELECT k FROM (SELECT 'x' || g AS k FROM generate_series(1, 100) g) x WHERE (sched._owner('r_orders', k)).node = 0 LIMIT 1)));
SELECT pg_temp.try($$SELECT sched.pause('r_orders')$$);
SELECT count(*) FROM sched.add_many('r_orders', array_fill(now() + interval '1 day', ARRAY[10]));
SELECT node, status ~ '^unavailable' AS unavailable FROM sched.nodes ORDER BY position;
ROLLBACK;
SELECT paused FROM sched.biz_stats;

-- An application role: what an administrator grants on the router, and the
-- nodes' own grants (given to every node by the router).
GRANT USAGE ON SCHEMA sched TO regress_router_app, regress_router_mallory;
GRANT EXECUTE ON FUNCTION sched.add(text, timestamptz, jsonb, text, text, interval, text, int), sched.ack(bigint),
	sched.claim(text, int), sched.node_of(bigint) TO regress_router_app, regress_router_mallory;
-- (and on every node, as on one: doc/privileges.md; done above)
SELECT sched.grant_biz('r_orders', 'regress_router_app', 'schedule');
SELECT sched.grant_biz('r_orders', 'regress_router_app', 'consume');
SELECT count(*) FROM sched.biz_grant;
-- a type defined again keeps its recorded grants (set_nodes gives them to new nodes)
SELECT sched.define_biz('r_orders', rate_limit => 6, burst => 3, max_concurrency => 1);
SELECT count(*) FROM sched.biz_grant;
GRANT EXECUTE ON FUNCTION sched.define_schedule(text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean, text, int),
	sched.drop_schedule(text, text) TO regress_router_app;
SET ROLE regress_router_app;
SELECT sched.add('r_orders', now() + interval '1 day') > 0 AS app_added;
SELECT count(*) FROM sched.claim('r_orders', 5);
-- a schedule defined and dropped by the application role (the router
-- records where it lives for it)
SELECT sched.define_schedule('r_app_schedule', 'r_orders', '@daily') > now() AS defined;
RESET ROLE;
SELECT count(*) FROM sched.schedule_home;
SET ROLE regress_router_app;
SELECT sched.drop_schedule('r_app_schedule');
RESET ROLE;
SELECT count(*) FROM sched.schedule_home;

-- A hostile role: the router gives it nothing the nodes did not.
SET ROLE regress_router_mallory;
SELECT pg_temp.try($$SELECT sched.add('r_orders', now())$$);
SELECT pg_temp.try($$SELECT sched._add_on(0, 'r_orders', now(), '{}', NULL, 'keep', NULL, NULL, 0)$$);
SELECT pg_temp.try($$SELECT sched.define_biz('r_orders', rate_limit => 1000)$$);
SELECT pg_temp.try($$SELECT * FROM sched.set_nodes(ARRAY['dbname=regress_ds_node1 user=postgres'])$$);
SELECT pg_temp.try($$SELECT * FROM sched._node_state_at('dbname=regress_ds_node1 user=postgres')$$);
SELECT pg_temp.try($$SELECT * FROM sched._ask_node('dbname=regress_ds_node1 user=postgres', 1)$$);
-- (it records only what the node says: no such schedule, nothing recorded)
SELECT pg_temp.try($$SELECT sched._set_schedule_home('r_evil')$$);
-- (and reads no schedule's name: where names live is not every role's)
SELECT pg_temp.try($$SELECT count(*) FROM sched.schedule_home$$);
RESET ROLE;
SELECT count(*) FROM sched.schedule_home;
SET ROLE regress_router_mallory;
SELECT pg_temp.try($$INSERT INTO sched.node_zero VALUES (true)$$);
SELECT pg_temp.try($$UPDATE sched.node SET conninfo = 'dbname=x'$$);
SELECT pg_temp.try($$INSERT INTO sched.biz (name, delivery) VALUES ('evil', 'notify')$$);
SELECT pg_temp.try($$CREATE FUNCTION sched.evil() RETURNS int LANGUAGE plproxy AS 'CONNECT ''dbname=x''; SELECT 1;'$$);
SELECT pg_temp.try($$CREATE SCHEMA mallory$$);
RESET ROLE;
-- Functions of a role's own, earlier in its search_path, do not divert the
-- router's: keys still spread over both nodes.
CREATE SCHEMA regress_app_fns AUTHORIZATION regress_router_app;
SET ROLE regress_router_app;
CREATE FUNCTION regress_app_fns.random() RETURNS float8 LANGUAGE sql AS 'SELECT 0.99';
CREATE FUNCTION regress_app_fns.hashtextextended(text, bigint) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint';
SET search_path = regress_app_fns, public;
SELECT count(DISTINCT sched.node_of(sched.add('r_orders', now() + interval '1 day', '{}', 'app' || g)))
FROM generate_series(1, 20) g;
RESET ROLE;
RESET search_path;
DROP SCHEMA regress_app_fns CASCADE;

-- drop_biz refuses where a node would, before any node drops it: a task
-- on the last node only, a schedule on one node only.
SELECT sched.define_biz('r_busy');
SELECT sched.node_of(sched.add('r_busy', now() + interval '1 day', '{}', k)) AS busy_node
FROM (SELECT 'b' || g AS k FROM generate_series(1, 100) g) x
WHERE (sched._owner('r_busy', k)).position = 1 LIMIT 1;
SELECT pg_temp.try($$SELECT sched.drop_biz('r_busy')$$);
SELECT count(*) AS nodes_with_it FROM sched._gather_stats() WHERE biz_type = 'r_busy';
SELECT sched.define_biz('r_sched');
SELECT sched.define_schedule('r_s1', 'r_sched', '@daily') > now() AS defined;
SELECT pg_temp.try($$SELECT sched.drop_biz('r_sched')$$);
SELECT count(*) AS nodes_with_it FROM sched._gather_stats() WHERE biz_type = 'r_sched';
SELECT sched.drop_biz('r_sched', cancel_tasks => true) >= 0 AS dropped;
SELECT sched.drop_biz('r_busy', cancel_tasks => true) AS cancelled;
SELECT sched.drop_biz('r_orders', cancel_tasks => true) > 0 AS cancelled;
SELECT (SELECT count(*) FROM sched.biz) AS types, (SELECT count(*) FROM sched.biz_grant) AS grants;
SELECT count(*) FROM sched.biz_stats;

-- The router repeats a node's signatures: every public function and view
-- it shares with a node takes the same arguments (names, types, defaults)
-- and gives the same result, or has the same columns.  Listed: what
-- differs (nothing should), what only the router has, what it lacks.
\c regress_ds_node1
SELECT string_agg(s.sig, E'\n') AS node_signatures FROM (
	SELECT format('function %s(%s) %s', p.proname, pg_get_function_arguments(p.oid),
				  pg_get_function_result(p.oid)) AS sig
	FROM pg_proc p WHERE p.pronamespace = 'sched'::regnamespace AND p.proname !~ '^_'
	UNION ALL
	SELECT format('view %s(%s)', c.relname,
				  string_agg(format('%s %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum))
	FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
	WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind = 'v' AND c.relname !~ '^_'
	GROUP BY c.relname) s \gset
\c regress_ds_router
WITH node AS (
	SELECT split_part(u.sig, '(', 1) AS name, u.sig FROM unnest(string_to_array(:'node_signatures', E'\n')) AS u(sig)
), router AS (
	SELECT split_part(s.sig, '(', 1) AS name, s.sig FROM (
		SELECT format('function %s(%s) %s', p.proname, pg_get_function_arguments(p.oid),
					  pg_get_function_result(p.oid)) AS sig
		FROM pg_proc p WHERE p.pronamespace = 'sched'::regnamespace AND p.proname !~ '^_'
		UNION ALL
		SELECT format('view %s(%s)', c.relname,
					  string_agg(format('%s %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum))
		FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
		WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind = 'v' AND c.relname !~ '^_'
		GROUP BY c.relname) s
)
SELECT coalesce(r.name, n.name) AS object,
	   CASE WHEN n.name IS NULL THEN 'router only' WHEN r.name IS NULL THEN 'node only'
			ELSE 'differs: ' || r.sig || ' on the router, ' || n.sig || ' on a node' END AS how
FROM router r FULL JOIN node n ON n.name = r.name
WHERE r.sig IS DISTINCT FROM n.sig
ORDER BY 2, 1;

-- A router made at 0.2 and updated: what an administrator granted on
-- drop_schedule(text) goes to drop_schedule(text, text), on
-- define_schedule to the one that takes a command, on sched.tasks stays;
-- PUBLIC gets the new internal functions a routed call runs, not the
-- public ones, and no longer reads sched.schedule_home.
\c contrib_regression
SET client_min_messages = warning;
CREATE DATABASE regress_ds_router02;
\c regress_ds_router02
SET client_min_messages = warning;
CREATE EXTENSION delaysched_router VERSION '0.2' CASCADE;
GRANT USAGE ON SCHEMA sched TO regress_router_app;
GRANT EXECUTE ON FUNCTION sched.drop_schedule(text), sched.pause_schedule(text),
	sched.define_schedule(text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean) TO regress_router_app;
GRANT SELECT ON sched.tasks TO regress_router_app;
ALTER EXTENSION delaysched_router UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'delaysched_router';
SELECT p.oid::regprocedure AS function,
	   has_function_privilege('regress_router_app', p.oid, 'EXECUTE') AS app,
	   has_function_privilege('regress_router_mallory', p.oid, 'EXECUTE') AS anyone
FROM pg_proc p
WHERE p.pronamespace = 'sched'::regnamespace
  AND p.proname ~ '^(_?(drop|pause|resume|define)_schedule|_?add_sql|_?run_now)(_on)?$|^_add$'
ORDER BY 1::text;
SELECT has_table_privilege('regress_router_app', 'sched.tasks', 'SELECT') AS app_reads_tasks;
SELECT has_table_privilege('regress_router_mallory', 'sched.schedule_home', 'SELECT') AS anyone_reads_homes;
\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE regress_ds_router02 WITH (FORCE);
DROP DATABASE regress_ds_router WITH (FORCE);
DROP DATABASE regress_ds_node1 WITH (FORCE);
DROP DATABASE regress_ds_node2 WITH (FORCE);
DROP ROLE regress_router_app;
DROP ROLE regress_router_mallory;
