-- limits: rate_limit, burst and max_concurrency in sched.define_biz, what
-- sched.claim makes of them, and what sched.biz_stats shows.  (The paced
-- delivery of notify types needs the workers' timing: test/t/009_rate_limit.pl.)

\set SHOW_CONTEXT never

-- a rate limit alone: the bucket holds one second of it (at least one token)
SELECT sched.define_biz('lim_a', rate_limit => 200);
SELECT rate_limit, burst, max_concurrency FROM sched.biz WHERE name = 'lim_a';
SELECT sched.define_biz('lim_a', rate_limit => 0.5);
SELECT rate_limit, burst FROM sched.biz WHERE name = 'lim_a';
SELECT sched.define_biz('lim_a', rate_limit => 2.5);
SELECT rate_limit, burst FROM sched.biz WHERE name = 'lim_a';
-- all three
SELECT sched.define_biz('lim_a', rate_limit => 200, burst => 10, max_concurrency => 5);
SELECT rate_limit, burst, max_concurrency FROM sched.biz WHERE name = 'lim_a';

-- bad values: a clear error each, and nothing stored
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.define_biz('lim_bad', rate_limit => 0)$$),
  ($$SELECT sched.define_biz('lim_bad', rate_limit => -1)$$),
  ($$SELECT sched.define_biz('lim_bad', rate_limit => 0.0001)$$),
  ($$SELECT sched.define_biz('lim_bad', rate_limit => 1000001)$$),
  ($$SELECT sched.define_biz('lim_bad', rate_limit => 'NaN')$$),
  ($$SELECT sched.define_biz('lim_bad', rate_limit => 'Infinity')$$),
  ($$SELECT sched.define_biz('lim_bad', rate_limit => '-Infinity')$$),
  ($$SELECT sched.define_biz('lim_bad', burst => 10)$$),
  ($$SELECT sched.define_biz('lim_bad', rate_limit => 10, burst => 0)$$),
  ($$SELECT sched.define_biz('lim_bad', rate_limit => 10, burst => -5)$$),
  ($$SELECT sched.define_biz('lim_bad', rate_limit => 10, burst => 1000001)$$),
  ($$SELECT sched.define_biz('lim_bad', max_concurrency => 0)$$),
  ($$SELECT sched.define_biz('lim_bad', max_concurrency => -1)$$),
  ($$SELECT sched.define_biz('lim_bad', max_concurrency => 100001)$$),
  ($$SELECT sched.define_biz('lim_bad', weight => 0)$$),
  ($$SELECT sched.define_biz('lim_bad', weight => -3)$$),
  ($$SELECT sched.define_biz('lim_bad', weight => 1001)$$),
  ($$SELECT sched.define_biz('lim_bad', weight => NULL)$$)
) AS v(q);
SELECT count(*) AS stored FROM sched.biz WHERE name = 'lim_bad';
SELECT sched.define_biz('lim_bad', rate_limit => 'NaN');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
-- a failed redefinition keeps the old one
SELECT try($$SELECT sched.define_biz('lim_a', rate_limit => -1)$$);
SELECT rate_limit, burst, max_concurrency FROM sched.biz WHERE name = 'lim_a';
SELECT sched.define_biz('lim_bad', weight => 0);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
-- a weight is kept, shown by sched.biz_stats, and held by the table too
SELECT sched.define_biz('lim_a', rate_limit => 200, weight => 3);
SELECT weight FROM sched.biz_stats WHERE biz_type = 'lim_a';
SELECT try($$UPDATE sched.biz SET weight = 0 WHERE name = 'lim_a'$$);
-- a redefinition without them removes the limits and the weight (define_biz
-- replaces the whole type)
SELECT sched.define_biz('lim_a');
SELECT rate_limit, burst, max_concurrency, weight FROM sched.biz WHERE name = 'lim_a';

-- delaysched.max_biz_types bounds the rate-limited types (16 in this test server)
SHOW delaysched.max_biz_types;
SELECT count(sched.define_biz('lim_many_' || i, 'pull', rate_limit => 1)) AS defined
FROM generate_series(1, current_setting('delaysched.max_biz_types')::int
                        - (SELECT count(*) FROM sched.biz WHERE rate_limit IS NOT NULL)::int) i;
-- (a claim takes tokens, so each of them has its bucket in shared memory now)
SELECT count(c.id) AS claimed FROM sched.biz b, sched.claim(b.name) c WHERE b.name LIKE 'lim_many_%';
SELECT try($$SELECT sched.define_biz('lim_one_too_many', rate_limit => 1)$$, true);
SELECT count(*) AS stored FROM sched.biz WHERE name = 'lim_one_too_many';
-- a type that has a rate limit already may change it; one without a limit is fine too
SELECT sched.define_biz('lim_many_1', rate_limit => 2);
SELECT sched.define_biz('lim_one_too_many');
SELECT sum(sched.drop_biz(name)) AS dropped_tasks FROM sched.biz WHERE name LIKE 'lim_many_%';
SELECT sched.drop_biz('lim_one_too_many');
-- dropping them freed their buckets: the rate-limited claims below find room

-- a pull type's rate limit paces sched.claim: three tokens, refilled at
-- one per 1000 s, so the next claim finds none
SELECT sched.define_biz('lim_pull', 'pull', rate_limit => 0.001, burst => 3);
SELECT count(*) AS added FROM sched.add_many('lim_pull',
  array_fill(now() - interval '1 minute', ARRAY[10]));
SELECT wait_announced('lim_pull');
SELECT count(*) AS claimed FROM sched.claim('lim_pull', 10);
SELECT count(*) AS claimed_again FROM sched.claim('lim_pull', 10);
SELECT rate_limit, burst, tokens, pending, awaiting_ack, throttled
FROM sched.biz_stats WHERE biz_type = 'lim_pull';
-- a claim that finds fewer tasks than tokens gives the rest back
SELECT sched.define_biz('lim_pull2', 'pull', rate_limit => 0.001, burst => 5);
SELECT sched.add('lim_pull2', now() - interval '1 minute') IS NOT NULL AS added;
SELECT wait_announced('lim_pull2');
SELECT count(*) AS claimed FROM sched.claim('lim_pull2', 5);
SELECT tokens FROM sched.biz_stats WHERE biz_type = 'lim_pull2';

-- a pull type's concurrency cap: at most two leases at once
SELECT sched.define_biz('lim_cap', 'pull', max_concurrency => 2);
SELECT count(*) AS added FROM sched.add_many('lim_cap',
  array_fill(now() - interval '1 minute', ARRAY[5]));
SELECT wait_announced('lim_cap');
SELECT array_agg(id ORDER BY id) AS leased FROM sched.claim('lim_cap', 5) \gset
SELECT cardinality(:'leased'::bigint[]) AS claimed;
SELECT count(*) AS claimed_at_cap FROM sched.claim('lim_cap', 5);
SELECT sched.ack((:'leased'::bigint[])[1]) AS acked;
SELECT count(*) AS claimed_after_ack FROM sched.claim('lim_cap', 5);
SELECT max_concurrency, awaiting_ack, pending FROM sched.biz_stats WHERE biz_type = 'lim_cap';

-- a type without limits shows none
SELECT sched.define_biz('lim_none');
SELECT rate_limit, burst, max_concurrency, tokens, throttled, current_rate
FROM sched.biz_stats WHERE biz_type = 'lim_none';

SELECT sched.drop_biz(b, cancel_tasks => true) FROM unnest(ARRAY['lim_a', 'lim_pull', 'lim_pull2', 'lim_cap', 'lim_none']) b;
