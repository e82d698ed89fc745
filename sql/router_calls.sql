-- The router's own calls to a node (sched._node_query, sched._node_queries,
-- src/router/delaysched_router.c), against this server as the node: answers,
-- a node's errors and their SQLSTATE, parameters, several calls at once, bad
-- input, and who may call them.  (A node that hangs: TAP test 036.)
SET client_min_messages = warning;
CREATE DATABASE regress_ds_calls;
\c regress_ds_calls
SET client_min_messages = warning;
CREATE EXTENSION delaysched_router CASCADE;
RESET client_min_messages;

-- This server, as a node.
CREATE FUNCTION pg_temp.here() RETURNS text LANGUAGE sql AS $$
	SELECT format('host=%s port=%s dbname=contrib_regression',
				  split_part(current_setting('unix_socket_directories'), ',', 1), current_setting('port'))
$$;
-- An error as its SQLSTATE and message.
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- The answer: the first value of the last result.
SELECT sched._node_query(pg_temp.here(), 'SELECT 41 + 1', NULL, 5000);
SELECT sched._node_query(pg_temp.here(), 'SELECT 1; SELECT ''last''', NULL, 5000);
SELECT sched._node_query(pg_temp.here(), 'SELECT WHERE false', NULL, 5000) IS NULL AS no_row;
SELECT sched._node_query(pg_temp.here(), 'SET application_name = x', NULL, 5000) IS NULL AS no_result;
-- Parameters: one statement, the values not in its text.
SELECT sched._node_query(pg_temp.here(), 'SELECT $1 || $2::int * 2', ARRAY['n', '21'], 5000);
SELECT sched._node_query(pg_temp.here(), 'SELECT $1::text IS NULL', ARRAY[NULL], 5000);
SELECT pg_temp.try($$SELECT sched._node_query(pg_temp.here(), 'SELECT $1; SELECT 2', ARRAY['a'], 5000)$$);
-- Several statements run in one transaction there: an error undoes them all.
SELECT pg_temp.try($$SELECT sched._node_query(pg_temp.here(),
	'CREATE TABLE regress_calls_t (); SELECT 1/0', NULL, 5000)$$);
SELECT to_regclass('regress_calls_t') IS NULL AS not_created;

-- A node's error keeps its SQLSTATE, message, detail and hint...
SELECT pg_temp.try($$SELECT sched._node_query(pg_temp.here(), 'SELECT 1/0', NULL, 5000)$$);
SELECT pg_temp.try($$SELECT sched._node_query(pg_temp.here(),
	'DO $d$ BEGIN RAISE EXCEPTION ''no'' USING ERRCODE = ''P0042'', DETAIL = ''d'', HINT = ''h''; END $d$', NULL, 5000)$$);
-- ...except those plpgsql's WHEN OTHERS would not catch: a statement_timeout
-- there comes back as connection_failure.
SELECT pg_temp.try($$SELECT sched._node_query(pg_temp.here(),
	'SET statement_timeout = 10; SELECT pg_sleep(1)', NULL, 5000)$$);
-- The connection it kept still serves.
SELECT sched._node_query(pg_temp.here(), 'SELECT ''again''', NULL, 5000);
-- A query that would start a COPY fails, and the next call reconnects.
SELECT pg_temp.try($$SELECT sched._node_query(pg_temp.here(), 'COPY (SELECT 1) TO STDOUT', NULL, 5000)$$);
SELECT sched._node_query(pg_temp.here(), 'SELECT ''after copy''', NULL, 5000);
-- The deadline: an answer that does not come in time.
SELECT pg_temp.try($$SELECT sched._node_query(pg_temp.here(), 'SELECT pg_sleep(5)', NULL, 200)$$);

-- A node that cannot be reached, and bad input.
SELECT pg_temp.try($$SELECT sched._node_query('host=127.0.0.1 port=1 dbname=x', 'SELECT 1', NULL, 5000)$$) ~ '^08006: could not connect: ' AS refused;
SELECT pg_temp.try($$SELECT sched._node_query('nonsense', 'SELECT 1', NULL, 5000)$$);
SELECT pg_temp.try($$SELECT sched._node_query(pg_temp.here(), 'SELECT 1', NULL, 0)$$);
SELECT sched._node_query(NULL, 'SELECT 1', NULL, 5000) IS NULL AS null_conninfo;

-- Several at once: a row each, in their order, the answer or the error.
SELECT ord, answer, error
FROM sched._node_queries(ARRAY[pg_temp.here(), pg_temp.here(), pg_temp.here(), 'nonsense'],
						 ARRAY['SELECT pg_sleep(0.2)::text || ''slept''', 'SELECT 1/0', 'SELECT 7', 'SELECT 1'], 5000);
SELECT ord, answer, error FROM sched._node_queries(ARRAY[pg_temp.here()], ARRAY['SELECT pg_sleep(5)'], 200);
SELECT count(*) FROM sched._node_queries('{}', '{}', 1000);
SELECT pg_temp.try($$SELECT * FROM sched._node_queries(ARRAY['a'], '{}', 1000)$$);
SELECT pg_temp.try($$SELECT * FROM sched._node_queries(ARRAY[NULL], ARRAY['SELECT 1'], 1000)$$);

-- Who may call them: nobody but a superuser, unless granted; a role that is
-- not a superuser must give the password in the conninfo.
CREATE ROLE regress_calls_role LOGIN;
SELECT p.oid::regprocedure AS function, has_function_privilege('regress_calls_role', p.oid, 'EXECUTE') AS may
FROM pg_proc p
WHERE p.pronamespace = 'sched'::regnamespace AND p.proname IN ('_node_query', '_node_queries', '_follow_query', '_give_shares')
ORDER BY 1::text;
GRANT USAGE ON SCHEMA sched TO regress_calls_role;
GRANT EXECUTE ON FUNCTION sched._node_query(text, text, text[], int) TO regress_calls_role;
SELECT pg_temp.here() AS node \gset
SET ROLE regress_calls_role;
SELECT pg_temp.try(format($$SELECT sched._node_query(%L, 'SELECT 1', NULL, 5000)$$, :'node'));
-- (A password the node did not ask for, under trust, is no password used.)
SELECT pg_temp.try(format($$SELECT sched._node_query(%L, 'SELECT 1', NULL, 5000)$$, :'node' || ' password=unused'));
RESET ROLE;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE regress_ds_calls WITH (FORCE);
DROP ROLE regress_calls_role;
