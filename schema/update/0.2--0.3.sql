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
 * earlier definition's, cancelled when delivered); sched._fire_one takes the
 * firing's created_at; sched._prepared_tally holds a prepared transaction's
 * numbers until it commits.
 */

-- A schedule defined before the update is taken as defined at the dawn of
-- time: none of its firings is older than its definition.
ALTER TABLE sched.schedule ADD COLUMN defined_at timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE sched.schedule ALTER COLUMN defined_at SET DEFAULT pg_catalog.now();

-- Takes an argument more (the firing's created_at): made anew below.
DROP FUNCTION sched._fire_one(bigint, timestamptz, text, smallint, boolean, timestamptz);

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
