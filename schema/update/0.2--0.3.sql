/*
 * schema/update/0.2--0.3.sql
 *		What an update from 0.2 to 0.3 does before it creates or replaces the
 *		functions, views and triggers.
 *
 * The Makefile builds delaysched--0.2--0.3.sql from this file followed by
 * every file of schema/objects/ (see schema/install.sql): the tables,
 * indexes and the objects that cannot be replaced in place (a function
 * whose arguments or result change, a view that loses a column) change
 * here; everything else is made anew by the same files as a fresh install.
 * test/t/013_upgrade.pl checks that an updated database has the schema of a
 * fresh 0.3 install and keeps its tasks, schedules and grants.
 *
 * Since 0.2: no table changed.  Below: the locks, taken first so that the
 * update cannot deadlock with the sessions using the extension meanwhile
 * (test/t/024_update_under_load.pl).
 */

\echo Use "ALTER EXTENSION delaysched UPDATE TO '0.3'" to load this file. \quit


/*
 * Take up front, all together, the locks the rest of this update would take
 * one by one on what sessions use while it runs: SHARE ROW EXCLUSIVE on
 * the tables whose triggers it replaces (sched.task with its partitions,
 * sched.finished, sched.attempt, sched.biz), ACCESS EXCLUSIVE on the views
 * it replaces.  Taken one by one, in the order of the files that follow,
 * the update held sched.task while it waited for sched.biz; a session that
 * holds sched.biz ROW EXCLUSIVE and comes to sched.task (sched.define_biz
 * then sched.add, in one transaction) waited for the update in turn: a
 * deadlock, and the session's statement failed (40P01).  Here the update
 * waits only while it holds none of them: it waits for one, then tries for
 * all the others without waiting; if one is busy it lets go of them all and
 * waits for that one.  A session therefore waits for the update or goes on
 * before it, and never deadlocks with it.  (The scanner workers do not run
 * while the database is at 0.2.)
 */
DO $locks$
DECLARE
	v_relations regclass[];
	v_modes text[];
	v_wait int := 1;
BEGIN
	SELECT pg_catalog.array_agg(c.oid::pg_catalog.regclass ORDER BY c.relkind, c.relname),
		   pg_catalog.array_agg(CASE c.relkind WHEN 'v' THEN 'ACCESS EXCLUSIVE' ELSE 'SHARE ROW EXCLUSIVE' END
								ORDER BY c.relkind, c.relname)
	INTO v_relations, v_modes
	FROM pg_catalog.pg_class c
	WHERE c.relnamespace = 'sched'::pg_catalog.regnamespace
	  AND (c.relkind = 'v' OR c.relname IN ('biz', 'task', 'finished', 'attempt'));
	LOOP
		BEGIN
			EXECUTE pg_catalog.format('LOCK TABLE %s IN %s MODE', v_relations[v_wait], v_modes[v_wait]);
			FOR i IN 1 .. pg_catalog.array_length(v_relations, 1) LOOP
				v_wait := i;
				EXECUTE pg_catalog.format('LOCK TABLE %s IN %s MODE NOWAIT', v_relations[i], v_modes[i]);
			END LOOP;
			RETURN;
		EXCEPTION WHEN lock_not_available THEN
			-- The block's locks are let go of; wait for v_wait alone.
			NULL;
		END;
	END LOOP;
END
$locks$;
