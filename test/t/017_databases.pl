# Every database of the cluster, served by one set of workers: CREATE
# EXTENSION is all it takes.  Three databases deliver their own tasks to
# their own listeners only; a fourth, created from template0 or from a
# template that has the extension, is served; DROP EXTENSION stops a
# database's workers, and so do both in a prepared transaction once COMMIT
# PREPARED commits them; DROP DATABASE, ALTER DATABASE ... RENAME and SET
# TABLESPACE, and CREATE DATABASE ... TEMPLATE succeed without FORCE while
# tasks fall due; another role's DROP DATABASE stops nothing; a database
# whose workers keep failing
# backs off and stalls no other; the launcher, terminated, adopts the
# workers, and killed (a crash) loses nothing; CREATE EXTENSION racing DROP
# DATABASE; a short max_worker_processes still gives every database a
# scanner; the global delivery cap is shared fairly between databases;
# sched.cluster is for superusers and pg_monitor.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = DelayschedTest::new_node('databases', extra_conf => <<'EOC');
max_worker_processes = 32
delaysched.workers = 1
delaysched.http_workers = 0
max_prepared_transactions = 4
# A SIGKILL of the launcher, below, is a crash the server recovers from.
restart_after_crash = on
EOC

sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q) }

# How many scanners run in database $db.
sub scanners
{
	my ($db) = @_;
	return sql('postgres', qq{SELECT count(*) FROM pg_stat_activity
	                          WHERE datname = '$db' AND backend_type = 'delaysched scanner'});
}

# Poll until $db has $n scanners; seconds it took, or undef after $timeout.
sub wait_scanners
{
	my ($db, $n, $timeout) = @_;
	my $start = time;
	while (time - $start < ($timeout // 30))
	{
		return time - $start if scanners($db) == $n;
		usleep(20_000);
	}
	return undef;
}

# A database with the extension and a notify type "jobs" on channel "jobs".
sub make_database
{
	my ($db, %opts) = @_;
	sql('postgres', "CREATE DATABASE $db" . ($opts{template} ? " TEMPLATE $opts{template}" : ''));
	return if $opts{template};
	sql($db, q{CREATE EXTENSION delaysched});
	sql($db, q{SELECT sched.define_biz('jobs', channel => 'jobs', ack_timeout => '1 hour')});
}

# Add $n tasks in $db due over the next $secs seconds, each saying where it comes from.
sub add_tasks
{
	my ($db, $n, $secs) = @_;
	sql($db, qq{SELECT count(sched.add('jobs', clock_timestamp() + (0.3 + $secs * i / $n.0) * interval '1 second',
	                                     jsonb_build_object('db', current_database(), 'i', i)))
	            FROM generate_series(1, $n) i});
}

# ---------------------------------------------------------------------------
# Three databases, each its own types, tasks and listeners.
my @dbs = qw(alpha beta gamma);
make_database($_) for @dbs;
for my $db (@dbs)
{
	ok(defined wait_scanners($db, 1, 10), "$db is served by a scanner of its own");
}
my %listener = map { $_ => DelayschedTest::Listener->start($node, $_, ['--ack'], 'jobs') } @dbs;
add_tasks($_, 200, 3) for @dbs;
for my $db (@dbs)
{
	my @got = $listener{$db}->wait_for(200, 30);
	is(scalar(@got), 200, "$db: its 200 tasks arrived");
	is(scalar(grep { ($_->{message}{payload}{db} // '') ne $db } @got), 0,
		"$db: its listener received no other database's task");
	my $late = DelayschedTest::percentile(0.99, map { $_->{late_us} / 1000 } @got);
	DelayschedTest::timing_cmp_ok($late, '<', 2000, "$db: p99 lateness ${late} ms");
	cmp_ok(scalar(grep { $_->{late_us} < 0 } @got), '==', 0, "$db: nothing early");
}

# ---------------------------------------------------------------------------
# A fourth database, from template0: served from CREATE EXTENSION on.
sql('postgres', 'CREATE DATABASE delta TEMPLATE template0');
my $delta = DelayschedTest::Listener->start($node, 'delta', ['--ack'], 'jobs');
my $created = time;
sql('delta', q{CREATE EXTENSION delaysched});
sql('delta', q{SELECT sched.define_biz('jobs', channel => 'jobs')});
sql('delta', q{SELECT sched.add('jobs', clock_timestamp(), '{"first": true}')});
my @first = $delta->wait_for(1, 30);
my $served_in = time - $created;
is(scalar(@first), 1, 'a database created from template0 is served after CREATE EXTENSION');
DelayschedTest::timing_cmp_ok($served_in, '<', 5, sprintf('first delivery %.3f s after CREATE EXTENSION began', $served_in));
diag(sprintf('CREATE EXTENSION to the first delivery: %.3f s', $served_in));

# From a template that has the extension: served without CREATE EXTENSION.
make_database('tpl');
ok(defined wait_scanners('tpl', 1, 10), 'the future template is served while it is not one');
sql('postgres', q{ALTER DATABASE tpl IS_TEMPLATE true});
ok(defined wait_scanners('tpl', 0, 10), 'a template is not served');
my $t0 = time;
sql('postgres', q{CREATE DATABASE fromtpl TEMPLATE tpl});
ok(defined wait_scanners('fromtpl', 1, 15), 'a database created from that template is served');
my $from = DelayschedTest::Listener->start($node, 'fromtpl', ['--ack'], 'jobs');
sql('fromtpl', q{SELECT sched.add('jobs', clock_timestamp() + interval '200 ms', '{"copy": true}')});
is(scalar($from->wait_for(1, 30)), 1, 'and delivers its tasks');
diag(sprintf('CREATE DATABASE from the template to its scanner: %.3f s', time - $t0));

# Wait until $db has no task pending (every one delivered at least once).
sub wait_none_pending
{
	my ($db, $timeout) = @_;
	return DelayschedTest::poll_until_in($node, $db,
		q{SELECT count(*) FROM sched.tasks WHERE state = 'pending'}, '0', $timeout);
}

# CREATE DATABASE ... TEMPLATE a served database (not a template, and no
# session of the user's in it): its workers step aside for the copy and
# come back.
$listener{gamma}->stop;
add_tasks('gamma', 100, 4);
my $copy_start = time;
sql('postgres', q{CREATE DATABASE gamma_copy TEMPLATE gamma});
my $copy_took = time - $copy_start;
DelayschedTest::timing_cmp_ok($copy_took, '<', 5, sprintf('CREATE DATABASE from a served database took %.3f s', $copy_took));
ok(defined wait_scanners('gamma', 1, 10), 'the copied database is served again');
ok(defined wait_scanners('gamma_copy', 1, 15), 'and so is the copy');
ok(wait_none_pending('gamma', 30), 'gamma delivered every task across the copy');
ok(wait_none_pending('gamma_copy', 30), 'and the copy the tasks it copied');

# ALTER DATABASE ... SET TABLESPACE of a served database: the same.
my $ts_dir = PostgreSQL::Test::Utils::tempdir;
sql('postgres', qq{CREATE TABLESPACE regress_ts LOCATION '$ts_dir'});
my ($rc, $out, $err) = $node->psql('postgres', 'ALTER DATABASE gamma_copy SET TABLESPACE regress_ts');
is($rc, 0, 'ALTER DATABASE SET TABLESPACE of a served database succeeds') or diag($err);
ok(defined wait_scanners('gamma_copy', 1, 10), 'and the database is served again');

# ---------------------------------------------------------------------------
# DROP EXTENSION stops a database's workers within a second.
my $drop_start = time;
sql('beta', q{DROP EXTENSION delaysched});
my $gone = wait_scanners('beta', 0, 10);
ok(defined $gone, 'DROP EXTENSION: beta has no worker');
DelayschedTest::timing_ok(defined $gone && $gone < 1.0, sprintf('DROP EXTENSION: beta has no worker %.3f s later', $gone // -1));

# Created again at once: served anew, with nothing of the old installation.
sql('beta', q{CREATE EXTENSION delaysched});
sql('beta', q{SELECT sched.define_biz('jobs', channel => 'jobs', ack_timeout => '1 hour')});
my $beta_before = scalar($listener{beta}->received);
add_tasks('beta', 20, 1);
my @beta_again = $listener{beta}->wait_for($beta_before + 20, 30);
is(scalar(@beta_again) - $beta_before, 20, 'an extension dropped and created again is served anew');

# In a prepared transaction, CREATE EXTENSION is served once COMMIT
# PREPARED (another session) commits it, and DROP EXTENSION stops the
# workers then.
sql('postgres', q{CREATE DATABASE twophase});
sql('twophase', q{BEGIN; CREATE EXTENSION delaysched; PREPARE TRANSACTION 'ext_in'});
ok(!defined wait_scanners('twophase', 1, 1.5), 'a prepared CREATE EXTENSION is not served yet');
sql('twophase', q{COMMIT PREPARED 'ext_in'});
my $in = wait_scanners('twophase', 1, 10);
ok(defined $in, 'served after COMMIT PREPARED');
DelayschedTest::timing_ok(defined $in && $in < 2.0, sprintf('served %.3f s after COMMIT PREPARED', $in // -1));
sql('twophase', q{BEGIN; DROP EXTENSION delaysched; PREPARE TRANSACTION 'ext_out'});
is(scanners('twophase'), '1', 'a prepared DROP EXTENSION stops nothing yet');
sql('twophase', q{COMMIT PREPARED 'ext_out'});
my $out_2pc = wait_scanners('twophase', 0, 10);
ok(defined $out_2pc, 'and no worker after its COMMIT PREPARED');
DelayschedTest::timing_ok(defined $out_2pc && $out_2pc < 2.0, sprintf('and no worker %.3f s after its COMMIT PREPARED', $out_2pc // -1));
sql('postgres', q{DROP DATABASE twophase});

# A scanner that starts while the extension's tables are locked (by a
# prepared DROP EXTENSION, or a LOCK TABLE as here) waits and asks again: it
# does not end, for the launcher to start another only to meet the same lock.
sub scanner_pid
{
	my ($db) = @_;
	return sql('postgres', qq{SELECT string_agg(pid::text, ',') FROM pg_stat_activity
	                          WHERE datname = '$db' AND backend_type = 'delaysched scanner'});
}
my $locker = DelayschedTest::hold_in_transaction($node, 'LOCK TABLE sched.pointer', 'delta');
my $old_scanner = scanner_pid('delta');
sql('postgres', qq{SELECT pg_terminate_backend($old_scanner)});
ok(DelayschedTest::poll_until($node,
	qq{SELECT count(*) FROM pg_stat_activity WHERE datname = 'delta'
	   AND backend_type = 'delaysched scanner' AND pid <> $old_scanner}, '1', 30),
	'a scanner starts again while sched.pointer is locked');
my $new_scanner = scanner_pid('delta');
# Its first lock wait gives up, then the next one, its own or (were it to
# end) its successor's: by then the same process is to be there.
my $log_at = $node->wait_for_log(qr/\[$new_scanner\] (?:ERROR|FATAL):  canceling statement due to lock timeout/);
$node->wait_for_log(qr/(?:ERROR|FATAL):  canceling statement due to lock timeout/, $log_at);
is(scanner_pid('delta'), $new_scanner, 'and it is the same scanner after two of its lock waits gave up');
DelayschedTest::release_session($locker);

# Another role's DROP DATABASE stops nothing.
sql('postgres', q{CREATE ROLE mallory LOGIN});
my $pids = sql('postgres', q{SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity WHERE datname = 'alpha' AND backend_type LIKE 'delaysched%'});
($rc, $out, $err) = $node->psql('postgres', 'DROP DATABASE alpha', extra_params => [ '-U', 'mallory' ]);
like($err, qr/must be owner/, "another role's DROP DATABASE is refused");
is(sql('postgres', q{SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity WHERE datname = 'alpha' AND backend_type LIKE 'delaysched%'}),
	$pids, 'and the workers of that database did not move');

# ALTER DATABASE ... RENAME: the workers step aside and come back.
$listener{alpha}->stop;
($rc, $out, $err) = $node->psql('postgres', 'ALTER DATABASE alpha RENAME TO alpha2');
is($rc, 0, 'ALTER DATABASE RENAME of a served database succeeds') or diag($err);
ok(defined wait_scanners('alpha2', 1, 10), 'the renamed database is served');
my $alpha2 = DelayschedTest::Listener->start($node, 'alpha2', ['--ack'], 'jobs');
add_tasks('alpha2', 50, 1);
is(scalar($alpha2->wait_for(50, 30)), 50, 'and delivers its tasks');

# DROP DATABASE without FORCE while tasks fall due.
add_tasks('gamma', 1000, 10);
usleep(500_000);
my $dropdb_start = time;
($rc, $out, $err) = $node->psql('postgres', 'DROP DATABASE gamma');
my $dropdb_took = time - $dropdb_start;
is($rc, 0, 'DROP DATABASE of a served database succeeds without FORCE') or diag($err);
DelayschedTest::timing_cmp_ok($dropdb_took, '<', 5, sprintf('DROP DATABASE took %.3f s', $dropdb_took));
diag(sprintf('DROP DATABASE while tasks fall due: %.3f s', $dropdb_took));
ok(!sql('postgres', q{SELECT count(*) FROM sched.cluster WHERE database = 'gamma'}),
	'the dropped database is no longer in sched.cluster')
  or diag(sql('postgres', 'SELECT * FROM sched.cluster'));

# ---------------------------------------------------------------------------
# The race of CREATE EXTENSION and DROP DATABASE with the launcher.
my ($races_ok, $slowest_race) = (0, 0);
for my $i (1 .. 10)
{
	sql('postgres', "CREATE DATABASE race$i");
	sql("race$i", q{CREATE EXTENSION delaysched});
	sql("race$i", q{SELECT sched.define_biz('jobs')});
	sql("race$i", q{SELECT sched.add('jobs', clock_timestamp(), '{}')});
	usleep(($i % 4) * 50_000);
	my $s = time;
	my ($r) = $node->psql('postgres', "DROP DATABASE race$i");
	$races_ok++ if $r == 0;
	$slowest_race = time - $s if time - $s > $slowest_race;
}
is($races_ok, 10, 'ten databases dropped right after CREATE EXTENSION');
DelayschedTest::timing_cmp_ok($slowest_race, '<', 5, 'each within 5 s');
is(sql('postgres', q{SELECT count(*) FROM sched.cluster WHERE database LIKE 'race%'}), '0',
	'none of them is left in sched.cluster');

# ---------------------------------------------------------------------------
# A database whose workers keep failing backs off and stalls no other.
make_database('broken');
ok(defined wait_scanners('broken', 1, 10), 'the database to break is served');
sql('broken', q{ALTER TABLE sched.pointer RENAME TO pointer_broken});
sql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'broken' AND backend_type = 'delaysched scanner'});
ok(DelayschedTest::poll_until($node,
	q{SELECT failures >= 3 AND state = 'backing off' FROM sched.cluster WHERE database = 'broken'}, 't', 30),
	'the broken database backs off after its workers fail');
my $delta_before = scalar($delta->received);
sql('delta', q{SELECT count(sched.add('jobs', clock_timestamp() + interval '300 ms', '{}')) FROM generate_series(1, 50)});
my @delta_got = $delta->wait_for($delta_before + 50, 30);
is(scalar(@delta_got) - $delta_before, 50, 'another database delivers meanwhile');
my $delta_late = DelayschedTest::percentile(0.99, map { $_->{late_us} / 1000 } @delta_got[$delta_before .. $#delta_got]);
DelayschedTest::timing_cmp_ok($delta_late, '<', 2000, "on time (p99 ${delta_late} ms)");
my $starts = () = slurp_file($node->logfile) =~ /ended early \d+ times in a row/g;
cmp_ok($starts, '<=', 6, "the log says so a few times, not in a loop ($starts lines)");
sql('broken', q{ALTER TABLE sched.pointer_broken RENAME TO pointer});

# ---------------------------------------------------------------------------
# sched.cluster: superusers and pg_monitor only.
like(sql('postgres', q{SELECT string_agg(role || ':' || coalesce(database::text, '-') || ':' || state, ' ' ORDER BY role DESC, database) FROM sched.cluster}),
	qr/^launcher:-:running database:alpha2:served .*database:delta:served/, 'sched.cluster lists the launcher and the databases served');
($rc, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM sched.cluster', extra_params => [ '-U', 'mallory' ]);
like($err, qr/permission denied/, 'an ordinary role may not read sched.cluster');
sql('postgres', q{CREATE ROLE watcher LOGIN IN ROLE pg_monitor});
($rc, $out, $err) = $node->psql('postgres', 'SELECT count(*) > 0 FROM sched.cluster', extra_params => [ '-U', 'watcher' ]);
is($out, 't', 'a member of pg_monitor may') or diag($err);
like(sql('postgres', q{SELECT pointer_lag < interval '5 s' FROM sched.cluster WHERE database = 'delta'}), qr/^t$/,
	'the pointer lag of a served database is small');
my $sql_workers = $node->safe_psql('postgres', 'SHOW delaysched.sql_workers');
ok(DelayschedTest::poll_until($node,
	q{SELECT sql_workers || ' of ' || sql_granted FROM sched.cluster WHERE database = 'delta'},
	"$sql_workers of $sql_workers", 30),
	"its SQL workers run, as many as the budget grants ($sql_workers)");

# ---------------------------------------------------------------------------
# delaysched.max_deliveries_per_second is the cluster's, shared fairly: two
# databases with a backlog each get about half of it.
sql('postgres', q{ALTER SYSTEM SET delaysched.max_deliveries_per_second = 100});
$node->reload;
for my $db (qw(alpha2 delta))
{
	sql($db, q{SELECT sched.define_biz('capped', channel => 'capped', ack_timeout => '1 hour')});
	sql($db, q{SELECT count(sched.add('capped', clock_timestamp(), '{}')) FROM generate_series(1, 2000)});
}
# Delivered for four seconds of the server's clock after both backlogs
# were there.  The cap is checked on delivered_at, the time the drain took
# its tokens at: in no window of a second more than the cap and its
# bucket's tenth of a second.  (Counting at the client over its own four
# seconds, as this test once did, overstates the rate: the first
# database's deliveries began before the second's tasks were added.)
my $both_from = sql('postgres', 'SELECT extract(epoch FROM clock_timestamp())');
ok(DelayschedTest::poll_until($node,
	"SELECT clock_timestamp() > to_timestamp($both_from) + interval '4 seconds'", 't', 30),
	'four seconds of deliveries under the cap');
my %at = map { my $db = $_; $db => [ split /\n/, sql($db, q{
	SELECT extract(epoch FROM delivered_at) FROM sched.tasks
	WHERE biz_type = 'capped' AND delivered_at IS NOT NULL ORDER BY 1}) ] } qw(alpha2 delta);
my @cap_all = sort { $a <=> $b } (@{ $at{alpha2} }, @{ $at{delta} });
my $cap_busiest = DelayschedTest::busiest_window(1.0, @cap_all);
diag(sprintf('under a cap of 100/s: alpha2 %d, delta %d; at most %d in a second', scalar @{ $at{alpha2} },
	scalar @{ $at{delta} }, $cap_busiest));
cmp_ok($cap_busiest, '<=', 100 + 10, "the cap holds across databases (at most $cap_busiest in any second)");
my @window = grep { $_ >= $both_from && $_ < $both_from + 4 } @cap_all;
DelayschedTest::timing_cmp_ok(scalar @window, '>=', 100 * (4 - 1), 'and is used (' . scalar(@window) . ' in 4 s)');
my ($low, $high) = sort { $a <=> $b } map { my $db = $_; scalar grep { $_ >= $both_from && $_ < $both_from + 4 } @{ $at{$db} } } qw(alpha2 delta);
DelayschedTest::timing_cmp_ok($low, '>=', 0.7 * $high, "shared fairly between the two databases ($low against $high)");
sql('postgres', q{ALTER SYSTEM RESET delaysched.max_deliveries_per_second});
$node->reload;
for my $db (qw(alpha2 delta))
{
	sql($db, q{SELECT sched.drop_biz('capped', cancel_tasks => true)});
}

# ---------------------------------------------------------------------------
# The launcher, terminated, comes back and adopts the running workers.
my $workers = sql('postgres', q{SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity WHERE backend_type = 'delaysched scanner'});
my $launcher = sql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'delaysched launcher'});
sql('postgres', "SELECT pg_terminate_backend($launcher)");
ok(DelayschedTest::poll_until($node,
	qq{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'delaysched launcher' AND pid <> $launcher}, 't', 30),
	'a terminated launcher is started again');
usleep(2_000_000);
is(sql('postgres', q{SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity WHERE backend_type = 'delaysched scanner'}),
	$workers, 'the new launcher adopted the running workers: none started twice, none stopped');

# Killed (SIGKILL: the postmaster restarts everything): nothing is lost.
add_tasks($_, 100, 3) for qw(alpha2 delta);
$launcher = sql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'delaysched launcher'});
kill 'KILL', $launcher;
my $up = 0;
for (1 .. 300)
{
	# (psql may exit before reading its input while the server restarts:
	# IPC::Run then dies of the broken pipe, which is a "not yet".)
	my $r = eval { my ($ret) = $node->psql('postgres', 'SELECT 1'); $ret } // 1;
	if ($r == 0) { $up = 1; last }
	usleep(100_000);
}
ok($up, 'the server is back after the launcher was killed');
for my $db (qw(alpha2 delta))
{
	ok(wait_none_pending($db, 60), "$db: no task is left undelivered after the crash");
}

# ---------------------------------------------------------------------------
# max_worker_processes too small for every database's workers: each still
# gets one scanner, and the log says so once.
my $small = DelayschedTest::new_node('small', extra_conf => <<'EOC');
max_worker_processes = 6
delaysched.workers = 2
delaysched.http_workers = 1
delaysched.sql_workers = 0
EOC
for my $db (qw(one two three))
{
	$small->safe_psql('postgres', "CREATE DATABASE $db");
	$small->safe_psql($db, 'CREATE EXTENSION delaysched');
}
# 6 slots: the launcher, one kept for a probe, four for four databases.
ok(DelayschedTest::poll_until($small,
	q{SELECT string_agg(datname || ':' || n, ' ' ORDER BY datname) FROM (SELECT datname, count(*) n FROM pg_stat_activity WHERE backend_type = 'delaysched scanner' GROUP BY 1) s},
	'one:1 postgres:1 three:1 two:1', 30), 'every database has one scanner');
is($small->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('delaysched http')}), '0',
	'and no database a second worker');
usleep(3_000_000);
my @short = slurp_file($small->logfile) =~ /(\d+ of the \d+ workers wanted run)/g;
ok(@short >= 1 && @short <= 3 && $short[-1] eq '4 of the 12 workers wanted run',
	'the log says what was refused once per change, not in a loop')
  or diag(join("\n", @short));
$small->stop;

$_->stop for ($delta, $from, $alpha2, $listener{beta});
$node->stop;
done_testing();
