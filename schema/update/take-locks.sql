/*
 * schema/update/take-locks.sql
 *		The first part of every update: take, all together and before
 *		anything else, the locks the rest of the update would take one by
 *		one on what sessions use while it runs.
 *
 * The update alters tables (0.2 -> 0.3: sched.schedule, sched.pointer; 0.1 -> 0.2, inside
 * the update from 0.1: sched.biz, sched.task, sched.finished) and replaces
 * the triggers of sched.task (with its partitions), sched.finished,
 * sched.attempt and sched.biz, and the views.  Taken one by one, in the
 * order of the files that follow, the update held sched.task while it
 * waited for sched.biz, and a session that held sched.biz ROW EXCLUSIVE and
 * came to sched.task (sched.define_biz then sched.add, in one transaction)
 * waited for the update in turn: a deadlock, and the session's statement
 * failed (40P01).  Here the update waits only while it holds none of them:
 * it waits for one, then tries for all the others without waiting; if one
 * is busy it lets go of them all and waits for that one.  A session
 * therefore waits for the update or goes on before it, and never
 * deadlocks with it (test/t/024_update_under_load.pl).  ACCESS EXCLUSIVE
 * throughout, the mode the table changes need, so that no lock is made
 * stronger later.  (The scanner workers do not run while the database is
 * at an older version than the library's.)
 *
 * It holds the line psql stops at, being the first file of every update
 * script the Makefile builds.
 */

\echo Use "ALTER EXTENSION delaysched UPDATE TO '0.3'" to load this file. \quit

DO $locks$
DECLARE
	v_relations regclass[];
	v_wait int := 1;
BEGIN
	SELECT pg_catalog.array_agg(c.oid::pg_catalog.regclass ORDER BY c.relkind, c.relname)
	INTO v_relations
	FROM pg_catalog.pg_class c
	WHERE c.relnamespace = 'sched'::pg_catalog.regnamespace
	  AND (c.relkind = 'v' OR c.relname IN ('biz', 'task', 'finished', 'attempt', 'schedule', 'pointer'));
	LOOP
		BEGIN
			EXECUTE pg_catalog.format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', v_relations[v_wait]);
			FOR i IN 1 .. pg_catalog.array_length(v_relations, 1) LOOP
				v_wait := i;
				EXECUTE pg_catalog.format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE NOWAIT', v_relations[i]);
			END LOOP;
			RETURN;
		EXCEPTION WHEN lock_not_available THEN
			-- The block's locks are let go of; wait for v_wait alone.
			NULL;
		END;
	END LOOP;
END
$locks$;
