# The library must be preloaded; only the databases configured are served
# (delaysched.databases, or the deprecated delaysched.database).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
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

# Preloaded, serving database "postgres" only (by the deprecated name of
# the setting): another database refuses tasks that would never be
# delivered, and has no worker.
my $node = DelayschedTest::new_node('served', extra_conf => "delaysched.database = 'postgres'");
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', "CREATE EXTENSION delaysched; SELECT sched.define_biz('x')");
($ret, $out, $err) = $node->psql('other',
	"SELECT sched.add('x', now() + interval '1 minute')");
isnt($ret, 0, 'sched.add refuses in a database the workers do not serve');
like($err, qr/delaysched does not deliver tasks of database "other"/, 'the error names the database');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE datname = 'other' AND backend_type LIKE 'delaysched%'"),
	'0', 'and no worker connects to it');
like(slurp_file($node->logfile), qr/delaysched.database is deprecated: use delaysched.databases/,
	'the log says the old name is deprecated');

# The scanner runs in the served database and says so.
ok(DelayschedTest::poll_until($node,
	"SELECT string_agg(DISTINCT role || ' ' || state, ',') FROM sched.workers WHERE role = 'scanner'", 'scanner sleeping', 10),
	'the scanner workers are running and idle');
is($node->safe_psql('postgres',
	"SELECT string_agg(datname, ',') FROM pg_stat_activity WHERE backend_type = 'delaysched scanner'"),
	'postgres,postgres', 'both scanner workers are connected to the database served');

# delaysched.databases, changed with a reload, serves the other database too.
$node->safe_psql('postgres', "ALTER SYSTEM SET delaysched.databases = 'postgres, other'");
$node->reload;
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM pg_stat_activity WHERE datname = 'other' AND backend_type = 'delaysched scanner'", '2', 15),
	'a reload that lists another database starts its workers');
$node->safe_psql('other', "SELECT sched.add('x', now() + interval '1 minute')");
pass('and sched.add accepts its tasks');
$node->safe_psql('postgres', "ALTER SYSTEM SET delaysched.databases = 'postgres'");
$node->reload;
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM pg_stat_activity WHERE datname = 'other' AND backend_type LIKE 'delaysched%'", '0', 15),
	'a reload that no longer lists it stops them');

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

# Dropping the extension under the running scanners, then creating it
# again: the scanners leave, and come back for the new installation.
$node->safe_psql('postgres', 'DROP EXTENSION delaysched');
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM pg_stat_activity WHERE datname = 'postgres' AND backend_type = 'delaysched scanner'",
	'0', 10), 'the scanner workers leave after DROP EXTENSION');
$node->safe_psql('postgres', "CREATE EXTENSION delaysched; SELECT sched.define_biz('again', delivery => 'pull')");
my $listener = DelayschedTest::Listener->start($node, 'postgres', [], 'again');
$node->safe_psql('postgres', "SELECT sched.add('again', clock_timestamp())");
my @got = $listener->wait_for(1, 30);
is(scalar @got, 1, 'a recreated extension is served at once');
$listener->stop;

$node->stop;
done_testing();
