-------------------------------------------------------------------------------
-- Internal task operations
-------------------------------------------------------------------------------

/*
 * Mark type p_biz as keyed (sched.biz.keyed), before its first task with a
 * key is stored: from then on sched._pick gives its parked tasks turns by
 * key.  An update only the first time (the row is read, not locked, once
 * the mark is there); it commits with the task.
 */
CREATE OR REPLACE FUNCTION sched._note_keyed(p_biz text) RETURNS void
LANGUAGE sql
AS $$
	UPDATE sched.biz x SET keyed = true WHERE x.name = p_biz AND NOT x.keyed
$$;
COMMENT ON FUNCTION sched._note_keyed(text) IS 'internal: mark a business type as having tasks with keys';

/*
 * Store one validated task; with a dedupe key that an unfinished task
 * holds already, do as p_on_duplicate says (sched.add): 'keep' returns the
 * holder, 'replace' and 'debounce' change it if it is still pending
 * (sched._replace) and return it, or else add this task, which takes the
 * key.  Wakes the scanner after commit.  A firing names its schedule
 * (p_schedule); an SQL job carries its command and the role it runs as
 * (p_command, p_run_as); p_run_now marks a firing made by sched.run_now,
 * which its schedule does not count.  p_key and p_priority: the task's
 * key and priority (sched._pick); the caller marks the type keyed
 * (sched._note_keyed) before the first task with a key.
 */
CREATE OR REPLACE FUNCTION sched._insert(p_biz text, p_run_at timestamptz, p_payload jsonb, p_dedupe_key text,
							  p_schedule text DEFAULT NULL, p_command text DEFAULT NULL,
							  p_run_as regrole DEFAULT NULL, p_run_now boolean DEFAULT NULL,
							  p_on_duplicate text DEFAULT 'keep', p_max_wait interval DEFAULT NULL,
							  p_key text DEFAULT NULL, p_priority int DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
	v_bucket smallint := sched._bucket(p_run_at);
	v_id bigint := sched._new_id(v_bucket);
	v_existing bigint;
	v_gone bigint;
	v_how text;
BEGIN
	IF p_dedupe_key IS NOT NULL THEN
		LOOP
			INSERT INTO sched.dedupe (biz_type, dedupe_key, task_id)
				VALUES (p_biz, p_dedupe_key, v_id)
				ON CONFLICT DO NOTHING;
			EXIT WHEN FOUND;
			SELECT d.task_id INTO v_existing FROM sched.dedupe d
				WHERE d.biz_type = p_biz AND d.dedupe_key = p_dedupe_key;
			IF FOUND THEN
				IF p_on_duplicate = 'keep' THEN
					RETURN v_existing;
				END IF;
				v_how := sched._replace(p_biz, p_dedupe_key, v_existing, v_id, p_run_at, p_payload,
										p_on_duplicate, p_max_wait, p_key, p_priority);
				IF v_how = 'replaced' THEN
					RETURN v_existing;
				END IF;
				-- 'handed over': the key is this task's now.
				EXIT WHEN v_how = 'handed over';
				-- The key's row names a task that is not there, twice: no
				-- task holds the key (never seen; never loop on it).
				IF v_existing = v_gone THEN
					UPDATE sched.dedupe d SET task_id = v_id
						WHERE d.biz_type = p_biz AND d.dedupe_key = p_dedupe_key AND d.task_id = v_gone;
					EXIT WHEN FOUND;
				END IF;
				v_gone := v_existing;
			END IF;
			-- The holder finished, or the key moved on, meanwhile: try again.
		END LOOP;
	END IF;

	INSERT INTO sched.task (id, bucket, biz_type, run_at, payload, dedupe_key, created_at, schedule,
							command, run_as, run_now, key, priority)
		VALUES (v_id, v_bucket, p_biz, p_run_at, p_payload, p_dedupe_key, pg_catalog.clock_timestamp(),
				p_schedule, p_command, p_run_as, p_run_now, p_key, p_priority);
	PERFORM sched._tally(p_biz, 'added', 1);
	PERFORM sched._wake(p_run_at, sched._door(v_id));
	RETURN v_id;
END
$$;
COMMENT ON FUNCTION sched._insert(text, timestamptz, jsonb, text, text, text, regrole, boolean, text, interval, text, int) IS 'internal: store a validated task (a firing of p_schedule, an SQL job''s command, if given), or replace the pending one that holds its dedupe key';

/*
 * sched.add with on_duplicate 'replace' or 'debounce', and p_holder the
 * unfinished task of type p_biz that holds dedupe key p_key:
 *   'replaced'     the holder was pending (or parked, or announced and not
 *                  claimed): it takes p_run_at and p_payload ('debounce':
 *                  p_run_at, but no later than p_max_wait after the
 *                  holder's first add, its created_at), and the new add's
 *                  key and priority (p_task_key, p_priority), keeping its
 *                  id and attempts, as sched.reschedule would;
 *   'handed over'  the holder was delivered: it is left to its consumer,
 *                  and the key goes to p_new_id, the task the caller adds
 *                  now (a change that came after the delivery is delivered
 *                  too, after it);
 *   'gone'         the holder finished, or the key moved on, meanwhile.
 * The holder's row is locked before the key's, the order in which
 * sched._finish takes them; concurrent adds of one key wait for each
 * other, and a claim or a tick passes the locked holder by (SKIP LOCKED).
 */
CREATE OR REPLACE FUNCTION sched._replace(p_biz text, p_key text, p_holder bigint, p_new_id bigint,
							   p_run_at timestamptz, p_payload jsonb, p_how text, p_max_wait interval,
							   p_task_key text, p_priority int)
RETURNS text
LANGUAGE plpgsql
-- By index, whatever the statistics say (see sched._lock).
SET enable_seqscan = off
AS $$
DECLARE
	v_bucket smallint := sched._lock(p_holder, '{p,r,d}');
	v_run_at timestamptz;
	t record;
BEGIN
	IF v_bucket IS NULL THEN
		RETURN 'gone';
	END IF;
	PERFORM FROM sched.dedupe d
		WHERE d.biz_type = p_biz AND d.dedupe_key = p_key AND d.task_id = p_holder
		FOR UPDATE;
	IF NOT FOUND THEN
		RETURN 'gone';
	END IF;
	SELECT k.state, k.created_at INTO t FROM sched.task k WHERE k.bucket = v_bucket AND k.id = p_holder;
	IF t.state = 'd' THEN
		UPDATE sched.dedupe d SET task_id = p_new_id
			WHERE d.biz_type = p_biz AND d.dedupe_key = p_key;
		RETURN 'handed over';
	END IF;
	v_run_at := CASE WHEN p_how = 'debounce' AND p_max_wait IS NOT NULL
					 THEN LEAST(p_run_at, t.created_at + p_max_wait) ELSE p_run_at END;
	PERFORM sched._move(v_bucket, p_holder, v_run_at, NULL, p_payload);
	-- The latest add's key and priority, as its payload (most often the
	-- holder's already: nothing to write).
	UPDATE sched.task k SET key = p_task_key, priority = p_priority
		WHERE k.bucket = sched._bucket(v_run_at) AND k.id = p_holder
		  AND (k.key IS DISTINCT FROM p_task_key OR k.priority <> p_priority);
	RETURN 'replaced';
END
$$;
COMMENT ON FUNCTION sched._replace(text, text, bigint, bigint, timestamptz, jsonb, text, interval, text, int) IS 'internal: give the pending task holding a dedupe key a new run_at, payload, key and priority, or hand the key of a delivered one to a new task';

/*
 * Lock an unfinished task by id in one of the given states and return its
 * bucket, or NULL.  Looks first in the bucket the id was created in, then
 * (for tasks that moved) in every bucket.
 *
 * The states are compared through a sub-select, which the planner cannot
 * see into: given the states as constants, it would prove the predicate of
 * the partial index of those states (task_leased_idx for '{d}') and, its
 * statistics saying that index is all but empty, read the whole of it
 * instead of probing the primary key.  Emptied by acknowledgements, that
 * index still holds their entries until vacuum, and while a transaction
 * holds back the xmin horizon, every one of them.
 *
 * enable_seqscan is off here, as in the workers' sessions, and in the other
 * functions that find tasks by id for a consumer (_lock_type_of, _finish,
 * _move, _claim).  A plan kept by a long-lived session is made once and
 * used until the table's statistics change: a generic plan, chosen or
 * forced, made while a partition is empty (the steady state of a queue
 * between bursts, vacuumed down to no pages) reads that partition whole,
 * which costs nothing then.  When a burst of 50,000 tasks lands in it, each
 * acknowledgement read all 50,000: a consumer acknowledging in batches
 * took 5 to 9 s to drain a burst it drains in under a second, and its
 * notifications, which a busy session only receives between its
 * statements, waited as long (TAP 026_burst_stress).  Every statement here
 * is written for an index; let the planner take one whatever the
 * statistics say.
 */
CREATE OR REPLACE FUNCTION sched._lock(p_id bigint, p_states "char"[], p_privilege text DEFAULT NULL) RETURNS smallint
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
	v_bucket smallint;
	-- A task of a type the caller may not act on is not there for it.
	v_types text[] := CASE WHEN p_privilege IS NOT NULL AND NOT sched._caller_is_admin()
						   THEN sched._granted_types(p_privilege) END;
BEGIN
	SELECT t.bucket INTO v_bucket FROM sched.task t
		WHERE t.bucket = sched._id_bucket(p_id) AND t.id = p_id
		  AND t.state OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT pg_catalog.unnest(p_states)))
		  AND (v_types IS NULL OR t.biz_type OPERATOR(pg_catalog.=) ANY (v_types))
		FOR UPDATE;
	IF NOT FOUND THEN
		SELECT t.bucket INTO v_bucket FROM sched.task t
			WHERE t.id = p_id
			  AND t.state OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT pg_catalog.unnest(p_states)))
			  AND (v_types IS NULL OR t.biz_type OPERATOR(pg_catalog.=) ANY (v_types))
			FOR UPDATE;
	END IF;
	RETURN v_bucket;
END
$$;
COMMENT ON FUNCTION sched._lock(bigint, "char"[], text) IS 'internal: find and lock an unfinished task by id';

/*
 * Lock FOR KEY SHARE the business type of unfinished task p_id, as sched.add
 * does for a new task, before the caller re-stores the task (_move deletes
 * and inserts it): a concurrent sched.drop_biz then waits for the caller, or
 * the caller for it.  False if there is no such task or it has no type any
 * more (drop_biz cancelled it).  Taken before the task's own row lock, in
 * the order drop_biz takes them.
 */
CREATE OR REPLACE FUNCTION sched._lock_type_of(p_id bigint) RETURNS boolean
LANGUAGE plpgsql
-- By index, whatever the statistics say (see sched._lock).
SET enable_seqscan = off
AS $$
DECLARE
	v_biz text;
BEGIN
	SELECT t.biz_type INTO v_biz FROM sched.task t
		WHERE t.bucket = sched._id_bucket(p_id) AND t.id = p_id;
	IF NOT FOUND THEN
		SELECT t.biz_type INTO v_biz FROM sched.task t WHERE t.id = p_id;
	END IF;
	IF v_biz IS NULL THEN
		RETURN false;
	END IF;
	PERFORM 1 FROM sched.biz b WHERE b.name = v_biz FOR KEY SHARE;
	RETURN FOUND;
END
$$;
COMMENT ON FUNCTION sched._lock_type_of(bigint) IS 'internal: lock the business type of a task before re-storing the task';

/*
 * Move tasks of one bucket out of the live table into sched.finished as
 * p_state, and return the ids moved.  With p_only_from, only tasks in that
 * state are moved (sched.ack_many: only deliveries awaiting acknowledgement);
 * without it, the caller has locked the tasks it names.  With p_types, only
 * tasks of those types (the ones the caller of ack_many may consume).  A
 * schedule's pending firing cancelled before its delivery is a missed
 * firing: its schedule makes the next (sched._fire_one).  p_only_from is
 * compared through a sub-select, as in sched._lock, so that the tasks are
 * found by primary key, not by reading task_leased_idx.
 */
CREATE OR REPLACE FUNCTION sched._finish(p_bucket smallint, p_ids bigint[], p_state text, p_error text,
							  p_only_from "char" DEFAULT NULL, p_types text[] DEFAULT NULL)
RETURNS bigint[]
LANGUAGE plpgsql
-- A custom plan of the statement on the partitioned table (one partition
-- for the bucket) always looks cheaper than the generic one (every
-- partition, pruned at execution), so it was planned anew at every call:
-- a third of an acknowledgement's time.  The generic plan runs as fast,
-- if it reads the partitions by their primary keys whatever their
-- statistics said when it was made (see sched._lock).
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
	v_done bigint[];
	v_firings bigint[];
	v_paced bigint;
	f record;
BEGIN
	WITH gone AS (
		DELETE FROM sched.task t
		WHERE t.bucket = p_bucket AND t.id = ANY (p_ids)
		  AND (p_only_from IS NULL OR t.state = (SELECT p_only_from))
		  AND (p_types IS NULL OR t.biz_type = ANY (p_types))
		RETURNING t.*
	), released AS (
		DELETE FROM sched.dedupe d USING gone
		WHERE d.biz_type = gone.biz_type AND d.dedupe_key = gone.dedupe_key AND d.task_id = gone.id
	), stored AS (
		INSERT INTO sched.finished (id, biz_type, run_at, state, attempt, payload, dedupe_key,
									created_at, delivered_at, finished_at, last_error, schedule,
									command, run_as, run_now, key, priority)
		SELECT gone.id, gone.biz_type, gone.run_at, p_state, gone.attempt, gone.payload,
			   gone.dedupe_key, gone.created_at, gone.delivered_at, pg_catalog.clock_timestamp(),
			   coalesce(p_error, gone.last_error), gone.schedule,
			   gone.command, gone.run_as, gone.run_now, gone.key, gone.priority
		FROM gone
		RETURNING id, schedule, attempt, run_now, biz_type, delivered_at
	)
	SELECT coalesce(pg_catalog.array_agg(stored.id), '{}'),
		   pg_catalog.array_agg(stored.id) FILTER (WHERE stored.schedule IS NOT NULL AND stored.attempt = 0
												 AND stored.run_now IS NOT TRUE),
		   -- Each acknowledgement (done from delivered) for its consumers'
		   -- pace (src/core/pace.c).
		   pg_catalog.count(*) FILTER (WHERE p_state = 'done' AND stored.delivered_at IS NOT NULL
									   AND sched._note_ack(stored.biz_type, stored.delivered_at))
	INTO v_done, v_firings, v_paced FROM stored;
	IF p_state = 'cancelled' AND v_firings IS NOT NULL THEN
		FOR f IN SELECT x.id, x.run_at, x.biz_type, x.schedule FROM sched.finished x
				 WHERE x.id = ANY (v_firings) ORDER BY x.run_at LOOP
			PERFORM sched._fire_one(f.id, f.run_at, f.biz_type, f.schedule, sched._door(f.id), true);
		END LOOP;
	END IF;
	IF pg_catalog.cardinality(v_done) > 0 THEN
		-- A delivery that ends frees a slot of its type's concurrency cap.
		PERFORM sched._wake_drain(true);
	END IF;
	RETURN v_done;
END
$$;
COMMENT ON FUNCTION sched._finish(smallint, bigint[], text, text, "char", text[]) IS 'internal: move tasks of one bucket to sched.finished';

/*
 * Finish the unfinished task p_id as p_state if it is in one of p_states;
 * false if there is no such task.  The body of sched.ack and sched.cancel.
 */
CREATE OR REPLACE FUNCTION sched._finish_by_id(p_id bigint, p_states "char"[], p_state text, p_privilege text)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
	v_bucket smallint := sched._lock(p_id, p_states, p_privilege);
BEGIN
	IF v_bucket IS NULL THEN
		RETURN false;
	END IF;
	PERFORM sched._finish(v_bucket, ARRAY[p_id], p_state, NULL);
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched._finish_by_id(bigint, "char"[], text, text) IS 'internal: finish an unfinished task by id if it is in one of the given states and the caller holds the privilege on its type';

/*
 * Give a locked task a new run_at (and so maybe a new bucket), keeping its
 * id, as pending; and a new payload, if given.  Delete and insert rather
 * than UPDATE, so that no concurrent locker ever meets a row moved to
 * another partition.
 *
 * A task whose dedupe key a newer task took while it was delivered
 * (sched._replace: its key's row names the other task now) is not tried
 * again, whatever asked (a nack, a lease that ran out, a failed request or
 * run): it would deliver an older payload after the newer task's.  It is
 * cancelled instead, as superseded.
 */
CREATE OR REPLACE FUNCTION sched._move(p_bucket smallint, p_id bigint, p_run_at timestamptz, p_error text,
							p_payload jsonb DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
-- By index, whatever the statistics say (see sched._lock).
SET enable_seqscan = off
AS $$
BEGIN
	IF EXISTS (SELECT FROM sched.task t
			   WHERE t.bucket = p_bucket AND t.id = p_id AND t.dedupe_key IS NOT NULL
				 AND NOT EXISTS (SELECT FROM sched.dedupe d
								 WHERE d.biz_type = t.biz_type AND d.dedupe_key = t.dedupe_key
								   AND d.task_id = t.id)) THEN
		PERFORM sched._finish(p_bucket, ARRAY[p_id], 'cancelled',
							  'superseded: a newer task took its dedupe key while it was delivered');
		RETURN;
	END IF;
	WITH gone AS (
		DELETE FROM sched.task t WHERE t.bucket = p_bucket AND t.id = p_id
		RETURNING t.*
	)
	INSERT INTO sched.task (id, bucket, biz_type, run_at, state, attempt, payload, dedupe_key,
							created_at, delivered_at, lease_until, last_error, schedule,
							command, run_as, run_now, key, priority)
	SELECT gone.id, sched._bucket(p_run_at), gone.biz_type, p_run_at, 'p', gone.attempt,
		   coalesce(p_payload, gone.payload), gone.dedupe_key, gone.created_at, gone.delivered_at, NULL,
		   coalesce(p_error, gone.last_error), gone.schedule,
		   gone.command, gone.run_as, gone.run_now, gone.key, gone.priority
	FROM gone;
	PERFORM sched._wake(p_run_at, sched._door(p_id));
END
$$;
COMMENT ON FUNCTION sched._move(smallint, bigint, timestamptz, text, jsonb) IS 'internal: make a locked task pending again at a new time (with a new payload, if given)';

/*
 * The wait before the next try of a task whose attempt-th delivery failed
 * (a failed SQL run, a nack without retry_in, a lease that ran out):
 * min_backoff doubled with each attempt up to max_backoff, then somewhere
 * in the upper half of that, and never below min_backoff.  The jitter
 * spreads the retries of tasks that failed together.  The HTTP workers
 * follow the same rule in C (src/http/http_request.c).
 */
CREATE OR REPLACE FUNCTION sched._backoff(p_min interval, p_max interval, p_attempt int) RETURNS interval
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
	-- (NULL only in a type restored from a 0.2 dump: define_biz's defaults.)
	v_min float8 := extract(epoch FROM coalesce(p_min, interval '1 second'))::float8;
	v_delay float8;
BEGIN
	v_delay := LEAST(v_min * pg_catalog.power(2, LEAST(GREATEST(p_attempt, 1) - 1, 30)),
					 extract(epoch FROM coalesce(p_max, interval '1 hour'))::float8);
	v_delay := GREATEST(v_min, v_delay * (0.5 + pg_catalog.random() / 2));
	RETURN pg_catalog.make_interval(secs => v_delay);
END
$$;
COMMENT ON FUNCTION sched._backoff(interval, interval, int) IS 'internal: the wait before retrying a task whose attempt-th delivery failed (the type''s min_backoff doubled per attempt, capped at max_backoff, with jitter)';

/*
 * The reverse of the lease transition (src/lease.h), written once: locked
 * tasks that were delivered ('d') lose their lease and wait again.  How:
 *   'expired'   the lease ran out (the sweep): parked or claimable again
 *               ('r'), the attempt counted, last_error p_error;
 *   'requeued'  an HTTP worker gives the task back unsent or unanswered
 *               (its requeue, or its restart): parked again, the attempt
 *               not counted, last_error p_error;
 *   'deferred'  the delivery is called off before anyone saw it (a firing
 *               whose schedule is being changed): pending as before it,
 *               never delivered, last_error kept.
 * Returns how many tasks it changed; a task no longer delivered is left.
 */
CREATE OR REPLACE FUNCTION sched._unlease(p_buckets smallint[], p_ids bigint[], p_how text, p_error text DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql
-- Planned with the arrays' values, so that the partitions are pruned (as
-- in sched._lease).
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
	n int;
BEGIN
	IF p_how NOT IN ('expired', 'requeued', 'deferred') THEN
		RAISE EXCEPTION 'sched._unlease: unknown way "%"', p_how
			USING ERRCODE = 'internal_error';
	END IF;
	UPDATE sched.task t
		SET state = CASE WHEN p_how = 'deferred' THEN 'p' ELSE 'r' END::"char",
			attempt = t.attempt - CASE WHEN p_how = 'expired' THEN 0 ELSE 1 END,
			delivered_at = CASE WHEN p_how = 'deferred' THEN NULL ELSE t.delivered_at END,
			lease_until = NULL,
			lease_owner = NULL,
			last_error = CASE WHEN p_how = 'deferred' THEN t.last_error ELSE p_error END
		WHERE t.bucket = ANY (p_buckets) AND t.id = ANY (p_ids) AND t.state = 'd';
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;
COMMENT ON FUNCTION sched._unlease(smallint[], bigint[], text, text) IS 'internal: take back the lease of locked delivered tasks (expired, requeued or deferred: the reverse of sched._lease)';

/*
 * How many of p_want due tasks of type b a claim may lease now, within the
 * type's concurrency cap and rate limit; written once for the three claims
 * (sched.claim, sched._http_claim, sched._sql_claim).
 *   want     how many (0: none);
 *   tokens   the tokens taken from the type's bucket: the claim gives back
 *            those it does not use (sched._return_tokens);
 *   held     the concurrency cap held the type back;
 *   next_at  when the type's next token comes, if it ran out; or when to
 *            look again while a following router's lease on this node's
 *            shares of the split limits is not in force (none is taken).
 * One claim at a time counts a capped type's leases, holding the type's
 * row (and reading its cap there, as it is now); so does a type whose keys
 * are capped, for sched._pick to count each key's leases (the drain holds
 * the row too).  With p_wait the claim
 * waits for another's (sched.claim, a consumer's call); without it the type
 * is held (a worker, which looks again at its next claim and never waits
 * for an administrator's open transaction).
 */
/*
 * The deliveries of type p_biz awaiting acknowledgement, counted up to
 * p_up_to: what a concurrency cap or a consumer pace cap leaves room for.
 * (PL/pgSQL, so that its plan is kept.)
 */
CREATE OR REPLACE FUNCTION sched._awaiting_ack(p_biz text, p_up_to int) RETURNS int
LANGUAGE plpgsql STABLE
AS $$
BEGIN
	RETURN (SELECT pg_catalog.count(*) FROM (SELECT FROM sched.task t
											 WHERE t.biz_type = p_biz AND t.state = 'd'
											 LIMIT p_up_to) s);
END
$$;
COMMENT ON FUNCTION sched._awaiting_ack(text, int) IS 'internal: a type''s deliveries awaiting acknowledgement, counted up to a limit';

CREATE OR REPLACE FUNCTION sched._claim_allowance(b sched.biz, p_want int, p_now timestamptz, p_wait boolean,
									   OUT want int, OUT tokens int, OUT held boolean,
									   OUT next_at timestamptz)
LANGUAGE plpgsql
AS $$
DECLARE
	v_cap int;
BEGIN
	want := p_want;
	tokens := 0;
	held := false;
	IF (b.rate_limit IS NOT NULL OR b.max_concurrency IS NOT NULL) AND sched._share_lapsed() THEN
		-- A following router has not renewed this node's shares of the
		-- split limits (src/cluster/share_lease.c): look again shortly.
		want := 0;
		next_at := p_now + interval '100 milliseconds';
		RETURN;
	END IF;
	IF b.max_concurrency IS NOT NULL OR b.key_max_concurrency IS NOT NULL THEN
		IF p_wait THEN
			SELECT x.max_concurrency INTO v_cap FROM sched.biz x WHERE x.name = b.name FOR NO KEY UPDATE;
		ELSE
			SELECT x.max_concurrency INTO v_cap FROM sched.biz x WHERE x.name = b.name
			FOR NO KEY UPDATE SKIP LOCKED;
			IF NOT FOUND THEN
				held := true;
				want := 0;
				RETURN;
			END IF;
		END IF;
		IF v_cap IS NOT NULL THEN
			want := LEAST(want, v_cap - sched._awaiting_ack(b.name, v_cap));
			IF want <= 0 THEN
				held := true;		-- at its concurrency cap
				want := 0;
				RETURN;
			END IF;
		END IF;
	END IF;
	IF b.rate_limit IS NOT NULL AND want > 0 THEN
		tokens := sched._take_tokens(b.name, b.rate_limit, b.burst, want);
		IF tokens < want THEN
			-- Out of tokens: look again when the next one comes.
			next_at := p_now + pg_catalog.make_interval(secs => GREATEST(0.01, 1.0 / b.rate_limit));
		END IF;
		want := tokens;
	END IF;
END
$$;
COMMENT ON FUNCTION sched._claim_allowance(sched.biz, int, timestamptz, boolean) IS 'internal: how many due tasks of a type a claim may lease now, within its concurrency cap and rate limit';

/*
 * The keys of type p_biz that have parked tasks (state 'r'), in key order,
 * from p_from on (p_from itself left out), at most p_max: a skip scan of
 * task_parked_idx, one probe a key, however many tasks each key has.  The
 * tasks without a key are the key '' (no key is empty), first in the order.
 * (PL/pgSQL, so that its plan is kept: a SQL function with a SET clause is
 * planned at every call, a millisecond over 60 partitions.)
 */
CREATE OR REPLACE FUNCTION sched._parked_keys(p_biz text, p_from text, p_max int) RETURNS text[]
LANGUAGE plpgsql STABLE
SET enable_seqscan = off
AS $$
BEGIN
	RETURN (
		WITH RECURSIVE walk(k) AS (
			(SELECT coalesce(t.key, '') FROM sched.task t
			 WHERE t.biz_type = p_biz AND t.state = 'r' AND coalesce(t.key, '') >= p_from
			 ORDER BY coalesce(t.key, '') LIMIT 1)
			UNION ALL
			SELECT (SELECT coalesce(t.key, '') FROM sched.task t
					WHERE t.biz_type = p_biz AND t.state = 'r' AND coalesce(t.key, '') > w.k
					ORDER BY coalesce(t.key, '') LIMIT 1)
			FROM walk w WHERE w.k IS NOT NULL
		)
		SELECT coalesce(pg_catalog.array_agg(s.k), '{}') FROM (
			SELECT w.k FROM walk w WHERE w.k IS NOT NULL AND w.k <> p_from LIMIT p_max) s);
END
$$;
COMMENT ON FUNCTION sched._parked_keys(text, text, int) IS 'internal: the keys of a type with parked tasks, in key order from a key on';

/*
 * Lock and return the parked tasks of type b (state 'r': due, waiting for
 * a claim, the drain or a worker) that a delivery of at most p_max takes
 * now, in the order they go (ord):
 *   - a type none of whose tasks ever had a key (b.keyed false): by
 *     priority, highest first, then run_at and id;
 *   - a keyed type: in turns by key, the tasks without a key taking their
 *     turn as one key more.  Every key with parked tasks gets one before
 *     any gets a second (each key's own in priority then run-at order),
 *     and the tasks of each turn go by priority then run_at.  A key alone
 *     gets all p_max.  When more keys wait than p_max, the turns go in key
 *     order from where this session's last pick of the type stopped (kept
 *     in a session setting), so that no key waits behind others for ever.
 * Rows another transaction holds are passed over (SKIP LOCKED).  The keys'
 * shares are water-filled: a key with fewer tasks than its share leaves
 * the rest to the keys that had more, in at most three more rounds.
 * A keyed type's key_max_concurrency and key_rate_limit hold each key to
 * its own cap and token bucket (src/core/key_limiter.c); the caller holds
 * the type's row when the keys are capped (sched._claim_allowance, the
 * drain), so that no other pick counts a key's deliveries meanwhile.  The
 * tasks without a key have no key's limits.
 */
CREATE OR REPLACE FUNCTION sched._pick(b sched.biz, p_max int)
RETURNS TABLE(bucket smallint, id bigint, run_at timestamptz, schedule text, attempt int, key text,
			  priority smallint)
LANGUAGE plpgsql
-- By index, whatever the statistics say (see sched._lock).
SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
	v_setting text;
	v_lap_setting text;
	v_cursor text;
	v_lap_end text;
	v_keys text[];
	v_n int;
	v_need int := p_max;
	v_round int := 0;
	v_ids bigint[] := '{}';
	v_buckets smallint[] := '{}';
	v_run_ats timestamptz[] := '{}';
	v_schedules text[] := '{}';
	v_attempts int[] := '{}';
	v_task_keys text[] := '{}';
	v_priorities smallint[] := '{}';
	v_shares int[];
	v_allowed int[];
	v_tokens int[];
	v_in_flight text[];
	r record;
BEGIN
	IF NOT b.keyed THEN
		RETURN QUERY
		SELECT t.bucket, t.id, t.run_at, t.schedule, t.attempt, t.key, t.priority FROM sched.task t
		WHERE t.biz_type = b.name AND t.state = 'r' AND coalesce(t.key, '') = ''
		ORDER BY coalesce(t.key, ''), t.priority DESC, t.run_at, t.id
		LIMIT p_max
		FOR UPDATE SKIP LOCKED;
		RETURN;
	END IF;

	-- The keys whose turn it is: those after the cursor, the keyless tasks
	-- (key ''), then the keys from the first up to the cursor.  The turns
	-- go in laps: a lap ends at the last key parked when it began (a second
	-- setting), so that keys that keep coming after the cursor (increasing
	-- keys, as order numbers are) wait for the next lap, not the keyless
	-- tasks and the keys before the cursor for ever.
	v_setting := 'delaysched_pick.k' || pg_catalog.md5(b.name);
	v_lap_setting := 'delaysched_pick.e' || pg_catalog.md5(b.name);
	v_cursor := coalesce(pg_catalog.current_setting(v_setting, true), '');
	v_lap_end := coalesce(pg_catalog.current_setting(v_lap_setting, true), '');
	IF v_lap_end = '' OR v_lap_end <= v_cursor THEN
		v_lap_end := coalesce((SELECT coalesce(t.key, '') FROM sched.task t
							   WHERE t.biz_type = b.name AND t.state = 'r'
							   ORDER BY coalesce(t.key, '') DESC, t.priority, t.run_at DESC, t.id DESC
							   LIMIT 1), '');
	END IF;
	v_keys := ARRAY(SELECT k FROM pg_catalog.unnest(sched._parked_keys(b.name, v_cursor, p_max)) k
					WHERE k <= v_lap_end);
	IF pg_catalog.cardinality(v_keys) < p_max THEN
		-- The lap ends: the keyless tasks, then the next lap from the first key.
		IF EXISTS (SELECT FROM sched.task t
				   WHERE t.biz_type = b.name AND t.state = 'r' AND coalesce(t.key, '') = '') THEN
			v_keys := v_keys || ''::text;
		END IF;
		IF pg_catalog.cardinality(v_keys) < p_max THEN
			v_keys := v_keys || ARRAY(SELECT k FROM pg_catalog.unnest(
										  sched._parked_keys(b.name, '', p_max + pg_catalog.cardinality(v_keys))) k
									  WHERE k <> ALL (v_keys)
									  LIMIT p_max - pg_catalog.cardinality(v_keys));
		END IF;
		v_lap_end := '';
	END IF;
	PERFORM pg_catalog.set_config(v_lap_setting, v_lap_end, false);
	IF pg_catalog.cardinality(v_keys) = p_max THEN
		PERFORM pg_catalog.set_config(v_setting, v_keys[p_max], false);
	END IF;
	v_n := pg_catalog.cardinality(v_keys);
	IF v_n = 0 THEN
		RETURN;
	END IF;

	-- Each round shares what is still wanted among the keys of the round,
	-- one more to the first (need mod n) of them.  A key's limits may cut
	-- its share (its room under key_max_concurrency, its tokens under
	-- key_rate_limit; not the keyless tasks'); a key that filled its whole
	-- share may have more, and is in the next round.
	WHILE v_need > 0 AND v_n > 0 AND v_round < 4 LOOP
		v_round := v_round + 1;
		v_shares := ARRAY(SELECT v_need / v_n + CASE WHEN g <= v_need % v_n THEN 1 ELSE 0 END
						  FROM pg_catalog.generate_series(1, v_n) g);
		v_allowed := v_shares;
		IF b.key_max_concurrency IS NOT NULL THEN
			-- Its cap less its deliveries awaiting acknowledgement and what
			-- this pick took already (the caller holds the type's row: no
			-- other pick of the type counts meanwhile).  The type's
			-- deliveries are read once a pick, as a type's cap reads them
			-- (task_leased_idx): an index of the keyed deliveries cost every
			-- keyed delivery an index insert, a third of a keyed burst's
			-- time.
			IF v_in_flight IS NULL THEN
				v_in_flight := ARRAY(SELECT t.key FROM sched.task t
									 WHERE t.biz_type = b.name AND t.state = 'd' AND t.key = ANY (v_keys));
			END IF;
			v_allowed := ARRAY(
				SELECT CASE WHEN u.k = '' THEN u.a ELSE GREATEST(0, LEAST(u.a, b.key_max_concurrency
					- pg_catalog.cardinality(pg_catalog.array_positions(v_in_flight, u.k))
					- pg_catalog.cardinality(pg_catalog.array_positions(v_task_keys, u.k)))) END
				FROM unnest(v_keys, v_allowed) WITH ORDINALITY AS u(k, a, o) ORDER BY u.o);
		END IF;
		IF b.key_rate_limit IS NOT NULL THEN
			v_tokens := sched._take_key_tokens(b.name, v_keys,
				ARRAY(SELECT CASE WHEN u.k = '' THEN 0 ELSE u.a END
					  FROM unnest(v_keys, v_allowed) WITH ORDINALITY AS u(k, a, o) ORDER BY u.o),
				b.key_rate_limit, b.key_burst);
			v_allowed := ARRAY(SELECT CASE WHEN u.k = '' THEN u.a ELSE u.t END
							   FROM unnest(v_keys, v_allowed, v_tokens) WITH ORDINALITY AS u(k, a, t, o)
							   ORDER BY u.o);
		END IF;
		WITH got AS MATERIALIZED (
			SELECT g.pos, x.*
			FROM pg_catalog.unnest(v_keys) WITH ORDINALITY AS g(k, pos),
			LATERAL (SELECT t.bucket, t.id, t.run_at, t.schedule, t.attempt, t.key, t.priority
					 FROM sched.task t
					 WHERE t.biz_type = b.name AND t.state = 'r' AND coalesce(t.key, '') = g.k
					   AND t.id <> ALL (v_ids)
					 ORDER BY coalesce(t.key, ''), t.priority DESC, t.run_at, t.id
					 LIMIT v_allowed[g.pos]
					 FOR UPDATE OF t SKIP LOCKED) x
		), counts AS (
			-- (A join, not a count of got per key: with a batch's thousand
			-- keys that read got a million times, most of a pick's time.)
			SELECT g.k, g.pos, pg_catalog.count(got.pos)::int AS n
			FROM pg_catalog.unnest(v_keys) WITH ORDINALITY AS g(k, pos)
				 LEFT JOIN got ON got.pos = g.pos
			GROUP BY g.k, g.pos
		)
		SELECT coalesce(pg_catalog.array_agg(got.id), '{}') AS ids,
			   pg_catalog.array_agg(got.bucket) AS buckets, pg_catalog.array_agg(got.run_at) AS run_ats,
			   pg_catalog.array_agg(got.schedule) AS schedules, pg_catalog.array_agg(got.attempt) AS attempts,
			   pg_catalog.array_agg(got.key) AS task_keys, pg_catalog.array_agg(got.priority) AS priorities,
			   (SELECT pg_catalog.array_agg(c.n ORDER BY c.pos) FROM counts c) AS got,
			   (SELECT coalesce(pg_catalog.array_agg(c.k ORDER BY c.pos), '{}') FROM counts c
				WHERE c.n > 0 AND c.n = v_shares[c.pos]) AS more
		INTO r FROM got;
		IF b.key_rate_limit IS NOT NULL THEN
			-- The tokens of the tasks a key did not have (or others held).
			PERFORM sched._return_key_tokens(b.name, v_keys,
				ARRAY(SELECT CASE WHEN u.k = '' THEN 0 ELSE u.t - u.n END
					  FROM unnest(v_keys, v_tokens, r.got) WITH ORDINALITY AS u(k, t, n, o) ORDER BY u.o));
		END IF;
		v_ids := v_ids || r.ids;
		v_buckets := v_buckets || r.buckets;
		v_run_ats := v_run_ats || r.run_ats;
		v_schedules := v_schedules || r.schedules;
		v_attempts := v_attempts || r.attempts;
		v_task_keys := v_task_keys || r.task_keys;
		v_priorities := v_priorities || r.priorities;
		v_need := v_need - pg_catalog.cardinality(r.ids);
		v_keys := r.more;
		v_n := pg_catalog.cardinality(v_keys);
	END LOOP;

	-- The turns: a key's first task, then its second, and so on.
	RETURN QUERY
	SELECT u.bucket, u.id, u.run_at, u.schedule, u.attempt, u.key, u.priority
	FROM (SELECT u.*, pg_catalog.row_number() OVER (PARTITION BY coalesce(u.key, '')
														ORDER BY u.priority DESC, u.run_at, u.id) AS turn
		  FROM unnest(v_buckets, v_ids, v_run_ats, v_schedules, v_attempts, v_task_keys, v_priorities)
			   AS u(bucket, id, run_at, schedule, attempt, key, priority)) u
	ORDER BY u.turn, u.priority DESC, u.run_at, u.id;
END
$$;
COMMENT ON FUNCTION sched._pick(sched.biz, int) IS 'internal: lock the parked tasks of a type that a delivery takes now: by priority, in turns by key';

/*
 * Lock what a delivery of type b takes now, at most p_want: its parked
 * tasks (sched._pick), then, with p_pending (sched.claim) and room left,
 * its tasks due at p_now that the scanner has not announced yet, in run-at
 * order (but for a type whose keys have limits, which sched._pick alone
 * applies: its tasks wait for the scanner's announcement).  The firings of schedules among them make their next firings, and
 * those their schedules do not send are returned in skipped, to be left
 * alone (sched._fired).  Arrays in delivery order.
 */
CREATE OR REPLACE FUNCTION sched._take(b sched.biz, p_want int, p_now timestamptz, p_pending boolean DEFAULT false,
							OUT ids bigint[], OUT buckets smallint[], OUT skipped bigint[],
							OUT keys text[], OUT priorities smallint[])
LANGUAGE plpgsql
-- By index, whatever the statistics say (see sched._lock).
SET enable_seqscan = off
AS $$
BEGIN
	WITH picked AS MATERIALIZED (
		SELECT p.*, 1 AS part, pg_catalog.row_number() OVER () AS ord FROM sched._pick(b, p_want) p
	), pending AS MATERIALIZED (
		SELECT t.bucket, t.id, t.run_at, t.schedule, t.attempt, t.key, t.priority, 2 AS part,
			   pg_catalog.row_number() OVER (ORDER BY t.run_at, t.id) AS ord
		FROM (SELECT t.* FROM sched.task t
			  WHERE p_pending AND t.biz_type = b.name AND t.state = 'p' AND t.run_at <= p_now
				-- (not a type whose keys have limits: only sched._pick counts them)
				AND b.key_max_concurrency IS NULL AND b.key_rate_limit IS NULL
			  ORDER BY t.run_at, t.id
			  LIMIT GREATEST(0, p_want - (SELECT count(*) FROM picked))
			  FOR UPDATE SKIP LOCKED) t
	), chosen AS (
		SELECT * FROM picked
		UNION ALL
		SELECT * FROM pending
	)
	SELECT pg_catalog.array_agg(c.id ORDER BY c.part, c.ord),
		   pg_catalog.array_agg(c.bucket ORDER BY c.part, c.ord),
		   CASE WHEN pg_catalog.bool_or(c.schedule IS NOT NULL AND c.attempt = 0) THEN
			   sched._fired(pg_catalog.array_agg(c.id), pg_catalog.array_agg(c.bucket),
							pg_catalog.array_agg(c.run_at), pg_catalog.array_agg(b.name),
							pg_catalog.array_agg(CASE WHEN c.attempt = 0 THEN c.schedule END), p_now) END,
		   pg_catalog.array_agg(c.key ORDER BY c.part, c.ord),
		   pg_catalog.array_agg(c.priority ORDER BY c.part, c.ord)
	INTO ids, buckets, skipped, keys, priorities
	FROM chosen c;
END
$$;
COMMENT ON FUNCTION sched._take(sched.biz, int, timestamptz, boolean) IS 'internal: lock the tasks a delivery of a type takes now, and let the firings among them fire';
