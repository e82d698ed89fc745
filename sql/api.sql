-- api: the public functions on good input.
-- Notify types only get run_at far in the future, so the scanner never
-- delivers them during the test; tasks due now belong to pull types.

-- define_biz: a notify type with every default
SELECT sched.define_biz('api_notify');
SELECT name, delivery, channel, max_attempts, ack_timeout, updated_at = created_at AS fresh
FROM sched.biz WHERE name = 'api_notify';

-- define_biz again replaces the settings and keeps created_at
SELECT sched.define_biz('api_notify', 'notify', 'api_channel', 3, '1 minute');
SELECT name, delivery, channel, max_attempts, ack_timeout, updated_at >= created_at AS touched
FROM sched.biz WHERE name = 'api_notify';

-- a pull type; channel => NULL means "same as the name"
SELECT sched.define_biz('api_pull', 'pull', NULL, 1, '1 hour');
SELECT name, delivery, channel, max_attempts, ack_timeout FROM sched.biz ORDER BY name;

-- add: one pending task, attempt 0, no delivery yet
SELECT sched.add('api_notify', '2100-01-01 00:00:00+00', '{"n": 1}') AS a1 \gset
SELECT biz_type, run_at, state, attempt, payload, dedupe_key, delivered_at, lease_until,
       finished_at, last_error, created_at <= clock_timestamp() AS created
FROM sched.tasks WHERE id = :a1;

-- add with the default payload
SELECT sched.add('api_notify', '2100-01-01 00:00:01+00') AS a2 \gset
SELECT payload FROM sched.tasks WHERE id = :a2;

-- add_after: run_at is the clock plus the delay
SELECT clock_timestamp() AS before_add \gset
SELECT sched.add_after('api_notify', '1 day', '{"n": 3}') AS a3 \gset
SELECT run_at BETWEEN :'before_add'::timestamptz + interval '1 day'
                  AND clock_timestamp() + interval '1 day' AS run_at_ok,
       state, payload
FROM sched.tasks WHERE id = :a3;

-- add_many: one id per run_at, in input order
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids
FROM sched.add_many('api_notify', ARRAY['2100-01-02', '2100-01-03']::timestamptz[]) AS id;
CREATE TEMP TABLE api_many AS
SELECT a.ord, a.id
FROM sched.add_many('api_notify', ARRAY['2100-01-05', '2100-01-04']::timestamptz[],
                    ARRAY['{"m": 1}', '{"m": 2}']::jsonb[]) WITH ORDINALITY AS a(id, ord);
SELECT a.ord, t.payload, t.run_at, t.state
FROM api_many a JOIN sched.tasks t USING (id) ORDER BY a.ord;

-- dedupe_key: the same key returns the same id while the task is unfinished
SELECT sched.add('api_notify', '2100-01-01', '{"k": 1}', 'key-1') AS d1 \gset
SELECT sched.add('api_notify', '2100-02-01', '{"k": 2}', 'key-1') = :d1 AS same_id;
SELECT sched.add_after('api_notify', '2 days', '{"k": 3}', 'key-1') = :d1 AS same_id_after;
SELECT sched.add_many('api_notify', ARRAY['2100-03-01']::timestamptz[], NULL, ARRAY['key-1']) = :d1
       AS same_id_many;
-- ... and the first task is untouched
SELECT count(*), min(payload::text) AS payload, min(run_at) AS run_at
FROM sched.tasks WHERE biz_type = 'api_notify' AND dedupe_key = 'key-1';
-- the same key in another type is another task
SELECT sched.add('api_pull', '2100-01-01', '{}', 'key-1') <> :d1 AS other_type_other_id;

-- cancel: true once, then false
SELECT sched.cancel(:d1) AS cancelled;
SELECT sched.cancel(:d1) AS cancelled_again;
SELECT sched.cancel(-1) AS cancelled_unknown;
SELECT state, finished_at IS NOT NULL AS finished, last_error FROM sched.tasks WHERE id = :d1;

-- after cancel the key is free again: a new id
SELECT sched.add('api_notify', '2100-01-01', '{"k": 4}', 'key-1') AS d2 \gset
SELECT :d2 <> :d1 AS new_id;
SELECT id = :d1 AS first, state, payload FROM sched.tasks
WHERE biz_type = 'api_notify' AND dedupe_key = 'key-1' ORDER BY state;

-- reschedule: true for a pending task, which moves to its new bucket
SELECT sched.reschedule(:a1, '2100-06-01 12:34:56+00') AS rescheduled;
SELECT t.run_at, t.bucket = sched._bucket(t.run_at) AS right_bucket,
       t.bucket <> sched._id_bucket(t.id) AS moved, v.state, v.payload
FROM sched.task t JOIN sched.tasks v USING (id) WHERE t.id = :a1;
-- a moved task is still found by id
SELECT sched.reschedule(:a1, '2100-06-01 12:34:57+00') AS rescheduled_again;
SELECT run_at FROM sched.tasks WHERE id = :a1;
-- false for an unknown or a finished task
SELECT sched.reschedule(-1, '2100-01-01') AS unknown;
SELECT sched.reschedule(:d1, '2100-01-01') AS cancelled_task;
SELECT state, run_at FROM sched.tasks WHERE id = :d1;
-- cancel finds a moved task too
SELECT sched.cancel(:a1) AS cancelled_moved;

-- retry of a dead task (pull type, max_attempts 1)
SELECT sched.add('api_pull', now() - interval '1 minute', '{"r": 1}') AS r1 \gset
SELECT wait_announced('api_pull');
SELECT payload, attempt FROM sched.claim('api_pull');
SELECT sched.nack(:r1, error => 'failed') AS nacked;
SELECT state, attempt, last_error FROM sched.tasks WHERE id = :r1;
SELECT sched.retry(:r1) AS retried;
SELECT state, attempt, payload, last_error, run_at <= clock_timestamp() AS due
FROM sched.tasks WHERE id = :r1;
SELECT sched.retry(:r1) AS retried_again, sched.retry(-1) AS retried_unknown,
       sched.retry(:d1) AS retried_cancelled;

-- sched.tasks: columns and types
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'sched.tasks'::regclass AND attnum > 0 ORDER BY attnum;

-- sched.biz_stats: columns and types
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'sched.biz_stats'::regclass AND attnum > 0 ORDER BY attnum;
-- ... and the counts so far
SELECT biz_type, delivery, channel, pending, due_now, awaiting_ack, done, dead,
       delivered_per_sec = 0 AS rate_ok
FROM sched.biz_stats ORDER BY biz_type;

-- sched.time_pointer: columns and types, one pointer per range (door number)
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'sched.time_pointer'::regclass AND attnum > 0 ORDER BY attnum;
SELECT count(*) AS ranges, min(range_id) AS first, max(range_id) AS last,
       bool_and(pointer <= clock_timestamp()) AS not_ahead, bool_and(lag < interval '1 hour') AS recent,
       bool_and(updated_at >= pointer) AS updated_after
FROM sched.time_pointer;
SHOW delaysched.ranges;

-- tasks get door numbers round the ranges: ten tasks in a row use all eight doors
CREATE TEMP TABLE ten AS
SELECT a.id FROM sched.add_many('api_notify', array_fill('2100-02-02'::timestamptz, ARRAY[10])) AS a(id);
SELECT count(DISTINCT t.door) AS doors, min(t.door) AS lowest, max(t.door) AS highest,
       bool_and(t.door = sched._door(t.id)) AS door_of_id
FROM ten JOIN sched.task t USING (id);
SELECT count(*) FILTER (WHERE sched.cancel(id)) AS cancelled FROM ten;
DROP TABLE ten;

-- sched.workers: columns and types, one row per scanner worker
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'sched.workers'::regclass AND attnum > 0 ORDER BY attnum;
SELECT worker, role, pid IS NOT NULL AS running, state IN ('sleeping', 'delivering') AS working,
       holds IS NULL OR holds ~ '^range [0-7]$' AS holds_one_range_or_none
FROM sched.workers ORDER BY worker;
SELECT max(last_tick) > clock_timestamp() - interval '30 seconds' AS ticked_lately,
       sum(ticks) > 0 AS counted
FROM sched.workers;
SELECT count(*) AS scanner_backends FROM pg_stat_activity w JOIN sched.workers s USING (pid)
WHERE w.backend_type = 'delaysched scanner' AND w.datname = current_database();

-- drop_biz refuses while unfinished tasks exist
SELECT try($$SELECT sched.drop_biz('api_notify')$$);
SELECT count(*) AS still_defined FROM sched.biz WHERE name = 'api_notify';
-- ... and with cancel_tasks cancels them, returning how many
SELECT sched.drop_biz('api_notify', cancel_tasks => true) AS cancelled;
SELECT count(*) AS still_defined FROM sched.biz WHERE name = 'api_notify';
SELECT state, last_error, count(*) FROM sched.tasks WHERE biz_type = 'api_notify'
GROUP BY state, last_error ORDER BY state, last_error;
SELECT count(*) AS keys_left FROM sched.dedupe WHERE biz_type = 'api_notify';
-- a type without unfinished tasks drops at once
SELECT sched.define_biz('api_empty');
SELECT sched.drop_biz('api_empty') AS dropped_tasks;
SELECT count(*) FROM sched.biz WHERE name = 'api_empty';

-- the NOTIFY message of a delivery
SELECT sched._message(42, 'api_notify', '2100-01-01 00:00:00+00', '{"n": 1}', 1);
-- too big for NOTIFY (8000 bytes or more): the payload is left out
SELECT sched._message(42, 'api_notify', '2100-01-01 00:00:00+00',
                      jsonb_build_object('big', repeat('x', 9000)), 3);
-- every message fits NOTIFY, and only messages that would not fit lose the payload
SELECT max(octet_length(m)) < 8000 AS all_fit,
       max(octet_length(m)) FILTER (WHERE m::jsonb ? 'payload') AS longest_with_payload,
       count(*) FILTER (WHERE m::jsonb ? 'payload_omitted') > 0 AS some_omitted
FROM (SELECT sched._message(1, 'b', '2100-01-01', jsonb_build_object('x', repeat('x', n)), 1)
      FROM generate_series(7800, 8000) n) AS s(m);
-- the announcement of a pull type
SELECT sched._announcement('api_pull');
