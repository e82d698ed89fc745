-- keys: a task's key (its turn among its type's keys) and priority (its
-- place among its type's due tasks), shown by sched.tasks, returned by
-- sched.claim, carried by the message; a claim takes keys in turns.
-- wait_announced() (from setup) lets the scanner announce due pull tasks
-- first (state 'r'), where the order of keys and priorities applies.

SELECT sched.define_biz('k_plain', 'pull', ack_timeout => '1 hour');
SELECT sched.define_biz('k_keyed', 'pull', ack_timeout => '1 hour');

-- A type without keys: higher priority first, then run_at.
SELECT count(*) FROM (
	SELECT sched.add('k_plain', now() - make_interval(secs => 10 - g), jsonb_build_object('n', g),
					 priority => p)
	FROM (VALUES (1, 0), (2, 5), (3, 0), (4, -3), (5, 5), (6, 32767)) v(g, p)) s;
SELECT wait_announced('k_plain');
SELECT payload->>'n' AS n, key, priority FROM sched.claim('k_plain', 10);
-- the priority and key are kept when the task finishes
SELECT sched.ack_many(ARRAY(SELECT id FROM sched.tasks WHERE biz_type = 'k_plain'));
SELECT state, count(*), min(priority), max(priority), count(key) AS keyed
FROM sched.tasks WHERE biz_type = 'k_plain' GROUP BY state;
SELECT keyed FROM sched.biz WHERE name = 'k_plain';

-- A keyed type: key A has 20 tasks due first, B and C two each, one task
-- has no key; a claim of 8 gives every key a turn before A has a second.
SELECT count(*) FROM sched.add_many('k_keyed',
	ARRAY(SELECT now() - interval '1 minute' + make_interval(secs => g) FROM generate_series(1, 20) g),
	ARRAY(SELECT jsonb_build_object('n', g) FROM generate_series(1, 20) g),
	keys => array_fill('A'::text, ARRAY[20]));
SELECT sched.add('k_keyed', now() - interval '10 seconds', '{"n": "b1"}', key => 'B') > 0 AS b1,
	   sched.add('k_keyed', now() - interval '9 seconds', '{"n": "b2"}', key => 'B') > 0 AS b2,
	   sched.add('k_keyed', now() - interval '8 seconds', '{"n": "c1"}', key => 'C') > 0 AS c1,
	   sched.add('k_keyed', now() - interval '7 seconds', '{"n": "c2"}', key => 'C', priority => 1) > 0 AS c2,
	   sched.add('k_keyed', now() - interval '6 seconds', '{"n": "none"}') > 0 AS none;
SELECT keyed FROM sched.biz WHERE name = 'k_keyed';
SELECT wait_announced('k_keyed');
SELECT key, count(*) FROM sched.tasks WHERE biz_type = 'k_keyed' GROUP BY key ORDER BY key;
SELECT payload->>'n' AS n, key, priority FROM sched.claim('k_keyed', 8);
-- the rest: A's, in run-at order, and B's last
SELECT string_agg(coalesce(key, '-') || ':' || (payload->>'n'), ' ') FROM sched.claim('k_keyed', 100);
SELECT count(*) FROM sched.claim('k_keyed', 100);

-- More keys waiting than a claim takes: the claims go round the keys (in
-- key order, from where this session's last claim of the type stopped),
-- none waits behind the others.  Keys k1..k5, two tasks each; claims of 2.
SELECT count(*) FROM sched.add_many('k_keyed',
	ARRAY(SELECT now() - interval '1 minute' FROM generate_series(1, 10)),
	keys => ARRAY(SELECT 'k' || (g % 5 + 1) FROM generate_series(1, 10) g));
SELECT wait_announced('k_keyed');
SELECT string_agg(key, ',' ORDER BY key) AS keys FROM sched.claim('k_keyed', 2);
SELECT string_agg(key, ',' ORDER BY key) AS keys FROM sched.claim('k_keyed', 2);
SELECT string_agg(key, ',' ORDER BY key) AS keys FROM sched.claim('k_keyed', 2);
SELECT string_agg(key, ',' ORDER BY key) AS keys FROM sched.claim('k_keyed', 2);
SELECT string_agg(key, ',' ORDER BY key) AS keys FROM sched.claim('k_keyed', 2);
SELECT count(*) FROM sched.claim('k_keyed', 100);

-- New keys keep coming after the cursor (increasing keys, as order numbers
-- are): they wait for the next lap of the turns, which then comes back to
-- the keyless tasks and the keys before the cursor, so none waits for ever
-- (before laps, m0's third task and the second keyless one waited as long
-- as new keys came).  Key m0 has three tasks, two tasks have no key; claims
-- of 2, two new keys after each claim.
SELECT count(*) FROM sched.add_many('k_keyed', ARRAY(SELECT now() - interval '1 minute' FROM generate_series(1, 5)),
	ARRAY['{"n": "m0-1"}', '{"n": "m0-2"}', '{"n": "m0-3"}', '{"n": "none-1"}', '{"n": "none-2"}']::jsonb[],
	keys => ARRAY['m0', 'm0', 'm0', NULL, NULL]);
SELECT wait_announced('k_keyed');
CREATE TEMP TABLE claimed (round int, n text);
CREATE FUNCTION pg_temp.claim_round(i int) RETURNS void LANGUAGE sql AS $f$
	INSERT INTO claimed SELECT i, c.payload->>'n' FROM sched.claim('k_keyed', 2) c;
	SELECT count(*) FROM sched.add_many('k_keyed', ARRAY[now() - interval '50 seconds', now() - interval '50 seconds'],
		ARRAY[jsonb_build_object('n', 'm' || i || 'a'), jsonb_build_object('n', 'm' || i || 'b')],
		keys => ARRAY['m' || i || 'a', 'm' || i || 'b']);
$f$;
-- (the new keys' tasks are committed, then announced, before the next claim)
SELECT pg_temp.claim_round(1);
SELECT wait_announced('k_keyed');
SELECT pg_temp.claim_round(2);
SELECT wait_announced('k_keyed');
SELECT pg_temp.claim_round(3);
SELECT wait_announced('k_keyed');
SELECT pg_temp.claim_round(4);
SELECT wait_announced('k_keyed');
SELECT round, string_agg(n, ',' ORDER BY n) FROM claimed GROUP BY round ORDER BY round;
SELECT string_agg(coalesce(key, '-'), ',' ORDER BY key) FROM sched.claim('k_keyed', 100);

-- The drain takes turns by key too: a notify type capped at 2 deliveries
-- at a time, paused while its tasks are parked (A's five due first, then
-- B's one), delivers A's first and B's first when it resumes.
SELECT sched.define_biz('k_capped', max_concurrency => 2);
SELECT sched.pause('k_capped');
SELECT count(*) FROM sched.add_many('k_capped',
	ARRAY(SELECT now() - interval '1 minute' + make_interval(secs => g) FROM generate_series(1, 6) g),
	ARRAY(SELECT jsonb_build_object('n', g) FROM generate_series(1, 6) g),
	keys => ARRAY['A', 'A', 'A', 'A', 'A', 'B']);
SELECT wait_until($$(SELECT count(*) FROM sched.task WHERE biz_type = 'k_capped' AND state = 'r') = 6$$);
SELECT sched.resume('k_capped');
SELECT wait_until($$(SELECT count(*) FROM sched.task WHERE biz_type = 'k_capped' AND state = 'd') = 2$$);
SELECT key, payload->>'n' AS n FROM sched.tasks WHERE biz_type = 'k_capped' AND state = 'delivered' ORDER BY key;
SELECT sched.drop_biz('k_capped', cancel_tasks => true);

-- A task's key and priority in sched.tasks, and after a reschedule, a
-- nack and a cancel
SELECT sched.add('k_keyed', now() + interval '1 day', '{}', key => 'tenant-42', priority => 7) AS t \gset
SELECT key, priority, status FROM sched.tasks WHERE id = :t;
SELECT sched.reschedule(:t, now() - interval '1 second');
SELECT wait_announced('k_keyed');
SELECT key, priority FROM sched.claim('k_keyed', 1);
SELECT sched.nack(:t, '0');
SELECT key, priority, state FROM sched.tasks WHERE id = :t;
SELECT sched.cancel(:t);
SELECT key, priority, state FROM sched.tasks WHERE id = :t;

-- The message: the key after the attempt (and the schedule)
SELECT sched._message(1, 'k', '2030-01-01 00:00:00+00', '{}', 1, NULL, 'tenant-42');
SELECT sched._message(1, 'k', '2030-01-01 00:00:00+00', '{}', 1, 'nightly', 'a "quoted" key');
SELECT sched._message(1, 'k', '2030-01-01 00:00:00+00', '{}', 1);

-- A schedule's firings have its priority
SELECT sched.define_schedule('k_sched', 'k_keyed', '@daily', priority => 3) IS NOT NULL AS defined;
SELECT priority FROM sched.schedules WHERE name = 'k_sched';
SELECT priority FROM sched.tasks WHERE schedule = 'k_sched' AND biz_type = 'k_keyed';
SELECT sched.drop_schedule('k_sched', 'k_keyed');

-- Each key's limits.  key_max_concurrency: a key's deliveries awaiting
-- acknowledgement; key_rate_limit and key_burst: a key's token bucket.
-- The keyless tasks have neither.
SELECT sched.define_biz('k_limited', 'pull', ack_timeout => '1 hour', key_max_concurrency => 2,
						key_rate_limit => 0.01, key_burst => 3);
SELECT key_max_concurrency, key_rate_limit, key_burst, limited FROM sched.biz WHERE name = 'k_limited';
SELECT count(*) FROM sched.add_many('k_limited',
	ARRAY(SELECT now() - interval '1 minute' + make_interval(secs => g) FROM generate_series(1, 16) g),
	keys => ARRAY(SELECT CASE WHEN g <= 12 THEN 'k' || (g % 3) END FROM generate_series(1, 16) g));
SELECT wait_announced('k_limited');
-- two of each key (the cap), and the four keyless tasks
SELECT coalesce(key, '-') AS key, count(*) FROM sched.claim('k_limited', 100) GROUP BY key ORDER BY key;
SELECT count(*) AS capped FROM sched.claim('k_limited', 100);
-- an acknowledgement frees a slot; the bucket (3 tokens, 0.01 a second)
-- has one token left for each key
SELECT sched.ack_many(ARRAY(SELECT id FROM sched.tasks WHERE biz_type = 'k_limited' AND state = 'delivered'));
SELECT key, count(*) FROM sched.claim('k_limited', 100) GROUP BY key ORDER BY key;
SELECT sched.ack_many(ARRAY(SELECT id FROM sched.tasks WHERE biz_type = 'k_limited' AND state = 'delivered'));
SELECT count(*) AS out_of_tokens FROM sched.claim('k_limited', 100);
SELECT count(*) AS waiting FROM sched.tasks WHERE biz_type = 'k_limited' AND state = 'pending';
SELECT buckets >= 3 AS has_buckets, capacity = current_setting('delaysched.max_keys')::int AS capacity
FROM sched._key_buckets();
-- key_burst defaults to a second of the rate, at least one token
SELECT sched.define_biz('k_limited', 'pull', key_rate_limit => 2.5);
SELECT key_max_concurrency, key_rate_limit, key_burst FROM sched.biz WHERE name = 'k_limited';
SELECT sched.drop_biz('k_limited', cancel_tasks => true);
SELECT try($$SELECT sched.define_biz('k_bad', key_rate_limit => 0)$$);
SELECT try($$SELECT sched.define_biz('k_bad', key_rate_limit => 'NaN')$$);
SELECT try($$SELECT sched.define_biz('k_bad', key_rate_limit => 2000000)$$);
SELECT try($$SELECT sched.define_biz('k_bad', key_burst => 5)$$);
SELECT try($$SELECT sched.define_biz('k_bad', key_rate_limit => 1, key_burst => 0)$$);
SELECT try($$SELECT sched.define_biz('k_bad', key_max_concurrency => 0)$$);
SELECT try($$SELECT sched.define_biz('k_bad', key_max_concurrency => 100001)$$);
SELECT count(*) AS not_defined FROM sched.biz WHERE name = 'k_bad';

-- Bad input: clear errors, nothing stored
SELECT count(*) AS before FROM sched.task WHERE biz_type = 'k_keyed' \gset
SELECT try($$SELECT sched.add('k_keyed', now(), key => '')$$);
SELECT try($$SELECT sched.add('k_keyed', now(), key => repeat('k', 513))$$);
SELECT try($$SELECT sched.add('k_keyed', now(), priority => 32768)$$);
SELECT try($$SELECT sched.add('k_keyed', now(), priority => NULL)$$);
SELECT try($$SELECT sched.add_after('k_keyed', '1 day', priority => -32769)$$);
SELECT try($$SELECT sched.add_many('k_keyed', ARRAY[now(), now()], keys => ARRAY['a'])$$);
SELECT try($$SELECT sched.add_many('k_keyed', ARRAY[now(), now()], priorities => ARRAY[1, 2, 3])$$);
SELECT try($$SELECT sched.add_many('k_keyed', ARRAY[now(), now()], keys => ARRAY['a', ''])$$);
SELECT try($$SELECT sched.add_many('k_keyed', ARRAY[now(), now()], priorities => ARRAY[1, NULL])$$);
SELECT try($$SELECT sched.add_many('k_keyed', ARRAY[now()], priorities => ARRAY[100000])$$);
SELECT try($$SELECT sched.define_schedule('k_bad', 'k_keyed', '@daily', priority => 40000)$$);
SELECT count(*) = :before AS nothing_stored FROM sched.task WHERE biz_type = 'k_keyed';
SELECT count(*) AS no_schedule FROM sched.schedule WHERE name = 'k_bad';

SELECT sched.drop_biz('k_plain', cancel_tasks => true) >= 0 AS dropped,
	   sched.drop_biz('k_keyed', cancel_tasks => true) >= 0 AS dropped;
