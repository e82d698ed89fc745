-- sql_jobs: the 'sql' delivery.  A job's command runs in this database, as
-- the role that added it, committed with its done mark; a failure is an
-- attempt, retried with backoff, then dead; bad commands are refused when
-- they are added.  try() and wait_until() come from setup.
SET timezone = 'UTC';

SELECT sched.define_biz('sj_jobs', 'sql', max_attempts => 2, min_backoff => '10 milliseconds',
                        max_backoff => '20 milliseconds');
SELECT sched.define_biz('sj_slow', 'sql', timeout => '200 milliseconds', max_attempts => 1);
SELECT sched.define_biz('sj_notify');
SELECT name, delivery, timeout FROM sched.biz WHERE name LIKE 'sj\_%' ORDER BY name;

CREATE TABLE sj_log (tag text, who name DEFAULT current_user, at timestamptz DEFAULT clock_timestamp());
CREATE TABLE sj_secret (x int);
CREATE ROLE regress_sj_app;
CREATE ROLE regress_sj_other;
GRANT USAGE ON SCHEMA sched TO regress_sj_app, regress_sj_other;
GRANT EXECUTE ON FUNCTION sched.add_sql(text, timestamptz, text, text, text, int), sched.cancel(bigint),
	sched.add(text, timestamptz, jsonb, text, text, interval, text, int) TO regress_sj_app, regress_sj_other;
GRANT SELECT ON sched.tasks TO regress_sj_app, regress_sj_other;
GRANT INSERT ON sj_log TO regress_sj_app;
SELECT sched.grant_biz('sj_jobs', 'regress_sj_app');

-------------------------------------------------------------------------------
-- Refusals: nothing is stored
-------------------------------------------------------------------------------
SELECT try($$SELECT sched.add_sql('sj_jobs', now(), NULL)$$);
SELECT try($$SELECT sched.add_sql('sj_jobs', now(), '')$$);
SELECT try($$SELECT sched.add_sql('sj_jobs', now(), ' ;; -- nothing')$$);
SELECT try($$SELECT sched.add_sql('sj_jobs', now(), 'SELEC 1')$$);
SELECT try($$SELECT sched.add_sql('sj_jobs', now(), 'BEGIN; SELECT 1; COMMIT')$$, true);
SELECT try($$SELECT sched.add_sql('sj_jobs', now(), 'SELECT 1; ROLLBACK')$$, true);
SELECT try($$SELECT sched.add_sql('sj_jobs', now(), 'SELECT ' || repeat('1', 2000000))$$, true);
SELECT try($$SELECT sched.add_sql('sj_notify', now(), 'SELECT 1')$$, true);
SELECT try($$SELECT sched.add_sql('sj_nope', now(), 'SELECT 1')$$);
SELECT try($$SELECT sched.add_sql('sj_jobs', NULL, 'SELECT 1')$$);
SELECT try($$SELECT sched.add_sql('sj_jobs', 'infinity', 'SELECT 1')$$);
SELECT try($$SELECT sched.add('sj_jobs', now())$$);
SELECT try($$SELECT sched.add_after('sj_jobs', '1 second')$$);
SELECT try($$SELECT sched.add_many('sj_jobs', ARRAY[now()])$$);
SELECT try($$SELECT sched.define_schedule('sj_s', 'sj_jobs', '@daily')$$);
SELECT try($$SELECT sched.define_schedule('sj_s', 'sj_jobs', '@daily', command => 'COMMIT')$$);
SELECT try($$SELECT sched.define_schedule('sj_s', 'sj_notify', '@daily', command => 'SELECT 1')$$);
-- a role without the grant on the type
SET ROLE regress_sj_other;
SELECT try($$SELECT sched.add_sql('sj_jobs', now(), 'SELECT 1')$$);
RESET ROLE;
SELECT count(*) AS stored FROM sched.tasks WHERE biz_type LIKE 'sj\_%';
SELECT count(*) AS schedules FROM sched.schedules WHERE biz_type LIKE 'sj\_%';

-------------------------------------------------------------------------------
-- A job runs once, as its role, and is done with its run
-------------------------------------------------------------------------------
SET ROLE regress_sj_app;
SELECT sched.add_sql('sj_jobs', now(), $$INSERT INTO sj_log(tag) VALUES ('one'), ('two')$$) AS job \gset
RESET ROLE;
SELECT wait_until(format('(SELECT state = %L FROM sched.tasks WHERE id = %s)', 'done', :job));
SELECT state, attempt, last_error, command, run_as FROM sched.tasks WHERE id = :job;
SELECT tag, who FROM sj_log ORDER BY tag;
SELECT attempt, outcome, error, sqlstate, rows, duration >= '0' AS timed FROM sched.attempts WHERE id = :job;

-- a command that fails: retried, then dead; its attempts say why
SET ROLE regress_sj_app;
SELECT sched.add_sql('sj_jobs', now(), 'INSERT INTO sj_missing VALUES (1)') AS job \gset
RESET ROLE;
SELECT wait_until(format('(SELECT state = %L FROM sched.tasks WHERE id = %s)', 'dead', :job));
SELECT state, attempt, last_error FROM sched.tasks WHERE id = :job;
SELECT attempt, outcome, sqlstate, error FROM sched.attempts WHERE id = :job ORDER BY attempt;

-- what the role may not do, the job may not do, and nothing of it stays
SET ROLE regress_sj_app;
SELECT sched.add_sql('sj_jobs', now(),
	$$INSERT INTO sj_log(tag) VALUES ('before'); INSERT INTO sj_secret VALUES (1)$$) AS job \gset
SELECT sched.add_sql('sj_jobs', now(), $$SET ROLE postgres; INSERT INTO sj_log(tag) VALUES ('escalated')$$) AS role_job \gset
SELECT sched.add_sql('sj_jobs', now(),
	$$SELECT set_config('session_authorization', 'postgres', false)$$) AS auth_job \gset
RESET ROLE;
SELECT wait_until(format('(SELECT bool_and(state = %L) FROM sched.tasks WHERE id IN (%s, %s, %s))',
						 'dead', :job, :role_job, :auth_job));
SELECT id = :job AS privilege_job, last_error FROM sched.tasks WHERE id IN (:job, :role_job, :auth_job) ORDER BY id;
SELECT count(*) AS left_behind FROM sj_log WHERE tag IN ('before', 'escalated');
SELECT count(*) AS secret_rows FROM sj_secret;

-- the type's timeout
SELECT sched.add_sql('sj_slow', now(), 'SELECT pg_sleep(30)') AS job \gset
SELECT wait_until(format('(SELECT state = %L FROM sched.tasks WHERE id = %s)', 'dead', :job));
SELECT state, last_error FROM sched.tasks WHERE id = :job;
SELECT outcome, sqlstate FROM sched.attempts WHERE id = :job;

-------------------------------------------------------------------------------
-- sched.cancel of a running job stops its statement
-------------------------------------------------------------------------------
SELECT sched.define_biz('sj_long', 'sql', timeout => '1 minute');
SELECT sched.grant_biz('sj_long', 'regress_sj_app');
SET ROLE regress_sj_app;
SELECT sched.add_sql('sj_long', now(), 'SELECT pg_sleep(60)') AS job \gset
RESET ROLE;
SELECT wait_until(format('(SELECT status = %L FROM sched.tasks WHERE id = %s)', 'running', :job));
-- (the lease commits before the command starts: wait for the worker to say so)
SELECT wait_until(format('(SELECT count(*) = 1 FROM sched.workers WHERE role = %L AND holds = %L)',
						 'sql', 'job ' || :job)) AS a_worker_holds_it;
-- a role that may not schedule the type neither sees nor stops it
SET ROLE regress_sj_other;
SELECT sched.cancel(:job) AS other_cancelled;
RESET ROLE;
SELECT status FROM sched.tasks WHERE id = :job;
SET ROLE regress_sj_app;
SELECT sched.cancel(:job) AS cancelled;
RESET ROLE;
SELECT state FROM sched.tasks WHERE id = :job;
-- (the worker records the run once it has rolled back, after the cancellation)
SELECT wait_until(format('EXISTS (SELECT FROM sched.attempts WHERE id = %s)', :job));
SELECT attempt, outcome, sqlstate, error FROM sched.attempts WHERE id = :job;
SELECT wait_until($$(SELECT count(*) = 0 FROM sched.workers WHERE role = 'sql' AND holds IS NOT NULL)$$);

-------------------------------------------------------------------------------
-- Schedules run their command; run_now runs one more, paused or not
-------------------------------------------------------------------------------
SELECT sched.define_schedule('sj_every_second', 'sj_jobs', '* * * * * *',
	command => $$INSERT INTO sj_log(tag) VALUES ('tick')$$) IS NOT NULL AS defined;
SELECT wait_until($$(SELECT runs >= 2 FROM sched.schedules WHERE name = 'sj_every_second')$$);
SELECT sched.pause_schedule('sj_every_second');
SELECT wait_until($$(SELECT count(*) = 0 FROM sched.tasks
					 WHERE schedule = 'sj_every_second' AND state IN ('pending', 'delivered'))$$);
SELECT runs AS runs_before FROM sched.schedules WHERE name = 'sj_every_second' \gset
SELECT count(*) AS ticks_before FROM sj_log WHERE tag = 'tick' \gset
SELECT sched.run_now('sj_every_second') AS job \gset
SELECT wait_until(format('(SELECT state = %L FROM sched.tasks WHERE id = %s)', 'done', :job));
SELECT schedule, command, run_as FROM sched.tasks WHERE id = :job;
SELECT count(*) - :ticks_before AS ticks_since FROM sj_log WHERE tag = 'tick';
SELECT runs - :runs_before AS counted_since, paused, command, run_as FROM sched.schedules WHERE name = 'sj_every_second';
SELECT try($$SELECT sched.run_now('sj_missing')$$);
SELECT sched.drop_schedule('sj_every_second');

-------------------------------------------------------------------------------
-- A CALL whose procedure commits, and VACUUM, run in a session of the
-- job's role: what the procedure committed stays, the done mark commits
-- with its last transaction, and a failure after a COMMIT runs it again
-------------------------------------------------------------------------------
CREATE PROCEDURE sj_commits() LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO sj_log(tag) VALUES ('first');
	COMMIT;
	INSERT INTO sj_log(tag) VALUES ('second');
END $$;
CREATE PROCEDURE sj_commits_then_fails() LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO sj_log(tag) VALUES ('kept');
	COMMIT;
	INSERT INTO sj_log(tag) VALUES ('lost');
	RAISE EXCEPTION 'failed after a commit';
END $$;
-- ROLLBACK inside goes on as the job's role, never as the worker's
CREATE PROCEDURE sj_rolls_back() LANGUAGE plpgsql AS $$
BEGIN
	ROLLBACK;
	INSERT INTO sj_log(tag) SELECT 'escalated' FROM sj_secret;
END $$;
CREATE ROLE regress_sj_session LOGIN;
GRANT USAGE ON SCHEMA sched TO regress_sj_session;
GRANT EXECUTE ON FUNCTION sched.add_sql(text, timestamptz, text, text, text, int) TO regress_sj_session;
GRANT INSERT ON sj_log TO regress_sj_session;
SELECT sched.grant_biz('sj_jobs', 'regress_sj_session');
SELECT sched.add_sql('sj_jobs', now(), 'CALL sj_commits()') AS job \gset
SELECT wait_until(format('(SELECT state = %L FROM sched.tasks WHERE id = %s)', 'done', :job));
SELECT tag, count(*) FROM sj_log WHERE tag IN ('first', 'second') GROUP BY tag ORDER BY tag;
SELECT outcome, rows FROM sched.attempts WHERE id = :job;
SELECT sched.add_sql('sj_jobs', now(), 'CALL sj_commits_then_fails()') AS job \gset
SELECT wait_until(format('(SELECT state = %L FROM sched.tasks WHERE id = %s)', 'dead', :job));
SELECT state, attempt, last_error FROM sched.tasks WHERE id = :job;
SELECT tag, count(*) FROM sj_log WHERE tag IN ('kept', 'lost') GROUP BY tag ORDER BY tag;
SELECT sched.add_sql('sj_jobs', now(), 'VACUUM sj_log') AS job \gset
SELECT wait_until(format('(SELECT state = %L FROM sched.tasks WHERE id = %s)', 'done', :job));
SET ROLE regress_sj_session;
SELECT sched.add_sql('sj_jobs', now(), 'CALL sj_rolls_back()') AS job \gset
RESET ROLE;
SELECT wait_until(format('(SELECT state = %L FROM sched.tasks WHERE id = %s)', 'dead', :job));
SELECT state, last_error, run_as FROM sched.tasks WHERE id = :job;
SELECT count(*) AS escalated FROM sj_log WHERE tag = 'escalated';

-------------------------------------------------------------------------------
-- A type keeps its delivery while it has tasks or schedules
-------------------------------------------------------------------------------
SELECT sched.add_sql('sj_jobs', now() + interval '1 day', 'SELECT 1') AS job \gset
SELECT try($$SELECT sched.define_biz('sj_jobs')$$, true);
SELECT sched.cancel(:job);
SELECT try($$SELECT sched.define_biz('sj_notify', 'sql')$$);
SELECT delivery FROM sched.biz WHERE name = 'sj_notify';

-------------------------------------------------------------------------------
-- A job the scanner names to the workers (the ready ring) is leased by its
-- key only while it is parked and its type is not paused and not limited
-------------------------------------------------------------------------------
SELECT sched.define_biz('sj_held', 'sql');
SELECT sched.pause('sj_held');
SELECT sched.add_sql('sj_held', now(), 'SELECT 1') AS job \gset
SELECT wait_until(format('(SELECT state = %L FROM sched.task WHERE id = %s)', 'r', :job)) AS parked;
SELECT bucket FROM sched.task WHERE id = :job \gset
SELECT count(*) AS leased_while_paused FROM sched._sql_claim_one(1999::smallint, :bucket::smallint, :job);
-- (sched.resume puts the job back for the scanner; in these transactions,
-- which the workers do not see, it is parked again by hand)
BEGIN;
SELECT sched.resume('sj_held');
UPDATE sched.task SET state = 'r' WHERE id = :job;
SELECT sched.define_biz('sj_held', 'sql', rate_limit => 5);
SELECT count(*) AS leased_while_rate_limited FROM sched._sql_claim_one(1999::smallint, :bucket::smallint, :job);
ROLLBACK;
BEGIN;
SELECT sched.resume('sj_held');
UPDATE sched.task SET state = 'r' WHERE id = :job;
SELECT sched.define_biz('sj_held', 'sql', max_concurrency => 1);
SELECT count(*) AS leased_while_capped FROM sched._sql_claim_one(1999::smallint, :bucket::smallint, :job);
ROLLBACK;
BEGIN;
SELECT sched.resume('sj_held');
UPDATE sched.task SET state = 'r' WHERE id = :job;
SELECT id = :job AS the_job, attempt, command, timeout_ms, next_at
FROM sched._sql_claim_one(1999::smallint, :bucket::smallint, :job);
SELECT state, lease_owner, attempt FROM sched.task WHERE id = :job;
SELECT count(*) AS leased_again FROM sched._sql_claim_one(1999::smallint, :bucket::smallint, :job);
ROLLBACK;
SELECT state, attempt FROM sched.task WHERE id = :job;
SELECT sched.drop_biz('sj_held', cancel_tasks => true) AS dropped;

-- Jobs due together: each runs once.  A worker leases its next job in the
-- transaction of a run that succeeded; a run whose commit fails (a deferred
-- constraint) takes that lease with it, and the job is leased again.
CREATE TABLE sj_parent (id int PRIMARY KEY);
CREATE TABLE sj_child (tag text, parent int REFERENCES sj_parent DEFERRABLE INITIALLY DEFERRED);
GRANT INSERT ON sj_child TO regress_sj_app;
SELECT sched.define_biz('sj_burst', 'sql', max_attempts => 1);
SELECT sched.grant_biz('sj_burst', 'regress_sj_app');
SET ROLE regress_sj_app;
SELECT count(sched.add_sql('sj_burst', date_trunc('second', now()) + interval '1 second',
		 format('INSERT INTO sj_child VALUES (%L, %s)', 'b' || i, CASE WHEN i % 3 = 0 THEN '1' ELSE 'NULL' END)))
	AS added
FROM generate_series(1, 24) i;
RESET ROLE;
SELECT wait_until($$(SELECT count(*) = 24 FROM sched.tasks WHERE biz_type = 'sj_burst' AND state IN ('done', 'dead'))$$);
SELECT state, count(*), min(attempt), max(attempt), min(last_error) AS error
FROM sched.tasks WHERE biz_type = 'sj_burst' GROUP BY state ORDER BY state;
SELECT count(*) AS runs, count(DISTINCT a.id) AS jobs
FROM sched.attempts a JOIN sched.tasks t USING (id) WHERE t.biz_type = 'sj_burst';
SELECT count(*) AS rows_committed, count(DISTINCT tag) AS distinct_tags FROM sj_child;
SELECT sched.drop_biz('sj_burst', cancel_tasks => true) >= 0 AS dropped;
DROP TABLE sj_child, sj_parent;

-------------------------------------------------------------------------------
-- What a job leaves in its worker's session is dropped
-------------------------------------------------------------------------------
SELECT sched.add_sql('sj_jobs', now(), 'SELECT pg_advisory_lock(424242)') AS job \gset
SELECT wait_until(format('(SELECT state = %L FROM sched.tasks WHERE id = %s)', 'done', :job));
SELECT wait_until($$NOT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND objid = 424242)$$)
	AS advisory_lock_released;

SELECT sched.drop_biz('sj_jobs', cancel_tasks => true) >= 0 AS dropped;
SELECT sched.drop_biz('sj_slow', cancel_tasks => true) >= 0 AS dropped;
SELECT sched.drop_biz('sj_long', cancel_tasks => true) >= 0 AS dropped;
SELECT sched.drop_biz('sj_notify');
DROP TABLE sj_log, sj_secret;
DROP PROCEDURE sj_commits(), sj_commits_then_fails(), sj_rolls_back();
REVOKE ALL ON SCHEMA sched FROM regress_sj_app, regress_sj_other, regress_sj_session;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA sched FROM regress_sj_app, regress_sj_other, regress_sj_session;
REVOKE ALL ON ALL TABLES IN SCHEMA sched FROM regress_sj_app, regress_sj_other, regress_sj_session;
DROP ROLE regress_sj_app, regress_sj_other, regress_sj_session;
