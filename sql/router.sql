-- router: the SQL surface of delaysched_router (doc/scale-out.md) on two
-- node databases and a router database of this instance: the node numbers
-- (sched.node_number, sched.set_node_number), set_nodes and its bad input,
-- routing by dedupe key and by id, errors as the nodes give them, a node
-- that cannot be reached, and what an ordinary role can and cannot do.
-- (TAP test 020 has three servers, delivery, limits and a stopped node.)
SET client_min_messages = warning;
CREATE DATABASE regress_ds_node1;
CREATE DATABASE regress_ds_node2;
CREATE DATABASE regress_ds_router;
CREATE ROLE regress_router_app LOGIN;
CREATE ROLE regress_router_mallory LOGIN;
SELECT format('host=%s port=%s dbname=', split_part(current_setting('unix_socket_directories'), ',', 1),
			  current_setting('port')) AS base \gset

-- A router cannot live beside delaysched.
CREATE EXTENSION delaysched_router CASCADE;

\c regress_ds_node1
SET client_min_messages = warning;
CREATE EXTENSION delaysched;
SELECT sched.node_number();
SELECT sched.set_node_number(0);
SELECT sched.set_node_number(32768);
SELECT sched.set_node_number(NULL);
SELECT sched.set_node_number(7);
SELECT sched.set_node_number(7);
SELECT sched.set_node_number(8);
SELECT sched.node_number();
SELECT sched.define_biz('r_orders');
SELECT sched.add('r_orders', now() + interval '1 day') >> 48 AS node_of_id;
-- what an application role needs on a node (doc/privileges.md), but its grants on types
GRANT USAGE ON SCHEMA sched TO regress_router_app, regress_router_mallory;
GRANT EXECUTE ON FUNCTION sched.add(text, timestamptz, jsonb, text), sched.ack(bigint),
	sched.claim(text, int) TO regress_router_app, regress_router_mallory;
\c regress_ds_node2
SET client_min_messages = warning;
CREATE EXTENSION delaysched;
-- what an application role needs on a node (doc/privileges.md), but its grants on types
GRANT USAGE ON SCHEMA sched TO regress_router_app, regress_router_mallory;
GRANT EXECUTE ON FUNCTION sched.add(text, timestamptz, jsonb, text), sched.ack(bigint),
	sched.claim(text, int) TO regress_router_app, regress_router_mallory;

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
SELECT pg_temp.try(format('SELECT sched.set_nodes(ARRAY[%L])', :'base' || 'regress_ds_missing'));
-- a database without delaysched
SELECT pg_temp.try(format('SELECT sched.set_nodes(ARRAY[%L])', :'base' || 'regress_ds_router'));
-- the same node twice under two conninfos
SELECT pg_temp.try(format('SELECT sched.set_nodes(ARRAY[%L, %L])', :'base' || 'regress_ds_node1',
						  :'base' || 'regress_ds_node1 application_name=again'));
SELECT count(*) FROM sched.node;

-- Two nodes: node1 keeps its number 7, node2 (never numbered) keeps 0.
SELECT node, position FROM sched.set_nodes(ARRAY[:'base' || 'regress_ds_node1', :'base' || 'regress_ds_node2']);
SELECT node, position, status FROM sched.nodes ORDER BY position;

-- A type on every node; limits split.
SELECT sched.define_biz('r_orders', rate_limit => 5, burst => 3, max_concurrency => 1);
SELECT biz_type, rate_limit, burst, max_concurrency FROM sched.biz_stats;
SELECT pg_temp.try($$SELECT sched.define_biz('R bad')$$);
SELECT pg_temp.try($$SELECT sched.define_biz('r_x', delivery => 'carrier pigeon')$$);
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
SELECT sched.cancel(id) FROM sched.tasks WHERE dedupe_key = 'k1';
SELECT state FROM sched.tasks WHERE dedupe_key = 'k1';
SELECT pg_temp.try(format('SELECT sched.reschedule(%s, NULL)', (SELECT min(id) FROM sched.tasks WHERE state = 'pending')));

-- Schedules live on one node.
SELECT sched.define_schedule('r_nightly', 'r_orders', '0 3 * * *') > now() AS defined;
SELECT name, biz_type, schedule FROM sched.schedules;
SELECT node = (SELECT h.node FROM sched.schedule_home h WHERE h.name = 'r_nightly') AS home_recorded
FROM sched.node WHERE node = (sched._schedule_node('r_nightly')).node;
SELECT sched.pause_schedule('r_nightly'), sched.resume_schedule('r_nightly');
SELECT * FROM sched.next_runs('0 3 * * *', 'UTC', '2026-01-01', 2);
SELECT pg_temp.try($$SELECT sched.define_schedule('r_bad', 'r_orders', 'not a rule')$$);
SELECT sched.drop_schedule('r_nightly');
SELECT count(*) FROM sched.schedule_home;

-- A node that cannot be reached: adds without a key go to the other, its
-- ids and keys fail naming it, administration changes no node.
BEGIN;
UPDATE sched.node SET conninfo = :'base' || 'regress_ds_gone' WHERE node = 0;
SELECT count(*) FROM (SELECT sched.add('r_orders', now() + interval '1 day') FROM generate_series(1, 20)) a;
SELECT pg_temp.try($$SELECT sched.ack(61)$$);
SELECT pg_temp.try(format($$SELECT sched.add('r_orders', now(), '{}', %L)$$,
	(SELECT k FROM (SELECT 'x' || g AS k FROM generate_series(1, 100) g) x WHERE (sched._owner('r_orders', k)).node = 0 LIMIT 1)));
SELECT pg_temp.try($$SELECT sched.pause('r_orders')$$);
SELECT node, status ~ '^unavailable' AS unavailable FROM sched.nodes ORDER BY position;
ROLLBACK;
SELECT paused FROM sched.biz_stats;

-- An application role: what an administrator grants on the router, and the
-- nodes' own grants (given to every node by the router).
GRANT USAGE ON SCHEMA sched TO regress_router_app, regress_router_mallory;
GRANT EXECUTE ON FUNCTION sched.add(text, timestamptz, jsonb, text), sched.ack(bigint),
	sched.claim(text, int), sched.node_of(bigint) TO regress_router_app, regress_router_mallory;
-- (and on every node, as on one: doc/privileges.md; done above)
SELECT sched.grant_biz('r_orders', 'regress_router_app', 'schedule');
SELECT sched.grant_biz('r_orders', 'regress_router_app', 'consume');
SELECT count(*) FROM sched.biz_grant;
SET ROLE regress_router_app;
SELECT sched.add('r_orders', now() + interval '1 day') > 0 AS app_added;
SELECT count(*) FROM sched.claim('r_orders', 5);
RESET ROLE;

-- A hostile role: the router gives it nothing the nodes did not.
SET ROLE regress_router_mallory;
SELECT pg_temp.try($$SELECT sched.add('r_orders', now())$$);
SELECT pg_temp.try($$SELECT sched._add_on(0, 'r_orders', now(), '{}', NULL)$$);
SELECT pg_temp.try($$SELECT sched.define_biz('r_orders', rate_limit => 1000)$$);
SELECT pg_temp.try($$SELECT * FROM sched.set_nodes(ARRAY['dbname=regress_ds_node1 user=postgres'])$$);
SELECT pg_temp.try($$SELECT sched._node_number_at('dbname=regress_ds_node1 user=postgres')$$);
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

-- drop_biz refuses where a node would, before any node drops it.
SELECT pg_temp.try($$SELECT sched.drop_biz('r_orders')$$);
SELECT count(*) FROM sched.biz;
SELECT sched.drop_biz('r_orders', cancel_tasks => true) > 0 AS cancelled;
SELECT count(*) FROM sched.biz, sched.biz_grant;
SELECT count(*) FROM sched.biz_stats;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE regress_ds_router WITH (FORCE);
DROP DATABASE regress_ds_node1 WITH (FORCE);
DROP DATABASE regress_ds_node2 WITH (FORCE);
DROP ROLE regress_router_app;
DROP ROLE regress_router_mallory;
