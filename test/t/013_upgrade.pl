# Upgrades to 0.3, by every path.  A database made with 0.1, holding pending
# tasks of every delivery kind, meets the 0.3 library (its workers wait,
# saying so once in the log, and never crash-loop), is updated with ALTER
# EXTENSION UPDATE (0.1 -> 0.2 -> 0.3), then delivers every task it held.
# A database made with 0.2, holding pending tasks and a schedule, is updated
# (0.2 -> 0.3) and keeps them.  Both then have exactly the schema of a fresh
# 0.3 install; roles granted at 0.1 or 0.2 keep what they were granted, and
# what PUBLIC was granted stays granted.
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

# A database at 0.1, as the released script made it.  The workers the DROP
# stops (scanners, HTTP and SQL workers; the launcher stops those that
# sleep with SIGTERM, which logs an exit code of 1) are reaped, and their
# exits logged, before the log is watched.
my $before_drop = -s $node->logfile;
my $workers = sql("SELECT count(*) FROM pg_stat_activity WHERE backend_type IN"
	  . " ('delaysched scanner', 'delaysched http', 'delaysched sql')");
sql('DROP EXTENSION delaysched');
my $reap_deadline = time + 30;
usleep(50_000)
  until (() = log_since($before_drop) =~ /"delaysched (?:scanner|http|sql)" \(PID \d+\) exited/g) >= $workers
  || time > $reap_deadline;
my $log_from = -s $node->logfile;
sql("CREATE EXTENSION delaysched VERSION '0.1'");
# Notify and pull types wait a backoff in 0.3 (a nack, a lease that ran out):
# the update gives the older types define_biz's defaults.
my $backoffs = q{SELECT count(*) || ' ' || count(*) FILTER (WHERE min_backoff = '1 second' AND max_backoff = '1 hour')
	FROM sched.biz WHERE delivery IN ('notify', 'pull')};

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

# The 0.3 library's workers wait for the update, and say so once.
my $deadline = time + 30;
usleep(100_000) until log_since($log_from) =~ /is at version 0\.1/ || time > $deadline;
like(log_since($log_from), qr/delaysched: the extension in database "postgres" is at version 0\.1, and this server's library needs 0\.3; its workers wait/,
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

# The update, in one step that runs the released 0.1 -> 0.2 script inside it
# (the step keeps what was granted: see the grants below).
is(sql("SELECT path FROM pg_extension_update_paths('delaysched') WHERE source = '0.1' AND target = '0.3'"),
	'0.1--0.3', 'an update from 0.1 goes to 0.3 in one step');
my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'up_notify');
sql('ALTER EXTENSION delaysched UPDATE');
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'delaysched'"), '0.3', 'updated to 0.3');
like(sql($backoffs), qr/^([1-9]\d*) \1$/, 'its notify and pull types have the default backoff');

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
is(DelayschedTest::claim_count($node, 'postgres', 'up_pull', 3), '3', 'the three pull tasks are claimed');
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

# From 0.2: a database holding pending tasks and a schedule, whose pending
# firing waits with them while the 0.3 library's workers wait (catch_up
# 'all', so that this firing is delivered, not skipped as stale).
sub sql02 { return $node->safe_psql('from02', $_[0]) }
$log_from = -s $node->logfile;
sql('CREATE DATABASE from02');
sql02("CREATE EXTENSION delaysched VERSION '0.2'");
sql02(q{
	SELECT sched.define_biz('v2_notify', ack_timeout => '1 hour');
	SELECT sched.define_biz('v2_pull', 'pull', ack_timeout => '1 hour');
	SELECT sched.add('v2_notify', now() + interval '1 second', jsonb_build_object('n', i)) FROM generate_series(1, 5) i;
	SELECT sched.add('v2_pull', now(), jsonb_build_object('p', i)) FROM generate_series(1, 3) i;
	SELECT sched.add('v2_notify', '2100-01-01', '{"far": true}');
	SELECT sched.define_schedule('v2_every', 'v2_notify', 'every 1 second', catch_up => 'all');
});
$deadline = time + 30;
usleep(100_000) until log_since($log_from) =~ /"from02" is at version 0\.2/ || time > $deadline;
like(log_since($log_from), qr/delaysched: the extension in database "from02" is at version 0\.2, and this server's library needs 0\.3; its workers wait/,
	'the workers of a 0.2 database wait for the update too');
my $far_id = sql02(q{SELECT id FROM sched.tasks WHERE payload = '{"far": true}'});
my $firing_id = sql02(q{SELECT task_id FROM sched.schedule WHERE name = 'v2_every'});
is(sql02("SELECT count(*) FROM sched.tasks WHERE state = 'pending'"), '10',
	'nothing was delivered while the 0.2 database waited (five, three, the far one and the firing)');

my $listener02 = DelayschedTest::Listener->start($node, 'from02', ['--ack'], 'v2_notify');
sql02('ALTER EXTENSION delaysched UPDATE');
is(sql02("SELECT extversion FROM pg_extension WHERE extname = 'delaysched'"), '0.3', 'updated from 0.2 to 0.3');
like(sql02($backoffs), qr/^([1-9]\d*) \1$/, 'the 0.2 notify and pull types have the default backoff');
my @got02;
$deadline = time + 30;
while (time < $deadline)
{
	@got02 = $listener02->received;
	last if (grep { !defined $_->{message}{schedule} } @got02) >= 5
	  && (grep { ($_->{message}{schedule} // '') eq 'v2_every' } @got02) >= 2;
	usleep(50_000);
}
my @plain02 = grep { !defined $_->{message}{schedule} } @got02;
my %n02 = map { $_->{message}{payload}{n} => 1 } @plain02;
is(scalar @plain02, 5, 'the five pending notify tasks of the 0.2 database arrived');
is(scalar keys %n02, 5, 'each once');
my @fired02 = grep { ($_->{message}{schedule} // '') eq 'v2_every' } @got02;
cmp_ok(scalar @fired02, '>=', 2, 'its schedule fires after the update');
is(scalar(grep { $_->{id} == $firing_id } @fired02), 1, 'the firing it made at 0.2 among them, once');
is(DelayschedTest::claim_count($node, 'from02', 'v2_pull', 3), '3', 'its three pull tasks are claimed');
is(sql02("SELECT id FROM sched.tasks WHERE payload = '{\"far\": true}' AND state = 'pending'"), $far_id,
	'its task far ahead still waits, with its id');
is(scalar(grep { $_->{late_us} < 0 } @got02), 0, 'nothing early');
sql02("SELECT sched.drop_schedule('v2_every')");
$listener02->stop;

# The schema: a fresh 0.3 install in another database, dumped the same way
# as the two updated ones.  pg_dump leaves out an extension's objects, so
# the databases first forget which objects belong to it.
# A third path, through 0.2 by hand: the released update to 0.2, then the
# update from 0.2.
sql('CREATE DATABASE via02');
$node->safe_psql('via02', "CREATE EXTENSION delaysched VERSION '0.1'");
$node->safe_psql('via02', "ALTER EXTENSION delaysched UPDATE TO '0.2'");
$node->safe_psql('via02', 'ALTER EXTENSION delaysched UPDATE');
is($node->safe_psql('via02', "SELECT extversion FROM pg_extension WHERE extname = 'delaysched'"), '0.3',
	'updated from 0.1 to 0.2, then to 0.3');
sql('CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION delaysched');
my %dump;
for my $db (qw(postgres from02 via02 fresh))
{
	$node->safe_psql($db, q{
		SET allow_system_table_mods = on;
		DELETE FROM pg_depend WHERE deptype = 'e' AND refclassid = 'pg_extension'::regclass
		  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'delaysched')});
	my ($out, $err) = run_command([ 'pg_dump', '--schema-only', '--no-owner', '-d', $node->connstr($db) ]);
	# (pg_dump's \restrict lines carry a random key of each run.)
	$dump{$db} = [ grep { !/^\\(un)?restrict / } split /\n/, $out ];
}
cmp_ok(scalar @{ $dump{fresh} }, '>', 500, 'the fresh schema was dumped');
ok((grep { /^CREATE TABLE sched\.schedule / } @{ $dump{fresh} }), 'the dump holds the extension\'s objects');
for my $path ([ 'postgres', '0.1 -> 0.3' ], [ 'via02', '0.1 -> 0.2 -> 0.3' ], [ 'from02', '0.2 -> 0.3' ])
{
	my ($db, $how) = @$path;
	my @updated = @{ $dump{$db} };
	my @fresh = @{ $dump{fresh} };
	ok(join("\n", @updated) eq join("\n", @fresh), "the schema updated $how is identical to a fresh 0.3 install");
	next if join("\n", @updated) eq join("\n", @fresh);
	my %f = map { $_ => 1 } @fresh;
	my %u = map { $_ => 1 } @updated;
	diag("only in the updated ($how): $_") for grep { !$f{$_} } @updated;
	diag("only in the fresh: $_") for grep { !$u{$_} } @fresh;
}

# A role granted at 0.1 what reading sched.biz_stats and sched.tasks took
# (the views, and EXECUTE on sched._tokens) still reads them after the
# update, which grants it the functions the views now call too.  A consumer
# granted sched.claim and an administrator's helper granted
# sched.define_biz, which the released 0.1 -> 0.2 script drops and makes
# again (with other arguments), keep them; and so does a dump of the
# database, which would leave them out were they recorded as the
# extension's own.  (In a database of its own: the update's grants become
# the extension's initial privileges, which would show in the dump
# compared above.)
$node->safe_psql('postgres', 'CREATE DATABASE up_grants; CREATE ROLE up_monitor; CREATE ROLE up_consumer; CREATE ROLE up_definer');
$node->safe_psql('up_grants', q{
	CREATE EXTENSION delaysched VERSION '0.1';
	SELECT sched.define_biz('up_pull', 'pull');
	GRANT USAGE ON SCHEMA sched TO up_monitor, up_consumer, up_definer;
	GRANT SELECT ON sched.biz_stats, sched.tasks TO up_monitor;
	GRANT EXECUTE ON FUNCTION sched._tokens(text, float8, int) TO up_monitor;
	GRANT EXECUTE ON FUNCTION sched.claim(text, int), sched.ack(bigint) TO up_consumer;
	GRANT EXECUTE ON FUNCTION sched.define_biz TO up_definer;
});
my $define_biz_01 = $node->safe_psql('up_grants', "SELECT 'sched.define_biz'::regproc::regprocedure");
$node->safe_psql('up_grants', q{
	ALTER EXTENSION delaysched UPDATE;
	SELECT sched.grant_biz('up_pull', 'up_monitor', 'read');
	SELECT sched.grant_biz('up_pull', 'up_consumer', 'consume');
});
is($node->safe_psql('up_grants', "SET ROLE up_monitor; SELECT biz_type || ' ' || pending FROM sched.biz_stats"),
	'up_pull 0', 'a role that read sched.biz_stats at 0.1 still does');
is($node->safe_psql('up_grants', "SET ROLE up_monitor; SELECT count(status) FROM sched.tasks"),
	'0', 'and sched.tasks, with its status column');
$node->safe_psql('up_grants', q{SELECT sched.add('up_pull', now() - interval '1 second', '{"for": "up_consumer"}')});
isnt($node->safe_psql('up_grants', "SELECT 'sched.define_biz'::regproc::regprocedure"), $define_biz_01,
	'(sched.define_biz has other arguments since 0.1)');
ok(DelayschedTest::poll_until_in($node, 'up_grants',
	"SET ROLE up_consumer; SELECT payload FROM sched.claim('up_pull')", '{"for": "up_consumer"}', 30),
	'a consumer granted sched.claim at 0.1 still claims');
is($node->safe_psql('up_grants', q{
	SELECT has_function_privilege('up_consumer', 'sched.ack(bigint)', 'EXECUTE'),
		   has_function_privilege('up_definer', 'sched.define_biz'::regproc, 'EXECUTE')}),
	't|t', 'and acknowledges; the grant on sched.define_biz went to its new arguments');
my ($grants_dump) = run_command([ 'pg_dump', '--schema-only', '-d', $node->connstr('up_grants') ]);
like($grants_dump, qr/^GRANT ALL ON FUNCTION sched\.claim\(biz_type text, max_tasks integer\) TO up_consumer;$/m,
	'a dump keeps the grant on sched.claim');
like($grants_dump, qr/^GRANT ALL ON FUNCTION sched\.define_biz\(.*\) TO up_definer;$/m,
	'and the one on sched.define_biz');
$node->safe_psql('postgres', 'DROP DATABASE up_grants; DROP ROLE up_monitor, up_consumer, up_definer');

# A role granted at 0.2 a type's tasks (to read and to consume), the view
# and the function it uses, keeps them after the update; so does PUBLIC,
# which an administrator let preview schedule rules.  What the update
# creates is not PUBLIC's: a role granted nothing executes the same
# functions as before it, and the internal ones the views call (which need
# no grant since 0.3: they answer only what the views would).
$node->safe_psql('postgres', 'CREATE DATABASE grants02; CREATE ROLE g02_worker; CREATE ROLE g02_nobody');
sub public_functions
{
	return $node->safe_psql('grants02', q{
		SELECT string_agg(p.proname, ',' ORDER BY p.proname) FROM pg_proc p
		WHERE p.pronamespace = 'sched'::regnamespace AND has_function_privilege('g02_nobody', p.oid, 'EXECUTE')});
}
$node->safe_psql('grants02', q{
	CREATE EXTENSION delaysched VERSION '0.2';
	SELECT sched.define_biz('g02_pull', 'pull');
	SELECT sched.add('g02_pull', now() + interval '1 hour', '{"kept": true}');
	SELECT sched.add('g02_pull', now() - interval '1 second', '{"due": true}');
	GRANT USAGE ON SCHEMA sched TO g02_worker, g02_nobody;
	SELECT sched.grant_biz('g02_pull', 'g02_worker', 'read');
	SELECT sched.grant_biz('g02_pull', 'g02_worker', 'consume');
	GRANT SELECT ON sched.tasks TO g02_worker;
	GRANT EXECUTE ON FUNCTION sched._task_status TO g02_worker;
	GRANT EXECUTE ON FUNCTION sched.claim(text, int) TO g02_worker;
	GRANT EXECUTE ON FUNCTION sched.next_runs(text, text, timestamptz, int, timestamptz) TO PUBLIC;
	GRANT EXECUTE ON FUNCTION sched.drop_schedule(text), sched.pause_schedule(text), sched.resume_schedule(text)
		TO g02_worker;
});
my $public_at_02 = public_functions();
$node->safe_psql('grants02', 'ALTER EXTENSION delaysched UPDATE');
is($node->safe_psql('grants02', "SET ROLE g02_worker; SELECT count(*) FROM sched.tasks WHERE biz_type = 'g02_pull'"),
	'2', 'a role that read a type\'s tasks at 0.2 still does');
# (A claim skips a task a scanner's tick holds that moment: poll.)
ok(DelayschedTest::poll_until_in($node, 'grants02',
	"SET ROLE g02_worker; SELECT payload FROM sched.claim('g02_pull')", '{"due": true}', 30),
	'and still consumes them');
is($node->safe_psql('grants02', "SELECT count(*) FROM sched.biz_grant"), '2', 'its grants on the type are kept');
is($node->safe_psql('grants02', q{
	SELECT string_agg(p.oid::regprocedure::text, ' ' ORDER BY p.proname) FROM pg_proc p
	WHERE p.pronamespace = 'sched'::regnamespace AND p.proname LIKE '%\\_schedule'
	  AND has_function_privilege('g02_worker', p.oid, 'EXECUTE')}),
	'sched.drop_schedule(text,text) sched.pause_schedule(text,text) sched.resume_schedule(text,text)',
	'the grants on drop, pause and resume_schedule (text) went to their (text, text), which name the type too');
is($node->safe_psql('grants02', "SET ROLE g02_nobody; SELECT count(*) FROM sched.next_runs('every 1 hour', n => 3)"),
	'3', 'what PUBLIC was granted at 0.2 stays granted');
is(public_functions(), '_caller,_cluster,_consumer_cap,_task_status,_tokens,_type_counts,_workers,next_runs',
	'PUBLIC executes no function the update made but those the views call');
is($public_at_02, '_caller,next_runs', '(the function the views call, and the one granted)');
$node->safe_psql('postgres', 'DROP DATABASE grants02; DROP ROLE g02_worker; DROP ROLE g02_nobody');

$node->stop;
done_testing();
