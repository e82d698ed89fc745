# Upgrade from 0.1: a database made with 0.1, holding pending tasks of every
# delivery kind, meets the 0.2 library (its workers wait, saying so once in
# the log, and never crash-loop), is updated with ALTER EXTENSION UPDATE,
# then has exactly the schema of a fresh 0.2 install and delivers every
# task it held.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# The workers look for the updated extension every 200 ms instead of every
# 10 s (a developer option), so that "said once" is said over many looks.
my $node = DelayschedTest::new_node('upgrade',
	extra_conf => "delaysched.http_workers = 1\nlog_min_messages = log\n"
	  . "delaysched.extension_recheck_interval = '200ms'\n");
my $receiver = DelayschedTest::Receiver->start(PostgreSQL::Test::Utils::tempdir);
my $base = $receiver->url;

sub sql { return $node->safe_psql('postgres', $_[0]) }

# The server log from offset $from on.
sub log_since
{
	my ($from) = @_;
	return substr(PostgreSQL::Test::Utils::slurp_file($node->logfile), $from);
}

# A database at 0.1, as the released script made it.  The scanners the
# DROP stops are reaped, and their exits logged, before the log is watched.
my $before_drop = -s $node->logfile;
my $scanners = sql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'delaysched scanner'");
sql('DROP EXTENSION delaysched');
my $reap_deadline = time + 30;
usleep(50_000)
  until (() = log_since($before_drop) =~ /"delaysched scanner" \(PID \d+\) exited/g) >= $scanners
  || time > $reap_deadline;
my $log_from = -s $node->logfile;
sql("CREATE EXTENSION delaysched VERSION '0.1'");
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'delaysched'"), '0.1', 'installed at 0.1');

# Pending tasks of every delivery kind: due now, due in two seconds, and
# far ahead.
sql(qq{
	SELECT sched.define_biz('up_notify', ack_timeout => '1 hour');
	SELECT sched.define_biz('up_pull', 'pull', ack_timeout => '1 hour');
	SELECT sched.define_biz('up_http', 'http', url => '$base/ok/up');
	SELECT sched.add('up_notify', now(), jsonb_build_object('n', i)) FROM generate_series(1, 5) i;
	SELECT sched.add('up_notify', now() + interval '2 seconds', jsonb_build_object('n', i)) FROM generate_series(6, 10) i;
	SELECT sched.add('up_pull', now(), jsonb_build_object('p', i)) FROM generate_series(1, 3) i;
	SELECT sched.add('up_http', now(), jsonb_build_object('h', i)) FROM generate_series(1, 3) i;
	SELECT sched.add('up_notify', '2100-01-01', '{"far": true}');
});

# The 0.2 library's workers wait for the update, and say so once.
my $deadline = time + 30;
usleep(100_000) until log_since($log_from) =~ /is at version 0\.1/ || time > $deadline;
like(log_since($log_from), qr/delaysched: the extension in database "postgres" is at version 0\.1, and this server's library needs 0\.2; its workers wait/,
	'the workers say in the log that they wait for the update');
# Give them time to misbehave: two more seconds (ten looks each), in which
# the tasks due in two seconds fall due.  (The scenario, not a
# synchronisation.)
sleep 2;
my $waiting_log = log_since($log_from);
my @said = ($waiting_log =~ /its workers wait/g);
is(scalar @said, 1, 'said once, not once per look');
unlike($waiting_log, qr/(exited with exit code|terminated by signal)/, 'no worker died on the old schema');
is(sql("SELECT count(*) FROM sched.tasks WHERE state = 'pending'"), '17', 'nothing was delivered on the old schema');

# The update.
my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'up_notify');
sql('ALTER EXTENSION delaysched UPDATE');
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'delaysched'"), '0.2', 'updated to 0.2');

# Every pending task is delivered, each once.
my @notified = $listener->wait_for(10, 30);
is(scalar @notified, 10, 'the ten due notify tasks arrived');
my %ns = map { $_->{message}{payload}{n} => 1 } @notified;
is(scalar keys %ns, 10, 'each once');
my @posted = $receiver->wait_requests('/ok/up', 3, 30);
is(scalar @posted, 3, 'the three http tasks were POSTed');
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM sched.tasks WHERE biz_type = 'up_http' AND state = 'done'", '3', 30),
	'and are done');
is(sql("SELECT count(*) FROM sched.claim('up_pull')"), '3', 'the three pull tasks are claimed');
is(sql("SELECT count(*) FROM sched.tasks WHERE payload = '{\"far\": true}' AND state = 'pending'"), '1',
	'the task far ahead still waits');
is(scalar(grep { $_->{late_us} < 0 } @notified), 0, 'nothing early');

# The statistics: counted once the workers run on the new schema, and then
# kept.
ok(DelayschedTest::poll_until($node,
	"SELECT bool_and(counted) FROM sched._type_counts('{up_notify}')", 't', 30),
	'the task gauges are counted after the update');
ok(DelayschedTest::poll_until($node, q{
	SELECT count(*) FROM (
		(SELECT biz_type, pending, ready, delivered, done, dead, cancelled
		 FROM sched._type_counts(ARRAY(SELECT biz_type FROM sched._task_counts))
		 EXCEPT SELECT biz_type, pending, ready, delivered, done, dead, cancelled FROM sched._task_counts)
		UNION ALL
		(SELECT biz_type, pending, ready, delivered, done, dead, cancelled FROM sched._task_counts
		 EXCEPT SELECT biz_type, pending, ready, delivered, done, dead, cancelled
		 FROM sched._type_counts(ARRAY(SELECT biz_type FROM sched._task_counts)))) differ}, '0', 30),
	'and say what the tables say (once the listener\'s acknowledgements are in)');

# Schedules work in the updated database.
sql("SELECT sched.define_schedule('up_every', 'up_notify', 'every 1 second')");
my @fired;
$deadline = time + 30;
while (time < $deadline)
{
	@fired = grep { ($_->{message}{schedule} // '') eq 'up_every' } $listener->received;
	last if @fired >= 2;
	usleep(50_000);
}
cmp_ok(scalar @fired, '>=', 2, 'a schedule fires in the updated database');
sql("SELECT sched.drop_schedule('up_every')");
$listener->stop;
$receiver->stop;

# The schema: a fresh 0.2 install in another database, dumped the same way.
# pg_dump leaves out an extension's objects, so both databases first forget
# which objects belong to it.
sql('CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION delaysched');
my %dump;
for my $db (qw(postgres fresh))
{
	$node->safe_psql($db, q{
		SET allow_system_table_mods = on;
		DELETE FROM pg_depend WHERE deptype = 'e' AND refclassid = 'pg_extension'::regclass
		  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'delaysched')});
	my ($out, $err) = run_command([ 'pg_dump', '--schema-only', '--no-owner', '-d', $node->connstr($db) ]);
	$dump{$db} = $out;
}
cmp_ok(length $dump{fresh}, '>', 10000, 'the fresh schema was dumped');
like($dump{fresh}, qr/CREATE TABLE sched\.schedule /, 'the dump holds the extension\'s objects');
# (pg_dump's \restrict lines carry a random key of each run.)
my @updated = grep { !/^\\(un)?restrict / } split /\n/, $dump{postgres};
my @fresh = grep { !/^\\(un)?restrict / } split /\n/, $dump{fresh};
ok(join("\n", @updated) eq join("\n", @fresh), 'the updated schema is identical to a fresh 0.2 install');
if (join("\n", @updated) ne join("\n", @fresh))
{
	my %f = map { $_ => 1 } @fresh;
	my %u = map { $_ => 1 } @updated;
	diag("only in the updated: $_") for grep { !$f{$_} } @updated;
	diag("only in the fresh: $_") for grep { !$u{$_} } @fresh;
}

# A role granted at 0.1 what reading sched.biz_stats and sched.tasks took
# (the views, and EXECUTE on sched._tokens) still reads them after the
# update, which grants it the functions the views now call too.  (In a database of its own: the
# update's grants become the extension's initial privileges, which would
# show in the dump compared above.)
$node->safe_psql('postgres', 'CREATE DATABASE up_grants; CREATE ROLE up_monitor');
$node->safe_psql('up_grants', q{
	CREATE EXTENSION delaysched VERSION '0.1';
	SELECT sched.define_biz('up_pull', 'pull');
	GRANT USAGE ON SCHEMA sched TO up_monitor;
	GRANT SELECT ON sched.biz_stats, sched.tasks TO up_monitor;
	GRANT EXECUTE ON FUNCTION sched._tokens(text, float8, int) TO up_monitor;
	ALTER EXTENSION delaysched UPDATE;
	SELECT sched.grant_biz('up_pull', 'up_monitor', 'read');
});
is($node->safe_psql('up_grants', "SET ROLE up_monitor; SELECT biz_type || ' ' || pending FROM sched.biz_stats"),
	'up_pull 0', 'a role that read sched.biz_stats at 0.1 still does');
is($node->safe_psql('up_grants', "SET ROLE up_monitor; SELECT count(status) FROM sched.tasks"),
	'0', 'and sched.tasks, with its status column');
$node->safe_psql('postgres', 'DROP DATABASE up_grants; DROP ROLE up_monitor');

$node->stop;
done_testing();
