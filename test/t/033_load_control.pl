# Load control (delaysched.load_control, src/stats/load.c): while client
# sessions are busier than they were before deliveries began, deliveries per
# second are cut, for the drain's parked tasks and the scanners' ticks alike;
# when the sessions are idle again, the limit is lifted.  Sessions waiting
# for a lock are busy sessions (they wait inside a statement), which gives
# the test a load it controls exactly.  Webhooks count too: most of a burst
# of them waits parked for the HTTP worker's claims, which take from the
# same allowance.  Checked: the controller holds back,
# the deliveries in a window stay within what it allowed (an upper bound,
# which a slow machine cannot break), it lets go, and every task is
# delivered exactly once.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = DelayschedTest::new_node('load', extra_conf => <<'EOC');
delaysched.load_control = on
delaysched.load_min_deliveries_per_second = 50
delaysched.http_workers = 1
delaysched.http_max_in_flight = 64
EOC
my $receiver = DelayschedTest::Receiver->start(PostgreSQL::Test::Utils::tempdir);
my $hooks_url = $receiver->url . '/ok/hooks';

# Quiet: "open", or "starting" (a slow start, if this test's own sessions
# count as an application), never "holding back".
my $status = q{SELECT flow_control FROM sched.cluster WHERE role = 'launcher'};
my $held = qq{SELECT ($status) = 'holding back'};
is($node->safe_psql('postgres', $held), 'f', 'quiet: load control does not hold back');

# Nothing is cut before load control knows the usual number of busy
# sessions: about seven seconds of quiet after the start.
ok(DelayschedTest::poll_until($node,
	q{SELECT usual_busy_sessions IS NOT NULL FROM sched.cluster WHERE role = 'launcher'}, 't', 60),
	'the usual number of busy sessions is learnt while quiet');

# A type of its own rate (the drain's path) and one without (the ticks').
$node->safe_psql('postgres', qq{
	SELECT sched.define_biz('paced', ack_timeout => '1 hour', rate_limit => 400);
	SELECT sched.define_biz('free', ack_timeout => '1 hour');
	SELECT sched.define_biz('hooks', 'http', url => '$hooks_url', timeout => '10 seconds');
	SELECT count(*) FROM sched.add_many('paced', array_fill(now(), ARRAY[6000]),
										array_fill('{}'::jsonb, ARRAY[6000]));
});
# (Webhooks answered are done, and no longer in sched.task.)
my $delivered = q{SELECT (SELECT count(*) FROM sched.task WHERE state = 'd')
						 + (SELECT count(*) FROM sched.finished)};
ok(DelayschedTest::poll_until($node, "SELECT ($delivered) >= 400", 't', 60),
	'deliveries of the paced type flow');
# (Not checked here that nothing is held back yet: this test's own polls
# are client sessions, and a busy machine makes them slower while the
# deliveries run, which is what load control reacts to.)

# Three sessions wait for a lock a fourth holds: three busy sessions.
my $holder = DelayschedTest::hold_in_transaction($node, 'SELECT pg_advisory_xact_lock(42)');
my @waiters;
for (1 .. 3)
{
	my ($in, $out) = ("SELECT pg_advisory_xact_lock(42);\n\\q\n", '');
	push @waiters, IPC::Run::start(
		[ 'psql', '-X', '-q', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$out);
}
my $waiting = 0;
my $deadline = time + 30;
while (!$waiting && time < $deadline)
{
	$_->pump_nb for @waiters;
	$waiting = $node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'}) eq '3';
	usleep(50_000) unless $waiting;
}
ok($waiting, 'three sessions wait for the lock');

ok(DelayschedTest::poll_until($node, $held, 't', 60),
	'busy sessions: load control holds deliveries back');
my $allowed = $node->safe_psql('postgres',
	q{SELECT deliveries_allowed FROM sched.cluster WHERE role = 'launcher'});
cmp_ok($allowed, '>=', 50, 'and not below delaysched.load_min_deliveries_per_second');

# While held back, every path together stays within the allowance: count
# the deliveries over a few seconds, the tick path's too (a burst of 'free')
# and the HTTP worker's (a burst of 'hooks': eight in flight at most, the
# rest parked, for the worker to claim).
$node->safe_psql('postgres', q{
	SELECT count(*) FROM sched.add_many('free', array_fill(now(), ARRAY[2000]),
										array_fill('{}'::jsonb, ARRAY[2000]));
	SELECT count(*) FROM sched.add_many('hooks', array_fill(now(), ARRAY[2000]),
										array_fill('{}'::jsonb, ARRAY[2000]))});
my $by_type = q{SELECT string_agg(biz_type || ' ' || n, ', ' ORDER BY biz_type) FROM (
	SELECT biz_type, count(*) AS n FROM (SELECT biz_type FROM sched.task WHERE state = 'd'
										UNION ALL SELECT biz_type FROM sched.finished) d
	GROUP BY biz_type) s};
my $start = time;
my $before = $node->safe_psql('postgres', $delivered);
my $before_by_type = $node->safe_psql('postgres', $by_type);
my $most = 0;
while (time - $start < 3)
{
	my $a = $node->safe_psql('postgres', q{
		SELECT coalesce(deliveries_allowed, 1e9) FROM sched.cluster WHERE role = 'launcher'});
	$most = $a if $a > $most;
	usleep(100_000);
}
my $count = $node->safe_psql('postgres', $delivered) - $before;
my $elapsed = time - $start;
note("delivered before the window: $before_by_type; after: " . $node->safe_psql('postgres', $by_type));
# A tenth of a second of the bucket, a drain's and a tick's rounding, and
# the reads' own lag.
my $bound = $most * ($elapsed + 0.5) + 100;
cmp_ok($count, '<=', $bound,
	sprintf('held back: %d delivered in %.1f s, within %.0f a second allowed', $count, $elapsed, $most));
cmp_ok($node->safe_psql('postgres', q{SELECT count(*) FROM sched.task WHERE biz_type = 'free' AND state = 'p'}),
	'>', 0, 'the unlimited type waits too: it is not all delivered at once');
cmp_ok($node->safe_psql('postgres', q{SELECT count(*) FROM sched.task WHERE biz_type = 'hooks'}),
	'>', 0, 'so do the webhooks');

# The lock goes: the sessions finish and are idle; the limit is lifted.
DelayschedTest::release_session($holder, 1);
$_->finish for @waiters;
# (At the minimum of 50 a second, the 10,000 tasks take 200 s at most.)
ok(DelayschedTest::poll_until($node,
	q{SELECT count(*) FROM sched.task WHERE state <> 'd' OR biz_type = 'hooks'}, '0', 300),
	'every task delivered');
is($node->safe_psql('postgres', q{
	SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || max(attempt)
	FROM sched.task WHERE state = 'd'}), '8000 8000 1', 'each once, at its first attempt');
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE state = 'done') || ' ' || max(attempt)
	FROM sched.finished WHERE biz_type = 'hooks'}), '2000 1', 'every webhook done, at its first attempt');
my %hook_ids;
$hook_ids{ $_->{json}{id} }++ for $receiver->requests('/ok/hooks');
is(scalar(keys %hook_ids) . ' ' . scalar(grep { $_ > 1 } values %hook_ids), '2000 0',
	'the receiver got each webhook once');
ok(DelayschedTest::poll_until($node, $held, 'f', 60), 'the backlog gone: load control lets go');
cmp_ok($node->safe_psql('postgres', q{
	SELECT value FROM sched.metric_samples() WHERE family = 'delaysched_load_cuts_total'}),
	'>', 0, 'the cuts are counted in the metrics');

# Off: the launcher's row says so and nothing is held back.
$node->append_conf('postgresql.conf', 'delaysched.load_control = off');
$node->reload;
ok(DelayschedTest::poll_until($node, $status, 'off', 30), 'off after a reload');

$receiver->stop;
$node->stop;
done_testing();
