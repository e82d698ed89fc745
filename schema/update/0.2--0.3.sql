/*
 * schema/update/0.2--0.3.sql
 *		What an update from 0.2 to 0.3 does before it creates or replaces the
 *		functions, views and triggers.
 *
 * The Makefile builds delaysched--0.2--0.3.sql from this file followed by
 * every file of schema/objects/ (see schema/install.sql), between the two
 * halves of keep-privileges, which keep what was granted on the objects;
 * and delaysched--0.1--0.3.sql the same way, with the released 0.1 -> 0.2
 * script before this file.  The tables, indexes and the objects that
 * cannot be replaced in place (a function whose arguments or result
 * change, a view that loses a column) change here; everything else is made
 * anew by the same files as a fresh install.  test/t/013_upgrade.pl checks
 * that an updated database has the schema of a fresh 0.3 install and keeps
 * its tasks, schedules and grants.
 *
 * Since 0.2: sched.schedule has defined_at (a firing made before it is an
 * earlier definition's, cancelled when delivered) and resumed_at (the same
 * for a firing made before the schedule was paused and resumed);
 * sched._fire_one takes the firing's created_at.  A schedule's name is its
 * own within its business type (the key is the name and the type), so the
 * functions that find a schedule or its firings take the type too.
 * sched._prepared_tally holds a prepared transaction's numbers until it
 * commits.  SQL jobs (delivery 'sql'): tasks, finished tasks and schedules
 * carry a command and the role it runs as; sched.attempt keeps a run's
 * SQLSTATE and rows; sched._insert and sched.define_schedule take the
 * command.  Notify and pull types have a backoff too (a nack without
 * retry_in, a lease that ran out), and sched._expire_leases no longer
 * parks them.  sched.add and add_after can replace or debounce the task
 * that holds their dedupe key (on_duplicate, max_wait).
 */

-- A schedule defined before the update is taken as defined at the dawn of
-- time: none of its firings is older than its definition.
ALTER TABLE sched.schedule ADD COLUMN defined_at timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE sched.schedule ALTER COLUMN defined_at SET DEFAULT pg_catalog.now();
ALTER TABLE sched.schedule ADD COLUMN resumed_at timestamptz;

-- Takes an argument more (the firing's created_at): made anew below.
DROP FUNCTION sched._fire_one(bigint, timestamptz, text, smallint, boolean, timestamptz);

-- Names per business type: 0.2's names are unique, so the wider key holds
-- them all.  The NOT NULL stays the column's own, as in a fresh install.
ALTER TABLE sched.schedule ALTER COLUMN name SET NOT NULL,
	DROP CONSTRAINT schedule_pkey,
	ADD CONSTRAINT schedule_pkey PRIMARY KEY (name, biz_type);
DROP INDEX sched.task_schedule_idx;
CREATE INDEX task_schedule_idx ON sched.task (schedule, biz_type) WHERE schedule IS NOT NULL;
DROP INDEX sched.finished_schedule_idx;
CREATE INDEX finished_schedule_idx ON sched.finished (schedule, biz_type, run_at) WHERE schedule IS NOT NULL;

-- Take the firing's or the schedule's business type, made anew below (as
-- sched._fire_one above).  The grants on drop_schedule, pause_schedule and
-- resume_schedule (text) go to their (text, text) by
-- keep-privileges-restore.sql: the one function of each name, before and
-- after.
DROP FUNCTION sched._fired(bigint[], smallint[], timestamptz[], text[], timestamptz);
DROP FUNCTION sched._cancel_firings(text, text);
DROP FUNCTION sched._schedule(text);
DROP FUNCTION sched.drop_schedule(text);
DROP FUNCTION sched.pause_schedule(text);
DROP FUNCTION sched.resume_schedule(text);

-- A prepared transaction's numbers, counted once it commits (as in
-- schema/install.sql).
CREATE TABLE sched._prepared_tally (
	xact		 xid8 NOT NULL,	-- the prepared transaction
	biz_type	 text NOT NULL,
	layout		 int NOT NULL,	-- the layout of slots (STATS_SLOT_LAYOUT)
	slots		 bigint[] NOT NULL,	-- one number per slot of src/stats/stats.h
	PRIMARY KEY (xact, biz_type)
);
COMMENT ON TABLE sched._prepared_tally IS 'internal: the numbers of prepared transactions, added to the counters once committed';

-- A node that a router follows (as in schema/install.sql).
CREATE TABLE sched.router_follow (
	followed	 boolean PRIMARY KEY DEFAULT true CHECK (followed),
	since		 timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE sched.router_follow IS 'a row while a router that follows its nodes leases this node its shares of the split limits (see sched._share_lease)';
SELECT pg_catalog.pg_extension_config_dump('sched.router_follow', '');

-- SQL jobs: the command and the role it runs as, on tasks, finished tasks
-- and schedules (as in schema/install.sql, in the same order); a run's
-- SQLSTATE and rows, and the outcome of a run cancelled by sched.cancel.
ALTER TABLE sched.task ADD COLUMN command text, ADD COLUMN run_as regrole, ADD COLUMN run_now boolean;
ALTER TABLE sched.finished ADD COLUMN command text, ADD COLUMN run_as regrole, ADD COLUMN run_now boolean;
ALTER TABLE sched.schedule ADD COLUMN command text, ADD COLUMN run_as regrole;
ALTER TABLE sched.attempt DROP CONSTRAINT attempt_outcome_check,
	ADD COLUMN sqlstate text, ADD COLUMN rows bigint,
	ADD CONSTRAINT attempt_outcome_check
		CHECK (outcome IN ('done', 'retry', 'dead', 'requeued', 'stale', 'cancelled'));
COMMENT ON TABLE sched.attempt IS 'every HTTP request and SQL job run delaysched made, with its status, error and duration; read sched.attempts instead';

-- Take the command (and its role) too: made anew below.  The grants on
-- define_schedule go to the new one by keep-privileges-restore.sql.
DROP FUNCTION sched._insert(text, timestamptz, jsonb, text, text);
DROP FUNCTION sched.define_schedule(text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean);

-- A notify or pull type waits min_backoff, doubled per attempt up to
-- max_backoff, after a nack without retry_in and after a lease that ran
-- out: 0.2's types get define_biz's defaults (0.2 waited 1 s doubled up to
-- an hour after a nack, and redelivered an expired lease at once).
UPDATE sched.biz SET min_backoff = interval '1 second', max_backoff = interval '1 hour'
	WHERE delivery IN ('notify', 'pull') AND min_backoff IS NULL;
-- Without p_park_all (an expired notify task is pending again, and the
-- tick's limits apply when it falls due): made anew below.
DROP FUNCTION sched._expire_leases(smallint, timestamptz, int, boolean, timestamptz);
-- What it called to park the expired leases of limited types for the drain.
DROP FUNCTION sched._note_parked(text);
-- sched.add and add_after take on_duplicate and max_wait, and sched._move a
-- payload: made anew below (the grants on add and add_after go to the new
-- ones by keep-privileges-restore.sql: the one function of each name).
DROP FUNCTION sched.add(text, timestamptz, jsonb, text);
DROP FUNCTION sched.add_after(text, interval, jsonb, text);
DROP FUNCTION sched._move(smallint, bigint, timestamptz, text);
-- sched.cluster shows the SQL workers too: sched._cluster() returns two
-- columns more, so both are made anew below (the view's grants are kept by
-- keep-privileges-restore.sql).
DROP VIEW sched.cluster;
DROP FUNCTION sched._cluster();

-- Keys and priorities: on tasks, finished tasks (as in schema/install.sql,
-- after the SQL jobs' columns), the priority of a schedule's firings, and
-- whether a type has keyed tasks.  The parked tasks' index goes key by key,
-- each key's tasks in priority then run-at order (sched._pick).
ALTER TABLE sched.biz ADD COLUMN keyed boolean NOT NULL DEFAULT false,
	ADD COLUMN key_max_concurrency int, ADD COLUMN key_rate_limit float8, ADD COLUMN key_burst int,
	ADD COLUMN limited boolean NOT NULL GENERATED ALWAYS AS
		(rate_limit IS NOT NULL OR max_concurrency IS NOT NULL
		 OR key_rate_limit IS NOT NULL OR key_max_concurrency IS NOT NULL) STORED;
ALTER TABLE sched.task ADD COLUMN key text, ADD COLUMN priority smallint NOT NULL DEFAULT 0;
ALTER TABLE sched.finished ADD COLUMN key text, ADD COLUMN priority smallint NOT NULL DEFAULT 0;
ALTER TABLE sched.schedule ADD COLUMN priority smallint NOT NULL DEFAULT 0;
DROP INDEX sched.task_parked_idx;
CREATE INDEX task_parked_idx ON sched.task (biz_type, (coalesce(key, '')), priority DESC, run_at, id)
	WHERE state = 'r';
CREATE INDEX task_keyed_idx ON sched.task (biz_type, key, door, run_at, id)
	WHERE state = 'p' AND key IS NOT NULL;
CREATE INDEX task_firsts_idx ON sched.task (door, run_at, id)
	WHERE state IN ('p', 'r') AND state <> 'r' AND key IS NULL
		AND (priority > 0 OR schedule IS NOT NULL);
-- Takes the keys' limits: made anew below (its grants go to the new one
-- by keep-privileges-restore.sql).
DROP FUNCTION sched.define_biz(text, text, text, int, interval, float8, int, int,
							   text, jsonb, interval, interval, interval, text, boolean, int);
-- Take a key and a priority, or return them: made anew below (the grants
-- on add_many and claim go to the new ones by keep-privileges-restore.sql).
DROP FUNCTION sched.add_many(text, timestamptz[], jsonb[], text[]);
DROP FUNCTION sched.claim(text, int);
DROP FUNCTION sched._claim(text, int);
DROP FUNCTION sched._message(bigint, text, timestamptz, jsonb, int, text);
-- Returns the task's key too (the body of a webhook carries it).
DROP FUNCTION sched._http_claim(smallint, int, int, text[], int[]);
-- The run_at from which a transaction that held a range's row (sched.resume,
-- sched.define_biz turning a pull or http type into notify) put tasks back
-- behind its pointer: the next tick sweeps from there (src/core/tick.c).
ALTER TABLE sched.pointer ADD COLUMN behind_from timestamptz;
