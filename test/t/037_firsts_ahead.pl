# The tasks that go first (src/core/firsts_ahead.c): while a burst of one
# type drains, a task of the same type with a priority above 0, and a firing
# of a schedule of that type, go out ahead of the burst; a task of priority
# 0 due at the same time stays behind it, in the walk's order.
#
# The measure is order, not time: how many of the burst's tasks of the same
# range (door) were delivered after the task.  A range delivers in (run_at,
# id) order, so a task due after the burst has none after it unless
# something took it out of that order.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use Test::More;

my $node = DelayschedTest::new_node('firsts');
sub sql { return $node->safe_psql('postgres', $_[0]); }

# Deliveries keep their leases for an hour: nothing is delivered twice.
sql("SELECT sched.define_biz('bulk', ack_timeout => '1 hour')");

# Large enough that a range of it is still draining a second after it fell
# due on any machine this runs on (at full speed about 60,000 a second here):
# not scaled down on later majors (DelayschedTest::scaled), as a burst that
# drains within the second would test nothing.
my $burst = 200_000;
my $keyed = 1_000;
my $at = sql("SELECT date_trunc('second', clock_timestamp()) + interval '15 seconds'");

# A schedule of the type firing every second from the burst's second: its
# firing at the burst's instant, made now, comes before the burst in
# (run_at, id) order anyway; the next ones are made as each is delivered.
sql("SELECT sched.define_schedule('beat', 'bulk', '* * * * * *', starts_at => '$at')");
sql("SELECT count(*) FROM sched.add_many('bulk', array_fill('$at'::timestamptz, ARRAY[$burst - $keyed]))");
# Some of the burst with a key: a task of that key with a priority waits
# for them (a key's tasks go in run_at order within a range).
sql("SELECT count(*) FROM sched.add_many('bulk', array_fill('$at'::timestamptz, ARRAY[$keyed]),
	keys => array_fill('k'::text, ARRAY[$keyed]))");
my $first = sql("SELECT sched.add('bulk', '$at'::timestamptz + interval '200 ms', '{\"first\": true}', priority => 5)");
my $plain = sql("SELECT sched.add('bulk', '$at'::timestamptz + interval '200 ms', '{\"plain\": true}')");
my $keyed_first = sql("SELECT sched.add('bulk', '$at'::timestamptz + interval '200 ms', '{\"keyed\": true}',
	key => 'k', priority => 5)");
is(sql("SELECT clock_timestamp() < '$at'::timestamptz"), 't', 'the burst was added before it fell due');

ok(DelayschedTest::poll_until($node,
	"SELECT clock_timestamp() > '$at'::timestamptz + interval '1 second' AND NOT EXISTS
		(SELECT FROM sched.task WHERE biz_type = 'bulk' AND state = 'p' AND run_at <= clock_timestamp())",
	't', 240), 'the burst drained');
is(sql("SELECT count(*) FROM sched.task WHERE biz_type = 'bulk' AND schedule IS NULL AND state = 'd'"),
	$burst + 3, 'every task was delivered');
is(sql("SELECT count(*) FROM sched.task WHERE biz_type = 'bulk' AND attempt > 1"), 0,
	'none twice');
note(sprintf('the burst drained in %.2f s', sql("SELECT extract(epoch FROM max(delivered_at) - '$at')
	FROM sched.task WHERE biz_type = 'bulk' AND schedule IS NULL")));

# Of the burst's tasks in the same range as task $id, how many went out after it.
sub burst_after
{
	my ($id) = @_;
	return sql(qq{
		SELECT count(*) FROM sched.task b, sched.task t
		WHERE t.id = $id AND b.door = t.door AND b.biz_type = 'bulk' AND b.run_at = '$at'
		  AND b.schedule IS NULL AND b.delivered_at > t.delivered_at});
}
my $range_burst = sql("SELECT count(*) FROM sched.task b, sched.task t
	WHERE t.id = $first AND b.door = t.door AND b.run_at = '$at' AND b.schedule IS NULL");
my $ahead = burst_after($first);
note("priority 5: $ahead of its range's $range_burst burst tasks went out after it");
cmp_ok($ahead, '>', $range_burst / 2, 'a task of priority 5 went out ahead of most of its range\'s backlog');
is(burst_after($plain), 0, 'a task of priority 0 due with it went out after the whole backlog of its range');
is(sql("SELECT count(*) FROM sched.task b, sched.task t
	WHERE t.id = $keyed_first AND b.door = t.door AND b.key = 'k' AND b.id <> t.id
	  AND b.delivered_at > t.delivered_at"), 0,
	'a task of priority 5 with a key went out after its key\'s tasks in the backlog of its range');

# The firing due a second after the burst (made when the burst's own firing
# went out), while the backlog was still draining.
my $firing = sql("SELECT id FROM sched.task WHERE schedule = 'beat' AND run_at = '$at'::timestamptz + interval '1 second'");
isnt($firing, '', 'the schedule fired a second after the burst');
SKIP:
{
	skip 'no firing a second after the burst', 2 if $firing eq '';
	cmp_ok(sql("SELECT count(*) FROM sched.task WHERE biz_type = 'bulk' AND schedule IS NULL
		AND delivered_at > '$at'::timestamptz + interval '1 second'"), '>', 0,
		'the backlog was still draining when that firing fell due');
	my $fired_ahead = burst_after($firing);
	note("firing: $fired_ahead of its range's burst tasks went out after it");
	cmp_ok($fired_ahead, '>', 0, 'the firing went out ahead of its range\'s backlog');
}

$node->stop;
done_testing();
