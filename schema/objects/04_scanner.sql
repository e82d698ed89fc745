-------------------------------------------------------------------------------
-- The scanner's statements.  A tick (src/tick.c) walks the range and
-- delivers with statements on the leaf partitions, prepared in C; the sweep
-- calls these two.
-------------------------------------------------------------------------------

/*
 * Deliveries of a range whose lease ran out: a notify or pull task waits
 * the type's backoff as pending (then delivered as any due task: within
 * the type's limits, or parked while it is paused), an HTTP request or SQL
 * job whose worker died is parked for the workers again; or dead after
 * max_attempts.  Only leases that ran out at or after
 * p_from: the sweep passes where the previous one left off, so as not to
 * read again the leases of acknowledged tasks, which stay in the index
 * until vacuum (while a transaction holds back the xmin horizon, all of
 * them).
 */
CREATE OR REPLACE FUNCTION sched._expire_leases(p_range smallint, p_now timestamptz, p_batch int,
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
		SELECT t.bucket, t.id, t.biz_type, t.attempt, t.delivered_at,
			   b.delivery, b.max_attempts, b.paused, b.ack_timeout, b.min_backoff, b.max_backoff
		FROM sched.task t JOIN sched.biz b ON b.name = t.biz_type
		WHERE t.door = p_range AND t.state = 'd' AND t.lease_until <= p_now
		  AND t.lease_until >= p_from
		ORDER BY t.lease_until
		LIMIT p_batch
		FOR UPDATE OF t SKIP LOCKED
	LOOP
		-- The type's row too, FOR KEY SHARE, as whatever stores a task
		-- holds it (sched._biz): a task moved below is then never one that
		-- a sched.drop_biz under way has passed by.  A type that drop_biz
		-- holds is skipped: it cancels the task, or a later sweep finds it.
		PERFORM FROM sched.biz b WHERE b.name = r.biz_type FOR KEY SHARE SKIP LOCKED;
		CONTINUE WHEN NOT FOUND;
		IF r.delivery = 'http' THEN
			-- The HTTP worker that sent it did not record a result: it died.
			v_error := pg_catalog.format('no_result: no result recorded for the HTTP request (attempt %s of %s)',
										 r.attempt, r.max_attempts);
		ELSIF r.delivery = 'sql' THEN
			-- The SQL worker running it neither committed nor recorded a
			-- failure: it died and did not come back.
			v_error := pg_catalog.format('no_result: the SQL worker holding the job stopped (attempt %s of %s)',
										 r.attempt, r.max_attempts);
		ELSE
			v_error := pg_catalog.format('ack_timeout: not acknowledged within %s (attempt %s of %s)',
										 r.ack_timeout, r.attempt, r.max_attempts);
		END IF;
		PERFORM sched._tally(r.biz_type, 'ack_timeout', 1);
		IF r.delivery IN ('notify', 'pull') THEN
			-- Its consumers fell behind (src/core/pace.c).
			PERFORM sched._note_expired(r.biz_type, r.delivered_at);
		END IF;
		IF r.delivery = 'sql' THEN
			PERFORM sched._sql_lost_run(r.id, r.attempt, r.biz_type, r.delivered_at,
										CASE WHEN r.attempt >= r.max_attempts THEN 'dead' ELSE 'retry' END, v_error);
		END IF;
		IF r.attempt >= r.max_attempts THEN
			PERFORM sched._finish(r.bucket, ARRAY[r.id], 'dead', v_error);
		ELSIF r.delivery IN ('notify', 'pull') THEN
			-- Tried again after the type's backoff, as after a nack.
			PERFORM sched._move(r.bucket, r.id,
								pg_catalog.clock_timestamp() + sched._backoff(r.min_backoff, r.max_backoff, r.attempt),
								v_error);
		ELSE
			-- An HTTP or SQL worker died holding it: parked for the workers
			-- again at once (or until sched.resume).
			PERFORM sched._unlease(ARRAY[r.bucket], ARRAY[r.id], 'expired', v_error);
			IF r.paused THEN
				NULL;
			ELSIF r.delivery = 'http' THEN
				PERFORM sched._wake_http();
			ELSE
				PERFORM sched._wake_sql();
			END IF;
		END IF;
		n := n + 1;
	END LOOP;
	IF n > 0 THEN
		-- A delivery that ends frees a slot of its type's concurrency cap.
		PERFORM sched._wake_drain(true);
	END IF;
	RETURN n;
END
$$;
COMMENT ON FUNCTION sched._expire_leases(smallint, timestamptz, int, timestamptz) IS 'internal: retry after a backoff, re-park or kill the deliveries of a range whose lease ran out';

/*
 * Remove finished tasks past their retention, a batch at a time, oldest
 * first.  Only done and cancelled tasks finished at or after p_done_from,
 * and dead ones finished at or after p_dead_from: the sweep passes where the
 * previous one left off, so as not to read again the index entries of the
 * rows it removed, which stay until vacuum (while a transaction holds back
 * the xmin horizon, all of them).  Each kind is searched apart, so that
 * neither steps over the other's rows (dead tasks are kept longer).
 */
CREATE OR REPLACE FUNCTION sched._purge(p_now timestamptz, p_retention_s int, p_dead_retention_s int, p_batch int,
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
