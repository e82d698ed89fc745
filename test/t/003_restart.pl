# Crash and downtime: stop('immediate') while tasks are falling due, stay
# down while more fall due, restart.  Nothing is lost, the pointer was
# persisted, and the catch-up delivers in run_at order within each range.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use Test::More;
use Time::HiRes qw(usleep);

my $node = DelayschedTest::new_node('restart',
	extra_conf => 'max_prepared_transactions = 2');
$node->safe_psql('postgres',
	"SELECT sched.define_biz('orders', ack_timeout => '2 seconds')");

my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'orders');

# 80 tasks, one every 100 ms for 8 s.
my $ids = $node->safe_psql('postgres', q{
	SELECT string_agg(id::text, ',' ORDER BY i)
	FROM (SELECT i, sched.add('orders', clock_timestamp() + i * interval '100 milliseconds',
							  jsonb_build_object('i', i)) AS id
		  FROM generate_series(1, 80) AS i) s});
my %all = map { $_ => 1 } split /,/, $ids;
is(scalar keys %all, 80, '80 tasks scheduled');

# Crash after a quarter of them went out.
my @before = $listener->wait_for(20, 30);
cmp_ok(scalar @before, '>=', 20, 'deliveries began before the crash');

# Hold the scanner: a prepared transaction keeps the pointer row locked
# across the crash, so that after the restart the catch-up waits until a
# listener is back.
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT 1 FROM sched.pointer FOR UPDATE;
	PREPARE TRANSACTION 'hold_scanner'});

# Make the pointer's latest value durable (the scanner commits
# asynchronously; any synchronous commit flushes the WAL before it), then
# remember it.
$node->safe_psql('postgres', 'SELECT txid_current()');
my $pointer_before = $node->safe_psql('postgres',
	"SELECT extract(epoch FROM min(pointer)) FROM sched.time_pointer");
$node->stop('immediate');
@before = $listener->stop;

# Down for three seconds while about thirty tasks fall due.  (This sleep is
# the scenario, not a synchronisation.)
sleep 3;
$node->start;

my $pointer_after = $node->safe_psql('postgres',
	"SELECT extract(epoch FROM min(pointer)) FROM sched.time_pointer");
cmp_ok($pointer_after, '>=', $pointer_before, 'the persisted pointer survived the crash');

my $after_listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'orders');
$node->safe_psql('postgres', "ROLLBACK PREPARED 'hold_scanner'");

# Every task must now be delivered (again, for those whose delivery or ack the
# crash lost) and acknowledged.
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM sched.tasks WHERE state = 'done'", '80', 60),
	'all 80 tasks done after restart');
my @after = $after_listener->stop;

my %seen = map { $_->{id} => 1 } (@before, @after);
my @missing = grep { !$seen{$_} } keys %all;
is(scalar @missing, 0, 'every task was delivered at least once');

# Duplicates only for tasks delivered before the crash whose ack (or whose
# own delivery record) the crash lost: every task delivered twice was
# delivered before the crash.
my %before_ids = map { $_->{id} => 1 } @before;
my %after_count;
$after_count{ $_->{id} }++ for @after;
is(scalar(grep { $after_count{$_} > 1 } keys %after_count), 0,
	'no task delivered twice after the restart');
my @dups = grep { $before_ids{ $_->{id} } } @after;
my @dup_outside = grep { !$before_ids{$_} } keys %after_count;
cmp_ok(scalar @dup_outside, '>=', 30, 'tasks that fell due while down arrived after the restart');
note(scalar(@dups) . ' deliveries repeated a delivery from before the crash');

# The catch-up walks every range's pointer forward: first attempts after the
# restart arrive in run_at order within each range.
my ($ranges, $disorder) = DelayschedTest::out_of_order_within_ranges($node,
	grep { $_->{attempt} == 1 } @after);
cmp_ok($ranges, '>', 1, "the catch-up went through several ranges ($ranges)");
is($disorder, 0, 'catch-up delivered in run_at order within each range');

my @early = grep { $_->{late_us} < 0 } (@before, @after);
is(scalar @early, 0, 'nothing delivered early, before or after the crash');

is($node->safe_psql('postgres',
	"SELECT count(*) FROM sched.tasks WHERE state <> 'done'"), '0', 'nothing left behind');

$node->stop;
done_testing();
