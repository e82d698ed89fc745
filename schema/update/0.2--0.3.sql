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
 * sched._fire_one takes the firing's created_at.
 */

-- A schedule defined before the update is taken as defined at the dawn of
-- time: none of its firings is older than its definition.
ALTER TABLE sched.schedule ADD COLUMN defined_at timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE sched.schedule ALTER COLUMN defined_at SET DEFAULT pg_catalog.now();
ALTER TABLE sched.schedule ADD COLUMN resumed_at timestamptz;

-- Takes an argument more (the firing's created_at): made anew below.
DROP FUNCTION sched._fire_one(bigint, timestamptz, text, smallint, boolean, timestamptz);
