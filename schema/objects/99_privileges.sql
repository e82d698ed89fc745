-------------------------------------------------------------------------------
-- Privileges: nothing for PUBLIC; administrators grant what roles need
-- (see doc/privileges.md).  Numbered 99 to stay the last object file: what
-- it revokes is every function and relation the files before it made.
-------------------------------------------------------------------------------

-- Every object that still has the default privileges (a NULL ACL: a new
-- one, made by this script), so that an update keeps what an administrator
-- granted PUBLIC on the objects it replaces.  Those default privileges let
-- PUBLIC execute a function, and nothing else.
DO $privileges$
DECLARE
	r record;
BEGIN
	FOR r IN
		SELECT pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', p.oid::pg_catalog.regprocedure) AS revoke
		FROM pg_catalog.pg_proc p
		WHERE p.pronamespace = 'sched'::pg_catalog.regnamespace AND p.proacl IS NULL
		UNION ALL
		SELECT pg_catalog.format('REVOKE ALL ON %s FROM PUBLIC', c.oid::pg_catalog.regclass)
		FROM pg_catalog.pg_class c
		WHERE c.relnamespace = 'sched'::pg_catalog.regnamespace AND c.relkind IN ('r', 'p', 'v', 'S')
		  AND c.relacl IS NULL
	LOOP
		EXECUTE r.revoke;
	END LOOP;
END
$privileges$;
-- The views call these as the role reading them (PostgreSQL checks EXECUTE
-- on a function in a view against that role), so that SELECT on a view is
-- all a role needs.  Each is safe to call directly with any arguments:
-- sched._caller() only tells a role which role it is running as; the
-- others answer only about the types the session's role may read
-- (src/base/caller.c), or refuse a role that may not read their view
-- (src/cluster/worker_views.c).
GRANT EXECUTE ON FUNCTION sched._caller(),
	sched._task_status(bigint, text, "char", timestamptz, int, timestamptz, text, boolean, boolean, int),
	sched._tokens(text, float8, int), sched._type_counts(text[]), sched._consumer_cap(text),
	sched._workers(), sched._cluster() TO PUBLIC;
-- The cluster-wide view is for monitoring (src/worker_views.c checks it too).
GRANT USAGE ON SCHEMA sched TO pg_monitor;
GRANT SELECT ON sched.cluster TO pg_monitor;
GRANT EXECUTE ON FUNCTION sched._cluster() TO pg_monitor;
GRANT EXECUTE ON FUNCTION sched.metrics(), sched.metric_samples() TO pg_monitor;

-- Wake a scanner that was waiting for the extension to appear.
SELECT sched._wake('-infinity');
-- Gauges kept in shared memory from an earlier life of the extension in this
-- database (DROP EXTENSION leaves them, and its workers) are counted again.
SELECT sched.recount_stats();
