-------------------------------------------------------------------------------
-- Schedules: recurring firings as ordinary tasks
-------------------------------------------------------------------------------

/*
 * A schedule keeps one pending firing: an ordinary task of its business
 * type whose "schedule" column names it (task_id).  A name is a schedule's
 * within its business type (the key is both): the same name under another
 * type is another schedule, and a firing's schedule is the one of its name
 * in the firing's own type.  So a role that may change the schedules of one
 * type can neither take a name from another type's roles nor learn which
 * names another type uses: sched._schedule answers a schedule of a type the
 * caller may not change as one that does not exist.  When that task is
 * first delivered (sched._fired, called by every path that delivers: the
 * scanner's tick, the drain, sched.claim, the HTTP workers' claim), the
 * next firing is made in the same transaction.  Catch-up after downtime,
 * a pause or a backlog makes a batch of firings at once (catch_up 'all'),
 * or one (the latest missed, 'latest'), or none ('none').
 *
 * Locking.  The functions that change a schedule (define, drop, pause,
 * resume) lock its row FOR UPDATE, then take its pending firings FOR
 * UPDATE SKIP LOCKED: a firing being delivered at that moment is left
 * alone.  A delivering path locks the firing's task row, then
 * (sched._fired) the schedule's row FOR UPDATE SKIP LOCKED: it never
 * waits for a transaction that changes a schedule, and puts the firing
 * off instead (pending again, for the next sweep).  So neither ever waits
 * for the other while holding what the other wants, and a user's open
 * transaction stalls no worker.  A firing that drop or a replacing define
 * stepped over is found again by whichever path delivers it: its schedule
 * is gone, or was defined (defined_at, the clock once the row was locked)
 * after the firing was made (its created_at), and sched._fire_one cancels
 * it (schedule_dropped, schedule_redefined) instead of sending it.  sched.cancel of a pending firing (a user,
 * in sched._finish) does wait for the schedule's row.  sched.drop_biz
 * deletes a type's schedules before it cancels the type's tasks, so that
 * a firing made meanwhile is cancelled too.
 */

/*
 * Make the firings of schedule s from instant p_from on, as of p_now,
 * following its catch-up policy, and say what became of it: the firing
 * whose delivery makes the next (task_id), the earliest firing not yet
 * delivered (next_run_at), and how many firings were skipped (missed).
 * Both NULL: the schedule has ended.  An 'all' batch goes into range
 * p_door, so that one scanner delivers it in order (its sweep: every
 * firing of the batch is behind the range's pointer).
 */
CREATE OR REPLACE FUNCTION sched._materialise(s sched.schedule, p_from timestamptz, p_now timestamptz, p_door smallint,
								   OUT task_id bigint, OUT next_run_at timestamptz, OUT missed bigint)
LANGUAGE plpgsql
AS $$
DECLARE
	v_end timestamptz := coalesce(s.ends_at, 'infinity');
	v_span record;
	v_at timestamptz;
	v_behind timestamptz;
BEGIN
	missed := 0;
	IF p_from IS NULL OR p_from > v_end THEN
		RETURN;
	END IF;
	IF p_from > p_now THEN
		v_at := p_from;
	ELSIF s.catch_up = 'all' THEN
		/*
		 * Firings were missed, all to be delivered.  A batch holds only the
		 * instants behind range p_door's pointer: the sweep delivers those in
		 * order, however many ticks it takes, while the walk goes on from
		 * the pointer.  A batch that also held instants at or after the
		 * pointer would have those delivered before the earlier ones still
		 * waiting for the sweep -- the batch's last among them, whose
		 * delivery makes the next batch.  From the pointer on, one firing
		 * at a time, as the walk delivers them in order.
		 */
		SELECT p.pointer - interval '1 microsecond' INTO v_behind
		FROM sched.pointer p WHERE p.range_id = p_door;
		v_behind := LEAST(p_now, v_end, v_behind);
		IF p_from <= v_behind THEN
			v_span := sched._schedule_span(s.rule, s.time_zone, s.anchor, p_from, v_behind);
			task_id := sched._insert_firings(s, p_from, LEAST(v_span.n, 1000)::int, p_door);
			next_run_at := p_from;
			RETURN;
		END IF;
		v_at := p_from;
	ELSE
		-- Firings were missed: [p_from, now] holds at least p_from.
		v_span := sched._schedule_span(s.rule, s.time_zone, s.anchor, p_from, LEAST(p_now, v_end));
		IF s.catch_up = 'latest' AND v_span.n > 0 THEN
			v_at := v_span.last_at;
			missed := v_span.n - 1;
		ELSE
			missed := v_span.n;
			v_at := sched._schedule_next(s.rule, s.time_zone, s.anchor, p_now);
			IF v_at > v_end THEN
				v_at := NULL;
			END IF;
		END IF;
	END IF;
	IF v_at IS NOT NULL THEN
		task_id := sched._insert(s.biz_type, v_at, s.payload, NULL, s.name, s.command, s.run_as,
								  p_priority => s.priority);
		next_run_at := v_at;
	END IF;
END
$$;
COMMENT ON FUNCTION sched._materialise(sched.schedule, timestamptz, timestamptz, smallint) IS 'internal: make a schedule''s next firing (or catch-up batch) from an instant on';

/*
 * The first p_n firings of schedule s from p_from on (all due already), as
 * tasks of range p_door: their ids are drawn from the sequence values
 * whose door is p_door.  Returns the id of the last.
 */
CREATE OR REPLACE FUNCTION sched._insert_firings(s sched.schedule, p_from timestamptz, p_n int, p_door smallint)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
	v_last bigint;
	v_first timestamptz;
	v_added bigint;
BEGIN
	WITH runs AS MATERIALIZED (
		SELECT r.at, r.k FROM sched._next_runs(s.rule, s.time_zone, p_from - interval '1 microsecond', p_n, s.anchor)
			WITH ORDINALITY AS r(at, k)
	), seqs AS MATERIALIZED (
		SELECT x.v, pg_catalog.row_number() OVER () AS k
		-- Sequence values until p_n of them fall on door p_door.  The
		-- series is in the select list (evaluated a row at a time, so the
		-- LIMIT stops it), not in FROM, where it would be made whole first:
		-- 16 million rows, most of a second per batch.
		FROM (SELECT y.v FROM (SELECT pg_catalog.nextval('sched.task_seq') AS v
							   FROM (SELECT pg_catalog.generate_series(1, p_n * 64 * 256)) g) y
			  WHERE sched._door(y.v * sched._bucket_count()) = p_door
			  LIMIT p_n) x
	), stored AS (
		INSERT INTO sched.task (id, bucket, biz_type, run_at, payload, created_at, schedule, command, run_as,
								priority)
		SELECT seqs.v * sched._bucket_count() + sched._bucket(runs.at), sched._bucket(runs.at),
			   s.biz_type, runs.at, s.payload,
			   -- never before the definition, even after a clock step back:
			   -- an earlier firing is cancelled as an earlier definition's
			   GREATEST(pg_catalog.clock_timestamp(), s.defined_at, s.resumed_at), s.name,
			   s.command, s.run_as, s.priority
		FROM runs JOIN seqs ON seqs.k = runs.k
		RETURNING id, run_at
	)
	SELECT (pg_catalog.array_agg(stored.id ORDER BY stored.run_at DESC))[1], min(stored.run_at),
		   pg_catalog.count(*)
	INTO v_last, v_first, v_added FROM stored;
	PERFORM sched._tally(s.biz_type, 'added', v_added);
	PERFORM sched._wake(v_first, p_door);
	RETURN v_last;
END
$$;
COMMENT ON FUNCTION sched._insert_firings(sched.schedule, timestamptz, int, smallint) IS 'internal: store a catch-up batch of firings in one range';

/*
 * Cancel the pending firings of a schedule that no transaction holds, and
 * return the earliest run_at cancelled; those sched.run_now made too only
 * with p_run_now (a dropped schedule's: a pause or a new definition leaves
 * a run asked for by name to go out).  One held (a worker delivering it,
 * a user's open transaction) is left to sched._fired, which cancels it
 * when it is delivered if the schedule has been dropped or replaced since.
 */
CREATE OR REPLACE FUNCTION sched._cancel_firings(p_biz_type text, p_name text, p_reason text,
								   p_run_now boolean DEFAULT true) RETURNS timestamptz
LANGUAGE plpgsql
AS $$
DECLARE
	g record;
	v_first timestamptz;
BEGIN
	FOR g IN
		WITH held AS (
			SELECT t.bucket, t.id, t.run_at FROM sched.task t
			WHERE t.schedule = p_name AND t.biz_type = p_biz_type AND t.state IN ('p', 'r')
			  AND (p_run_now OR t.run_now IS NOT TRUE)
			FOR UPDATE SKIP LOCKED
		)
		SELECT held.bucket, pg_catalog.array_agg(held.id) AS ids, min(held.run_at) AS first
		FROM held GROUP BY held.bucket
	LOOP
		PERFORM sched._finish(g.bucket, g.ids, 'cancelled', p_reason);
		v_first := LEAST(v_first, g.first);
	END LOOP;
	RETURN v_first;
END
$$;
COMMENT ON FUNCTION sched._cancel_firings(text, text, text, boolean) IS 'internal: cancel the pending firings of a schedule';

/*
 * One firing of schedule p_schedule of type p_biz_type is being delivered
 * for the first time (or was cancelled before delivery, p_cancelled): count
 * it, and make the next.
 * Returns why the firing must not be sent (the schedule is paused, the
 * previous firing is unfinished and overlap is not allowed, or a later
 * firing is due already, catch_up is 'latest' or 'none' and this firing
 * was made ahead of its instant), or NULL to send it.  A firing that is
 * not the schedule's pending one (an earlier one of a catch-up batch, a
 * dead firing retried) only counts.  p_now is the delivering path's clock
 * (a tick's "now"), the clock itself if NULL.  'deferred' means the
 * schedule's row is locked by a transaction changing it: the delivery
 * must be put off (see sched._fired), not skipped.  p_made_at is the
 * firing's created_at: a firing delivered after its schedule was dropped,
 * or made before the schedule's current definition (defined_at), is an
 * old one that drop or define stepped over while another transaction held
 * it; it is cancelled and counted nowhere.
 */
CREATE OR REPLACE FUNCTION sched._fire_one(p_id bigint, p_run_at timestamptz, p_biz_type text, p_schedule text,
								p_door smallint,
								p_cancelled boolean DEFAULT false, p_now timestamptz DEFAULT NULL,
								p_made_at timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
	s sched.schedule;
	v_now timestamptz := coalesce(p_now, pg_catalog.clock_timestamp());
	v_current boolean;
	v_next timestamptz;
	v_skip text;
	v_from timestamptz;
	m record;
BEGIN
	IF p_cancelled THEN
		SELECT * INTO s FROM sched.schedule x WHERE x.name = p_schedule AND x.biz_type = p_biz_type FOR UPDATE;
	ELSE
		-- A delivering path never waits for a schedule that another
		-- transaction is changing (define, pause, drop): the firing waits.
		SELECT * INTO s FROM sched.schedule x WHERE x.name = p_schedule AND x.biz_type = p_biz_type
			FOR UPDATE SKIP LOCKED;
		IF NOT FOUND AND EXISTS (SELECT FROM sched.schedule x WHERE x.name = p_schedule AND x.biz_type = p_biz_type) THEN
			RETURN 'deferred';
		END IF;
	END IF;
	IF NOT FOUND THEN
		IF p_cancelled THEN
			RETURN NULL;
		END IF;
		RETURN 'schedule_dropped: the schedule was dropped';
	END IF;
	v_current := s.task_id IS NOT DISTINCT FROM p_id;
	IF NOT p_cancelled AND NOT v_current AND p_made_at < s.defined_at THEN
		RETURN 'schedule_redefined: the schedule was redefined';
	END IF;
	IF NOT p_cancelled AND NOT v_current AND p_made_at < s.resumed_at THEN
		-- Made before a pause that stepped over it; resume made its instant anew.
		RETURN 'schedule_paused: the schedule was paused';
	END IF;
	IF p_cancelled THEN
		-- Cancelled before delivery (sched.cancel): a missed firing.
		IF NOT v_current OR s.paused THEN
			RETURN NULL;
		END IF;
		v_skip := 'cancelled';
	ELSIF s.paused THEN
		v_skip := 'skipped: the schedule is paused';
	ELSIF NOT s.allow_overlap AND s.last_task_id IS NOT NULL AND s.last_task_id <> p_id THEN
		-- (Asked apart: a search of every partition, planned only when needed.)
		IF EXISTS (SELECT FROM sched.task t
				   WHERE t.bucket = sched._id_bucket(s.last_task_id) AND t.id = s.last_task_id)
		   OR EXISTS (SELECT FROM sched.task t WHERE t.id = s.last_task_id) THEN
			v_skip := pg_catalog.format('skipped: firing %s is unfinished and allow_overlap is false', s.last_task_id);
		END IF;
	END IF;
	IF v_current OR s.paused THEN
		v_next := sched._schedule_next(s.rule, s.time_zone, s.anchor, p_run_at);
	END IF;
	-- Stale: a later instant fell due while this firing waited.  Only a
	-- firing made ahead of its instant is skipped for that; one made late
	-- (the firing that stands for a catch-up under 'latest') goes out
	-- however late, so that a backlog longer than the period cannot skip
	-- every firing of the schedule.
	IF v_skip IS NULL AND v_current AND s.catch_up <> 'all'
	   AND v_next <= LEAST(v_now, coalesce(s.ends_at, 'infinity'))
	   AND p_run_at > s.task_made_at THEN
		v_skip := pg_catalog.format('skipped: a later firing was due already (catch_up %s)', s.catch_up);
	END IF;

	IF s.paused THEN
		-- sched.resume_schedule starts from the earliest firing not sent.
		UPDATE sched.schedule x SET next_run_at = LEAST(x.next_run_at, p_run_at), task_id = NULL,
				updated_at = v_now
			WHERE x.name = s.name AND x.biz_type = s.biz_type;
		RETURN v_skip;
	END IF;

	IF v_skip IS NULL THEN
		-- (A firing sent again after its HTTP worker died is not counted.)
		IF v_current OR p_run_at > coalesce(s.last_run_at, '-infinity') THEN
			s.runs := s.runs + 1;
		END IF;
		s.last_run_at := GREATEST(s.last_run_at, p_run_at);
		s.last_task_id := p_id;
	ELSIF v_skip LIKE 'skipped: a later%' THEN
		NULL;					-- counted with the firings it is late for
	ELSE
		s.missed := s.missed + 1;
	END IF;

	IF v_current THEN
		v_from := CASE WHEN v_skip LIKE 'skipped: a later%' THEN p_run_at ELSE v_next END;
		IF v_from <= s.last_run_at THEN
			-- The firing was moved back (sched.reschedule) behind instants
			-- delivered already: go on after them, never make one again.
			v_from := sched._schedule_next(s.rule, s.time_zone, s.anchor, s.last_run_at);
		END IF;
		m := sched._materialise(s, v_from, v_now, p_door);
		s.task_id := m.task_id;
		s.task_made_at := v_now;
		s.next_run_at := m.next_run_at;
		s.missed := s.missed + m.missed;
	ELSIF v_skip IS NULL AND p_run_at >= s.next_run_at THEN
		-- An earlier firing of a catch-up batch: the next is the one after.
		s.next_run_at := sched._schedule_next(s.rule, s.time_zone, s.anchor, p_run_at);
	END IF;
	UPDATE sched.schedule x SET runs = s.runs, missed = s.missed, last_run_at = s.last_run_at,
			last_task_id = s.last_task_id, task_id = s.task_id, task_made_at = s.task_made_at,
			next_run_at = s.next_run_at,
			updated_at = v_now
		WHERE x.name = s.name AND x.biz_type = s.biz_type;
	RETURN v_skip;
END
$$;
COMMENT ON FUNCTION sched._fire_one(bigint, timestamptz, text, text, smallint, boolean, timestamptz, timestamptz) IS 'internal: count a firing of a schedule being delivered and make the next; returns why it must not be sent, or NULL';

/*
 * The firings among tasks being delivered for the first time: make each
 * schedule's next firing, count them, and cancel those that must not be
 * sent (with the reason as last_error).  A firing whose schedule another
 * transaction is changing is not waited for but put off: pending again,
 * found by the next sweep.  Returns the ids not to send, cancelled or put
 * off.  Every path that delivers calls it in the delivering transaction,
 * after locking the tasks, with its clock (p_now; NULL: the clock itself),
 * and each task's type and schedule (NULL: not a firing, or not one to
 * count).
 *
 * The common case is set-based, whatever the number of firings: a
 * schedule's pending firing delivered before its next instant is due, the
 * schedule neither paused nor forbidding overlap, the next instant within
 * ends_at, and no other firing of the schedule in the call.  The next
 * firings are stored with one INSERT and the schedules counted with one
 * UPDATE.  Every other firing -- a skip, a catch-up, an ended schedule, a
 * firing that is not the pending one, and the pending one delivered with
 * earlier firings of its schedule (a catch-up batch claimed at once) --
 * goes through sched._fire_one, in run_at order: each is counted, and the
 * pending one last, so that last_task_id and last_run_at end at it.
 */
CREATE OR REPLACE FUNCTION sched._fired(p_ids bigint[], p_buckets smallint[], p_run_ats timestamptz[], p_biz_types text[],
							 p_schedules text[], p_now timestamptz DEFAULT NULL)
RETURNS bigint[]
LANGUAGE plpgsql
-- Called once per delivery statement, thousands of times a second in a
-- catch-up: left to choose, PostgreSQL plans its statements afresh at every
-- call (about 1.2 ms of 1.4), where a generic plan serves as well.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
	v_now timestamptz := coalesce(p_now, pg_catalog.clock_timestamp());
	v_done bigint[];
	v_first timestamptz;
	v_far timestamptz;
	v_made_types text[];
	r record;
	v_reason text;
	v_made_at timestamptz;
	v_run_now boolean;
	v_skipped bigint[] := '{}';
BEGIN
	WITH fired AS MATERIALIZED (
		SELECT u.id, u.run_at, u.biz_type, u.schedule,
			   pg_catalog.count(*) OVER (PARTITION BY u.schedule, u.biz_type) AS n
		FROM unnest(p_ids, p_run_ats, p_biz_types, p_schedules) AS u(id, run_at, biz_type, schedule)
		WHERE u.schedule IS NOT NULL
	), locked AS MATERIALIZED (
		SELECT x.name, x.biz_type, x.payload, x.task_id, x.paused, x.allow_overlap, x.ends_at,
			   x.rule, x.time_zone, x.anchor, x.command, x.run_as, x.priority
		FROM sched.schedule x WHERE (x.name, x.biz_type) IN (SELECT fired.schedule, fired.biz_type FROM fired)
		ORDER BY x.name, x.biz_type
		FOR UPDATE SKIP LOCKED
	), simple AS MATERIALIZED (
		SELECT fired.id AS fired_id, fired.run_at AS fired_at, l.name, l.biz_type, l.payload, l.command,
			   l.run_as, l.priority, n.next_at,
			   sched._bucket(n.next_at) AS bucket
		FROM fired
		JOIN locked l ON l.name = fired.schedule AND l.biz_type = fired.biz_type AND l.task_id = fired.id,
		LATERAL (SELECT sched._schedule_next(l.rule, l.time_zone, l.anchor, fired.run_at) AS next_at) n
		WHERE fired.n = 1 AND NOT l.paused AND l.allow_overlap
		  AND n.next_at > v_now AND n.next_at <= coalesce(l.ends_at, 'infinity')
	), made AS MATERIALIZED (
		SELECT simple.*, sched._new_id(simple.bucket) AS id FROM simple
	), stored AS (
		INSERT INTO sched.task (id, bucket, biz_type, run_at, payload, created_at, schedule, command, run_as,
								priority)
		SELECT made.id, made.bucket, made.biz_type, made.next_at, made.payload, pg_catalog.clock_timestamp(), made.name,
			   made.command, made.run_as, made.priority
		FROM made
	), counted AS (
		UPDATE sched.schedule x SET runs = x.runs + 1, last_run_at = GREATEST(x.last_run_at, made.fired_at),
				last_task_id = made.fired_id, task_id = made.id, task_made_at = v_now,
				next_run_at = made.next_at, updated_at = v_now
		FROM made WHERE x.name = made.name AND x.biz_type = made.biz_type
	)
	SELECT pg_catalog.array_agg(made.fired_id), min(made.next_at),
		   min(made.next_at) FILTER (WHERE made.next_at > pg_catalog.clock_timestamp() + interval '1 second'),
		   pg_catalog.array_agg(made.biz_type)
	INTO v_done, v_first, v_far, v_made_types
	FROM made;
	PERFORM sched._tally(m.biz_type, 'added', m.n)
		FROM (SELECT u.biz_type, pg_catalog.count(*) AS n FROM unnest(v_made_types) AS u(biz_type)
			  GROUP BY u.biz_type) m;
	IF v_first IS NOT NULL THEN
		-- As sched.add_many: the new ids go through every door.
		PERFORM sched._wake(v_first);
		IF v_far IS NOT NULL THEN
			PERFORM sched._wake(v_far, NULL, true);
		END IF;
	END IF;

	FOR r IN
		SELECT u.id, u.bucket, u.run_at, u.biz_type, u.schedule
		FROM unnest(p_ids, p_buckets, p_run_ats, p_biz_types, p_schedules) AS u(id, bucket, run_at, biz_type, schedule)
		WHERE u.schedule IS NOT NULL AND u.id <> ALL (coalesce(v_done, '{}'))
		ORDER BY u.run_at, u.id
	LOOP
		-- (Apart, so that the bucket is a parameter: the generic plan then
		-- opens one partition, not all of them.)
		SELECT t.created_at, t.run_now INTO v_made_at, v_run_now FROM sched.task t WHERE t.bucket = r.bucket AND t.id = r.id;
		-- A run sched.run_now asked for is no instant of the rule: it goes
		-- out as it is, counted nowhere, paused schedule or not.
		CONTINUE WHEN v_run_now;
		v_reason := sched._fire_one(r.id, r.run_at, r.biz_type, r.schedule, sched._door(r.id), false, v_now, v_made_at);
		IF v_reason = 'deferred' THEN
			-- Pending again as before this delivery, for a later sweep.
			PERFORM sched._unlease(ARRAY[r.bucket], ARRAY[r.id], 'deferred');
			v_skipped := v_skipped || r.id;
		ELSIF v_reason IS NOT NULL THEN
			PERFORM sched._finish(r.bucket, ARRAY[r.id], 'cancelled', v_reason);
			v_skipped := v_skipped || r.id;
		END IF;
	END LOOP;
	RETURN v_skipped;
END
$$;
COMMENT ON FUNCTION sched._fired(bigint[], smallint[], timestamptz[], text[], text[], timestamptz) IS 'internal: make the next firings of the schedules whose firings are being delivered; returns the ids not to send';

/*
 * The schedule named p_name in business type p_biz_type, locked; or, with
 * p_biz_type NULL, the one schedule of that name among the types the caller
 * may change (every type, for administrators).  None the caller may change:
 * with p_missing_ok a row of NULLs, else undefined_object; a schedule of
 * a type the caller may not change is answered exactly as one that does
 * not exist, so that names tell nothing across types.  Several: an error
 * naming the caller's types that have one (ambiguous_parameter).  A caller
 * naming a type it may not schedule at all is refused as by every function
 * of that type, whatever the name, which tells nothing about schedules.
 */
CREATE OR REPLACE FUNCTION sched._schedule(p_name text, p_biz_type text, p_missing_ok boolean)
RETURNS sched.schedule
LANGUAGE plpgsql
AS $$
DECLARE
	s sched.schedule;
	v_types text[] := sched._granted_types('schedule');
	v_found text[];
BEGIN
	PERFORM sched._require(p_name, 'name');
	IF p_biz_type IS NOT NULL THEN
		IF v_types IS NOT NULL THEN
			PERFORM sched._require_grant(p_biz_type, 'schedule');
		END IF;
	ELSE
		SELECT pg_catalog.array_agg(x.biz_type ORDER BY x.biz_type) INTO v_found
		FROM sched.schedule x
		WHERE x.name = p_name AND (v_types IS NULL OR x.biz_type = ANY (v_types));
		IF pg_catalog.cardinality(v_found) > 1 THEN
			RAISE EXCEPTION 'schedule name "%" is ambiguous', sched._clip(p_name)
				USING ERRCODE = 'ambiguous_parameter',
					  DETAIL = pg_catalog.format('Business types with a schedule of that name: %s.',
												 pg_catalog.array_to_string(v_found, ', ')),
					  HINT = 'Pass biz_type to name one of them.';
		END IF;
		p_biz_type := v_found[1];
	END IF;
	-- (Gone since it was counted: not there, as if never found.)
	SELECT * INTO s FROM sched.schedule x WHERE x.name = p_name AND x.biz_type = p_biz_type FOR UPDATE;
	IF NOT FOUND AND NOT p_missing_ok THEN
		RAISE EXCEPTION 'schedule "%" does not exist', sched._clip(p_name)
			USING ERRCODE = 'undefined_object',
				  HINT = 'The schedules are listed in sched.schedules.';
	END IF;
	RETURN s;
END
$$;
COMMENT ON FUNCTION sched._schedule(text, text, boolean) IS 'internal: look up and lock a schedule the caller may change, by name and type or by name alone; one of another type is answered as none';

CREATE OR REPLACE FUNCTION sched.define_schedule(name text, biz_type text, schedule text, payload jsonb DEFAULT '{}',
									  time_zone text DEFAULT 'UTC', catch_up text DEFAULT 'latest',
									  starts_at timestamptz DEFAULT NULL, ends_at timestamptz DEFAULT NULL,
									  allow_overlap boolean DEFAULT true, command text DEFAULT NULL,
									  priority int DEFAULT 0)
RETURNS timestamptz
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
	v_now timestamptz := clock_timestamp();
	v_old sched.schedule;
	v_anchor timestamptz;
	v_first timestamptz;
	v_task bigint;
	v_paused boolean := false;
	v_defined timestamptz;
	v_run_as regrole;
BEGIN
	PERFORM sched._check_name(name, 'schedule name', 'Use a lowercase identifier such as ''daily_report''.');
	-- An sql type's firings run a command, as the role defining the
	-- schedule; no other type's have one.
	IF (sched._biz(biz_type)).delivery = 'sql' THEN
		PERFORM sched._check_command(command,
			'A schedule of an sql type runs a command: define_schedule(..., command => ''CALL nightly()'').');
		v_run_as := sched._caller()::regrole;
	ELSIF command IS NOT NULL THEN
		RAISE EXCEPTION 'command is for schedules of an sql type only'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = pg_catalog.format('Business type "%s" delivers by %s; its firings carry the payload.',
										   biz_type, (sched._biz(biz_type)).delivery);
	END IF;
	IF NOT sched._caller_is_admin() THEN
		PERFORM sched._require_grant(biz_type, 'schedule');
	END IF;
	PERFORM sched._require(schedule, 'schedule');
	PERFORM sched._require(time_zone, 'time_zone');
	PERFORM sched._check_schedule(schedule, time_zone);
	PERFORM sched._require(catch_up, 'catch_up');
	IF catch_up NOT IN ('latest', 'all', 'none') THEN
		RAISE EXCEPTION 'invalid catch_up "%"', sched._clip(catch_up)
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'catch_up is ''latest'' (missed firings collapse into one), ''all'' (every missed firing is delivered) or ''none'' (missed firings are skipped).';
	END IF;
	PERFORM sched._require(allow_overlap, 'allow_overlap');
	IF NOT isfinite(starts_at) THEN
		RAISE EXCEPTION 'starts_at must be a finite timestamp, not %', starts_at
			USING ERRCODE = 'datetime_field_overflow',
				  HINT = 'Leave starts_at NULL to start now.';
	END IF;
	IF NOT isfinite(ends_at) THEN
		RAISE EXCEPTION 'ends_at must be a finite timestamp, not %', ends_at
			USING ERRCODE = 'datetime_field_overflow',
				  HINT = 'Leave ends_at NULL for a schedule without end.';
	END IF;
	PERFORM sched._check_task(coalesce(starts_at, v_now), payload, NULL);
	PERFORM sched._check_key(NULL, priority);
	IF ends_at < starts_at THEN
		RAISE EXCEPTION 'ends_at (%) must not be before starts_at (%)', ends_at, starts_at
			USING ERRCODE = 'invalid_parameter_value';
	END IF;

	-- The same name under another type is another schedule: nothing of it
	-- is looked at, so that neither is in the way of the other.
	SELECT * INTO v_old FROM sched.schedule x
		WHERE x.name = define_schedule.name AND x.biz_type = define_schedule.biz_type FOR UPDATE;
	-- Taken once the row is locked: every firing of an earlier definition
	-- was made before it, every one of this definition after.
	v_defined := clock_timestamp();
	IF FOUND THEN
		v_paused := v_old.paused;
		-- The old definition's firings go; a replacement starts afresh.
		UPDATE sched.schedule x SET task_id = NULL WHERE x.name = v_old.name AND x.biz_type = v_old.biz_type;
		PERFORM sched._cancel_firings(v_old.biz_type, v_old.name, 'schedule_redefined: the schedule was redefined', false);
	END IF;

	-- Without starts_at, the rule counts from the second of the definition
	-- and fires strictly after it; with it, at or after starts_at (and not
	-- in the past).
	v_anchor := coalesce(starts_at, date_trunc('second', v_now));
	v_first := sched._schedule_next(schedule, time_zone, v_anchor,
		CASE WHEN starts_at IS NULL THEN v_now
			 ELSE GREATEST(starts_at, v_now) - interval '1 microsecond' END);
	IF v_first > ends_at THEN
		v_first := NULL;
	END IF;
	IF v_first IS NOT NULL AND NOT v_paused THEN
		v_task := sched._insert(biz_type, v_first, payload, NULL, name, command, v_run_as,
								p_priority => priority);
	END IF;

	INSERT INTO sched.schedule AS x (name, biz_type, rule, time_zone, payload, catch_up, allow_overlap,
									 paused, starts_at, ends_at, anchor, next_run_at, task_id, task_made_at,
									 defined_at, command, run_as, priority)
		VALUES (name, biz_type, schedule, time_zone, payload, catch_up, allow_overlap,
				v_paused, starts_at, ends_at, v_anchor, v_first, v_task, v_now, v_defined, command, v_run_as,
				priority)
	ON CONFLICT ON CONSTRAINT schedule_pkey DO UPDATE
		SET rule = excluded.rule, time_zone = excluded.time_zone,
			payload = excluded.payload, catch_up = excluded.catch_up,
			allow_overlap = excluded.allow_overlap, starts_at = excluded.starts_at,
			ends_at = excluded.ends_at, anchor = excluded.anchor,
			next_run_at = excluded.next_run_at, task_id = excluded.task_id,
			task_made_at = excluded.task_made_at, defined_at = excluded.defined_at,
			command = excluded.command, run_as = excluded.run_as, priority = excluded.priority,
			updated_at = now();
	RETURN v_first;
END
$$;
COMMENT ON FUNCTION sched.define_schedule(text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean, text, int) IS 'create or replace a recurring schedule whose firings are tasks of a business type (for an sql type, runs of command); returns its next firing time';

/*
 * One run of a schedule now, beside its own firings, which stay as they
 * are: a task of its type due at once, with its payload (and command, run
 * as the role that defined the schedule), naming the schedule.  Also for a
 * paused schedule.  Its schedule does not count it (runs, last_run_at):
 * it is no instant of the rule.  Dropping the schedule cancels it while
 * it is pending; pausing or redefining it does not.
 */
CREATE OR REPLACE FUNCTION sched.run_now(schedule text, biz_type text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	s sched.schedule := sched._schedule(schedule, biz_type, false);
	v_now timestamptz := clock_timestamp();
BEGIN
	PERFORM sched._check_task(v_now, s.payload, NULL);
	RETURN sched._insert(s.biz_type, v_now, s.payload, NULL, s.name, s.command, s.run_as, true,
						 p_priority => s.priority);
END
$$;
COMMENT ON FUNCTION sched.run_now(text, text) IS 'add one firing of a schedule due at once, leaving its own firings as they are (biz_type: of that type; NULL: the only one of that name the caller may change); returns the task id';

/*
 * drop_schedule, pause_schedule and resume_schedule name a schedule by its
 * name and type, or by its name alone when it is the only one of that name
 * among the types the caller may change (sched._schedule).
 */
CREATE OR REPLACE FUNCTION sched.drop_schedule(name text, biz_type text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	s sched.schedule := sched._schedule(name, biz_type, true);
BEGIN
	IF s.name IS NULL THEN
		RETURN false;
	END IF;
	DELETE FROM sched.schedule x WHERE x.name = s.name AND x.biz_type = s.biz_type;
	PERFORM sched._cancel_firings(s.biz_type, s.name, 'schedule_dropped: the schedule was dropped');
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.drop_schedule(text, text) IS 'drop a schedule and cancel its pending firing (biz_type: of that type; NULL: the only one of that name the caller may change); false if there was no such schedule';

CREATE OR REPLACE FUNCTION sched.pause_schedule(name text, biz_type text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	s sched.schedule := sched._schedule(name, biz_type, false);
	v_first timestamptz;
BEGIN
	IF s.paused THEN
		RETURN false;
	END IF;
	UPDATE sched.schedule x SET paused = true, task_id = NULL, updated_at = now()
		WHERE x.name = s.name AND x.biz_type = s.biz_type;
	v_first := sched._cancel_firings(s.biz_type, s.name, 'schedule_paused: the schedule was paused', false);
	UPDATE sched.schedule x SET next_run_at = LEAST(x.next_run_at, v_first)
		WHERE x.name = s.name AND x.biz_type = s.biz_type;
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.pause_schedule(text, text) IS 'stop a schedule''s firings until sched.resume_schedule (biz_type: of that type; NULL: the only one of that name the caller may change); false if it was paused already';

CREATE OR REPLACE FUNCTION sched.resume_schedule(name text, biz_type text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	s sched.schedule := sched._schedule(name, biz_type, false);
	m record;
BEGIN
	IF NOT s.paused THEN
		RETURN false;
	END IF;
	-- A pending firing that pause_schedule stepped over (another transaction
	-- held it) is older than resumed_at: sched._fire_one cancels it when it
	-- is delivered, since the firings made here stand for its instant.
	s.resumed_at := clock_timestamp();
	UPDATE sched.schedule x SET resumed_at = s.resumed_at WHERE x.name = s.name AND x.biz_type = s.biz_type;
	-- The firings missed while paused follow the catch-up policy.
	m := sched._materialise(s, s.next_run_at, clock_timestamp(),
							sched._door((hashtext(s.name)::bigint & 2147483647) * sched._bucket_count()));
	UPDATE sched.schedule x SET paused = false, task_id = m.task_id, task_made_at = clock_timestamp(),
			next_run_at = m.next_run_at,
			missed = x.missed + m.missed, updated_at = now()
		WHERE x.name = s.name AND x.biz_type = s.biz_type;
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.resume_schedule(text, text) IS 'let a paused schedule fire again, catching up as its catch_up says (biz_type: of that type; NULL: the only one of that name the caller may change); false if it was not paused';
