# Delivery by NOTIFY: on time, never early, woken by the adding commit, and
# immediate for tasks added in the past.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use Test::More;
use Time::HiRes ();

# A long sweep interval: only the wake-after-commit can make the scanner
# deliver a task promptly that was added while it slept.
my $node = DelayschedTest::new_node('delivery',
	extra_conf => "delaysched.sweep_interval = '60s'");
$node->safe_psql('postgres', "SELECT sched.define_biz('orders')");

my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'orders');

# The scanner sleeps: nothing is due for an hour.
$node->safe_psql('postgres', "SELECT sched.add('orders', now() + interval '1 hour', '{\"far\": true}')");
ok(DelayschedTest::poll_until($node,
	"SELECT string_agg(DISTINCT state, ',') FROM sched.workers WHERE role = 'scanner'", 'sleeping', 10),
	'every scanner worker is sleeping');

# 40 tasks scattered over the next 4 seconds, each added in its own
# transaction while the scanner sleeps, plus two already overdue.
my $sql = join ";\n", map {
	sprintf("SELECT sched.add('orders', clock_timestamp() + interval '%d milliseconds', '{\"n\": %d}')",
		300 + int(rand(3700)), $_)
} 1 .. 40;
$node->safe_psql('postgres', $sql);
my $overdue_added_us = Time::HiRes::time() * 1e6;
$node->safe_psql('postgres', "SELECT sched.add('orders', now() - interval '1 day', '{\"overdue\": 1}')");
$node->safe_psql('postgres', "SELECT sched.add('orders', now() - interval '1 second', '{\"overdue\": 2}')");

my @got = $listener->wait_for(42, 30);
is(scalar @got, 42, 'every due task was delivered once');

my @early = grep { $_->{late_us} < 0 } @got;
is(scalar @early, 0, 'no task arrived before its run_at (client clock)');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM sched.tasks WHERE delivered_at < run_at"), '0',
	'no task was taken before its run_at (server clock)');

my @scheduled = map { $_->{late_us} } grep { !exists $_->{message}{payload}{overdue} } @got;
my @overdue = grep { exists $_->{message}{payload}{overdue} } @got;
is(scalar @overdue, 2, 'both overdue tasks were delivered');

# On time: the scanner sleeps until the next run_at and is woken by commits.
# A scanner that waited for its 60 s sweep would miss the bound by far; the
# median's (PG_TEST_EXTRA=delaysched_timing) is how punctual it was.
my $p50 = DelayschedTest::percentile(0.5, @scheduled);
my $max = DelayschedTest::percentile(1, @scheduled);
DelayschedTest::timing_cmp_ok($p50, '<', 100_000, "median lateness under 100 ms (was @{[ $p50 / 1000 ]} ms)");
cmp_ok($max, '<', $DelayschedTest::BEFORE_SWEEP * 1e6,
	"every task delivered long before the sweep (worst @{[ $max / 1000 ]} ms late)");
diag(sprintf("lateness at the listener: p50 %.1f ms, max %.1f ms", $p50 / 1000, $max / 1000));

# Overdue tasks go out at once (the commit reports them behind the pointer
# and the scanner sweeps), not at the 60 s sweep or after a lap of the buckets.
my ($overdue_recv) = sort { $b <=> $a } map { $_->{recv_us} } @overdue;
cmp_ok($overdue_recv - $overdue_added_us, '<', $DelayschedTest::BEFORE_SWEEP * 1e6,
	'overdue tasks were delivered promptly after they were added');

# The message shape.
my ($one) = grep { exists $_->{message}{payload}{n} } @got;
is_deeply([ sort keys %{ $one->{message} } ], [qw(attempt biz_type id payload run_at)],
	'message has id, biz_type, run_at, payload, attempt');
is($one->{message}{biz_type}, 'orders', 'message names its business type');
is($one->{message}{attempt}, 1, 'first delivery is attempt 1');
is($one->{channel}, 'orders', 'channel defaults to the type name');

# The listener acknowledged everything: all done, nothing awaiting ack.
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM sched.tasks WHERE state = 'done'", '42', 30),
	'every acknowledged task is done');
is($node->safe_psql('postgres', "SELECT count(*) FROM sched.tasks WHERE state = 'pending'"),
	'1', 'only the far task is still pending');

# In-order delivery: within a range, run_at never decreases in arrival
# order for tasks delivered by the walk.  (Ranges are walked in parallel by
# the workers, so two tasks of different ranges due a moment apart may
# arrive either way round.)
my ($ranges, $disorder) = DelayschedTest::out_of_order_within_ranges($node,
	grep { exists $_->{message}{payload}{n} } @got);
cmp_ok($ranges, '>', 1, "the tasks went through several ranges ($ranges)");
is($disorder, 0, 'scheduled tasks arrived in run_at order within each range');

# Large payloads are announced without the payload.
my $big = 'x' x 9000;
$node->safe_psql('postgres',
	"SELECT sched.add('orders', clock_timestamp(), jsonb_build_object('big', '$big'))");
@got = $listener->wait_for(43, 30);
is(scalar @got, 43, 'task with a large payload was delivered');
ok($got[-1]{message}{payload_omitted} && !exists $got[-1]{message}{payload},
	'large payload omitted from the notification');

# add_many with a task due at once and others seconds ahead: the scanner's
# search beyond the next second keeps its answer (the task an hour ahead)
# for up to a second, so the far tasks must be reported by the commit, or
# they would wait for the 60 s sweep.  A task due now runs a tick first, so
# that the answer is fresh when the batch commits.
for my $round (1 .. 3)
{
	my $count = scalar $listener->received;
	$node->safe_psql('postgres', "SELECT sched.add('orders', clock_timestamp(), '{\"fresh\": $round}')");
	$listener->wait_for($count + 1, 10);
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM sched.add_many('orders',
			ARRAY[clock_timestamp() + interval '50 ms', clock_timestamp() + interval '2.5 s',
				  clock_timestamp() + interval '3 s'],
			array_fill('{"many": $round}'::jsonb, ARRAY[3]))});
	my @many = $listener->wait_for($count + 4, 15);
	my @mine = grep { ($_->{message}{payload}{many} // 0) == $round } @many;
	is(scalar @mine, 3, "round $round: every task of the add_many was delivered");
	my ($worst) = sort { $b <=> $a } map { $_->{late_us} } @mine;
	cmp_ok($worst // 1e9, '<', $DelayschedTest::BEFORE_SWEEP * 1e6,
		"round $round: the ones seconds ahead too, before the sweep (worst @{[ ($worst // 0) / 1000 ]} ms late)");
	DelayschedTest::timing_cmp_ok($worst // 1e9, '<', 1_000_000, "round $round: on time");
}

# Across a second boundary: when the tick that finishes one second finds the
# next one already under way, it walks that second at once instead of
# sleeping until the next task (or, here, the 60 s sweep).
for my $round (1 .. 3)
{
	my $count = scalar $listener->received;
	$node->safe_psql('postgres', q{
		SELECT sched.add('orders', s - interval '50 microseconds', '{"edge": "before"}'),
			   sched.add('orders', s + interval '20 microseconds', '{"edge": "after"}')
		FROM (SELECT date_trunc('second', clock_timestamp()) + interval '2 seconds' AS s) AS t});
	my @edge = $listener->wait_for($count + 2, 10);
	is(scalar @edge, $count + 2, "round $round: both tasks around the second boundary delivered");
	my ($after) = grep { ($_->{message}{payload}{edge} // '') eq 'after' } @edge[ $count .. $#edge ];
	cmp_ok($after->{late_us} // 1e9, '<', $DelayschedTest::BEFORE_SWEEP * 1e6,
		"round $round: the task just after the boundary was not left for a later tick");
}

# The walk cursor: while a burst is being drained, a task committed with a
# run_at before the cursor (in the second being drained) is still delivered
# with the burst, not left behind the cursor until a sweep.  One task per
# tick makes the drain take thousands of ticks; the pointer row is held to
# stop the scanner mid-burst while the task is added.  (10,000 of them: with
# 3,000, a busy machine's slow start of the holding session once let the
# whole burst go out first, in a CI run on 17.)
$node->safe_psql('postgres', "ALTER SYSTEM SET delaysched.batch_size = 1");
$node->reload;
ok(DelayschedTest::poll_until($node, "SHOW delaysched.batch_size", '1', 10), 'one task per tick');
my $count = scalar $listener->received;
my $burst_at = $node->safe_psql('postgres', q{
	SELECT date_trunc('second', clock_timestamp()) + interval '2.5 seconds'});
$node->safe_psql('postgres', qq{
	SELECT count(*) FROM sched.add_many('orders', array_fill('$burst_at'::timestamptz, ARRAY[10000]),
										array_fill('{"burst": 1}'::jsonb, ARRAY[10000]))});
$listener->wait_for($count + 40, 30);
my $walk_holder = DelayschedTest::hold_in_transaction($node,
	'SELECT 1 FROM sched.pointer FOR UPDATE');
my $before_cursor = $node->safe_psql('postgres', qq{
	SELECT sched.add('orders', '$burst_at'::timestamptz - interval '1 millisecond', '{"behind": 1}')});
DelayschedTest::release_session($walk_holder);
@got = $listener->wait_for($count + 10001, 300);
is(scalar @got, $count + 10001, 'the burst and the task behind the cursor were delivered');
my ($behind_at) = grep { $got[$_]{id} == $before_cursor } 0 .. $#got;
ok(defined $behind_at && $behind_at < $#got,
	'the task behind the cursor went out with the burst, not after it');
$node->safe_psql('postgres', "ALTER SYSTEM RESET delaysched.batch_size");
$node->reload;

# A late task held by another transaction does not hold up the other late
# tasks.  Stop the scanner (hold its pointer row) while task A falls behind
# the pointer, lock A in a second session, add B behind the pointer in another
# bucket, then let the scanner go: B is delivered while A is held.
my $before_held = scalar $listener->received;
my $pointer_holder = DelayschedTest::hold_in_transaction($node,
	'SELECT 1 FROM sched.pointer FOR UPDATE');
my $a = $node->safe_psql('postgres',
	"SELECT sched.add('orders', now() - interval '1 hour', '{\"held\": \"a\"}')");
my $a_holder = DelayschedTest::hold_in_transaction($node,
	"SELECT 1 FROM sched.task WHERE id = $a FOR UPDATE");
$node->safe_psql('postgres',
	"SELECT sched.add('orders', now() - interval '1 hour' + interval '1 second', '{\"held\": \"b\"}')");
DelayschedTest::release_session($pointer_holder);
@got = $listener->wait_for($before_held + 1, 30);
is($got[-1]{message}{payload}{held}, 'b', 'a late task is delivered while an older one is held');
# Skipped rows are the backstop sweep's to find: shorten it, then release A.
$node->safe_psql('postgres', "ALTER SYSTEM SET delaysched.sweep_interval = '1s'");
$node->reload;
DelayschedTest::release_session($a_holder);
@got = $listener->wait_for($before_held + 2, 30);
is($got[-1]{message}{payload}{held}, 'a', 'the held one goes at the next sweep once released');

$listener->stop;
$node->stop;
done_testing();
