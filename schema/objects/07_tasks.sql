-------------------------------------------------------------------------------
-- Public functions: tasks
-------------------------------------------------------------------------------

/*
 * With a dedupe key an unfinished task holds already, on_duplicate says
 * what happens (sched._insert): 'keep' the holder as it is, 'replace' its
 * run_at and payload while it is pending, or 'debounce' (the same, its
 * run_at no later than max_wait after its first add).  A holder already
 * delivered is never changed: a new task takes the key (sched._replace).
 * A key (a tenant, a user) gives the task its turn among the type's keys,
 * and a priority its place among the type's due tasks (sched._pick).
 */
CREATE OR REPLACE FUNCTION sched.add(biz_type text, run_at timestamptz, payload jsonb DEFAULT '{}',
						  dedupe_key text DEFAULT NULL, on_duplicate text DEFAULT 'keep',
						  max_wait interval DEFAULT NULL, key text DEFAULT NULL,
						  priority int DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	b sched.biz := sched._biz(biz_type);
BEGIN
	PERFORM sched._check_not_sql(b);
	IF NOT sched._caller_is_admin() THEN
		PERFORM sched._require_grant(biz_type, 'schedule');
	END IF;
	PERFORM sched._check_task(run_at, payload, dedupe_key);
	-- (The defaults ask no check: an add costs what it did.  A key or a
	-- priority is checked by the function that says what is wrong only
	-- when the quick test finds something.)
	IF on_duplicate IS DISTINCT FROM 'keep' OR max_wait IS NOT NULL THEN
		PERFORM sched._check_on_duplicate(on_duplicate, max_wait);
	END IF;
	IF key = '' OR pg_catalog.octet_length(key) > 512 OR priority IS NULL
	   OR priority NOT BETWEEN -32768 AND 32767 THEN
		PERFORM sched._check_key(key, priority);
	END IF;
	-- The first task of the type with a key marks it keyed.
	IF key IS NOT NULL AND NOT b.keyed THEN
		PERFORM sched._note_keyed(b.name);
	END IF;
	RETURN sched._insert(biz_type, run_at, payload, dedupe_key,
						 p_on_duplicate => on_duplicate, p_max_wait => max_wait,
						 p_key => key, p_priority => priority);
END
$$;
COMMENT ON FUNCTION sched.add(text, timestamptz, jsonb, text, text, interval, text, int) IS 'schedule a task for run_at; returns its id (with a dedupe key already held: the holder''s, kept, replaced or debounced as on_duplicate says)';

CREATE OR REPLACE FUNCTION sched.add_after(biz_type text, delay interval, payload jsonb DEFAULT '{}',
								dedupe_key text DEFAULT NULL, on_duplicate text DEFAULT 'keep',
								max_wait interval DEFAULT NULL, key text DEFAULT NULL,
								priority int DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM sched._require(delay, 'delay');
	IF delay < interval '0' THEN
		RAISE EXCEPTION 'delay must not be negative, not %', delay
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Use a delay of zero to deliver at once.';
	END IF;
	RETURN sched.add(biz_type, clock_timestamp() + delay, payload, dedupe_key, on_duplicate, max_wait,
					 key, priority);
END
$$;
COMMENT ON FUNCTION sched.add_after(text, interval, jsonb, text, text, interval, text, int) IS 'schedule a task for delay from now (the clock, not the transaction start); returns its id';

/*
 * A one-shot SQL job: command runs at run_at in this database, by an SQL
 * worker, as the role calling this function (sched._caller(): the session's
 * role, also through a SECURITY DEFINER function of the user's), with that
 * role's privileges and no more.  Its payload is '{}'.
 */
CREATE OR REPLACE FUNCTION sched.add_sql(biz_type text, run_at timestamptz, command text,
							  dedupe_key text DEFAULT NULL, key text DEFAULT NULL,
							  priority int DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	b sched.biz := sched._biz(biz_type);
BEGIN
	IF NOT sched._caller_is_admin() THEN
		PERFORM sched._require_grant(b.name, 'schedule');
	END IF;
	IF b.delivery <> 'sql' THEN
		RAISE EXCEPTION 'business type "%" does not run sql commands', b.name
			USING ERRCODE = 'wrong_object_type',
				  DETAIL = pg_catalog.format('It delivers by %s.', b.delivery),
				  HINT = 'Add its tasks with sched.add, or define a type with delivery => ''sql'' for jobs.';
	END IF;
	PERFORM sched._check_task(run_at, '{}', dedupe_key);
	PERFORM sched._check_command(command, 'Pass the SQL to run, for example ''CALL close_order(42)''.');
	PERFORM sched._check_key(key, priority);
	IF key IS NOT NULL AND NOT b.keyed THEN
		PERFORM sched._note_keyed(b.name);
	END IF;
	RETURN sched._insert(b.name, run_at, '{}', dedupe_key, NULL, command, sched._caller()::regrole,
						 p_key => key, p_priority => priority);
END
$$;
COMMENT ON FUNCTION sched.add_sql(text, timestamptz, text, text, text, int) IS 'schedule a one-shot SQL job: command runs at run_at, in this database, as the calling role; returns its id';

CREATE OR REPLACE FUNCTION sched.add_many(biz_type text, run_ats timestamptz[], payloads jsonb[] DEFAULT NULL,
							   dedupe_keys text[] DEFAULT NULL, keys text[] DEFAULT NULL,
							   priorities int[] DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n int;
	i int;
	v_min timestamptz;
	v_far timestamptz;
	-- Read once: in the check below it was read again for every element.
	v_max_payload bigint := pg_catalog.pg_size_bytes(pg_catalog.current_setting('delaysched.max_payload_size'));
BEGIN
	PERFORM sched._check_not_sql(sched._biz(biz_type));
	IF NOT sched._caller_is_admin() THEN
		PERFORM sched._require_grant(biz_type, 'schedule');
	END IF;
	PERFORM sched._require(run_ats, 'run_ats');
	PERFORM sched._check_array(run_ats, 'run_ats');
	PERFORM sched._check_array(payloads, 'payloads');
	PERFORM sched._check_array(dedupe_keys, 'dedupe_keys');
	PERFORM sched._check_array(keys, 'keys');
	PERFORM sched._check_array(priorities, 'priorities');
	n := coalesce(cardinality(run_ats), 0);
	IF payloads IS NOT NULL AND cardinality(payloads) <> n THEN
		RAISE EXCEPTION 'payloads has % elements but run_ats has %', cardinality(payloads), n
			USING ERRCODE = 'array_subscript_error';
	END IF;
	IF dedupe_keys IS NOT NULL AND cardinality(dedupe_keys) <> n THEN
		RAISE EXCEPTION 'dedupe_keys has % elements but run_ats has %', cardinality(dedupe_keys), n
			USING ERRCODE = 'array_subscript_error';
	END IF;
	IF keys IS NOT NULL AND cardinality(keys) <> n THEN
		RAISE EXCEPTION 'keys has % elements but run_ats has %', cardinality(keys), n
			USING ERRCODE = 'array_subscript_error';
	END IF;
	IF priorities IS NOT NULL AND cardinality(priorities) <> n THEN
		RAISE EXCEPTION 'priorities has % elements but run_ats has %', cardinality(priorities), n
			USING ERRCODE = 'array_subscript_error';
	END IF;
	IF n = 0 THEN
		RETURN;
	END IF;

	-- Validate everything before storing anything: one statement looks for
	-- any element sched._check_task could refuse (the same tests), and only
	-- then does the loop find which and raise its error, as sched.add would.
	-- (A call of _check_task per element, each a statement of its own, took
	-- a fifth of a 1,000-task batch.)
	IF NOT sched._database_listed() OR EXISTS (
		SELECT FROM unnest(run_ats, payloads, dedupe_keys) AS u(run_at, payload, dedupe_key)
		WHERE u.run_at IS NULL OR NOT pg_catalog.isfinite(u.run_at)
		   OR (payloads IS NOT NULL
			   AND (u.payload IS NULL
					OR pg_catalog.octet_length(u.payload::text) > v_max_payload))
		   OR (u.dedupe_key IS NOT NULL AND (u.dedupe_key = '' OR pg_catalog.octet_length(u.dedupe_key) > 512)))
	   OR EXISTS (
		SELECT FROM unnest(keys, priorities) AS u(key, priority)
		WHERE (u.key IS NOT NULL AND (u.key = '' OR pg_catalog.octet_length(u.key) > 512))
		   OR (priorities IS NOT NULL AND (u.priority IS NULL OR u.priority NOT BETWEEN -32768 AND 32767))) THEN
		FOR i IN 1 .. n LOOP
			PERFORM sched._check_task(run_ats[i], coalesce(payloads[i], CASE WHEN payloads IS NULL THEN '{}'::jsonb END),
									  dedupe_keys[i]);
			PERFORM sched._check_key(keys[i], CASE WHEN priorities IS NULL THEN 0 ELSE priorities[i] END);
		END LOOP;
	END IF;

	IF pg_catalog.cardinality(pg_catalog.array_remove(keys, NULL)) > 0 THEN
		PERFORM sched._note_keyed(biz_type);
	END IF;
	IF dedupe_keys IS NOT NULL THEN
		FOR i IN 1 .. n LOOP
			RETURN NEXT sched._insert(biz_type, run_ats[i], coalesce(payloads[i], '{}'), dedupe_keys[i],
									  p_key => keys[i], p_priority => coalesce(priorities[i], 0));
		END LOOP;
		RETURN;
	END IF;

	-- The set-based path: one INSERT for the whole batch.  Ids are drawn
	-- first, so that they can be returned in input order.
	RETURN QUERY
	WITH input AS MATERIALIZED (
		SELECT u.ord, u.run_at, coalesce(u.payload, '{}'::jsonb) AS payload,
			   sched._bucket(u.run_at) AS bucket, u.key, coalesce(u.priority, 0)::smallint AS priority
		FROM unnest(run_ats, payloads, keys, priorities) WITH ORDINALITY AS u(run_at, payload, key, priority, ord)
	), numbered AS MATERIALIZED (
		-- sched._new_id written out: a call of the sql function per task is
		-- planned per call (it is volatile: never inlined), 15% of a batch.
		SELECT input.*, pg_catalog.nextval('sched.task_seq') * sched._bucket_count() + input.bucket AS id
		FROM input
	), stored AS (
		INSERT INTO sched.task (id, bucket, biz_type, run_at, payload, created_at, key, priority)
		SELECT numbered.id, numbered.bucket, add_many.biz_type, numbered.run_at,
			   numbered.payload, clock_timestamp(), numbered.key, numbered.priority
		FROM numbered
	)
	SELECT numbered.id FROM numbered ORDER BY numbered.ord;
	PERFORM sched._tally(biz_type, 'added', cardinality(run_ats));

	-- Consecutive ids go through every door: wake every range, and tell the
	-- scanners' far search the earliest task more than a second ahead.
	SELECT min(r), min(r) FILTER (WHERE r > clock_timestamp() + interval '1 second')
	INTO v_min, v_far FROM unnest(run_ats) AS r;
	PERFORM sched._wake(v_min);
	IF v_far IS NOT NULL THEN
		PERFORM sched._wake(v_far, NULL, true);
	END IF;
END
$$;
COMMENT ON FUNCTION sched.add_many(text, timestamptz[], jsonb[], text[], text[], int[]) IS 'schedule many tasks of one type in one statement; returns their ids in input order';

/*
 * Cancel a pending task; or an SQL job that an SQL worker holds (state
 * 'd'), running or about to: its statement is cancelled first, so that its
 * run rolls back and gives the task's row up, and the job is cancelled then
 * (a run that commits first is done, and this returns false).  The caller
 * must hold 'schedule' on the type before anything is interrupted.
 */
CREATE OR REPLACE FUNCTION sched.cancel(id bigint) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_types text[];
BEGIN
	PERFORM sched._require(id, 'id');
	IF EXISTS (SELECT FROM sched.task t JOIN sched.biz b ON b.name = t.biz_type
			   WHERE t.id = cancel.id AND t.state = 'd' AND b.delivery = 'sql') THEN
		v_types := CASE WHEN NOT sched._caller_is_admin() THEN sched._granted_types('schedule') END;
		IF v_types IS NULL OR EXISTS (SELECT FROM sched.task t
									  WHERE t.id = cancel.id AND t.biz_type = ANY (v_types)) THEN
			PERFORM sched._sql_interrupt(id);
			RETURN sched._finish_by_id(id, '{p,r,d}', 'cancelled', 'schedule');
		END IF;
	END IF;
	RETURN sched._finish_by_id(id, '{p,r}', 'cancelled', 'schedule');
END
$$;
COMMENT ON FUNCTION sched.cancel(bigint) IS 'cancel a pending task, or a running SQL job (its statement is cancelled); false if there was no such task';

CREATE OR REPLACE FUNCTION sched.reschedule(id bigint, run_at timestamptz) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_bucket smallint;
BEGIN
	PERFORM sched._require(id, 'id');
	PERFORM sched._check_task(run_at, '{}', NULL);
	IF NOT sched._lock_type_of(id) THEN
		RETURN false;
	END IF;
	v_bucket := sched._lock(id, '{p,r}', 'schedule');
	IF v_bucket IS NULL THEN
		RETURN false;
	END IF;
	PERFORM sched._move(v_bucket, id, run_at, NULL);
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.reschedule(bigint, timestamptz) IS 'move a pending task to a new run_at; false if there was no pending task with this id';

CREATE OR REPLACE FUNCTION sched.ack(id bigint) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM sched._require(id, 'id');
	PERFORM sched._note_consumer();
	RETURN sched._finish_by_id(id, '{d}', 'done', 'consume');
END
$$;
COMMENT ON FUNCTION sched.ack(bigint) IS 'acknowledge a delivered task: it is done; false if no delivery of this id awaits acknowledgement';

CREATE OR REPLACE FUNCTION sched.ack_many(ids bigint[]) RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	g record;
	v_done bigint[];
	v_left bigint;
	n int := 0;
	v_types text[] := sched._granted_types('consume');
BEGIN
	PERFORM sched._require(ids, 'ids');
	PERFORM sched._note_consumer();
	-- One statement per bucket the ids were created in: an index probe per
	-- id in one partition, instead of a call of sched.ack per id.
	FOR g IN
		SELECT sched._id_bucket(x.id) AS bucket, array_agg(DISTINCT x.id) AS bucket_ids
		FROM unnest(ids) AS x(id) WHERE x.id IS NOT NULL
		GROUP BY 1
	LOOP
		v_done := sched._finish(g.bucket, g.bucket_ids, 'done', NULL, 'd', v_types);
		n := n + cardinality(v_done);
		-- Ids neither taken here, nor still here in another state, nor
		-- finished: tasks that moved to another bucket (nack).  The
		-- one-by-one path looks for them in every bucket.  (Not looked for
		-- when every id was taken, as a rule: that search, planned anew
		-- at every call, cost more than the acknowledgement.)
		CONTINUE WHEN cardinality(v_done) = cardinality(g.bucket_ids);
		FOR v_left IN
			SELECT x.id FROM unnest(g.bucket_ids) AS x(id)
			WHERE x.id <> ALL (v_done)
			  AND NOT EXISTS (SELECT FROM sched.task t WHERE t.bucket = g.bucket AND t.id = x.id)
			  AND NOT EXISTS (SELECT FROM sched.finished f WHERE f.id = x.id)
		LOOP
			IF sched._finish_by_id(v_left, '{d}', 'done', 'consume') THEN
				n := n + 1;
			END IF;
		END LOOP;
	END LOOP;
	RETURN n;
END
$$;
COMMENT ON FUNCTION sched.ack_many(bigint[]) IS 'acknowledge several delivered tasks; returns how many awaited acknowledgement';

CREATE OR REPLACE FUNCTION sched.nack(id bigint, retry_in interval DEFAULT NULL, error text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_bucket smallint;
	t record;
	v_delay interval;
BEGIN
	PERFORM sched._require(id, 'id');
	PERFORM sched._note_consumer();
	IF retry_in IS NOT NULL THEN
		PERFORM sched._check_interval(retry_in, 'retry_in', interval '0', interval '1 year');
	END IF;
	IF NOT sched._lock_type_of(id) THEN
		RETURN false;
	END IF;
	v_bucket := sched._lock(id, '{d}', 'consume');
	IF v_bucket IS NULL THEN
		RETURN false;
	END IF;
	SELECT k.attempt, k.biz_type, b.max_attempts, b.min_backoff, b.max_backoff INTO t
		FROM sched.task k JOIN sched.biz b ON b.name = k.biz_type
		WHERE k.bucket = v_bucket AND k.id = nack.id;
	PERFORM sched._tally(t.biz_type, 'nacked', 1);
	IF t.attempt >= t.max_attempts THEN
		PERFORM sched._finish(v_bucket, ARRAY[id], 'dead',
			format('nack: %s (attempt %s of %s)', coalesce(error, 'negative acknowledgement'), t.attempt, t.max_attempts));
	ELSE
		-- Without retry_in: the type's backoff.
		v_delay := coalesce(retry_in, sched._backoff(t.min_backoff, t.max_backoff, t.attempt));
		PERFORM sched._move(v_bucket, id, clock_timestamp() + v_delay,
							'nack: ' || coalesce(error, 'negative acknowledgement'));
		PERFORM sched._wake_drain(true);
	END IF;
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.nack(bigint, interval, text) IS 'report a failed delivery: retry later, or dead after max_attempts; false if no delivery of this id awaits acknowledgement';

/*
 * A consumer's heartbeat: the lease of a notify or pull delivery runs on
 * until "by" from now (never shortened).  Also for a lease that ran out,
 * as long as the sweep has not taken the task back (the sweep passes by a
 * row this holds).  NULL if no delivery of this id awaits acknowledgement
 * by the caller.  The lease of an HTTP request or an SQL job is its
 * worker's: refused, before its row is locked (a running job's worker
 * holds it for the whole run).
 */
CREATE OR REPLACE FUNCTION sched.extend(id bigint, by interval) RETURNS timestamptz
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- By index, whatever the statistics say (see sched._lock).
SET enable_seqscan = off
AS $$
DECLARE
	v_bucket smallint;
	v_delivery text;
	v_state "char";
	v_until timestamptz;
	-- A task of a type the caller may not consume is not there for it.
	v_types text[] := CASE WHEN NOT sched._caller_is_admin() THEN sched._granted_types('consume') END;
BEGIN
	PERFORM sched._require(id, 'id');
	PERFORM sched._note_consumer();
	PERFORM sched._check_interval(extend.by, 'by', interval '1 second', interval '7 days');
	-- In the bucket the id was made in, then (a task that moved) in all;
	-- by primary key, the state tested here (see sched._lock).
	SELECT b.delivery, t.state INTO v_delivery, v_state
		FROM sched.task t JOIN sched.biz b ON b.name = t.biz_type
		WHERE t.bucket = sched._id_bucket(extend.id) AND t.id = extend.id
		  AND (v_types IS NULL OR t.biz_type = ANY (v_types));
	IF NOT FOUND THEN
		SELECT b.delivery, t.state INTO v_delivery, v_state
			FROM sched.task t JOIN sched.biz b ON b.name = t.biz_type
			WHERE t.id = extend.id
			  AND (v_types IS NULL OR t.biz_type = ANY (v_types));
	END IF;
	IF v_state = 'd' AND v_delivery NOT IN ('notify', 'pull') THEN
		RAISE EXCEPTION 'the lease of task % cannot be extended', id
			USING ERRCODE = 'wrong_object_type',
				  DETAIL = pg_catalog.format('Its type delivers by %s: the lease is its worker''s.', v_delivery),
				  HINT = 'Only a notify or pull delivery, which a consumer acknowledges, has a lease to extend.';
	END IF;
	v_bucket := sched._lock(id, '{d}', 'consume');
	IF v_bucket IS NULL THEN
		RETURN NULL;
	END IF;
	UPDATE sched.task t
		SET lease_until = GREATEST(t.lease_until, pg_catalog.clock_timestamp() + extend.by)
		WHERE t.bucket = v_bucket AND t.id = extend.id
		RETURNING t.lease_until INTO v_until;
	RETURN v_until;
END
$$;
COMMENT ON FUNCTION sched.extend(bigint, interval) IS 'extend the lease of a delivered notify or pull task to "by" from now (a consumer''s heartbeat); returns the new lease_until, or NULL if no delivery of this id awaits acknowledgement';

/*
 * Cancel the pending task of a type that holds a dedupe key.  The key
 * leads to the task (sched.dedupe); if that task finished in between and
 * another took the key, the other is the one looked at.
 */
CREATE OR REPLACE FUNCTION sched.cancel_by_key(biz_type text, dedupe_key text) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	b sched.biz := sched._biz(biz_type);
	v_id bigint;
	v_seen bigint;
BEGIN
	PERFORM sched._require(dedupe_key, 'dedupe_key');
	IF NOT sched._caller_is_admin() THEN
		PERFORM sched._require_grant(b.name, 'schedule');
	END IF;
	LOOP
		SELECT d.task_id INTO v_id FROM sched.dedupe d
			WHERE d.biz_type = b.name AND d.dedupe_key = cancel_by_key.dedupe_key;
		IF v_id IS NULL OR v_id = v_seen THEN
			RETURN false;
		END IF;
		IF sched._finish_by_id(v_id, '{p,r}', 'cancelled', 'schedule') THEN
			RETURN true;
		END IF;
		v_seen := v_id;
	END LOOP;
END
$$;
COMMENT ON FUNCTION sched.cancel_by_key(text, text) IS 'cancel the pending task of a business type that holds a dedupe key; false if there is none';

/*
 * The body of sched.claim.  PL/pgSQL cannot have an argument and a result
 * column of the same name (biz_type), so the public function is a SQL
 * wrapper around this one.
 */
CREATE OR REPLACE FUNCTION sched._claim(p_biz text, p_max int)
RETURNS TABLE(id bigint, biz_type text, run_at timestamptz, payload jsonb, attempt int, schedule text,
			  key text, priority smallint)
LANGUAGE plpgsql
-- By index, whatever the statistics say (see sched._lock).
SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
	b sched.biz := sched._biz(p_biz);
	v_now timestamptz := clock_timestamp();
	v_max int := p_max;
	v_tokens int := 0;
	v_claimed int;
	v_pace int;
	v_in_flight int;
	c record;
	a record;
BEGIN
	PERFORM sched._require(p_max, 'max_tasks');
	PERFORM sched._note_consumer();
	IF p_max < 1 OR p_max > 10000 THEN
		RAISE EXCEPTION 'max_tasks must be between 1 and 10000, not %', p_max
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT sched._caller_is_admin() THEN
		PERFORM sched._require_grant(b.name, 'consume');
	END IF;
	IF b.paused THEN
		RETURN;
	END IF;
	-- Held to its consumers' pace (src/core/pace.c): no more awaiting
	-- acknowledgement than its cap, set from what they hold when it is 0.
	v_pace := sched._consumer_cap(b.name);
	IF v_pace IS NOT NULL THEN
		v_in_flight := sched._awaiting_ack(b.name, CASE WHEN v_pace = 0 THEN 100000 ELSE v_pace END);
		IF v_pace = 0 THEN
			v_pace := sched._pace_start(b.name, v_in_flight);
		END IF;
		v_max := LEAST(v_max, coalesce(v_pace - v_in_flight, v_max));
		IF v_max <= 0 THEN
			RETURN;
		END IF;
	END IF;
	IF b.limited THEN
		-- One claim at a time counts a capped type's leases and takes slots.
		a := sched._claim_allowance(b, v_max, v_now, true);
		v_tokens := a.tokens;
		v_max := a.want;
	END IF;
	IF v_max <= 0 THEN
		RETURN;
	END IF;
	-- Lock the tasks first (sched._take: parked ones by priority and in turns
	-- by key, then due ones not announced yet): the firings of schedules
	-- among them make their next firings, and those not to be sent are
	-- left alone, before the rest are leased.
	c := sched._take(b, v_max, v_now, true);
	RETURN QUERY
	SELECT l.id, l.biz_type, l.run_at, l.payload, l.attempt, l.schedule, c.keys[o.ord], c.priorities[o.ord]
	FROM sched._lease(c.buckets, c.ids, '{p,r}', v_now, b.ack_timeout, p_skip => c.skipped) l
	JOIN pg_catalog.unnest(c.ids) WITH ORDINALITY AS o(id, ord) ON o.id = l.id
	ORDER BY o.ord;
	GET DIAGNOSTICS v_claimed = ROW_COUNT;
	IF v_tokens > 0 THEN
		PERFORM sched._return_tokens(b.name, v_tokens - v_claimed);
	END IF;
	-- Nothing left to claim, and its consumers hold at most half the cap:
	-- they caught up.  (A claim may take fewer than it may for other
	-- reasons: rows another claim holds, keys at their caps.)
	IF v_pace IS NOT NULL AND v_claimed < v_max AND v_in_flight + v_claimed <= v_pace / 2
	   AND NOT EXISTS (SELECT FROM sched.task t
					   WHERE t.biz_type = b.name AND t.state IN ('p', 'r') AND t.run_at <= v_now) THEN
		PERFORM sched._pace_release(b.name);
	END IF;
END
$$;
COMMENT ON FUNCTION sched._claim(text, int) IS 'internal: the body of sched.claim';

CREATE OR REPLACE FUNCTION sched.claim(biz_type text, max_tasks int DEFAULT 100)
RETURNS TABLE(id bigint, biz_type text, run_at timestamptz, payload jsonb, attempt int, schedule text,
			  key text, priority smallint)
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$ SELECT * FROM sched._claim($1, $2) $$;
COMMENT ON FUNCTION sched.claim(text, int) IS 'take up to max_tasks due tasks of a type (by priority, in turns by key), each leased for the type''s ack_timeout';

CREATE OR REPLACE FUNCTION sched.retry(id bigint) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
	f sched.finished;
	v_now timestamptz := clock_timestamp();
	v_bucket smallint := sched._bucket(v_now);
	v_types text[];
BEGIN
	PERFORM sched._require(retry.id, 'id');
	v_types := sched._granted_types('schedule');
	DELETE FROM sched.finished x WHERE x.id = retry.id AND x.state = 'dead'
		AND (v_types IS NULL OR x.biz_type = ANY (v_types))
		RETURNING * INTO f;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	PERFORM sched._biz(f.biz_type);
	-- (The type may have been dropped and defined again since.)
	IF f.key IS NOT NULL THEN
		PERFORM sched._note_keyed(f.biz_type);
	END IF;
	IF f.dedupe_key IS NOT NULL THEN
		INSERT INTO sched.dedupe (biz_type, dedupe_key, task_id)
			VALUES (f.biz_type, f.dedupe_key, f.id) ON CONFLICT DO NOTHING;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'dedupe key "%" of business type "%" is held by another unfinished task', f.dedupe_key, f.biz_type
				USING ERRCODE = 'unique_violation',
					  HINT = 'Cancel or finish the task that holds the key, then retry this one.';
		END IF;
	END IF;
	INSERT INTO sched.task (id, bucket, biz_type, run_at, state, attempt, payload, dedupe_key,
							created_at, delivered_at, last_error, schedule, command, run_as, run_now,
							key, priority)
		VALUES (f.id, v_bucket, f.biz_type, v_now, 'p', 0, f.payload, f.dedupe_key,
				f.created_at, f.delivered_at, f.last_error, f.schedule, f.command, f.run_as, f.run_now,
				f.key, f.priority);
	PERFORM sched._wake(v_now, sched._door(f.id));
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.retry(bigint) IS 'revive a dead task: pending now, attempts counted from zero; false if no dead task has this id';
