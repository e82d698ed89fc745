-- claim_ack: the pull cycle -- claim, ack, nack, dead, retry.
-- wait_announced() (from setup) lets the scanner finish announcing due tasks
-- first, so that sched.claim never skips a row the scanner holds.

SELECT sched.define_biz('jobs', 'pull', max_attempts => 2, ack_timeout => '1 hour');

-- three tasks due now (added out of run_at order) and one tomorrow
SELECT sched.add('jobs', now() - interval '1 minute', '{"n": 2}') AS t2 \gset
SELECT sched.add('jobs', now() - interval '2 minutes', '{"n": 1}') AS t1 \gset
SELECT sched.add('jobs', now() - interval '30 seconds', '{"n": 3}') AS t3 \gset
SELECT sched.add('jobs', now() + interval '1 day', '{"n": 4}') AS t4 \gset
SELECT wait_announced('jobs');

-- announced tasks still show as pending; three are due
SELECT payload, state, attempt FROM sched.tasks WHERE biz_type = 'jobs' ORDER BY run_at;
SELECT pending, due_now, awaiting_ack, done, dead FROM sched.biz_stats WHERE biz_type = 'jobs';

-- claim returns due tasks in run_at order, attempt 1, at most max_tasks
SELECT payload, attempt FROM sched.claim('jobs', 1);
SELECT payload, attempt FROM sched.claim('jobs');
-- a second claim finds nothing
SELECT count(*) AS claimed_again FROM sched.claim('jobs');

-- claimed tasks are delivered, leased for ack_timeout
SELECT payload, state, attempt, lease_until - delivered_at AS lease
FROM sched.tasks WHERE biz_type = 'jobs' ORDER BY run_at;
SELECT pending, due_now, awaiting_ack, done, dead FROM sched.biz_stats WHERE biz_type = 'jobs';

-- ack: true once, then false; the task is done
SELECT sched.ack(:t1) AS acked;
SELECT sched.ack(:t1) AS acked_again;
SELECT state, attempt, finished_at IS NOT NULL AS finished FROM sched.tasks WHERE id = :t1;
-- ack of a pending (never delivered) task or an unknown id: false
SELECT sched.ack(:t4) AS acked_pending, sched.ack(-1) AS acked_unknown;
SELECT state FROM sched.tasks WHERE id = :t4;

-- nack with retry_in '0': pending again at once, with the error
SELECT sched.nack(:t2, '0', 'try again') AS nacked;
SELECT state, attempt, last_error, lease_until FROM sched.tasks WHERE id = :t2;
-- nack of a task not awaiting acknowledgement: false
SELECT sched.nack(:t2) AS nacked_pending, sched.nack(:t1) AS nacked_done, sched.nack(-1) AS nacked_unknown;
-- claimable again, attempt 2
SELECT wait_announced('jobs');
SELECT payload, attempt FROM sched.claim('jobs');

-- nack at max_attempts (2): dead, with the error and the attempt count
SELECT sched.nack(:t2, error => 'boom') AS nacked;
SELECT state, attempt, last_error, finished_at IS NOT NULL AS finished FROM sched.tasks WHERE id = :t2;
SELECT sched.nack(:t2) AS nacked_dead;
SELECT pending, due_now, awaiting_ack, done, dead FROM sched.biz_stats WHERE biz_type = 'jobs';

-- ack_many: counts only tasks awaiting acknowledgement; NULLs and unknown ids ignored
SELECT sched.ack_many(ARRAY[:t3, :t1, NULL, -1, :t4, :t2]) AS acked;
SELECT sched.ack_many(ARRAY[:t3]) AS acked_again, sched.ack_many('{}') AS acked_none;
SELECT payload, state, attempt FROM sched.tasks WHERE biz_type = 'jobs' ORDER BY run_at;

-- retry of the dead task: pending and due at once, attempt 0, error kept
SELECT sched.retry(:t2) AS retried;
SELECT state, attempt, last_error, run_at <= clock_timestamp() AS due, finished_at
FROM sched.tasks WHERE id = :t2;
SELECT count(*) AS finished_rows FROM sched.finished WHERE id = :t2;
-- retry is only for dead tasks
SELECT sched.retry(:t2) AS retried_pending, sched.retry(:t1) AS retried_done, sched.retry(-1) AS retried_unknown;
-- the revived task is claimed again from attempt 1
SELECT wait_announced('jobs');
SELECT payload, attempt FROM sched.claim('jobs');

-- nack without retry_in: back off 1 second after the first attempt
SELECT clock_timestamp() AS before_nack \gset
SELECT sched.nack(:t2) AS nacked;
SELECT state, attempt, last_error,
       run_at BETWEEN :'before_nack'::timestamptz + interval '1 second'
                  AND clock_timestamp() + interval '1 second' AS backed_off
FROM sched.tasks WHERE id = :t2;
-- reschedule makes it due now; claim takes it (attempt 2); ack
SELECT sched.reschedule(:t2, now() - interval '1 hour') AS rescheduled;
SELECT wait_announced('jobs');
SELECT payload, attempt FROM sched.claim('jobs');
SELECT sched.ack(:t2) AS acked;
SELECT pending, due_now, awaiting_ack, done, dead FROM sched.biz_stats WHERE biz_type = 'jobs';

-- a lease that runs out: the scanner makes the task claimable again
SELECT sched.define_biz('jobs_short', 'pull', max_attempts => 3, ack_timeout => '1 second');
SELECT sched.add('jobs_short', now() - interval '1 minute', '{"s": 1}') AS s1 \gset
SELECT wait_announced('jobs_short');
SELECT payload, attempt FROM sched.claim('jobs_short');
DO $$
BEGIN
	FOR i IN 1 .. 600 LOOP
		EXIT WHEN EXISTS (SELECT FROM sched.task WHERE biz_type = 'jobs_short' AND state = 'r');
		PERFORM pg_sleep(0.1);
	END LOOP;
END
$$;
SELECT state, attempt, last_error, lease_until FROM sched.tasks WHERE id = :s1;
-- claim and ack in one transaction, so the short lease cannot run out in between
BEGIN;
SELECT payload, attempt FROM sched.claim('jobs_short');
SELECT sched.ack(:s1) AS acked;
COMMIT;
SELECT state, attempt FROM sched.tasks WHERE id = :s1;

-- retry refuses when another unfinished task holds the dead task's dedupe key
SELECT sched.define_biz('jobs_once', 'pull', max_attempts => 1, ack_timeout => '1 hour');
SELECT sched.add('jobs_once', now() - interval '1 minute', '{"o": 1}', 'once') AS o1 \gset
SELECT wait_announced('jobs_once');
SELECT payload, attempt FROM sched.claim('jobs_once');
SELECT sched.nack(:o1) AS nacked;
SELECT state, last_error FROM sched.tasks WHERE id = :o1;
-- the dead task released its key
SELECT sched.add('jobs_once', '2100-01-01', '{"o": 2}', 'once') AS o2 \gset
SELECT :o2 <> :o1 AS new_id;
SELECT try($$SELECT sched.retry($$ || :o1 || $$)$$) AS retry_held;
SELECT state FROM sched.tasks WHERE id = :o1;
-- once the key is free, retry takes it back
SELECT sched.cancel(:o2) AS cancelled;
SELECT sched.retry(:o1) AS retried;
SELECT sched.add('jobs_once', '2100-01-01', '{"o": 3}', 'once') = :o1 AS key_held_by_retried;

-- retry of a dead task whose type was dropped: refused, the task stays dead
SELECT wait_announced('jobs_once');
SELECT payload, attempt FROM sched.claim('jobs_once');
SELECT sched.nack(:o1) AS nacked;
SELECT sched.drop_biz('jobs_once') AS dropped_tasks;
SELECT try($$SELECT sched.retry($$ || :o1 || $$)$$) AS retry_dropped;
SELECT state FROM sched.tasks WHERE id = :o1;

-- ack_many finds a task that nack moved to another bucket
SELECT sched.define_biz('jobs_moved', delivery => 'pull', max_attempts => 5);
SELECT sched.add('jobs_moved', now() - interval '7 seconds', '{"m": 1}') AS m1 \gset
SELECT wait_announced('jobs_moved');
SELECT count(*) AS claimed FROM sched.claim('jobs_moved');
SELECT sched.nack(:m1, '0') AS nacked;
SELECT wait_announced('jobs_moved');
SELECT payload, attempt FROM sched.claim('jobs_moved');
SELECT sched.ack_many(ARRAY[:m1]) AS acked_moved;
SELECT state FROM sched.tasks WHERE id = :m1;
SELECT sched.drop_biz('jobs_moved');

-- clean up
SELECT sched.drop_biz('jobs', cancel_tasks => true);
SELECT sched.drop_biz('jobs_short');
