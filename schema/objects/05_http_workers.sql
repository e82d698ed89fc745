-------------------------------------------------------------------------------
-- The HTTP workers' statements (src/http_store.c).  A worker claims parked
-- tasks of http types in one short transaction, sends the requests with no
-- transaction open, and records the results of many in another.
-------------------------------------------------------------------------------

/*
 * How long an HTTP worker's lease on a task lasts: the type's timeout and a
 * grace of 30 seconds.  If the worker dies, the sweep parks the task again
 * when it runs out (and the worker, when it starts again, releases its own
 * at once; see sched._http_release).  Inlined where it is used: by
 * sched._http_claim, and by the scanner's walk, which leases a due task to
 * a worker that has room (src/handoff.c).
 */
CREATE OR REPLACE FUNCTION sched._http_lease(p_timeout interval) RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT p_timeout + interval '30 seconds' $$;
COMMENT ON FUNCTION sched._http_lease(interval) IS 'internal: the length of an HTTP worker''s lease on a task';

/*
 * Lease up to p_room parked tasks of http types to HTTP worker p_worker,
 * shared between the types that have some: each type gets at most its fair
 * part of the worker's p_max_in_flight requests (p_busy_types and
 * p_busy_counts say how many each type has in flight already), so that a
 * type whose endpoint hangs cannot take every slot, and at most what its
 * receiver can take soon (p_busy_rooms, beside p_busy_types: see
 * src/http/http_origins.c).  Rate limits and
 * concurrency caps apply as in sched.claim.  The lease lasts
 * sched._http_lease(timeout).  So does load control: the claim takes its
 * room from the same bucket as the scanners' ticks (sched._load_take).
 * When a limit held
 * a type back, a last row with a NULL id says so: run_at is when the next
 * token of a rate-limited type or of load control comes (the worker claims
 * again then), and
 * attempt is 1 if a type is at its fair share or concurrency cap (the
 * worker claims again once its requests that end are recorded).
 */
CREATE OR REPLACE FUNCTION sched._http_claim(p_worker smallint, p_room int, p_max_in_flight int,
								  p_busy_types text[], p_busy_counts int[], p_busy_rooms int[] DEFAULT NULL)
RETURNS TABLE(id bigint, bucket smallint, biz_type text, run_at timestamptz, payload jsonb, attempt int,
			  schedule text, key text)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
	v_now timestamptz := clock_timestamp();
	v_types text[];
	v_name text;
	v_active int;
	v_share int;
	v_room int := p_room;
	v_want int;
	v_at int;
	v_tokens int;
	v_got int;
	v_next timestamptz;
	v_held boolean := false;
	v_load record;
	b sched.biz;
	c record;
	a record;
BEGIN
	SELECT pg_catalog.array_agg(x.name ORDER BY pg_catalog.random()) INTO v_types
	FROM sched.biz x
	WHERE x.delivery = 'http' AND NOT x.paused
	  AND EXISTS (SELECT FROM sched.task t WHERE t.biz_type = x.name AND t.state = 'r');
	IF v_types IS NULL THEN
		RETURN;
	END IF;
	v_load := sched._load_take(p_room);
	IF v_load.taken = 0 THEN
		RETURN QUERY SELECT NULL::bigint, NULL::smallint, NULL::text, v_load.next_at, NULL::jsonb,
							0, NULL::text, NULL::text;
		RETURN;
	END IF;
	v_room := v_load.taken;
	-- Types wanting slots: those with parked tasks, and those with requests
	-- in flight.
	SELECT count(*) INTO v_active FROM (
		SELECT pg_catalog.unnest(v_types)
		UNION
		SELECT u.t FROM unnest(p_busy_types, p_busy_counts) u(t, n) WHERE u.n > 0) s;
	-- Alone, a type may have three quarters of the slots: the rest stay
	-- for a type that has work a moment later.
	v_share := CASE WHEN v_active <= 1 THEN GREATEST(1, p_max_in_flight - p_max_in_flight / 4)
					ELSE GREATEST(1, p_max_in_flight / v_active) END;

	FOREACH v_name IN ARRAY v_types LOOP
		EXIT WHEN v_room <= 0;
		v_at := pg_catalog.array_position(p_busy_types, v_name);
		v_want := LEAST(v_room, v_share - coalesce(p_busy_counts[v_at], 0), p_busy_rooms[v_at]);
		IF v_want <= 0 THEN
			v_held := true;		-- at its fair share of the slots, or its receiver's
			CONTINUE;
		END IF;
		SELECT * INTO b FROM sched.biz x WHERE x.name = v_name;
		v_tokens := 0;
		IF b.limited THEN
			a := sched._claim_allowance(b, v_want, v_now, false);
			v_held := v_held OR a.held;
			v_next := LEAST(v_next, a.next_at);
			v_tokens := a.tokens;
			v_want := a.want;
			CONTINUE WHEN v_want <= 0;
		END IF;
		-- As sched.claim: lock first, let the schedules among them fire.
		c := sched._take(b, v_want, v_now);
		IF coalesce(pg_catalog.cardinality(c.ids), 0) < v_want THEN
			-- Held back by its keys' limits, maybe: look again at a key's
			-- next token, or when a request or run of it ends.
			v_next := LEAST(v_next, sched._key_tokens_next());
			v_held := v_held OR b.key_max_concurrency IS NOT NULL;
		END IF;
		RETURN QUERY
		SELECT l.id, l.bucket, l.biz_type, l.run_at, l.payload, l.attempt, l.schedule, c.keys[o.ord]
		FROM sched._lease(c.buckets, c.ids, '{r}', v_now, sched._http_lease(b.timeout), p_worker,
						  p_skip => c.skipped) l
		JOIN pg_catalog.unnest(c.ids) WITH ORDINALITY AS o(id, ord) ON o.id = l.id
		ORDER BY o.ord;
		GET DIAGNOSTICS v_got = ROW_COUNT;
		IF v_tokens > v_got THEN
			PERFORM sched._return_tokens(b.name, v_tokens - v_got);
		END IF;
		v_room := v_room - v_got;
	END LOOP;
	PERFORM sched._load_settle(v_load.taken, v_load.taken - v_room);
	IF v_load.taken < p_room THEN
		v_next := LEAST(v_next, v_load.next_at);
	END IF;
	IF v_next IS NOT NULL OR v_held THEN
		RETURN QUERY SELECT NULL::bigint, NULL::smallint, NULL::text, v_next, NULL::jsonb,
							CASE WHEN v_held THEN 1 ELSE 0 END, NULL::text, NULL::text;
	END IF;
END
$$;
COMMENT ON FUNCTION sched._http_claim(smallint, int, int, text[], int[], int[]) IS 'internal: lease parked tasks of http types to an HTTP worker';

/*
 * Record the results of HTTP requests, one array element per request:
 *	 p_outcomes: 'done' (2xx), 'retry' (at p_retry_at, or dead once the
 *				 attempts are used up), 'dead' (a final failure), 'requeued' (a
 *				 local failure before or while sending: parked again, the
 *				 attempt not counted).
 * Every request goes to sched.attempt.  A failure whose lease is gone (the
 * sweep took the task back, or an administrator finished it) changes
 * nothing, and is kept there as 'stale'; a 2xx still finishes the task if
 * it awaits a result: it was delivered.  Returns the positions (from 1) of
 * the requests whose task row another transaction holds: nothing of them
 * is recorded, and the worker records them again later, so that no user's
 * open transaction makes it wait.
 */
CREATE OR REPLACE FUNCTION sched._http_record(p_worker smallint, p_ids bigint[], p_buckets smallint[],
								   p_biz_types text[], p_attempts int[], p_outcomes text[],
								   p_retry_at timestamptz[], p_status int[], p_errors text[],
								   p_started timestamptz[], p_duration_ms float8[])
RETURNS int[]
LANGUAGE plpgsql
-- Planned with the arrays' values: "t.bucket = ANY (p_buckets)" prunes
-- the partitions only so (see sched._lease); a generic plan searched all 60.
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
	r record;
	g record;
	v_outcomes text[] := p_outcomes;
	v_errors text[] := p_errors;
	v_applied boolean[] := pg_catalog.array_fill(false, ARRAY[pg_catalog.cardinality(p_ids)]);
	v_locked bigint[];
	v_held int[];
BEGIN
	-- The tasks' rows, locked now; a row another transaction holds (an
	-- acknowledgement or a cancellation not committed yet, say) is skipped,
	-- and its result left for the worker to record later.
	v_locked := ARRAY(SELECT t.id FROM sched.task t
					  WHERE t.bucket = ANY (p_buckets) AND t.id = ANY (p_ids)
					  FOR UPDATE SKIP LOCKED);
	-- Usually every row is there and now locked: nothing to look for.
	IF pg_catalog.cardinality(v_locked) = pg_catalog.cardinality(p_ids) THEN
		v_held := '{}';
	ELSE
		v_held := ARRAY(SELECT u.ord
						FROM unnest(p_ids, p_buckets) WITH ORDINALITY AS u(id, bucket, ord)
						JOIN sched.task t ON t.bucket = u.bucket AND t.id = u.id
						WHERE t.id <> ALL (v_locked));
	END IF;

	-- Successes, a bucket at a time: every one whose task awaits a result.
	FOR g IN
		SELECT u.bucket, pg_catalog.array_agg(u.id) AS ids
		FROM unnest(p_ids, p_buckets, p_outcomes) WITH ORDINALITY AS u(id, bucket, outcome, ord)
		WHERE u.outcome = 'done' AND u.ord <> ALL (v_held)
		GROUP BY u.bucket
	LOOP
		PERFORM sched._finish(g.bucket, g.ids, 'done', NULL, 'd');
	END LOOP;

	-- Failures, one by one, if the lease is still this request's.  (Most
	-- batches have none: do not even plan the search.)
	IF 'done' = ALL (p_outcomes) THEN
		NULL;
	ELSE
	FOR r IN
		SELECT u.ord, u.id, u.bucket, u.attempt, u.outcome, u.retry_at, b.max_attempts
		FROM unnest(p_ids, p_buckets, p_attempts, p_outcomes, p_retry_at)
				WITH ORDINALITY AS u(id, bucket, attempt, outcome, retry_at, ord)
		JOIN sched.task t ON t.bucket = u.bucket AND t.id = u.id
		JOIN sched.biz b ON b.name = t.biz_type
		WHERE u.outcome <> 'done' AND t.state = 'd' AND t.attempt = u.attempt
		  AND t.lease_owner = p_worker AND u.ord <> ALL (v_held)
		ORDER BY u.ord
	LOOP
		IF r.outcome = 'retry' AND r.attempt >= r.max_attempts THEN
			v_outcomes[r.ord] := 'dead';
			v_errors[r.ord] := pg_catalog.format('%s (attempt %s of %s)', v_errors[r.ord], r.attempt, r.max_attempts);
		END IF;
		v_applied[r.ord] := true;
		IF v_outcomes[r.ord] = 'dead' THEN
			PERFORM sched._finish(r.bucket, ARRAY[r.id], 'dead', v_errors[r.ord], 'd');
		ELSIF r.outcome = 'retry' THEN
			PERFORM sched._move(r.bucket, r.id, r.retry_at, v_errors[r.ord]);
		ELSE
			-- requeued: parked again for the next claim, the attempt not counted
			PERFORM sched._unlease(ARRAY[r.bucket], ARRAY[r.id], 'requeued', v_errors[r.ord]);
		END IF;
	END LOOP;
	END IF;

	INSERT INTO sched.attempt (task_id, attempt, biz_type, started_at, duration, http_status, error, outcome)
	SELECT u.id, u.attempt, u.biz_type, u.started, pg_catalog.make_interval(secs => u.duration_ms / 1000.0),
		   u.status, u.error,
		   CASE WHEN u.outcome = 'done' OR u.applied THEN u.outcome ELSE 'stale' END
	FROM unnest(p_ids, p_attempts, p_biz_types, p_started, p_duration_ms, p_status,
				v_errors, v_outcomes, v_applied) WITH ORDINALITY
			AS u(id, attempt, biz_type, started, duration_ms, status, error, outcome, applied, ord)
	WHERE u.ord <> ALL (v_held);
	RETURN v_held;
END
$$;
COMMENT ON FUNCTION sched._http_record(smallint, bigint[], smallint[], text[], int[], text[], timestamptz[], int[], text[], timestamptz[], float8[]) IS 'internal: record the results of HTTP requests';

/*
 * An HTTP worker starting: the requests a previous run of it had in flight
 * never got a result.  Park them again at once, their attempts not counted
 * (the server may or may not have received them: a duplicate after a
 * crash is allowed, a lost task is not).
 */
CREATE OR REPLACE FUNCTION sched._http_release(p_worker smallint) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
	v_buckets smallint[];
	v_ids bigint[];
BEGIN
	-- A row another transaction holds is left to the sweep, which parks it
	-- again when its lease runs out.
	SELECT pg_catalog.array_agg(o.bucket), pg_catalog.array_agg(o.id) INTO v_buckets, v_ids
	FROM (SELECT l.bucket, l.id FROM sched.task l
		  WHERE l.state = 'd' AND l.lease_owner = p_worker
		  FOR UPDATE SKIP LOCKED) o;
	IF v_ids IS NULL THEN
		RETURN 0;
	END IF;
	RETURN sched._unlease(v_buckets, v_ids, 'requeued',
		'worker_stopped: the HTTP worker stopped before the request finished; sent again');
END
$$;
COMMENT ON FUNCTION sched._http_release(smallint) IS 'internal: park again the requests an HTTP worker had in flight when it stopped';
