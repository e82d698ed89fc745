# Rate limits: a type's deliveries go out at its rate, smoothly, whatever
# the number of workers; a new rate applies within a second; a throttled
# backlog costs another type nothing; delaysched.max_deliveries_per_second
# caps the total and shares it fairly.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = DelayschedTest::new_node('rate');

# When the tasks of a type were delivered (sched.tasks.delivered_at, the
# server's clock, in epoch seconds), sorted.  The limiter's promise is about
# deliveries; a listener's receipt times add its own scheduling to them.
sub delivered_times
{
	my ($type) = @_;
	return split /\n/, $node->safe_psql('postgres', qq{
		SELECT extract(epoch FROM delivered_at) FROM sched.tasks
		WHERE biz_type = '$type' AND delivered_at IS NOT NULL ORDER BY 1});
}

# Keep reading a listener for $seconds (its pipe must not fill up).
sub listen_for
{
	my ($listener, $seconds) = @_;
	my $until = time + $seconds;
	while (time < $until)
	{
		$listener->received;
		usleep(20_000);
	}
}

# Wait until $count tasks of $type have been received; return them.
sub wait_for_type
{
	my ($listener, $type, $count, $timeout) = @_;
	my $deadline = time + $timeout;
	my @got;
	do
	{
		usleep(10_000);
		@got = grep { $_->{channel} eq $type && defined $_->{id} } $listener->received;
	} while (@got < $count && time < $deadline);
	return @got;
}

# Counts per 100 ms bin from $from to $to (whole bins only).
sub per_100ms
{
	my ($from, $to, @t) = @_;
	my @bins = (0) x int(($to - $from) * 10);
	for my $x (grep { $_ >= $from } @t)
	{
		my $b = int(($x - $from) * 10);
		$bins[$b]++ if $b >= 0 && $b < @bins;
	}
	return @bins;
}

# --- 1,000 tasks due at once, rate 200, burst 10: with 1, 2 and 4 workers ---
for my $workers (1, 2, 4)
{
	$node->append_conf('postgresql.conf', "delaysched.workers = $workers");
	$node->restart;
	# (A type of its own each time: sched.tasks keeps the earlier deliveries.)
	my $type = "paced_$workers";
	$node->safe_psql('postgres', "SELECT sched.define_biz('$type', rate_limit => 200, burst => 10)");
	my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], $type);
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM sched.add_many('$type',
			array_fill(clock_timestamp() + interval '500 milliseconds', ARRAY[1000]))});
	my @got = wait_for_type($listener, $type, 1000, 60);
	$listener->stop;
	is(scalar(@got), 1000, "$workers workers: all 1,000 received");
	my @t = delivered_times($type);
	# After the burst of 10, the rate: deliveries 11 to 1,000 over their span.
	# The cap (burst + rate x t) is a promise, on the limiter's own clock
	# (delivered_at is the time the tokens were taken at): always checked.
	# How close to the rate and how smooth say how busy the machine was.
	my $busiest = DelayschedTest::busiest_window(1.0, @t);
	cmp_ok($busiest, '<=', 210, "$workers workers: at most 210 in any 1 s window ($busiest)");
	my $rate = (@t - 11) / ($t[-1] - $t[10]);
	DelayschedTest::timing_cmp_ok(abs($rate - 200) / 200, '<=', 0.05,
		sprintf("$workers workers: %.1f deliveries/s, within 5%% of 200", $rate));
	# Per 100 ms after the first, which has the burst.
	my @bins = per_100ms($t[0] + 0.1, $t[-1], @t);
	my ($lo, $hi) = (sort { $a <=> $b } @bins)[0, -1];
	DelayschedTest::timing_cmp_ok($hi - $lo, '<=', 6, "$workers workers: per-100 ms counts flat ($lo to $hi, 20 expected)");
	$node->safe_psql('postgres', "SELECT sched.drop_biz('$type', cancel_tasks => true)");
}

# --- A new rate applies within a second ------------------------------------
{
	$node->safe_psql('postgres', "SELECT sched.define_biz('paced', rate_limit => 200, burst => 10)");
	my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'paced');
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM sched.add_many('paced',
			array_fill(clock_timestamp(), ARRAY[2000]))});
	ok(DelayschedTest::poll_until($node,
		"SELECT count(delivered_at) >= 300 FROM sched.tasks WHERE biz_type = 'paced'", 't', 30),
		'the rate change: 300 delivered at the first rate');
	my $changed_at = $node->safe_psql('postgres', qq{
		SELECT sched.define_biz('paced', rate_limit => 50, burst => 10);
		SELECT extract(epoch FROM clock_timestamp())});
	listen_for($listener, 3.2);
	$listener->stop;
	my @t = delivered_times('paced');
	my $before = grep { $_ >= $changed_at - 1.0 && $_ < $changed_at } @t;
	my $after = grep { $_ >= $changed_at + 1.0 && $_ < $changed_at + 3.0 } @t;
	# At most the new cap (a burst of 10 and 50/s for 2 s) from a second
	# after the change; about the rates when the machine keeps up.
	cmp_ok($after, '<=', 10 + 2 * 50, "at most the new limit from a second after the change ($after in 2 s)");
	DelayschedTest::timing_cmp_ok(abs($before - 200), '<=', 10, "about 200 in the second before the change ($before)");
	DelayschedTest::timing_cmp_ok(abs($after / 2 - 50), '<=', 2.5,
		sprintf('50/s from a second after the change (%.1f/s)', $after / 2));
	$node->safe_psql('postgres', "SELECT sched.drop_biz('paced', cancel_tasks => true)");
}

# --- Noisy neighbour: a throttled backlog costs another type nothing -------
# B's lateness: a trickle of 40 tasks, 100 ms apart, due from $start.
sub trickle_lateness
{
	my ($listener) = @_;
	$node->safe_psql('postgres', qq{
		SELECT sched.add('trickle', clock_timestamp() + interval '300 milliseconds' + i * interval '100 milliseconds')
		FROM generate_series(1, 40) i});
	my @got = wait_for_type($listener, 'trickle', 40, 30);
	return map { $_->{late_us} / 1000 } @got;
}
{
	$node->safe_psql('postgres', qq{
		SELECT sched.define_biz('trickle');
		SELECT sched.define_biz('noisy', rate_limit => 100, burst => 10)});
	my $alone = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'trickle');
	my @alone = trickle_lateness($alone);
	$alone->stop;
	is(scalar(@alone), 40, 'the trickle alone: every task delivered');

	my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'trickle', 'noisy');
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM sched.add_many('noisy',
			array_fill(clock_timestamp() - interval '1 second', ARRAY[5000]))});
	ok(DelayschedTest::poll_until($node,
		"SELECT throttled > 4000 FROM sched.biz_stats WHERE biz_type = 'noisy'", 't', 30),
		'the noisy type has thousands of tasks throttled');
	# No busy loop: while only the throttled type has work, the workers run
	# about one drain per token (10 ms apart at 100/s), not thousands.
	my $ticks = "SELECT sum(ticks) FROM sched.workers WHERE role = 'scanner'";
	my $ticks_before = $node->safe_psql('postgres', $ticks);
	listen_for($listener, 2.0);
	my $per_second = ($node->safe_psql('postgres', $ticks) - $ticks_before) / 2.0;
	cmp_ok($per_second, '<', 300, "the throttled workers wake about once per token ($per_second drains and ticks/s)");
	my @beside = trickle_lateness($listener);
	$listener->stop;
	my @noisy = delivered_times('noisy');
	is(scalar(@beside), 40, 'the trickle beside it: every task delivered');
	my $p99_alone = DelayschedTest::percentile(0.99, @alone);
	my $p99_beside = DelayschedTest::percentile(0.99, @beside);
	DelayschedTest::timing_cmp_ok($p99_beside, '<=', $p99_alone + 5,
		sprintf('trickle p99 lateness %.1f ms beside the backlog, %.1f ms alone', $p99_beside, $p99_alone));
	cmp_ok(DelayschedTest::busiest_window(1.0, @noisy), '<=', 110, 'the noisy type kept under its limit');
	my $noisy_rate = (@noisy - 11) / ($noisy[-1] - $noisy[10]);
	DelayschedTest::timing_cmp_ok(abs($noisy_rate - 100), '<=', 5, sprintf('while the noisy type kept to its 100/s (%.1f/s)', $noisy_rate));
	my ($tokens, $throttled, $current) = split /\|/, $node->safe_psql('postgres',
		"SELECT tokens, throttled, current_rate FROM sched.biz_stats WHERE biz_type = 'noisy'");
	ok($tokens >= 0 && $tokens <= 10 && $throttled > 0 && $throttled < 5000 && $current > 0 && $current <= 110,
		"biz_stats shows its tokens ($tokens), throttled backlog ($throttled) and current rate ($current/s)");
	$node->safe_psql('postgres', "SELECT sched.drop_biz('noisy', cancel_tasks => true)");
}

# --- A global cap shares the deliveries fairly -----------------------------
{
	$node->append_conf('postgresql.conf', 'delaysched.max_deliveries_per_second = 300');
	$node->reload;
	$node->safe_psql('postgres', qq{
		SELECT sched.define_biz('big');
		SELECT sched.define_biz('small')});
	my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'big', 'small');
	# Same run_at; big's tasks come first in (run_at, id) order.
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM sched.add_many('big', array_fill(clock_timestamp() + interval '300 milliseconds', ARRAY[2000]));
		SELECT count(*) FROM sched.add_many('small', array_fill(clock_timestamp() + interval '300 milliseconds', ARRAY[300]))});
	my @small_got = wait_for_type($listener, 'small', 300, 30);
	$listener->stop;
	my @big = delivered_times('big');
	my @small = delivered_times('small');
	my @all = sort { $a <=> $b } (@big, @small);
	is(scalar(@small), 300, 'the small type was served beside the big one');
	my $busiest = DelayschedTest::busiest_window(1.0, @all);
	cmp_ok($busiest, '<=', 300 + 30, "at most the cap (300/s and its burst of 30) in any 1 s window ($busiest)");
	# Shared equally while both wait, whatever the machine's speed: from
	# the small type's first delivery to its last, about half are its.
	my $while_both = grep { $_ >= $small[0] && $_ <= $small[-1] } @all;
	my $small_share = @small / $while_both;
	cmp_ok($small_share, '>=', 0.45,
		sprintf('the small type had its share while both waited (%.0f%% of %d deliveries), not what the big one left',
			100 * $small_share, $while_both));
	my $first_second = grep { $_ < $all[0] + 1.0 } @all;
	my $first_share = (grep { $_ < $all[0] + 1.0 } @small) / $first_second;
	DelayschedTest::timing_cmp_ok($first_share, '>=', 0.45,
		sprintf('and of the first second (%.0f%% of %d deliveries)', 100 * $first_share, $first_second));
	$node->safe_psql('postgres', qq{
		SELECT sched.drop_biz('big', cancel_tasks => true);
		SELECT sched.drop_biz('small', cancel_tasks => true)});
}

$node->stop;
done_testing();
