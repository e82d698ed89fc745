# sched.pause and sched.resume: a paused type's tasks fall due and stay
# pending (parked), no lease of it is redelivered, sched.claim hands out
# none; after sched.resume every parked task is delivered, once, in run_at
# order within each range, and a pull type's consumers are told.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = DelayschedTest::new_node('pause');
$node->safe_psql('postgres', qq{
	SELECT sched.define_biz('held');
	SELECT sched.define_biz('mark');
	SELECT sched.define_biz('leased', ack_timeout => '3 seconds');
	SELECT sched.define_biz('pulled', 'pull');
	SELECT sched.define_biz('late_wake');
});
my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'held', 'mark', 'pulled',
	'late_wake');

# Wait until the listener has heard a task of 'mark' added now.  A listener
# gets notifications in commit order: whatever was delivered before it has
# arrived by then.
my $marks = 0;
sub heard_so_far
{
	$marks++;
	$node->safe_psql('postgres', "SELECT sched.add('mark', now(), '{\"mark\": $marks}')");
	my $deadline = time + 30;
	while (time < $deadline)
	{
		my @got = $listener->received;
		return @got if grep { ($_->{message}{payload}{mark} // 0) == $marks } @got;
		usleep(10_000);
	}
	die "mark $marks did not arrive";
}

sub of_type
{
	my ($type, @got) = @_;
	return grep { $_->{channel} eq $type && defined $_->{id} } @got;
}

# --- A paused notify type: its tasks fall due and stay pending ------------
is($node->safe_psql('postgres', "SELECT sched.pause('held')"), 't', 'pause says it paused');
is($node->safe_psql('postgres', "SELECT sched.pause('held')"), 'f', 'and that it was paused already');
$node->safe_psql('postgres', qq{
	SELECT sched.add('held', clock_timestamp() + i * interval '10 milliseconds', jsonb_build_object('n', i))
	FROM generate_series(1, 50) i});
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM sched.task WHERE biz_type = 'held' AND state = 'r'", '50', 30),
	'all fifty fell due and were parked');
is(scalar(of_type('held', heard_so_far())), 0, 'none was delivered while paused');
is($node->safe_psql('postgres',
	"SELECT string_agg(DISTINCT state, ',') || ' ' || max(attempt) FROM sched.tasks WHERE biz_type = 'held'"),
	'pending 0', 'they show as pending, never attempted');
is($node->safe_psql('postgres', "SELECT paused, pending, due_now FROM sched.biz_stats WHERE biz_type = 'held'"),
	't|50|50', 'biz_stats shows the type paused with its due backlog');

# --- sched.resume delivers the parked tasks, once, in order ---------------
my $resumed_at = time;
is($node->safe_psql('postgres', "SELECT sched.resume('held')"), 't', 'resume says it resumed');
is($node->safe_psql('postgres', "SELECT sched.resume('held')"), 'f', 'and that it was running already');
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM sched.tasks WHERE biz_type = 'held' AND state = 'done'", '50', 30),
	'every parked task was delivered and acknowledged after resume');
my @held = of_type('held', heard_so_far());
is(scalar(@held), 50, 'each heard once');
my ($ranges, $disorder) = DelayschedTest::out_of_order_within_ranges($node, @held);
is($disorder, 0, "in run_at order within each of $ranges ranges");
my $last_after_resume = (sort { $b <=> $a } map { $_->{recv_us} / 1e6 } @held)[0] - $resumed_at;
cmp_ok($last_after_resume, '<', $DelayschedTest::BEFORE_SWEEP, 'soon after the resume');
DelayschedTest::timing_cmp_ok($last_after_resume, '<', 5,
	'within a few seconds of resume (the sweep, woken by the resume)');

# --- A resume whose wake-up comes late ------------------------------------
# A commit's wake-up is published after the commit is visible; a scanner
# that ticks a range in between, on its regular sweep, does not know of the
# released tasks yet.  The range's row tells it (sched.pointer.behind_from):
# widened to a second here, that moment must not change the order.  Where
# the last sweep stopped (the pointer when it began) lies a second or two
# before the sweep: the tasks fall due over four seconds, and the resume
# follows the last, so that it lies among them.
$node->safe_psql('postgres', qq{
	SELECT sched.pause('late_wake');
	SELECT sched.add('late_wake', clock_timestamp() + i * interval '40 milliseconds', jsonb_build_object('n', i))
	FROM generate_series(1, 100) i});
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM sched.task WHERE biz_type = 'late_wake' AND state = 'r'", '100', 30),
	'late_wake: all hundred fell due and were parked');
$node->safe_psql('postgres', q{
	SET delaysched.debug_commit_wakeup_delay = '1s';
	SELECT sched.resume('late_wake')});
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM sched.tasks WHERE biz_type = 'late_wake' AND state = 'done'", '100', 30),
	'late_wake: every one delivered and acknowledged');
my @late_wake = of_type('late_wake', heard_so_far());
is(scalar(@late_wake), 100, 'late_wake: each heard once');
($ranges, $disorder) = DelayschedTest::out_of_order_within_ranges($node, @late_wake);
is($disorder, 0, "late_wake: in run_at order within each of $ranges ranges, the wake-up a second late");
is($node->safe_psql('postgres', 'SELECT count(*) FROM sched.pointer WHERE behind_from IS NOT NULL'), '0',
	'and the ranges\' marks were cleared by the sweeps that started from them');

# --- A lease that runs out while paused parks its task --------------------
$node->safe_psql('postgres', "SELECT sched.add('leased', now())");
ok(DelayschedTest::poll_until($node,
	"SELECT state || attempt FROM sched.task WHERE biz_type = 'leased'", 'd1', 30),
	'the task was delivered (nobody listens to it)');
$node->safe_psql('postgres', "SELECT sched.pause('leased')");
ok(DelayschedTest::poll_until($node,
	"SELECT state || attempt || (lease_until IS NULL) FROM sched.task WHERE biz_type = 'leased'", 'r1true', 30),
	'when its lease ran out it was parked, not redelivered');
like($node->safe_psql('postgres', "SELECT last_error FROM sched.task WHERE biz_type = 'leased'"),
	qr/^ack_timeout: not acknowledged within/, 'with the reason kept');
$node->safe_psql('postgres', "SELECT sched.resume('leased')");
ok(DelayschedTest::poll_until($node,
	"SELECT state || attempt FROM sched.task WHERE biz_type = 'leased'", 'd2', 30),
	'after resume it was delivered again, as attempt 2');

# --- A paused pull type: nothing to claim, then an announcement -----------
$node->safe_psql('postgres', "SELECT sched.pause('pulled')");
$node->safe_psql('postgres', "SELECT sched.add('pulled', now() - interval '1 second')");
ok(DelayschedTest::poll_until($node,
	"SELECT state FROM sched.task WHERE biz_type = 'pulled'", 'r', 30),
	'the pull task fell due');
is($node->safe_psql('postgres', "SELECT count(*) FROM sched.claim('pulled')"), '0',
	'sched.claim hands out nothing while paused');
my @before = heard_so_far();
is(scalar(grep { $_->{channel} eq 'pulled' } @before), 0, 'and nothing was announced');
$node->safe_psql('postgres', "SELECT sched.resume('pulled')");
my @after = heard_so_far();
is(scalar(grep { $_->{channel} eq 'pulled' && $_->{message}{ready} } @after), 1,
	'resume announced the type');
is($node->safe_psql('postgres', "SELECT count(*) FROM sched.claim('pulled')"), '1',
	'and the task can be claimed');

$listener->stop;
$node->stop;
done_testing();
