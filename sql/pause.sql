-- pause: sched.pause and sched.resume.  (Delivery of a paused notify type,
-- which needs the workers' timing, is in test/t/008_pause.pl.)

SELECT sched.define_biz('pz_pull', 'pull');

-- bad input
\set SHOW_CONTEXT never
SELECT sched.pause(NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT sched.resume(NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT sched.pause('pz_nope');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT sched.resume('pz_nope');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;

-- a running type: resume has nothing to do
SELECT sched.resume('pz_pull') AS resumed;
SELECT paused FROM sched.biz_stats WHERE biz_type = 'pz_pull';

-- paused: true once, then false; the views show it
SELECT sched.pause('pz_pull') AS paused;
SELECT sched.pause('pz_pull') AS paused_again;
SELECT paused, pending FROM sched.biz_stats WHERE biz_type = 'pz_pull';

-- a due task of a paused pull type cannot be claimed
SELECT sched.add('pz_pull', now() - interval '1 minute', '{"n": 1}') AS t1 \gset
-- (the scanner sets it aside as usual; wait for that, so that no claim below
-- skips a row the scanner holds)
SELECT wait_announced('pz_pull');
SELECT count(*) AS claimed FROM sched.claim('pz_pull');
SELECT state, attempt FROM sched.tasks WHERE id = :t1;

-- redefining the type keeps it paused
SELECT sched.define_biz('pz_pull', 'pull', max_attempts => 3);
SELECT paused, max_attempts FROM sched.biz WHERE name = 'pz_pull';
SELECT count(*) AS claimed FROM sched.claim('pz_pull');

-- resumed: the task is claimed, as attempt 1
SELECT sched.resume('pz_pull') AS resumed;
SELECT payload, attempt FROM sched.claim('pz_pull');
SELECT sched.ack(:t1) AS acked;
SELECT paused, pending, done FROM sched.biz_stats WHERE biz_type = 'pz_pull';

SELECT sched.drop_biz('pz_pull');
