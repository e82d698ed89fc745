/*
 * schema/router/0.2--0.3.sql
 *		What the update of delaysched_router from 0.2 to 0.3 does.
 *
 * There is no 0.3 install script: CREATE EXTENSION delaysched_router runs
 * the released delaysched_router--0.2.sql and then this update (PostgreSQL
 * follows the update path), so a fresh install and an updated router are
 * the same by construction.  The Makefile builds
 * delaysched_router--0.2--0.3.sql from this file between the halves of
 * keep-privileges (schema/update/), which give what an administrator
 * granted on a function dropped here to the function of the same name made
 * again.
 *
 * Since 0.2, following delaysched 0.3: a schedule's name is its own within
 * its business type, so drop_schedule, pause_schedule and resume_schedule
 * take biz_type as a node's do (NULL: the only schedule of that name among
 * the types the caller may change).  Every schedule of one name defined
 * through the router lives on one node, the name's home in
 * sched.schedule_home (as before: a name defined again under another type
 * goes where the name lives), so a call naming no type goes to that node,
 * which finds the caller's schedule among them.  And sched.schedule_home is
 * no longer readable by every role: it listed every name defined through
 * the router, whatever its type; sched._schedule_node reads it as the
 * extension's owner.
 */

DROP FUNCTION sched.drop_schedule(text);
DROP FUNCTION sched.pause_schedule(text);
DROP FUNCTION sched.resume_schedule(text);
DROP FUNCTION sched._drop_schedule_on(int, text);
DROP FUNCTION sched._pause_schedule_on(int, text);
DROP FUNCTION sched._resume_schedule_on(int, text);

CREATE FUNCTION sched._drop_schedule_on(p int, name text, biz_type text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.drop_schedule(name, biz_type); $$;
CREATE FUNCTION sched._pause_schedule_on(p int, name text, biz_type text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.pause_schedule(name, biz_type); $$;
CREATE FUNCTION sched._resume_schedule_on(p int, name text, biz_type text) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER 'delaysched'; RUN ON p; SELECT sched.resume_schedule(name, biz_type); $$;
-- (As every internal function but the administrators' in 0.2: a call
-- reaches the node as its caller, which checks that role there.)
GRANT EXECUTE ON FUNCTION sched._drop_schedule_on(int, text, text), sched._pause_schedule_on(int, text, text),
	sched._resume_schedule_on(int, text, text) TO PUBLIC;

CREATE FUNCTION sched.drop_schedule(name text, biz_type text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_dropped boolean;
BEGIN
	v_dropped := sched._on_schedule_node(name, pg_catalog.format('SELECT sched._drop_schedule_on($1, %L, %L)',
																 name, biz_type));
	PERFORM sched._set_schedule_home(name);
	RETURN v_dropped;
END
$$;
COMMENT ON FUNCTION sched.drop_schedule(text, text) IS 'drop a recurring schedule on its node, cancelling its pending firing (biz_type: of that type; NULL: the only one of that name the caller may change); false if there was none';

CREATE FUNCTION sched.pause_schedule(name text, biz_type text DEFAULT NULL) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT sched._on_schedule_node(name, pg_catalog.format('SELECT sched._pause_schedule_on($1, %L, %L)',
															 name, biz_type))::boolean $$;
COMMENT ON FUNCTION sched.pause_schedule(text, text) IS 'stop a schedule firing, on its node (biz_type: of that type; NULL: the only one of that name the caller may change); false if it was paused already';

CREATE FUNCTION sched.resume_schedule(name text, biz_type text DEFAULT NULL) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT sched._on_schedule_node(name, pg_catalog.format('SELECT sched._resume_schedule_on($1, %L, %L)',
															 name, biz_type))::boolean $$;
COMMENT ON FUNCTION sched.resume_schedule(text, text) IS 'let a paused schedule fire again, on its node (biz_type: of that type; NULL: the only one of that name the caller may change); false if it was not paused';

-- As the 0.2 script leaves every public function: for administrators to grant.
REVOKE ALL ON FUNCTION sched.drop_schedule(text, text), sched.pause_schedule(text, text),
	sched.resume_schedule(text, text) FROM PUBLIC;

-- Where each name lives is the router's to know, not every role's.
REVOKE SELECT ON sched.schedule_home FROM PUBLIC;
ALTER FUNCTION sched._schedule_node(text) SECURITY DEFINER;
