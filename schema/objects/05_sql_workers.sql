-------------------------------------------------------------------------------
-- The SQL workers' statements (src/sql/).  A worker leases one due job of
-- an sql type in a short transaction of its own (sched._sql_claim), then
-- runs it in another, which locks the task's row (sched._sql_begin), runs
-- the command as the job's role, and marks the task done with the run
-- (sched._sql_done); that commit is the run's.  A run that fails rolls back
-- whole, and a third transaction records the failure (sched._sql_record).
-- A worker leases as owner 1000 + its number (HTTP workers lease as their
-- number), so that neither ever takes the other's leases back.
-------------------------------------------------------------------------------

/*
 * Lease up to p_room parked jobs of sql types to SQL worker p_owner, the
 * types taken in a random order weighted by their weights (a type of weight
 * 3 comes first three times as often as one of weight 1), each type's
 * oldest jobs first.  Rate limits and concurrency caps apply as in
 * sched.claim, and load control as to the scanners' ticks (the room comes
 * from its bucket, sched._load_take).  A lease lasts the type's timeout and 30 seconds
 * (sched._http_lease): a worker that dies leaves it to the sweep, and
 * releases its own when it starts again (sched._sql_release).  When a
 * limit held a type back, a last row with a NULL id says when to look
 * again (next_at: the next token of a rate-limited type; NULL: when a job
 * of a capped type ends).
 */
CREATE OR REPLACE FUNCTION sched._sql_claim(p_owner smallint, p_room int)
RETURNS TABLE(id bigint, bucket smallint, biz_type text, run_at timestamptz, attempt int,
			  command text, run_as oid, timeout_ms float8, next_at timestamptz)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
	v_now timestamptz := clock_timestamp();
	v_room int := p_room;
	v_want int;
	v_tokens int;
	v_next timestamptz;
	v_held boolean := false;
	c record;
	v_leased bigint[];
	v_leased_buckets smallint[];
	b sched.biz;
	a record;
	v_load record;
BEGIN
	IF NOT EXISTS (SELECT FROM sched.biz x
				   WHERE x.delivery = 'sql' AND NOT x.paused
					 AND EXISTS (SELECT FROM sched.task t WHERE t.biz_type = x.name AND t.state = 'r')) THEN
		RETURN;
	END IF;
	v_load := sched._load_take(p_room);
	IF v_load.taken = 0 THEN
		RETURN QUERY SELECT NULL::bigint, NULL::smallint, NULL::text, NULL::timestamptz, NULL::int,
							NULL::text, NULL::oid, NULL::float8, v_load.next_at;
		RETURN;
	END IF;
	v_room := v_load.taken;
	FOR b IN
		SELECT x.* FROM sched.biz x
		WHERE x.delivery = 'sql' AND NOT x.paused
		  AND EXISTS (SELECT FROM sched.task t WHERE t.biz_type = x.name AND t.state = 'r')
		ORDER BY -pg_catalog.ln(1.0 - pg_catalog.random()) / x.weight
	LOOP
		EXIT WHEN v_room <= 0;
		v_want := v_room;
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
		SELECT pg_catalog.array_agg(l.id), pg_catalog.array_agg(l.bucket) INTO v_leased, v_leased_buckets
		FROM sched._lease(c.buckets, c.ids, '{r}', v_now, sched._http_lease(b.timeout), p_owner,
						  p_skip => c.skipped) l;
		IF v_tokens > coalesce(pg_catalog.cardinality(v_leased), 0) THEN
			PERFORM sched._return_tokens(b.name, v_tokens - coalesce(pg_catalog.cardinality(v_leased), 0));
		END IF;
		CONTINUE WHEN v_leased IS NULL;
		RETURN QUERY
		SELECT t.id, t.bucket, t.biz_type, t.run_at, t.attempt, t.command, t.run_as::oid,
			   extract(epoch FROM b.timeout)::float8 * 1000, NULL::timestamptz
		FROM sched.task t
		WHERE t.bucket = ANY (v_leased_buckets) AND t.id = ANY (v_leased)
		ORDER BY pg_catalog.array_position(c.ids, t.id);
		v_room := v_room - pg_catalog.cardinality(v_leased);
	END LOOP;
	PERFORM sched._load_settle(v_load.taken, v_load.taken - v_room);
	IF v_load.taken < p_room THEN
		v_next := LEAST(v_next, v_load.next_at);
	END IF;
	IF v_next IS NOT NULL OR v_held THEN
		RETURN QUERY SELECT NULL::bigint, NULL::smallint, NULL::text, NULL::timestamptz, NULL::int,
							NULL::text, NULL::oid, NULL::float8, v_next;
	END IF;
END
$$;
COMMENT ON FUNCTION sched._sql_claim(smallint, int) IS 'internal: lease parked jobs of sql types to an SQL worker';

/*
 * Lease to SQL worker p_owner the job a scanner's commit named to it (the
 * ready ring, src/sql/sql_ready.c), found by its key: if it is still
 * parked and its type is an sql type not paused, without a rate limit or a
 * concurrency cap.  Otherwise nothing: the job waits for sched._sql_claim.
 * The lease, and a schedule's next firing, are sched._sql_claim's; the row
 * has its columns (next_at NULL).  Written in C on the job's own partition
 * (src/sql/sql_plans.c), as are _sql_begin and _sql_done, which the
 * workers run for every job: as functions on the partitioned table they
 * cost a short job most of its time.
 */
CREATE OR REPLACE FUNCTION sched._sql_claim_one(p_owner smallint, p_bucket smallint, p_id bigint)
RETURNS TABLE(id bigint, bucket smallint, biz_type text, run_at timestamptz, attempt int,
			  command text, run_as oid, timeout_ms float8, next_at timestamptz)
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_sql_claim_one_sql';
COMMENT ON FUNCTION sched._sql_claim_one(smallint, smallint, bigint) IS 'internal: lease to an SQL worker the parked job a scanner named to it';

/*
 * The start of a run, in the run's own transaction: lock the job's row if
 * it is still this lease's (state 'd', this owner, this attempt).  'run':
 * locked, run it; 'gone': cancelled, finished or taken back meanwhile,
 * nothing to do; 'held': another transaction holds the row (a cancellation
 * not committed yet, say): look again in a moment, never wait for it.
 */
CREATE OR REPLACE FUNCTION sched._sql_begin(p_owner smallint, p_bucket smallint, p_id bigint, p_attempt int)
RETURNS text
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_sql_begin_sql';
COMMENT ON FUNCTION sched._sql_begin(smallint, smallint, bigint, int) IS 'internal: lock an SQL job''s row for its run, if the lease is still the worker''s';

/*
 * The end of a run that succeeded, in the run's transaction: the job is
 * done, if the lease is still the run's, and sched.attempt has the run.
 * (The run holds the row since sched._sql_begin; a procedure that
 * committed inside, in a session worker, gave that lock up with its first
 * COMMIT: if the job was cancelled since, it stays cancelled, and the run
 * is recorded as stale.)
 */
CREATE OR REPLACE FUNCTION sched._sql_done(p_owner smallint, p_bucket smallint, p_id bigint, p_biz_type text,
							   p_attempt int, p_started timestamptz, p_duration_ms float8, p_rows bigint)
RETURNS boolean
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_sql_done_sql';
COMMENT ON FUNCTION sched._sql_done(smallint, smallint, bigint, text, int, timestamptz, float8, bigint) IS 'internal: mark an SQL job done in the transaction of its run';

/*
 * A run that did not commit, recorded in a transaction after it:
 *   p_outcome 'retry'      an error or the timeout: retried after the
 *                          type's backoff (sched._backoff), or dead once
 *                          max_attempts runs have failed;
 *   p_outcome 'dead'       no run can succeed (the role is gone);
 *   p_outcome 'cancelled'  sched.cancel stopped it: it cancels the task
 *                          itself once it has the row.
 * Only if the lease is still the run's; otherwise (and for 'cancelled')
 * sched.attempt keeps the run as it ended.  Returns the outcome recorded,
 * or 'held' if another transaction holds the row: nothing is recorded, and
 * the worker tries again a moment later.
 */
CREATE OR REPLACE FUNCTION sched._sql_record(p_owner smallint, p_bucket smallint, p_id bigint, p_biz_type text,
								 p_attempt int, p_outcome text, p_error text, p_sqlstate text,
								 p_started timestamptz, p_duration_ms float8)
RETURNS text
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
	t record;
	v_outcome text := p_outcome;
	v_error text := p_error;
BEGIN
	SELECT k.attempt, b.max_attempts, b.min_backoff, b.max_backoff INTO t
	FROM sched.task k JOIN sched.biz b ON b.name = k.biz_type
	WHERE k.bucket = p_bucket AND k.id = p_id AND k.state = 'd' AND k.lease_owner = p_owner
	  AND k.attempt = p_attempt
	FOR UPDATE OF k SKIP LOCKED;
	IF NOT FOUND THEN
		IF EXISTS (SELECT FROM sched.task k
				   WHERE k.bucket = p_bucket AND k.id = p_id AND k.state = 'd' AND k.lease_owner = p_owner
					 AND k.attempt = p_attempt) THEN
			RETURN 'held';
		END IF;
		IF v_outcome <> 'cancelled' THEN
			v_outcome := 'stale';
		END IF;
	ELSIF v_outcome = 'cancelled' THEN
		NULL;					-- sched.cancel finishes it
	ELSIF v_outcome = 'dead' OR p_attempt >= t.max_attempts THEN
		v_outcome := 'dead';
		v_error := pg_catalog.format('%s (attempt %s of %s)', p_error, p_attempt, t.max_attempts);
		PERFORM sched._finish(p_bucket, ARRAY[p_id], 'dead', v_error, 'd');
	ELSE
		PERFORM sched._move(p_bucket, p_id,
							pg_catalog.clock_timestamp() + sched._backoff(t.min_backoff, t.max_backoff, p_attempt),
							p_error);
		v_outcome := 'retry';
	END IF;
	INSERT INTO sched.attempt (task_id, attempt, biz_type, started_at, duration, error, outcome, sqlstate)
	VALUES (p_id, p_attempt, p_biz_type, p_started, pg_catalog.make_interval(secs => p_duration_ms / 1000.0),
			v_error, v_outcome, p_sqlstate);
	RETURN v_outcome;
END
$$;
COMMENT ON FUNCTION sched._sql_record(smallint, smallint, bigint, text, int, text, text, text, timestamptz, float8) IS 'internal: record an SQL job''s run that did not commit: retry, dead or cancelled';

/*
 * A run that ended with its worker (a stop, a crash, a worker that never
 * came back), in sched.attempt as every run is: from its lease's start
 * (delivered_at) until now, SQLSTATE 57P01 (admin_shutdown).
 */
CREATE OR REPLACE FUNCTION sched._sql_lost_run(p_id bigint, p_attempt int, p_biz_type text,
								   p_started timestamptz, p_outcome text, p_error text)
RETURNS void
LANGUAGE sql
AS $$
	INSERT INTO sched.attempt (task_id, attempt, biz_type, started_at, duration, error, outcome, sqlstate)
	VALUES (p_id, p_attempt, p_biz_type, coalesce(p_started, pg_catalog.clock_timestamp()),
			GREATEST(interval '0', pg_catalog.clock_timestamp() - coalesce(p_started, pg_catalog.clock_timestamp())),
			p_error, p_outcome, '57P01')
$$;
COMMENT ON FUNCTION sched._sql_lost_run(bigint, int, text, timestamptz, text, text) IS 'internal: record an SQL job''s run that its worker''s end cut short';

/*
 * An SQL worker starting: a job a previous run of it held never ended (the
 * worker or the server stopped in the middle of it; the run rolled back).
 * Give it back at once, the attempt counted (a job that brings its worker
 * down must not do so forever): parked for the next claim, or dead after
 * max_attempts.
 */
CREATE OR REPLACE FUNCTION sched._sql_release(p_owner smallint) RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
	r record;
	n int := 0;
	v_error text;
BEGIN
	-- A row another transaction holds is left to the sweep, which takes
	-- the job back when its lease runs out.
	FOR r IN
		SELECT l.bucket, l.id, l.attempt, l.biz_type, l.delivered_at, b.max_attempts FROM sched.task l
		JOIN sched.biz b ON b.name = l.biz_type
		WHERE l.state = 'd' AND l.lease_owner = p_owner
		FOR UPDATE OF l SKIP LOCKED
	LOOP
		v_error := pg_catalog.format('worker_stopped: the SQL worker stopped during the run (attempt %s of %s)',
									 r.attempt, r.max_attempts);
		IF r.attempt >= r.max_attempts THEN
			PERFORM sched._finish(r.bucket, ARRAY[r.id], 'dead', v_error, 'd');
		ELSE
			PERFORM sched._unlease(ARRAY[r.bucket], ARRAY[r.id], 'expired', v_error);
		END IF;
		PERFORM sched._sql_lost_run(r.id, r.attempt, r.biz_type, r.delivered_at,
									CASE WHEN r.attempt >= r.max_attempts THEN 'dead' ELSE 'retry' END, v_error);
		n := n + 1;
	END LOOP;
	RETURN n;
END
$$;
COMMENT ON FUNCTION sched._sql_release(smallint) IS 'internal: take back the jobs an SQL worker held when it stopped';
