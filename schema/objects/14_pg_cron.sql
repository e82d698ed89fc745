-------------------------------------------------------------------------------
-- Coming from pg_cron: sched.import_pg_cron (administrators)
-------------------------------------------------------------------------------

/*
 * sched.import_pg_cron copies the jobs of an installed pg_cron (cron.job)
 * into schedules of an sql business type, one schedule per job, and leaves
 * pg_cron as it was: it reads cron.job and writes nothing of pg_cron's, so
 * that both can run side by side until pg_cron's jobs are unscheduled.
 * doc/pg_cron.md says what maps to what.
 *
 * pg_cron need not be installed for this file to be loaded: cron.job is
 * read with dynamic SQL, after checking that the extension is there and
 * has the columns of pg_cron 1.4 and later.
 *
 * What a job becomes:
 *	 schedule	pg_cron's five cron fields and its @ macros are delaysched's;
 *				'N seconds' (pg_cron 1.5) is 'every N seconds'; '$', the last
 *				day of the month (1.6), and @reboot have no equivalent, and
 *				such a job is not imported (sched._pg_cron_rule)
 *	 time zone	cron.timezone (pg_cron 1.5); without it, pg_cron 1.4 runs in
 *				GMT: 'UTC'
 *	 command	as it is; a command that cannot run in a transaction block
 *				(VACUUM, CREATE INDEX CONCURRENTLY, ...) is not imported, since
 *				an SQL job commits with its done mark
 *	 username	the role the schedule runs as (run_as); a role that no
 *				longer exists: not imported
 *	 database	only the current database's jobs become schedules here; for
 *				another database's the note gives the statements to run there
 *	 active		false: the schedule is paused
 * and as pg_cron runs jobs: never two runs of a job at once (allow_overlap
 * false), nothing made up after downtime (catch_up 'none').
 *
 * The name is the job's name if it is a schedule name (a lowercase
 * identifier), no other job has it and it does not look like another
 * job's made-up name; otherwise 'pg_cron_<jobid>'.  So the name follows
 * from cron.job alone, and a second import finds what the first made: a
 * schedule of that name in the type is left as it is (note 'exists').
 * Imports into one type are serialised by the type's row.
 */

/*
 * The delaysched rule of a pg_cron schedule (rule), and what was changed
 * on the way (note); or no rule and, in note, why there is none.
 * p_dom_and_dow: pg_cron's cron.match_dom_and_dow is on (a day matches
 * when both day fields do).
 */
CREATE OR REPLACE FUNCTION sched._pg_cron_rule(p_schedule text, p_dom_and_dow boolean DEFAULT false,
								OUT rule text, OUT note text)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
	v_text text := pg_catalog.btrim(p_schedule, E' \t\r\n');
	v_fields text[];
	v_word text;
	v_n numeric;
BEGIN
	IF v_text IS NULL OR v_text = '' THEN
		note := 'the job has no schedule';
		RETURN;
	END IF;

	-- @ macros: pg_cron reads the word and nothing after it.
	IF v_text LIKE '@%' THEN
		v_word := pg_catalog.lower(pg_catalog.split_part(pg_catalog.regexp_replace(v_text, '\s', ' ', 'g'), ' ', 1));
		IF v_word IN ('@reboot', '@restart') THEN
			note := pg_catalog.format('%s runs the job when the server starts; a delaysched schedule fires only at the instants of its rule', v_word);
		ELSIF v_word IN ('@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly') THEN
			rule := v_word;
		ELSE
			note := pg_catalog.format('unknown macro "%s"', v_word);
		END IF;
		RETURN;
	END IF;

	-- '[1-59] seconds' (pg_cron 1.5): "second" or "seconds", any case.
	IF v_text ~* '^\+?[0-9]+\s*seconds?$' THEN
		v_n := pg_catalog.substring(v_text, '[0-9]+')::numeric;
		IF v_n BETWEEN 1 AND 59 THEN
			rule := pg_catalog.format('every %s %s', v_n, CASE WHEN v_n = 1 THEN 'second' ELSE 'seconds' END);
		ELSE
			note := pg_catalog.format('pg_cron takes intervals of 1 to 59 seconds, not "%s"', v_text);
		END IF;
		RETURN;
	END IF;

	v_fields := pg_catalog.regexp_split_to_array(v_text, '\s+');
	IF pg_catalog.cardinality(v_fields) < 5 THEN
		note := pg_catalog.format('"%s" is not a pg_cron schedule (five cron fields, a macro or "N seconds")', v_text);
		RETURN;
	END IF;
	IF v_fields[3] = '$' THEN
		note := '"$" (the last day of the month) has no equivalent in delaysched''s rules; a rule on days 28-31 whose command does its work only when tomorrow is the 1st does the same';
		RETURN;
	END IF;
	IF p_dom_and_dow AND v_fields[3] !~ '^\*' AND v_fields[5] !~ '^\*' THEN
		note := 'cron.match_dom_and_dow is on, so pg_cron runs the job on the days that match both day fields; a delaysched cron rule runs it on the days that match either';
		RETURN;
	END IF;
	IF pg_catalog.cardinality(v_fields) > 5 THEN
		-- pg_cron reads five fields and stops: the rest is not a seconds field.
		rule := pg_catalog.array_to_string(v_fields[1:5], ' ');
		note := pg_catalog.format('pg_cron reads the first five fields only: "%s" was left out',
								  pg_catalog.array_to_string(v_fields[6:], ' '));
	ELSE
		rule := v_text;
	END IF;
	BEGIN
		PERFORM sched._check_schedule(rule, 'UTC');
	EXCEPTION WHEN invalid_parameter_value THEN
		rule := NULL;
		note := SQLERRM;
	END;
END
$$;
COMMENT ON FUNCTION sched._pg_cron_rule(text, boolean) IS 'internal: the delaysched rule of a pg_cron schedule, or why there is none';

/*
 * Why command cannot be an SQL job, or NULL: a statement that PostgreSQL
 * refuses inside a transaction block, among others (alone, it runs in a
 * session of its own; with others, in their transaction).
 * A rough look at each statement's first words; a command it misses fails
 * at its first run, with the error in sched.attempts.
 */
CREATE OR REPLACE FUNCTION sched._pg_cron_command_note(p_command text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
	v_statement text;
	v_what text;
BEGIN
	-- Alone, such a statement runs in a session of its own (doc/sql_jobs.md),
	-- as pg_cron runs it.
	IF (SELECT count(*) FROM unnest(pg_catalog.string_to_array(coalesce(p_command, ''), ';')) AS u(s)
		WHERE pg_catalog.regexp_replace(u.s, '^(\s|--[^\n]*(\n|$))*', '') <> '') <= 1
	   AND coalesce(p_command, '') !~* '^\s*alter\s+table\s.*\mdetach\s+partition\s.*\mconcurrently\M' THEN
		RETURN NULL;
	END IF;
	FOREACH v_statement IN ARRAY pg_catalog.string_to_array(coalesce(p_command, ''), ';') LOOP
		-- leading white space and -- comments
		v_statement := pg_catalog.regexp_replace(v_statement, '^(\s|--[^\n]*(\n|$))*', '');
		v_what := pg_catalog.upper(pg_catalog.substring(v_statement,
			'(?i)^(vacuum|create\s+database|drop\s+database|create\s+tablespace|drop\s+tablespace|alter\s+system)(\s|\(|$)'));
		IF v_what IS NULL AND v_statement ~* '^(create\s+(unique\s+)?index|drop\s+index|reindex)\s.*\mconcurrently\M' THEN
			v_what := pg_catalog.upper(pg_catalog.substring(v_statement, '(?i)^(create\s+(unique\s+)?index|drop\s+index|reindex)')) || ' CONCURRENTLY';
		END IF;
		IF v_what IS NULL AND v_statement ~* '^alter\s+table\s.*\mdetach\s+partition\s.*\mconcurrently\M' THEN
			v_what := 'DETACH PARTITION CONCURRENTLY';
		END IF;
		IF v_what IS NOT NULL THEN
			IF v_what = 'DETACH PARTITION CONCURRENTLY' THEN
				RETURN 'DETACH PARTITION CONCURRENTLY cannot run inside a transaction block, and an SQL job runs it in one; leave this job to pg_cron';
			END IF;
			RETURN pg_catalog.format('%s cannot run inside a transaction block, and the statements of a command with several run in one; schedule it as a job of its own',
									 pg_catalog.regexp_replace(pg_catalog.btrim(v_what), '\s+', ' ', 'g'));
		END IF;
	END LOOP;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION sched._pg_cron_command_note(text) IS 'internal: why a pg_cron command cannot be an SQL job (it cannot run in a transaction block), or NULL';

CREATE OR REPLACE FUNCTION sched.import_pg_cron(biz_type text DEFAULT 'pg_cron')
RETURNS TABLE (jobid bigint, jobname text, schedule_name text, imported boolean, note text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
	v_biz_type text := biz_type;
	v_delivery text;
	v_cron_db text;
	v_zone text;
	v_port int := pg_catalog.current_setting('port')::int;
	v_cron_host text := pg_catalog.current_setting('cron.host', true);
	v_workers boolean := coalesce(pg_catalog.current_setting('cron.use_background_workers', true), 'off') = 'on';
	v_dom_and_dow boolean := coalesce(pg_catalog.current_setting('cron.match_dom_and_dow', true), 'off') = 'on';
	v_role regrole;
	v_super boolean;
	v_rule record;
	v_command_note text;
	v_statements text;
	v_task bigint;
	j record;
BEGIN
	-- The schedules run as pg_cron's users, whoever calls this.
	IF NOT sched._caller_is_admin() THEN
		RAISE EXCEPTION 'permission denied for function import_pg_cron'
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'Its schedules run as the roles of pg_cron''s jobs: importing them is for superusers and members of the role that owns delaysched.';
	END IF;
	PERFORM sched._check_name(v_biz_type, 'business type name',
		'Use a lowercase identifier such as ''pg_cron''.');
	SELECT b.delivery INTO v_delivery FROM sched.biz b WHERE b.name = v_biz_type;
	IF v_delivery <> 'sql' THEN
		RAISE EXCEPTION 'business type "%" does not run sql commands', v_biz_type
			USING ERRCODE = 'wrong_object_type',
				  DETAIL = pg_catalog.format('It delivers by %s; pg_cron''s jobs are commands, for a type with delivery ''sql''.', v_delivery),
				  HINT = 'Name a type that does not exist yet (it is made with delivery => ''sql''), or one defined with sched.define_biz(name, delivery => ''sql'').';
	END IF;

	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname = 'pg_cron') THEN
		v_cron_db := pg_catalog.current_setting('cron.database_name', true);
		IF v_cron_db IS NOT NULL AND v_cron_db <> pg_catalog.current_database() THEN
			RAISE EXCEPTION 'extension "pg_cron" is not installed in this database'
				USING ERRCODE = 'undefined_object',
					  HINT = pg_catalog.format('pg_cron keeps its jobs in database "%s" (cron.database_name): call sched.import_pg_cron there.', v_cron_db);
		END IF;
		RAISE EXCEPTION 'extension "pg_cron" is not installed in this database'
			USING ERRCODE = 'undefined_object',
				  HINT = 'There are no pg_cron jobs to import. pg_cron is installed with CREATE EXTENSION pg_cron, after adding it to shared_preload_libraries.';
	END IF;
	IF (SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute a
		WHERE a.attrelid = pg_catalog.to_regclass('cron.job') AND NOT a.attisdropped
		  AND a.attname IN ('jobid', 'schedule', 'command', 'nodename', 'nodeport', 'database', 'username',
							'active', 'jobname')) < 9 THEN
		RAISE EXCEPTION 'pg_cron % is too old to import from',
				(SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname = 'pg_cron')
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'cron.job lacks the columns of pg_cron 1.4 (jobname, active).',
				  HINT = 'Update it with ALTER EXTENSION pg_cron UPDATE.';
	END IF;

	IF v_delivery IS NULL THEN
		PERFORM sched.define_biz(v_biz_type, delivery => 'sql');
	END IF;
	-- One import at a time into a type: the second finds the first's schedules.
	PERFORM 1 FROM sched.biz b WHERE b.name = v_biz_type FOR NO KEY UPDATE;

	-- pg_cron 1.5 has cron.timezone (GMT by default); 1.4 runs in GMT.  A
	-- setting pg_cron does not define is a placeholder, which pg_settings
	-- does not show.
	v_zone := coalesce((SELECT s.setting FROM pg_catalog.pg_settings s WHERE s.name = 'cron.timezone'), 'UTC');

	FOR j IN EXECUTE $query$
		SELECT c.jobid, c.schedule, c.command, c.nodename, c.nodeport, c.database, c.username, c.active,
			   c.jobname::text AS jobname,
			   pg_catalog.count(*) OVER (PARTITION BY c.jobname::text) AS named_alike
		FROM cron.job c ORDER BY c.jobid
	$query$
	LOOP
		jobid := j.jobid;
		jobname := j.jobname;
		schedule_name := CASE
			WHEN j.jobname ~ '^[a-z_][a-z0-9_]*$' AND pg_catalog.octet_length(j.jobname) <= 63
				 AND j.named_alike = 1
				 AND (j.jobname !~ '^pg_cron_[0-9]+$' OR j.jobname = 'pg_cron_' || j.jobid)
			THEN j.jobname
			ELSE 'pg_cron_' || j.jobid END;
		imported := false;
		note := NULL;
		v_rule := sched._pg_cron_rule(j.schedule, v_dom_and_dow);
		SELECT r.oid::regrole, r.rolsuper INTO v_role, v_super FROM pg_catalog.pg_roles r WHERE r.rolname = j.username;
		v_command_note := sched._pg_cron_command_note(j.command);

		IF EXISTS (SELECT FROM sched.schedule x WHERE x.name = schedule_name AND x.biz_type = v_biz_type) THEN
			note := 'exists';
		ELSIF v_rule.rule IS NULL THEN
			note := v_rule.note;
		ELSIF NOT v_workers AND NOT (j.nodeport = v_port
									 AND (j.nodename IN ('localhost', '127.0.0.1', '::1', '')
										  OR j.nodename = v_cron_host OR j.nodename LIKE '/%')) THEN
			note := pg_catalog.format('the job runs on another server (%s:%s); define it on that server',
									  j.nodename, j.nodeport);
		ELSIF v_role IS NULL THEN
			note := pg_catalog.format('role "%s", the job''s user, does not exist; create it or give the job another user (cron.alter_job), then import again',
									  j.username);
		ELSIF v_command_note IS NOT NULL THEN
			note := v_command_note;
		ELSIF j.database <> pg_catalog.current_database() THEN
			-- What this function would do, written out for that database:
			-- the schedule is defined by its role, so that it runs as it.
			v_statements := pg_catalog.format('CREATE EXTENSION IF NOT EXISTS delaysched; '
					'SELECT sched.define_biz(%L, delivery => ''sql'') WHERE NOT EXISTS (SELECT FROM sched.biz WHERE name = %L); ',
					v_biz_type, v_biz_type);
			IF NOT v_super THEN
				v_statements := v_statements || pg_catalog.format('GRANT USAGE ON SCHEMA sched TO %I; '
						'GRANT EXECUTE ON FUNCTION sched.define_schedule TO %I; SELECT sched.grant_biz(%L, %L); ',
						j.username, j.username, v_biz_type, j.username);
			END IF;
			v_statements := v_statements || pg_catalog.format('SET ROLE %I; '
					'SELECT sched.define_schedule(%L, %L, %L, time_zone => %L, catch_up => ''none'', allow_overlap => false, command => %L); '
					'RESET ROLE;',
					j.username, schedule_name, v_biz_type, v_rule.rule, v_zone, j.command);
			IF NOT j.active THEN
				v_statements := v_statements || pg_catalog.format(' SELECT sched.pause_schedule(%L, %L);',
																  schedule_name, v_biz_type);
			END IF;
			note := pg_catalog.format('the job runs in database "%s", and a schedule runs in the database it is defined in; there, as a superuser: %s',
									  j.database, v_statements);
		ELSE
			BEGIN
				PERFORM sched.define_schedule(schedule_name, v_biz_type, v_rule.rule, time_zone => v_zone,
											  catch_up => 'none', allow_overlap => false, command => j.command);
				-- define_schedule made it run as the caller: it runs as the job's user.
				-- (Its pending firing only: a delivered firing of an earlier
				-- schedule of that name keeps its role.)
				UPDATE sched.schedule x SET run_as = v_role
					WHERE x.name = schedule_name AND x.biz_type = v_biz_type
					RETURNING x.task_id INTO v_task;
				UPDATE sched.task t SET run_as = v_role
					WHERE t.schedule = schedule_name AND t.biz_type = v_biz_type AND t.id = v_task;
				IF NOT j.active THEN
					PERFORM sched.pause_schedule(schedule_name, v_biz_type);
				END IF;
				imported := true;
				note := nullif(pg_catalog.concat_ws('; ', v_rule.note,
					CASE WHEN NOT j.active THEN 'paused: the job is inactive in pg_cron' END), '');
			EXCEPTION WHEN OTHERS THEN
				note := SQLERRM;
			END;
		END IF;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION sched.import_pg_cron(text) IS 'copy the jobs of pg_cron (cron.job) into schedules of an sql business type, leaving pg_cron untouched; one row per job says what became of it';
