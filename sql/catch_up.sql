-- catch_up: a backlog of a per-second schedule under catch_up 'all'.  A
-- tick looks at a limited number of late seconds; one that leaves late
-- firings behind asks to be swept again at once, not at the next regular
-- sweep a second later (which replayed about 64 firings a second).  A
-- catch-up batch holds only instants behind its range's pointer, so that
-- the sweep delivers the schedule's firings in order, the batch's last
-- (whose delivery makes the next batch) last.  Every instant is delivered
-- once and counted once.
--
-- The ticks are the scanner's (sched._tick, as of a fixed "now"); this
-- session holds every range's pointer row, so the real workers keep off,
-- and rolls everything back at the end.
SET timezone = 'UTC';
SELECT sched.define_biz('cub', ack_timeout => '1 hour');

BEGIN;
SELECT count(*) > 0 AS holding FROM (SELECT FROM sched.pointer ORDER BY range_id FOR UPDATE) AS p;
SELECT date_trunc('second', clock_timestamp()) AS s \gset
SELECT sched.define_schedule('cub_all', 'cub', 'every 1 second', catch_up => 'all',
							 starts_at => :'s'::timestamptz - interval '1 hour') > :'s' AS ahead;
-- Its pending firing moved 300 seconds back: delivering it makes the
-- firings of the 300 instants since, at once.
SELECT sched.reschedule(t.id, :'s'::timestamptz - interval '300 seconds')
FROM sched.tasks t WHERE t.schedule = 'cub_all' AND t.state = 'pending';
SELECT sched._door(t.id) AS door FROM sched.tasks t WHERE t.schedule = 'cub_all' \gset

-- The tick that delivers it makes the batch: the instants behind the
-- range's pointer (a tick as of S + 0.5 s), all in the range.
SELECT t.delivered > 0 AS delivered FROM sched._tick(:door::smallint, :'s'::timestamptz + interval '0.5 seconds',
									 1000, true, 3600, 3600, NULL, NULL) AS t;
SELECT bool_and(t.run_at < p.pointer) AS all_behind_the_pointer, bool_and(sched._door(t.id) = :door) AS one_range
FROM sched.tasks t, sched.pointer p
WHERE t.schedule = 'cub_all' AND t.state = 'pending' AND p.range_id = :door;

-- Each tick of the range delivers some of them and, while late firings
-- are left, asks to be swept again at once (next_sweep = its now).
CREATE TEMP TABLE ticks (n int, delivered bigint, again_at_once boolean, late_left bigint);
SELECT set_config('cub.door', :'door', true) IS NOT NULL AS door_set,
	   set_config('cub.at', (:'s'::timestamptz + interval '0.5 seconds')::text, true) IS NOT NULL AS at_set;
DO $$
DECLARE
	v_at timestamptz := current_setting('cub.at')::timestamptz;
	v_door smallint := current_setting('cub.door')::smallint;
	t record;
BEGIN
	FOR i IN 1 .. 50 LOOP
		SELECT * INTO t FROM sched._tick(v_door, v_at, 1000, true, 3600, 3600, NULL, NULL);
		INSERT INTO ticks
			SELECT i, t.delivered, t.next_sweep <= v_at,
				   (SELECT count(*) FROM sched.tasks x, sched.pointer p
					WHERE x.schedule = 'cub_all' AND x.state = 'pending' AND sched._door(x.id) = v_door
					  AND p.range_id = v_door AND x.run_at < p.pointer);
		EXIT WHEN t.delivered = 0;
	END LOOP;
END
$$;
SELECT count(*) > 2 AS several_ticks, bool_and(again_at_once = (late_left > 0)) AS again_at_once_while_late,
	   bool_or(again_at_once) AS some_asked, bool_and(late_left = 0) FILTER (WHERE n = (SELECT max(n) FROM ticks)) AS caught_up
FROM ticks;

-- The instants from the pointer on went one at a time: the last of them
-- is delivered by a tick of its range.
SELECT sum(t.delivered) >= 0 AS ticked
FROM sched.pointer p, LATERAL sched._tick(p.range_id::smallint, :'s'::timestamptz + interval '0.5 seconds',
										  1000, true, 3600, 3600, NULL, NULL) AS t;
SELECT count(*) AS pending_due FROM sched.tasks t
WHERE t.schedule = 'cub_all' AND t.state = 'pending' AND t.run_at <= :'s'::timestamptz;

-- Every instant from S - 300 s to S went out once, and was counted once.
SELECT count(*) AS sent, count(DISTINCT t.run_at) AS instants,
	   min(t.run_at) = :'s'::timestamptz - interval '300 seconds' AS from_the_first,
	   max(t.run_at) = :'s'::timestamptz AS to_now
FROM sched.tasks t WHERE t.schedule = 'cub_all' AND t.state = 'delivered';
SELECT s.runs, s.missed, s.next_run_at = :'s'::timestamptz + interval '1 second' AS next_is_ahead,
	   s.last_run_at = :'s'::timestamptz AS last_is_now
FROM sched.schedules s WHERE s.name = 'cub_all';

-- The pending firing (S + 1 s) moved back 10 seconds, behind instants
-- delivered already: it goes out (as moved), and the schedule goes on
-- after the last instant delivered, S, making none of those again.
SELECT sched.reschedule(t.id, :'s'::timestamptz - interval '10 seconds') AS moved_back
FROM sched.tasks t WHERE t.schedule = 'cub_all' AND t.state = 'pending';
SELECT sum(t.delivered) AS delivered
FROM sched.pointer p, LATERAL sched._tick(p.range_id::smallint, :'s'::timestamptz + interval '0.5 seconds',
										  1000, true, 3600, 3600, NULL, NULL) AS t;
SELECT count(*) FILTER (WHERE t.state = 'delivered') AS sent, count(DISTINCT t.run_at) AS instants,
	   max(t.run_at) FILTER (WHERE t.state = 'pending') = :'s'::timestamptz + interval '1 second' AS next_after_s
FROM sched.tasks t WHERE t.schedule = 'cub_all';
ROLLBACK;

SELECT sched.drop_biz('cub') AS unfinished;
