-- on_duplicate: what sched.add does with a dedupe key that an unfinished
-- task holds already -- 'keep' it (the default), 'replace' its run_at and
-- payload, or 'debounce' (the same, bounded by max_wait from its first
-- add); a delivered holder is never changed, a new task takes the key.

SELECT sched.define_biz('od_pull', 'pull', ack_timeout => '1 hour');
CREATE FUNCTION pg_temp.added(biz text) RETURNS float8 LANGUAGE sql AS $$
	SELECT coalesce(sum(value), 0) FROM sched.metric_samples()
	WHERE metric = 'delaysched_tasks_added_total' AND biz_type = biz
$$;

-- keep: the holder's id, and nothing changes
SELECT sched.add('od_pull', '2100-01-01', '{"v": 1}', 'k') AS k1 \gset
SELECT sched.add('od_pull', '2100-06-01', '{"v": 2}', 'k') = :k1 AS kept_id,
       sched.add('od_pull', '2100-06-01', '{"v": 2}', 'k', on_duplicate => 'keep') = :k1 AS kept_id_named;
SELECT run_at = '2100-01-01' AS run_at_kept, payload FROM sched.tasks WHERE id = :k1;

-- replace: the pending holder takes the new run_at and payload, keeps its
-- id, attempts and created_at; it is not counted as added
SELECT pg_temp.added('od_pull') AS added_before \gset
SELECT created_at AS k1_created FROM sched.tasks WHERE id = :k1 \gset
SELECT sched.add('od_pull', '2100-06-01', '{"v": 3}', 'k', on_duplicate => 'replace') = :k1 AS replaced_id;
SELECT run_at = '2100-06-01' AS run_at_replaced, payload, state, attempt, created_at = :'k1_created' AS created_kept
FROM sched.tasks WHERE id = :k1;
SELECT count(*) AS tasks_of_key FROM sched.task WHERE biz_type = 'od_pull' AND dedupe_key = 'k';
SELECT pg_temp.added('od_pull') - :added_before AS counted;
-- an earlier run_at too: replace takes whatever it is given
SELECT sched.add('od_pull', '2099-01-01', '{"v": 4}', 'k', on_duplicate => 'replace') = :k1 AS replaced_earlier;
SELECT run_at = '2099-01-01' AS run_at_earlier, payload FROM sched.tasks WHERE id = :k1;
-- and the latest add's key and priority, as its payload (debounce too)
SELECT sched.add('od_pull', '2099-01-01', '{"v": 1}', 'kp', key => 'tenant-a') AS kp1 \gset
SELECT sched.add('od_pull', '2099-01-02', '{"v": 2}', 'kp', on_duplicate => 'replace',
                 key => 'tenant-b', priority => 7) = :kp1 AS replaced_keyed;
SELECT key, priority, payload FROM sched.tasks WHERE id = :kp1;
SELECT sched.add('od_pull', '2099-01-03', '{"v": 3}', 'kp', on_duplicate => 'debounce') = :kp1 AS debounced_keyless;
SELECT key, priority, payload FROM sched.tasks WHERE id = :kp1;
SELECT sched.cancel(:kp1);

-- debounce: pushed to the new run_at, but no later than max_wait after the first add
SELECT sched.add('od_pull', now() + interval '1 minute', '{"v": 1}', 'd') AS d1 \gset
SELECT created_at AS d1_created FROM sched.tasks WHERE id = :d1 \gset
SELECT sched.add('od_pull', now() + interval '3 minutes', '{"v": 2}', 'd', 'debounce', '10 minutes') = :d1 AS debounced;
SELECT run_at > now() + interval '2 minutes' AS pushed, payload FROM sched.tasks WHERE id = :d1;
SELECT sched.add('od_pull', now() + interval '1 hour', '{"v": 3}', 'd', 'debounce', '10 minutes') = :d1 AS debounced_again;
SELECT run_at = :'d1_created'::timestamptz + interval '10 minutes' AS bounded_by_max_wait, payload
FROM sched.tasks WHERE id = :d1;
-- without max_wait, unbounded
SELECT sched.add('od_pull', '2100-01-01', '{"v": 4}', 'd', 'debounce') = :d1 AS debounced_unbounded;
SELECT run_at = '2100-01-01' AS run_at_unbounded FROM sched.tasks WHERE id = :d1;
-- add_after debounces too
SELECT sched.add_after('od_pull', '2 hours', '{"v": 5}', 'd', 'debounce', '1 day') = :d1 AS debounced_after;
SELECT run_at BETWEEN now() + interval '1 hour 59 minutes' AND clock_timestamp() + interval '2 hours' AS after_two_hours,
       payload
FROM sched.tasks WHERE id = :d1;

-- a holder announced (due, not claimed yet) is still pending: replaced
SELECT sched.add('od_pull', now() - interval '1 minute', '{"v": 1}', 'a') AS a1 \gset
SELECT wait_announced('od_pull');
SELECT sched.add('od_pull', '2100-01-01', '{"v": 2}', 'a', on_duplicate => 'replace') = :a1 AS replaced_announced;
SELECT count(*) AS claimed FROM sched.claim('od_pull');
SELECT state, run_at = '2100-01-01' AS moved, payload FROM sched.tasks WHERE id = :a1;

-- a delivered holder is left to its consumer: a new task takes the key
SELECT sched.reschedule(:a1, now() - interval '1 minute') AS due_again;
SELECT wait_announced('od_pull');
SELECT payload, attempt FROM sched.claim('od_pull');
SELECT pg_temp.added('od_pull') AS added_before \gset
SELECT sched.add('od_pull', '2100-03-01', '{"v": 3}', 'a', on_duplicate => 'replace') AS a2 \gset
SELECT :a2 <> :a1 AS new_task, pg_temp.added('od_pull') - :added_before AS counted;
SELECT id = :a1 AS first, state, payload FROM sched.tasks WHERE id IN (:a1, :a2) ORDER BY id = :a1 DESC;
-- the key is the new task's: keep returns it, and acknowledging the first leaves it held
SELECT sched.add('od_pull', '2100-04-01', '{}', 'a') = :a2 AS key_held_by_new;
SELECT sched.ack(:a1) AS acked_first;
SELECT sched.add('od_pull', '2100-04-01', '{}', 'a') = :a2 AS key_still_held_by_new;
SELECT task_id = :a2 AS dedupe_row FROM sched.dedupe WHERE biz_type = 'od_pull' AND dedupe_key = 'a';
-- the new task replaces as usual, and releases the key when it finishes
SELECT sched.add('od_pull', '2100-05-01', '{"v": 4}', 'a', on_duplicate => 'replace') = :a2 AS replaced_new;
SELECT sched.cancel(:a2) AS cancelled;
SELECT count(*) AS key_rows FROM sched.dedupe WHERE biz_type = 'od_pull' AND dedupe_key = 'a';

-- a handed-over task that fails is not tried again: its payload is older
-- than the new task's; it is cancelled as superseded (a nack here, and
-- likewise a lease that runs out or a failed request)
SELECT sched.add('od_pull', now() - interval '1 minute', '{"v": 1}', 'h') AS h1 \gset
SELECT wait_announced('od_pull');
SELECT payload, attempt FROM sched.claim('od_pull');
SELECT sched.add('od_pull', '2100-01-01', '{"v": 2}', 'h', on_duplicate => 'replace') AS h2 \gset
SELECT sched.nack(:h1, '0') AS nacked;
SELECT id = :h1 AS first, state, last_error FROM sched.tasks WHERE id IN (:h1, :h2) ORDER BY id = :h1 DESC;
SELECT task_id = :h2 AS key_with_new FROM sched.dedupe WHERE biz_type = 'od_pull' AND dedupe_key = 'h';
-- a nack of a task that holds its key is a retry as before
SELECT sched.reschedule(:h2, now() - interval '1 minute') AS due;
SELECT wait_announced('od_pull');
SELECT payload, attempt FROM sched.claim('od_pull');
SELECT sched.nack(:h2, '1 hour') AS nacked;
SELECT state, attempt FROM sched.tasks WHERE id = :h2;

-- refused, and nothing changed
SELECT try($$SELECT sched.add('od_pull', '2100-01-01', '{}', 'k', on_duplicate => NULL)$$) AS null_mode;
SELECT try($$SELECT sched.add('od_pull', '2100-01-01', '{}', 'k', on_duplicate => 'upsert')$$) AS bad_mode;
SELECT try($$SELECT sched.add('od_pull', '2100-01-01', '{}', 'k', 'replace', '1 minute')$$) AS max_wait_without_debounce;
SELECT try($$SELECT sched.add('od_pull', '2100-01-01', '{}', 'k', 'debounce', '-1 minute')$$) AS negative_max_wait;
SELECT try($$SELECT sched.add('od_pull', '2100-01-01', '{}', 'k', 'debounce', '2 years')$$) AS long_max_wait;
SELECT run_at = '2099-01-01' AS unchanged, payload FROM sched.tasks WHERE id = :k1;
-- without a dedupe key there is no duplicate: an ordinary add
SELECT sched.add('od_pull', '2100-01-01', '{}', NULL, 'replace') <> :k1 AS plain_add;

-- clean up
SELECT sched.drop_biz('od_pull', cancel_tasks => true) > 0 AS dropped;
