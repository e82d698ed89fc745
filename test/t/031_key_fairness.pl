# Fair shares across the keys of one type, without configuration: key A's
# 200,000 tasks due at once do not delay keys B..K, due 20 times a second
# each meanwhile, and A still drains at its own pace.  Order within a key
# stays run_at order within a range: key Z, which has a task in A's backlog,
# waits for it.  By default the test checks counts, duplicates and order,
# and that other keys' tasks went out while A's backlog drained (the walk's
# run_at order alone never lets them); the lateness p99 under 50 ms and A's
# pace are checked with PG_TEST_EXTRA=delaysched_timing.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use Test::More;

my $node = DelayschedTest::new_node('key_fairness');

# Nothing acknowledges here: the deliveries stay leased for an hour, so none
# is delivered twice meanwhile.
$node->safe_psql('postgres', q{SELECT sched.define_biz('tenants', ack_timeout => '1 hour')});

my $bulk_size = 200_000;

# A time far enough ahead that adding the tasks is over before it.
sub due_at
{
	return $node->safe_psql('postgres',
		"SELECT date_trunc('second', clock_timestamp()) + interval '20 seconds'");
}

# Add key A's $bulk_size tasks, all due at $at.
sub add_burst
{
	my ($at) = @_;
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM sched.add_many('tenants', array_fill('$at'::timestamptz, ARRAY[$bulk_size]),
			keys => array_fill('A'::text, ARRAY[$bulk_size]))});
}

# Seconds from $at to A's last delivery, once none of A's is pending.
sub drain_seconds
{
	my ($at) = @_;
	ok(DelayschedTest::poll_until($node, q{
		SELECT EXISTS (SELECT FROM sched.task WHERE biz_type = 'tenants' AND key = 'A' AND state = 'p')},
		'f', 120), "no task of key A is left pending");
	return $node->safe_psql('postgres', qq{
		SELECT extract(epoch FROM max(delivered_at) - '$at'::timestamptz)
		FROM sched.task WHERE biz_type = 'tenants' AND key = 'A'});
}

sub clear
{
	$node->safe_psql('postgres', q{DELETE FROM sched.task WHERE biz_type = 'tenants'});
	$node->safe_psql('postgres', 'VACUUM ANALYZE sched.task');
}

# --- key A alone: its pace, the yardstick below ---
# Only when the timing is checked: otherwise the others' tasks are spread
# over 5 s, more than A takes beside them here.
my $alone_s = 2;
if (DelayschedTest::timing_checked())
{
	my $alone_at = due_at();
	add_burst($alone_at);
	$alone_s = drain_seconds($alone_at);
	note(sprintf "A alone: %d tasks in %.2f s (%.0f/s)", $bulk_size, $alone_s, $bulk_size / $alone_s);
	clear();
}

# --- A's backlog with keys B..K due 20 times a second each meanwhile ---
# Twice when the timing is checked, the lateness of both rounds pooled.
my (@during, @paces);
for my $round (DelayschedTest::timing_checked() ? (1, 2) : (1))
{
	my $bulk_at = due_at();
	add_burst($bulk_at);
	# B..K: one task every 5 ms in turn from 25 ms after A's instant, so
	# each key every 50 ms, for twice as long as A took alone.  Z: one task
	# at A's very instant (after A's in id order: in the backlog), then one
	# every 50 ms like the others.
	my $others = int(2 * $alone_s * 200) + 200;
	$node->safe_psql('postgres', qq{
		SELECT count(*) FROM sched.add_many('tenants',
			ARRAY(SELECT '$bulk_at'::timestamptz + interval '25 milliseconds' + g * interval '5 milliseconds'
				  FROM generate_series(0, $others - 1) g),
			keys => ARRAY(SELECT chr(66 + g % 10) FROM generate_series(0, $others - 1) g));
		SELECT count(*) FROM sched.add_many('tenants',
			ARRAY(SELECT '$bulk_at'::timestamptz + g * interval '50 milliseconds'
				  FROM generate_series(0, $others / 10) g),
			keys => array_fill('Z'::text, ARRAY[$others / 10 + 1]))});
	my $total = $bulk_size + $others + int($others / 10) + 1;

	my $bulk_s = drain_seconds($bulk_at);
	ok(DelayschedTest::poll_until($node, q{
		SELECT EXISTS (SELECT FROM sched.task WHERE biz_type = 'tenants' AND state = 'p')},
		'f', 120), "round $round: no task is left pending");
	is($node->safe_psql('postgres', q{
		SELECT count(*) || ' ' || count(*) FILTER (WHERE state = 'd' AND attempt = 1)
		FROM sched.task WHERE biz_type = 'tenants'}), "$total $total",
		"round $round: every task was delivered, once");

	# Order within a key and range: a task delivered by a later transaction
	# than a task of its key and range due after it is out of order (the
	# rows one transaction delivered share its xmin; within it the messages
	# go in run_at order).
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM (
			SELECT t.delivered_at, t.xmin::text AS tx,
				   lag(t.delivered_at) OVER w AS prev_at, lag(t.xmin::text) OVER w AS prev_tx
			FROM sched.task t WHERE t.biz_type = 'tenants'
			WINDOW w AS (PARTITION BY t.key, t.door ORDER BY t.run_at, t.id)) s
		WHERE s.tx <> s.prev_tx AND s.delivered_at < s.prev_at}), '0',
		"round $round: every key's tasks went out in run_at order within each range");

	# The walk alone sends a range's tasks in run_at order: none of B..K
	# before A's last of its range.  Fair shares send them meanwhile.
	my $a_end = $node->safe_psql('postgres', q{
		SELECT max(delivered_at) FROM sched.task WHERE biz_type = 'tenants' AND key = 'A'});
	cmp_ok($node->safe_psql('postgres', q{
		SELECT count(*) FROM sched.task t
		WHERE t.biz_type = 'tenants' AND t.key BETWEEN 'B' AND 'K'
		  AND t.delivered_at < (SELECT max(a.delivered_at) FROM sched.task a
								WHERE a.biz_type = 'tenants' AND a.key = 'A' AND a.door = t.door)}),
		'>', 0, "round $round: keys B..K had tasks delivered while A's backlog of their range drained");
	# Z's task in the backlog held Z's later ones back until the walk sent it.
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM sched.task t, sched.task z0
		WHERE t.biz_type = 'tenants' AND t.key = 'Z' AND z0.biz_type = 'tenants' AND z0.key = 'Z'
		  AND z0.door = t.door AND z0.run_at < t.run_at AND z0.delivered_at > t.delivered_at
		  AND z0.xmin::text <> t.xmin::text}), '0',
		"round $round: key Z, with a task in the backlog, waited for it");

	push @during, split /\n/, $node->safe_psql('postgres', qq{
		SELECT extract(epoch FROM delivered_at - run_at) * 1000 FROM sched.task
		WHERE biz_type = 'tenants' AND key BETWEEN 'B' AND 'K' AND run_at <= '$a_end'::timestamptz});
	note(sprintf "round %d: A beside the others: %.2f s (%.0f/s), alone %.2f s",
		$round, $bulk_s, $bulk_size / $bulk_s, $alone_s);
	push @paces, $alone_s / $bulk_s;
	clear();
}

DelayschedTest::timing_cmp_ok(scalar @during, '>=', 60, 'at least 60 tasks of B..K fell due while A drained');
note(sprintf "B..K lateness at delivery while A's %d drained (%d tasks): %s",
	$bulk_size, scalar @during, DelayschedTest::lateness_summary(@during));
DelayschedTest::timing_cmp_ok(DelayschedTest::percentile(0.99, @during), '<', 50,
	"B..K's lateness p99 stays under 50 ms while A drains");
if (DelayschedTest::timing_checked())
{
	my $pace = (sort { $a <=> $b } @paces)[-1];
	note(sprintf "A's pace beside the others, the better round: %.2f of its pace alone", $pace);
	DelayschedTest::timing_cmp_ok($pace, '>=', 0.8,
		"A drains at its own pace beside the others (at least 0.8x its pace alone, the better round)");
}

$node->stop;
done_testing();
