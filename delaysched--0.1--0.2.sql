/*
 * delaysched--0.1--0.2.sql
 *		Update a 0.1 database to 0.2: recurring schedules.
 *
 * Every object this script creates or replaces is written as in
 * delaysched--0.2.sql, so that an updated database has the schema of a
 * fresh 0.2 install (test/t/013_upgrade.pl compares the two).
 */

\echo Use "ALTER EXTENSION delaysched UPDATE TO '0.2'" to load this file. \quit

-------------------------------------------------------------------------------
-- The bucket of a run-at time in C, so that sched._bucket is inlined
-------------------------------------------------------------------------------

-- The partition of a task due at run_at, of so many: its Unix second modulo
-- their number (src/tick.c, where the workers compute the same).
-- sched._bucket calls it with the installed number written in.
CREATE FUNCTION sched._bucket_of(run_at timestamptz, buckets int) RETURNS smallint
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'delaysched_bucket_sql';
COMMENT ON FUNCTION sched._bucket_of(timestamptz, int) IS 'internal: the partition of a task due at run_at among so many';

-- sched._bucket as 0.2 writes it, with this database's number of buckets.
DO $bucket$
BEGIN
	EXECUTE pg_catalog.format($f$
		CREATE OR REPLACE FUNCTION sched._bucket(run_at timestamptz) RETURNS smallint
		LANGUAGE sql IMMUTABLE PARALLEL SAFE
		AS $b$SELECT sched._bucket_of(run_at, %s)$b$
	$f$, sched._bucket_count());
END
$bucket$;

-------------------------------------------------------------------------------
-- Schedules: the rule engine (src/schedule_*.c)
-------------------------------------------------------------------------------

-- Holiday calendars for the "workday" unit of readable repeat rules.
CREATE TABLE sched.holidays (
	calendar	 text NOT NULL CHECK (calendar ~ '^[a-z_][a-z0-9_]*$' AND pg_catalog.octet_length(calendar) <= 63),
	day			 date NOT NULL,
	PRIMARY KEY (calendar, day)
);
COMMENT ON TABLE sched.holidays IS 'holiday calendars of delaysched schedules: a "workday" rule naming a calendar skips its days';
SELECT pg_catalog.pg_extension_config_dump('sched.holidays', '');

CREATE FUNCTION sched._check_schedule(schedule text, time_zone text) RETURNS text
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_check_schedule';
COMMENT ON FUNCTION sched._check_schedule(text, text) IS 'internal: refuse a schedule rule or time zone that is not valid; returns the kind of rule (cron, every or rule)';

CREATE FUNCTION sched._schedule_next(schedule text, time_zone text, anchor timestamptz, after timestamptz)
RETURNS timestamptz
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_schedule_next';
COMMENT ON FUNCTION sched._schedule_next(text, text, timestamptz, timestamptz) IS 'internal: the first firing of a schedule anchored at anchor strictly after after; NULL if none';

CREATE FUNCTION sched._schedule_span(schedule text, time_zone text, anchor timestamptz,
									 from_at timestamptz, to_at timestamptz,
									 OUT n bigint, OUT first_at timestamptz, OUT last_at timestamptz)
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_schedule_span';
COMMENT ON FUNCTION sched._schedule_span(text, text, timestamptz, timestamptz, timestamptz) IS 'internal: how many firings of a schedule fall in [from_at, to_at], and the first and last of them';

CREATE FUNCTION sched._next_runs(schedule text, time_zone text, after timestamptz, n int, starts_at timestamptz)
RETURNS SETOF timestamptz
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_next_runs';
COMMENT ON FUNCTION sched._next_runs(text, text, timestamptz, int, timestamptz) IS 'internal: the body of sched.next_runs';

CREATE FUNCTION sched.next_runs(schedule text, time_zone text DEFAULT 'UTC', after timestamptz DEFAULT pg_catalog.now(),
								n int DEFAULT 10, starts_at timestamptz DEFAULT NULL)
RETURNS SETOF timestamptz
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT sched._next_runs($1, $2, $3, $4, $5) $$;
COMMENT ON FUNCTION sched.next_runs(text, text, timestamptz, int, timestamptz) IS 'preview a schedule rule: its next n firings strictly after after, starting at starts_at (NULL: at after); no side effect';

-------------------------------------------------------------------------------
-- The firings' schedule column, in the live and the finished tasks
-------------------------------------------------------------------------------

ALTER TABLE sched.finished ADD COLUMN schedule text;
-- A schedule's history (sched.tasks WHERE schedule = ...); firings only.
CREATE INDEX finished_schedule_idx ON sched.finished (schedule, run_at) WHERE schedule IS NOT NULL;
ALTER TABLE sched.task ADD COLUMN schedule text;
CREATE INDEX task_schedule_idx ON sched.task (schedule) WHERE schedule IS NOT NULL;

-------------------------------------------------------------------------------
-- Fair shares: a weight per type, and the index the fair walk reads
-------------------------------------------------------------------------------

ALTER TABLE sched.biz ADD COLUMN weight int NOT NULL DEFAULT 1
	CONSTRAINT biz_weight_check CHECK (weight BETWEEN 1 AND 1000);
DROP INDEX sched.task_claimable_idx;
CREATE INDEX task_claimable_idx ON sched.task (biz_type, run_at, id, door)
	WHERE state IN ('p', 'r') AND biz_type IS NOT NULL;

-------------------------------------------------------------------------------
-- Functions whose arguments or results changed: dropped and made anew
-------------------------------------------------------------------------------

DROP FUNCTION sched._message(bigint, text, timestamptz, jsonb, int);
DROP FUNCTION sched._insert(text, timestamptz, jsonb, text);
DROP FUNCTION sched.claim(text, int);
DROP FUNCTION sched._claim(text, int);
DROP FUNCTION sched._http_claim(smallint, int, int, text[], int[]);
DROP FUNCTION sched.define_biz(text, text, text, int, interval, float8, int, int,
								text, jsonb, interval, interval, interval, text, boolean);
DROP FUNCTION sched._http_record(smallint, bigint[], smallint[], text[], int[], text[],
								 timestamptz[], int[], text[], timestamptz[], float8[]);

CREATE FUNCTION sched._message(p_id bigint, p_biz text, p_run_at timestamptz, p_payload jsonb, p_attempt int,
							   p_schedule text DEFAULT NULL)
RETURNS text
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_message';
COMMENT ON FUNCTION sched._message(bigint, text, timestamptz, jsonb, int, text) IS 'internal: the NOTIFY payload of a delivery (without the payload if it would not fit in 8000 bytes; with the schedule that made it, if any)';

/*
 * Store one validated task; with a dedupe key, return the unfinished task
 * that already holds the key instead.  Wakes the scanner after commit.
 */
CREATE FUNCTION sched._insert(p_biz text, p_run_at timestamptz, p_payload jsonb, p_dedupe_key text,
							  p_schedule text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
	v_bucket smallint := sched._bucket(p_run_at);
	v_id bigint := sched._new_id(v_bucket);
	v_existing bigint;
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
				RETURN v_existing;
			END IF;
			-- The holder finished between the two statements: try again.
		END LOOP;
	END IF;

	INSERT INTO sched.task (id, bucket, biz_type, run_at, payload, dedupe_key, created_at, schedule)
		VALUES (v_id, v_bucket, p_biz, p_run_at, p_payload, p_dedupe_key, pg_catalog.clock_timestamp(),
				p_schedule);
	PERFORM sched._tally(p_biz, 'added', 1);
	PERFORM sched._wake(p_run_at, sched._door(v_id));
	RETURN v_id;
END
$$;
COMMENT ON FUNCTION sched._insert(text, timestamptz, jsonb, text, text) IS 'internal: store a validated task (a firing of p_schedule, if given)';

/*
 * The lease transition for the functions below that deliver: state 'd',
 * attempt + 1, delivered_at, lease_until, lease_owner, written once in
 * src/lease.h and shared with the scanner's walk and drain.  The caller has
 * locked the rows; those not in one of p_states, and those in p_skip, are
 * left alone.  p_error, if not NULL, is recorded as last_error.
 */
CREATE FUNCTION sched._lease(p_buckets smallint[], p_ids bigint[], p_states "char"[],
							 p_at timestamptz, p_for interval, p_owner smallint DEFAULT NULL,
							 p_error text DEFAULT NULL, p_skip bigint[] DEFAULT NULL)
RETURNS TABLE(id bigint, bucket smallint, biz_type text, run_at timestamptz, payload jsonb,
			  attempt int, schedule text)
LANGUAGE c VOLATILE
-- Planned with the arrays' values, at every call: "t.bucket = ANY ($1)"
-- prunes the partitions only so (PostgreSQL never prunes by an array
-- parameter at run time); a generic plan searched all 60 for every id.
SET plan_cache_mode = force_custom_plan
AS 'MODULE_PATHNAME', 'delaysched_lease_sql';
COMMENT ON FUNCTION sched._lease(smallint[], bigint[], "char"[], timestamptz, interval, smallint, text, bigint[]) IS 'internal: lease locked tasks for delivery (the transition of src/lease.h)';

/*
 * The body of sched.claim.  PL/pgSQL cannot have an argument and a result
 * column of the same name (biz_type), so the public function is a SQL
 * wrapper around this one.
 */
CREATE FUNCTION sched._claim(p_biz text, p_max int)
RETURNS TABLE(id bigint, biz_type text, run_at timestamptz, payload jsonb, attempt int, schedule text)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
	b sched.biz := sched._biz(p_biz);
	v_now timestamptz := clock_timestamp();
	v_max int := p_max;
	v_tokens int := 0;
	v_claimed int;
	v_ids bigint[];
	v_buckets smallint[];
	v_skipped bigint[];
BEGIN
	PERFORM sched._require(p_max, 'max_tasks');
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
	IF b.max_concurrency IS NOT NULL THEN
		-- One claim at a time counts the type's leases and takes slots.
		SELECT * INTO b FROM sched.biz x WHERE x.name = b.name FOR NO KEY UPDATE;
		v_max := LEAST(v_max, b.max_concurrency - (
			SELECT count(*) FROM (SELECT FROM sched.task t
								  WHERE t.biz_type = b.name AND t.state = 'd'
								  LIMIT b.max_concurrency) s)::int);
	END IF;
	IF b.rate_limit IS NOT NULL AND v_max > 0 THEN
		v_tokens := sched._take_tokens(b.name, b.rate_limit, b.burst, v_max);
		v_max := v_tokens;
	END IF;
	IF v_max <= 0 THEN
		RETURN;
	END IF;
	-- Lock the tasks first: the firings of schedules among them make their
	-- next firings, and those not to be sent are cancelled, before the rest
	-- are leased.
	WITH chosen AS (
		SELECT t.bucket, t.id, t.run_at, t.schedule, t.attempt FROM sched.task t
		WHERE t.biz_type = b.name AND t.state IN ('p', 'r') AND t.run_at <= v_now
		ORDER BY t.run_at, t.id
		LIMIT v_max
		FOR UPDATE SKIP LOCKED
	)
	SELECT pg_catalog.array_agg(c.id),
		   pg_catalog.array_agg(c.bucket),
		   CASE WHEN pg_catalog.bool_or(c.schedule IS NOT NULL AND c.attempt = 0) THEN
			   sched._fired(pg_catalog.array_agg(c.id), pg_catalog.array_agg(c.bucket),
							pg_catalog.array_agg(c.run_at),
							pg_catalog.array_agg(CASE WHEN c.attempt = 0 THEN c.schedule END), v_now) END
	INTO v_ids, v_buckets, v_skipped
	FROM chosen c;
	RETURN QUERY
	SELECT l.id, l.biz_type, l.run_at, l.payload, l.attempt, l.schedule
	FROM sched._lease(v_buckets, v_ids, '{p,r}', v_now, b.ack_timeout, p_skip => v_skipped) l
	ORDER BY l.run_at, l.id;
	IF v_tokens > 0 THEN
		GET DIAGNOSTICS v_claimed = ROW_COUNT;
		PERFORM sched._return_tokens(b.name, v_tokens - v_claimed);
	END IF;
END
$$;
COMMENT ON FUNCTION sched._claim(text, int) IS 'internal: the body of sched.claim';

CREATE FUNCTION sched.claim(biz_type text, max_tasks int DEFAULT 100)
RETURNS TABLE(id bigint, biz_type text, run_at timestamptz, payload jsonb, attempt int, schedule text)
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$ SELECT * FROM sched._claim($1, $2) $$;
COMMENT ON FUNCTION sched.claim(text, int) IS 'take up to max_tasks due tasks of a type, each leased for the type''s ack_timeout';

/*
 * Lease up to p_room parked tasks of http types to HTTP worker p_worker,
 * shared between the types that have some: each type gets at most its fair
 * part of the worker's p_max_in_flight requests (p_busy_types and
 * p_busy_counts say how many each type has in flight already), so that a
 * type whose endpoint hangs cannot take every slot.  Rate limits and
 * concurrency caps apply as in sched.claim.  The lease lasts
 * sched._http_lease(timeout).  When a limit held
 * a type back, a last row with a NULL id says so: run_at is when the next
 * token of a rate-limited type comes (the worker claims again then), and
 * attempt is 1 if a type is at its fair share or concurrency cap (the
 * worker claims again once its requests that end are recorded).
 */
CREATE FUNCTION sched._http_claim(p_worker smallint, p_room int, p_max_in_flight int,
								  p_busy_types text[], p_busy_counts int[])
RETURNS TABLE(id bigint, bucket smallint, biz_type text, run_at timestamptz, payload jsonb, attempt int,
			  schedule text)
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
	v_tokens int;
	v_got int;
	v_next timestamptz;
	v_held boolean := false;
	v_ids bigint[];
	v_buckets smallint[];
	v_skipped bigint[];
	b sched.biz;
BEGIN
	SELECT pg_catalog.array_agg(x.name ORDER BY pg_catalog.random()) INTO v_types
	FROM sched.biz x
	WHERE x.delivery = 'http' AND NOT x.paused
	  AND EXISTS (SELECT FROM sched.task t WHERE t.biz_type = x.name AND t.state = 'r');
	IF v_types IS NULL THEN
		RETURN;
	END IF;
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
		v_want := LEAST(v_room, v_share - coalesce(p_busy_counts[pg_catalog.array_position(p_busy_types, v_name)], 0));
		IF v_want <= 0 THEN
			v_held := true;		-- at its fair share of the slots
			CONTINUE;
		END IF;
		SELECT * INTO b FROM sched.biz x WHERE x.name = v_name;
		IF b.max_concurrency IS NOT NULL THEN
			-- As sched.claim: one claim at a time counts the type's leases.
			-- (An administrator's open transaction changing the type holds
			-- the row: try the type again at the next claim.)
			SELECT * INTO b FROM sched.biz x WHERE x.name = v_name FOR NO KEY UPDATE SKIP LOCKED;
			IF NOT FOUND THEN
				v_held := true;
				CONTINUE;
			END IF;
			v_want := LEAST(v_want, b.max_concurrency - (
				SELECT count(*) FROM (SELECT FROM sched.task t
									  WHERE t.biz_type = b.name AND t.state = 'd'
									  LIMIT b.max_concurrency) s)::int);
			IF v_want <= 0 THEN
				v_held := true;		-- at its concurrency cap
				CONTINUE;
			END IF;
		END IF;
		v_tokens := 0;
		IF b.rate_limit IS NOT NULL THEN
			v_tokens := sched._take_tokens(b.name, b.rate_limit, b.burst, v_want);
			IF v_tokens < v_want THEN
				-- Out of tokens: look again when the next one comes.
				v_next := LEAST(v_next, v_now + pg_catalog.make_interval(secs => GREATEST(0.01, 1.0 / b.rate_limit)));
			END IF;
			v_want := v_tokens;
			CONTINUE WHEN v_want <= 0;
		END IF;
		-- As sched.claim: lock first, let the schedules among them fire.
		WITH chosen AS (
			SELECT t.bucket, t.id, t.run_at, t.schedule, t.attempt FROM sched.task t
			WHERE t.biz_type = b.name AND t.state = 'r'
			ORDER BY t.run_at, t.id
			LIMIT v_want
			FOR UPDATE SKIP LOCKED
		)
		SELECT pg_catalog.array_agg(c.id),
			   pg_catalog.array_agg(c.bucket),
			   CASE WHEN pg_catalog.bool_or(c.schedule IS NOT NULL AND c.attempt = 0) THEN
				   sched._fired(pg_catalog.array_agg(c.id), pg_catalog.array_agg(c.bucket),
								pg_catalog.array_agg(c.run_at),
								pg_catalog.array_agg(CASE WHEN c.attempt = 0 THEN c.schedule END), v_now) END
		INTO v_ids, v_buckets, v_skipped
		FROM chosen c;
		RETURN QUERY
		SELECT l.id, l.bucket, l.biz_type, l.run_at, l.payload, l.attempt, l.schedule
		FROM sched._lease(v_buckets, v_ids, '{r}', v_now, sched._http_lease(b.timeout), p_worker,
						  p_skip => v_skipped) l;
		GET DIAGNOSTICS v_got = ROW_COUNT;
		IF v_tokens > v_got THEN
			PERFORM sched._return_tokens(b.name, v_tokens - v_got);
		END IF;
		v_room := v_room - v_got;
	END LOOP;
	IF v_next IS NOT NULL OR v_held THEN
		RETURN QUERY SELECT NULL::bigint, NULL::smallint, NULL::text, v_next, NULL::jsonb,
							CASE WHEN v_held THEN 1 ELSE 0 END, NULL::text;
	END IF;
END
$$;
COMMENT ON FUNCTION sched._http_claim(smallint, int, int, text[], int[]) IS 'internal: lease parked tasks of http types to an HTTP worker';

/*
 * Per-type grants (see sched._is_admin).  Granting what a role holds
 * already, or revoking what it does not, changes nothing and says so.
 */
/*
 * The checks grant_biz and revoke_biz share: the role exists (a regrole
 * given as a bare oid is not checked by its input function, and a row for
 * an oid no role has would arm a role created later), and the privilege
 * is one of the three.
 */
CREATE FUNCTION sched._check_grant(p_role regrole, p_privilege text) RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
	PERFORM sched._require(p_role, 'role');
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid = p_role::oid) THEN
		RAISE EXCEPTION 'role with OID % does not exist', p_role::oid
			USING ERRCODE = 'undefined_object',
				  HINT = 'Name the role, for example sched.grant_biz(''orders'', ''app_role'').';
	END IF;
	IF p_privilege NOT IN ('schedule', 'consume', 'read') THEN
		RAISE EXCEPTION 'invalid privilege "%"', sched._clip(p_privilege)
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'A privilege is ''schedule'' (add, cancel, reschedule, retry), ''consume'' (claim, ack, nack) or ''read'' (the views).';
	END IF;
END
$$;
COMMENT ON FUNCTION sched._check_grant(regrole, text) IS 'internal: refuse a role that does not exist or an unknown privilege';

-------------------------------------------------------------------------------
-- Functions whose bodies changed
-------------------------------------------------------------------------------

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
 */
CREATE OR REPLACE FUNCTION sched._lock(p_id bigint, p_states "char"[], p_privilege text DEFAULT NULL) RETURNS smallint
LANGUAGE plpgsql
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
-- a third of an acknowledgement's time.  The generic plan runs as fast.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
	v_done bigint[];
	v_firings bigint[];
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
									created_at, delivered_at, finished_at, last_error, schedule)
		SELECT gone.id, gone.biz_type, gone.run_at, p_state, gone.attempt, gone.payload,
			   gone.dedupe_key, gone.created_at, gone.delivered_at, pg_catalog.clock_timestamp(),
			   coalesce(p_error, gone.last_error), gone.schedule
		FROM gone
		RETURNING id, schedule, attempt
	)
	SELECT coalesce(pg_catalog.array_agg(stored.id), '{}'),
		   pg_catalog.array_agg(stored.id) FILTER (WHERE stored.schedule IS NOT NULL AND stored.attempt = 0)
	INTO v_done, v_firings FROM stored;
	IF p_state = 'cancelled' AND v_firings IS NOT NULL THEN
		FOR f IN SELECT x.id, x.run_at, x.schedule FROM sched.finished x
				 WHERE x.id = ANY (v_firings) ORDER BY x.run_at LOOP
			PERFORM sched._fire_one(f.id, f.run_at, f.schedule, sched._door(f.id), true);
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
 * Give a locked task a new run_at (and so maybe a new bucket), keeping its
 * id, as pending.  Delete and insert rather than UPDATE, so that no
 * concurrent locker ever meets a row moved to another partition.
 */
CREATE OR REPLACE FUNCTION sched._move(p_bucket smallint, p_id bigint, p_run_at timestamptz, p_error text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
	WITH gone AS (
		DELETE FROM sched.task t WHERE t.bucket = p_bucket AND t.id = p_id
		RETURNING t.*
	)
	INSERT INTO sched.task (id, bucket, biz_type, run_at, state, attempt, payload, dedupe_key,
							created_at, delivered_at, lease_until, last_error, schedule)
	SELECT gone.id, sched._bucket(p_run_at), gone.biz_type, p_run_at, 'p', gone.attempt,
		   gone.payload, gone.dedupe_key, gone.created_at, gone.delivered_at, NULL,
		   coalesce(p_error, gone.last_error), gone.schedule
	FROM gone;
	PERFORM sched._wake(p_run_at, sched._door(p_id));
END
$$;
COMMENT ON FUNCTION sched._move(smallint, bigint, timestamptz, text) IS 'internal: make a locked task pending again at a new time';

DROP FUNCTION sched._purge(timestamptz, int, int, int);
/*
 * Remove finished tasks past their retention, a batch at a time, oldest
 * first.  Only done and cancelled tasks finished at or after p_done_from,
 * and dead ones finished at or after p_dead_from: the sweep passes where the
 * previous one left off, so as not to read again the index entries of the
 * rows it removed, which stay until vacuum (while a transaction holds back
 * the xmin horizon, all of them).  Each kind is searched apart, so that
 * neither steps over the other's rows (dead tasks are kept longer).
 */
CREATE FUNCTION sched._purge(p_now timestamptz, p_retention_s int, p_dead_retention_s int, p_batch int,
							 p_done_from timestamptz DEFAULT '-infinity',
							 p_dead_from timestamptz DEFAULT '-infinity')
RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
	n int;
	n_attempts int;
BEGIN
	-- By primary key: joining the delete to the chosen rows could plan a
	-- hash join over the whole table.  Rows another transaction holds (a
	-- retry not committed yet) wait for a later sweep.
	DELETE FROM sched.finished f WHERE f.id = ANY (ARRAY(
		SELECT l.id FROM sched.finished l WHERE l.id = ANY (ARRAY(
		SELECT u.id FROM (
			(SELECT o.id, o.finished_at FROM sched.finished o
			 WHERE o.finished_at >= p_done_from
			   AND o.finished_at < p_now - pg_catalog.make_interval(secs => p_retention_s)
			   AND o.state <> 'dead'
			 ORDER BY o.finished_at LIMIT p_batch)
			UNION ALL
			(SELECT o.id, o.finished_at FROM sched.finished o
			 WHERE o.finished_at >= p_dead_from
			   AND o.finished_at < p_now - pg_catalog.make_interval(secs => p_dead_retention_s)
			   AND o.state = 'dead'
			 ORDER BY o.finished_at LIMIT p_batch)
		) u
		ORDER BY u.finished_at
		LIMIT p_batch))
		FOR UPDATE SKIP LOCKED));
	GET DIAGNOSTICS n = ROW_COUNT;
	-- HTTP attempts, as long as the longer retention (a dead task keeps its
	-- history while it is kept).
	DELETE FROM sched.attempt a WHERE a.ctid = ANY (ARRAY(
		SELECT o.ctid FROM sched.attempt o
		WHERE o.started_at < p_now - pg_catalog.make_interval(secs => GREATEST(p_retention_s, p_dead_retention_s))
		LIMIT p_batch
		FOR UPDATE SKIP LOCKED));
	GET DIAGNOSTICS n_attempts = ROW_COUNT;
	-- The grants of roles dropped since the last sweep (DROP ROLE cannot
	-- reach this table), long before the OID counter could come round to
	-- give a dropped role's OID to a new role.
	DELETE FROM sched.biz_grant g WHERE g.ctid = ANY (ARRAY(
		SELECT o.ctid FROM sched.biz_grant o
		WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid = o.grantee)
		FOR UPDATE SKIP LOCKED));
	RETURN GREATEST(n, n_attempts);
END
$$;
COMMENT ON FUNCTION sched._purge(timestamptz, int, int, int, timestamptz, timestamptz) IS 'internal: remove finished tasks and HTTP attempts past their retention';

/*
 * Deliveries of a range whose lease ran out: redeliver (attempt + 1), make
 * pull tasks claimable again, park the tasks of a paused type (until
 * sched.resume) or of a limited one (for the drain, which takes a token
 * for the redelivery; with p_park_all every notify type is limited), or
 * declare dead after max_attempts.  Only leases that ran out at or after
 * p_from: the sweep passes where the previous one left off, so as not to
 * read again the leases of acknowledged tasks, which stay in the index
 * until vacuum (while a transaction holds back the xmin horizon, all of
 * them).
 */
DROP FUNCTION sched._expire_leases(smallint, timestamptz, int, boolean);
CREATE FUNCTION sched._expire_leases(p_range smallint, p_now timestamptz, p_batch int,
									 p_park_all boolean DEFAULT false,
									 p_from timestamptz DEFAULT '-infinity')
RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
	r record;
	n int := 0;
	v_error text;
BEGIN
	FOR r IN
		SELECT t.bucket, t.id, t.biz_type, t.run_at, t.payload, t.attempt, t.schedule,
			   b.delivery, b.channel, b.max_attempts, b.ack_timeout, b.paused,
			   (b.rate_limit IS NOT NULL OR b.max_concurrency IS NOT NULL OR p_park_all) AS limited
		FROM sched.task t JOIN sched.biz b ON b.name = t.biz_type
		WHERE t.door = p_range AND t.state = 'd' AND t.lease_until <= p_now
		  AND t.lease_until >= p_from
		ORDER BY t.lease_until
		LIMIT p_batch
		FOR UPDATE OF t SKIP LOCKED
	LOOP
		IF r.delivery = 'http' THEN
			-- The HTTP worker that sent it did not record a result: it died.
			v_error := pg_catalog.format('no_result: no result recorded for the HTTP request (attempt %s of %s)',
										 r.attempt, r.max_attempts);
		ELSE
			v_error := pg_catalog.format('ack_timeout: not acknowledged within %s (attempt %s of %s)',
										 r.ack_timeout, r.attempt, r.max_attempts);
		END IF;
		PERFORM sched._tally(r.biz_type, 'ack_timeout', 1);
		IF r.attempt >= r.max_attempts THEN
			PERFORM sched._finish(r.bucket, ARRAY[r.id], 'dead', v_error);
		ELSIF r.delivery IN ('pull', 'http') OR r.paused OR r.limited THEN
			-- Claimable again, or parked until sched.resume, for the drain or
			-- for the HTTP workers.
			UPDATE sched.task t SET state = 'r', lease_until = NULL, lease_owner = NULL,
					last_error = v_error
				WHERE t.bucket = r.bucket AND t.id = r.id;
			IF r.paused THEN
				NULL;
			ELSIF r.delivery = 'http' THEN
				PERFORM sched._wake_http();
			ELSIF r.delivery = 'pull' THEN
				PERFORM pg_catalog.pg_notify(r.channel, sched._announcement(r.biz_type));
			ELSE
				PERFORM sched._note_parked(r.biz_type);
			END IF;
		ELSE
			PERFORM FROM sched._lease(ARRAY[r.bucket], ARRAY[r.id], '{d}', pg_catalog.clock_timestamp(),
									  r.ack_timeout, p_error => v_error);
			PERFORM pg_catalog.pg_notify(r.channel,
				sched._message(r.id, r.biz_type, r.run_at, r.payload, r.attempt + 1, r.schedule));
		END IF;
		n := n + 1;
	END LOOP;
	RETURN n;
END
$$;
COMMENT ON FUNCTION sched._expire_leases(smallint, timestamptz, int, boolean, timestamptz) IS 'internal: redeliver or kill deliveries of a range whose ack timeout passed';

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
							created_at, delivered_at, last_error, schedule)
		VALUES (f.id, v_bucket, f.biz_type, v_now, 'p', 0, f.payload, f.dedupe_key,
				f.created_at, f.delivered_at, f.last_error, f.schedule);
	PERFORM sched._wake(v_now, sched._door(f.id));
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.retry(bigint) IS 'revive a dead task: pending now, attempts counted from zero; false if no dead task has this id';

CREATE OR REPLACE FUNCTION sched.drop_biz(name text, cancel_tasks boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
	v_unfinished bigint;
	v_schedules bigint;
	r record;
BEGIN
	PERFORM sched._require(name, 'name');
	PERFORM sched._require(cancel_tasks, 'cancel_tasks');
	-- Lock the type first: every function that stores a task of this type
	-- holds it FOR KEY SHARE until it commits, so none slips in between the
	-- count and the delete.
	PERFORM 1 FROM sched.biz b WHERE b.name = drop_biz.name FOR UPDATE;
	IF NOT FOUND THEN
		PERFORM sched._biz(name);	-- raises undefined_object
	END IF;
	SELECT count(*) INTO v_schedules FROM sched.schedule s WHERE s.biz_type = drop_biz.name;
	IF v_schedules > 0 AND NOT cancel_tasks THEN
		RAISE EXCEPTION 'business type "%" still has schedules', name
			USING ERRCODE = 'object_in_use',
				  DETAIL = pg_catalog.format('Schedules making tasks of it: %s.', v_schedules),
				  HINT = pg_catalog.format('Drop them with sched.drop_schedule, or drop them and cancel every task with SELECT sched.drop_biz(%L, cancel_tasks => true);', name);
	END IF;
	-- Schedules first: a firing being delivered meanwhile makes its next
	-- before this delete goes on, and the cancellation below sees it.
	DELETE FROM sched.schedule s WHERE s.biz_type = drop_biz.name;
	SELECT count(*) INTO v_unfinished FROM sched.task t WHERE t.biz_type = drop_biz.name;
	IF v_unfinished > 0 AND NOT cancel_tasks THEN
		RAISE EXCEPTION 'business type "%" still has unfinished tasks', name
			USING ERRCODE = 'object_in_use',
				  DETAIL = pg_catalog.format('Tasks pending or awaiting acknowledgement: %s.', v_unfinished),
				  HINT = pg_catalog.format('Wait for them, or cancel them with SELECT sched.drop_biz(%L, cancel_tasks => true);', name);
	END IF;
	FOR r IN SELECT t.bucket, t.id FROM sched.task t WHERE t.biz_type = drop_biz.name FOR UPDATE LOOP
		PERFORM sched._finish(r.bucket, ARRAY[r.id], 'cancelled', 'biz_dropped: business type dropped');
	END LOOP;
	DELETE FROM sched.biz b WHERE b.name = drop_biz.name;
	PERFORM sched._forget_bucket(name, true);
	RETURN v_unfinished;
END
$$;
COMMENT ON FUNCTION sched.drop_biz(text, boolean) IS 'drop a delaysched business type; with cancel_tasks, drop its schedules and cancel its unfinished tasks';

CREATE OR REPLACE FUNCTION sched.grant_biz(biz_type text, role regrole, privilege text DEFAULT 'schedule')
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
	PERFORM sched._require(biz_type, 'biz_type');
	PERFORM sched._require(role, 'role');
	PERFORM sched._require(privilege, 'privilege');
	PERFORM sched._biz(biz_type);
	PERFORM sched._check_grant(role, privilege);
	INSERT INTO sched.biz_grant (biz_type, grantee, privilege)
		VALUES (biz_type, role, privilege)
		ON CONFLICT DO NOTHING;
	RETURN FOUND;
END
$$;
COMMENT ON FUNCTION sched.grant_biz(text, regrole, text) IS 'let a role schedule, consume or read the tasks of a business type; false if it could already';

CREATE OR REPLACE FUNCTION sched.revoke_biz(biz_type text, role regrole, privilege text DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
	n int;
BEGIN
	PERFORM sched._require(biz_type, 'biz_type');
	PERFORM sched._require(role, 'role');
	PERFORM sched._biz(biz_type);
	IF privilege IS NOT NULL THEN
		PERFORM sched._check_grant(role, privilege);
	END IF;
	DELETE FROM sched.biz_grant g
		WHERE g.biz_type = revoke_biz.biz_type AND g.grantee = role
		  AND (privilege IS NULL OR g.privilege = privilege);
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;
COMMENT ON FUNCTION sched.revoke_biz(text, regrole, text) IS 'take back a role''s privilege on a business type (every privilege when NULL); returns how many were held';

-------------------------------------------------------------------------------
-- Schedules: recurring firings as ordinary tasks
-------------------------------------------------------------------------------

/*
 * A schedule keeps one pending firing: an ordinary task of its business
 * type whose "schedule" column names it (task_id).  When that task is
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
 * transaction stalls no worker.  sched.cancel of a pending firing (a user,
 * in sched._finish) does wait for the schedule's row.  sched.drop_biz
 * deletes a type's schedules before it cancels the type's tasks, so that
 * a firing made meanwhile is cancelled too.
 */
CREATE TABLE sched.schedule (
	name		 text PRIMARY KEY,
	biz_type	 text NOT NULL REFERENCES sched.biz (name),
	rule		 text NOT NULL,
	time_zone	 text NOT NULL,
	payload		 jsonb NOT NULL,
	catch_up	 text NOT NULL CHECK (catch_up IN ('latest', 'all', 'none')),
	allow_overlap boolean NOT NULL,
	paused		 boolean NOT NULL DEFAULT false,
	starts_at	 timestamptz,
	ends_at		 timestamptz,
	-- the start the rule counts from: starts_at, or the second it was defined
	anchor		 timestamptz NOT NULL,
	-- the earliest firing not yet delivered or skipped (paused: where
	-- resume_schedule starts); NULL once the schedule has ended
	next_run_at	 timestamptz,
	-- the pending firing whose delivery makes the next one (the last of a
	-- catch-up batch); NULL while paused or ended
	task_id		 bigint,
	-- when task_id was made, by the clock of the path that made it: a
	-- firing made after its own instant stands for a catch-up
	task_made_at timestamptz,
	last_run_at	 timestamptz,
	last_task_id bigint,
	runs		 bigint NOT NULL DEFAULT 0,
	missed		 bigint NOT NULL DEFAULT 0,
	created_at	 timestamptz NOT NULL DEFAULT pg_catalog.now(),
	updated_at	 timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE sched.schedule IS 'delaysched recurring schedules; change with sched.define_schedule and friends, read sched.schedules';
CREATE INDEX schedule_biz_type_idx ON sched.schedule (biz_type);
SELECT pg_catalog.pg_extension_config_dump('sched.schedule', '');

/*
 * Make the firings of schedule s from instant p_from on, as of p_now,
 * following its catch-up policy, and say what became of it: the firing
 * whose delivery makes the next (task_id), the earliest firing not yet
 * delivered (next_run_at), and how many firings were skipped (missed).
 * Both NULL: the schedule has ended.  An 'all' batch goes into range
 * p_door, so that one scanner delivers it in order.
 */
CREATE FUNCTION sched._materialise(s sched.schedule, p_from timestamptz, p_now timestamptz, p_door smallint,
								   OUT task_id bigint, OUT next_run_at timestamptz, OUT missed bigint)
LANGUAGE plpgsql
AS $$
DECLARE
	v_end timestamptz := coalesce(s.ends_at, 'infinity');
	v_span record;
	v_at timestamptz;
BEGIN
	missed := 0;
	IF p_from IS NULL OR p_from > v_end THEN
		RETURN;
	END IF;
	IF p_from > p_now THEN
		v_at := p_from;
	ELSE
		-- Firings were missed: [p_from, now] holds at least p_from.
		v_span := sched._schedule_span(s.rule, s.time_zone, s.anchor, p_from, LEAST(p_now, v_end));
		IF s.catch_up = 'all' THEN
			task_id := sched._insert_firings(s, p_from, LEAST(v_span.n, 1000)::int, p_door);
			next_run_at := p_from;
			RETURN;
		ELSIF s.catch_up = 'latest' AND v_span.n > 0 THEN
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
		task_id := sched._insert(s.biz_type, v_at, s.payload, NULL, s.name);
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
CREATE FUNCTION sched._insert_firings(s sched.schedule, p_from timestamptz, p_n int, p_door smallint)
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
		FROM (SELECT y.v FROM (SELECT pg_catalog.nextval('sched.task_seq') AS v
							   FROM pg_catalog.generate_series(1, p_n * 64 * 256)) y
			  WHERE sched._door(y.v * sched._bucket_count()) = p_door
			  LIMIT p_n) x
	), stored AS (
		INSERT INTO sched.task (id, bucket, biz_type, run_at, payload, created_at, schedule)
		SELECT seqs.v * sched._bucket_count() + sched._bucket(runs.at), sched._bucket(runs.at),
			   s.biz_type, runs.at, s.payload, pg_catalog.clock_timestamp(), s.name
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
 * Cancel the pending firings of a schedule that no transaction holds (one
 * a worker is delivering is left to sched._fired), and return the earliest
 * run_at cancelled.
 */
CREATE FUNCTION sched._cancel_firings(p_name text, p_reason text) RETURNS timestamptz
LANGUAGE plpgsql
AS $$
DECLARE
	g record;
	v_first timestamptz;
BEGIN
	FOR g IN
		WITH held AS (
			SELECT t.bucket, t.id, t.run_at FROM sched.task t
			WHERE t.schedule = p_name AND t.state IN ('p', 'r')
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
COMMENT ON FUNCTION sched._cancel_firings(text, text) IS 'internal: cancel the pending firings of a schedule';

/*
 * One firing of a schedule is being delivered for the first time (or was
 * cancelled before delivery, p_cancelled): count it, and make the next.
 * Returns why the firing must not be sent (the schedule is paused, the
 * previous firing is unfinished and overlap is not allowed, or a later
 * firing is due already, catch_up is 'latest' or 'none' and this firing
 * was made ahead of its instant), or NULL to send it.  A firing that is
 * not the schedule's pending one (an earlier one of a catch-up batch, a
 * dead firing retried) only counts.  p_now is the delivering path's clock
 * (a tick's "now"), the clock itself if NULL.  'deferred' means the
 * schedule's row is locked by a transaction changing it: the delivery
 * must be put off (see sched._fired), not skipped.
 */
CREATE FUNCTION sched._fire_one(p_id bigint, p_run_at timestamptz, p_schedule text, p_door smallint,
								p_cancelled boolean DEFAULT false, p_now timestamptz DEFAULT NULL)
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
		SELECT * INTO s FROM sched.schedule x WHERE x.name = p_schedule FOR UPDATE;
	ELSE
		-- A delivering path never waits for a schedule that another
		-- transaction is changing (define, pause, drop): the firing waits.
		SELECT * INTO s FROM sched.schedule x WHERE x.name = p_schedule FOR UPDATE SKIP LOCKED;
		IF NOT FOUND AND EXISTS (SELECT FROM sched.schedule x WHERE x.name = p_schedule) THEN
			RETURN 'deferred';
		END IF;
	END IF;
	IF NOT FOUND THEN
		RETURN NULL;			-- dropped: an ordinary task now
	END IF;
	v_current := s.task_id IS NOT DISTINCT FROM p_id;
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
			WHERE x.name = s.name;
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
		WHERE x.name = s.name;
	RETURN v_skip;
END
$$;
COMMENT ON FUNCTION sched._fire_one(bigint, timestamptz, text, smallint, boolean, timestamptz) IS 'internal: count a firing of a schedule being delivered and make the next; returns why it must not be sent, or NULL';

/*
 * The firings among tasks being delivered for the first time: make each
 * schedule's next firing, count them, and cancel those that must not be
 * sent (with the reason as last_error).  A firing whose schedule another
 * transaction is changing is not waited for but put off: pending again,
 * found by the next sweep.  Returns the ids not to send, cancelled or put
 * off.  Every path that delivers calls it in the delivering transaction,
 * after locking the tasks, with its clock (p_now; NULL: the clock itself).
 *
 * The common case is set-based, whatever the number of firings: a
 * schedule's pending firing delivered before its next instant is due, the
 * schedule neither paused nor forbidding overlap, the next instant within
 * ends_at.  The next firings are stored with one INSERT and the schedules
 * counted with one UPDATE.  Every other firing -- a skip, a catch-up, an
 * ended schedule, a firing that is not the pending one -- goes through
 * sched._fire_one, in run_at order.
 */
CREATE FUNCTION sched._fired(p_ids bigint[], p_buckets smallint[], p_run_ats timestamptz[], p_schedules text[],
							 p_now timestamptz DEFAULT NULL)
RETURNS bigint[]
LANGUAGE plpgsql
AS $$
DECLARE
	v_now timestamptz := coalesce(p_now, pg_catalog.clock_timestamp());
	v_done bigint[];
	v_first timestamptz;
	v_far timestamptz;
	v_made_types text[];
	r record;
	v_reason text;
	v_skipped bigint[] := '{}';
BEGIN
	WITH fired AS MATERIALIZED (
		SELECT u.id, u.run_at, u.schedule
		FROM unnest(p_ids, p_run_ats, p_schedules) AS u(id, run_at, schedule)
		WHERE u.schedule IS NOT NULL
	), locked AS MATERIALIZED (
		SELECT x.name, x.biz_type, x.payload, x.task_id, x.paused, x.allow_overlap, x.ends_at,
			   x.rule, x.time_zone, x.anchor
		FROM sched.schedule x WHERE x.name IN (SELECT fired.schedule FROM fired)
		ORDER BY x.name
		FOR UPDATE SKIP LOCKED
	), simple AS MATERIALIZED (
		SELECT fired.id AS fired_id, fired.run_at AS fired_at, l.name, l.biz_type, l.payload, n.next_at,
			   sched._bucket(n.next_at) AS bucket
		FROM fired
		JOIN locked l ON l.name = fired.schedule AND l.task_id = fired.id,
		LATERAL (SELECT sched._schedule_next(l.rule, l.time_zone, l.anchor, fired.run_at) AS next_at) n
		WHERE NOT l.paused AND l.allow_overlap
		  AND n.next_at > v_now AND n.next_at <= coalesce(l.ends_at, 'infinity')
	), made AS MATERIALIZED (
		SELECT simple.*, sched._new_id(simple.bucket) AS id FROM simple
	), stored AS (
		INSERT INTO sched.task (id, bucket, biz_type, run_at, payload, created_at, schedule)
		SELECT made.id, made.bucket, made.biz_type, made.next_at, made.payload, pg_catalog.clock_timestamp(), made.name
		FROM made
	), counted AS (
		UPDATE sched.schedule x SET runs = x.runs + 1, last_run_at = GREATEST(x.last_run_at, made.fired_at),
				last_task_id = made.fired_id, task_id = made.id, task_made_at = v_now,
				next_run_at = made.next_at, updated_at = v_now
		FROM made WHERE x.name = made.name
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
		SELECT u.id, u.bucket, u.run_at, u.schedule
		FROM unnest(p_ids, p_buckets, p_run_ats, p_schedules) AS u(id, bucket, run_at, schedule)
		WHERE u.schedule IS NOT NULL AND u.id <> ALL (coalesce(v_done, '{}'))
		ORDER BY u.run_at, u.id
	LOOP
		v_reason := sched._fire_one(r.id, r.run_at, r.schedule, sched._door(r.id), false, v_now);
		IF v_reason = 'deferred' THEN
			-- Pending again as before this delivery, for a later sweep.
			UPDATE sched.task t SET state = 'p', attempt = t.attempt - 1, delivered_at = NULL,
					lease_until = NULL, lease_owner = NULL
				WHERE t.bucket = r.bucket AND t.id = r.id AND t.state = 'd';
			v_skipped := v_skipped || r.id;
		ELSIF v_reason IS NOT NULL THEN
			PERFORM sched._finish(r.bucket, ARRAY[r.id], 'cancelled', v_reason);
			v_skipped := v_skipped || r.id;
		END IF;
	END LOOP;
	RETURN v_skipped;
END
$$;
COMMENT ON FUNCTION sched._fired(bigint[], smallint[], timestamptz[], text[], timestamptz) IS 'internal: make the next firings of the schedules whose firings are being delivered; returns the ids not to send';

/* A schedule by name, locked, or an error naming it. */
CREATE FUNCTION sched._schedule(p_name text) RETURNS sched.schedule
LANGUAGE plpgsql
AS $$
DECLARE
	s sched.schedule;
BEGIN
	PERFORM sched._require(p_name, 'name');
	SELECT * INTO s FROM sched.schedule x WHERE x.name = p_name FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'schedule "%" does not exist', sched._clip(p_name)
			USING ERRCODE = 'undefined_object',
				  HINT = 'The schedules are listed in sched.schedules.';
	END IF;
	IF NOT sched._caller_is_admin() THEN
		PERFORM sched._require_grant(s.biz_type, 'schedule');
	END IF;
	RETURN s;
END
$$;
COMMENT ON FUNCTION sched._schedule(text) IS 'internal: look up and lock a schedule the caller may change, or raise undefined_object';

CREATE FUNCTION sched.define_schedule(name text, biz_type text, schedule text, payload jsonb DEFAULT '{}',
									  time_zone text DEFAULT 'UTC', catch_up text DEFAULT 'latest',
									  starts_at timestamptz DEFAULT NULL, ends_at timestamptz DEFAULT NULL,
									  allow_overlap boolean DEFAULT true)
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
BEGIN
	PERFORM sched._check_name(name, 'schedule name', 'Use a lowercase identifier such as ''daily_report''.');
	PERFORM sched._biz(biz_type);
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
	IF ends_at < starts_at THEN
		RAISE EXCEPTION 'ends_at (%) must not be before starts_at (%)', ends_at, starts_at
			USING ERRCODE = 'invalid_parameter_value';
	END IF;

	SELECT * INTO v_old FROM sched.schedule x WHERE x.name = define_schedule.name FOR UPDATE;
	IF FOUND THEN
		IF NOT sched._caller_is_admin() THEN
			PERFORM sched._require_grant(v_old.biz_type, 'schedule');
		END IF;
		v_paused := v_old.paused;
		-- The old definition's firings go; a replacement starts afresh.
		UPDATE sched.schedule x SET task_id = NULL WHERE x.name = v_old.name;
		PERFORM sched._cancel_firings(v_old.name, 'schedule_redefined: the schedule was redefined');
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
		v_task := sched._insert(biz_type, v_first, payload, NULL, name);
	END IF;

	INSERT INTO sched.schedule AS x (name, biz_type, rule, time_zone, payload, catch_up, allow_overlap,
									 paused, starts_at, ends_at, anchor, next_run_at, task_id, task_made_at)
		VALUES (name, biz_type, schedule, time_zone, payload, catch_up, allow_overlap,
				v_paused, starts_at, ends_at, v_anchor, v_first, v_task, v_now)
	ON CONFLICT ON CONSTRAINT schedule_pkey DO UPDATE
		SET biz_type = excluded.biz_type, rule = excluded.rule, time_zone = excluded.time_zone,
			payload = excluded.payload, catch_up = excluded.catch_up,
			allow_overlap = excluded.allow_overlap, starts_at = excluded.starts_at,
			ends_at = excluded.ends_at, anchor = excluded.anchor,
			next_run_at = excluded.next_run_at, task_id = excluded.task_id,
			task_made_at = excluded.task_made_at, updated_at = now();
	RETURN v_first;
END
$$;
COMMENT ON FUNCTION sched.define_schedule(text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean) IS 'create or replace a recurring schedule whose firings are tasks of a business type; returns its next firing time';

CREATE FUNCTION sched.drop_schedule(name text) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
	s sched.schedule;
BEGIN
	PERFORM sched._require(name, 'name');
	IF NOT EXISTS (SELECT FROM sched.schedule x WHERE x.name = drop_schedule.name) THEN
		RETURN false;
	END IF;
	s := sched._schedule(name);
	DELETE FROM sched.schedule x WHERE x.name = s.name;
	PERFORM sched._cancel_firings(s.name, 'schedule_dropped: the schedule was dropped');
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.drop_schedule(text) IS 'drop a schedule and cancel its pending firing; false if there was no such schedule';

CREATE FUNCTION sched.pause_schedule(name text) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	s sched.schedule := sched._schedule(name);
	v_first timestamptz;
BEGIN
	IF s.paused THEN
		RETURN false;
	END IF;
	UPDATE sched.schedule x SET paused = true, task_id = NULL, updated_at = now() WHERE x.name = s.name;
	v_first := sched._cancel_firings(s.name, 'schedule_paused: the schedule was paused');
	UPDATE sched.schedule x SET next_run_at = LEAST(x.next_run_at, v_first) WHERE x.name = s.name;
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.pause_schedule(text) IS 'stop a schedule''s firings until sched.resume_schedule; false if it was paused already';

CREATE FUNCTION sched.resume_schedule(name text) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	s sched.schedule := sched._schedule(name);
	m record;
BEGIN
	IF NOT s.paused THEN
		RETURN false;
	END IF;
	-- The firings missed while paused follow the catch-up policy.
	m := sched._materialise(s, s.next_run_at, clock_timestamp(),
							sched._door((hashtext(s.name)::bigint & 2147483647) * sched._bucket_count()));
	UPDATE sched.schedule x SET paused = false, task_id = m.task_id, task_made_at = clock_timestamp(),
			next_run_at = m.next_run_at,
			missed = x.missed + m.missed, updated_at = now()
		WHERE x.name = s.name;
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.resume_schedule(text) IS 'let a paused schedule fire again, catching up as its catch_up says; false if it was not paused';

-------------------------------------------------------------------------------
-- Per-type grants: by role name in a dump, decided by the session's role
-------------------------------------------------------------------------------

-- The grantee becomes a regrole.  The two views that read the column stand
-- aside (as empty views of the same columns) while its type changes.
CREATE OR REPLACE VIEW sched._viewer_types AS SELECT NULL::text AS biz_type WHERE false;
CREATE OR REPLACE VIEW sched.biz_grants AS
	SELECT NULL::text AS biz_type, NULL::regrole AS role, NULL::text AS privilege,
		   NULL::timestamptz AS granted_at
	WHERE false;
ALTER TABLE sched.biz_grant ALTER COLUMN grantee TYPE regrole;
-- Dumped with the role's name (regrole), so that a restore into another
-- cluster finds the role of that name; a dropped role's grants, not yet
-- removed by the sweep (sched._purge), are left out.
SELECT pg_catalog.pg_extension_config_dump('sched.biz_grant',
	'WHERE grantee IN (SELECT r.oid FROM pg_catalog.pg_roles r)');

CREATE OR REPLACE VIEW sched._viewer AS
	SELECT EXISTS (SELECT FROM pg_catalog.pg_roles r, pg_catalog.pg_extension e
				   WHERE r.oid = sched._caller() AND e.extname = 'delaysched'
					 AND (r.rolsuper OR pg_catalog.pg_has_role(r.oid, e.extowner, 'USAGE'))) AS sees_all;
COMMENT ON VIEW sched._viewer IS 'internal: does the querying role see every business type';

CREATE OR REPLACE VIEW sched._viewer_types AS
	SELECT DISTINCT g.biz_type FROM sched.biz_grant g
	WHERE g.grantee IN (SELECT r.oid FROM pg_catalog.pg_roles r)
	  AND pg_catalog.pg_has_role(sched._caller(), g.grantee, 'USAGE');
COMMENT ON VIEW sched._viewer_types IS 'internal: the business types the querying role holds a grant on';

CREATE OR REPLACE VIEW sched.biz_grants AS
	SELECT g.biz_type, g.grantee AS role, g.privilege, g.granted_at
	FROM sched.biz_grant g
	WHERE g.grantee IN (SELECT r.oid FROM pg_catalog.pg_roles r);
COMMENT ON VIEW sched.biz_grants IS 'who may schedule, consume or read the tasks of which business type (sched.grant_biz)';

CREATE FUNCTION sched._http_record(p_worker smallint, p_ids bigint[], p_buckets smallint[],
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
			UPDATE sched.task t SET state = 'r', attempt = t.attempt - 1, lease_until = NULL,
					lease_owner = NULL, last_error = v_errors[r.ord]
				WHERE t.bucket = r.bucket AND t.id = r.id;
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

CREATE OR REPLACE FUNCTION sched._http_release(p_worker smallint) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
	n int;
BEGIN
	-- A row another transaction holds is left to the sweep, which parks it
	-- again when its lease runs out.
	UPDATE sched.task t SET state = 'r', attempt = t.attempt - 1, lease_until = NULL,
			lease_owner = NULL,
			last_error = 'worker_stopped: the HTTP worker stopped before the request finished; sent again'
		WHERE (t.bucket, t.id) IN (SELECT o.bucket, o.id FROM sched.task o
								   WHERE o.state = 'd' AND o.lease_owner = p_worker
								   FOR UPDATE SKIP LOCKED);
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;
COMMENT ON FUNCTION sched._http_release(smallint) IS 'internal: park again the requests an HTTP worker had in flight when it stopped';

CREATE OR REPLACE FUNCTION sched._clip(p_value text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN pg_catalog.length(p_value) > 64
				 THEN pg_catalog.left(p_value, 64) || '...' ELSE p_value END $$;
COMMENT ON FUNCTION sched._clip(text) IS 'internal: a value as an error message quotes it (its first 64 characters)';

CREATE OR REPLACE FUNCTION sched._check_name(name text, what text, hint text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
	PERFORM sched._require(name, what);
	IF name !~ '^[a-z_][a-z0-9_]*$' OR pg_catalog.octet_length(name) > 63 THEN
		RAISE EXCEPTION 'invalid % "%"', what, sched._clip(name)
			USING ERRCODE = 'invalid_name',
				  DETAIL = 'A ' || what || ' is a lowercase identifier: a letter or underscore, then letters, digits or underscores, at most 63 bytes.',
				  HINT = hint;
	END IF;
END
$$;
COMMENT ON FUNCTION sched._check_name(text, text, text) IS 'internal: refuse a name that is not a lowercase identifier';

CREATE OR REPLACE FUNCTION sched._biz(biz_type text) RETURNS sched.biz
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
	b sched.biz;
BEGIN
	PERFORM sched._require(biz_type, 'biz_type');
	SELECT * INTO b FROM sched.biz WHERE name = biz_type FOR KEY SHARE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'business type "%" does not exist', sched._clip(biz_type)
			USING ERRCODE = 'undefined_object',
				  HINT = pg_catalog.format('Define it first with SELECT sched.define_biz(%L);', sched._clip(biz_type));
	END IF;
	RETURN b;
END
$$;
COMMENT ON FUNCTION sched._biz(text) IS 'internal: look up a business type or raise undefined_object';

CREATE OR REPLACE FUNCTION sched._check_http(url text, headers jsonb, timeout interval, min_backoff interval,
								  max_backoff interval, secret text, follow_redirects boolean)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
	h record;
BEGIN
	PERFORM sched._require(url, 'url');
	PERFORM sched._check_url(url);
	IF headers IS NOT NULL THEN
		IF pg_catalog.jsonb_typeof(headers) <> 'object' THEN
			RAISE EXCEPTION 'headers must be a JSON object of header names and string values'
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'For example: {"Authorization": "Bearer ..."}';
		END IF;
		FOR h IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(headers) e LOOP
			IF h.key !~ '^[A-Za-z0-9!#$%&''*+.^_`|~-]{1,100}$' THEN
				RAISE EXCEPTION 'invalid header name "%"', sched._clip(h.key)
					USING ERRCODE = 'invalid_parameter_value',
						  HINT = 'A header name is 1 to 100 letters, digits and !#$%&''*+.^_`|~- (RFC 9110 token).';
			END IF;
			IF pg_catalog.lower(h.key) IN ('host', 'content-length', 'transfer-encoding', 'connection',
										   'expect', 'te', 'upgrade', 'idempotency-key')
			   OR pg_catalog.lower(h.key) LIKE 'x-delaysched-%' THEN
				RAISE EXCEPTION 'header "%" is set by delaysched and cannot be configured', sched._clip(h.key)
					USING ERRCODE = 'invalid_parameter_value';
			END IF;
			IF pg_catalog.jsonb_typeof(h.value) <> 'string' THEN
				RAISE EXCEPTION 'the value of header "%" must be a string, not %', sched._clip(h.key), pg_catalog.jsonb_typeof(h.value)
					USING ERRCODE = 'invalid_parameter_value';
			END IF;
			IF (h.value #>> '{}') ~ '[\x00-\x08\x0a-\x1f\x7f]' OR pg_catalog.octet_length(h.value #>> '{}') > 8192 THEN
				RAISE EXCEPTION 'the value of header "%" must be at most 8192 bytes without line breaks or control characters', sched._clip(h.key)
					USING ERRCODE = 'invalid_parameter_value';
			END IF;
		END LOOP;
	END IF;
	PERFORM sched._check_interval(timeout, 'timeout', interval '100 milliseconds', interval '10 minutes');
	PERFORM sched._check_interval(min_backoff, 'min_backoff', interval '10 milliseconds', interval '1 day');
	PERFORM sched._check_interval(max_backoff, 'max_backoff', interval '10 milliseconds', interval '7 days');
	IF max_backoff < min_backoff THEN
		RAISE EXCEPTION 'max_backoff (%) must not be less than min_backoff (%)', max_backoff, min_backoff
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF secret IS NOT NULL AND (pg_catalog.octet_length(secret) < 16 OR pg_catalog.octet_length(secret) > 1024) THEN
		RAISE EXCEPTION 'secret must be 16 to 1024 bytes long'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Use a random string, for example encode(gen_random_bytes(32), ''hex'') from pgcrypto.';
	END IF;
	PERFORM sched._require(follow_redirects, 'follow_redirects');
END
$$;
COMMENT ON FUNCTION sched._check_http(text, jsonb, interval, interval, interval, text, boolean) IS 'internal: refuse the arguments of an http type that could not work';

CREATE OR REPLACE FUNCTION sched.define_biz(
	name text,
	delivery text DEFAULT 'notify',
	channel text DEFAULT NULL,
	max_attempts int DEFAULT 10,
	ack_timeout interval DEFAULT '30 seconds',
	rate_limit float8 DEFAULT NULL,
	burst int DEFAULT NULL,
	max_concurrency int DEFAULT NULL,
	url text DEFAULT NULL,
	headers jsonb DEFAULT NULL,
	timeout interval DEFAULT '10 seconds',
	min_backoff interval DEFAULT '1 second',
	max_backoff interval DEFAULT '1 hour',
	secret text DEFAULT NULL,
	follow_redirects boolean DEFAULT false,
	weight int DEFAULT 1)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
	v_channel text := coalesce(channel, name);
	v_old_delivery text;
	v_old_rate float8;
	v_max_types int;
BEGIN
	PERFORM sched._check_name(name, 'business type name',
		'Use a lowercase identifier such as ''order_timeout''.');
	PERFORM sched._require(delivery, 'delivery');
	IF delivery NOT IN ('notify', 'pull', 'http') THEN
		RAISE EXCEPTION 'invalid delivery "%"', sched._clip(delivery)
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'delivery is ''notify'' (push to LISTENers), ''pull'' (announce, then sched.claim) or ''http'' (POST to url).';
	END IF;
	IF delivery = 'http' THEN
		PERFORM sched._check_http(url, headers, timeout, min_backoff, max_backoff, secret, follow_redirects);
	ELSE
		IF url IS NOT NULL OR headers IS NOT NULL OR secret IS NOT NULL OR follow_redirects THEN
			RAISE EXCEPTION 'url, headers, secret and follow_redirects are for delivery ''http'' only'
				USING ERRCODE = 'invalid_parameter_value';
		END IF;
		timeout := NULL;
		min_backoff := NULL;
		max_backoff := NULL;
	END IF;
	PERFORM sched._check_name(v_channel, 'channel name',
		'LISTEN folds unquoted names to lower case, so a channel is a lowercase identifier.');
	PERFORM sched._require(max_attempts, 'max_attempts');
	IF max_attempts < 1 OR max_attempts > 1000 THEN
		RAISE EXCEPTION 'max_attempts must be between 1 and 1000, not %', max_attempts
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM sched._check_interval(ack_timeout, 'ack_timeout', interval '1 second', interval '7 days');
	IF rate_limit IS NOT NULL THEN
		IF rate_limit = 'NaN' OR rate_limit IN ('Infinity', '-Infinity') THEN
			RAISE EXCEPTION 'rate_limit must be a finite number, not %', rate_limit
				USING ERRCODE = 'invalid_parameter_value';
		ELSIF rate_limit <= 0 THEN
			RAISE EXCEPTION 'rate_limit must be between 0.001 and 1000000 deliveries per second, not %', rate_limit
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'To stop a type''s deliveries for a while, use sched.pause.';
		ELSIF rate_limit < 0.001 OR rate_limit > 1000000 THEN
			RAISE EXCEPTION 'rate_limit must be between 0.001 and 1000000 deliveries per second, not %', rate_limit
				USING ERRCODE = 'invalid_parameter_value';
		END IF;
		-- Enough for one second of the rate, at least one.
		burst := coalesce(burst, GREATEST(1, pg_catalog.ceil(rate_limit))::int);
	ELSIF burst IS NOT NULL THEN
		RAISE EXCEPTION 'burst needs a rate_limit'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'burst is the size of the token bucket that rate_limit fills.';
	END IF;
	IF burst < 1 OR burst > 1000000 THEN
		RAISE EXCEPTION 'burst must be between 1 and 1000000, not %', burst
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF max_concurrency < 1 OR max_concurrency > 100000 THEN
		RAISE EXCEPTION 'max_concurrency must be between 1 and 100000, not %', max_concurrency
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM sched._require(weight, 'weight');
	IF weight < 1 OR weight > 1000 THEN
		RAISE EXCEPTION 'weight must be between 1 and 1000, not %', weight
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'A type with weight 3 gets three times the deliveries of a type with weight 1 while both have due tasks.';
	END IF;

	SELECT b.delivery, b.rate_limit INTO v_old_delivery, v_old_rate
		FROM sched.biz b WHERE b.name = define_biz.name
		FOR NO KEY UPDATE;
	IF rate_limit IS NOT NULL AND v_old_rate IS NULL THEN
		-- Every rate-limited type has a token bucket in shared memory.
		v_max_types := pg_catalog.current_setting('delaysched.max_biz_types')::int;
		IF (SELECT count(*) FROM sched.biz b WHERE b.rate_limit IS NOT NULL) + sched._buckets_elsewhere() >= v_max_types THEN
			RAISE EXCEPTION 'too many rate-limited business types'
				USING ERRCODE = 'configuration_limit_exceeded',
					  DETAIL = pg_catalog.format('delaysched.max_biz_types is %s, counted across every database of the cluster.', v_max_types),
					  HINT = 'Raise delaysched.max_biz_types (a restart is needed), or remove the rate limit of a type that does not need it.';
		END IF;
	END IF;
	IF v_old_delivery IN ('pull', 'http') AND delivery = 'notify' THEN
		-- Until this commits the workers still see a pull type and may mark
		-- more of its tasks announced ('r'), which the reset below would not
		-- see.  Hold every range's pointer row, which every tick locks
		-- first: ticks under way finish before this goes on, and none starts
		-- until this transaction ends.
		PERFORM 1 FROM sched.pointer p ORDER BY p.range_id FOR UPDATE;
	END IF;

	INSERT INTO sched.biz AS b (name, delivery, channel, max_attempts, ack_timeout,
								rate_limit, burst, max_concurrency,
								url, headers, timeout, min_backoff, max_backoff, secret,
								follow_redirects, weight)
		VALUES (name, delivery, v_channel, max_attempts, ack_timeout,
				rate_limit, burst, max_concurrency,
				url, headers, timeout, min_backoff, max_backoff, secret,
				coalesce(follow_redirects, false), weight)
	ON CONFLICT ON CONSTRAINT biz_pkey DO UPDATE
		SET delivery = excluded.delivery, channel = excluded.channel,
			max_attempts = excluded.max_attempts, ack_timeout = excluded.ack_timeout,
			rate_limit = excluded.rate_limit, burst = excluded.burst,
			max_concurrency = excluded.max_concurrency,
			url = excluded.url, headers = excluded.headers, timeout = excluded.timeout,
			min_backoff = excluded.min_backoff, max_backoff = excluded.max_backoff,
			secret = excluded.secret, follow_redirects = excluded.follow_redirects,
			weight = excluded.weight, updated_at = now();
	-- The HTTP workers read the definitions afresh when they claim.
	IF delivery = 'http' OR v_old_delivery = 'http' THEN
		PERFORM sched._wake_http();
	END IF;
	IF rate_limit IS NULL AND v_old_rate IS NOT NULL THEN
		PERFORM sched._forget_bucket(name, false);
	END IF;
	-- The drain reads the limits afresh: let it look at once, with the new ones.
	PERFORM sched._wake_drain();

	-- A pull or http type turned notify: its announced or parked tasks ('r')
	-- wait for a claim that no consumer will make; make them pending again,
	-- behind the pointer, for the sweep to deliver by NOTIFY.
	IF v_old_delivery IN ('pull', 'http') AND delivery = 'notify' THEN
		UPDATE sched.task t SET state = 'p' WHERE t.biz_type = define_biz.name AND t.state = 'r';
		IF FOUND THEN
			PERFORM sched._wake('-infinity');
		END IF;
	END IF;
END
$$;
COMMENT ON FUNCTION sched.define_biz(text, text, text, int, interval, float8, int, int,
									 text, jsonb, interval, interval, interval, text, boolean, int) IS 'create or replace a delaysched business type';

CREATE OR REPLACE FUNCTION sched._check_interval(value interval, what text, lowest interval, highest interval)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
	v_months float8;
	v_days float8;
	v_time float8;
BEGIN
	PERFORM sched._require(value, what);
	-- '1 month -29 days' compares as one day, but added to a date in
	-- February it goes back: a length must not mix signs.
	v_months := EXTRACT(year FROM value) * 12 + EXTRACT(month FROM value);
	v_days := EXTRACT(day FROM value);
	v_time := EXTRACT(epoch FROM value) - (v_months * 30 + v_days) * 86400;
	IF (v_months > 0 OR v_days > 0 OR v_time > 0) AND (v_months < 0 OR v_days < 0 OR v_time < 0) THEN
		RAISE EXCEPTION '% must not mix positive and negative parts, not %', what, value
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Months and days are not of fixed length: give the length in one unit, or parts of one sign.';
	END IF;
	IF value < lowest OR value > highest THEN
		RAISE EXCEPTION '% must be between % and %, not %', what, lowest, highest, value
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
END
$$;
COMMENT ON FUNCTION sched._check_interval(interval, text, interval, interval) IS 'internal: refuse an interval outside its range';

CREATE FUNCTION sched._cluster(
	OUT role text, OUT database name, OUT pid int, OUT state text,
	OUT scanners int, OUT scanners_granted int, OUT http_workers int, OUT http_granted int,
	OUT failures int, OUT next_start timestamptz, OUT pointer_lag interval,
	OUT served_since timestamptz)
RETURNS SETOF record
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_cluster_status';
COMMENT ON FUNCTION sched._cluster() IS 'internal: the launcher and every database served, from shared memory, behind sched.cluster';

CREATE FUNCTION sched._buckets_elsewhere() RETURNS int
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_buckets_elsewhere_sql';
COMMENT ON FUNCTION sched._buckets_elsewhere() IS 'internal: token buckets of rate-limited types in the other databases (delaysched.max_biz_types counts them all)';

CREATE FUNCTION sched._database_listed() RETURNS boolean
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_database_listed_sql';
COMMENT ON FUNCTION sched._database_listed() IS 'internal: whether delaysched.databases (or the deprecated delaysched.database) lets delaysched serve the current database';

CREATE OR REPLACE FUNCTION sched._check_task(run_at timestamptz, payload jsonb, dedupe_key text)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
DECLARE
	payload_bytes bigint;
	limit_bytes bigint;
BEGIN
	PERFORM sched._require(run_at, 'run_at');
	IF NOT pg_catalog.isfinite(run_at) THEN
		RAISE EXCEPTION 'run_at must be a finite timestamp, not %', run_at
			USING ERRCODE = 'datetime_field_overflow';
	END IF;
	PERFORM sched._require(payload, 'payload');
	payload_bytes := pg_catalog.octet_length(payload::text);
	limit_bytes := pg_catalog.pg_size_bytes(pg_catalog.current_setting('delaysched.max_payload_size'));
	IF payload_bytes > limit_bytes THEN
		RAISE EXCEPTION 'payload is too large'
			USING ERRCODE = 'program_limit_exceeded',
				  DETAIL = pg_catalog.format('The payload is %s bytes; delaysched.max_payload_size is %s.',
											  payload_bytes, pg_catalog.current_setting('delaysched.max_payload_size')),
				  HINT = 'Store large documents in a table of your own and put their key in the payload.';
	END IF;
	IF dedupe_key IS NOT NULL AND (dedupe_key = '' OR pg_catalog.octet_length(dedupe_key) > 512) THEN
		RAISE EXCEPTION 'dedupe_key must be between 1 and 512 bytes long'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT sched._database_listed() THEN
		RAISE EXCEPTION 'delaysched does not deliver tasks of database "%"', pg_catalog.current_database()
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = pg_catalog.format('delaysched.databases is "%s".', pg_catalog.current_setting('delaysched.databases')),
				  HINT = 'Schedule tasks in a database it lists, or add this one to delaysched.databases and reload the configuration.';
	END IF;
END
$$;
COMMENT ON FUNCTION sched._check_task(timestamptz, jsonb, text) IS 'internal: refuse a task that could not be delivered as asked';

CREATE OR REPLACE FUNCTION sched._granted_types(p_privilege text) RETURNS text[]
LANGUAGE plpgsql STABLE
AS $$
BEGIN
	-- plpgsql, not sql: a SQL function with a sub-select is never inlined,
	-- and planned its sub-select again at every call (0.2 ms of every
	-- sched.add and sched.ack_many); plpgsql keeps the plan.
	IF sched._caller_is_admin() THEN
		RETURN NULL;
	END IF;
	RETURN coalesce((SELECT pg_catalog.array_agg(DISTINCT g.biz_type) FROM sched.biz_grant g
					 WHERE (g.privilege = p_privilege OR p_privilege = 'read')
					   AND g.grantee IN (SELECT r.oid FROM pg_catalog.pg_roles r)
					   AND pg_catalog.pg_has_role(sched._caller(), g.grantee, 'USAGE')), '{}');
END
$$;
COMMENT ON FUNCTION sched._granted_types(text) IS 'internal: the business types the caller holds a privilege on (NULL: all)';

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

CREATE OR REPLACE FUNCTION sched.add_many(biz_type text, run_ats timestamptz[], payloads jsonb[] DEFAULT NULL,
							   dedupe_keys text[] DEFAULT NULL)
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
	PERFORM sched._biz(biz_type);
	IF NOT sched._caller_is_admin() THEN
		PERFORM sched._require_grant(biz_type, 'schedule');
	END IF;
	PERFORM sched._require(run_ats, 'run_ats');
	PERFORM sched._check_array(run_ats, 'run_ats');
	PERFORM sched._check_array(payloads, 'payloads');
	PERFORM sched._check_array(dedupe_keys, 'dedupe_keys');
	n := coalesce(cardinality(run_ats), 0);
	IF payloads IS NOT NULL AND cardinality(payloads) <> n THEN
		RAISE EXCEPTION 'payloads has % elements but run_ats has %', cardinality(payloads), n
			USING ERRCODE = 'array_subscript_error';
	END IF;
	IF dedupe_keys IS NOT NULL AND cardinality(dedupe_keys) <> n THEN
		RAISE EXCEPTION 'dedupe_keys has % elements but run_ats has %', cardinality(dedupe_keys), n
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
		   OR (u.dedupe_key IS NOT NULL AND (u.dedupe_key = '' OR pg_catalog.octet_length(u.dedupe_key) > 512))) THEN
		FOR i IN 1 .. n LOOP
			PERFORM sched._check_task(run_ats[i], coalesce(payloads[i], CASE WHEN payloads IS NULL THEN '{}'::jsonb END),
									  dedupe_keys[i]);
		END LOOP;
	END IF;

	IF dedupe_keys IS NOT NULL THEN
		FOR i IN 1 .. n LOOP
			RETURN NEXT sched._insert(biz_type, run_ats[i], coalesce(payloads[i], '{}'), dedupe_keys[i]);
		END LOOP;
		RETURN;
	END IF;

	-- The set-based path: one INSERT for the whole batch.  Ids are drawn
	-- first, so that they can be returned in input order.
	RETURN QUERY
	WITH input AS MATERIALIZED (
		SELECT u.ord, u.run_at, coalesce(u.payload, '{}'::jsonb) AS payload,
			   sched._bucket(u.run_at) AS bucket
		FROM unnest(run_ats, payloads) WITH ORDINALITY AS u(run_at, payload, ord)
	), numbered AS MATERIALIZED (
		-- sched._new_id written out: a call of the sql function per task is
		-- planned per call (it is volatile: never inlined), 15% of a batch.
		SELECT input.*, pg_catalog.nextval('sched.task_seq') * sched._bucket_count() + input.bucket AS id
		FROM input
	), stored AS (
		INSERT INTO sched.task (id, bucket, biz_type, run_at, payload, created_at)
		SELECT numbered.id, numbered.bucket, add_many.biz_type, numbered.run_at,
			   numbered.payload, clock_timestamp()
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
COMMENT ON FUNCTION sched.add_many(text, timestamptz[], jsonb[], text[]) IS 'schedule many tasks of one type in one statement; returns their ids in input order';

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
	SELECT k.attempt, k.biz_type, b.max_attempts INTO t
		FROM sched.task k JOIN sched.biz b ON b.name = k.biz_type
		WHERE k.bucket = v_bucket AND k.id = nack.id;
	PERFORM sched._tally(t.biz_type, 'nacked', 1);
	IF t.attempt >= t.max_attempts THEN
		PERFORM sched._finish(v_bucket, ARRAY[id], 'dead',
			format('nack: %s (attempt %s of %s)', coalesce(error, 'negative acknowledgement'), t.attempt, t.max_attempts));
	ELSE
		-- Without retry_in: 1 s, 2 s, 4 s ... capped at one hour.
		v_delay := coalesce(retry_in,
							LEAST(interval '1 second' * power(2, LEAST(t.attempt - 1, 12)), interval '1 hour'));
		PERFORM sched._move(v_bucket, id, clock_timestamp() + v_delay,
							'nack: ' || coalesce(error, 'negative acknowledgement'));
		PERFORM sched._wake_drain(true);
	END IF;
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.nack(bigint, interval, text) IS 'report a failed delivery: retry later, or dead after max_attempts; false if no delivery of this id awaits acknowledgement';

-------------------------------------------------------------------------------
-- Cluster membership (the delaysched_router extension, doc/scale-out.md).
-- A node's number is the high part of every task id it makes:
--   id = node * 2^48 + (nextval * buckets + bucket)
-- The sequence itself carries it (its values are kept by pg_dump).
-------------------------------------------------------------------------------

CREATE FUNCTION sched.node_number() RETURNS int
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ((s.last_value * sched._bucket_count()) >> 48)::int FROM sched.task_seq s $$;
COMMENT ON FUNCTION sched.node_number() IS 'the node number this database''s task ids carry (0 until sched.set_node_number)';

-- What a router asks before numbering a node: its number, whether it has
-- made task ids, and whether it has joined a cluster (its sequence bounded
-- to its block; node 0 is bounded when it joins).  For administrators, as
-- sched.set_node_number is; run as its caller, as internal functions are.
CREATE FUNCTION sched._node_state(OUT node int, OUT made_ids boolean, OUT joined boolean)
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT sched.node_number(), s.is_called, q.seqmax < 9223372036854775807
	FROM sched.task_seq s, pg_catalog.pg_sequence q
	WHERE q.seqrelid = 'sched.task_seq'::pg_catalog.regclass
$$;
COMMENT ON FUNCTION sched._node_state() IS 'internal: a node''s number, whether it has made ids, whether it has joined a cluster';

CREATE FUNCTION sched.set_node_number(node int) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n bigint := sched._bucket_count();
	s record;
	v_low bigint;
	v_high bigint;
BEGIN
	PERFORM sched._require(node, 'node');
	IF node < 0 OR node > 32767 THEN
		RAISE EXCEPTION 'node number must be between 0 and 32767, not %', node
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- Serialise with other calls (a sequence cannot be locked; this mode of
	-- sched.biz conflicts with itself and define_biz, not with adds).
	LOCK TABLE sched.biz IN SHARE ROW EXCLUSIVE MODE;
	s := sched._node_state();
	IF s.node <> 0 AND s.node <> set_node_number.node THEN
		RAISE EXCEPTION 'this database is node % already', s.node
			USING ERRCODE = 'object_in_use',
				  HINT = 'A node keeps its number: the ids of its tasks carry it.';
	END IF;
	IF s.node = set_node_number.node AND s.joined THEN
		RETURN false;
	END IF;
	IF set_node_number.node <> 0 AND s.made_ids THEN
		RAISE EXCEPTION 'this database has made task ids as node 0: it can only be node 0'
			USING ERRCODE = 'object_in_use',
				  HINT = 'Under another number its earlier ids would be taken for node 0''s.';
	END IF;
	-- The first and last sequence values whose ids (value * n + bucket,
	-- bucket < n) all lie in [node * 2^48, (node + 1) * 2^48).  Node 0
	-- keeps its sequence's position, bounded to its block.
	v_low := ((set_node_number.node::bigint << 48) + n - 1) / n;
	v_high := pg_catalog.floor(((set_node_number.node + 1) * 2::numeric ^ 48 - n) / n)::bigint;  -- (no overflow at 32767)
	IF set_node_number.node = 0 THEN
		EXECUTE pg_catalog.format('ALTER SEQUENCE sched.task_seq MAXVALUE %s', v_high);
	ELSE
		EXECUTE pg_catalog.format('ALTER SEQUENCE sched.task_seq MINVALUE %s MAXVALUE %s START %s RESTART %s',
								  v_low, v_high, v_low, v_low);
	END IF;
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.set_node_number(int) IS 'make this database node number "node" of a delaysched_router cluster: its new task ids carry the number; false if it had it already';

-------------------------------------------------------------------------------
-- Statistics (src/stats*.c, src/metrics.c): counters and gauges per business
-- type in shared memory, kept by the triggers below and sched._tally(),
-- read by sched.metrics() and sched.biz_stats.  See doc/monitoring.md.
-------------------------------------------------------------------------------

CREATE FUNCTION sched._stats_trigger() RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'delaysched_stats_trigger';
COMMENT ON FUNCTION sched._stats_trigger() IS 'internal: count a change of a task, a finished task, an HTTP attempt or a business type in the transaction''s tally';

CREATE FUNCTION sched._tally(biz_type text, event text, n bigint) RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_tally_sql';
COMMENT ON FUNCTION sched._tally(text, text, bigint) IS 'internal: count n events (added, nacked, ack_timeout) of a type, at commit';

CREATE FUNCTION sched._type_counts(biz_types text[], OUT biz_type text, OUT pending bigint,
								   OUT ready bigint, OUT delivered bigint, OUT done bigint,
								   OUT dead bigint, OUT cancelled bigint, OUT counted boolean)
RETURNS SETOF record
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_type_counts_sql';
COMMENT ON FUNCTION sched._type_counts(text[]) IS 'internal: the tasks by state of the given types, from shared memory; counted is false while the gauges are not ready';

CREATE FUNCTION sched.recount_stats() RETURNS void
LANGUAGE c VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'delaysched_recount_stats_sql';
COMMENT ON FUNCTION sched.recount_stats() IS 'count this database''s task gauges again (after something bypassed the triggers that keep them)';

CREATE FUNCTION sched.metrics() RETURNS text
LANGUAGE c VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'delaysched_metrics_sql';
COMMENT ON FUNCTION sched.metrics() IS 'this database''s delaysched counters, gauges and histograms in Prometheus''s text format';

CREATE FUNCTION sched._task_status(id bigint, biz_type text, state "char", run_at timestamptz,
								   attempt int, lease_until timestamptz, delivery text, paused boolean,
								   rate_limited boolean, max_concurrency int)
RETURNS text
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_task_status_sql';
COMMENT ON FUNCTION sched._task_status(bigint, text, "char", timestamptz, int, timestamptz, text, boolean, boolean, int) IS 'internal: where an unfinished task is and why (sched.tasks.status)';

CREATE FUNCTION sched.metric_samples(OUT family text, OUT metric text, OUT biz_type text,
									 OUT labels jsonb, OUT value float8)
RETURNS SETOF record
LANGUAGE c VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'delaysched_metric_samples_sql';
COMMENT ON FUNCTION sched.metric_samples() IS 'the samples of sched.metrics() as rows: family, metric, business type, other labels, value';

-- AFTER ROW, so as not to lock each row first (stats_tally.c).
CREATE TRIGGER stats AFTER INSERT OR DELETE OR UPDATE OF state, attempt, bucket ON sched.task
	FOR EACH ROW EXECUTE FUNCTION sched._stats_trigger('task');
CREATE TRIGGER stats_truncate BEFORE TRUNCATE ON sched.task
	FOR EACH STATEMENT EXECUTE FUNCTION sched._stats_trigger('task');
CREATE TRIGGER stats AFTER INSERT OR DELETE ON sched.finished
	FOR EACH ROW EXECUTE FUNCTION sched._stats_trigger('finished');
CREATE TRIGGER stats_truncate BEFORE TRUNCATE ON sched.finished
	FOR EACH STATEMENT EXECUTE FUNCTION sched._stats_trigger('finished');
CREATE TRIGGER stats AFTER INSERT ON sched.attempt
	FOR EACH ROW EXECUTE FUNCTION sched._stats_trigger('attempt');
CREATE TRIGGER stats AFTER INSERT OR UPDATE OF delivery ON sched.biz
	FOR EACH ROW EXECUTE FUNCTION sched._stats_trigger('biz');

/*
 * Every type's tasks by state, counted from the tables: what the gauges
 * start from (stats_recount.c), and what is read while they are not ready.
 */
CREATE VIEW sched._task_counts AS
	SELECT u.biz_type, max(u.delivery) AS delivery,
		   sum(u.pending)::bigint AS pending, sum(u.ready)::bigint AS ready,
		   sum(u.delivered)::bigint AS delivered, sum(u.done)::bigint AS done,
		   sum(u.dead)::bigint AS dead, sum(u.cancelled)::bigint AS cancelled
	FROM (SELECT t.biz_type, NULL::text AS delivery,
				 count(*) FILTER (WHERE t.state = 'p') AS pending,
				 count(*) FILTER (WHERE t.state = 'r') AS ready,
				 count(*) FILTER (WHERE t.state = 'd') AS delivered,
				 0 AS done, 0 AS dead, 0 AS cancelled
		  FROM sched.task t GROUP BY t.biz_type
		  UNION ALL
		  SELECT f.biz_type, NULL, 0, 0, 0,
				 count(*) FILTER (WHERE f.state = 'done'),
				 count(*) FILTER (WHERE f.state = 'dead'),
				 count(*) FILTER (WHERE f.state = 'cancelled')
		  FROM sched.finished f GROUP BY f.biz_type
		  UNION ALL
		  SELECT b.name, b.delivery, 0, 0, 0, 0, 0, 0 FROM sched.biz b) u
	GROUP BY u.biz_type;
COMMENT ON VIEW sched._task_counts IS 'internal: every type''s tasks by state, counted from the tables';

/*
 * Every defined type's tasks by state: from shared memory when the gauges
 * are ready, or counted from the tables while they are not (after a server
 * start, on a standby).  Both branches test the one answer of
 * sched._type_counts(); the second is a one-time filter, so the tables
 * are not read when the gauges are ready.  sched.biz_stats reads it, and
 * the role reading that view needs EXECUTE on sched._type_counts(text[]).
 */
CREATE VIEW sched._counts AS
	WITH c AS MATERIALIZED (
		SELECT * FROM sched._type_counts(ARRAY(SELECT b.name FROM sched.biz b))
	)
	SELECT c.biz_type, c.pending, c.ready, c.delivered, c.done, c.dead, c.cancelled
	FROM c WHERE c.counted
	UNION ALL
	SELECT k.biz_type, k.pending, k.ready, k.delivered, k.done, k.dead, k.cancelled
	FROM sched._task_counts k WHERE NOT (SELECT coalesce(bool_and(c.counted), true) FROM c);
COMMENT ON VIEW sched._counts IS 'internal: every type''s tasks by state, from shared memory or counted';

/*
 * Pending tasks due now, per type: an index search of each range's pending
 * tasks up to now(), which finds only the due ones (the backlog).
 */
CREATE VIEW sched._due AS
	SELECT t.biz_type, count(*) AS due
	FROM sched.task t
	WHERE t.state = 'p' AND t.run_at <= now()
	  AND t.door = ANY (ARRAY(SELECT p.range_id::smallint FROM sched.pointer p))
	GROUP BY t.biz_type;
COMMENT ON VIEW sched._due IS 'internal: pending tasks due now, per type';

-------------------------------------------------------------------------------
-- Views
-------------------------------------------------------------------------------

CREATE OR REPLACE VIEW sched.tasks WITH (security_barrier) AS
	SELECT u.id, u.biz_type, u.run_at, u.state, u.attempt, u.payload, u.dedupe_key, u.created_at,
		   u.delivered_at, u.last_error, u.lease_until, u.finished_at, u.schedule, u.status
	FROM (SELECT t.id, t.biz_type, t.run_at,
				 CASE t.state WHEN 'd' THEN 'delivered' ELSE 'pending' END AS state,
				 t.attempt, t.payload, t.dedupe_key, t.created_at, t.delivered_at, t.last_error,
				 t.lease_until, NULL::timestamptz AS finished_at, t.schedule,
				 sched._task_status(t.id, t.biz_type, t.state, t.run_at, t.attempt, t.lease_until,
									b.delivery, b.paused, b.rate_limit IS NOT NULL, b.max_concurrency) AS status
		  FROM sched.task t LEFT JOIN sched.biz b ON b.name = t.biz_type
		  UNION ALL
		  SELECT f.id, f.biz_type, f.run_at, f.state, f.attempt, f.payload, f.dedupe_key,
				 f.created_at, f.delivered_at, f.last_error, NULL::timestamptz, f.finished_at, f.schedule,
				 f.state
		  FROM sched.finished f) u
	WHERE ((SELECT v.sees_all FROM sched._viewer v) OR u.biz_type IN (SELECT vt.biz_type FROM sched._viewer_types vt));
COMMENT ON VIEW sched.tasks IS 'every delaysched task the querying role may see: unfinished ones, and finished ones within their retention';

CREATE OR REPLACE VIEW sched.biz_stats WITH (security_barrier) AS
	WITH recent AS (
		SELECT t.biz_type, t.attempt, t.delivered_at, t.delivered_at - t.run_at AS lateness
		FROM sched.task t
		WHERE t.state = 'd' AND t.delivered_at >= now() - interval '1 minute'
		UNION ALL
		SELECT f.biz_type, f.attempt, f.delivered_at, f.delivered_at - f.run_at
		FROM sched.finished f
		-- (a task finishes after its delivery: the narrower of two searches)
		WHERE f.delivered_at >= now() - interval '1 minute' AND f.finished_at >= now() - interval '1 minute'
	), rates AS (
		SELECT r.biz_type,
			   round(count(*) / 60.0, 2) AS delivered_per_sec,
			   round(count(*) FILTER (WHERE r.delivered_at >= now() - interval '10 seconds') / 10.0, 1) AS current_rate,
			   percentile_cont(0.5) WITHIN GROUP (ORDER BY r.lateness) FILTER (WHERE r.attempt = 1) AS lateness_p50,
			   percentile_cont(0.99) WITHIN GROUP (ORDER BY r.lateness) FILTER (WHERE r.attempt = 1) AS lateness_p99
		FROM recent r GROUP BY r.biz_type
	)
	SELECT b.name AS biz_type, b.delivery, b.channel, b.paused,
		   coalesce(counts.pending + counts.ready, 0) AS pending,
		   coalesce(counts.ready + due.due, counts.ready, 0) AS due_now,
		   coalesce(counts.delivered, 0) AS awaiting_ack,
		   coalesce(counts.done, 0) AS done,
		   coalesce(counts.dead, 0) AS dead,
		   coalesce(rates.delivered_per_sec, 0) AS delivered_per_sec,
		   rates.lateness_p50,
		   rates.lateness_p99,
		   b.rate_limit, b.burst, b.max_concurrency,
		   round(sched._tokens(b.name, b.rate_limit, b.burst)::numeric, 1) AS tokens,
		   CASE WHEN b.delivery = 'notify' AND NOT b.paused THEN coalesce(counts.ready, 0) ELSE 0 END AS throttled,
		   coalesce(rates.current_rate, 0) AS current_rate,
		   b.weight
	FROM sched.biz b
	LEFT JOIN sched._counts counts ON counts.biz_type = b.name
	LEFT JOIN sched._due due ON due.biz_type = b.name
	LEFT JOIN rates ON rates.biz_type = b.name
	WHERE ((SELECT v.sees_all FROM sched._viewer v) OR b.name IN (SELECT vt.biz_type FROM sched._viewer_types vt));
COMMENT ON VIEW sched.biz_stats IS 'per business type: task counts, delivery rate and lateness over the last minute, limits, tokens and throttled tasks';
ALTER VIEW sched.attempts SET (security_barrier = true);

CREATE VIEW sched.schedules WITH (security_barrier) AS
	SELECT s.name, s.biz_type, s.rule AS schedule, s.time_zone, s.catch_up, s.allow_overlap, s.paused,
		   s.starts_at, s.ends_at,
		   CASE WHEN NOT s.paused THEN s.next_run_at END AS next_run_at,
		   s.last_run_at, s.last_task_id, s.runs, s.missed, s.payload, s.created_at, s.updated_at
	FROM sched.schedule s
	WHERE ((SELECT v.sees_all FROM sched._viewer v) OR s.biz_type IN (SELECT vt.biz_type FROM sched._viewer_types vt));
COMMENT ON VIEW sched.schedules IS 'every recurring schedule the querying role may see: its rule, next and last firing, firings made and missed';

CREATE VIEW sched.cluster AS
	SELECT c.role, c.database, c.pid, c.state, c.scanners, c.scanners_granted, c.http_workers,
		   c.http_granted, c.failures, c.next_start, c.pointer_lag, c.served_since
	FROM sched._cluster() c;
COMMENT ON VIEW sched.cluster IS 'the delaysched launcher and every database it serves in the cluster: workers running and granted, failures, pointer lag (superusers and pg_monitor)';

-------------------------------------------------------------------------------
-- Privileges: nothing for PUBLIC, as in the install script
-------------------------------------------------------------------------------

REVOKE ALL ON ALL TABLES IN SCHEMA sched FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA sched FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA sched FROM PUBLIC;
-- The views call it, as the role reading them: it only tells a role which
-- role it is running as (see src/caller.c).
GRANT EXECUTE ON FUNCTION sched._caller() TO PUBLIC;
-- The cluster-wide view is for monitoring (src/worker_views.c checks it too).
GRANT USAGE ON SCHEMA sched TO pg_monitor;
GRANT SELECT ON sched.cluster TO pg_monitor;
GRANT EXECUTE ON FUNCTION sched._cluster() TO pg_monitor;
GRANT EXECUTE ON FUNCTION sched.metrics(), sched.metric_samples() TO pg_monitor;
-- sched.biz_stats now also calls sched._type_counts(text[]), and
-- sched.tasks sched._task_status(), as the role reading them: whoever could
-- read them at 0.1 (EXECUTE on sched._tokens, which biz_stats called
-- already; SELECT on sched.tasks) keeps reading them.
DO $$
DECLARE
	r record;
BEGIN
	FOR r IN
		SELECT DISTINCT a.grantee::regrole AS grantee, 'sched._type_counts(text[])' AS callee
		FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
		WHERE p.oid = 'sched._tokens(text, float8, int)'::pg_catalog.regprocedure
		  AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0 AND a.grantee <> p.proowner
		UNION
		SELECT DISTINCT a.grantee::regrole,
			   'sched._task_status(bigint, text, "char", timestamptz, int, timestamptz, text, boolean, boolean, int)'
		FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
		WHERE c.oid = 'sched.tasks'::pg_catalog.regclass
		  AND a.privilege_type = 'SELECT' AND a.grantee <> 0 AND a.grantee <> c.relowner
	LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', r.callee, r.grantee);
	END LOOP;
END
$$;

-- Wake the workers, which waited while the database was at 0.1.
SELECT sched._wake('-infinity');
