-- privileges: nothing in schema sched is open to ordinary roles until an
-- administrator grants it, and the SECURITY DEFINER functions are safe.

CREATE ROLE regress_ds_app NOLOGIN;
CREATE ROLE regress_ds_nobody NOLOGIN;
SELECT sched.define_biz('priv_jobs', 'pull', ack_timeout => '1 hour');
CREATE TEMP TABLE priv_task AS SELECT sched.add('priv_jobs', '2100-01-01') AS id;
GRANT SELECT ON priv_task TO regress_ds_app;

-- every SECURITY DEFINER function pins search_path
SELECT p.proname, p.proconfig FROM pg_proc p
WHERE p.pronamespace = 'sched'::regnamespace AND p.prosecdef ORDER BY p.proname;
SELECT count(*) AS unpinned FROM pg_proc p
WHERE p.pronamespace = 'sched'::regnamespace AND p.prosecdef
  AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false);
-- internal functions are not SECURITY DEFINER
SELECT count(*) AS internal_definer FROM pg_proc p
WHERE p.pronamespace = 'sched'::regnamespace AND p.prosecdef AND p.proname ~ '^_';

-- no function in sched is executable by PUBLIC (a NULL ACL would mean it is)
-- but the internal ones the views call, as the role reading them, so that
-- SELECT on a view is enough: sched._caller(), which only tells a role
-- which role it runs as, and the ones that read shared memory for a view
-- and answer only about what the role may see (see hostile_role)
SELECT p.oid::regprocedure AS public_function FROM pg_proc p
WHERE p.pronamespace = 'sched'::regnamespace AND has_function_privilege('public', p.oid, 'EXECUTE')
ORDER BY p.oid::regprocedure::text COLLATE "C";
SELECT count(*) AS functions,
       count(*) FILTER (WHERE has_function_privilege('public', p.oid, 'EXECUTE')) AS public_execute,
       count(*) FILTER (WHERE p.proacl IS NULL
                           OR EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0)) AS public_acl,
       count(*) FILTER (WHERE has_function_privilege('regress_ds_nobody', p.oid, 'EXECUTE')) AS nobody_execute
FROM pg_proc p WHERE p.pronamespace = 'sched'::regnamespace
  AND p.proname NOT IN ('_caller', '_task_status', '_tokens', '_type_counts', '_workers', '_cluster',
                        '_consumer_cap');

-- no table, view, partition or sequence in sched is open to PUBLIC or a role without grants
SELECT count(*) AS relations,
       count(*) FILTER (WHERE EXISTS (SELECT FROM aclexplode(c.relacl) a WHERE a.grantee = 0)) AS public_acl,
       count(*) FILTER (WHERE c.relkind <> 'S' AND has_table_privilege('regress_ds_nobody', c.oid,
                              'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')) AS nobody_table,
       count(*) FILTER (WHERE c.relkind = 'S' AND has_sequence_privilege('regress_ds_nobody', c.oid,
                              'USAGE, SELECT, UPDATE')) AS nobody_sequence
FROM pg_class c
WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S');
SELECT has_schema_privilege('regress_ds_nobody', 'sched', 'USAGE') AS nobody_usage,
       has_schema_privilege('regress_ds_nobody', 'sched', 'CREATE') AS nobody_create;

-- an ordinary role without grants: permission denied for everything
SET ROLE regress_ds_app;
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.define_biz('priv_x')$$),
  ($$SELECT sched.drop_biz('priv_jobs')$$),
  ($$SELECT sched.add('priv_jobs', '2100-01-01')$$),
  ($$SELECT * FROM sched.tasks$$)
) AS v(q);
RESET ROLE;

-- USAGE on the schema alone still grants nothing
GRANT USAGE ON SCHEMA sched TO regress_ds_app;
SET ROLE regress_ds_app;
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.define_biz('priv_x')$$),
  ($$SELECT sched.drop_biz('priv_jobs', true)$$),
  ($$SELECT sched.pause('priv_jobs')$$),
  ($$SELECT sched.resume('priv_jobs')$$),
  ($$SELECT sched.add('priv_jobs', '2100-01-01')$$),
  ($$SELECT sched.add_after('priv_jobs', '1 day')$$),
  ($$SELECT sched.add_many('priv_jobs', ARRAY['2100-01-01']::timestamptz[])$$),
  ($$SELECT sched.cancel((SELECT id FROM priv_task))$$),
  ($$SELECT sched.reschedule((SELECT id FROM priv_task), '2100-01-02')$$),
  ($$SELECT sched.claim('priv_jobs')$$),
  ($$SELECT sched.ack(1)$$),
  ($$SELECT sched.ack_many('{1}')$$),
  ($$SELECT sched.nack(1)$$),
  ($$SELECT sched.retry(1)$$),
  ($$SELECT sched._insert('priv_jobs', '2100-01-01', '{}', NULL)$$),
  ($$SELECT sched._finish(0::smallint, ARRAY[1::bigint], 'done', NULL)$$),
  ($$SELECT sched._wake(now())$$),
  ($$SELECT sched._workers()$$),
  ($$INSERT INTO sched.biz VALUES ('priv_x', 'notify', 'priv_x', 1, '1 hour')$$),
  ($$UPDATE sched.biz SET max_attempts = 1$$),
  ($$DELETE FROM sched.biz$$),
  ($$INSERT INTO sched.task (id, bucket, biz_type, run_at, payload, created_at) VALUES (1, 0, 'priv_jobs', now(), '{}', now())$$),
  ($$INSERT INTO sched.task_0000 (id, bucket, biz_type, run_at, payload, created_at) VALUES (1, 0, 'priv_jobs', now(), '{}', now())$$),
  ($$UPDATE sched.task SET state = 'd'$$),
  ($$DELETE FROM sched.task$$),
  ($$TRUNCATE sched.finished$$),
  ($$DELETE FROM sched.dedupe$$),
  ($$UPDATE sched.pointer SET pointer = now()$$),
  ($$SELECT nextval('sched.task_seq')$$),
  ($$SELECT * FROM sched.tasks$$),
  ($$SELECT * FROM sched.biz_stats$$),
  ($$SELECT * FROM sched.time_pointer$$),
  ($$SELECT * FROM sched.workers$$)
) AS v(q);
RESET ROLE;

-- EXECUTE on sched.add is not enough: the type must be granted too
GRANT EXECUTE ON FUNCTION sched.add(text, timestamptz, jsonb, text, text, interval, text, int) TO regress_ds_app;
SET ROLE regress_ds_app;
SELECT try($$SELECT sched.add('priv_jobs', '2100-01-01')$$, true);
RESET ROLE;
-- only administrators grant types
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.grant_biz('priv_jobs', 'regress_ds_app', 'shedule')$$),
  ($$SELECT sched.grant_biz('priv_nope', 'regress_ds_app')$$),
  ($$SELECT sched.grant_biz('priv_jobs', 'regress_ds_none')$$),
  ($$SELECT sched.grant_biz('priv_jobs', NULL)$$),
  ($$SELECT sched.revoke_biz('priv_nope', 'regress_ds_app')$$),
  -- a bare oid no role has is refused, so that no row arms a future role
  ($$SELECT sched.grant_biz('priv_jobs', 0::regrole)$$),
  ($$SELECT sched.grant_biz('priv_jobs', 123456::regrole)$$),
  ($$SELECT sched.revoke_biz('priv_jobs', 'regress_ds_app', 'shedule')$$)
) AS v(q);
SELECT count(*) AS grants_of_no_role FROM sched.biz_grant g
WHERE NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = g.grantee);
SET ROLE regress_ds_app;
SELECT try($$SELECT sched.grant_biz('priv_jobs', 'regress_ds_app')$$);
RESET ROLE;
SELECT sched.grant_biz('priv_jobs', 'regress_ds_app') AS granted,
       sched.grant_biz('priv_jobs', 'regress_ds_app', 'schedule') AS again;
SELECT biz_type, role, privilege FROM sched.biz_grants ORDER BY 1, 2, 3;

-- with EXECUTE and the grant: the role can schedule tasks of that type ...
SET ROLE regress_ds_app;
SELECT sched.add('priv_jobs', '2100-01-01', '{"by": "app"}') IS NOT NULL AS added;
SELECT sched.add('priv_jobs', '2100-01-01', '{"by": "app"}', 'app-key') =
       sched.add('priv_jobs', '2100-01-02', '{"by": "app"}', 'app-key') AS deduped;
-- ... and still nothing else
SELECT q, try(q) FROM (VALUES
  ($$SELECT sched.add_after('priv_jobs', '1 day')$$),
  ($$SELECT sched.cancel((SELECT id FROM priv_task))$$),
  ($$SELECT sched._insert('priv_jobs', '2100-01-01', '{}', NULL)$$),
  ($$INSERT INTO sched.task (id, bucket, biz_type, run_at, payload, created_at) VALUES (1, 0, 'priv_jobs', now(), '{}', now())$$),
  ($$UPDATE sched.task SET payload = '{}'$$),
  ($$INSERT INTO sched.biz VALUES ('priv_x', 'notify', 'priv_x', 1, '1 hour')$$),
  ($$INSERT INTO sched.dedupe VALUES ('priv_jobs', 'app-key', 1)$$),
  ($$SELECT * FROM sched.tasks$$),
  ($$SET delaysched.max_payload_size = '256MB'$$)
) AS v(q);
-- the role's own search_path does not reach into the definer's functions
CREATE TEMP TABLE biz (name text);
SET search_path = pg_temp, public;
SELECT sched.add('priv_jobs', '2100-01-03', '{"by": "app, temp search_path"}') IS NOT NULL AS added;
RESET search_path;
RESET ROLE;
SELECT payload, dedupe_key, state FROM sched.tasks WHERE payload->>'by' LIKE 'app%'
ORDER BY run_at, dedupe_key NULLS FIRST;

-- EXECUTE on add_after alone is enough: it calls sched.add as the definer
REVOKE EXECUTE ON FUNCTION sched.add(text, timestamptz, jsonb, text, text, interval, text, int) FROM regress_ds_app;
GRANT EXECUTE ON FUNCTION sched.add_after(text, interval, jsonb, text, text, interval, text, int) TO regress_ds_app;
SET ROLE regress_ds_app;
SELECT sched.add_after('priv_jobs', '1 day', '{"by": "app, add_after"}') IS NOT NULL AS added_after;
SELECT try($$SELECT sched.add('priv_jobs', '2100-01-01')$$) AS add_revoked;
RESET ROLE;

-- SELECT on the views lets a role read every column of them, never the
-- tables: no grant on the internal functions they call is needed
GRANT SELECT ON sched.tasks, sched.biz_stats, sched.time_pointer, sched.workers, sched.attempts TO regress_ds_app;
SET ROLE regress_ds_app;
SELECT count(*) AS app_tasks, count(status) AS with_status FROM sched.tasks WHERE payload->>'by' LIKE 'app%';
SELECT count(*) AS pointers FROM sched.time_pointer;
SELECT role, count(*) AS workers FROM sched.workers GROUP BY role ORDER BY role;
SELECT biz_type, pending, tokens FROM sched.biz_stats WHERE biz_type = 'priv_jobs';
SELECT count(*) AS workers_called FROM sched._workers();
SELECT q, try(q) FROM (VALUES
  ($$SELECT * FROM sched.task$$),
  ($$SELECT * FROM sched.finished$$)
) AS v(q);
RESET ROLE;

-- Per-type grants: another type, not granted, is out of the role's sight
-- and reach, whatever functions it may execute.
SELECT sched.define_biz('priv_other', 'pull', ack_timeout => '1 hour');
SELECT sched.add('priv_other', '2000-01-01', '{"secret": "other"}') AS other_id \gset
SELECT wait_announced('priv_other');
GRANT EXECUTE ON FUNCTION sched.add(text, timestamptz, jsonb, text, text, interval, text, int), sched.add_many(text, timestamptz[], jsonb[], text[], text[], int[]),
	sched.cancel(bigint), sched.reschedule(bigint, timestamptz), sched.claim(text, int), sched.ack(bigint),
	sched.ack_many(bigint[]), sched.nack(bigint, interval, text), sched.retry(bigint) TO regress_ds_app;
SET ROLE regress_ds_app;
SELECT count(*) AS other_tasks_seen FROM sched.tasks WHERE biz_type = 'priv_other';
SELECT count(*) AS other_stats_seen FROM sched.biz_stats WHERE biz_type = 'priv_other';
SELECT q, try(q, true) FROM (VALUES
  ($$SELECT sched.add('priv_other', '2100-01-01')$$),
  ($$SELECT sched.add_many('priv_other', ARRAY['2100-01-01']::timestamptz[])$$),
  ($$SELECT sched.claim('priv_other')$$),
  ($$SELECT sched.claim('priv_jobs')$$)
) AS v(q);
-- by id: a task of a type not granted is not there for the role
SELECT sched.cancel(:other_id) AS cancel, sched.reschedule(:other_id, '2100-01-01') AS reschedule,
       sched.ack(:other_id) AS ack, sched.ack_many(ARRAY[:other_id]::bigint[]) AS ack_many,
       sched.nack(:other_id) AS nack, sched.retry(:other_id) AS retry;
RESET ROLE;
SELECT state, attempt, run_at FROM sched.tasks WHERE id = :other_id;
-- 'consume' lets it claim and acknowledge; 'read' alone only lets it see
SELECT sched.grant_biz('priv_other', 'regress_ds_app', 'consume');
SET ROLE regress_ds_app;
SELECT id = :other_id AS claimed, payload FROM sched.claim('priv_other');
SELECT sched.ack(:other_id) AS acked;
SELECT try($$SELECT sched.add('priv_other', '2100-01-01')$$) AS still_no_schedule;
RESET ROLE;
SELECT sched.revoke_biz('priv_other', 'regress_ds_app') AS revoked,
       sched.grant_biz('priv_other', 'regress_ds_app', 'read') AS read_granted;
SET ROLE regress_ds_app;
SELECT state FROM sched.tasks WHERE id = :other_id;
SELECT try($$SELECT sched.claim('priv_other')$$) AS read_cannot_claim;
RESET ROLE;
-- a grant through role membership counts; so does a revoked one not
CREATE ROLE regress_ds_team NOLOGIN;
GRANT regress_ds_team TO regress_ds_nobody;
GRANT USAGE ON SCHEMA sched TO regress_ds_nobody;
GRANT EXECUTE ON FUNCTION sched.add(text, timestamptz, jsonb, text, text, interval, text, int) TO regress_ds_nobody;
SELECT sched.grant_biz('priv_other', 'regress_ds_team');
SET ROLE regress_ds_nobody;
SELECT sched.add('priv_other', '2100-01-01') IS NOT NULL AS added_as_member;
RESET ROLE;
SELECT sched.revoke_biz('priv_other', 'regress_ds_team', 'schedule');
SET ROLE regress_ds_nobody;
SELECT try($$SELECT sched.add('priv_other', '2100-01-01')$$) AS after_revoke;
RESET ROLE;
-- One rule decides, in the functions and the views alike: the session's
-- role.  A SECURITY DEFINER function owned by regress_ds_app (which holds
-- 'schedule' on priv_other) lends regress_ds_nobody (which holds nothing)
-- neither the rows of the view nor the right to add.
SELECT sched.grant_biz('priv_other', 'regress_ds_app', 'schedule');
SET ROLE regress_ds_app;
CREATE FUNCTION pg_temp.priv_lend() RETURNS TABLE (seen bigint, added text)
LANGUAGE sql SECURITY DEFINER
AS $f$ SELECT (SELECT count(*) FROM sched.tasks WHERE biz_type = 'priv_other'),
              public.try($q$SELECT sched.add('priv_other', '2100-01-01') > 0$q$, true) $f$;
SELECT seen > 0 AS owner_sees, added AS owner_adds FROM pg_temp.priv_lend();
RESET ROLE;
GRANT EXECUTE ON FUNCTION pg_temp.priv_lend() TO regress_ds_nobody;
SET ROLE regress_ds_nobody;
SELECT seen AS caller_sees, added AS caller_adds FROM pg_temp.priv_lend();
RESET ROLE;
-- a dropped role's grants go with it: the sweep removes them (DROP ROLE
-- cannot), and until then they count for no one and are not dumped
CREATE ROLE regress_ds_gone NOLOGIN;
SELECT sched.grant_biz('priv_other', 'regress_ds_gone', 'read');
DROP ROLE regress_ds_gone;
SELECT count(*) AS shown FROM sched.biz_grants WHERE role::text !~ '^regress';
SELECT wait_until($c$NOT EXISTS (SELECT FROM sched.biz_grant g
                                 WHERE NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = g.grantee))$c$)
       AS swept;
-- dropping a type drops its grants
SELECT sched.drop_biz('priv_other', cancel_tasks => true) > 0 AS dropped;
SELECT count(*) AS grants_left FROM sched.biz_grants WHERE biz_type = 'priv_other';

-- no role but the owner may put a trigger on the internal tables
SET ROLE regress_ds_app;
CREATE FUNCTION pg_temp.priv_trigger() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
SELECT q, try(q) FROM (VALUES
  ($$CREATE TRIGGER t BEFORE INSERT ON sched.task FOR EACH ROW EXECUTE FUNCTION pg_temp.priv_trigger()$$),
  ($$CREATE TRIGGER t BEFORE INSERT ON sched.task_0000 FOR EACH ROW EXECUTE FUNCTION pg_temp.priv_trigger()$$),
  ($$CREATE TRIGGER t BEFORE INSERT ON sched.finished FOR EACH ROW EXECUTE FUNCTION pg_temp.priv_trigger()$$),
  ($$CREATE TRIGGER t BEFORE INSERT ON sched.biz_grant FOR EACH ROW EXECUTE FUNCTION pg_temp.priv_trigger()$$),
  ($$INSERT INTO sched.biz_grant VALUES ('priv_jobs', 1, 'schedule')$$),
  ($$SELECT * FROM sched.biz_grants$$)
) AS v(q);
RESET ROLE;

-- the unknown-type error reaches the role with its hint
SET ROLE regress_ds_app;
SELECT try($$SELECT sched.add_after('priv_nope', '1 day')$$);
RESET ROLE;

-- sched.cluster (every database's workers) is for superusers and pg_monitor:
-- granted to pg_monitor by the extension, to nobody else; and a role
-- given the view anyway is still refused by the function behind it
SELECT has_table_privilege('pg_monitor', 'sched.cluster', 'SELECT') AS monitor_select,
       has_function_privilege('pg_monitor', 'sched._cluster()', 'EXECUTE') AS monitor_execute,
       has_schema_privilege('pg_monitor', 'sched', 'USAGE') AS monitor_usage,
       has_table_privilege('regress_ds_nobody', 'sched.cluster', 'SELECT') AS nobody_select;
SELECT count(*) > 0 AS superuser_sees_rows FROM sched.cluster WHERE role = 'launcher';
GRANT USAGE ON SCHEMA sched TO regress_ds_team;
GRANT SELECT ON sched.cluster TO regress_ds_team;
SET ROLE regress_ds_team;
SELECT try($$SELECT count(*) FROM sched.cluster$$);
RESET ROLE;
GRANT pg_monitor TO regress_ds_team;
SET ROLE regress_ds_team;
SELECT count(*) > 0 AS monitor_sees_rows FROM sched.cluster WHERE role = 'launcher';
RESET ROLE;
REVOKE pg_monitor FROM regress_ds_team;

-- clean up
SELECT sched.drop_biz('priv_jobs', cancel_tasks => true);
DROP TABLE priv_task;
DROP OWNED BY regress_ds_app;
DROP OWNED BY regress_ds_nobody;
DROP OWNED BY regress_ds_team;
DROP ROLE regress_ds_app;
DROP ROLE regress_ds_nobody;
DROP ROLE regress_ds_team;
SELECT count(*) AS roles_left FROM pg_roles WHERE rolname LIKE 'regress\_ds\_%';
SELECT has_function_privilege('public', 'sched.add(text, timestamptz, jsonb, text, text, interval, text, int)', 'EXECUTE') AS public_add;
