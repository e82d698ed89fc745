# Moving between PostgreSQL majors with pg_dump: a database of an older
# major's server (DELAYSCHED_DUMP_FROM, the conninfo of a PostgreSQL 15
# server with delaysched preloaded that scripts/test.sh starts on the host),
# holding pending and cancelled tasks, a pull type's tasks, recurring
# schedules, a holiday calendar and per-type grants, its types paused so
# that the old server sends nothing, is dumped with this major's
# pg_dumpall --globals-only and pg_dump -Fc, and restored into a new server
# of this major in the documented way (doc/configuration.md: roles first,
# then pg_restore into an empty database, which the dump creates the
# extension in; then the types resumed).  Then every pending task is
# delivered once and never early, the cancelled one never, the schedules
# fire (each instant once) and compute the same firings with the holidays,
# the grants let their roles do what they did, and ids go on from the old
# sequence.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $from = $ENV{DELAYSCHED_DUMP_FROM};
DelayschedTest::skip_all('no older server to dump from (scripts/test.sh sets DELAYSCHED_DUMP_FROM)')
  unless $from;

my $node = DelayschedTest::new_node('newer');
my $major = $node->safe_psql('postgres', 'SHOW server_version_num') / 10000;
$major = int($major);
# Names of this run's own, so that runs for several majors can share the
# old server.
my $db = "shop_pg$major";
my ($app, $reader) = ("regress_app_pg$major", "regress_reader_pg$major");
my $dir = PostgreSQL::Test::Utils::tempdir;

# psql against the old server, as its superuser; dies on error.
sub old_sql
{
	my ($dbname, $sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'psql', '-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1', '-d', "$from dbname=$dbname" ],
		'<', \$sql, '>', \$out, '2>', \$err)
	  or die "psql on the old server failed: $err";
	chomp $out;
	return $out;
}

my $old_version = old_sql('postgres', 'SHOW server_version_num');
cmp_ok($old_version, '<', $major * 10000, "the old server is of an older major ($old_version)");

# --- the old database --------------------------------------------------------
old_sql('postgres', qq{
	DROP DATABASE IF EXISTS $db;
	DROP ROLE IF EXISTS $app;
	DROP ROLE IF EXISTS $reader;
	CREATE ROLE $app LOGIN;
	CREATE ROLE $reader LOGIN;
	CREATE DATABASE $db;
});
# Holidays on the next two weekdays, so that the workday schedule's next
# firings skip them.
my ($h1, $h2) = split /\n/, old_sql('postgres', q{
	SELECT d::date FROM generate_series(current_date + 1, current_date + 14, interval '1 day') AS d
	WHERE extract(isodow FROM d) < 6 ORDER BY d LIMIT 2});
old_sql($db, qq{
	CREATE EXTENSION delaysched;
	SELECT sched.define_biz('orders', ack_timeout => '1 hour', max_attempts => 5);
	SELECT sched.define_biz('inbox', 'pull', ack_timeout => '1 hour');
	SELECT sched.define_biz('ticks', ack_timeout => '1 hour');
	-- the move begins: the old server sends nothing more of these types
	SELECT count(sched.pause(name)) FROM sched.biz;
	SELECT sched.grant_biz('orders', '$app');
	SELECT sched.grant_biz('inbox', '$reader', 'consume');
	GRANT USAGE ON SCHEMA sched TO $app, $reader;
	GRANT EXECUTE ON FUNCTION sched.add(text, timestamptz, jsonb, text, text, interval, text, int) TO $app;
	GRANT EXECUTE ON FUNCTION sched.claim(text, int) TO $reader;
	-- 20 overdue, 20 due over the next seconds, one with a dedupe key, one cancelled
	SELECT count(sched.add('orders', now() - interval '1 hour' + i * interval '1 second',
						   jsonb_build_object('n', i))) FROM generate_series(1, 20) i;
	SELECT count(sched.add('orders', clock_timestamp() + interval '20 seconds' + i * interval '100 ms',
						   jsonb_build_object('n', i))) FROM generate_series(21, 40) i;
	SELECT sched.add('orders', now() - interval '1 minute', '{"n": 41}', dedupe_key => 'order-41');
	SELECT sched.cancel(sched.add('orders', now() - interval '1 minute', '{"cancelled": true}'));
	SELECT count(sched.add('inbox', now() - interval '1 minute', jsonb_build_object('p', i)))
	FROM generate_series(1, 3) i;
	INSERT INTO sched.holidays (calendar, day) VALUES ('shop', '$h1'), ('shop', '$h2');
	SELECT sched.define_schedule('every_second', 'ticks', '* * * * * *');
	SELECT sched.define_schedule('workdays', 'ticks', '{"unit": "workday", "at": "09:00", "calendar": "shop"}',
								 time_zone => 'Europe/Berlin');
});
my %pending = map { $_ => 1 } split /\n/, old_sql($db,
	q{SELECT id FROM sched.tasks WHERE biz_type = 'orders' AND state = 'pending'});
is(scalar keys %pending, 41, 'the old database holds 41 orders to deliver');
is(old_sql($db, q{SELECT count(*) FROM sched.tasks WHERE state = 'delivered'}), '0',
	'the old server delivered none of them');
my ($cancelled) = old_sql($db, q{SELECT id FROM sched.tasks WHERE state = 'cancelled'});
my $workdays_query = q{SELECT string_agg(t::text, ' ' ORDER BY t) FROM sched.next_runs(
	'{"unit": "workday", "at": "09:00", "calendar": "shop"}', 'Europe/Berlin', now(), 5) t};
my $old_workdays = old_sql($db, $workdays_query);
unlike($old_workdays, qr/\Q$h1\E 0[89]/, 'the old server skips the holiday');
my $grants_query = 'SELECT biz_type, role, privilege FROM sched.biz_grants ORDER BY 1, 2, 3';
my $old_grants = old_sql($db, $grants_query);
my $old_max_id = old_sql($db, 'SELECT max(id) FROM sched.tasks');
my $old_extversion = old_sql($db, "SELECT extversion FROM pg_extension WHERE extname = 'delaysched'");
my $old_workday_firing = old_sql($db, q{SELECT run_at FROM sched.tasks WHERE schedule = 'workdays' AND state = 'pending'});

# --- dump with this major's tools, restore into this major ------------------
my $globals = "$dir/globals.sql";
my $dump = "$dir/$db.dump";
$node->command_ok([ 'pg_dumpall', '--globals-only', '-d', $from, '-f', $globals ],
	"pg_dumpall $major --globals-only from the old server");
$node->command_ok([ 'pg_dump', '-Fc', '-d', "$from dbname=$db", '-f', $dump ],
	"pg_dump $major -Fc of the old database");
# Roles first (the one that exists already, the bootstrap superuser, is
# refused and left as it is), then an empty database, listened to before
# anything is in it, then the restore.
PostgreSQL::Test::Utils::run_log([ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-f', $globals ]);
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_roles WHERE rolname IN ('$app', '$reader')"), '2',
	'the roles are restored');
$node->safe_psql('postgres', "CREATE DATABASE $db");
my $listener = DelayschedTest::Listener->start($node, $db, ['--ack'], 'orders', 'ticks');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr($db), $dump ],
	'pg_restore into an empty database of the newer server');
is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'delaysched'"),
	$old_extversion, "the dump created the extension, at the version it had ($old_extversion)");
is($node->safe_psql($db, 'SELECT bool_and(paused) FROM sched.biz'), 't', 'the types came paused');
is($node->safe_psql($db, q{SELECT count(*) FROM sched.dedupe WHERE dedupe_key = 'order-41'}), '1',
	'the dedupe key came along');
$node->safe_psql($db, 'SELECT count(sched.resume(name)) FROM sched.biz');

# --- every pending task delivered once, never early; the cancelled never ----
my $deadline = time + 90;
my @orders;
do
{
	usleep(50_000);
	@orders = grep { $_->{channel} eq 'orders' } $listener->received;
} while (@orders < 41 && time < $deadline);
is(scalar @orders, 41, 'the newer server delivered the 41 pending orders');
my %seen;
$seen{ $_->{id} }++ for @orders;
is(scalar(grep { !$pending{$_} } keys %seen), 0, 'only tasks that were pending in the old database');
is(scalar(grep { $seen{$_} > 1 } keys %seen), 0, 'each once');
is(scalar(grep { $_->{late_us} < 0 } @orders), 0, 'none before its run_at');
ok(!$seen{$cancelled}, 'not the cancelled one');
ok(DelayschedTest::poll_until_in($node, $db,
	q{SELECT count(*) FROM sched.tasks WHERE biz_type = 'orders' AND state = 'done'}, '41', 30),
	'all acknowledged and done');

# --- schedules fire, each instant once; the holidays came along --------------
my @ticks;
$deadline = time + 60;
do
{
	usleep(50_000);
	@ticks = grep { $_->{channel} eq 'ticks' } $listener->received;
} while (@ticks < 4 && time < $deadline);
cmp_ok(scalar @ticks, '>=', 4, 'the per-second schedule fires on the newer server');
my @instants = map { $_->{run_at_us} } @ticks;
is(scalar(grep { $_ % 1_000_000 != 0 } @instants), 0, 'on whole seconds');
is(scalar(grep { $instants[$_] <= $instants[ $_ - 1 ] } 1 .. $#instants), 0, 'each instant once, in order');
is($node->safe_psql($db, $workdays_query), $old_workdays, 'the workday schedule computes the same firings');
is($node->safe_psql($db, q{SELECT run_at FROM sched.tasks WHERE schedule = 'workdays' AND state = 'pending'}),
	$old_workday_firing, 'and its pending firing is the one the old server made');

# --- grants hold; ids go on --------------------------------------------------
is($node->safe_psql($db, $grants_query), $old_grants, 'the per-type grants are restored');
my $new_id = $node->safe_psql($db, qq{
	SET ROLE $app;
	SELECT sched.add('orders', now() + interval '1 day', '{"new": true}')});
cmp_ok($new_id, '>', $old_max_id, "$app schedules on the newer server, and ids go on from the old sequence");
is($node->safe_psql($db, qq{
	SET ROLE $reader;
	SELECT count(*) FROM sched.claim('inbox', 10)}), '3', "$reader claims the three pull tasks");
my ($rc, $out, $err) = $node->psql($db, qq{SET ROLE $reader; SELECT sched.add('orders', now())});
like($err, qr/permission denied/, "$reader may still not schedule orders");

$listener->stop;
$node->stop;
old_sql('postgres', "DROP DATABASE $db");
done_testing();
