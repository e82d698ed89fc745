-------------------------------------------------------------------------------
-- Validation helpers (all raise clear errors; none returns on bad input)
-------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION sched._require(value anyelement, what text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
	IF value IS NULL THEN
		RAISE EXCEPTION '% must not be null', what
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
END
$$;
COMMENT ON FUNCTION sched._require(anyelement, text) IS 'internal: refuse a NULL argument';

-- A value quoted in an error message: at most 64 characters of it, so that
-- a megabyte of bad input does not make a megabyte of message.
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

/*
 * The business type a task function names, or an error naming it.  The row
 * is locked FOR KEY SHARE (as a foreign key check would) so that a
 * concurrent sched.drop_biz waits for this transaction, and this one for it:
 * no task is ever stored for a type being dropped.
 */
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

/*
 * Tasks of an sql type carry a command and the role it runs as, which only
 * sched.add_sql and sched.define_schedule set: the other ways of adding a
 * task refuse such a type.
 */
CREATE OR REPLACE FUNCTION sched._check_not_sql(b sched.biz) RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
	IF b.delivery = 'sql' THEN
		RAISE EXCEPTION 'business type "%" runs sql commands', b.name
			USING ERRCODE = 'wrong_object_type',
				  HINT = 'Add its jobs with sched.add_sql(biz_type, run_at, command).';
	END IF;
END
$$;
COMMENT ON FUNCTION sched._check_not_sql(sched.biz) IS 'internal: refuse a type whose tasks are SQL jobs to the functions that add payloads';

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

CREATE OR REPLACE FUNCTION sched._check_array(value anyarray, what text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
	IF value IS NOT NULL AND pg_catalog.cardinality(value) > 0
	   AND (pg_catalog.array_ndims(value) <> 1 OR pg_catalog.array_lower(value, 1) <> 1) THEN
		RAISE EXCEPTION '% must be a one-dimensional array starting at subscript 1', what
			USING ERRCODE = 'array_subscript_error';
	END IF;
END
$$;
COMMENT ON FUNCTION sched._check_array(anyarray, text) IS 'internal: refuse a multi-dimensional array or one not starting at 1';

/*
 * A rate limit and its bucket's size, of a type (rate_limit, burst) or of
 * each of its keys (key_rate_limit, key_burst): returns the size, by
 * default one second of the rate (at least one token).
 */
CREATE OR REPLACE FUNCTION sched._check_rate(p_rate float8, p_burst int, p_rate_name text, p_burst_name text)
RETURNS int
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
	IF p_rate IS NOT NULL THEN
		IF p_rate = 'NaN' OR p_rate IN ('Infinity', '-Infinity') THEN
			RAISE EXCEPTION '% must be a finite number, not %', p_rate_name, p_rate
				USING ERRCODE = 'invalid_parameter_value';
		ELSIF p_rate <= 0 THEN
			RAISE EXCEPTION '% must be between 0.001 and 1000000 deliveries per second, not %', p_rate_name, p_rate
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'To stop a type''s deliveries for a while, use sched.pause.';
		ELSIF p_rate < 0.001 OR p_rate > 1000000 THEN
			RAISE EXCEPTION '% must be between 0.001 and 1000000 deliveries per second, not %', p_rate_name, p_rate
				USING ERRCODE = 'invalid_parameter_value';
		END IF;
		p_burst := coalesce(p_burst, GREATEST(1, pg_catalog.ceil(p_rate))::int);
	ELSIF p_burst IS NOT NULL THEN
		RAISE EXCEPTION '% needs a %', p_burst_name, p_rate_name
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = pg_catalog.format('%s is the size of the token bucket that %s fills.', p_burst_name, p_rate_name);
	END IF;
	IF p_burst < 1 OR p_burst > 1000000 THEN
		RAISE EXCEPTION '% must be between 1 and 1000000, not %', p_burst_name, p_burst
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	RETURN p_burst;
END
$$;
COMMENT ON FUNCTION sched._check_rate(float8, int, text, text) IS 'internal: refuse a rate limit or bucket size define_biz does not take; the bucket size, by default';

CREATE OR REPLACE FUNCTION sched._check_cap(p_cap int, p_name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
	IF p_cap < 1 OR p_cap > 100000 THEN
		RAISE EXCEPTION '% must be between 1 and 100000, not %', p_name, p_cap
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
END
$$;
COMMENT ON FUNCTION sched._check_cap(int, text) IS 'internal: refuse a concurrency cap define_biz does not take';

/*
 * Checks shared by every way of adding a task.
 */
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

/*
 * A task's key (its turn among the type's keys) and priority; the priority
 * comes as an int, so that a literal needs no cast, and is stored as a
 * smallint.
 */
CREATE OR REPLACE FUNCTION sched._check_key(key text, priority int) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
	IF key IS NOT NULL AND (key = '' OR pg_catalog.octet_length(key) > 512) THEN
		RAISE EXCEPTION 'key must be between 1 and 512 bytes long'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Pass NULL for a task without a key.';
	END IF;
	PERFORM sched._require(priority, 'priority');
	IF priority NOT BETWEEN -32768 AND 32767 THEN
		RAISE EXCEPTION 'priority must be between -32768 and 32767, not %', priority
			USING ERRCODE = 'numeric_value_out_of_range';
	END IF;
END
$$;
COMMENT ON FUNCTION sched._check_key(text, int) IS 'internal: refuse a key or priority a task cannot have';

/* What sched.add does with a dedupe key already held (see sched._insert). */
CREATE OR REPLACE FUNCTION sched._check_on_duplicate(on_duplicate text, max_wait interval) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
	PERFORM sched._require(on_duplicate, 'on_duplicate');
	IF on_duplicate NOT IN ('keep', 'replace', 'debounce') THEN
		RAISE EXCEPTION 'invalid on_duplicate "%"', sched._clip(on_duplicate)
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'on_duplicate is ''keep'' (the task holding the dedupe key stays as it is), ''replace'' (it takes the new run_at and payload) or ''debounce'' (the same, no later than max_wait after its first add).';
	END IF;
	IF max_wait IS NOT NULL THEN
		IF on_duplicate <> 'debounce' THEN
			RAISE EXCEPTION 'max_wait is for on_duplicate ''debounce'' only'
				USING ERRCODE = 'invalid_parameter_value';
		END IF;
		PERFORM sched._check_interval(max_wait, 'max_wait', interval '0', interval '1 year');
	END IF;
END
$$;
COMMENT ON FUNCTION sched._check_on_duplicate(text, interval) IS 'internal: refuse an on_duplicate or max_wait sched.add does not know';

/* A type's waits before a retry (every delivery; see sched._backoff). */
CREATE OR REPLACE FUNCTION sched._check_backoff(min_backoff interval, max_backoff interval) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
	PERFORM sched._check_interval(min_backoff, 'min_backoff', interval '10 milliseconds', interval '1 day');
	PERFORM sched._check_interval(max_backoff, 'max_backoff', interval '10 milliseconds', interval '7 days');
	IF max_backoff < min_backoff THEN
		RAISE EXCEPTION 'max_backoff (%) must not be less than min_backoff (%)', max_backoff, min_backoff
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
END
$$;
COMMENT ON FUNCTION sched._check_backoff(interval, interval) IS 'internal: refuse a min_backoff or max_backoff outside its range, or a max below the min';

/*
 * The arguments of an http business type (see sched.define_biz).  The URL
 * is parsed by libcurl's parser in C (sched._check_url); the rest here.
 */
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
	PERFORM sched._check_backoff(min_backoff, max_backoff);
	IF secret IS NOT NULL AND (pg_catalog.octet_length(secret) < 16 OR pg_catalog.octet_length(secret) > 1024) THEN
		RAISE EXCEPTION 'secret must be 16 to 1024 bytes long'
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Use a random string, for example encode(gen_random_bytes(32), ''hex'') from pgcrypto.';
	END IF;
	PERFORM sched._require(follow_redirects, 'follow_redirects');
END
$$;
COMMENT ON FUNCTION sched._check_http(text, jsonb, interval, interval, interval, text, boolean) IS 'internal: refuse the arguments of an http type that could not work';

/*
 * Per-type grants.  The public functions run as the extension's owner
 * (SECURITY DEFINER); sched._caller() is the role that called them, after
 * SET ROLE.  Superusers and members of the extension's owner may do
 * everything (sched._caller_is_admin(), which the hot paths ask first);
 * any other role acts only on the types granted to it with sched.grant_biz:
 * 'schedule' (add, cancel, reschedule, retry), 'consume' (claim, ack,
 * nack) or 'read' (the views; every grant includes it).
 */
/* The types the caller holds privilege on; NULL for every type (admins). */
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

CREATE OR REPLACE FUNCTION sched._require_grant(p_biz text, p_privilege text) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
	v_types text[] := sched._granted_types(p_privilege);
BEGIN
	IF v_types IS NOT NULL AND NOT p_biz = ANY (v_types) THEN
		RAISE EXCEPTION 'permission denied for business type "%"', p_biz
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = pg_catalog.format('Role %s does not hold the ''%s'' privilege on it.',
											 sched._caller()::regrole, p_privilege),
				  HINT = pg_catalog.format('An administrator can grant it: SELECT sched.grant_biz(%L, %L, %L);',
										   p_biz, sched._caller()::regrole::text, p_privilege);
	END IF;
END
$$;
COMMENT ON FUNCTION sched._require_grant(text, text) IS 'internal: refuse a caller without a privilege on a business type';
