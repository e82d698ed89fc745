-- setup: what the extension installed, and helpers the later tests share.
-- (pg_regress --load-extension already ran CREATE EXTENSION delaysched.)

-- the extension lives in schema sched
SELECT extname, extnamespace::regnamespace AS schema, extversion
FROM pg_extension WHERE extname = 'delaysched';

-- delaysched serves this database
SHOW delaysched.databases;

-- public functions with their arguments
SELECT p.proname, pg_get_function_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS result
FROM pg_proc p
WHERE p.pronamespace = 'sched'::regnamespace AND p.proname !~ '^_'
ORDER BY p.proname;

-- tables, views and the sequence
SELECT c.relname, c.relkind
FROM pg_class c
WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S')
  AND c.relname !~ '^task_[0-9]{4}$'
ORDER BY c.relname;

-- one partition of sched.task per bucket
SELECT sched._bucket_count() AS buckets,
       count(*) AS partitions,
       count(*) = sched._bucket_count() AS one_per_bucket
FROM pg_inherits WHERE inhparent = 'sched.task'::regclass;

-- helper: run a statement, return 'ok' or "SQLSTATE: message [DETAIL] [HINT]"
CREATE FUNCTION try(q text, show_detail boolean DEFAULT false) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text; msg text; det text; hnt text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
	RETURN st || ': ' || msg
		|| CASE WHEN show_detail AND det <> '' THEN ' DETAIL: ' || det ELSE '' END
		|| CASE WHEN hnt <> '' THEN ' HINT: ' || hnt ELSE '' END;
END
$$;

-- helper: poll a condition (SQL, true when done) every 0.1 s for up to 60 s
CREATE FUNCTION wait_until(condition text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	done boolean;
BEGIN
	FOR i IN 1 .. 600 LOOP
		EXECUTE 'SELECT ' || condition INTO done;
		IF done THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
	RETURN false;
END
$$;

-- helper: wait until the scanner has announced every due task of a pull type
CREATE FUNCTION wait_announced(biz text) RETURNS boolean
LANGUAGE sql AS $$
	SELECT wait_until(format('NOT EXISTS (SELECT FROM sched.task t WHERE t.biz_type = %L
	                          AND t.state = %L AND t.run_at <= clock_timestamp())', biz, 'p'))
$$;

-- helper: wait until the scanner runs in this database
CREATE FUNCTION wait_scanner() RETURNS boolean
LANGUAGE sql AS $$
	SELECT wait_until($c$(SELECT count(*) FILTER (WHERE w.pid IS NOT NULL
	                                           AND w.state IN ('sleeping', 'delivering'))
	                           = current_setting('delaysched.workers')::int
	                         AND sum(w.ticks) > 0
	                    FROM sched.workers w WHERE w.role = 'scanner')$c$)
$$;

-- every scanner worker is up, and they have walked this database
SELECT wait_scanner();

-- a fresh store: no types, no tasks, a time pointer per range
SELECT (SELECT count(*) FROM sched.biz) AS biz,
       (SELECT count(*) FROM sched.task) AS tasks,
       (SELECT count(*) FROM sched.finished) AS finished,
       (SELECT count(*) FROM sched.pointer) = current_setting('delaysched.ranges')::int AS pointer_per_range;

-- the task partitions are vacuumed early (a queue churns; see doc/internals.md)
SELECT reloptions FROM pg_class WHERE oid = 'sched.task_0000'::regclass;
