# Databases that come and go, and a restart with few worker slots.
#
# A database created while the server runs is probed before its CREATE
# EXTENSION and found empty; once served, released (connections
# disallowed, made a template, or taken out of delaysched.databases) and
# then allowed again, it is served again, as a database found at startup
# would be.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
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
done_testing();
