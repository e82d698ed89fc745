-- statuses: sched.tasks.status says where an unfinished task is and why.
-- (The HTTP statuses and lease_expired need an HTTP worker or a second
-- session: test/t/018_metrics.pl.)

SELECT sched.define_biz('s_plain', ack_timeout => '1 hour', max_attempts => 3);
SELECT sched.define_biz('s_pull', 'pull');
SELECT sched.define_biz('s_rate', rate_limit => 0.01, burst => 1);
SELECT sched.define_biz('s_cap', max_concurrency => 1, ack_timeout => '1 hour');

-- waiting: not due yet
SELECT sched.add('s_plain', now() + interval '1 hour') AS waiting \gset
-- awaiting_ack, then retry_wait after a nack with a delay
SELECT sched.add('s_plain', now() - interval '1 second') AS retried \gset
SELECT sched.add('s_plain', now() - interval '1 second') AS delivered \gset
SELECT wait_until(format('(SELECT count(*) = 2 FROM sched.task WHERE id IN (%s, %s) AND state = %L)',
						 :retried, :delivered, 'd')) AS both_delivered;
SELECT sched.nack(:retried, '1 hour', 'later');
-- done, dead, cancelled
SELECT sched.add('s_plain', now() + interval '1 hour') AS cancelled \gset
SELECT sched.cancel(:cancelled);
-- claimable: a pull task announced
SELECT sched.add('s_pull', now() - interval '1 second') AS claimable \gset
SELECT wait_announced('s_pull');
-- throttled: one token, then none for 100 s
SELECT sched.add('s_rate', now() - interval '1 second') AS rate_first \gset
SELECT sched.add('s_rate', now() - interval '1 second') AS throttled \gset
-- at_concurrency_cap: one delivery may await acknowledgement
SELECT sched.add('s_cap', now() - interval '1 second') AS cap_first \gset
SELECT sched.add('s_cap', now() - interval '1 second') AS capped \gset
-- (the drain delivers the first of each and leaves the second parked)
SELECT wait_until(format('(SELECT count(*) = 2 FROM sched.task WHERE id IN (%s, %s) AND state = %L)',
						 :rate_first, :cap_first, 'd')) AS firsts_delivered;
SELECT wait_until(format('(SELECT count(*) = 2 FROM sched.task WHERE id IN (%s, %s) AND state = %L)',
						 :throttled, :capped, 'r')) AS seconds_parked;

SELECT CASE id WHEN :waiting THEN 'waiting' WHEN :retried THEN 'retried' WHEN :delivered THEN 'delivered'
			   WHEN :cancelled THEN 'cancelled' WHEN :claimable THEN 'claimable'
			   WHEN :throttled THEN 'throttled' WHEN :capped THEN 'capped' END AS task,
	   state, status
FROM sched.tasks WHERE id IN (:waiting, :retried, :delivered, :cancelled, :claimable, :throttled, :capped)
ORDER BY 1;
-- the one that got the token and the one in the slot are delivered
SELECT count(*) AS delivered_ones FROM sched.tasks WHERE id IN (:rate_first, :cap_first) AND status = 'awaiting_ack';

-- acknowledged: done; the cap's slot frees, and the capped task is delivered
SELECT sched.ack(:delivered), sched.ack(:cap_first);
SELECT wait_until(format('(SELECT state = %L FROM sched.task WHERE id = %s)', 'd', :capped)) AS capped_delivered;
SELECT status FROM sched.tasks WHERE id IN (:delivered, :capped) ORDER BY id;

-- due: a task whose time has come and that no scanner has taken yet (this
-- transaction's own, which no scanner sees before the commit); paused: the
-- same of a paused type
BEGIN;
SELECT sched.add('s_plain', now() - interval '1 second') AS due \gset
SELECT status FROM sched.tasks WHERE id = :due;
SELECT sched.pause('s_plain');
SELECT status FROM sched.tasks WHERE id = :due;
ROLLBACK;
-- paused: a parked task of a paused type
SELECT sched.pause('s_pull');
SELECT status FROM sched.tasks WHERE id = :claimable;
SELECT sched.resume('s_pull');

-- dead: the last attempt nacked
SELECT sched.reschedule(:retried, now() - interval '1 second');
SELECT wait_until(format('(SELECT state = %L FROM sched.task WHERE id = %s)', 'd', :retried)) AS redelivered;
SELECT sched.nack(:retried);
SELECT sched.reschedule(:retried, now() - interval '1 second');
SELECT wait_until(format('(SELECT state = %L FROM sched.task WHERE id = %s)', 'd', :retried)) AS redelivered;
SELECT sched.nack(:retried);
SELECT state, status FROM sched.tasks WHERE id = :retried;

-- payload_omitted: a message too large for NOTIFY goes without its payload,
-- and last_error says so (when no earlier failure is there to keep)
SELECT sched.add('s_plain', now() - interval '1 second', jsonb_build_object('big', repeat('x', 9000))) AS big \gset
SELECT wait_until(format('(SELECT state = %L FROM sched.task WHERE id = %s)', 'd', :big)) AS big_delivered;
SELECT state, status, split_part(last_error, ': ', 1) AS code FROM sched.tasks WHERE id = :big;

-- every status of an unfinished task is one of the documented words
SELECT count(*) AS undocumented FROM sched.tasks
WHERE status NOT IN ('waiting', 'retry_wait', 'due', 'paused', 'throttled', 'at_concurrency_cap', 'claimable',
					 'waiting_for_http_slot', 'handed_to_http_worker', 'request_in_flight', 'awaiting_ack',
					 'lease_expired', 'done', 'dead', 'cancelled');

SELECT sched.drop_biz(name, cancel_tasks => true) >= 0 AS dropped FROM sched.biz WHERE name LIKE 's\_%' ORDER BY name;
