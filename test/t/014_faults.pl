# Faults (issue 15): what the workers and the store do when the world around
# them misbehaves.
#
#   (a) LISTENers that never read (one idle, one idle in a transaction) while
#       200,000 tasks fall due: a healthy listener still gets every task,
#       nothing is lost, the server answers, no worker restarts;
#   (b) database defaults that make a worker's transactions fail:
#       statement_timeout, default_transaction_read_only, lock_timeout (with a
#       lock held on the extension's table): the workers do not restart every
#       second, and everything due is delivered, during the fault where the
#       documentation says the defaults do not apply to a tick
#       (internals.md), and after RESET in any case;
#   (c) consumers that cannot handle a task: a claim never acknowledged, a
#       consumer that disconnects on a payload, a payload too large for a
#       NOTIFY, a consumer listening on the wrong channel, a consumer whose
#       transaction fails after its ack: the task comes back as documented
#       (tasks.md: leases and redelivery, dead tasks, sched.retry).
#
# Every wait is a poll with a deadline.  The only fixed waits are the length
# of a fault itself (how long a lock is held).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use IPC::Run;
use Encode ();
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# The faults below are database defaults for database postgres.  The test's
# own sessions (psql, the LISTEN clients) must not suffer them: libpq passes
# these options to every session this process starts.  The background workers
# are started by the postmaster and do not see them.
$ENV{PGOPTIONS} = '-c statement_timeout=0 -c lock_timeout=0 -c default_transaction_read_only=off';

# (The full sweep every 2 s, not every minute: a lease granted by a claim
# that commits after the lease ran out, on a busy machine, is found only by
# it (src/core/sweep.c), and the checks below wait 30 s.  A developer option.)
my $node = DelayschedTest::new_node('faults',
	extra_conf => "delaysched.sweep_interval = '200ms'\ndelaysched.batch_size = 5000\ndelaysched.full_sweep_interval = '2s'");

# One statement (or a few) in a session of the test's own.
sub sql { return $node->safe_psql('postgres', $_[0]) }

# Worker restarts logged since $offset: the postmaster logs every exit of a
# delaysched worker ("exited with exit code 1" after an error, "terminated
# by signal" after a crash).
sub worker_exits
{
	my ($offset) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my @exits = $log =~ /background worker "delaysched [^"]*" \(PID \d+\) (?:exited with exit code|was terminated by signal)/g;
	return scalar @exits;
}

sub log_position { return -s $node->logfile }

# The pids of the running workers, as one string (to see restarts).
sub worker_pids
{
	return sql("SELECT string_agg(coalesce(pid::text, '-'), ',' ORDER BY worker) FROM sched.workers");
}

# Wait until every worker (scanners and the HTTP worker) runs and has ticked.
sub wait_workers
{
	return DelayschedTest::poll_until($node,
		"SELECT bool_and(pid IS NOT NULL AND state <> 'stopped') FROM sched.workers", 't', 30);
}

# Lines in $file (0 if it does not exist yet).
sub file_lines
{
	my ($file) = @_;
	open my $fh, '<', $file or return 0;
	my ($lines, $buf) = (0, '');
	$lines += ($buf =~ tr/\n//) while read($fh, $buf, 1 << 20);
	close $fh;
	return $lines;
}

# Wait until $file has $count lines or $timeout seconds pass; the count.
sub wait_file_lines
{
	my ($file, $count, $timeout) = @_;
	my $deadline = time + $timeout;
	my $n = file_lines($file);
	while ($n < $count && time < $deadline)
	{
		usleep(50_000);
		$n = file_lines($file);
	}
	return $n;
}

# The ids and attempts of the notifications in $file (after its first line,
# "listening"): { id => [ attempts ] }.
sub file_ids
{
	my ($file) = @_;
	open my $fh, '<', $file or die "$file: $!";
	my %ids;
	while (my $line = <$fh>)
	{
		push @{ $ids{$1} }, $2 if $line =~ /"id" : (\d+),.*"attempt" : (\d+)/;
	}
	close $fh;
	return \%ids;
}

ok(wait_workers(), 'the workers run');

###########################################################################
# (a) 200,000 tasks while two listeners never read
###########################################################################
sql("SELECT sched.define_biz('burst', ack_timeout => '10 minutes')");

# A healthy listener that prints every notification (acks are made below in
# bulk, so that the test does not spend minutes on 200,000 single acks).  It
# writes to a file, read here without decoding JSON: a Perl reader that
# parses 200,000 lines through a pipe falls behind, and a dslisten blocked on
# its stdout would stop reading its socket and become a stuck listener itself.
my $good_file = $node->basedir . '/good.out';
my $good = IPC::Run::start([ $ENV{DSLISTEN} // 'test/dslisten', $node->connstr('postgres'), 'burst' ],
	'<', \undef, '>', $good_file, '2>', $node->basedir . '/good.err');
ok(wait_file_lines($good_file, 1, 30) >= 1, 'the healthy listener is listening');

# Stuck listener 1: LISTENs, then its client never reads the socket again
# (psql waits on a stdin that never brings anything).
# Stuck listener 2: LISTENs and stays idle in a transaction, which holds the
# tail of the notification queue.
# Each prints its backend pid first, to be found again below.
my @stuck;
for my $script ("LISTEN burst;\nSELECT pg_backend_pid();\n",
	"LISTEN burst;\nSELECT pg_backend_pid();\nBEGIN;\nSELECT 1;\n")
{
	my $s = { in => $script . "\\echo stuck\n", out => '' };
	$s->{harness} = IPC::Run::start([ 'psql', '-X', '-q', '-At', '-d', $node->connstr('postgres') ],
		'<', \$s->{in}, '>', \$s->{out}, '2>', \$s->{out});
	my $deadline = time + 30;
	while ($s->{out} !~ /^stuck$/m && time < $deadline)
	{
		$s->{harness}->pump_nb;
		usleep(10_000);
	}
	like($s->{out}, qr/\A\d+\n(?:1\n)?stuck\n/, 'a listener that will never read is in place');
	($s->{pid}) = $s->{out} =~ /^(\d+)$/m;
	push @stuck, $s;
}

my $pos = log_position();
my $pids = worker_pids();
my $n = DelayschedTest::scaled(200_000);	# fewer on later majors: scripts/test.sh
# 200,000 tasks (or $n) due within 0.2 s of each other, 3 seconds from now.
my $t0 = time;
is(sql("SELECT count(*) FROM sched.add_many('burst',
	ARRAY(SELECT clock_timestamp() + interval '3 seconds' + i * interval '1 microsecond'
	      FROM generate_series(1, $n) AS i),
	ARRAY(SELECT jsonb_build_object('n', i) FROM generate_series(1, $n) AS i))"),
	$n, "$n tasks added");
diag(sprintf('add_many of %d tasks: %.1f s', $n, time - $t0));

# Wait for the healthy listener (n lines after "listening"), and check
# meanwhile that the server answers a trivial query promptly (the slowest
# answer is reported).
my $deadline = time + 150;
my $slowest = 0;
my $lines = file_lines($good_file);
while ($lines < $n + 1 && time < $deadline)
{
	my $t = time;
	sql('SELECT 1');
	$slowest = time - $t if time - $t > $slowest;
	usleep(500_000);
	$lines = file_lines($good_file);
}
is($lines - 1, $n, "the healthy listener received all $n notifications");
my %ids = %{ file_ids($good_file) };
is(scalar keys %ids, $n, 'each task once');
is(scalar(grep { @$_ != 1 || $_->[0] != 1 } values %ids), 0, 'every one a single first delivery');
DelayschedTest::timing_cmp_ok($slowest, '<', 5, sprintf('the server answered SELECT 1 within 5 s during the burst (slowest %.2f s)', $slowest));
diag(sprintf('burst delivered after %.1f s; notification queue usage %s', time - $t0,
	sql('SELECT pg_notification_queue_usage()')));

# Acknowledge what the healthy listener received, in bulk.
my @all = sort { $a <=> $b } keys %ids;
my $acked = 0;
while (my @chunk = splice(@all, 0, 50_000))
{
	$acked += sql('SELECT sched.ack_many(\'{' . join(',', @chunk) . '}\'::bigint[])');
}
is($acked, $n, 'every received task was awaiting acknowledgement and is acknowledged');
is(sql("SELECT count(*) FILTER (WHERE state = 'done') || '/' || count(*) FROM sched.tasks WHERE biz_type = 'burst'"),
	"$n/$n", 'nothing lost: every task of the burst is done');
is(worker_exits($pos), 0, 'no worker exited during the burst');
is(worker_pids(), $pids, 'the workers are the same processes');

# The stuck listeners are still connected, and a task added now still
# reaches the healthy listener promptly.
is(sql('SELECT count(*) FROM pg_stat_activity WHERE pid IN (' . join(',', map { $_->{pid} // 0 } @stuck) . ')'), 2,
	'both stuck listeners are still connected');
my $late_id = sql("SELECT sched.add('burst', clock_timestamp(), '{\"after\": true}')");
my $t_late = time;
wait_file_lines($good_file, $n + 2, 30);
ok(exists file_ids($good_file)->{$late_id}, 'a task added after the burst is delivered');
DelayschedTest::timing_cmp_ok(time - $t_late, '<', 5, 'promptly');
sql("SELECT sched.ack($late_id)");

# Let the stuck listeners go; the notification queue empties.
$_->{harness}->kill_kill for @stuck;
ok(DelayschedTest::poll_until($node, 'SELECT pg_notification_queue_usage() = 0', 't', 30),
	'the notification queue empties once the stuck listeners are gone');
$good->kill_kill;

###########################################################################
# (b) database defaults that make the workers' transactions fail
###########################################################################
my $receiver = DelayschedTest::Receiver->start($node->basedir);
my $url = $receiver->url;
sql("SELECT sched.define_biz('fault_notify', ack_timeout => '1 minute')");
sql("SELECT sched.define_biz('fault_pull', 'pull', ack_timeout => '1 minute')");
sql("SELECT sched.define_biz('fault_http', 'http', url => '$url/ok/fault', min_backoff => '100 ms', max_backoff => '1 second')");

# Add $k tasks of each type due in 300 ms; return a tag for their payloads.
my $round = 0;
sub add_round
{
	my ($k) = @_;
	$round++;
	sql("SELECT count(*) FROM (
	     SELECT sched.add(t, clock_timestamp() + interval '300 milliseconds', jsonb_build_object('round', $round, 'i', i))
	     FROM unnest(ARRAY['fault_notify', 'fault_pull', 'fault_http']) AS t, generate_series(1, $k) AS i) s");
	return $round;
}

# Everything of a round delivered: notify ones acked by the listener, pull
# ones claimed and acked here, http ones answered 200 (done).
sub round_finished
{
	my ($r, $k, $listener, $timeout) = @_;
	my $deadline = time + $timeout;
	while (time < $deadline)
	{
		# the consumer of the pull type: claim and ack whatever is due
		sql("SELECT sched.ack_many(coalesce(array_agg(c.id), '{}')) FROM sched.claim('fault_pull', 1000) AS c");
		$listener->received;
		return 1 if sql("SELECT count(*) FROM sched.tasks
		               WHERE (payload->>'round')::int = $r AND state = 'done'") == 3 * $k;
		usleep(100_000);
	}
	diag(sql("SELECT string_agg(biz_type || ' ' || state || ' ' || n, ', ') FROM (
	          SELECT biz_type, state, count(*) AS n FROM sched.tasks
	          WHERE (payload->>'round')::int = $r GROUP BY 1, 2) s"));
	return 0;
}

# One fault: set the default, restart (workers connect again and take the
# database's defaults), add tasks, and watch.
sub fault
{
	my (%f) = @_;
	sql("ALTER DATABASE postgres SET $f{setting}");
	$node->restart;
	ok(wait_workers(), "$f{name}: the workers start");
	my $pos = log_position();
	my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'fault_notify');
	my $r = add_round(20);
	my $t = time;
	$f{during}->() if $f{during};
	if ($f{delivers_during})
	{
		ok(round_finished($r, 20, $listener, 30), "$f{name}: every task is delivered and finished under the fault");
	}
	# Watch at least 5 seconds with the fault in place: a worker that fails
	# every tick restarts about once a second.
	my $watch = time + 5;
	$listener->received, usleep(100_000) while time < $watch;
	my $exits = worker_exits($pos);
	cmp_ok($exits, '<=', 2, "$f{name}: no worker crash-loop ($exits worker exits logged)");

	# RESET: everything due is delivered, nothing lost.
	sql("ALTER DATABASE postgres RESET " . ($f{setting} =~ /^(\w+)/)[0]);
	$node->restart;
	$listener->stop;
	$listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'fault_notify');
	ok(round_finished($r, 20, $listener, 60), "$f{name}: after RESET every task of the round is finished");
	$listener->stop;
	return;
}

fault(name => 'statement_timeout 1ms', setting => "statement_timeout = '1ms'", delivers_during => 1);
fault(name => 'default_transaction_read_only', setting => 'default_transaction_read_only = on', delivers_during => 1);

# lock_timeout alone changes nothing while nobody holds a lock; hold one on
# the table of business types for 5 seconds (as DDL or a VACUUM FULL on it
# would) while tasks are due.  A worker that waits for it, or skips the
# tick, is fine; one that fails and is restarted every second is a crash-loop.
fault(name => 'lock_timeout 1ms', setting => "lock_timeout = '1ms'", delivers_during => 0,
	during => sub {
		my $held = DelayschedTest::hold_in_transaction($node, 'LOCK TABLE sched.biz IN ACCESS EXCLUSIVE MODE');
		my $until = time + 5;    # the length of the fault, not a synchronisation
		usleep(100_000) while time < $until;
		DelayschedTest::release_session($held);
	});

###########################################################################
# (c) consumers that cannot handle a task
###########################################################################
my $pos_c = log_position();

# A claim that is never acknowledged: back after the lease (attempt 2), dead
# after max_attempts, and sched.retry brings it back once more.
sql("SELECT sched.define_biz('cpull', 'pull', ack_timeout => '1 second', max_attempts => 2)");
my $cid = sql("SELECT sched.add('cpull', clock_timestamp(), '{\"poison\": 1}')");
ok(DelayschedTest::poll_until($node, "SELECT count(*) FROM sched.claim('cpull', 10) WHERE id = $cid AND attempt = 1", '1', 30),
	'pull: claimed (attempt 1), never acknowledged');
ok(DelayschedTest::poll_until($node, "SELECT count(*) FROM sched.claim('cpull', 10) WHERE id = $cid AND attempt = 2", '1', 30),
	'pull: claimable again after the lease ran out (attempt 2)');
# (Attempt 1's lease, or already attempt 2's: a second's lease can run out
# before this read on a busy machine, as on 18 in a CI run.)
like(sql("SELECT last_error FROM sched.tasks WHERE id = $cid"), qr/^ack_timeout: not acknowledged within 00:00:01 \(attempt [12] of 2\)$/,
	'pull: last_error says the lease ran out');
ok(DelayschedTest::poll_until($node, "SELECT state FROM sched.tasks WHERE id = $cid", 'dead', 30),
	'pull: dead after the second lease ran out');
is(sql("SELECT sched.ack($cid)"), 'f', 'pull: a late ack of a dead task changes nothing');
is(sql("SELECT sched.retry($cid)"), 't', 'pull: retry revives it');
ok(DelayschedTest::poll_until($node, "SELECT sched.ack_many(array_agg(id)) FROM sched.claim('cpull', 10) WHERE id = $cid", '1', 30),
	'pull: claimed again and acknowledged');
is(sql("SELECT state FROM sched.tasks WHERE id = $cid"), 'done', 'pull: done');

# A consumer that disconnects as soon as it sees a payload it cannot handle
# (quotes, a line break, non-ASCII, markup): the message still is valid JSON
# carrying the payload unchanged, and the task comes back to the next one.
sql("SELECT sched.define_biz('cpoison', ack_timeout => '1 second', max_attempts => 20)");
my $poison = { text => "line 1\nline 2 \"quoted\" \\ </script> \x{2713} \x{1F600}", list => [ 1, undef, JSON::PP::true ] };
my $poison_json = JSON::PP->new->canonical->encode($poison);
my $quitter = DelayschedTest::Listener->start($node, 'postgres', [ '--count', '1' ], 'cpoison');
# (passed as hex bytes, so that no quoting or client encoding is involved)
my $pid_poison = sql("SELECT sched.add('cpoison', clock_timestamp(), convert_from('\\x"
	. unpack('H*', Encode::encode_utf8($poison_json)) . "', 'UTF8')::jsonb)");
my @q = $quitter->wait_for(1, 30);
$quitter->stop;
is(scalar @q, 1, 'poison: the consumer got the message, then went away');
is_deeply($q[0]{message}{payload}, $poison, 'poison: the payload arrived unchanged in valid JSON');
my $patient = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'cpoison');
my @p = $patient->wait_for(1, 30);
is(scalar @p, 1, 'poison: redelivered to the next consumer after the lease');
# (2, or later if the next consumer came after more leases: a busy machine;
# attempts enough that it is not dead before the next one listens.)
cmp_ok($p[0]{attempt}, '>=', 2, 'poison: as a later attempt');
ok(DelayschedTest::poll_until($node, "SELECT state FROM sched.tasks WHERE id = $pid_poison", 'done', 30),
	'poison: done once acknowledged');

# A consumer whose transaction fails after its ack: the ack rolls back with
# it, the task is still awaiting acknowledgement and is delivered again.
# Its own type, whose task keeps coming back: with three attempts
# of a second each, a busy machine's slow polls saw it dead (18 in CI).
$patient->stop;
sql("SELECT sched.define_biz('crollback', ack_timeout => '2 seconds', max_attempts => 100)");
my $rid2 = sql("SELECT sched.add('crollback', clock_timestamp(), '{\"rollback\": 2}')");
ok(DelayschedTest::poll_until($node, "SELECT state FROM sched.tasks WHERE id = $rid2", 'delivered', 30),
	'rollback: delivered to nobody');
my ($ret, $stdout, $stderr) = $node->psql('postgres',
	"BEGIN; SELECT sched.ack($rid2); SELECT 1 / 0; COMMIT;");
like($stderr, qr/division by zero/, 'rollback: the consumer\'s transaction failed after its ack');
# (Delivered, or pending again if its second's lease ran out meanwhile.)
isnt(sql("SELECT state FROM sched.tasks WHERE id = $rid2"), 'done', 'rollback: the ack was rolled back with it');
ok(DelayschedTest::poll_until($node, "SELECT attempt > 1 FROM sched.tasks WHERE id = $rid2", 't', 30),
	'rollback: delivered again after the lease');
# (Polled: a lease of a second can run out between two statements here.)
ok(DelayschedTest::poll_until($node, "SELECT sched.ack($rid2)", 't', 30), 'rollback: a later ack finishes it');

# A payload too large for a NOTIFY (10 MB): the message says payload_omitted
# and the consumer reads the payload from sched.tasks.
sql("SELECT sched.define_biz('cbig', ack_timeout => '1 minute')");
my $big = DelayschedTest::Listener->start($node, 'postgres', [], 'cbig');
my $bid = sql("SET delaysched.max_payload_size = '16MB';
             SELECT sched.add('cbig', clock_timestamp(), jsonb_build_object('blob', repeat('z', 10000000)))");
my @b = $big->wait_for(1, 30);
$big->stop;
is(scalar @b, 1, 'big: delivered');
ok($b[0]{message}{payload_omitted} && !exists $b[0]{message}{payload}, 'big: payload_omitted, no payload');
is(sql("SELECT octet_length(payload->>'blob') FROM sched.tasks WHERE id = $bid"), 10_000_000,
	'big: the whole payload is in sched.tasks');
is(sql("SELECT sched.ack($bid)"), 't', 'big: acknowledged');

# A consumer listening on the wrong channel: nothing arrives there; the task
# is redelivered until max_attempts and is then dead, not lost; once a
# consumer listens on the right channel, sched.retry delivers it.
sql("SELECT sched.define_biz('cwrong', channel => 'cwrong_chan', ack_timeout => '1 second', max_attempts => 2)");
my $wrong = DelayschedTest::Listener->start($node, 'postgres', [], 'cwrong');
my $wid = sql("SELECT sched.add('cwrong', clock_timestamp(), '{}')");
ok(DelayschedTest::poll_until($node, "SELECT state FROM sched.tasks WHERE id = $wid", 'dead', 30),
	'wrong channel: dead after max_attempts');
is(scalar($wrong->stop), 0, 'wrong channel: nothing arrived on the channel of the type\'s name');
like(sql("SELECT last_error FROM sched.tasks WHERE id = $wid"), qr/\(attempt 2 of 2\)/, 'wrong channel: last_error says why');
my $right = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'cwrong_chan');
is(sql("SELECT sched.retry($wid)"), 't', 'wrong channel: retry');
my @w = $right->wait_for(1, 30);
is(scalar @w, 1, 'wrong channel: delivered on the right channel after retry');
ok(DelayschedTest::poll_until($node, "SELECT state FROM sched.tasks WHERE id = $wid", 'done', 30),
	'wrong channel: done');
$right->stop;

is(worker_exits($pos_c), 0, 'no worker exited while consumers misbehaved');

$receiver->stop;
$node->stop;
done_testing();
