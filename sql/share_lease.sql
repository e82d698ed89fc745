-- share_lease: a node that a router follows (delaysched_router's
-- sched.follow_nodes) holds its shares of the split limits only while the
-- router's lease on them is in force (src/cluster/share_lease.c).  While
-- it is not, types with a rate limit or a concurrency cap deliver nothing,
-- by claim or by the drain; other types go on.  Not followed, nothing
-- changes.  The router's side: test/t/036_router_follow.pl.

\set SHOW_CONTEXT never

SELECT sched.define_biz('sl_rated', delivery => 'pull', rate_limit => 1000, ack_timeout => '1 hour');
SELECT sched.define_biz('sl_capped', delivery => 'pull', max_concurrency => 100, ack_timeout => '1 hour');
SELECT sched.define_biz('sl_free', delivery => 'pull', ack_timeout => '1 hour');
SELECT sched.define_biz('sl_notify', rate_limit => 1000, ack_timeout => '1 hour');
SELECT sum(a.n) AS added
FROM unnest('{sl_rated,sl_capped,sl_free}'::text[]) t,
	 LATERAL (SELECT count(*) AS n FROM sched.add_many(t, array_fill(now() - interval '1 minute', ARRAY[8]),
													  array_fill('{}'::jsonb, ARRAY[8]))) a;
SELECT wait_until($$(SELECT count(*) = 24 FROM sched.task WHERE biz_type LIKE 'sl\_%' AND state = 'r')$$) AS announced;

-- Not followed: no lease, and none needed.
SELECT EXISTS (SELECT FROM sched.router_follow) AS followed, sched._share_lease_until() AS lease_until,
	   sched._share_lapsed() AS lapsed;
SELECT t, (SELECT count(*) FROM sched.claim(t, 2)) AS claimed
FROM unnest('{sl_rated,sl_capped,sl_free}'::text[]) t;

-- The router's first call marks the node followed; a lease is renewed only
-- for the split whose shares the node was given (numbered by the router).
SELECT renewed, remaining FROM sched._share_lease(60, -1);
SELECT sched._set_share_generation(7), sched._share_generation() AS generation;
SELECT renewed, remaining > 59 AS a_minute_left FROM sched._share_lease(60, 8);
SELECT renewed, remaining > 59 AS a_minute_left, node FROM sched._share_lease(60, 7);
SELECT renewed, remaining > 59 AS a_minute_left FROM sched._share_lease(60, 8);
-- While it is in force, claims take as before.
SELECT EXISTS (SELECT FROM sched.router_follow) AS followed, sched._share_lapsed() AS lapsed;
SELECT t, (SELECT count(*) FROM sched.claim(t, 2)) AS claimed
FROM unnest('{sl_rated,sl_capped,sl_free}'::text[]) t;

-- The lease runs out: the types with split limits wait, the other does not.
SELECT renewed FROM sched._share_lease(0.001, 7);
SELECT wait_until('sched._share_lapsed()') AS lapsed;
SELECT t, (SELECT count(*) FROM sched.claim(t, 2)) AS claimed
FROM unnest('{sl_rated,sl_capped,sl_free}'::text[]) t;
-- A rate-limited notify type's due tasks wait parked for the drain.
SELECT count(*) FROM sched.add_many('sl_notify', array_fill(now() - interval '1 minute', ARRAY[3]),
									array_fill('{}'::jsonb, ARRAY[3]));
SELECT wait_until($$(SELECT count(*) = 3 FROM sched.task WHERE biz_type = 'sl_notify' AND state = 'r')$$) AS parked;
SELECT state, count(*) FROM sched.task WHERE biz_type = 'sl_notify' GROUP BY state;

-- Renewed: they go again, the parked notify tasks by the drain.
SELECT renewed FROM sched._share_lease(60, 7);
SELECT t, (SELECT count(*) FROM sched.claim(t, 2)) AS claimed
FROM unnest('{sl_rated,sl_capped}'::text[]) t;
SELECT wait_until($$(SELECT count(*) = 3 FROM sched.task WHERE biz_type = 'sl_notify' AND state = 'd')$$) AS delivered;

-- No longer followed: no lease needed, even once the last one ran out.
SELECT renewed FROM sched._share_lease(0.001, 7);
SELECT sched._share_unfollow() AS unfollowed, sched._share_unfollow() AS again;
SELECT wait_until('sched._share_lease_until() < clock_timestamp()') AS ran_out;
SELECT sched._share_lapsed() AS lapsed;
SELECT (SELECT count(*) FROM sched.claim('sl_rated', 2)) AS claimed;

-- Bad leases, and an ordinary role may not lease or stop following.
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched._share_lease(0, 7)$$),
  ($$SELECT sched._share_lease(-1, 7)$$),
  ($$SELECT sched._share_lease('NaN', 7)$$),
  ($$SELECT sched._share_lease(3601, 7)$$)) v(q);
SELECT EXISTS (SELECT FROM sched.router_follow) AS followed;
CREATE ROLE regress_share_spy NOLOGIN;
GRANT USAGE ON SCHEMA sched TO regress_share_spy;
SET ROLE regress_share_spy;
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched._share_lease(60, 7)$$),
  ($$SELECT sched._set_share_generation(8)$$),
  ($$SELECT sched._share_unfollow()$$),
  ($$DELETE FROM sched.router_follow$$)) v(q);
RESET ROLE;
REVOKE USAGE ON SCHEMA sched FROM regress_share_spy;
DROP ROLE regress_share_spy;

SELECT sched.drop_biz(t, cancel_tasks => true) FROM unnest('{sl_rated,sl_capped,sl_free,sl_notify}'::text[]) t;
