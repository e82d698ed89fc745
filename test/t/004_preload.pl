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
	"SELECT string_agg(DISTINCT role || ' ' || state, ',') FROM sched.workers WHERE role = 'scanner'", 'scanner sleeping', 10),
	'the scanner workers are running and idle');
is($node->safe_psql('postgres',
	"SELECT string_agg(datname, ',') FROM pg_stat_activity WHERE backend_type = 'delaysched scanner'"),
	'postgres,postgres', 'both scanner workers are connected to delaysched.database');

# Database defaults do not reach the scanner's transactions: with REPEATABLE
# READ as the database default and claims racing it, the scanner neither
# fails with serialisation errors nor restarts.
$node->safe_psql('postgres',
	"ALTER DATABASE postgres SET default_transaction_isolation = 'repeatable read'");
$node->restart;
$node->safe_psql('postgres', "SELECT sched.define_biz('racy', delivery => 'pull')");
ok(DelayschedTest::poll_until($node, "SELECT string_agg(DISTINCT state, ',') FROM sched.workers WHERE role = 'scanner'", 'sleeping', 10),
	'scanner workers up after the restart');
my $pids = "SELECT string_agg(pid::text, ',' ORDER BY worker) FROM sched.workers WHERE role = 'scanner'";
my $scanner_pid = $node->safe_psql('postgres', $pids);
my $script = $node->basedir . '/racy.sql';
open my $fh, '>', $script or die $!;
print $fh "SELECT sched.add_after('racy', '0'); SELECT count(*) FROM sched.claim('racy', 5);\n";
close $fh;
$node->command_ok([ 'pgbench', '-n', '-c', '2', '-j', '2', '-T', '3', '-f', $script,
	'-d', $node->connstr('postgres') ], 'adds and claims raced the scanner');
is($node->safe_psql('postgres', $pids), $scanner_pid,
	'the workers survived: no serialisation failure restarted them');
$node->safe_psql('postgres', 'ALTER DATABASE postgres RESET default_transaction_isolation');

# Dropping the extension under the running scanner, then creating it again:
# the scanner waits, then serves the new installation.
$node->safe_psql('postgres', 'DROP EXTENSION delaysched');
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'delaysched scanner' AND state = 'idle'",
	'2', 10), 'the scanner workers outlive DROP EXTENSION');
$node->safe_psql('postgres', "CREATE EXTENSION delaysched; SELECT sched.define_biz('again', delivery => 'pull')");
my $listener = DelayschedTest::Listener->start($node, 'postgres', [], 'again');
$node->safe_psql('postgres', "SELECT sched.add('again', clock_timestamp())");
my @got = $listener->wait_for(1, 30);
is(scalar @got, 1, 'a recreated extension is served at once');
$listener->stop;

$node->stop;
done_testing();
