-- validation: every bad input is refused with its SQLSTATE and a clear
-- message, and none of them changes what is stored.
-- try() (from setup) prints "SQLSTATE: message [DETAIL: ...] [HINT: ...]".

SELECT sched.define_biz('val_notify');
SELECT sched.define_biz('val_pull', 'pull', ack_timeout => '1 hour');
CREATE TEMP TABLE keep AS
SELECT sched.add('val_notify', '2100-01-01', '{"keep": 1}', 'keep') AS id;

-- a fingerprint of the store, compared at the end
CREATE TEMP TABLE fingerprint AS
SELECT (SELECT count(*) FROM sched.biz) AS biz,
       (SELECT string_agg(format('%s %s %s %s %s', name, delivery, channel, max_attempts, ack_timeout),
                          ', ' ORDER BY name) FROM sched.biz) AS biz_rows,
       (SELECT count(*) FROM sched.task) AS tasks,
       (SELECT count(*) FROM sched.finished) AS finished,
       (SELECT count(*) FROM sched.dedupe) AS dedupe,
       (SELECT last_value FROM sched.task_seq) AS seq;

-- NULL arguments
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.define_biz(NULL)$$),
  ($$SELECT sched.define_biz('val_x', delivery => NULL)$$),
  ($$SELECT sched.define_biz('val_x', max_attempts => NULL)$$),
  ($$SELECT sched.define_biz('val_x', ack_timeout => NULL)$$),
  ($$SELECT sched.drop_biz(NULL)$$),
  ($$SELECT sched.drop_biz('val_notify', NULL)$$),
  ($$SELECT sched.add(NULL, '2100-01-01')$$),
  ($$SELECT sched.add('val_notify', NULL)$$),
  ($$SELECT sched.add('val_notify', '2100-01-01', NULL)$$),
  ($$SELECT sched.add_after(NULL, '1 day')$$),
  ($$SELECT sched.add_after('val_notify', NULL)$$),
  ($$SELECT sched.add_after('val_notify', '1 day', NULL)$$),
  ($$SELECT sched.add_many(NULL, ARRAY['2100-01-01']::timestamptz[])$$),
  ($$SELECT sched.add_many('val_notify', NULL)$$),
  ($$SELECT sched.cancel(NULL)$$),
  ($$SELECT sched.reschedule(NULL, '2100-01-01')$$),
  ($$SELECT sched.reschedule((SELECT id FROM keep), NULL)$$),
  ($$SELECT sched.ack(NULL)$$),
  ($$SELECT sched.ack_many(NULL)$$),
  ($$SELECT sched.nack(NULL)$$),
  ($$SELECT sched.retry(NULL)$$),
  ($$SELECT sched.claim(NULL)$$),
  ($$SELECT sched.claim('val_pull', NULL)$$)
) AS v(q);

-- NULL where NULL means "the default" or "nothing" is accepted
BEGIN;
SELECT sched.define_biz('val_x', 'notify', NULL);
SELECT channel FROM sched.biz WHERE name = 'val_x';
SELECT sched.add('val_notify', '2100-01-01', '{}', NULL) IS NOT NULL AS added_without_key;
SELECT count(*) AS added_many FROM sched.add_many('val_notify', ARRAY['2100-01-01']::timestamptz[], NULL, NULL);
SELECT count(*) AS added_null_key FROM sched.add_many('val_notify', ARRAY['2100-01-01', '2100-01-02']::timestamptz[],
                                    NULL, ARRAY['k1', NULL]);
SELECT sched.ack_many(ARRAY[NULL, -1]::bigint[]) AS acked, sched.nack(-1, NULL, NULL) AS nacked;
ROLLBACK;

-- business type names: empty, uppercase, 64 bytes, not identifiers
SELECT try($$SELECT sched.define_biz('')$$, true);
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.define_biz('Orders')$$),
  ($$SELECT sched.define_biz(repeat('a', 64))$$),
  ($$SELECT sched.define_biz('order-timeout')$$),
  ($$SELECT sched.define_biz('1orders')$$),
  ($$SELECT sched.define_biz('orders timeout')$$),
  ($$SELECT sched.define_biz('"orders"')$$)
) AS v(q);
-- 63 bytes is fine
BEGIN;
SELECT try($$SELECT sched.define_biz(repeat('a', 63))$$) AS name_63;
SELECT try($$SELECT sched.define_biz('_x9')$$) AS underscore;
ROLLBACK;

-- channel names: the same rules
SELECT try($$SELECT sched.define_biz('val_x', channel => '')$$, true);
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.define_biz('val_x', channel => 'Chan')$$),
  ($$SELECT sched.define_biz('val_x', channel => repeat('c', 64))$$),
  ($$SELECT sched.define_biz('val_x', channel => 'my.chan')$$),
  ($$SELECT sched.define_biz('val_x', channel => '9chan')$$)
) AS v(q);
BEGIN;
SELECT try($$SELECT sched.define_biz('val_x', channel => repeat('c', 63))$$) AS channel_63;
ROLLBACK;

-- unknown business type: named in the error, with a hint at define_biz
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.add('val_nope', '2100-01-01')$$),
  ($$SELECT sched.add_after('val_nope', '1 day')$$),
  ($$SELECT sched.add_many('val_nope', ARRAY['2100-01-01']::timestamptz[])$$),
  ($$SELECT sched.claim('val_nope')$$),
  ($$SELECT sched.drop_biz('val_nope')$$)
) AS v(q);

-- delivery
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.define_biz('val_x', 'http')$$),
  ($$SELECT sched.define_biz('val_x', 'email')$$),
  ($$SELECT sched.define_biz('val_x', 'PULL')$$),
  ($$SELECT sched.define_biz('val_x', '')$$)
) AS v(q);

-- max_attempts between 1 and 1000
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.define_biz('val_x', max_attempts => 0)$$),
  ($$SELECT sched.define_biz('val_x', max_attempts => -1)$$),
  ($$SELECT sched.define_biz('val_x', max_attempts => 1001)$$)
) AS v(q);
BEGIN;
SELECT try($$SELECT sched.define_biz('val_x', max_attempts => 1)$$) AS one,
       try($$SELECT sched.define_biz('val_y', max_attempts => 1000)$$) AS thousand;
ROLLBACK;

-- ack_timeout between 1 second and 7 days
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.define_biz('val_x', ack_timeout => '0')$$),
  ($$SELECT sched.define_biz('val_x', ack_timeout => '999 milliseconds')$$),
  ($$SELECT sched.define_biz('val_x', ack_timeout => '-30 seconds')$$),
  ($$SELECT sched.define_biz('val_x', ack_timeout => '7 days 1 second')$$),
  ($$SELECT sched.define_biz('val_x', ack_timeout => '1 month')$$)
) AS v(q);
BEGIN;
SELECT try($$SELECT sched.define_biz('val_x', ack_timeout => '1 second')$$) AS one_second,
       try($$SELECT sched.define_biz('val_y', ack_timeout => '7 days')$$) AS seven_days;
ROLLBACK;

-- an invalid replacement leaves the type as it was
SELECT try($$SELECT sched.define_biz('val_notify', 'pull', max_attempts => 0)$$);
SELECT delivery, max_attempts FROM sched.biz WHERE name = 'val_notify';

-- delay and retry_in must not be negative
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.add_after('val_notify', '-1 second')$$),
  ($$SELECT sched.add_after('val_notify', '-1 day')$$),
  ($$SELECT sched.nack((SELECT id FROM keep), '-1 second')$$),
  ($$SELECT sched.nack(-1, '-1 second')$$),
  ($$SELECT sched.nack(-1, '1 year 1 day')$$)
) AS v(q);
-- a zero delay is fine (rolled back before the scanner can see it)
BEGIN;
SELECT try($$SELECT sched.add_after('val_notify', '0')$$) AS zero_delay;
ROLLBACK;

-- run_at must be finite
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.add('val_notify', 'infinity')$$),
  ($$SELECT sched.add('val_notify', '-infinity')$$),
  ($$SELECT sched.reschedule((SELECT id FROM keep), 'infinity')$$),
  ($$SELECT sched.add_many('val_notify', ARRAY['2100-01-01', 'infinity']::timestamptz[])$$)
) AS v(q);

-- malformed JSON fails in the cast, before the function runs
SELECT try($$SELECT sched.add('val_notify', '2100-01-01', '{"a": ')$$, true);
SELECT try($$SELECT sched.add_many('val_notify', ARRAY['2100-01-01']::timestamptz[], ARRAY['nope']::jsonb[])$$, true);

-- payload larger than delaysched.max_payload_size
SET delaysched.max_payload_size = '1kB';
SHOW delaysched.max_payload_size;
-- {"x": "..."} is the repeat plus 9 bytes: 1024 bytes is the most
BEGIN;
SELECT try(format($$SELECT sched.add('val_notify', '2100-01-01', jsonb_build_object('x', repeat('x', %s)))$$, 1015))
       AS payload_1024;
ROLLBACK;
SELECT try(format($$SELECT sched.add('val_notify', '2100-01-01', jsonb_build_object('x', repeat('x', %s)))$$, 1016),
           true) AS payload_1025;
SELECT try($$SELECT sched.add_after('val_notify', '1 day', jsonb_build_object('x', repeat('x', 2000)))$$);
SELECT try($$SELECT sched.add_many('val_notify', ARRAY['2100-01-01', '2100-01-02']::timestamptz[],
             ARRAY['{}', jsonb_build_object('x', repeat('x', 2000))])$$);
RESET delaysched.max_payload_size;
SHOW delaysched.max_payload_size;

-- dedupe_key: 1 to 512 bytes
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.add('val_notify', '2100-01-01', '{}', '')$$),
  ($$SELECT sched.add('val_notify', '2100-01-01', '{}', repeat('k', 513))$$),
  ($$SELECT sched.add_after('val_notify', '1 day', '{}', '')$$),
  ($$SELECT sched.add_many('val_notify', ARRAY['2100-01-01']::timestamptz[], NULL, ARRAY[''])$$)
) AS v(q);
BEGIN;
SELECT try($$SELECT sched.add('val_notify', '2100-01-01', '{}', repeat('k', 512))$$) AS key_512;
ROLLBACK;

-- claim: max_tasks between 1 and 10000
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.claim('val_pull', 0)$$),
  ($$SELECT sched.claim('val_pull', -1)$$),
  ($$SELECT sched.claim('val_pull', 10001)$$)
) AS v(q);
SELECT count(*) AS claimed_10000 FROM sched.claim('val_pull', 10000);

-- add_many: arrays of different lengths, NULL elements
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.add_many('val_notify', ARRAY['2100-01-01', '2100-01-02']::timestamptz[], ARRAY['{}']::jsonb[])$$),
  ($$SELECT sched.add_many('val_notify', ARRAY['2100-01-01']::timestamptz[], ARRAY['{}', '{}']::jsonb[])$$),
  ($$SELECT sched.add_many('val_notify', ARRAY['2100-01-01', '2100-01-02']::timestamptz[], NULL, ARRAY['a'])$$),
  ($$SELECT sched.add_many('val_notify', '{}', ARRAY['{}']::jsonb[])$$),
  ($$SELECT sched.add_many('val_notify', ARRAY['2100-01-01', NULL]::timestamptz[])$$),
  ($$SELECT sched.add_many('val_notify', ARRAY['2100-01-01', '2100-01-02']::timestamptz[], ARRAY['{}', NULL]::jsonb[])$$),
  ($$SELECT sched.add_many('val_notify', '[0:1]={2100-01-01,2100-01-02}'::timestamptz[])$$),
  ($$SELECT sched.add_many('val_notify', ARRAY['2100-01-01', '2100-01-02']::timestamptz[], NULL, '[0:1]={k1,k2}'::text[])$$),
  ($$SELECT sched.add_many('val_notify', ARRAY[['2100-01-01'], ['2100-01-02']]::timestamptz[])$$)
) AS v(q);

-- nothing stored was harmed
SELECT f.biz = n.biz AS biz, f.biz_rows = n.biz_rows AS biz_rows, f.tasks = n.tasks AS tasks,
       f.finished = n.finished AS finished, f.dedupe = n.dedupe AS dedupe
FROM fingerprint f,
     (SELECT (SELECT count(*) FROM sched.biz) AS biz,
             (SELECT string_agg(format('%s %s %s %s %s', name, delivery, channel, max_attempts, ack_timeout),
                                ', ' ORDER BY name) FROM sched.biz) AS biz_rows,
             (SELECT count(*) FROM sched.task) AS tasks,
             (SELECT count(*) FROM sched.finished) AS finished,
             (SELECT count(*) FROM sched.dedupe) AS dedupe) AS n;
SELECT biz_type, state, attempt, payload, dedupe_key FROM sched.tasks WHERE id = (SELECT id FROM keep);
SELECT name FROM sched.biz WHERE name LIKE 'val\_%' ORDER BY name;

-- tasks are scheduled only in a database delaysched.databases lists
CREATE DATABASE regress_delaysched_other;
\c regress_delaysched_other
CREATE EXTENSION delaysched;
SELECT sched.define_biz('elsewhere');
\set SHOW_CONTEXT never
SELECT sched.add('elsewhere', '2100-01-01');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT sched.add_after('elsewhere', '1 day');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT sched.add_many('elsewhere', ARRAY['2100-01-01']::timestamptz[]);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
SELECT count(*) AS tasks FROM sched.task;
\c contrib_regression
DROP DATABASE regress_delaysched_other;

-- the internal tick refuses nonsense before touching anything, and a range
-- that does not exist is simply not there to hold
SELECT sched._tick(NULL, now(), 10, false, 60, 60, NULL, NULL);
SELECT sched._tick(0::smallint, now(), 0, false, 60, 60, NULL, NULL);
SELECT sched._tick(0::smallint, 'infinity', 10, false, 60, 60, NULL, NULL);
SELECT held, delivered FROM sched._tick(999::smallint, now(), 10, true, 60, 60, NULL, NULL);

-- clean up
SELECT sched.drop_biz('val_notify', cancel_tasks => true);
SELECT sched.drop_biz('val_pull');

-- a megabyte of bad input makes a short message: the value is quoted clipped
SELECT length(try($$SELECT sched.define_biz(repeat('X', 1000000))$$)) < 400 AS short_message,
       try($$SELECT sched.define_biz(repeat('X', 1000000))$$) LIKE '%XXX...%' AS clipped;
SELECT length(try($$SELECT sched.add(repeat('x', 1000000), now())$$)) < 400 AS short_message;
SELECT length(try($$SELECT sched.drop_schedule(repeat('x', 1000000))$$)) < 400 AS short_message;
