# The library must be preloaded; only the configured database is served.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Cluster;
use Test::More;

# Not in shared_preload_libraries: a clear refusal, nothing half-installed.
my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init;
$plain->start;
my ($ret, $out, $err) = $plain->psql('postgres', 'CREATE EXTENSION delaysched');
isnt($ret, 0, 'CREATE EXTENSION fails without preloading');
like($err, qr/delaysched must be loaded via "shared_preload_libraries"/, 'the error says why');
like($err, qr/HINT:  Add delaysched to shared_preload_libraries/, 'and hints at the fix');
is($plain->safe_psql('postgres', "SELECT count(*) FROM pg_namespace WHERE nspname = 'sched'"),
	'0', 'no schema left behind');
$plain->stop;

# Preloaded, serving database "postgres": another database refuses tasks
# that would never be delivered.
my $node = DelayschedTest::new_node('served');
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', "CREATE EXTENSION delaysched; SELECT sched.define_biz('x')");
($ret, $out, $err) = $node->psql('other',
	"SELECT sched.add('x', now() + interval '1 minute')");
isnt($ret, 0, 'sched.add refuses in a database the workers do not serve');
like($err, qr/delaysched does not deliver tasks of database "other"/, 'the error names the database');

# The scanner runs in the served database and says so.
ok(DelayschedTest::poll_until($node,
	"SELECT role || ' ' || state FROM sched.workers", 'scanner sleeping', 10),
	'the scanner is running and idle');
is($node->safe_psql('postgres',
	"SELECT datname FROM pg_stat_activity WHERE backend_type = 'delaysched scanner'"),
	'postgres', 'the scanner is connected to delaysched.database');

# Dropping the extension under the running scanner, then creating it again:
# the scanner waits, then serves the new installation.
$node->safe_psql('postgres', 'DROP EXTENSION delaysched');
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'delaysched scanner' AND state = 'idle'",
	'1', 10), 'the scanner outlives DROP EXTENSION');
$node->safe_psql('postgres', "CREATE EXTENSION delaysched; SELECT sched.define_biz('again', delivery => 'pull')");
my $listener = DelayschedTest::Listener->start($node, 'postgres', [], 'again');
$node->safe_psql('postgres', "SELECT sched.add('again', clock_timestamp())");
my @got = $listener->wait_for(1, 30);
is(scalar @got, 1, 'a recreated extension is served at once');
$listener->stop;

$node->stop;
done_testing();
