-- http: the arguments of http business types, the privileges around them,
-- and the HTTP workers' statements (claim, record, release), called here by
-- hand: this instance runs no HTTP worker (delaysched.http_workers = 0 in
-- test/delaysched.conf).  The requests themselves: test/t/010_http.pl.

\set SHOW_CONTEXT never

-- a minimal http type: the defaults of the http arguments
SELECT sched.define_biz('hk_a', 'http', url => 'https://hooks.example.com/orders');
SELECT delivery, url, headers, timeout, min_backoff, max_backoff, secret IS NULL AS unsigned,
       follow_redirects
FROM sched.biz WHERE name = 'hk_a';
-- everything set
SELECT sched.define_biz('hk_a', 'http', url => 'http://127.0.0.1:9/x?y=1',
       headers => '{"Authorization": "Bearer abc", "X-Team": "pay"}',
       timeout => '2 seconds', min_backoff => '100 ms', max_backoff => '1 minute',
       secret => 'a-secret-of-sixteen+', follow_redirects => true, max_attempts => 3);
SELECT url, headers, timeout, min_backoff, max_backoff, secret, follow_redirects
FROM sched.biz WHERE name = 'hk_a';

-- bad arguments: a clear error each, and nothing stored
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.define_biz('hk_bad', 'http')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => '')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'hooks.example.com/x')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'ftp://hooks.example.com/x')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'file:///etc/passwd')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'http:///x')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'http://127.0.0.1:0/')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://hooks.example.com:0/x')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://user:pw@hooks.example.com/x')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://user@hooks.example.com/x')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://hooks.example.com/a b')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => E'https://hooks.example.com/a\nb')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://hooks.example.com/' || repeat('a', 2100))$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'http://169.254.169.254/latest/meta-data')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'http://[fd00:ec2::254]/latest')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'http://100.100.100.200/x')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'http://[::ffff:169.254.169.254]/x')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'http://[64:ff9b::169.254.169.254]/x')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'http://[::169.254.169.254]/x')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', headers => '[1]')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', headers => '{"Bad Name": "x"}')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', headers => '{"Host": "evil"}')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', headers => '{"content-length": "1"}')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', headers => '{"X-Delaysched-Signature": "v1=0"}')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', headers => '{"Idempotency-Key": "1"}')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', headers => '{"X-N": 5}')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', headers => E'{"X-N": "a\\r\\nInjected: 1"}')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', timeout => '10 ms')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', timeout => '1 hour')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', timeout => '-5 seconds')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', min_backoff => '1 ms')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', max_backoff => '8 days')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', min_backoff => '1 minute', max_backoff => '1 second')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', secret => 'short')$$),
  ($$SELECT sched.define_biz('hk_bad', 'http', url => 'https://h.example.com', follow_redirects => NULL)$$),
  ($$SELECT sched.define_biz('hk_bad', 'notify', url => 'https://h.example.com')$$),
  ($$SELECT sched.define_biz('hk_bad', 'pull', secret => 'a-secret-of-sixteen+')$$),
  ($$SELECT sched.define_biz('hk_bad', 'notify', follow_redirects => true)$$)
) AS v(q);
SELECT count(*) AS stored FROM sched.biz WHERE name = 'hk_bad';
-- a failed redefinition keeps the old definition
SELECT try($$SELECT sched.define_biz('hk_a', 'http', url => 'gopher://x')$$);
SELECT url FROM sched.biz WHERE name = 'hk_a';

-- the perimeter's parameters refuse what they cannot parse
SET delaysched.http_allowed_hosts = 'hooks.example.com, 10.0.0.0/33';
SET delaysched.http_denied_hosts = 'not a/network';
-- only named hosts and networks allowed: a literal address outside them is refused at once
SET delaysched.http_allowed_hosts = 'hooks.example.com, *.corp.example, 10.0.0.0/8';
SELECT try($$SELECT sched.define_biz('hk_b', 'http', url => 'http://192.168.1.10/x')$$);
SELECT try($$SELECT sched.define_biz('hk_b', 'http', url => 'http://10.1.2.3/x')$$);
SELECT try($$SELECT sched.define_biz('hk_b', 'http', url => 'https://api.corp.example/x')$$);
-- the deny list wins over the allow list
SET delaysched.http_allowed_hosts = '*';
SET delaysched.http_denied_hosts = '10.0.0.0/8';
SELECT try($$SELECT sched.define_biz('hk_b', 'http', url => 'http://10.1.2.3/x')$$);
RESET delaysched.http_allowed_hosts;
RESET delaysched.http_denied_hosts;
SELECT sched.drop_biz('hk_b');

-- The workers' statements.  A task of hk_a falls due; the walk parks it
-- for the HTTP workers (state 'r', attempt 0), and sends nothing itself.
SELECT sched.define_biz('hk_a', 'http', url => 'http://127.0.0.1:9/x', max_attempts => 3,
       min_backoff => '1 second', max_backoff => '1 minute');
SELECT sched.add('hk_a', clock_timestamp(), '{"n": 1}') AS t1 \gset
SELECT wait_until(format('(SELECT state = %L FROM sched.task WHERE id = %s)', 'r', :t1));
SELECT state, attempt, lease_owner FROM sched.task WHERE id = :t1;

-- worker 3 claims it: a lease of the timeout and a 30 s grace, attempt 1
SELECT id = :t1 AS mine, biz_type, payload, attempt
FROM sched._http_claim(3::smallint, 10, 100, '{}', '{}');
SELECT state, attempt, lease_owner,
       lease_until - delivered_at = interval '10 seconds' + interval '30 seconds' AS lease_is_timeout_and_grace
FROM sched.task t JOIN sched.biz b ON b.name = t.biz_type WHERE id = :t1;
-- nothing more to claim
SELECT count(*) FROM sched._http_claim(3::smallint, 10, 100, '{}', '{}');

-- a 503: retried later, the error kept, the attempt logged
SELECT sched._http_record(3::smallint, ARRAY[:t1]::bigint[], ARRAY[bucket]::smallint[], '{hk_a}', '{1}',
       '{retry}', ARRAY[clock_timestamp() + interval '1 hour'], '{503}', '{"HTTP 503: busy"}',
       ARRAY[clock_timestamp()], '{12.5}')
FROM sched.task WHERE id = :t1;
SELECT state, attempt, lease_owner, run_at > clock_timestamp() + interval '59 minutes' AS later, last_error
FROM sched.task WHERE id = :t1;
SELECT attempt, http_status, outcome, error, duration = interval '12.5 ms' AS duration_ok
FROM sched.attempts WHERE id = :t1;

-- a result for a lease that is not the caller's changes nothing; the
-- history keeps it as 'stale'
SELECT sched.reschedule(:t1, clock_timestamp());
SELECT wait_until(format('(SELECT state = %L FROM sched.task WHERE id = %s)', 'r', :t1));
SELECT count(*) AS claimed FROM sched._http_claim(3::smallint, 10, 100, '{}', '{}');
SELECT sched._http_record(4::smallint, ARRAY[:t1]::bigint[], ARRAY[bucket]::smallint[], '{hk_a}', '{2}',
       '{dead}', NULL, '{410}', '{"HTTP 410"}', ARRAY[clock_timestamp()], '{1}')
FROM sched.task WHERE id = :t1;
SELECT state, attempt, lease_owner FROM sched.task WHERE id = :t1;

-- a local failure: parked again, the attempt not counted
SELECT sched._http_record(3::smallint, ARRAY[:t1]::bigint[], ARRAY[bucket]::smallint[], '{hk_a}', '{2}',
       '{requeued}', NULL, NULL, '{"out of memory"}', ARRAY[clock_timestamp()], '{0}')
FROM sched.task WHERE id = :t1;
SELECT state, attempt, lease_owner, last_error FROM sched.task WHERE id = :t1;

-- a worker that starts again releases its leases at once, attempts not counted
SELECT count(*) AS claimed FROM sched._http_claim(3::smallint, 10, 100, '{}', '{}');
SELECT sched._http_release(4::smallint) AS other_workers, sched._http_release(3::smallint) AS released;
SELECT state, attempt, lease_owner, last_error FROM sched.task WHERE id = :t1;

-- the last attempt failing: dead, with the count in the error
SELECT count(*) AS claimed FROM sched._http_claim(3::smallint, 10, 100, '{}', '{}');
SELECT sched.reschedule(:t1, clock_timestamp()) AS not_pending;
UPDATE sched.task SET attempt = 3 WHERE id = :t1;
SELECT sched._http_record(3::smallint, ARRAY[:t1]::bigint[], ARRAY[bucket]::smallint[], '{hk_a}', '{3}',
       '{retry}', ARRAY[clock_timestamp()], '{500}', '{"HTTP 500"}', ARRAY[clock_timestamp()], '{1}')
FROM sched.task WHERE id = :t1;
SELECT state, attempt, last_error FROM sched.tasks WHERE id = :t1;
SELECT attempt, http_status, outcome, error FROM sched.attempts WHERE id = :t1 ORDER BY started_at;
-- sched.retry revives it; a 2xx finishes it
SELECT sched.retry(:t1);
SELECT wait_until(format('(SELECT state = %L FROM sched.task WHERE id = %s)', 'r', :t1));
SELECT attempt FROM sched._http_claim(3::smallint, 10, 100, '{}', '{}');
SELECT sched._http_record(3::smallint, ARRAY[:t1]::bigint[], ARRAY[bucket]::smallint[], '{hk_a}', '{1}',
       '{done}', NULL, '{204}', NULL, ARRAY[clock_timestamp()], '{3}')
FROM sched.task WHERE id = :t1;
SELECT state, attempt FROM sched.tasks WHERE id = :t1;

-- fair shares: alone, a type gets three quarters of the worker's slots ...
SELECT count(*) FROM (SELECT sched.add('hk_a', clock_timestamp(), '{}') FROM generate_series(1, 20)) s;
SELECT wait_until($$NOT EXISTS (SELECT FROM sched.task WHERE biz_type = 'hk_a' AND state = 'p')$$);
SELECT count(*) AS claimed FROM sched._http_claim(3::smallint, 100, 8, '{}', '{}');
-- ... and none while it holds them (a last row without an id says it is held back)
SELECT count(id) AS claimed, bool_or(id IS NULL AND attempt = 1) AS held_back
FROM sched._http_claim(3::smallint, 100, 8, '{hk_a}', '{6}');
-- beside another type with work, half
SELECT sched.define_biz('hk_c', 'http', url => 'http://127.0.0.1:9/c');
SELECT count(*) FROM (SELECT sched.add('hk_c', clock_timestamp(), '{}') FROM generate_series(1, 20)) s;
SELECT wait_until($$NOT EXISTS (SELECT FROM sched.task WHERE biz_type = 'hk_c' AND state = 'p')$$);
SELECT biz_type, count(*) FROM sched._http_claim(3::smallint, 100, 8, '{hk_a}', '{2}')
WHERE id IS NOT NULL GROUP BY 1 ORDER BY 1;
-- no more than its receiver can take soon (p_busy_rooms, from the HTTP
-- worker's allowances: 1 for hk_a, none for hk_c here) ...
SELECT biz_type, count(*) FROM sched._http_claim(3::smallint, 100, 100, '{hk_a,hk_c}', '{0,0}', '{1,0}')
WHERE id IS NOT NULL GROUP BY 1 ORDER BY 1;
-- ... and none when it has no room: held back, to claim again when requests end
SELECT count(id) AS claimed, bool_or(id IS NULL AND attempt = 1) AS held_back
FROM sched._http_claim(3::smallint, 100, 100, '{hk_a,hk_c}', '{0,0}', '{0,0}');
-- a concurrency cap holds (it counts leases of every worker)
SELECT sched.define_biz('hk_c', 'http', url => 'http://127.0.0.1:9/c', max_concurrency => 5);
SELECT biz_type, count(*) FROM sched._http_claim(5::smallint, 100, 100, '{}', '{}')
WHERE id IS NOT NULL GROUP BY 1 ORDER BY 1;
-- at its cap, it is held back
SELECT count(id) AS claimed, bool_or(id IS NULL AND attempt = 1) AS held_back
FROM sched._http_claim(5::smallint, 100, 100, '{}', '{}');
SELECT sched.drop_biz('hk_c', cancel_tasks => true) AS cancelled;

-- a rate limit: the claim takes what the bucket holds, and a last row (no
-- id) says when the next token comes
SELECT sched.define_biz('hk_r', 'http', url => 'http://127.0.0.1:9/r', rate_limit => 2, burst => 1);
SELECT count(*) FROM (SELECT sched.add('hk_r', clock_timestamp(), '{}') FROM generate_series(1, 3)) s;
SELECT wait_until($$NOT EXISTS (SELECT FROM sched.task WHERE biz_type = 'hk_r' AND state = 'p')$$);
SELECT id IS NULL AS next_token_row, count(*),
       bool_and(run_at > now() AND run_at <= now() + interval '0.6 seconds') FILTER (WHERE id IS NULL) AS in_half_a_second
FROM sched._http_claim(3::smallint, 10, 100, '{}', '{}') GROUP BY 1 ORDER BY 1;
SELECT sched.drop_biz('hk_r', cancel_tasks => true) AS cancelled;

-- switching an http type to notify delivers its parked tasks by NOTIFY
SELECT count(*) FROM (SELECT sched.add('hk_a', clock_timestamp(), '{}') FROM generate_series(1, 3)) s;
SELECT wait_until($$NOT EXISTS (SELECT FROM sched.task WHERE biz_type = 'hk_a' AND state = 'p')$$);
SELECT count(*) AS parked FROM sched.task WHERE biz_type = 'hk_a' AND state = 'r';
SELECT sched.define_biz('hk_a', 'notify');
SELECT count(*) AS parked FROM sched.task WHERE biz_type = 'hk_a' AND state = 'r';
SELECT sched.drop_biz('hk_a', cancel_tasks => true) > 0 AS cancelled;

-- privileges: only administrators define types; no ordinary role reads a
-- secret, the attempts or the internal statements
CREATE ROLE regress_ds_hook NOLOGIN;
GRANT USAGE ON SCHEMA sched TO regress_ds_hook;
SET ROLE regress_ds_hook;
SELECT try($$SELECT sched.define_biz('hk_p', 'http', url => 'https://h.example.com')$$);
SELECT try($$SELECT secret FROM sched.biz$$);
SELECT try($$SELECT * FROM sched.attempts$$);
SELECT try($$SELECT * FROM sched.attempt$$);
SELECT try($$SELECT sched._http_release(0::smallint)$$);
SELECT try($$SELECT * FROM sched._http_claim(0::smallint, 1, 1, '{}', '{}')$$);
SELECT try($$SELECT sched._check_url('http://x')$$);
SELECT try($$SELECT sched._wake_http()$$);
SELECT try($$INSERT INTO sched.attempt VALUES (1, 1, 'x', now(), '1s', 200, NULL, 'done')$$);
RESET ROLE;
-- a view for operators shows no secret
SELECT count(*) AS views_with_secret FROM information_schema.columns
WHERE table_schema = 'sched' AND column_name = 'secret'
  AND table_name IN (SELECT table_name FROM information_schema.views WHERE table_schema = 'sched');
REVOKE USAGE ON SCHEMA sched FROM regress_ds_hook;
DROP ROLE regress_ds_hook;
