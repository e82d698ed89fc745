# Unacknowledged deliveries: redelivered after ack_timeout and the type's
# backoff with attempt + 1, dead after max_attempts, revived by sched.retry.  Pull types: announced,
# claimed, and claimable again when the lease runs out.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use Test::More;

my $node = DelayschedTest::new_node('redelivery');
$node->safe_psql('postgres',
	"SELECT sched.define_biz('flaky', ack_timeout => '1 second', max_attempts => 3, min_backoff => '2 seconds')");

# A listener that never acknowledges.
my $listener = DelayschedTest::Listener->start($node, 'postgres', [], 'flaky');
my $id = $node->safe_psql('postgres',
	"SELECT sched.add('flaky', clock_timestamp() + interval '200 milliseconds', '{\"k\": 1}')");

# Each redelivery happens only once the previous lease has run out and the
# type's backoff has passed (at least min_backoff, 2 s: longer than the
# sweep takes to find the lease, so a redelivery at once would show):
# compare the server's own times (the lease of attempt N against the
# delivery time of attempt N + 1), not arrival times at the client.
my @got;
my $previous_lease;
for my $attempt (1 .. 3)
{
	@got = $listener->wait_for($attempt, 30);
	is(scalar @got, $attempt, "delivery $attempt arrived");
	# (sched.tasks, not sched.task: on a busy machine the last attempt's
	# lease can run out before this read, and the task is dead by then.)
	my ($delivered_at, $lease_until) = split /\|/, $node->safe_psql('postgres',
		"SELECT extract(epoch FROM delivered_at), extract(epoch FROM lease_until)
		 FROM sched.tasks WHERE id = $id AND attempt = $attempt");
	if ($attempt > 1)
	{
		cmp_ok($delivered_at, '>=', $previous_lease + 2,
			"attempt $attempt was not delivered before the lease of attempt " . ($attempt - 1)
			  . ' ran out and min_backoff passed');
	}
	$previous_lease = $lease_until;
}
is_deeply([ map { $_->{attempt} } @got ], [ 1, 2, 3 ], 'attempts count up');
is_deeply([ map { $_->{id} } @got ], [ $id, $id, $id ], 'the same task each time');

ok(DelayschedTest::poll_until($node,
	"SELECT state FROM sched.tasks WHERE id = $id", 'dead', 10),
	'dead after max_attempts');
like($node->safe_psql('postgres', "SELECT last_error FROM sched.tasks WHERE id = $id"),
	qr/ack_timeout: not acknowledged within 00:00:01 \(attempt 3 of 3\)/, 'last_error says why');
is($node->safe_psql('postgres',
	"SELECT dead FROM sched.biz_stats WHERE biz_type = 'flaky'"), '1', 'biz_stats counts it dead');

# Revive it: delivered again, attempts counted afresh.
is($node->safe_psql('postgres', "SELECT sched.retry($id)"), 't', 'retry revives the dead task');
@got = $listener->wait_for(4, 30);
is(scalar @got, 4, 'revived task delivered');
is($got[3]{attempt}, 1, 'revived task starts again at attempt 1');
is($node->safe_psql('postgres', "SELECT sched.ack($id)"), 't', 'ack of the revived delivery');
is($node->safe_psql('postgres', "SELECT state FROM sched.tasks WHERE id = $id"), 'done', 'done after ack');
$listener->stop;

# Pull: the channel is told, the consumer claims; an expired lease makes the
# task claimable again and the channel is told again.  (A lease of 3 s: the
# second claim and the acknowledgement below must come within one, and on a
# busy machine a new psql can take most of a second.)
$node->safe_psql('postgres',
	"SELECT sched.define_biz('inbox', delivery => 'pull', ack_timeout => '3 seconds')");
my $pull = DelayschedTest::Listener->start($node, 'postgres', [], 'inbox');
my $pid = $node->safe_psql('postgres',
	"SELECT sched.add('inbox', clock_timestamp() + interval '100 milliseconds', '{\"p\": 1}')");
@got = $pull->wait_for(1, 30);
is_deeply($got[0]{message}, { biz_type => 'inbox', ready => JSON::PP::true }, 'pull type announced');
# Two claims in a row, well within the 1 s lease: the second finds
# nothing.  (The first polls: a claim skips the task while a scanner's tick
# holds it.)
ok(DelayschedTest::poll_until($node, "SELECT id || '|' || attempt FROM sched.claim('inbox')", "$pid|1", 30),
	'claimed with attempt 1');
is($node->safe_psql('postgres', "SELECT count(*) FROM sched.claim('inbox')"), '0',
	'and not claimed twice while leased');
@got = $pull->wait_for(2, 30);
is(scalar @got, 2, 'announced again when the lease expired');
ok(DelayschedTest::poll_until($node, "SELECT id || '|' || attempt FROM sched.claim('inbox')", "$pid|2", 30),
	'claimed again with attempt 2');
is($node->safe_psql('postgres', "SELECT sched.ack($pid)"), 't', 'acknowledged');

# A pull type turned notify: a task announced and waiting for a claim is
# delivered by NOTIFY instead of waiting for ever.
my $waiting = $node->safe_psql('postgres',
	"SELECT sched.add('inbox', clock_timestamp(), '{\"p\": 2}')");
@got = $pull->wait_for(3, 30);
is(scalar @got, 3, 'announced');
# (Leases of a minute from here on: nothing below waits for one to expire.)
$node->safe_psql('postgres',
	"SELECT sched.define_biz('inbox', delivery => 'notify', ack_timeout => '1 minute')");
@got = $pull->wait_for(4, 30);
is($got[3]{id}, $waiting, 'the announced task is delivered by NOTIFY once the type is notify');
is($node->safe_psql('postgres', "SELECT sched.ack($waiting)"), 't', 'and acknowledged');

# The same switch while a task falls due during the switch's transaction:
# the scanner must not mark it announced under the old definition after the
# reset has run.
$node->safe_psql('postgres', "SELECT sched.define_biz('inbox', delivery => 'pull')");
my $switch = DelayschedTest::hold_in_transaction($node,
	"SELECT sched.define_biz('inbox', delivery => 'notify', ack_timeout => '1 minute')");
my $during = $node->safe_psql('postgres',
	"SELECT sched.add('inbox', clock_timestamp(), '{\"p\": 3}')");
DelayschedTest::release_session($switch, 1);
@got = $pull->wait_for(5, 30);
is($got[4]{id}, $during, 'a task due during the switch is delivered by NOTIFY');
is($node->safe_psql('postgres', "SELECT sched.ack($during)"), 't', 'and acknowledged');
$pull->stop;

# An expired lease held by another transaction (an acknowledgement in
# progress) must not make the scanner spin: it waits for its next sweep.
$node->safe_psql('postgres',
	"SELECT sched.define_biz('slow', ack_timeout => '1 second')");
my $slow = DelayschedTest::Listener->start($node, 'postgres', [], 'slow');
my $sid = $node->safe_psql('postgres', "SELECT sched.add('slow', clock_timestamp())");
@got = $slow->wait_for(1, 30);
is(scalar @got, 1, 'slow task delivered');
my $acker = DelayschedTest::hold_in_transaction($node, "SELECT sched.ack($sid)");
ok(DelayschedTest::poll_until($node,
	"SELECT lease_until < clock_timestamp() FROM sched.task WHERE id = $sid", 't', 10),
	'its lease expired while the ack is in progress');
my $ticks_before = $node->safe_psql('postgres', "SELECT sum(ticks) FROM sched.workers WHERE role = 'scanner'");
sleep 2;	# the window being measured
my $ticks = $node->safe_psql('postgres', "SELECT sum(ticks) FROM sched.workers WHERE role = 'scanner'") - $ticks_before;
# Every range is swept once a second (8 ranges: 16 ticks in 2 s); a spin
# makes thousands.
cmp_ok($ticks, '<', 40, "the workers did not spin on the held lease ($ticks ticks in 2 s)");
DelayschedTest::release_session($acker);
@got = $slow->wait_for(2, 30);
is($got[1]{attempt}, 2, 'redelivered once the ack rolled back');
# (Its lease is a second again: on a busy machine it can run out before the
# acknowledgement comes, and the task is delivered once more.  Acknowledge
# whichever delivery is current.)
ok(DelayschedTest::poll_until($node, "SELECT sched.ack($sid)", 't', 30),
	'and acknowledged');
$slow->stop;

# Retention: finished tasks go once they are older than delaysched.retention
# (a reload is enough); dead ones follow delaysched.dead_retention.
is($node->safe_psql('postgres', "SELECT count(*) FROM sched.tasks WHERE state = 'done'"),
	'5', 'done tasks are kept for the retention');
$node->safe_psql('postgres', "ALTER SYSTEM SET delaysched.retention = '1s'");
$node->reload;
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM sched.tasks WHERE state = 'done'", '0', 30),
	'done tasks removed after the retention');

$node->stop;
done_testing();
