# Several scanner workers over the ranges: a worker terminated mid-burst
# (the others go on, its range is taken over, nothing is lost or doubled);
# a worker killed with SIGKILL mid-burst (the postmaster restarts everything)
# and the server stopped with stop('immediate') mid-burst and started again
# (either way every task is delivered at least once, and again only if its
# delivery was not acknowledged before); more workers than ranges, and more
# ranges than workers.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use Test::More;
use Time::HiRes qw(time usleep);

# Add $n tasks of $biz due $secs seconds from now, in one statement; with
# $spread, spread evenly over that many seconds from then.
sub add_burst
{
	my ($node, $biz, $n, $secs, $spread) = @_;
	$spread //= 0;
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM sched.add_many('$biz',
			ARRAY(SELECT clock_timestamp() + interval '$secs seconds' + i * interval '$spread seconds' / $n
				  FROM generate_series(1, $n) AS i),
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

# Like poll_reading for a count on its way to $expected, with a deadline
# that moves while it changes: a listener that acknowledges one task a
# commit takes its time on a busy machine (130 a second, 18,000 of them, in
# a CI run at three tests at once), and only a count that stops moving for
# $stalled seconds is a failure.
sub poll_progressing
{
	my ($node, $listener, $query, $expected, $stalled) = @_;
	my $deadline = time + $stalled;
	my $last;
	while (time < $deadline)
	{
		$listener->received;
		my $count = $node->safe_psql('postgres', $query);
		return 1 if $count eq $expected;
		$deadline = time + $stalled if defined $last && $count ne $last;
		$last = $count;
		usleep(50_000);
	}
	note("still $last after $stalled s without a change");
	return 0;
}

sub count_ids
{
	my %count;
	$count{ $_->{id} }++ for @_;
	return \%count;
}

# --- Two workers, eight ranges: SIGTERM to one of them mid-burst ----------
# A burst falling due over four seconds, in small batches, so that the
# workers are still delivering when one of them is stopped.  The test framework turns
# restart_after_crash off; the SIGKILL case needs it.
# (The full sweep, which finds the leases moved back below, every 2 s
# instead of every minute: a developer option.)
my $node = DelayschedTest::new_node('workers', extra_conf => <<'EOC');
delaysched.workers = 2
delaysched.batch_size = 10
restart_after_crash = on
delaysched.full_sweep_interval = '2s'
EOC
$node->safe_psql('postgres', "SELECT sched.define_biz('burst', ack_timeout => '1 hour')");
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM sched.workers WHERE role = 'scanner' AND state = 'sleeping'", '2', 10),
	'two workers are up');

my $delivered = "(SELECT sum(delivered) FROM sched.workers WHERE role = 'scanner')";
# (It acknowledges in batches, as a busy consumer does: one commit per
# delivery held a CI run's listener to 130 a second.)
my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack-batch', '100'], 'burst');
add_burst($node, 'burst', 20000, 1, 4);
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

@got = $listener->wait_for(20000, 300);
my $count = count_ids(@got);
is(scalar keys %$count, 20000, 'every task of the burst was delivered');
is(scalar(grep { $count->{$_} > 1 } keys %$count), 0,
	'none twice: the terminated tick rolled back without notifying');
my ($ranges, $disorder) = DelayschedTest::out_of_order_within_ranges($node, @got);
is($ranges, 8, 'all eight ranges delivered');
is($disorder, 0, 'in run_at order within each range');
ok(poll_progressing($node, $listener,
	"SELECT count(*) FROM sched.tasks WHERE biz_type = 'burst' AND state = 'done'", '20000', 60),
	'every task acknowledged');
is($node->safe_psql('postgres',
	"SELECT max(lag) < interval '5 seconds' FROM sched.time_pointer"), 't',
	'every range\'s pointer caught up with now');
$listener->stop;

# A burst of 6,000 tasks of $biz is interrupted by &$interrupt once 1,000
# are delivered; after the server is back, every task must be delivered at
# least once, and again only if its delivery was not acknowledged before the
# interruption.
sub interrupted_burst
{
	my ($node, $biz, $what, $interrupt) = @_;
	my $mark = "${biz}_mark";
	$node->safe_psql('postgres', "SELECT sched.define_biz('$biz', ack_timeout => '1 hour')");
	$node->safe_psql('postgres', "SELECT sched.define_biz('$mark')");
	my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], $biz);
	my $start = $node->safe_psql('postgres', "SELECT $delivered");
	add_burst($node, $biz, 6000, 1);
	ok(DelayschedTest::poll_until($node, "SELECT $delivered >= $start + 1000", 't', 30),
		"$what: the burst is being delivered");
	# The listener acknowledges behind the deliveries; on a busy machine it
	# may not have committed any yet, and the test needs some acknowledged
	# before the interruption to show they are never delivered again.
	ok(DelayschedTest::poll_until($node,
		"SELECT count(*) >= 100 FROM sched.finished WHERE biz_type = '$biz'", 't', 30),
		"$what: the listener has acknowledged some");
	&$interrupt();
	# Every session ended with the server: the listener's too.
	my @before = $listener->stop;
	# (poll_query_until retries while the server refuses connections.)
	ok($node->poll_query_until('postgres',
		"SELECT count(*) FROM sched.workers WHERE role = 'scanner' AND pid IS NOT NULL", '2'),
		"$what: both workers are back");
	# Acknowledgements commit synchronously: what is done now was done
	# before the interruption, and must never be delivered again.
	my %acked = map { $_ => 1 } split /\n/, $node->safe_psql('postgres',
		"SELECT id FROM sched.finished WHERE biz_type = '$biz'");

	$listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack-batch', '100'], $biz, $mark);
	ok(poll_reading($node, $listener,
		"SELECT count(*) FROM sched.task WHERE biz_type = '$biz' AND state = 'p'", '0', 60),
		"$what: the rest of the burst went out");
	# Deliveries nobody heard (before the interruption, and after it before
	# the new listener was there) wait for their lease, an hour: end it now,
	# as time would, for every task the new listener did not hear.  A
	# listener gets notifications in commit order, so once it has heard a
	# marker task delivered after the burst, it has heard every delivery of
	# the burst it ever will.
	$node->safe_psql('postgres', "SELECT sched.add('$mark', now())");
	my $deadline = time + 30;
	my @heard;
	until (grep { $_->{message}{biz_type} eq $mark } @heard)
	{
		die 'the marker task did not arrive' if time > $deadline;
		usleep(10_000);
		@heard = $listener->received;
	}
	my $heard_ids = join(',', map { $_->{id} } grep { $_->{message}{biz_type} eq $biz } @heard);
	$node->safe_psql('postgres', qq{
		UPDATE sched.task SET lease_until = now()
		WHERE biz_type = '$biz' AND state = 'd' AND id <> ALL ('{$heard_ids}'::bigint[])});
	# (A lease moved back by hand lies behind where the sweeps of its range
	# look for expired leases; the full sweep finds it, every 2 s here.)
	ok(poll_progressing($node, $listener,
		"SELECT count(*) FROM sched.task WHERE biz_type = '$biz'", '0', 60),
		"$what: every task was acknowledged in the end");
	my @after = grep { $_->{message}{biz_type} eq $biz } $listener->stop;

	# Every task was acknowledged, so every task was delivered at least once.
	# (The first listener's own record ends with the interruption:
	# notifications it had received but not yet printed are gone with it.)
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM sched.tasks WHERE biz_type = '$biz' AND state = 'done'"), '6000',
		"$what: every task was delivered and acknowledged");
	my $after_ids = count_ids(@after);
	is(scalar(grep { $after_ids->{$_} > 1 } keys %$after_ids), 0, "$what: none twice after");
	my $before_ids = count_ids(@before);
	is(scalar(grep { $before_ids->{$_} > 1 } keys %$before_ids), 0, "$what: none twice before");
	is(scalar(grep { $acked{$_} } keys %$after_ids), 0,
		"$what: no task acknowledged before was delivered again");
	cmp_ok(scalar(keys %acked), '>', 0, "$what: some were acknowledged before");
	note("$what: " . scalar(grep { $before_ids->{$_} } keys %$after_ids)
		. ' tasks heard before went out again (delivered, not acknowledged)');
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM sched.tasks WHERE biz_type = '$biz' AND attempt > 2"), '0',
		"$what: no task needed more than one redelivery");
}

# --- SIGKILL to a worker mid-burst: the whole server restarts ------------
interrupted_burst($node, 'crash', 'SIGKILL', sub {
	kill 'KILL', $node->safe_psql('postgres', 'SELECT pid FROM sched.workers WHERE worker = 1');
});

# --- stop('immediate') mid-burst, then start ---------------------------------
interrupted_burst($node, 'halt', 'immediate stop', sub {
	$node->stop('immediate');
	$node->start;
});
$node->stop;

# --- More workers (4) than ranges (2) ---------------------------------------
my $few = DelayschedTest::new_node('few_ranges',
	extra_conf => "delaysched.workers = 4\ndelaysched.ranges = 2");
is($few->safe_psql('postgres', 'SELECT count(*) FROM sched.time_pointer'), '2', 'two ranges');
$few->safe_psql('postgres', "SELECT sched.define_biz('burst', ack_timeout => '1 hour')");
ok(DelayschedTest::poll_until($few,
	"SELECT count(*) FROM sched.workers WHERE role = 'scanner' AND pid IS NOT NULL", '4', 10), 'four workers are up');
$listener = DelayschedTest::Listener->start($few, 'postgres', ['--ack-batch', '100'], 'burst');
add_burst($few, 'burst', 10000, 1);
my $most_held = 0;
for (1 .. 200)
{
	my $held = $few->safe_psql('postgres', "SELECT count(*) FROM sched.workers WHERE role = 'scanner' AND holds IS NOT NULL");
	$most_held = $held if $held > $most_held;
	last if scalar($listener->received) >= 10000;
}
@got = $listener->wait_for(10000, 300);
$count = count_ids(@got);
is(scalar keys %$count, 10000, 'every task delivered with more workers than ranges');
is(scalar(grep { $count->{$_} > 1 } keys %$count), 0, 'none twice');
cmp_ok($most_held, '<=', 2, "never more workers on ranges than ranges (at most $most_held seen)");
$listener->stop;
$few->stop;

# --- More ranges (8) than workers (1) ---------------------------------------
my $one = DelayschedTest::new_node('one_worker', extra_conf => "delaysched.workers = 1");
$one->safe_psql('postgres', "SELECT sched.define_biz('burst', ack_timeout => '1 hour')");
$listener = DelayschedTest::Listener->start($one, 'postgres', ['--ack-batch', '100'], 'burst');
add_burst($one, 'burst', 10000, 1);
@got = $listener->wait_for(10000, 300);
$count = count_ids(@got);
is(scalar keys %$count, 10000, 'one worker delivers every range');
is(scalar(grep { $count->{$_} > 1 } keys %$count), 0, 'none twice');
($ranges, $disorder) = DelayschedTest::out_of_order_within_ranges($one, @got);
is($ranges, 8, 'from all eight ranges');
is($one->safe_psql('postgres', "SELECT count(*) FROM sched.workers WHERE role = 'scanner'"), '1', 'one worker row');
$listener->stop;
$one->stop;

done_testing();
