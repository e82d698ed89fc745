# Several scanner workers over the ranges: a worker terminated mid-burst
# (the others go on, its range is taken over, nothing is lost or doubled);
# a worker killed with SIGKILL mid-burst (the postmaster restarts everything;
# every task is delivered at least once, and again only if its delivery was
# not acknowledged before the crash); more workers than ranges, and more
# ranges than workers.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use Test::More;
use Time::HiRes qw(time usleep);

# Add $n tasks of $biz due $secs seconds from now, in one statement.
sub add_burst
{
	my ($node, $biz, $n, $secs) = @_;
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM sched.add_many('$biz',
			array_fill(clock_timestamp() + interval '$secs seconds', ARRAY[$n]),
			ARRAY(SELECT jsonb_build_object('i', i) FROM generate_series(1, $n) AS i))});
}

# poll_until, reading the listener meanwhile: a listener nobody reads
# blocks on its full output pipe and stops acknowledging.
sub poll_reading
{
	my ($node, $listener, $query, $expected, $timeout) = @_;
	my $deadline = time + $timeout;
	while (time < $deadline)
	{
		$listener->received;
		return 1 if $node->safe_psql('postgres', $query) eq $expected;
		usleep(50_000);
	}
	return 0;
}

sub count_ids
{
	my %count;
	$count{ $_->{id} }++ for @_;
	return \%count;
}

# --- Two workers, eight ranges: SIGTERM to one of them mid-burst ----------
# Small batches make a burst take seconds, so that the workers are still
# delivering when one of them is stopped.  The test framework turns
# restart_after_crash off; the SIGKILL case needs it.
my $node = DelayschedTest::new_node('workers', extra_conf => <<'EOC');
delaysched.workers = 2
delaysched.batch_size = 10
restart_after_crash = on
EOC
$node->safe_psql('postgres', "SELECT sched.define_biz('burst', ack_timeout => '1 hour')");
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM sched.workers WHERE state = 'sleeping'", '2', 10),
	'two workers are up');

my $delivered = '(SELECT sum(delivered) FROM sched.workers)';
my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'burst');
add_burst($node, 'burst', 20000, 1);
ok(DelayschedTest::poll_until($node, "SELECT $delivered >= 2000", 't', 30), 'the burst is being delivered');
cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM sched.task WHERE state = 'p'"), '>', 5000,
	'with most of it still to go');
my @got;
my $victim = $node->safe_psql('postgres', 'SELECT pid FROM sched.workers WHERE worker = 0');
my $other_before = $node->safe_psql('postgres', 'SELECT delivered FROM sched.workers WHERE worker = 1');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($victim)");

# The other worker goes on while the victim is gone; the victim comes back.
ok(poll_reading($node, $listener,
	"SELECT delivered > $other_before FROM sched.workers WHERE worker = 1", 't', 30),
	'the other worker went on delivering');
ok(poll_reading($node, $listener,
	"SELECT pid IS NOT NULL AND pid <> $victim FROM sched.workers WHERE worker = 0", 't', 30),
	'the terminated worker was restarted');

@got = $listener->wait_for(20000, 60);
my $count = count_ids(@got);
is(scalar keys %$count, 20000, 'every task of the burst was delivered');
is(scalar(grep { $count->{$_} > 1 } keys %$count), 0,
	'none twice: the terminated tick rolled back without notifying');
my ($ranges, $disorder) = DelayschedTest::out_of_order_within_ranges($node, @got);
is($ranges, 8, 'all eight ranges delivered');
is($disorder, 0, 'in run_at order within each range');
ok(poll_reading($node, $listener,
	"SELECT count(*) FROM sched.tasks WHERE biz_type = 'burst' AND state = 'done'", '20000', 60),
	'every task acknowledged');
is($node->safe_psql('postgres',
	"SELECT max(lag) < interval '5 seconds' FROM sched.time_pointer"), 't',
	'every range\'s pointer caught up with now');
$listener->stop;

# --- SIGKILL to a worker mid-burst: the whole server restarts ------------
$node->safe_psql('postgres', "SELECT sched.define_biz('crash', ack_timeout => '1 hour')");
$node->safe_psql('postgres', "SELECT sched.define_biz('crash_mark')");
$listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'crash');
my $start = $node->safe_psql('postgres', "SELECT $delivered");
add_burst($node, 'crash', 20000, 1);
ok(DelayschedTest::poll_until($node, "SELECT $delivered >= $start + 2000", 't', 30),
	'the second burst is being delivered');
$victim = $node->safe_psql('postgres', 'SELECT pid FROM sched.workers WHERE worker = 1');
kill 'KILL', $victim;
# The postmaster ends every session and restarts: the listener's too.
my @before = $listener->stop;
# (poll_query_until retries while the server refuses connections.)
ok($node->poll_query_until('postgres',
	"SELECT count(*) FROM sched.workers WHERE pid IS NOT NULL", '2'),
	'both workers are back after the crash restart');
$listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'crash', 'crash_mark');
ok(poll_reading($node, $listener,
	"SELECT count(*) FROM sched.task WHERE biz_type = 'crash' AND state = 'p'", '0', 60),
	'the rest of the burst went out after the restart');
# Deliveries nobody heard (before the crash, and after the restart before
# the new listener was there) wait for their lease, an hour: end it now, as
# time would, for every task the new listener did not hear.  A listener gets
# notifications in commit order, so once it has heard a marker task
# delivered after the burst, it has heard every delivery of the burst it
# ever will.
$node->safe_psql('postgres', "SELECT sched.add('crash_mark', now())");
my $deadline = time + 30;
my @heard;
until (grep { $_->{message}{biz_type} eq 'crash_mark' } @heard)
{
	die 'the marker task did not arrive' if time > $deadline;
	usleep(10_000);
	@heard = $listener->received;
}
my $heard_ids = join(',', map { $_->{id} } grep { $_->{message}{biz_type} eq 'crash' } @heard);
$node->safe_psql('postgres', qq{
	UPDATE sched.task SET lease_until = now()
	WHERE biz_type = 'crash' AND state = 'd' AND id <> ALL ('{$heard_ids}'::bigint[])});
ok(poll_reading($node, $listener,
	"SELECT count(*) FROM sched.task WHERE biz_type = 'crash'", '0', 60),
	'every task of the second burst was acknowledged in the end');
my @after = grep { $_->{message}{biz_type} eq 'crash' } $listener->stop;
# Every task was acknowledged, so every task was delivered at least once.
# (The first listener's own record ends at the crash: notifications it had
# received but not yet printed are gone with it.)
is($node->safe_psql('postgres',
	"SELECT count(*) FROM sched.tasks WHERE biz_type = 'crash' AND state = 'done'"), '20000',
	'every task was delivered and acknowledged');
my $after_ids = count_ids(@after);
is(scalar(grep { $after_ids->{$_} > 1 } keys %$after_ids), 0, 'none twice after the restart');
my $before_ids = count_ids(@before);
is(scalar(grep { $before_ids->{$_} > 1 } keys %$before_ids), 0, 'none twice before the crash');
note(scalar(grep { $before_ids->{$_} } keys %$after_ids)
	. ' tasks delivered before the crash went out again (their delivery or ack was lost)');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM sched.tasks WHERE biz_type = 'crash' AND attempt > 2"), '0',
	'no task needed more than one redelivery');
$node->stop;

# --- More workers (4) than ranges (2) ---------------------------------------
my $few = DelayschedTest::new_node('few_ranges',
	extra_conf => "delaysched.workers = 4\ndelaysched.ranges = 2");
is($few->safe_psql('postgres', 'SELECT count(*) FROM sched.time_pointer'), '2', 'two ranges');
$few->safe_psql('postgres', "SELECT sched.define_biz('burst', ack_timeout => '1 hour')");
ok(DelayschedTest::poll_until($few,
	"SELECT count(*) FROM sched.workers WHERE pid IS NOT NULL", '4', 10), 'four workers are up');
$listener = DelayschedTest::Listener->start($few, 'postgres', ['--ack'], 'burst');
add_burst($few, 'burst', 10000, 1);
my $most_held = 0;
for (1 .. 200)
{
	my $held = $few->safe_psql('postgres', 'SELECT count(*) FROM sched.workers WHERE holds IS NOT NULL');
	$most_held = $held if $held > $most_held;
	last if scalar($listener->received) >= 10000;
}
@got = $listener->wait_for(10000, 60);
$count = count_ids(@got);
is(scalar keys %$count, 10000, 'every task delivered with more workers than ranges');
is(scalar(grep { $count->{$_} > 1 } keys %$count), 0, 'none twice');
cmp_ok($most_held, '<=', 2, "never more workers on ranges than ranges (at most $most_held seen)");
$listener->stop;
$few->stop;

# --- More ranges (8) than workers (1) ---------------------------------------
my $one = DelayschedTest::new_node('one_worker', extra_conf => "delaysched.workers = 1");
$one->safe_psql('postgres', "SELECT sched.define_biz('burst', ack_timeout => '1 hour')");
$listener = DelayschedTest::Listener->start($one, 'postgres', ['--ack'], 'burst');
add_burst($one, 'burst', 10000, 1);
@got = $listener->wait_for(10000, 60);
$count = count_ids(@got);
is(scalar keys %$count, 10000, 'one worker delivers every range');
is(scalar(grep { $count->{$_} > 1 } keys %$count), 0, 'none twice');
($ranges, $disorder) = DelayschedTest::out_of_order_within_ranges($one, @got);
is($ranges, 8, 'from all eight ranges');
is($one->safe_psql('postgres', 'SELECT count(*) FROM sched.workers'), '1', 'one worker row');
$listener->stop;
$one->stop;

done_testing();
