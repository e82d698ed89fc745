# Consumer pace (delaysched.consumer_pace, src/core/pace.c): a LISTEN
# consumer whose work per task grows from 10 ms to 200 ms gets 150 tasks
# due over 10 seconds.  It falls behind a third of the way in; what it was
# sent and has not worked waits in its own queue, and without consumer
# pace the leases of that queue's tail run out and the tasks are sent
# again, to the same queue (a retry storm).  With it, acknowledgements
# after half the lease hold the type to a cap of deliveries awaiting
# acknowledgement, and the rest wait in the database until the consumer
# takes them.  Checked: without, leases run out (the scenario overloads
# the consumer); with, the type was held, the consumer's queue stayed
# shorter, every task was done exactly once and no lease (or at most a few,
# on a stalled machine) ran out, and the hold ended once the consumer
# caught up.  Counts only; no timing bound.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $tasks = 150;
my $node = DelayschedTest::new_node('pace');

# A type with a 6-second lease: an acknowledgement after 3 seconds is late.
sub define_type
{
	my ($name) = @_;
	$node->safe_psql('postgres', qq{
		SELECT sched.define_biz('$name', ack_timeout => '6 s', max_attempts => 50,
								min_backoff => '1 s', max_backoff => '2 s');
		SELECT count(*) FROM sched.add_many('$name',
			ARRAY(SELECT now() + interval '1 second' + i * interval '1 second' * 10 / $tasks
				  FROM generate_series(1, $tasks) i),
			array_fill('{}'::jsonb, ARRAY[$tasks]))});
}

sub start_consumer
{
	my ($name, $out) = @_;
	my $h = IPC::Run::start(
		[ 'python3', "$FindBin::Bin/../slow_consumer.py", '--start-ms', '10', '--end-ms', '200',
		  '--ramp-s', '8', '--count', $tasks, '--timeout', '240',
		  $node->connstr('postgres'), $name ],
		'<', \undef, '>', $out, '2>', $out);
	my $deadline = time + 30;
	until ($$out =~ /^listening$/m)
	{
		die "slow_consumer.py did not start: $$out" if time > $deadline || !$h->pumpable;
		$h->pump_nb;
		usleep(10_000);
	}
	return $h;
}

# The lines the consumer printed: ids acknowledged (true) and the most
# notifications that waited in it at once.
sub consumer_lines
{
	my ($out) = @_;
	my (%acked, $max_waiting);
	for my $line (split /\n/, $out)
	{
		$max_waiting = $1 if $line =~ /^max_waiting (\d+)$/;
		my ($recv, $ack, $id, $attempt, $answer, $waiting) = split /\t/, $line;
		next unless defined $waiting;
		$acked{$id}++ if $answer eq 't';
		$max_waiting = $waiting if !defined $max_waiting || $waiting > $max_waiting;
	}
	return (\%acked, $max_waiting // 0);
}

my $expired = q{SELECT coalesce(sum(value), 0)::int FROM sched.metric_samples()
	WHERE metric = 'delaysched_tasks_ack_timeouts_total' AND biz_type = '%s'};

###########################################################################
# 1. Without consumer pace: the consumer's leases run out.
###########################################################################
$node->append_conf('postgresql.conf', "delaysched.consumer_pace = off\n");
$node->reload;
is($node->safe_psql('postgres', 'SHOW delaysched.consumer_pace'), 'off', 'consumer pace off');
define_type('unpaced');
my $out_off = '';
my $consumer = start_consumer('unpaced', \$out_off);
ok(DelayschedTest::poll_until($node, sprintf("SELECT ($expired) > 0", 'unpaced'), 't', 120),
	'without consumer pace, leases of the slow consumer ran out');
# Enough seen: what its queue held so far is the figure compared below.
$consumer->pump_nb;
$consumer->kill_kill;
$consumer->finish;
my (undef, $off_waiting) = consumer_lines($out_off);
cmp_ok($node->safe_psql('postgres', q{SELECT sched.drop_biz('unpaced', cancel_tasks => true)}), '>', 0,
	'the first type dropped, its tasks cancelled');

###########################################################################
# 2. With it: held to the consumer's pace, nothing sent twice.
###########################################################################
$node->append_conf('postgresql.conf', "delaysched.consumer_pace = on\n");
$node->reload;
ok(DelayschedTest::poll_until($node, 'SELECT current_setting($$delaysched.consumer_pace$$)', 'on', 30),
	'consumer pace on');
define_type('paced');
my $out_on = '';
$consumer = start_consumer('paced', \$out_on);
my ($held_seen, $max_cap) = (0, 0);
my $deadline = time + 240;
while ($consumer->pumpable && time < $deadline)
{
	my $cap = $node->safe_psql('postgres',
		q{SELECT consumer_cap FROM sched.biz_stats WHERE biz_type = 'paced'});
	if ($cap ne '')
	{
		$held_seen++;
		$max_cap = $cap if $cap > $max_cap;
	}
	$consumer->pump_nb;
	usleep(100_000);
}
$consumer->finish;
my ($acked, $on_waiting) = consumer_lines($out_on);
ok($held_seen > 0, "the type was held to its consumer's pace (cap up to $max_cap)");
is(scalar(keys %$acked), $tasks, 'every task was acknowledged');
is(scalar(grep { $_ != 1 } values %$acked), 0, 'each once');
ok(DelayschedTest::wait_finished($node, 'paced'), 'nothing of the type is left');
is($node->safe_psql('postgres',
	q{SELECT count(*) FILTER (WHERE state = 'done') || '/' || count(*) FROM sched.finished WHERE biz_type = 'paced'}),
	"$tasks/$tasks", 'every task is done');
my $on_expired = $node->safe_psql('postgres', sprintf($expired, 'paced'));
cmp_ok($on_expired, '<=', 3, "with consumer pace, at most a stall's few leases ran out ($on_expired)");
cmp_ok($on_waiting, '<', $off_waiting,
	"the consumer's queue stayed shorter ($on_waiting waiting at most, against $off_waiting without)");
ok(DelayschedTest::poll_until($node,
	q{SELECT consumer_cap IS NULL FROM sched.biz_stats WHERE biz_type = 'paced'}, 't', 30),
	'the hold ended once the consumer caught up');

done_testing();
