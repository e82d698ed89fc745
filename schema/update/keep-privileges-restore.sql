/*
 * schema/update/keep-privileges-restore.sql
 *		The last part of every update: give back what was granted on the
 *		objects the update dropped and made again (see
 *		keep-privileges-save.sql).
 *
 * A grant noted before the update that an object the update made (one
 * whose OID is new) does not carry is given again: on the object of the
 * same signature, or, for a function whose arguments changed, on the one
 * function of that name if there was one before and is one now.  What the
 * update granted or revoked on objects it did not drop is left as the
 * update left it.
 *
 * A GRANT in an extension's script is recorded as one of the extension's
 * initial privileges (pg_init_privs), which pg_dump leaves out of a dump,
 * as CREATE EXTENSION makes them again on restore: a grant given back so
 * would be lost by a dump and restore.  So each object's initial
 * privileges are set back to what they were before the grants were given
 * again, and pg_dump dumps those grants as the administrator's.
 */

DO $restore$
DECLARE
	r record;
	v_init pg_catalog.aclitem[];
	v_had_init boolean;
BEGIN
	FOR r IN
		WITH granted AS (
			SELECT g.kind, g.old_oid, g.object, g.name, g.grantee, g.privilege, g.grantable
			FROM pg_catalog.jsonb_to_recordset(pg_catalog.current_setting('delaysched_update.granted')::jsonb)
				AS g(kind text, old_oid oid, object text, name text, grantee oid, privilege text, grantable boolean)
		), now_functions AS (
			SELECT p.oid, p.oid::pg_catalog.regprocedure::text AS object, p.proname::text AS name, p.proacl AS acl,
				   pg_catalog.count(*) OVER (PARTITION BY p.proname) AS overloads
			FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'sched'::pg_catalog.regnamespace
		), then_functions AS (
			SELECT g.name, pg_catalog.count(DISTINCT g.object) AS overloads
			FROM granted g WHERE g.kind = 'function' GROUP BY g.name
		), targets AS (
			SELECT g.*, f.oid, 'pg_catalog.pg_proc'::pg_catalog.regclass AS classoid,
				   pg_catalog.format('FUNCTION %s', f.oid::pg_catalog.regprocedure) AS target, f.acl
			FROM granted g
			JOIN now_functions f ON f.object = g.object
				 OR (f.name = g.name AND f.overloads = 1
					 AND NOT EXISTS (SELECT FROM now_functions s WHERE s.object = g.object)
					 AND (SELECT t.overloads FROM then_functions t WHERE t.name = g.name) = 1)
			WHERE g.kind = 'function'
			UNION ALL
			SELECT g.*, c.oid, 'pg_catalog.pg_class'::pg_catalog.regclass,
				   pg_catalog.format('%s %s', CASE WHEN c.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
									 c.oid::pg_catalog.regclass), c.relacl
			FROM granted g
			JOIN pg_catalog.pg_class c ON c.relnamespace = 'sched'::pg_catalog.regnamespace AND c.relname = g.name
			WHERE g.kind = 'relation'
		)
		SELECT t.oid, t.classoid, t.target,
			   pg_catalog.array_agg(pg_catalog.format('GRANT %s ON %s TO %s%s', t.privilege, t.target,
					CASE WHEN t.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(t.grantee)) END,
					CASE WHEN t.grantable THEN ' WITH GRANT OPTION' ELSE '' END)) AS grants
		FROM targets t
		WHERE NOT EXISTS (SELECT FROM granted k WHERE k.kind = t.kind AND k.old_oid = t.oid)
		  AND (t.grantee = 0 OR EXISTS (SELECT FROM pg_catalog.pg_roles o WHERE o.oid = t.grantee))
		  AND NOT EXISTS (SELECT FROM pg_catalog.aclexplode(t.acl) a
						  WHERE a.grantee = t.grantee AND a.privilege_type = t.privilege
							AND (a.is_grantable OR NOT t.grantable))
		GROUP BY t.oid, t.classoid, t.target
	LOOP
		SELECT i.initprivs, true INTO v_init, v_had_init
		FROM pg_catalog.pg_init_privs i
		WHERE i.objoid = r.oid AND i.classoid = r.classoid AND i.objsubid = 0;
		FOR i IN 1 .. pg_catalog.cardinality(r.grants) LOOP
			EXECUTE r.grants[i];
		END LOOP;
		IF v_had_init THEN
			UPDATE pg_catalog.pg_init_privs i SET initprivs = v_init
				WHERE i.objoid = r.oid AND i.classoid = r.classoid AND i.objsubid = 0;
		ELSE
			DELETE FROM pg_catalog.pg_init_privs i
				WHERE i.objoid = r.oid AND i.classoid = r.classoid AND i.objsubid = 0;
		END IF;
	END LOOP;
END
$restore$;
