-------------------------------------------------------------------------------
-- C functions
-------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION sched._wake(run_at timestamptz, door smallint DEFAULT NULL, far boolean DEFAULT NULL)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_wake';
COMMENT ON FUNCTION sched._wake(timestamptz, smallint, boolean) IS 'internal: after commit, wake a scanner worker for the range of door (every range if NULL) if run_at is sooner than planned; far (NULL: judged by the clock) reports it to the far search';

CREATE OR REPLACE FUNCTION sched._wake_drain(for_slot boolean DEFAULT false) RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_wake_drain';
COMMENT ON FUNCTION sched._wake_drain(boolean) IS 'internal: after commit, run the drain (for_slot: only if a type waits at its concurrency cap)';


CREATE OR REPLACE FUNCTION sched._tokens(biz_type text, rate float8, burst int) RETURNS float8
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_tokens_sql';
COMMENT ON FUNCTION sched._tokens(text, float8, int) IS 'internal: the tokens a type''s bucket holds now';

CREATE OR REPLACE FUNCTION sched._take_tokens(biz_type text, rate float8, burst int, want int) RETURNS int
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_take_tokens_sql';
COMMENT ON FUNCTION sched._take_tokens(text, float8, int, int) IS 'internal: take up to want tokens of a type''s bucket';

CREATE OR REPLACE FUNCTION sched._return_tokens(biz_type text, n int) RETURNS void
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_return_tokens_sql';
COMMENT ON FUNCTION sched._return_tokens(text, int) IS 'internal: give back tokens taken and not used';

-- The keys' buckets (src/core/key_limiter.c), for key_rate_limit.
CREATE OR REPLACE FUNCTION sched._take_key_tokens(biz_type text, keys text[], wants int[], rate float8, burst int)
RETURNS int[]
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_take_key_tokens_sql';
COMMENT ON FUNCTION sched._take_key_tokens(text, text[], int[], float8, int) IS 'internal: take up to wants[i] tokens of the bucket of keys[i] of a type';

CREATE OR REPLACE FUNCTION sched._return_key_tokens(biz_type text, keys text[], counts int[]) RETURNS void
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_return_key_tokens_sql';
COMMENT ON FUNCTION sched._return_key_tokens(text, text[], int[]) IS 'internal: give back keys'' tokens taken and not used';

CREATE OR REPLACE FUNCTION sched._note_consumer() RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_note_consumer_sql';
COMMENT ON FUNCTION sched._note_consumer() IS 'internal: the session consumes tasks, and load control does not count it among the busy client sessions';

CREATE OR REPLACE FUNCTION sched._load_take(want int, OUT taken int, OUT next_at timestamptz)
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_load_take_sql';
COMMENT ON FUNCTION sched._load_take(int) IS 'internal: up to want deliveries load control allows now, and when one will be if none is';

CREATE OR REPLACE FUNCTION sched._load_settle(taken int, used int) RETURNS void
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_load_settle_sql';
COMMENT ON FUNCTION sched._load_settle(int, int) IS 'internal: of a take of load control''s tokens, used were delivered; the rest go back';

CREATE OR REPLACE FUNCTION sched._key_tokens_next() RETURNS timestamptz
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_key_tokens_next_sql';
COMMENT ON FUNCTION sched._key_tokens_next() IS 'internal: when the first key this session''s takes held back gets its next token';

CREATE OR REPLACE FUNCTION sched._key_buckets(OUT buckets bigint, OUT capacity int, OUT made bigint,
											  OUT dropped bigint, OUT refused bigint)
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_key_buckets_sql';
COMMENT ON FUNCTION sched._key_buckets() IS 'internal: the table of keys'' token buckets: its size, its capacity, and the buckets made, dropped idle and refused';

CREATE OR REPLACE FUNCTION sched._forget_bucket(biz_type text, dropped boolean) RETURNS void
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_forget_bucket_sql';
COMMENT ON FUNCTION sched._forget_bucket(text, boolean) IS 'internal: free the token bucket of a type that lost its rate limit or was dropped';

-- Consumer pace (src/core/pace.c): notify and pull types held to what
-- their consumers acknowledge in time.
CREATE OR REPLACE FUNCTION sched._note_ack(biz_type text, delivered_at timestamptz) RETURNS boolean
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_note_ack_sql';
COMMENT ON FUNCTION sched._note_ack(text, timestamptz) IS 'internal: a delivery of a type, made then, was acknowledged now (true: its consumers are followed)';

CREATE OR REPLACE FUNCTION sched._note_expired(biz_type text, delivered_at timestamptz) RETURNS void
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_note_expired_sql';
COMMENT ON FUNCTION sched._note_expired(text, timestamptz) IS 'internal: the lease of a delivery of a type, made then, ran out';

CREATE OR REPLACE FUNCTION sched._pace_holds(biz_type text) RETURNS boolean
LANGUAGE c STRICT STABLE
AS 'MODULE_PATHNAME', 'delaysched_pace_holds_sql';
COMMENT ON FUNCTION sched._pace_holds(text) IS 'internal: whether a type is held to its consumers'' pace (its tasks parked for the drain)';

CREATE OR REPLACE FUNCTION sched._consumer_cap(biz_type text) RETURNS int
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_consumer_cap_sql';
COMMENT ON FUNCTION sched._consumer_cap(text) IS 'internal: the deliveries awaiting acknowledgement a type is held to by its consumers'' pace (NULL: not held; 0: being set)';

CREATE OR REPLACE FUNCTION sched._pace_start(biz_type text, in_flight int) RETURNS int
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_pace_start_sql';
COMMENT ON FUNCTION sched._pace_start(text, int) IS 'internal: set a newly held type''s first pace cap from what its consumers hold';

CREATE OR REPLACE FUNCTION sched._pace_release(biz_type text, forget boolean DEFAULT false) RETURNS void
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_pace_release_sql';
COMMENT ON FUNCTION sched._pace_release(text, boolean) IS 'internal: a type''s consumers caught up: no longer held to their pace (forget: the type was dropped or defined again)';

CREATE OR REPLACE FUNCTION sched._caller() RETURNS oid
LANGUAGE c STRICT STABLE
AS 'MODULE_PATHNAME', 'delaysched_caller';
COMMENT ON FUNCTION sched._caller() IS 'internal: the role that called the SECURITY DEFINER function running (current_user outside it)';

CREATE OR REPLACE FUNCTION sched._caller_is_admin() RETURNS boolean
LANGUAGE c STRICT STABLE
AS 'MODULE_PATHNAME', 'delaysched_caller_is_admin';
COMMENT ON FUNCTION sched._caller_is_admin() IS 'internal: inside a public function, is its caller a superuser or a member of the extension''s owner';

CREATE OR REPLACE FUNCTION sched._check_url(url text) RETURNS void
LANGUAGE c STRICT STABLE
AS 'MODULE_PATHNAME', 'delaysched_check_url';
COMMENT ON FUNCTION sched._check_url(text) IS 'internal: refuse a webhook URL that is not plain http(s) to a host, or that names a blocked address';

CREATE OR REPLACE FUNCTION sched._wake_http() RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_wake_http';
COMMENT ON FUNCTION sched._wake_http() IS 'internal: wake the HTTP workers after the calling transaction commits';

/*
 * SQL jobs (src/sql/).  _check_command refuses a command that could never
 * run: NULL (with the hint given), empty, larger than
 * delaysched.max_payload_size, not parsable, or holding transaction control
 * (a job runs in a transaction of its own).  _wake_sql sets the SQL
 * workers' latches after commit.  _sql_interrupt cancels the statement of
 * the SQL worker running the job with this id, if one does.
 */
CREATE OR REPLACE FUNCTION sched._check_command(command text, hint text) RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_check_command';
COMMENT ON FUNCTION sched._check_command(text, text) IS 'internal: refuse an SQL job''s command that could never run';

CREATE OR REPLACE FUNCTION sched._wake_sql() RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_wake_sql';
COMMENT ON FUNCTION sched._wake_sql() IS 'internal: wake the SQL workers of this database after commit';

CREATE OR REPLACE FUNCTION sched._sql_interrupt(id bigint) RETURNS boolean
LANGUAGE c VOLATILE STRICT
AS 'MODULE_PATHNAME', 'delaysched_sql_interrupt';
COMMENT ON FUNCTION sched._sql_interrupt(bigint) IS 'internal: cancel the statement of the SQL worker running this job, if one does';

CREATE OR REPLACE FUNCTION sched._handoff_lease(id bigint) RETURNS boolean
LANGUAGE c VOLATILE STRICT
AS 'MODULE_PATHNAME', 'delaysched_handoff_lease';
COMMENT ON FUNCTION sched._handoff_lease(bigint) IS 'internal: whether the scanner''s delivery statement leases this task to an HTTP worker (src/handoff.c)';

/*
 * The lease transition for the functions below that deliver: state 'd',
 * attempt + 1, delivered_at, lease_until, lease_owner, written once in
 * src/lease.h and shared with the scanner's walk and drain.  The caller has
 * locked the rows; those not in one of p_states, and those in p_skip, are
 * left alone.  p_error, if not NULL, is recorded as last_error.
 */
CREATE OR REPLACE FUNCTION sched._lease(p_buckets smallint[], p_ids bigint[], p_states "char"[],
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

CREATE OR REPLACE FUNCTION sched._workers(
	OUT worker int, OUT pid int, OUT role text, OUT holds text, OUT state text,
	OUT last_tick timestamptz, OUT delivered bigint, OUT ticks bigint)
RETURNS SETOF record
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_worker_status';
COMMENT ON FUNCTION sched._workers() IS 'internal: the workers'' shared-memory status, behind sched.workers';

CREATE OR REPLACE FUNCTION sched._cluster(
	OUT role text, OUT database name, OUT pid int, OUT state text,
	OUT scanners int, OUT scanners_granted int, OUT http_workers int, OUT http_granted int,
	OUT failures int, OUT next_start timestamptz, OUT pointer_lag interval,
	OUT served_since timestamptz, OUT sql_workers int, OUT sql_granted int,
	OUT flow_control text, OUT deliveries_per_second float8, OUT deliveries_allowed float8,
	OUT busy_sessions float8, OUT usual_busy_sessions float8, OUT held_back_by text,
	OUT standby_lag_bytes bigint)
RETURNS SETOF record
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_cluster_status';
COMMENT ON FUNCTION sched._cluster() IS 'internal: the launcher and every database served, from shared memory, behind sched.cluster';

CREATE OR REPLACE FUNCTION sched._buckets_elsewhere() RETURNS int
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_buckets_elsewhere_sql';
COMMENT ON FUNCTION sched._buckets_elsewhere() IS 'internal: token buckets of rate-limited types in the other databases (delaysched.max_biz_types counts them all)';

CREATE OR REPLACE FUNCTION sched._database_listed() RETURNS boolean
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_database_listed_sql';
COMMENT ON FUNCTION sched._database_listed() IS 'internal: whether delaysched.databases (or the deprecated delaysched.database) lets delaysched serve the current database';

CREATE OR REPLACE FUNCTION sched._message(p_id bigint, p_biz text, p_run_at timestamptz, p_payload jsonb, p_attempt int,
							   p_schedule text DEFAULT NULL, p_key text DEFAULT NULL)
RETURNS text
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'delaysched_message';
COMMENT ON FUNCTION sched._message(bigint, text, timestamptz, jsonb, int, text, text) IS 'internal: the NOTIFY payload of a delivery (without the payload if it would not fit in 8000 bytes; with the schedule that made it and the task''s key, if any)';

CREATE OR REPLACE FUNCTION sched._announcement(p_biz text) RETURNS text
LANGUAGE c STRICT IMMUTABLE
AS 'MODULE_PATHNAME', 'delaysched_announcement';
COMMENT ON FUNCTION sched._announcement(text) IS 'internal: the NOTIFY payload announcing due tasks of a pull type';

-- The sweep's statements (sched._expire_leases, sched._purge) are defined
-- further down; a tick calls them by name when it runs.
CREATE OR REPLACE FUNCTION sched._tick(p_range smallint, p_now timestamptz, p_batch int, p_sweep boolean,
							p_retention_s int, p_dead_retention_s int,
							p_cursor_run_at timestamptz, p_cursor_id bigint,
							p_park_all boolean DEFAULT false,
							OUT held boolean,
							OUT delivered bigint, OUT time_pointer timestamptz,
							OUT next_due timestamptz, OUT next_sweep timestamptz,
							OUT cursor_run_at timestamptz, OUT cursor_id bigint)
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_tick_sql';
COMMENT ON FUNCTION sched._tick(smallint, timestamptz, int, boolean, int, int, timestamptz, bigint, boolean) IS 'internal: one tick of a scanner worker on one range';
