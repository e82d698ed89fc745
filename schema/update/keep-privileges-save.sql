/*
 * schema/update/keep-privileges-save.sql
 *		The first part of every update: what was granted on the extension's
 *		objects, kept for keep-privileges-restore.sql, its last part.
 *
 * An update drops and creates again the functions whose arguments or result
 * change (0.1 -> 0.2 drops sched.claim and sched.define_biz, among others),
 * and with them what an administrator granted on them: the documented
 * consumer recipe grants EXECUTE on sched.claim.  So every update first
 * notes every grant on a function, table, view or sequence of the schema
 * (as aclexplode gives them, with the object's OID, signature and name), in a
 * setting local to the update's transaction; the restore gives back those
 * the update lost.
 */

SELECT pg_catalog.set_config('delaysched_update.granted', coalesce((
	SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
		'kind', g.kind, 'old_oid', g.old_oid, 'object', g.object, 'name', g.name, 'grantee', g.grantee,
		'privilege', g.privilege, 'grantable', g.grantable))::text
	FROM (
		SELECT 'function' AS kind, p.oid AS old_oid, p.oid::pg_catalog.regprocedure::text AS object,
			   p.proname::text AS name,
			   a.grantee, a.privilege_type AS privilege, a.is_grantable AS grantable
		FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
		WHERE p.pronamespace = 'sched'::pg_catalog.regnamespace AND a.grantee <> p.proowner
		UNION ALL
		SELECT 'relation', c.oid, c.oid::pg_catalog.regclass::text, c.relname::text,
			   a.grantee, a.privilege_type, a.is_grantable
		FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
		WHERE c.relnamespace = 'sched'::pg_catalog.regnamespace AND c.relkind IN ('r', 'p', 'v', 'S')
		  AND a.grantee <> c.relowner) g), '[]'), true);
