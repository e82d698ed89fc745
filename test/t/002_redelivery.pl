# Unacknowledged deliveries: redelivered after ack_timeout with attempt + 1,
# dead after max_attempts, revived by sched.retry.  Pull types: announced,
# claimed, and claimable again when the lease runs out.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use Test::More;

my $node = DelayschedTest::new_node('redelivery');
$node->safe_psql('postgres',
	"SELECT sched.define_biz('flaky', ack_timeout => '1 second', max_attempts => 3)");

# A listener that never acknowledges.
my $listener = DelayschedTest::Listener->start($node, 'postgres', [], 'flaky');
my $id = $node->safe_psql('postgres',
	"SELECT sched.add('flaky', clock_timestamp() + interval '200 milliseconds', '{\"k\": 1}')");

my @got = $listener->wait_for(3, 30);
is(scalar @got, 3, 'delivered three times');
is_deeply([ map { $_->{attempt} } @got ], [ 1, 2, 3 ], 'attempts count up');
is_deeply([ map { $_->{id} } @got ], [ $id, $id, $id ], 'the same task each time');
for my $i (1 .. $#got)
{
	my $gap = $got[$i]{recv_us} - $got[ $i - 1 ]{recv_us};
	cmp_ok($gap, '>=', 950_000, "redelivery $i waited for the ack timeout (" . int($gap / 1000) . " ms)");
}

ok(DelayschedTest::poll_until($node,
	"SELECT state FROM sched.tasks WHERE id = $id", 'dead', 10),
	'dead after max_attempts');
like($node->safe_psql('postgres', "SELECT last_error FROM sched.tasks WHERE id = $id"),
	qr/not acknowledged within 00:00:01 \(attempt 3 of 3\)/, 'last_error says why');
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
# task claimable again and the channel is told again.
$node->safe_psql('postgres',
	"SELECT sched.define_biz('inbox', delivery => 'pull', ack_timeout => '1 second')");
my $pull = DelayschedTest::Listener->start($node, 'postgres', [], 'inbox');
my $pid = $node->safe_psql('postgres',
	"SELECT sched.add('inbox', clock_timestamp() + interval '100 milliseconds', '{\"p\": 1}')");
@got = $pull->wait_for(1, 30);
is_deeply($got[0]{message}, { biz_type => 'inbox', ready => JSON::PP::true }, 'pull type announced');
is($node->safe_psql('postgres', "SELECT id, attempt FROM sched.claim('inbox')"),
	"$pid|1", 'claimed with attempt 1');
is($node->safe_psql('postgres', "SELECT count(*) FROM sched.claim('inbox')"), '0',
	'a leased task is not claimed twice');
@got = $pull->wait_for(2, 30);
is(scalar @got, 2, 'announced again when the lease expired');
is($node->safe_psql('postgres', "SELECT id, attempt FROM sched.claim('inbox')"),
	"$pid|2", 'claimed again with attempt 2');
is($node->safe_psql('postgres', "SELECT sched.ack($pid)"), 't', 'acknowledged');

# A pull type turned notify: a task announced and waiting for a claim is
# delivered by NOTIFY instead of waiting for ever.
my $waiting = $node->safe_psql('postgres',
	"SELECT sched.add('inbox', clock_timestamp(), '{\"p\": 2}')");
@got = $pull->wait_for(3, 30);
is(scalar @got, 3, 'announced');
$node->safe_psql('postgres',
	"SELECT sched.define_biz('inbox', delivery => 'notify', ack_timeout => '1 second')");
@got = $pull->wait_for(4, 30);
is($got[3]{id}, $waiting, 'the announced task is delivered by NOTIFY once the type is notify');
is($node->safe_psql('postgres', "SELECT sched.ack($waiting)"), 't', 'and acknowledged');
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
my $ticks_before = $node->safe_psql('postgres', 'SELECT ticks FROM sched.workers');
sleep 2;	# the window being measured
my $ticks = $node->safe_psql('postgres', 'SELECT ticks FROM sched.workers') - $ticks_before;
cmp_ok($ticks, '<', 20, "the scanner did not spin on the held lease ($ticks ticks in 2 s)");
DelayschedTest::release_session($acker);
@got = $slow->wait_for(2, 30);
is($got[1]{attempt}, 2, 'redelivered once the ack rolled back');
$node->safe_psql('postgres', "SELECT sched.ack($sid)");
$slow->stop;

# Retention: finished tasks go once they are older than delaysched.retention
# (a reload is enough); dead ones follow delaysched.dead_retention.
is($node->safe_psql('postgres', "SELECT count(*) FROM sched.tasks WHERE state = 'done'"),
	'4', 'done tasks are kept for the retention');
$node->safe_psql('postgres', "ALTER SYSTEM SET delaysched.retention = '1s'");
$node->reload;
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM sched.tasks WHERE state = 'done'", '0', 30),
	'done tasks removed after the retention');

$node->stop;
done_testing();
