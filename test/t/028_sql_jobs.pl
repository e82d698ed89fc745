# SQL jobs (delivery 'sql'): a job does what its owner could, once
# (promise 11), and fails, times out and goes dead as documented.
#
#   (a) an immediate stop mid-run: a job that had made its insert and was
#       waiting (on an advisory lock the test holds) when the server
#       stopped runs again after the start, as attempt 2, and leaves one
#       row, written after the restart; a job that committed before the
#       stop is never run again;
#   (b) the SQL worker running a job ends mid-run: SIGTERM (the launcher
#       starts another, which takes the job back) and SIGKILL (the whole
#       server restarts): the job runs again, as attempt 2, once;
#   (c) sched.cancel of a running job stops its statement: 'cancelled',
#       nothing of it left, never run again;
#   (d) a job runs as the role that added it: its rows say so; one whose
#       role lacks a privilege for its second statement is dead after
#       max_attempts with sql_42501, and its first statement rolled back
#       too; SET ROLE and SET SESSION AUTHORIZATION inside a job are
#       refused;
#   (e) a job whose role is dropped before it falls due is dead with
#       role_dropped, and nothing of it ran;
#   (f) a run longer than the type's timeout is stopped (SQLSTATE 57014),
#       retried, and dead after max_attempts;
#   (g) a schedule with a command, every second: one run per instant,
#       sched.run_now adds one run beside them, pause_schedule stops them;
#   (h) two jobs running, one in each SQL worker, when the server stops
#       and starts again with one SQL worker: the job of the worker that
#       starts again is taken back at once, the other when its lease runs
#       out (the type's timeout and 30 seconds), by the sweep; each runs
#       again, once.
#
# Every wait is a poll with a deadline.  The only fixed wait is the length
# of a pause, during which nothing may run.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = DelayschedTest::new_node('sql_jobs',
	extra_conf => "delaysched.sql_workers = 2\nrestart_after_crash = on");

sub sql { return $node->safe_psql('postgres', $_[0]) }

# A command as an SQL literal (dollar-quoted: commands quote their own strings).
sub literal { return '$cmd$' . $_[0] . '$cmd$' }

# Every run of a test job inserts a row here; the defaults are evaluated
# by the run, in the SQL worker: its pid, its role, the server's start.
sql(q{
	CREATE TABLE effects (
		job text NOT NULL,
		postmaster_start timestamptz NOT NULL DEFAULT pg_postmaster_start_time(),
		pid int NOT NULL DEFAULT pg_backend_pid(),
		who name NOT NULL DEFAULT current_user,
		at timestamptz NOT NULL DEFAULT clock_timestamp());
	SELECT sched.define_biz('once', delivery => 'sql', max_attempts => 5,
							min_backoff => '10 ms', max_backoff => '100 ms');
});

# A job of type $type (once if not given), due now, that inserts its row
# into effects and then, with $key, waits for advisory lock $key.  Returns
# its id.
sub add_job
{
	my ($job, $key, $type) = @_;
	my $command = "INSERT INTO effects (job) VALUES ('$job')";
	$command .= "; SELECT pg_advisory_xact_lock($key)" if defined $key;
	return sql("SELECT sched.add_sql('" . ($type // 'once') . "', now(), " . literal($command) . ')');
}

# Wait until job $id runs and its command waits for advisory lock $key:
# the SQL worker holding the job (sched.workers) waits for that lock, so
# its insert is made and not committed.  Returns that worker's pid.
sub wait_blocked
{
	my ($id, $key, $what) = @_;
	my $ok = DelayschedTest::poll_until($node, qq{
		SELECT count(*) FROM sched.tasks t
		JOIN sched.workers w ON w.role = 'sql' AND w.holds = 'job ' || t.id
		JOIN pg_locks l ON l.pid = w.pid AND l.locktype = 'advisory' AND l.classid = 0
						   AND l.objid = $key AND NOT l.granted
		WHERE t.id = $id AND t.state = 'delivered' AND t.status = 'running'}, '1', 30);
	ok($ok, "$what: the job runs (status running), its insert made, and waits for the lock")
	  or diag(sql("SELECT * FROM sched.tasks WHERE id = $id"), "\n", sql('SELECT * FROM sched.workers'));
	return sql("SELECT pid FROM sched.workers WHERE role = 'sql' AND holds = 'job $id'");
}

# The rows job $job left in effects.
sub effects { return sql("SELECT count(*) FROM effects WHERE job = '$_[0]'") }

# "state attempt" of task $id.
sub state_attempt { return sql("SELECT state || ' ' || attempt FROM sched.tasks WHERE id = $_[0]") }

# Wait until task $id is in state $state.
sub wait_state
{
	my ($id, $state, $timeout) = @_;
	return DelayschedTest::poll_until($node, "SELECT state FROM sched.tasks WHERE id = $id",
		$state, $timeout // 30);
}

# End a session holding a lock whose server went away under it.
sub end_holder
{
	my ($holder) = @_;
	eval { $holder->{harness}->kill_kill; $holder->{harness}->finish; };
}

# --- (a) an immediate stop mid-run ------------------------------------------
my $committed = add_job('committed');
ok(wait_state($committed, 'done'), 'a job that commits is done');

my $holder = DelayschedTest::hold_in_transaction($node, 'SELECT pg_advisory_xact_lock(1001)');
my $stopped = add_job('stopped', 1001);
wait_blocked($stopped, 1001, 'immediate stop');
is(effects('stopped'), '0', 'immediate stop: the running job\'s insert is not committed yet');
my $first_start = sql('SELECT pg_postmaster_start_time()');
$node->stop('immediate');
end_holder($holder);
$node->start;

ok(wait_state($stopped, 'done', 60), 'immediate stop: the job ran again after the start, and committed');
is(sql(q{SELECT count(*) || ' ' || bool_and(postmaster_start = pg_postmaster_start_time())
		 FROM effects WHERE job = 'stopped'}), '1 true',
	'immediate stop: one row, written after the restart (the first run\'s never committed)');
is(sql("SELECT attempt || ' ' || (last_error LIKE 'worker_stopped:%') FROM sched.tasks WHERE id = $stopped"),
	'2 true', 'immediate stop: the run cut short counted as attempt 1 (worker_stopped), the second committed');
is(sql("SELECT string_agg(attempt || ':' || outcome || ':' || coalesce(sqlstate, ''), ',' ORDER BY attempt, started_at) FROM sched.attempts WHERE id = $stopped"),
	'1:retry:57P01,2:done:', 'immediate stop: sched.attempts has the run the stop cut short (57P01) and the one that committed');
# The workers have claimed and run since the start (the job above): one
# that committed before the stop is not among what they ran.
is(sql(qq{SELECT count(*) || ' ' || bool_and(postmaster_start = '$first_start')
		  FROM effects WHERE job = 'committed'}), '1 true',
	'immediate stop: the job that committed before it did not run again');
is(state_attempt($committed), 'done 1', 'immediate stop: that job is still done, at attempt 1');

# --- (b) the SQL worker ends mid-run: SIGTERM ---------------------------------
$holder = DelayschedTest::hold_in_transaction($node, 'SELECT pg_advisory_xact_lock(1002)');
my $terminated = add_job('terminated', 1002);
my $pid = wait_blocked($terminated, 1002, 'SIGTERM');
ok(kill('TERM', $pid), "SIGTERM: sent to the SQL worker running the job ($pid)");
ok(DelayschedTest::poll_until($node, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid", '0', 30),
	'SIGTERM: the worker exited');
# The lock is still held: the job's next run waits for it as the first did,
# in another worker, and the first run's insert is gone.
my $rerun_pid = wait_blocked($terminated, 1002, 'SIGTERM, run again');
isnt($rerun_pid, $pid, 'SIGTERM: another worker runs it again');
is(effects('terminated'), '0', 'SIGTERM: the first run left nothing');
is(state_attempt($terminated), 'delivered 2', 'SIGTERM: the second run is attempt 2');
DelayschedTest::release_session($holder);
ok(wait_state($terminated, 'done'), 'SIGTERM: the second run committed');
is(sql("SELECT count(*) || ' ' || bool_and(pid <> $pid) FROM effects WHERE job = 'terminated'"), '1 true',
	'SIGTERM: one row, from the second run');
like(sql("SELECT last_error FROM sched.tasks WHERE id = $terminated"), qr/^worker_stopped:/,
	'SIGTERM: the first attempt ended as worker_stopped');

# --- (b) the SQL worker ends mid-run: SIGKILL, the server restarts ------------
$holder = DelayschedTest::hold_in_transaction($node, 'SELECT pg_advisory_xact_lock(1003)');
my $killed = add_job('killed', 1003);
$pid = wait_blocked($killed, 1003, 'SIGKILL');
my $offset = -s $node->logfile;
ok(kill('KILL', $pid), "SIGKILL: sent to the SQL worker running the job ($pid)");
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
end_holder($holder);
# (poll_query_until retries while the server refuses connections.)
ok($node->poll_query_until('postgres', "SELECT state FROM sched.tasks WHERE id = $killed", 'done'),
	'SIGKILL: the job ran again after the restart, and committed');
is(sql("SELECT count(*) || ' ' || bool_and(pid <> $pid) FROM effects WHERE job = 'killed'"), '1 true',
	'SIGKILL: one row, from the second run');
is(state_attempt($killed), 'done 2', 'SIGKILL: the second run is attempt 2');

# --- (c) sched.cancel of a running job ----------------------------------------
$holder = DelayschedTest::hold_in_transaction($node, 'SELECT pg_advisory_xact_lock(1004)');
my $cancelled = add_job('cancelled', 1004);
wait_blocked($cancelled, 1004, 'cancel');
is(sql("SELECT sched.cancel($cancelled)"), 't', 'cancel: sched.cancel of a running job says it cancelled it');
is(state_attempt($cancelled), 'cancelled 1', 'cancel: the job is cancelled');
ok(DelayschedTest::poll_until($node,
	"SELECT string_agg(attempt || ':' || outcome || ':' || sqlstate, ',') FROM sched.attempts WHERE id = $cancelled",
	'1:cancelled:57014', 30), 'cancel: its run is recorded as cancelled, with 57014');
DelayschedTest::release_session($holder);
# A job added after it runs; the cancelled one never does again.
my $after_cancel = add_job('after_cancel');
ok(wait_state($after_cancel, 'done'), 'cancel: a later job runs');
is(effects('cancelled'), '0', 'cancel: the cancelled job left nothing and did not run again');

is(sql('SELECT count(*) FROM effects GROUP BY job HAVING count(*) <> 1'), '',
	'every job of (a) to (c) left exactly one row, or none if cancelled');

# --- (d) the role of a job, and a privilege it lacks --------------------------
my $admin = sql('SELECT current_user');
sql(q{
	CREATE ROLE alice;
	GRANT USAGE ON SCHEMA sched TO alice;
	GRANT EXECUTE ON FUNCTION sched.add_sql(text, timestamptz, text, text, text, int) TO alice;
	CREATE TABLE allowed (v int, who name DEFAULT current_user);
	CREATE TABLE forbidden (v int);
	GRANT INSERT ON allowed TO alice;
	SELECT sched.define_biz('limited', delivery => 'sql', max_attempts => 3,
							min_backoff => '10 ms', max_backoff => '50 ms');
	SELECT sched.grant_biz('limited', 'alice');
});

# A job of type limited added by alice, due now; returns its id.
sub add_as_alice
{
	my ($command) = @_;
	return sql("SET ROLE alice; SELECT sched.add_sql('limited', now(), " . literal($command) . ')');
}

my $may = add_as_alice('INSERT INTO allowed (v) VALUES (1)');
my $may_not = add_as_alice('INSERT INTO allowed (v) VALUES (2); INSERT INTO forbidden VALUES (2)');
my $set_role = add_as_alice("SET ROLE $admin; INSERT INTO forbidden VALUES (3)");
my $set_session = add_as_alice("SET SESSION AUTHORIZATION $admin; INSERT INTO forbidden VALUES (4)");
ok(wait_state($may, 'done'), 'privileges: a job its role may run is done');
is(sql(q{SELECT string_agg(v || ':' || who, ',') FROM allowed}), '1:alice',
	'privileges: it ran as the role that added it');
is(sql("SELECT run_as FROM sched.tasks WHERE id = $may"), 'alice', 'privileges: sched.tasks says so');
for my $job ([ $may_not, 'a statement on a table it may not write' ],
	[ $set_role, 'SET ROLE' ], [ $set_session, 'SET SESSION AUTHORIZATION' ])
{
	my ($id, $what) = @$job;
	ok(wait_state($id, 'dead'), "privileges, $what: dead");
	like(sql("SELECT attempt || ' ' || last_error FROM sched.tasks WHERE id = $id"),
		qr/^3 sql_42501: /, "privileges, $what: after 3 attempts, with sql_42501");
	is(sql("SELECT string_agg(attempt || ':' || outcome || ':' || sqlstate, ',' ORDER BY attempt)
			FROM sched.attempts WHERE id = $id"),
		'1:retry:42501,2:retry:42501,3:dead:42501', "privileges, $what: every run recorded");
}
is(sql('SELECT count(*) FROM allowed WHERE v = 2'), '0',
	'privileges: the statement the job could run rolled back with the one it could not');
is(sql('SELECT count(*) FROM forbidden'), '0', 'privileges: nothing reached the forbidden table');

# --- (e) a dropped role ----------------------------------------------------------
sql(q{
	CREATE ROLE bob;
	GRANT USAGE ON SCHEMA sched TO bob;
	GRANT EXECUTE ON FUNCTION sched.add_sql(text, timestamptz, text, text, text, int) TO bob;
	CREATE TABLE bob_ran (v int);
	GRANT INSERT ON bob_ran TO bob;
	SELECT sched.define_biz('bobs', delivery => 'sql', max_attempts => 3,
							min_backoff => '10 ms', max_backoff => '50 ms');
	SELECT sched.grant_biz('bobs', 'bob');
});
# Added, and the role dropped, in one session, well before the job is due.
my ($bobs, $in_time) = split /\n/, sql(q{
	SET ROLE bob;
	SELECT sched.add_sql('bobs', now() + interval '3 seconds', 'INSERT INTO bob_ran VALUES (1)');
	RESET ROLE;
	DROP OWNED BY bob;
	DROP ROLE bob;
	SELECT clock_timestamp() < run_at FROM sched.tasks WHERE biz_type = 'bobs';
});
is($in_time, 't', 'dropped role: the role was dropped before its job fell due');
ok(wait_state($bobs, 'dead'), 'dropped role: the job is dead');
like(sql("SELECT last_error FROM sched.tasks WHERE id = $bobs"), qr/^role_dropped: /,
	'dropped role: with role_dropped');
is(sql("SELECT string_agg(attempt || ':' || outcome, ',') FROM sched.attempts WHERE id = $bobs"), '1:dead',
	'dropped role: at once, at its first attempt');
is(sql('SELECT count(*) FROM bob_ran'), '0', 'dropped role: nothing ran');

# --- (f) the timeout -----------------------------------------------------------------
sql(q{SELECT sched.define_biz('slow', delivery => 'sql', timeout => '200 ms', max_attempts => 3,
							   min_backoff => '10 ms', max_backoff => '50 ms')});
my $slow = sql(q{SELECT sched.add_sql('slow', now(), 'SELECT pg_sleep(5)')});
ok(wait_state($slow, 'dead'), 'timeout: the job is dead');
like(sql("SELECT attempt || ' ' || last_error FROM sched.tasks WHERE id = $slow"), qr/^3 timeout/,
	'timeout: after 3 attempts, with timeout');
is(sql("SELECT string_agg(attempt || ':' || outcome || ':' || sqlstate, ',' ORDER BY attempt)
		FROM sched.attempts WHERE id = $slow"),
	'1:retry:57014,2:retry:57014,3:dead:57014', 'timeout: every run recorded, with 57014');
# Each run was stopped at the timeout: none ran for pg_sleep's 5 seconds.
is(sql("SELECT count(*) FROM sched.attempts WHERE id = $slow
		AND duration >= interval '200 ms' AND duration < interval '4 seconds'"), '3',
	'timeout: each run lasted the timeout, not the command\'s 5 seconds');

# --- (g) a schedule with a command --------------------------------------------------
sql(q{
	CREATE TABLE ticks (at timestamptz NOT NULL DEFAULT clock_timestamp());
	SELECT sched.define_biz('cronish', delivery => 'sql');
	SELECT sched.define_schedule('each_second', 'cronish', '* * * * * *',
								 command => 'INSERT INTO ticks DEFAULT VALUES');
});
ok(DelayschedTest::poll_until($node, "SELECT runs >= 4 FROM sched.schedules WHERE name = 'each_second'", 't', 30),
	'schedule: it runs every second');
my $extra = sql(q{SELECT sched.run_now('each_second')});
ok(wait_state($extra, 'done'), 'schedule: run_now adds a run, which is done');
sql(q{SELECT sched.pause_schedule('each_second')});
# A firing an SQL worker held at the pause may still end; then nothing more.
ok(DelayschedTest::poll_until($node, q{SELECT count(*) FROM sched.tasks
	WHERE schedule = 'each_second' AND state IN ('pending', 'delivered')}, '0', 30),
	'schedule: paused, no firing is left to run');
my $paused_at = sql(q{SELECT (SELECT count(*) FROM ticks) || ' ' || runs FROM sched.schedules WHERE name = 'each_second'});
# The scenario, not a synchronisation: three instants of the rule pass.
sleep 3;
is(sql(q{SELECT (SELECT count(*) FROM ticks) || ' ' || runs FROM sched.schedules WHERE name = 'each_second'}),
	$paused_at, 'schedule: paused, it runs no more');

# Every run left one row; the rule's firings that ran are one per instant,
# every instant from the first to the last ran or is counted missed, and
# the schedule counts the rule's runs, not the run_now's.
my ($done, $instants, $span, $runs, $missed, $rows) = split /\|/, sql(qq{
	SELECT count(*), count(DISTINCT t.run_at),
		   extract(epoch FROM max(t.run_at) - min(t.run_at))::int + 1,
		   s.runs, s.missed, (SELECT count(*) FROM ticks)
	FROM sched.tasks t JOIN sched.schedules s ON s.name = t.schedule
	WHERE t.schedule = 'each_second' AND t.state = 'done' AND t.id <> $extra
	GROUP BY s.runs, s.missed});
cmp_ok($done, '>=', 4, "schedule: $done firings ran");
is($instants, $done, 'schedule: no instant ran twice');
is($rows, $done + 1, 'schedule: one row per firing and one for run_now');
is($runs, $done, 'schedule: runs counts the firings of the rule');
is($done + $missed, $span, 'schedule: every instant ran or was counted missed');
is(sql("SELECT state || ' ' || attempt || ' ' || run_as FROM sched.tasks WHERE id = $extra"), "done 1 $admin",
	'schedule: the run_now run ran once, as the role that defined the schedule');

# --- (h) fewer SQL workers after a restart -----------------------------------------
# The timeout bounds the lease; the jobs must still be running (waiting for
# the lock) when the server stops, well within it.
sql(q{SELECT sched.define_biz('leased', delivery => 'sql', timeout => '10 seconds', max_attempts => 3,
							   min_backoff => '10 ms', max_backoff => '100 ms')});
$holder = DelayschedTest::hold_in_transaction($node, 'SELECT pg_advisory_xact_lock(1005)');
my @leased = (add_job('leased_a', 1005, 'leased'), add_job('leased_b', 1005, 'leased'));
wait_blocked($_, 1005, "fewer workers, job $_") for @leased;
# The job of the first SQL worker (slot 0), which starts again.
my $kept = sql(q{SELECT substr(holds, 5) FROM sched.workers WHERE role = 'sql' ORDER BY worker LIMIT 1});
my ($orphan) = grep { $_ ne $kept } @leased;
$node->stop('immediate');
end_holder($holder);
$node->append_conf('postgresql.conf', 'delaysched.sql_workers = 1');
$node->start;
is(sql(q{SELECT count(*) FROM sched.workers WHERE role = 'sql'}), '1', 'fewer workers: one SQL worker now');
ok(wait_state($kept, 'done'), 'fewer workers: the job of the worker that started again ran again');
like(sql("SELECT attempt || ' ' || last_error FROM sched.tasks WHERE id = $kept"), qr/^2 worker_stopped:/,
	'fewer workers: taken back at once by that worker, attempt 2');
is(sql("SELECT state || ' ' || (lease_until > now()) FROM sched.tasks WHERE id = $orphan"), 'delivered true',
	'fewer workers: the other job waits for its lease to run out');
ok(wait_state($orphan, 'done', 120), 'fewer workers: the sweep took the other job back, and it ran again');
like(sql("SELECT attempt || ' ' || last_error FROM sched.tasks WHERE id = $orphan"), qr/^2 no_result:/,
	'fewer workers: attempt 2, the first ended as no_result');
is(sql(q{SELECT string_agg(job || ':' || count, ',' ORDER BY job) FROM
		 (SELECT job, count(*) FROM effects WHERE job LIKE 'leased%' GROUP BY job) x}), 'leased_a:1,leased_b:1',
	'fewer workers: each job left one row');

$node->stop;
done_testing();
