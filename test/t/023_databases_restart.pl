# Databases that come and go, and a restart with few worker slots.
#
# A database created while the server runs is probed before its CREATE
# EXTENSION and found empty; once served, released (connections
# disallowed, made a template, or taken out of delaysched.databases) and
# then allowed again, it is served again, as a database found at startup
# would be.
#
# After a restart with PostgreSQL's default max_worker_processes (8, one of
# them the logical replication launcher's), four databases with the
# extension each get a scanner before any gets a second, and all their
# tasks are delivered.  When other processes hold the slots, or the budget
# is spent, the log and sched.cluster say which database waits and why; it
# gets its scanner once a slot is free again.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = DelayschedTest::new_node('released', extra_conf => <<'EOC');
max_worker_processes = 16
delaysched.workers = 1
delaysched.http_workers = 0
# The launcher says at DEBUG1 which database a probe found empty.
log_min_messages = debug1
EOC

sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q) }

# Poll until database $db has $n scanners; true if it did within $timeout.
sub wait_scanners
{
	my ($db, $n, $timeout) = @_;
	return DelayschedTest::poll_until($node,
		qq{SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND backend_type = 'delaysched scanner'},
		$n, $timeout // 30);
}

# Is $db in sched.cluster?
sub listed
{
	my ($db) = @_;
	return sql('postgres', qq{SELECT count(*) FROM sched.cluster WHERE database = '$db'});
}

# A database created now: wait for the launcher's probe to find it without
# the extension, then CREATE EXTENSION, and wait for its scanner.
sub make_late_database
{
	my ($db) = @_;
	my $offset = -s $node->logfile;
	sql('postgres', "CREATE DATABASE $db");
	$node->wait_for_log(qr/database "$db" does not have the extension/, $offset);
	sql($db, 'CREATE EXTENSION delaysched');
	ok(wait_scanners($db, 1), "$db, created while the server runs, is served after CREATE EXTENSION");
}

# The three ways to release a database and allow it again.
my %ways = (
	late_conn => [ 'ALTER DATABASE late_conn ALLOW_CONNECTIONS false',
				   'ALTER DATABASE late_conn ALLOW_CONNECTIONS true' ],
	late_tpl => [ 'ALTER DATABASE late_tpl IS_TEMPLATE true',
				  'ALTER DATABASE late_tpl IS_TEMPLATE false' ],
	late_list => [ q{ALTER SYSTEM SET delaysched.databases = 'postgres, late_conn, late_tpl'},
				   'ALTER SYSTEM RESET delaysched.databases' ]);
for my $db (sort keys %ways)
{
	make_late_database($db);
	sql('postgres', $ways{$db}[0]);
	$node->reload if $db eq 'late_list';
	ok(wait_scanners($db, 0), "$db released: no scanner");
	ok(DelayschedTest::poll_until($node,
		qq{SELECT count(*) FROM sched.cluster WHERE database = '$db'}, '0', 30),
		"$db released: gone from sched.cluster");
	sql('postgres', $ways{$db}[1]);
	$node->reload if $db eq 'late_list';
	ok(wait_scanners($db, 1), "$db allowed again: served again");
	is(listed($db), '1', "$db allowed again: in sched.cluster");
}

# And it delivers.
sql('late_conn', q{SELECT sched.define_biz('jobs', channel => 'jobs')});
my $listener = DelayschedTest::Listener->start($node, 'late_conn', ['--ack'], 'jobs');
sql('late_conn', q{SELECT sched.add('jobs', clock_timestamp() + interval '300 ms', '{}')});
is(scalar($listener->wait_for(1, 30)), 1, 'the database served again delivers its tasks');
$listener->stop;
$node->stop;

# ---------------------------------------------------------------------------
# A restart with PostgreSQL's default max_worker_processes.
my $few = DelayschedTest::new_node('few_slots', extra_conf => <<'EOC');
max_worker_processes = 8
delaysched.workers = 2
delaysched.http_workers = 1
delaysched.sql_workers = 0
log_min_messages = log
EOC

sub fsql { my ($db, $q) = @_; return $few->safe_psql($db, $q) }

# Every database's scanners, as "db:n db:n ...".
my $scanners_q = q{SELECT coalesce(string_agg(datname || ':' || n, ' ' ORDER BY datname), '')
                   FROM (SELECT datname, count(*) n FROM pg_stat_activity
                         WHERE backend_type = 'delaysched scanner' GROUP BY 1) s};

my @four = qw(one postgres three two);
for my $db (qw(one two three))
{
	fsql('postgres', "CREATE DATABASE $db");
	fsql($db, 'CREATE EXTENSION delaysched');
}
fsql($_, q{SELECT sched.define_biz('jobs', channel => 'jobs')}) for @four;
ok(DelayschedTest::poll_until($few, $scanners_q, 'one:1 postgres:1 three:1 two:1', 30),
	'before the restart, every database has one scanner')
  or diag(fsql('postgres', $scanners_q));
fsql($_, q{SELECT count(sched.add('jobs', clock_timestamp() + interval '2 s', '{}')) FROM generate_series(1, 20)})
  for @four;

$few->restart;
ok(DelayschedTest::poll_until($few, $scanners_q, 'one:1 postgres:1 three:1 two:1', 60),
	'after a restart, every database has one scanner, none two')
  or diag(fsql('postgres', $scanners_q));
is(fsql('postgres', q{SELECT string_agg(database || ':' || state, ' ' ORDER BY database)
                      FROM sched.cluster WHERE role = 'database'}),
	'one:served postgres:served three:served two:served',
	'sched.cluster lists every database, served');
for my $db (@four)
{
	ok(DelayschedTest::poll_until_in($few, $db,
		q{SELECT count(*) FROM sched.tasks WHERE state = 'pending'}, '0', 60),
		"$db: its tasks are delivered after the restart");
}

# The budget spent: delaysched.max_workers = 4 leaves a fifth database none.
fsql('postgres', 'ALTER SYSTEM SET delaysched.max_workers = 4');
$few->reload;
ok(DelayschedTest::poll_until($few,
	q{SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('delaysched scanner', 'delaysched http')},
	'4', 30), 'delaysched.max_workers = 4: four workers');

# Other processes take the two slots left: a parallel worker each (a
# query run by one, as force_parallel_mode, debug_parallel_query from 16,
# has it).
my $in_worker = $few->safe_psql('postgres', q{SELECT CASE WHEN current_setting('server_version_num')::int >= 160000
                                              THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END});
my @holders;
for (1 .. 2)
{
	my ($out, $err) = ('', '');
	push @holders, IPC::Run::start(
		[ 'psql', '-X', '-d', $few->connstr('postgres'), '-c', "SET $in_worker = on",
		  '-c', "SELECT pg_sleep(300), 'holder'" ],
		'>', \$out, '2>', \$err);
	ok(DelayschedTest::poll_until($few,
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'}, scalar(@holders), 30),
		'a parallel worker holds a slot');
}

# Every slot is held: the probe of a new database finds none, and says so.
my $offset = -s $few->logfile;
fsql('postgres', 'CREATE DATABASE five');
$few->wait_for_log(qr/no background worker slot free to look for the extension in database "five"/, $offset);
ok(1, 'the log says a probe found no slot');
fsql('five', 'CREATE EXTENSION delaysched');
ok(DelayschedTest::poll_until($few,
	q{SELECT state || ':' || scanners_granted FROM sched.cluster WHERE database = 'five'}, 'waiting for budget:0', 30),
	'sched.cluster: the fifth database waits for budget');
$few->wait_for_log(qr/database "five" waits for a scanner: the budget is spent/, $offset);
ok(1, 'and the log says so');

# The budget back, the slots still held: the fifth database waits for a slot.
fsql('postgres', 'ALTER SYSTEM RESET delaysched.max_workers');
$few->reload;
ok(DelayschedTest::poll_until($few,
	q{SELECT state FROM sched.cluster WHERE database = 'five'}, 'waiting for a slot', 30),
	'sched.cluster: with the budget back, the fifth database waits for a slot');
$few->wait_for_log(qr/database "five" waits for a scanner: the server has no background worker slot free/, $offset);
ok(1, 'and the log says so');
is(fsql('postgres', $scanners_q), 'one:1 postgres:1 three:1 two:1', 'the others keep their scanner');

# The slots given back: the fifth database gets its scanner.
fsql('postgres', q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%''holder''%' AND pid <> pg_backend_pid()});
$_->finish for @holders;
ok(DelayschedTest::poll_until($few, $scanners_q, 'five:1 one:1 postgres:1 three:1 two:1', 60),
	'once the slots are free, the fifth database has its scanner')
  or diag(fsql('postgres', $scanners_q));
is(fsql('postgres', q{SELECT state FROM sched.cluster WHERE database = 'five'}), 'served', 'and is served');
$few->wait_for_log(qr/database "five" no longer waits for a scanner/, $offset);
ok(1, 'and the log says so');

$few->stop;
done_testing();
