-- leases: what a consumer does with a delivery besides ack -- extend its
-- lease (sched.extend), and the backoff of a notify or pull type after a
-- nack or a lease that ran out; cancelling a pending task by its dedupe
-- key (sched.cancel_by_key).

-- notify and pull types keep their backoff (0.2 dropped it); bad ones are refused
SELECT sched.define_biz('ls_pull', 'pull', max_attempts => 5, ack_timeout => '1 hour',
                        min_backoff => '5 minutes', max_backoff => '8 minutes');
SELECT sched.define_biz('ls_notify', ack_timeout => '1 hour');
SELECT name, delivery, min_backoff, max_backoff FROM sched.biz WHERE name LIKE 'ls\_%' ORDER BY name;
SELECT try($$SELECT sched.define_biz('ls_bad', 'pull', min_backoff => NULL)$$) AS min_null;
SELECT try($$SELECT sched.define_biz('ls_bad', 'notify', min_backoff => '1 millisecond')$$) AS min_too_short;
SELECT try($$SELECT sched.define_biz('ls_bad', 'pull', min_backoff => '1 minute', max_backoff => '1 second')$$) AS max_below_min;
SELECT count(*) AS ls_bad_defined FROM sched.biz WHERE name = 'ls_bad';

-- nack without retry_in waits the type's backoff: min_backoff after the
-- first attempt, then twice that, in its upper half, capped at max_backoff
SELECT sched.add('ls_pull', now() - interval '1 minute', '{"n": 1}', 'key-1') AS p1 \gset
SELECT wait_announced('ls_pull');
SELECT payload, attempt FROM sched.claim('ls_pull');
SELECT clock_timestamp() AS t0 \gset
SELECT sched.nack(:p1) AS nacked;
SELECT state, attempt,
       run_at BETWEEN :'t0'::timestamptz + interval '5 minutes'
                  AND clock_timestamp() + interval '5 minutes' AS first_backoff
FROM sched.tasks WHERE id = :p1;
SELECT sched.reschedule(:p1, now() - interval '1 minute') AS rescheduled;
SELECT wait_announced('ls_pull');
SELECT payload, attempt FROM sched.claim('ls_pull');
SELECT clock_timestamp() AS t0 \gset
SELECT sched.nack(:p1) AS nacked;
-- attempt 2: min(5 min * 2, 8 min) = 8 min, then somewhere in [4, 8] min, at least 5
SELECT state, attempt,
       run_at BETWEEN :'t0'::timestamptz + interval '5 minutes'
                  AND clock_timestamp() + interval '8 minutes' AS second_backoff
FROM sched.tasks WHERE id = :p1;

-- cancel_by_key: the pending task holding the key; then the key is free
SELECT sched.cancel_by_key('ls_pull', 'key-1') AS cancelled;
SELECT state, finished_at IS NOT NULL AS finished FROM sched.tasks WHERE id = :p1;
SELECT sched.cancel_by_key('ls_pull', 'key-1') AS cancelled_again,
       sched.cancel_by_key('ls_pull', 'no-such-key') AS cancelled_unknown,
       sched.cancel_by_key('ls_notify', 'key-1') AS cancelled_other_type;
SELECT sched.add('ls_pull', now() + interval '1 day', '{"n": 2}', 'key-1') <> :p1 AS key_reused;
SELECT sched.cancel_by_key('ls_pull', 'key-1') AS cancelled_new_holder;
-- a delivered task is not pending: left as it is
SELECT sched.add('ls_pull', now() - interval '1 minute', '{"n": 3}', 'key-3') AS p3 \gset
SELECT wait_announced('ls_pull');
SELECT payload, attempt FROM sched.claim('ls_pull');
SELECT sched.cancel_by_key('ls_pull', 'key-3') AS cancelled_delivered;
SELECT state FROM sched.tasks WHERE id = :p3;
-- refused: an unknown type, NULLs
SELECT try($$SELECT sched.cancel_by_key('ls_nope', 'key-3')$$) AS unknown_type;
SELECT try($$SELECT sched.cancel_by_key(NULL, 'key-3')$$) AS null_type;
SELECT try($$SELECT sched.cancel_by_key('ls_pull', NULL)$$) AS null_key;

-- extend: the lease of the delivered task runs until "by" from now
SELECT clock_timestamp() AS t0 \gset
SELECT sched.extend(:p3, '2 hours') BETWEEN :'t0'::timestamptz + interval '2 hours'
                                        AND clock_timestamp() + interval '2 hours' AS extended;
SELECT lease_until BETWEEN :'t0'::timestamptz + interval '2 hours'
                       AND clock_timestamp() + interval '2 hours' AS shown_in_tasks
FROM sched.tasks WHERE id = :p3;
-- never shortened: a shorter extension keeps the lease it has
SELECT sched.extend(:p3, '1 second') = (SELECT lease_until FROM sched.task WHERE id = :p3) AS kept;
-- nothing to extend: a pending task, a finished one, an unknown id
SELECT sched.add('ls_pull', now() + interval '1 day', '{"n": 4}') AS p4 \gset
SELECT sched.extend(:p4, '1 minute') AS pending, sched.extend(:p1, '1 minute') AS finished,
       sched.extend(-1, '1 minute') AS unknown;
-- refused: NULLs, lengths outside 1 second .. 7 days, mixed signs
SELECT try($$SELECT sched.extend(NULL, '1 minute')$$) AS null_id;
SELECT try($$SELECT sched.extend($$ || :p3 || $$, NULL)$$) AS null_by;
SELECT try($$SELECT sched.extend($$ || :p3 || $$, '0')$$) AS zero;
SELECT try($$SELECT sched.extend($$ || :p3 || $$, '8 days')$$) AS too_long;
SELECT try($$SELECT sched.extend($$ || :p3 || $$, '1 month -29 days')$$) AS mixed;
-- the lease of an HTTP request is its worker's: refused (a delivery made by
-- hand here, on a paused type, so that no worker takes it)
SELECT sched.define_biz('ls_http', 'http', url => 'http://127.0.0.1:9/', ack_timeout => '1 hour');
SELECT sched.pause('ls_http');
SELECT sched.add('ls_http', now() + interval '1 day') AS h1 \gset
UPDATE sched.task SET state = 'd', attempt = 1, delivered_at = now(), lease_until = now() + interval '1 hour'
WHERE id = :h1;
SELECT regexp_replace(try($$SELECT sched.extend($$ || :h1 || $$, '1 minute')$$, true), 'task \d+', 'task N')
       AS http_lease;
SELECT sched.drop_biz('ls_http', cancel_tasks => true) AS http_dropped;
SELECT sched.ack(:p3) AS acked_after_extend;

-- privileges: extend needs 'consume' on the type, cancel_by_key 'schedule';
-- a task of a type the role may not consume is not there for it
CREATE ROLE regress_ls_worker NOLOGIN;
GRANT USAGE ON SCHEMA sched TO regress_ls_worker;
GRANT EXECUTE ON FUNCTION sched.extend(bigint, interval), sched.cancel_by_key(text, text),
	sched.claim(text, int) TO regress_ls_worker;
SELECT sched.add('ls_pull', now() - interval '1 minute', '{"n": 5}', 'key-5') AS p5 \gset
SELECT wait_announced('ls_pull');
SELECT payload, attempt FROM sched.claim('ls_pull');
SET ROLE regress_ls_worker;
SELECT sched.extend(:p5, '1 hour') AS extend_without_grant;
SELECT try($$SELECT sched.cancel_by_key('ls_pull', 'key-5')$$) AS cancel_without_grant;
RESET ROLE;
SELECT sched.grant_biz('ls_pull', 'regress_ls_worker', 'consume');
SET ROLE regress_ls_worker;
SELECT sched.extend(:p5, '1 hour') IS NOT NULL AS extend_with_consume;
SELECT try($$SELECT sched.cancel_by_key('ls_pull', 'key-5')$$) AS cancel_with_consume;
RESET ROLE;

-- a lease that runs out: the task waits the type's backoff as pending
-- (0.2 delivered it again at once); an extended lease in the same range,
-- run out by the same sweep had it not been extended, stays
SELECT sched.define_biz('ls_short', 'pull', max_attempts => 3, ack_timeout => '1 second',
                        min_backoff => '1 hour', max_backoff => '2 hours');
SELECT count(*) > 0 AS added
FROM sched.add_many('ls_short', array_fill(now() - interval '1 minute', ARRAY[2 * (SELECT count(*) FROM sched.pointer)::int]));
SELECT wait_announced('ls_short');
SELECT count(*) = 2 * (SELECT count(*) FROM sched.pointer) AS claimed_all FROM sched.claim('ls_short', 1000);
-- two tasks of one range (door), leased by the one claim
SELECT min(id) AS s1, max(id) AS s2 FROM sched.task
WHERE biz_type = 'ls_short' GROUP BY sched._door(id) HAVING count(*) >= 2 ORDER BY sched._door(id) LIMIT 1 \gset
SELECT sched.extend(:s2, '1 hour') IS NOT NULL AS extended;
SELECT wait_until(format('(SELECT state FROM sched.task WHERE id = %s) <> %L', :s1, 'd')) AS expired;
SELECT state, attempt, last_error LIKE 'ack_timeout: not acknowledged within 00:00:01 (attempt 1 of 3)' AS error,
       run_at > clock_timestamp() + interval '50 minutes' AS backed_off
FROM sched.tasks WHERE id = :s1;
SELECT state, attempt, lease_until > clock_timestamp() + interval '50 minutes' AS still_leased
FROM sched.tasks WHERE id = :s2;
SELECT sched.ack(:s2) AS acked_extended;

-- clean up
SELECT sched.drop_biz('ls_short', cancel_tasks => true) > 0 AS dropped;
SELECT sched.drop_biz('ls_pull', cancel_tasks => true) > 0 AS dropped;
SELECT sched.drop_biz('ls_notify') AS dropped;
DROP OWNED BY regress_ls_worker;
DROP ROLE regress_ls_worker;
