-------------------------------------------------------------------------------
-- Privileges: nothing for PUBLIC; administrators grant what roles need
-- (see doc/privileges.md).
-------------------------------------------------------------------------------

REVOKE ALL ON ALL TABLES IN SCHEMA sched FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA sched FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA sched FROM PUBLIC;
-- The views call it, as the role reading them: it only tells a role which
-- role it is running as (see src/caller.c).
GRANT EXECUTE ON FUNCTION sched._caller() TO PUBLIC;
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
