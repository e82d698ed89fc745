-- pg_cron: sched.import_pg_cron where pg_cron is not installed, its
-- refusals, and how pg_cron's schedules and commands are read.
-- (test/t/027_import_pg_cron.pl imports from a real pg_cron.)

-- pg_cron is not installed here: a clear error, and nothing is made
SELECT * FROM sched.import_pg_cron();
SELECT count(*) AS types_made FROM sched.biz WHERE name = 'pg_cron';
-- pg_cron's jobs are in another database (cron.database_name): go there
SET cron.database_name = 'elsewhere';
SELECT * FROM sched.import_pg_cron();
RESET cron.database_name;

-- bad arguments, before anything else
SELECT * FROM sched.import_pg_cron(NULL);
SELECT * FROM sched.import_pg_cron('Cron-Jobs');
-- a type that does not run commands
SELECT sched.define_biz('pgcron_notify');
SELECT * FROM sched.import_pg_cron('pgcron_notify');
SELECT sched.drop_biz('pgcron_notify');

-- for administrators: a role without EXECUTE is refused by PostgreSQL, one
-- an administrator granted EXECUTE by the function itself (the schedules
-- would run as pg_cron's users)
CREATE ROLE regress_ds_cron NOLOGIN;
SET ROLE regress_ds_cron;
SELECT * FROM sched.import_pg_cron();
RESET ROLE;
GRANT USAGE ON SCHEMA sched TO regress_ds_cron;
GRANT EXECUTE ON FUNCTION sched.import_pg_cron(text) TO regress_ds_cron;
SET ROLE regress_ds_cron;
SELECT * FROM sched.import_pg_cron();
RESET ROLE;
REVOKE EXECUTE ON FUNCTION sched.import_pg_cron(text) FROM regress_ds_cron;
REVOKE USAGE ON SCHEMA sched FROM regress_ds_cron;
DROP ROLE regress_ds_cron;

-- pg_cron's schedules as delaysched rules: five cron fields as they are,
-- the macros, 'N seconds'; no rule (and why) for @reboot, '$' and what
-- delaysched cannot read
SELECT s AS pg_cron, r.rule, r.note
FROM (VALUES ('0 3 * * *'), ('  */15  9-17 * * mon-fri  '), ('30 3 * * 6'), ('0 0 13 * fri'),
			 ('@daily'), ('@Hourly'), ('@annually'), ('@midnight'),
			 ('30 seconds'), ('1 second'), ('5SECONDS'), ('59 seconds'),
			 ('0 seconds'), ('60 seconds'), ('1.5 seconds'),
			 ('@reboot'), ('@restart'), ('@fortnightly'),
			 ('0 0 $ * *'), ('0 12 $ jan *'),
			 ('*/10 * * * * *'), ('0 3 * * * echo hello'),
			 ('0 0 30 2 *'), ('61 * * * *'), ('* * * *'), (''), (NULL)) AS v(s),
	 LATERAL sched._pg_cron_rule(s) AS r;
-- cron.match_dom_and_dow: both day fields restricted cannot be read as pg_cron does
SELECT s AS pg_cron, r.rule, r.note
FROM (VALUES ('0 0 13 * fri'), ('0 0 13 * *'), ('0 0 * * fri'), ('0 0 */2 * 1')) AS v(s),
	 LATERAL sched._pg_cron_rule(s, true) AS r;
-- the rules are delaysched's: the same firings
SELECT t AT TIME ZONE 'UTC' AS utc FROM sched.next_runs('30 3 * * 6', 'UTC', '2026-11-28 00:00+00', 2) AS t;

-- commands that cannot run inside a transaction block
SELECT c AS command, sched._pg_cron_command_note(c) AS note
FROM (VALUES ('VACUUM'), ('vacuum analyze events'), ('  VACUUM(VERBOSE) t'), (E'-- nightly\nVACUUM FULL t'),
			 ('DELETE FROM events; VACUUM events'), ('CREATE INDEX CONCURRENTLY i ON t (a)'),
			 ('create unique index concurrently i on t (a)'), ('DROP INDEX CONCURRENTLY i'),
			 ('REINDEX TABLE CONCURRENTLY t'), ('ALTER TABLE p DETACH PARTITION p1 CONCURRENTLY'),
			 ('CREATE DATABASE x'), ('ALTER SYSTEM SET work_mem = ''8MB'''),
			 ('ANALYZE'), ('REFRESH MATERIALIZED VIEW CONCURRENTLY mv'), ('CALL nightly()'),
			 ('DELETE FROM cron.job_run_details WHERE end_time < now() - interval ''7 days'''),
			 ('SELECT vacuum_lo()'), ('')) AS v(c);
