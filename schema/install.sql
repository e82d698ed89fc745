/*
 * schema/install.sql
 *		The task store of a fresh install: tables, indexes, partitions.
 *
 * Layout of the store:
 *	 sched.biz				business types (how and where their tasks go)
 *	 sched.task			unfinished tasks, LIST-partitioned by "bucket", the
 *							run-at second mod N (N = delaysched.buckets at
 *							CREATE EXTENSION time, 60 by default)
 *	 sched.finished		done, dead and cancelled tasks, kept for the retention
 *	 sched.dedupe			(biz_type, dedupe_key) of unfinished tasks
 *	 sched.pointer			the persisted time pointer of every range
 *	 sched.attempt			every HTTP attempt and SQL job run: status, error, duration
 *	 sched.biz_grant		which role may schedule, consume or read which type
 *	 sched.schedule		recurring schedules, each with one pending firing
 *	 sched.holidays		holiday calendars of "workday" schedule rules
 *	 sched._prepared_tally	a prepared transaction's numbers, until it commits
 *	 sched.router_follow	a row while a router follows this node (its shares leased)
 *
 * States in sched.task.state ("char"):
 *	 'p'  pending, not yet due or not yet seen by the scanner
 *	 'r'  pending, due and announced (pull types): waiting for sched.claim;
 *		  or parked: a paused type's, a limited notify type's (for the drain),
 *		  an http type's (for the HTTP workers)
 *	 'd'  delivered, awaiting acknowledgement until lease_until
 * sched.tasks shows 'p' and 'r' as "pending", 'd' as "delivered".
 *
 * Task ids carry their first bucket: id = seq * N + bucket, so that ack and
 * friends look in one partition.  A task that moved (reschedule, nack) is
 * found by a scan of every partition instead.
 *
 * Door numbers: every task has one, door = seq mod R (R = delaysched.ranges
 * at CREATE EXTENSION time, 8 by default), a generated column, so that
 * consecutive tasks go through different doors.  Door number r of every
 * bucket is range r: a row of sched.pointer with its own time pointer.  A
 * scanner worker works on a range only while it holds that row, locked
 * FOR UPDATE SKIP LOCKED in its tick's transaction, so ranges move between
 * workers without any other coordination and two workers never read the
 * same tasks.
 *
 * Functions whose names start with "_" are internal: revoked from PUBLIC and
 * called by the scanner or by the SECURITY DEFINER public functions.
 *
 * The Makefile builds delaysched--0.3.sql from this file followed by every
 * file of schema/objects/ in the order of their names, and the update
 * delaysched--0.2--0.3.sql from schema/update/0.2--0.3.sql followed by the
 * same files: so a function, view or trigger is written once, as CREATE OR
 * REPLACE, and a fresh install and an updated database get the same one
 * (test/t/013_upgrade.pl compares them).  Tables are written twice by
 * nature: here as they are, and in each update as what changed.  Edit these
 * files, never the built scripts; released scripts (0.1, 0.2) stay frozen.
 */

\echo Use "CREATE EXTENSION delaysched" to load this file. \quit

-------------------------------------------------------------------------------
-- Tables
-------------------------------------------------------------------------------

CREATE TABLE sched.biz (
	name		 text PRIMARY KEY,
	delivery	 text NOT NULL,
	channel		 text NOT NULL,
	max_attempts int NOT NULL,
	ack_timeout	 interval NOT NULL,
	paused		 boolean NOT NULL DEFAULT false,
	rate_limit	 float8,
	burst		 int,
	max_concurrency int,
	-- how to call a webhook: url, headers, secret, follow_redirects for
	-- delivery 'http' only (NULL or false otherwise), timeout for 'http' and
	-- 'sql' (a run's statement timeout), the backoff for every delivery
	url			 text,
	headers		 jsonb,
	timeout		 interval,
	min_backoff	 interval,
	max_backoff	 interval,
	secret		 text,
	follow_redirects boolean NOT NULL DEFAULT false,
	created_at	 timestamptz NOT NULL DEFAULT pg_catalog.now(),
	updated_at	 timestamptz NOT NULL DEFAULT pg_catalog.now(),
	-- its part of every delivery statement against other types with due tasks
	weight		 int NOT NULL DEFAULT 1 CONSTRAINT biz_weight_check CHECK (weight BETWEEN 1 AND 1000),
	-- a task of the type was ever added with a key: its parked tasks go in
	-- turns by key (sched._pick); set by the first such add, never unset
	keyed		 boolean NOT NULL DEFAULT false,
	-- each key's own concurrency cap and token bucket (sched._pick)
	key_max_concurrency int,
	key_rate_limit float8,
	key_burst	 int,
	-- held by a limit: its due tasks are parked, and go out through
	-- sched._pick (the drain, a claim, a worker's claim)
	limited		 boolean NOT NULL GENERATED ALWAYS AS
		(rate_limit IS NOT NULL OR max_concurrency IS NOT NULL
		 OR key_rate_limit IS NOT NULL OR key_max_concurrency IS NOT NULL) STORED
);
COMMENT ON TABLE sched.biz IS 'delaysched business types; change with sched.define_biz and sched.drop_biz';

CREATE SEQUENCE sched.task_seq;
COMMENT ON SEQUENCE sched.task_seq IS 'source of delaysched task ids (id = nextval * buckets + bucket)';

CREATE TABLE sched.task (
	id			 bigint NOT NULL,
	bucket		 smallint NOT NULL,
	biz_type	 text NOT NULL,
	run_at		 timestamptz NOT NULL,
	state		 "char" NOT NULL DEFAULT 'p',
	attempt		 int NOT NULL DEFAULT 0,
	payload		 jsonb NOT NULL,
	dedupe_key	 text,
	created_at	 timestamptz NOT NULL,
	delivered_at timestamptz,
	lease_until	 timestamptz,
	last_error	 text,
	lease_owner	 smallint,		-- the HTTP worker sending it (state 'd', http types)
	PRIMARY KEY (id, bucket)
) PARTITION BY LIST (bucket);
COMMENT ON TABLE sched.task IS 'unfinished delaysched tasks, partitioned by run-at second mod the bucket count; read sched.tasks instead';

-- The scanner's walk and sweep, and sched.claim: with the door column,
-- which is added with the partitions, below; the parked tasks' index with
-- the key and priority columns, below.

CREATE TABLE sched.finished (
	id			 bigint PRIMARY KEY,
	biz_type	 text NOT NULL,
	run_at		 timestamptz NOT NULL,
	state		 text NOT NULL CHECK (state IN ('done', 'dead', 'cancelled')),
	attempt		 int NOT NULL,
	payload		 jsonb NOT NULL,
	dedupe_key	 text,
	created_at	 timestamptz NOT NULL,
	delivered_at timestamptz,
	finished_at	 timestamptz NOT NULL,
	last_error	 text,
	schedule	 text,			-- the schedule that made it, if a firing
	-- delivery 'sql' only (NULL otherwise): the job's command and the role
	-- it runs as; run_now: made by sched.run_now, not by the schedule's rule
	command		 text,
	run_as		 regrole,
	run_now		 boolean,
	key			 text,
	priority	 smallint NOT NULL DEFAULT 0
);
COMMENT ON TABLE sched.finished IS 'finished delaysched tasks, kept for delaysched.retention (dead ones for delaysched.dead_retention)';
CREATE INDEX finished_finished_at_idx ON sched.finished (finished_at);
CREATE INDEX finished_delivered_at_idx ON sched.finished (delivered_at);
-- A schedule's history (sched.tasks WHERE schedule = ... AND biz_type =
-- ...: a name is a schedule's within its type); firings only.
CREATE INDEX finished_schedule_idx ON sched.finished (schedule, biz_type, run_at) WHERE schedule IS NOT NULL;

-- One row per HTTP request made (src/http/http_worker.c) and per SQL job
-- run (src/sql/sql_worker.c), kept as long as the
-- longer of delaysched.retention and delaysched.dead_retention.
CREATE TABLE sched.attempt (
	task_id		 bigint NOT NULL,
	attempt		 int NOT NULL,
	biz_type	 text NOT NULL,
	started_at	 timestamptz NOT NULL,
	duration	 interval NOT NULL,
	http_status	 int,
	error		 text,
	outcome		 text NOT NULL,
	-- SQL jobs: the SQLSTATE of a failed run, the rows its last statement processed
	sqlstate	 text,
	rows		 bigint,
	CONSTRAINT attempt_outcome_check
		CHECK (outcome IN ('done', 'retry', 'dead', 'requeued', 'stale', 'cancelled'))
);
COMMENT ON TABLE sched.attempt IS 'every HTTP request and SQL job run delaysched made, with its status, error and duration; read sched.attempts instead';
CREATE INDEX attempt_task_idx ON sched.attempt (task_id, attempt);
-- Rows arrive in started_at order: a BRIN index finds the old ones to purge.
CREATE INDEX attempt_started_at_idx ON sched.attempt USING brin (started_at);

-- Per-type grants (sched.grant_biz): which role may schedule, consume or
-- read the tasks of which type.
CREATE TABLE sched.biz_grant (
	biz_type	 text NOT NULL REFERENCES sched.biz (name) ON DELETE CASCADE,
	grantee		 regrole NOT NULL,
	privilege	 text NOT NULL CHECK (privilege IN ('schedule', 'consume', 'read')),
	granted_at	 timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (biz_type, grantee, privilege)
);
COMMENT ON TABLE sched.biz_grant IS 'per-type grants of delaysched; change with sched.grant_biz and sched.revoke_biz';
-- Dumped with the role's name (regrole), so that a restore into another
-- cluster finds the role of that name; a dropped role's grants, not yet
-- removed by the sweep (sched._purge), are left out.
SELECT pg_catalog.pg_extension_config_dump('sched.biz_grant',
	'WHERE grantee IN (SELECT r.oid FROM pg_catalog.pg_roles r)');

CREATE TABLE sched.dedupe (
	biz_type	 text NOT NULL,
	dedupe_key	 text NOT NULL,
	task_id		 bigint NOT NULL,
	PRIMARY KEY (biz_type, dedupe_key)
);
COMMENT ON TABLE sched.dedupe IS 'dedupe keys of unfinished delaysched tasks';

CREATE TABLE sched.pointer (
	range_id	 int PRIMARY KEY,
	pointer		 timestamptz NOT NULL,
	updated_at	 timestamptz NOT NULL,
	-- The run_at from which a transaction that held the row (sched.resume,
	-- sched.define_biz turning a pull or http type into notify) put tasks
	-- back behind the pointer: the next tick sweeps from there, and clears
	-- it (src/core/tick.c).  NULL: none.
	behind_from	 timestamptz
);
COMMENT ON TABLE sched.pointer IS 'persisted delaysched time pointers, one per range (door number): every task of the range due before pointer has been handled';
-- Not marked for pg_dump: CREATE EXTENSION starts a restored database's
-- pointer at the time of the restore, and the sweep delivers anything that
-- fell due before it.

-- The partition of a task due at run_at, of so many: its Unix second modulo
-- their number (src/tick.c, where the workers compute the same).
-- sched._bucket calls it with the installed number written in.
CREATE FUNCTION sched._bucket_of(run_at timestamptz, buckets int) RETURNS smallint
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'delaysched_bucket_sql';
COMMENT ON FUNCTION sched._bucket_of(timestamptz, int) IS 'internal: the partition of a task due at run_at among so many';

-- Objects that depend on the bucket and range counts: the door column,
-- partitions and the functions that compute buckets, ids and doors, with N
-- and R written in as constants.
DO $install$
DECLARE
	n int := coalesce(pg_catalog.current_setting('delaysched.buckets', true), '60')::int;
	r int := coalesce(pg_catalog.current_setting('delaysched.ranges', true), '8')::int;
	i int;
BEGIN
	IF n < 1 OR n > 3600 THEN
		RAISE EXCEPTION 'delaysched.buckets must be between 1 and 3600, not %', n
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF r < 1 OR r > 256 THEN
		RAISE EXCEPTION 'delaysched.ranges must be between 1 and 256, not %', r
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	EXECUTE pg_catalog.format(
		'ALTER TABLE sched.task ADD COLUMN door smallint NOT NULL'
		' GENERATED ALWAYS AS (((id / %s) %% %s)::smallint) STORED', n, r);
	-- The walk and the sweep: a range's due pending tasks in run-at order.
	CREATE INDEX task_pending_idx ON sched.task (door, run_at, id) WHERE state = 'p';
	-- sched.claim: a type's due tasks in run-at order.  The fair walk
	-- (src/fair_walk.c): a type's due tasks of one range in run-at order,
	-- the other ranges' entries passed over in the index, not the table.
	-- (biz_type is never null: the predicate says so to keep the index
	-- from statements that do not name a type, the walk's above, which a
	-- plan made while a partition looked empty chose it for, and sorted.)
	CREATE INDEX task_claimable_idx ON sched.task (biz_type, run_at, id, door)
		WHERE state IN ('p', 'r') AND biz_type IS NOT NULL;
	-- Lease expiry of unacknowledged deliveries, per range.
	CREATE INDEX task_leased_idx ON sched.task (door, lease_until) WHERE state = 'd';
	-- Autovacuum: a task partition is a queue, every row of which is
	-- inserted, updated on delivery and deleted on acknowledgement.  At the
	-- default 20% of the table, a partition of 100,000 pending tasks would
	-- carry 20,000 dead rows (and their index entries, which the walk's
	-- probes step over) before a vacuum; 2% plus 1,000 keeps that small.
	FOR i IN 0 .. n - 1 LOOP
		EXECUTE pg_catalog.format(
			'CREATE TABLE sched.%I PARTITION OF sched.task FOR VALUES IN (%s)'
			' WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.02,'
			' autovacuum_vacuum_threshold = 1000, autovacuum_analyze_scale_factor = 0.05)',
			'task_' || pg_catalog.lpad(i::text, 4, '0'), i);
		EXECUTE pg_catalog.format('COMMENT ON TABLE sched.%I IS %L',
			'task_' || pg_catalog.lpad(i::text, 4, '0'),
			'delaysched tasks whose run-at second mod ' || n || ' is ' || i);
		PERFORM pg_catalog.pg_extension_config_dump(
			pg_catalog.format('sched.%I', 'task_' || pg_catalog.lpad(i::text, 4, '0'))::regclass, '');
	END LOOP;

	EXECUTE pg_catalog.format($f$
		CREATE FUNCTION sched._bucket_count() RETURNS int
		LANGUAGE sql IMMUTABLE PARALLEL SAFE
		AS 'SELECT %s'$f$, n);
	EXECUTE pg_catalog.format($f$
		CREATE FUNCTION sched._bucket(run_at timestamptz) RETURNS smallint
		LANGUAGE sql IMMUTABLE PARALLEL SAFE
		AS $b$SELECT sched._bucket_of(run_at, %s)$b$
	$f$, n);
	EXECUTE pg_catalog.format($f$
		CREATE FUNCTION sched._id_bucket(id bigint) RETURNS smallint
		LANGUAGE sql IMMUTABLE PARALLEL SAFE
		AS $b$SELECT (id %% %s)::smallint$b$
	$f$, n);
	EXECUTE pg_catalog.format($f$
		CREATE FUNCTION sched._new_id(bucket smallint) RETURNS bigint
		LANGUAGE sql VOLATILE
		AS $b$SELECT pg_catalog.nextval('sched.task_seq') * %s + bucket$b$
	$f$, n);
	EXECUTE pg_catalog.format($f$
		CREATE FUNCTION sched._door(id bigint) RETURNS smallint
		LANGUAGE sql IMMUTABLE PARALLEL SAFE
		AS $b$SELECT ((id / %s) %% %s)::smallint$b$
	$f$, n, r);

	INSERT INTO sched.pointer
		SELECT g, pg_catalog.date_trunc('second', pg_catalog.now()), pg_catalog.now()
		FROM pg_catalog.generate_series(0, r - 1) g;
END
$install$;

-- A schedule's firings name it (see sched.schedule); after the door column,
-- as ALTER EXTENSION UPDATE from 0.1 adds it.  A firing's schedule is the
-- one of that name in the firing's own type.
ALTER TABLE sched.task ADD COLUMN schedule text;
CREATE INDEX task_schedule_idx ON sched.task (schedule, biz_type) WHERE schedule IS NOT NULL;
-- SQL jobs (delivery 'sql'): the command, the role it runs as (the one
-- that added it), and whether sched.run_now made it (a firing outside the
-- schedule's rule, which its schedule does not count).  As ALTER EXTENSION
-- UPDATE from 0.2 adds them.
ALTER TABLE sched.task ADD COLUMN command text, ADD COLUMN run_as regrole, ADD COLUMN run_now boolean;
-- Keys and priorities (sched.add's key and priority), as ALTER EXTENSION
-- UPDATE from 0.2 adds them.
ALTER TABLE sched.task ADD COLUMN key text, ADD COLUMN priority smallint NOT NULL DEFAULT 0;
-- sched._pick: a type's parked tasks (due, waiting for a claim, the drain
-- or a worker) key by key, each key's in priority then run-at order; the
-- tasks without a key are the key '' (a key is never empty), so that a
-- type without keys reads one run of the index.  (The deliveries awaiting
-- acknowledgement, counted against max_concurrency, are found through
-- task_leased_idx: an index of their own would cost every delivery of
-- every type an index insert.)
CREATE INDEX task_parked_idx ON sched.task (biz_type, (coalesce(key, '')), priority DESC, run_at, id)
	WHERE state = 'r';
-- The lane of the keyed tasks ahead of a backlog (src/core/keys_ahead.c):
-- whether a key has a task pending in a range between two places (the
-- door a key column, so that no plan finds task_pending_idx better and no
-- other range's entry is fetched).  Only keyed tasks have an entry, and
-- only while pending: a delivery adds none.
CREATE INDEX task_keyed_idx ON sched.task (biz_type, key, door, run_at, id)
	WHERE state = 'p' AND key IS NOT NULL;
-- The lane of the tasks that go first (src/core/firsts_ahead.c): a range's
-- pending tasks without a key and with a priority above 0 or a schedule,
-- in run-at order, however long the backlog of the others.  "state IN ('p', 'r') AND state
-- <> 'r'" is state = 'p', written so that a statement naming it cannot take
-- task_pending_idx (the same columns, every pending task) instead.
CREATE INDEX task_firsts_idx ON sched.task (door, run_at, id)
	WHERE state IN ('p', 'r') AND state <> 'r' AND key IS NULL
		AND (priority > 0 OR schedule IS NOT NULL);

COMMENT ON FUNCTION sched._bucket_count() IS 'internal: number of delaysched task partitions';
COMMENT ON FUNCTION sched._bucket(timestamptz) IS 'internal: the partition of a task due at run_at';
COMMENT ON FUNCTION sched._id_bucket(bigint) IS 'internal: the partition a task id was first stored in';
COMMENT ON FUNCTION sched._new_id(smallint) IS 'internal: a new task id for a task stored in bucket';
COMMENT ON FUNCTION sched._door(bigint) IS 'internal: the door number (range) of a task id';

SELECT pg_catalog.pg_extension_config_dump('sched.biz', '');
SELECT pg_catalog.pg_extension_config_dump('sched.finished', '');
SELECT pg_catalog.pg_extension_config_dump('sched.dedupe', '');
SELECT pg_catalog.pg_extension_config_dump('sched.task_seq', '');

-- Holiday calendars for the "workday" unit of readable repeat rules.
CREATE TABLE sched.holidays (
	calendar	 text NOT NULL CHECK (calendar ~ '^[a-z_][a-z0-9_]*$' AND pg_catalog.octet_length(calendar) <= 63),
	day			 date NOT NULL,
	PRIMARY KEY (calendar, day)
);
COMMENT ON TABLE sched.holidays IS 'holiday calendars of delaysched schedules: a "workday" rule naming a calendar skips its days';
SELECT pg_catalog.pg_extension_config_dump('sched.holidays', '');

-- Recurring schedules (see the locking rules in schema/objects/09_schedules.sql).
-- A name is a schedule's within its business type: the same name under
-- another type is another schedule, so that names say nothing across types
-- and no type's roles can take a name from another's (doc/schedules.md).
-- The key leads with the name, for the calls that name no type.
CREATE TABLE sched.schedule (
	name		 text NOT NULL,
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
	updated_at	 timestamptz NOT NULL DEFAULT pg_catalog.now(),
	-- when the current definition took the row (the clock after its lock):
	-- a firing made before it belongs to an earlier definition, or to a
	-- schedule dropped and defined again, and is cancelled, never sent
	defined_at	 timestamptz NOT NULL DEFAULT pg_catalog.now(),
	-- when resume_schedule last let it fire again: a firing made before
	-- it (one that pause_schedule stepped over while another transaction
	-- held it) is a paused schedule's, and is cancelled, never sent
	resumed_at	 timestamptz,
	-- delivery 'sql' only: the command of every firing, and the role it runs
	-- as (the one that defined the schedule)
	command		 text,
	run_as		 regrole,
	-- the priority of every firing
	priority	 smallint NOT NULL DEFAULT 0,
	PRIMARY KEY (name, biz_type)
);
COMMENT ON TABLE sched.schedule IS 'delaysched recurring schedules; change with sched.define_schedule and friends, read sched.schedules';
CREATE INDEX schedule_biz_type_idx ON sched.schedule (biz_type);
SELECT pg_catalog.pg_extension_config_dump('sched.schedule', '');

-- The numbers (counters and histograms) of a prepared transaction, written
-- as part of it at PREPARE TRANSACTION instead of added to shared memory:
-- COMMIT PREPARED makes them visible, ROLLBACK PREPARED takes them away,
-- and scanner worker 0 adds the committed ones to the counters and deletes
-- them (src/stats/stats_prepared.c).  Not dumped: the counters start from
-- zero in a restored database, and no prepared transaction is dumped.
CREATE TABLE sched._prepared_tally (
	xact		 xid8 NOT NULL,	-- the prepared transaction
	biz_type	 text NOT NULL,
	layout		 int NOT NULL,	-- the layout of slots (STATS_SLOT_LAYOUT)
	slots		 bigint[] NOT NULL,	-- one number per slot of src/stats/stats.h
	PRIMARY KEY (xact, biz_type)
);
COMMENT ON TABLE sched._prepared_tally IS 'internal: the numbers of prepared transactions, added to the counters once committed';

-- A node that a router follows (delaysched_router's sched.follow_nodes):
-- its shares of the split limits hold only while the router's lease on
-- them does (src/cluster/share_lease.c).  Dumped, so that a restored copy
-- waits for the router as a restarted node does.
CREATE TABLE sched.router_follow (
	followed	 boolean PRIMARY KEY DEFAULT true CHECK (followed),
	since		 timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE sched.router_follow IS 'a row while a router that follows its nodes leases this node its shares of the split limits (see sched._share_lease)';
SELECT pg_catalog.pg_extension_config_dump('sched.router_follow', '');
