-- consumer_pace: a type held to what its consumers acknowledge in time
-- (delaysched.consumer_pace, src/core/pace.c), step by step on a pull type,
-- whose claims take what the cap leaves: the hold, the first cap (half of
-- what the consumers hold), growth by acknowledgements in time, the cut by
-- a late one, one cut per round, and the end of the hold.  A notify type,
-- delivered by the drain under the cap, needs the workers' timing:
-- test/t/035_consumer_pace.pl.

\set SHOW_CONTEXT never

SELECT sched.define_biz('pace_pull', delivery => 'pull', ack_timeout => '1 hour');
SELECT count(*) FROM sched.add_many('pace_pull', array_fill(now() - interval '1 minute', ARRAY[12]),
									array_fill('{}'::jsonb, ARRAY[12]));
-- (Once a scanner has announced them, no tick holds them while a claim runs.)
SELECT wait_until($$(SELECT count(*) = 12 FROM sched.task WHERE biz_type = 'pace_pull' AND state = 'r')$$) AS announced;
-- Not held: a claim takes what it asks for, and acknowledgements in time
-- change nothing.
SELECT consumer_cap FROM sched.biz_stats WHERE biz_type = 'pace_pull';
CREATE TEMP TABLE got AS SELECT id FROM sched.claim('pace_pull', 6);
SELECT count(*) FROM got;
SELECT sched.ack(min(id)) FROM got;
DELETE FROM got WHERE id = (SELECT min(id) FROM got);
SELECT consumer_cap FROM sched.biz_stats WHERE biz_type = 'pace_pull';

-- A late acknowledgement: its delivery moved two hours back, its lease still
-- ending an hour from now, so it comes after half of the lease.  The type
-- is held; its cap is set at the next claim, to half of what its consumers
-- hold (2 of the 4 left).
UPDATE sched.task SET delivered_at = delivered_at - interval '2 hours'
WHERE id = (SELECT min(id) FROM got);
SELECT sched.ack(min(id)) FROM got;
DELETE FROM got WHERE id = (SELECT min(id) FROM got);
SELECT consumer_cap FROM sched.biz_stats WHERE biz_type = 'pace_pull';
SELECT count(*) FROM sched.claim('pace_pull', 6);
SELECT consumer_cap FROM sched.biz_stats WHERE biz_type = 'pace_pull';

-- Two acknowledgements in time (one per cap of them): the cap grows by one,
-- and a claim takes the slot it leaves.
SELECT sched.ack_many(ARRAY(SELECT id FROM got ORDER BY id LIMIT 2));
DELETE FROM got WHERE id IN (SELECT id FROM got ORDER BY id LIMIT 2);
SELECT consumer_cap FROM sched.biz_stats WHERE biz_type = 'pace_pull';
INSERT INTO got SELECT id FROM sched.claim('pace_pull', 6);
SELECT count(*) AS awaiting_ack FROM sched.task WHERE biz_type = 'pace_pull' AND state = 'd';

-- A late acknowledgement of a delivery made after the cap was set halves
-- it (noted here as a lease that ran out); a second, of a delivery made before that
-- cut, does not cut again.
SELECT sched._note_expired('pace_pull', clock_timestamp());
SELECT consumer_cap FROM sched.biz_stats WHERE biz_type = 'pace_pull';
SELECT sched._note_expired('pace_pull', now() - interval '1 day');
SELECT consumer_cap FROM sched.biz_stats WHERE biz_type = 'pace_pull';
-- At the cap: a claim takes nothing.
SELECT count(*) FROM sched.claim('pace_pull', 6);

-- The consumers catch up: everything acknowledged, then claimed and
-- acknowledged a cap at a time, the cap growing; the claim that takes the
-- last tasks while they hold at most half the cap ends the hold.
SELECT sched.ack_many(ARRAY(SELECT id FROM got));
TRUNCATE got;
CREATE TEMP TABLE rounds (round int, cap int, claimed int);
DO $$
DECLARE
	v_ids bigint[];
BEGIN
	FOR i IN 1 .. 20 LOOP
		EXIT WHEN NOT EXISTS (SELECT FROM sched.task WHERE biz_type = 'pace_pull');
		v_ids := ARRAY(SELECT id FROM sched.claim('pace_pull', 6));
		INSERT INTO rounds SELECT i, consumer_cap, cardinality(v_ids)
		FROM sched.biz_stats WHERE biz_type = 'pace_pull';
		PERFORM sched.ack_many(v_ids);
	END LOOP;
END
$$;
SELECT * FROM rounds ORDER BY round;
SELECT count(*) AS left_over FROM sched.task WHERE biz_type = 'pace_pull';

-- Work that takes much of the lease is not queueing: acknowledgements 24
-- minutes into an hour's lease, every one, hold nothing (the least time
-- taken is the work's); one 50 minutes in waited 26 minutes more than
-- that, over a quarter of the lease, and holds the type.
SELECT sched.define_biz('pace_long', delivery => 'pull', ack_timeout => '1 hour');
SELECT count(*) FROM sched.add_many('pace_long', array_fill(now() - interval '1 minute', ARRAY[4]),
									array_fill('{}'::jsonb, ARRAY[4]));
SELECT wait_until($$(SELECT count(*) = 4 FROM sched.task WHERE biz_type = 'pace_long' AND state = 'r')$$) AS announced;
CREATE TEMP TABLE long_got AS SELECT id FROM sched.claim('pace_long', 4);
UPDATE sched.task SET delivered_at = delivered_at - interval '24 minutes',
					  lease_until = lease_until - interval '24 minutes'
WHERE id IN (SELECT id FROM long_got);
SELECT sched.ack(id) FROM long_got ORDER BY id LIMIT 3;
SELECT consumer_cap FROM sched.biz_stats WHERE biz_type = 'pace_long';
UPDATE sched.task SET delivered_at = delivered_at - interval '26 minutes',
					  lease_until = lease_until - interval '26 minutes'
WHERE id = (SELECT max(id) FROM long_got);
SELECT sched.ack(max(id)) FROM long_got;
SELECT consumer_cap FROM sched.biz_stats WHERE biz_type = 'pace_long';
SELECT sched.drop_biz('pace_long');

-- Held again, then redefined: a new definition starts without a hold;
-- and dropping a held type ends its hold.
SELECT sched._note_expired('pace_pull', now());
SELECT consumer_cap FROM sched.biz_stats WHERE biz_type = 'pace_pull';
SELECT sched.define_biz('pace_pull', delivery => 'pull', ack_timeout => '2 hours');
SELECT consumer_cap FROM sched.biz_stats WHERE biz_type = 'pace_pull';
SELECT sched._note_expired('pace_pull', now());
SELECT sched.drop_biz('pace_pull');
SELECT sched._consumer_cap('pace_pull');

-- A held notify type's due tasks are parked by the ticks for the drain,
-- which sends them within the cap; another notify type's are delivered by
-- the ticks as ever.  (The ticks are sched._tick's, as of now, while this
-- session holds every range's pointer row so that the workers keep off;
-- rolled back.)
-- The held type's consumers hold four deliveries, which no one
-- acknowledges: the drain keeps the hold (it ends one only once its
-- consumers hold at most half the cap, which is 2 here once set).
SELECT sched.define_biz('pace_n_held', ack_timeout => '1 hour');
SELECT sched.define_biz('pace_n_free', ack_timeout => '1 hour');
SELECT count(*) FROM sched.add_many('pace_n_held', array_fill(now() - interval '1 minute', ARRAY[4]),
									array_fill('{}'::jsonb, ARRAY[4]));
SELECT wait_until($$(SELECT count(*) = 4 FROM sched.task WHERE biz_type = 'pace_n_held' AND state = 'd')$$) AS delivered;
SELECT sched._note_expired('pace_n_held', clock_timestamp());
SELECT biz_type, consumer_cap IS NOT NULL AS held FROM sched.biz_stats WHERE biz_type LIKE 'pace_n_%' ORDER BY 1;
BEGIN;
SELECT count(*) > 0 AS holding FROM (SELECT FROM sched.pointer ORDER BY range_id FOR UPDATE) AS p;
SELECT count(*) FROM sched.add_many('pace_n_held', array_fill(now() - interval '1 minute', ARRAY[3]),
									array_fill('{}'::jsonb, ARRAY[3]));
SELECT count(*) FROM sched.add_many('pace_n_free', array_fill(now() - interval '1 minute', ARRAY[3]),
									array_fill('{}'::jsonb, ARRAY[3]));
SELECT sum(t.delivered) AS delivered
FROM sched.pointer p, LATERAL sched._tick(p.range_id::smallint, clock_timestamp(), 1000, true,
										  3600, 3600, NULL, NULL) AS t;
SELECT biz_type, state, count(*) FROM sched.task WHERE biz_type LIKE 'pace_n_%' GROUP BY 1, 2 ORDER BY 1, 2;
ROLLBACK;
SELECT sched.drop_biz('pace_n_held', cancel_tasks => true), sched.drop_biz('pace_n_free');

-- An ordinary role may not note acknowledgements or start or end a hold,
-- and reads no cap of a type it may not read.
SELECT sched.define_biz('pace_secret', delivery => 'pull');
SELECT sched._note_expired('pace_secret', now());
CREATE ROLE regress_pace_spy NOLOGIN;
GRANT USAGE ON SCHEMA sched TO regress_pace_spy;
SET ROLE regress_pace_spy;
SELECT sched._note_expired('pace_secret', now());
SELECT sched._pace_start('pace_secret', 1000);
SELECT sched._pace_release('pace_secret');
SELECT sched._consumer_cap('pace_secret');
RESET ROLE;
SELECT sched._consumer_cap('pace_secret');
SELECT sched.drop_biz('pace_secret');
REVOKE USAGE ON SCHEMA sched FROM regress_pace_spy;
DROP ROLE regress_pace_spy;
