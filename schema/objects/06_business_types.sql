-------------------------------------------------------------------------------
-- Public functions: business types (administrators)
-------------------------------------------------------------------------------

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
	timeout interval DEFAULT NULL,
	min_backoff interval DEFAULT '1 second',
	max_backoff interval DEFAULT '1 hour',
	secret text DEFAULT NULL,
	follow_redirects boolean DEFAULT false,
	weight int DEFAULT 1,
	key_max_concurrency int DEFAULT NULL,
	key_rate_limit float8 DEFAULT NULL,
	key_burst int DEFAULT NULL)
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
	IF delivery NOT IN ('notify', 'pull', 'http', 'sql') THEN
		RAISE EXCEPTION 'invalid delivery "%"', sched._clip(delivery)
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'delivery is ''notify'' (push to LISTENers), ''pull'' (announce, then sched.claim), ''http'' (POST to url) or ''sql'' (run a command: sched.add_sql).';
	END IF;
	IF delivery = 'http' THEN
		timeout := coalesce(timeout, interval '10 seconds');
		PERFORM sched._check_http(url, headers, timeout, min_backoff, max_backoff, secret, follow_redirects);
	ELSE
		IF url IS NOT NULL OR headers IS NOT NULL OR secret IS NOT NULL OR follow_redirects THEN
			RAISE EXCEPTION 'url, headers, secret and follow_redirects are for delivery ''http'' only'
				USING ERRCODE = 'invalid_parameter_value';
		END IF;
		IF delivery = 'sql' THEN
			-- timeout is the statement timeout of one run.
			timeout := coalesce(timeout, interval '1 hour');
			PERFORM sched._check_interval(timeout, 'timeout', interval '100 milliseconds', interval '7 days');
		ELSE
			timeout := NULL;
		END IF;
		-- The waits before a retry: after a failed run (sql), a nack without
		-- retry_in or a lease that ran out (notify, pull).
		PERFORM sched._check_backoff(min_backoff, max_backoff);
	END IF;
	PERFORM sched._check_name(v_channel, 'channel name',
		'LISTEN folds unquoted names to lower case, so a channel is a lowercase identifier.');
	PERFORM sched._require(max_attempts, 'max_attempts');
	IF max_attempts < 1 OR max_attempts > 1000 THEN
		RAISE EXCEPTION 'max_attempts must be between 1 and 1000, not %', max_attempts
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM sched._check_interval(ack_timeout, 'ack_timeout', interval '1 second', interval '7 days');
	burst := sched._check_rate(rate_limit, burst, 'rate_limit', 'burst');
	key_burst := sched._check_rate(key_rate_limit, key_burst, 'key_rate_limit', 'key_burst');
	PERFORM sched._check_cap(max_concurrency, 'max_concurrency');
	PERFORM sched._check_cap(key_max_concurrency, 'key_max_concurrency');
	PERFORM sched._require(weight, 'weight');
	IF weight < 1 OR weight > 1000 THEN
		RAISE EXCEPTION 'weight must be between 1 and 1000, not %', weight
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'A type with weight 3 gets three times the deliveries of a type with weight 1 while both have due tasks.';
	END IF;

	SELECT b.delivery, b.rate_limit INTO v_old_delivery, v_old_rate
		FROM sched.biz b WHERE b.name = define_biz.name
		FOR NO KEY UPDATE;
	-- An SQL job's task carries a command and a role, no other task does:
	-- a type with tasks or schedules keeps whether it runs commands.
	IF (v_old_delivery = 'sql') <> (delivery = 'sql')
	   AND (EXISTS (SELECT FROM sched.task t WHERE t.biz_type = define_biz.name)
			OR EXISTS (SELECT FROM sched.schedule x WHERE x.biz_type = define_biz.name)) THEN
		RAISE EXCEPTION 'business type "%" cannot change its delivery from % to %', name, v_old_delivery, delivery
			USING ERRCODE = 'object_in_use',
				  DETAIL = 'It has unfinished tasks or schedules, and only the tasks of an sql type are commands.',
				  HINT = 'Define a new type, or drop this one with its tasks first.';
	END IF;
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
								follow_redirects, weight, key_max_concurrency, key_rate_limit, key_burst)
		VALUES (name, delivery, v_channel, max_attempts, ack_timeout,
				rate_limit, burst, max_concurrency,
				url, headers, timeout, min_backoff, max_backoff, secret,
				coalesce(follow_redirects, false), weight, key_max_concurrency, key_rate_limit, key_burst)
	ON CONFLICT ON CONSTRAINT biz_pkey DO UPDATE
		SET delivery = excluded.delivery, channel = excluded.channel,
			max_attempts = excluded.max_attempts, ack_timeout = excluded.ack_timeout,
			rate_limit = excluded.rate_limit, burst = excluded.burst,
			max_concurrency = excluded.max_concurrency,
			url = excluded.url, headers = excluded.headers, timeout = excluded.timeout,
			min_backoff = excluded.min_backoff, max_backoff = excluded.max_backoff,
			secret = excluded.secret, follow_redirects = excluded.follow_redirects,
			weight = excluded.weight, key_max_concurrency = excluded.key_max_concurrency,
			key_rate_limit = excluded.key_rate_limit, key_burst = excluded.key_burst, updated_at = now();
	-- The HTTP and SQL workers read the definitions afresh when they claim.
	IF delivery = 'http' OR v_old_delivery = 'http' THEN
		PERFORM sched._wake_http();
	END IF;
	IF delivery = 'sql' THEN
		PERFORM sched._wake_sql();
	END IF;
	IF rate_limit IS NULL AND v_old_rate IS NOT NULL THEN
		PERFORM sched._forget_bucket(name, false);
	END IF;
	-- A new definition (a longer lease, another delivery) starts without a
	-- hold to its consumers' pace; a late acknowledgement makes one again.
	PERFORM sched._pace_release(name, true);
	-- The drain reads the limits afresh: let it look at once, with the new ones.
	PERFORM sched._wake_drain();

	-- A pull or http type turned notify: its announced or parked tasks ('r')
	-- wait for a claim that no consumer will make; make them pending again,
	-- behind the pointer, for the sweep to deliver by NOTIFY.
	IF v_old_delivery IN ('pull', 'http') AND delivery = 'notify' THEN
		PERFORM sched._unpark(define_biz.name);
	END IF;
END
$$;
COMMENT ON FUNCTION sched.define_biz(text, text, text, int, interval, float8, int, int,
									 text, jsonb, interval, interval, interval, text, boolean, int,
									 int, float8, int) IS 'create or replace a delaysched business type';

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
	PERFORM sched._pace_release(name, true);
	RETURN v_unfinished;
END
$$;
COMMENT ON FUNCTION sched.drop_biz(text, boolean) IS 'drop a delaysched business type; with cancel_tasks, drop its schedules and cancel its unfinished tasks';

/*
 * Make the parked tasks of business type p_biz pending again, behind the
 * pointers, for the sweep to deliver in run_at order; true if there were
 * any.  The caller holds every range's row of sched.pointer.  Each range
 * that got tasks back has the earliest of their run_ats set as its
 * behind_from, which its next tick reads under its lock on the row and
 * sweeps from.  The wake-up alone would not do: it is published after the
 * commit is visible, and a tick that began in between would sweep from
 * where the last sweep stopped, delivering the later tasks first
 * (src/core/tick.c).
 */
CREATE OR REPLACE FUNCTION sched._unpark(p_biz text) RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
	WITH released AS (
		UPDATE sched.task t SET state = 'p' WHERE t.biz_type = p_biz AND t.state = 'r'
		RETURNING t.door, t.run_at
	), firsts AS (
		SELECT r.door, pg_catalog.min(r.run_at) AS run_at FROM released r GROUP BY r.door
	)
	UPDATE sched.pointer p SET behind_from = LEAST(p.behind_from, f.run_at)
	FROM firsts f WHERE p.range_id = f.door;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	PERFORM sched._wake('-infinity');
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched._unpark(text) IS 'internal: make a type''s parked tasks pending again behind the pointers, marking each range''s row to sweep from them; the caller holds every range''s row';

/*
 * Pausing a type stops its deliveries at once: the tasks that fall due stay
 * pending (parked in state 'r', out of the scanner's index, so a paused
 * backlog costs the scan nothing), sched.claim hands out none, and leases
 * that run out park their task instead of redelivering it.  Both functions
 * hold every range's pointer row, which every tick locks first: ticks under
 * way finish before the change, and none starts until it commits, so no
 * tick delivers a paused type's task after sched.pause returns, and none
 * parks a task after sched.resume has released the parked ones.
 */
CREATE OR REPLACE FUNCTION sched._set_paused(p_biz text, p_paused boolean) RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
	b sched.biz;
BEGIN
	PERFORM sched._require(p_biz, 'biz_type');
	b := sched._biz(p_biz);
	SELECT * INTO b FROM sched.biz x WHERE x.name = b.name FOR NO KEY UPDATE;
	IF b.paused = p_paused THEN
		RETURN false;
	END IF;
	PERFORM 1 FROM sched.pointer p ORDER BY p.range_id FOR UPDATE;
	UPDATE sched.biz x SET paused = p_paused, updated_at = now() WHERE x.name = b.name;
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched._set_paused(text, boolean) IS 'internal: pause or resume a business type, holding every range; false if it already was';

CREATE OR REPLACE FUNCTION sched.pause(biz_type text) RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT sched._set_paused(biz_type, true) $$;
COMMENT ON FUNCTION sched.pause(text) IS 'stop delivering the tasks of a business type until sched.resume; false if it was paused already';

CREATE OR REPLACE FUNCTION sched.resume(biz_type text) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	b sched.biz;
BEGIN
	IF NOT sched._set_paused(biz_type, false) THEN
		RETURN false;
	END IF;
	b := sched._biz(biz_type);
	IF b.delivery = 'pull' THEN
		-- Its tasks are claimable again: tell the consumers.
		IF EXISTS (SELECT 1 FROM sched.task t
				   WHERE t.biz_type = b.name AND t.state IN ('p', 'r') AND t.run_at <= now()) THEN
			PERFORM pg_catalog.pg_notify(b.channel, sched._announcement(b.name));
		END IF;
	ELSE
		-- The parked tasks are pending again, behind the pointer, for the
		-- sweep to deliver in run_at order.
		IF sched._unpark(b.name) THEN
			-- A limited type's tasks are parked again for the drain, whose
			-- hint of the type may be older than the pause.
			PERFORM sched._wake_drain();
		END IF;
	END IF;
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.resume(text) IS 'deliver the tasks of a paused business type again, the parked ones first; false if it was not paused';

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
CREATE OR REPLACE FUNCTION sched._check_grant(p_role regrole, p_privilege text) RETURNS void
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
