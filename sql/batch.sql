-- batch: add_many at volume, with and without dedupe keys, and the buckets.

SELECT sched.define_biz('batch_notify');
SELECT sched.define_biz('batch_pull', 'pull', ack_timeout => '1 hour');

-- 1,000 future tasks, run_at in descending order so that input order and
-- run_at order differ, one a second (so every bucket is used)
CREATE TEMP TABLE b1 AS
SELECT a.ord, a.id
FROM sched.add_many('batch_notify',
       (SELECT array_agg(timestamptz '2100-01-01 00:00:00+00' + (1001 - i) * interval '1 second' ORDER BY i)
        FROM generate_series(1, 1000) i),
       (SELECT array_agg(jsonb_build_object('i', i) ORDER BY i) FROM generate_series(1, 1000) i))
     WITH ORDINALITY AS a(id, ord);
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids FROM b1;
-- the i-th id is the i-th task: its payload and run_at
SELECT count(*) AS matching FROM b1 JOIN sched.task t USING (id)
WHERE t.payload = jsonb_build_object('i', b1.ord)
  AND t.run_at = timestamptz '2100-01-01 00:00:00+00' + (1001 - b1.ord) * interval '1 second'
  AND t.biz_type = 'batch_notify' AND t.state = 'p' AND t.attempt = 0 AND t.dedupe_key IS NULL;
SELECT count(DISTINCT t.bucket) AS buckets_used FROM b1 JOIN sched.task t USING (id);

-- 100 tasks in one second: one bucket, distinct ids, default payloads
CREATE TEMP TABLE b100 AS
SELECT id FROM sched.add_many('batch_notify', array_fill(timestamptz '2100-02-01 00:00:07+00', ARRAY[100])) AS id;
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids,
       count(DISTINCT t.bucket) AS buckets, bool_and(t.payload = '{}') AS default_payloads
FROM b100 JOIN sched.task t USING (id);

-- with dedupe_keys: 200 tasks, ids in input order
CREATE TEMP TABLE b2 AS
SELECT a.ord, a.id
FROM sched.add_many('batch_notify',
       (SELECT array_agg(timestamptz '2100-03-01' + i * interval '1 minute' ORDER BY i) FROM generate_series(1, 200) i),
       (SELECT array_agg(jsonb_build_object('k', i) ORDER BY i) FROM generate_series(1, 200) i),
       (SELECT array_agg('key-' || i ORDER BY i) FROM generate_series(1, 200) i))
     WITH ORDINALITY AS a(id, ord);
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids FROM b2;
SELECT count(*) AS matching FROM b2 JOIN sched.task t USING (id)
WHERE t.payload = jsonb_build_object('k', b2.ord) AND t.dedupe_key = 'key-' || b2.ord;
-- the same keys again (keys 101..300): the first 100 return the old ids, the rest are new
CREATE TEMP TABLE b3 AS
SELECT a.ord, a.id
FROM sched.add_many('batch_notify',
       (SELECT array_agg(timestamptz '2100-04-01' + i * interval '1 minute' ORDER BY i) FROM generate_series(101, 300) i),
       (SELECT array_agg(jsonb_build_object('again', i) ORDER BY i) FROM generate_series(101, 300) i),
       (SELECT array_agg('key-' || i ORDER BY i) FROM generate_series(101, 300) i))
     WITH ORDINALITY AS a(id, ord);
SELECT count(*) AS ids,
       count(*) FILTER (WHERE id IN (SELECT id FROM b2)) AS old_ids,
       count(*) FILTER (WHERE id IN (SELECT id FROM b2 WHERE b2.ord = b3.ord + 100)) AS old_ids_in_place
FROM b3;
SELECT count(*) AS tasks, count(DISTINCT dedupe_key) AS keys,
       count(*) FILTER (WHERE payload ? 'again') AS new_payloads
FROM sched.task WHERE biz_type = 'batch_notify' AND dedupe_key IS NOT NULL;
SELECT count(*) AS dedupe_rows,
       count(*) FILTER (WHERE EXISTS (SELECT FROM sched.task t WHERE t.id = d.task_id
                                       AND t.dedupe_key = d.dedupe_key)) AS pointing_right
FROM sched.dedupe d WHERE d.biz_type = 'batch_notify';
-- one key twice in one call: one task, its id twice
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids
FROM sched.add_many('batch_notify', ARRAY['2100-05-01', '2100-05-02']::timestamptz[],
                    ARRAY['{"twice": 1}', '{"twice": 2}']::jsonb[], ARRAY['twice', 'twice']) AS id;
SELECT count(*), min(payload::text) AS payload FROM sched.task WHERE dedupe_key = 'twice';
-- NULL keys in dedupe_keys: no dedupe for those
SELECT count(DISTINCT id) AS distinct_ids
FROM sched.add_many('batch_notify', ARRAY['2100-05-01', '2100-05-01']::timestamptz[],
                    NULL, ARRAY[NULL, NULL]::text[]) AS id;

-- empty arrays return nothing and store nothing
SELECT count(*) AS tasks_before FROM sched.task \gset
SELECT count(*) AS empty FROM sched.add_many('batch_notify', '{}');
SELECT count(*) AS empty FROM sched.add_many('batch_notify', '{}', '{}', '{}');
SELECT count(*) AS empty FROM sched.add_many('batch_notify', '{}', NULL, '{}');
SELECT count(*) - :tasks_before AS stored FROM sched.task;

-- run_at before 1970 and in the past land in the right bucket too (pull type: never delivered)
SELECT count(*) AS ids
FROM sched.add_many('batch_pull', ARRAY['1969-12-31 23:59:59.5+00', '1969-12-31 23:59:00+00',
                                        '1900-01-01 00:00:01+00', now() - interval '1 day']::timestamptz[]);
SELECT run_at, bucket FROM sched.task WHERE biz_type = 'batch_pull' AND run_at < '1970-01-01' ORDER BY run_at;

-- every row of sched.task is in the bucket of its run_at, in the partition of its bucket
SELECT count(*) FILTER (WHERE biz_type LIKE 'batch\_%') AS batch_tasks,
       count(*) FILTER (WHERE bucket <> sched._bucket(run_at)) AS wrong_bucket,
       count(*) FILTER (WHERE tableoid <> format('sched.task_%s', lpad(bucket::text, 4, '0'))::regclass)
         AS wrong_partition
FROM sched.task;
-- sched._bucket (in C since 0.2) is the Unix second mod 60, which is the second of
-- the minute in UTC (a day has whole minutes, and the epoch began one): checked on
-- both sides of 1970, at fractions of a second, and at both ends of the range
-- (where floor(extract(epoch ...)) itself overflows)
SELECT count(*) AS instants,
       count(*) FILTER (WHERE sched._bucket(t) <>
                        floor(extract(second FROM t AT TIME ZONE 'UTC'))) AS differ
FROM (SELECT '1970-01-01 00:00:00+00'::timestamptz + g * interval '250 milliseconds' AS t
      FROM generate_series(-1000, 1000) g
      UNION ALL
      SELECT '1900-01-01 00:00:00+00'::timestamptz + g * interval '7919 seconds 1 microsecond'
      FROM generate_series(0, 5000) g
      UNION ALL
      SELECT t FROM unnest(ARRAY['4713-01-01 00:00:00+00 BC', '294276-12-31 23:59:59.999999+00']::timestamptz[]) t) s;
-- and it is inlined into the statements that use it: no SQL function call per row
EXPLAIN (COSTS OFF, VERBOSE) SELECT sched._bucket(t) FROM (VALUES (now())) v(t);
-- its C function refuses what it cannot place
SELECT sched._bucket_of('infinity', 60);
SELECT sched._bucket_of(now(), 0);

-- and tasks that never moved keep their first bucket in their id
SELECT count(*) FILTER (WHERE bucket <> sched._id_bucket(id)) AS id_bucket_differs
FROM sched.task WHERE biz_type IN ('batch_notify', 'batch_pull');

-- the whole batch cancels with the type
SELECT sched.drop_biz('batch_notify', cancel_tasks => true) AS cancelled;
SELECT sched.drop_biz('batch_pull', cancel_tasks => true) AS cancelled;
SELECT count(*) AS left_over FROM sched.task WHERE biz_type IN ('batch_notify', 'batch_pull');
