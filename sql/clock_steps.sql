-- clock_steps: the scanner's clock jumps forward 30 seconds, then back 15,
-- while per-second schedules fire under each catch-up policy.  No instant
-- is delivered twice; forward, the instants in between are caught up as
-- catch_up says; back, nothing fires until the clock reaches the next
-- instant again.
--
-- The ticks are the scanner's (sched._tick, given the "now" it would read
-- from a stepped clock).  This session holds every range's pointer row, so
-- the real workers keep off, and rolls everything back at the end.
SET timezone = 'UTC';
SELECT sched.define_biz('clk', ack_timeout => '1 hour');

-- Tick every range as of "at" until a round delivers nothing (a catch-up
-- batch made in one round goes out in the next); the deliveries.
CREATE FUNCTION pg_temp.tick_until_quiet(at timestamptz) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	total bigint := 0;
	round bigint;
BEGIN
	FOR i IN 1 .. 20 LOOP
		SELECT coalesce(sum(t.delivered), 0) INTO round
		FROM sched.pointer p,
			 LATERAL sched._tick(p.range_id::smallint, at, 1000, true, 3600, 3600, NULL, NULL) AS t;
		EXIT WHEN round = 0;
		total := total + round;
	END LOOP;
	RETURN total;
END
$$;

BEGIN;
SELECT count(*) > 0 AS holding FROM (SELECT FROM sched.pointer ORDER BY range_id FOR UPDATE) AS p;
-- S, a whole second ahead: the schedules' first instant
SELECT date_trunc('second', clock_timestamp()) + interval '5 seconds' AS s \gset
SELECT sched.define_schedule('clk_' || p, 'clk', 'every 1 second', catch_up => p, starts_at => :'s') = :'s' AS at_s
FROM unnest(ARRAY['latest', 'all', 'none']) AS p;

-- The clock reaches S: each schedule fires its first instant.
SELECT pg_temp.tick_until_quiet(:'s'::timestamptz + interval '100 ms') AS delivered;
-- The clock jumps 30 seconds forward.
SELECT pg_temp.tick_until_quiet(:'s'::timestamptz + interval '30.1 seconds') AS delivered;
-- It steps 15 seconds back: the next instants are ahead again, nothing fires.
SELECT pg_temp.tick_until_quiet(:'s'::timestamptz + interval '15.1 seconds') AS delivered;
SELECT pg_temp.tick_until_quiet(:'s'::timestamptz + interval '30.9 seconds') AS delivered;
-- Until the clock passes the next instant.
SELECT pg_temp.tick_until_quiet(:'s'::timestamptz + interval '31.1 seconds') AS delivered;

-- The instants (seconds after S) each schedule delivered, and what it skipped
CREATE TEMP TABLE clk AS
SELECT t.schedule, extract(epoch FROM t.run_at - :'s'::timestamptz)::int AS at, t.state, t.last_error
FROM sched.tasks t WHERE t.schedule LIKE 'clk\_%';
SELECT s.name, s.runs, s.missed,
	   (SELECT string_agg(c.at::text, ' ' ORDER BY c.at) FROM clk c
		WHERE c.schedule = s.name AND c.state = 'delivered') AS delivered,
	   (SELECT string_agg(c.at || ': ' || c.last_error, '; ' ORDER BY c.at) FROM clk c
		WHERE c.schedule = s.name AND c.state = 'cancelled') AS skipped,
	   (SELECT c.at FROM clk c WHERE c.schedule = s.name AND c.state = 'pending') AS pending
FROM sched.schedules s ORDER BY s.name;
-- no instant went out twice, and every instant from S on went out or was missed
SELECT s.name,
	   (SELECT count(*) = count(DISTINCT c.at) FROM clk c
		WHERE c.schedule = s.name AND c.state = 'delivered') AS each_once,
	   s.runs + s.missed = extract(epoch FROM s.last_run_at - :'s'::timestamptz) + 1 AS all_accounted
FROM sched.schedules s ORDER BY s.name;
ROLLBACK;

SELECT sched.drop_biz('clk') AS unfinished;
