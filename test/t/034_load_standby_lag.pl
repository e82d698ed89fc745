# Load control's second signal (delaysched.load_max_standby_lag,
# src/stats/load.c): a watched standby with more WAL left to replay than the
# setting holds deliveries back, even before a burst begins, and they recover
# once it has caught up.  The standby's replay is paused to make it fall
# behind: a lag the test controls exactly.  Checked: the lag is shown, the
# controller holds back and says why, the deliveries in a window stay within
# the allowance (an upper bound, which a slow machine cannot break), it lets
# go, every task is delivered exactly once, and which standbys are watched
# follows delaysched.load_standbys and synchronous_standby_names.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Cluster;
use Test::More;
use Time::HiRes qw(time usleep);

my $primary = DelayschedTest::new_node('lagged',
	init => { allows_streaming => 1 },
	extra_conf => <<'EOC');
delaysched.load_control = on
delaysched.load_min_deliveries_per_second = 50
delaysched.load_max_standby_lag = 256kB
delaysched.load_standbys = all
EOC
$primary->safe_psql('postgres', q{SELECT sched.define_biz('orders', ack_timeout => '1 hour')});
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('replica');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
# Replies to the primary every second, not ten, while no WAL comes.
$standby->append_conf('postgresql.conf', 'wal_receiver_status_interval = 1s');
$standby->start;
$primary->wait_for_catchup($standby, 'replay');

my $launcher = q{FROM sched.cluster WHERE role = 'launcher'};
my $held = qq{SELECT flow_control = 'holding back' AND held_back_by LIKE '%standby lag%' $launcher};
ok(DelayschedTest::poll_until($primary,
	qq{SELECT standby_lag_bytes BETWEEN 0 AND 262144 $launcher}, 't', 60),
	'a streaming standby that has caught up: its lag is watched, and small');
# (Polled: a moment's lag over the bound, full-page images after the
# backup's checkpoint say, holds back for a few seconds.)
ok(DelayschedTest::poll_until($primary, $held, 'f', 60), 'nothing is held back for it');

# Replay paused and a table's worth of WAL written: the standby is behind
# while delaysched is quiet, and the burst added next starts held back.
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
ok($standby->poll_query_until('postgres', 'SELECT pg_get_wal_replay_pause_state()', 'paused'),
	'the standby stopped replaying');
$primary->safe_psql('postgres', q{CREATE TABLE ballast AS SELECT g, repeat('x', 500) AS pad FROM generate_series(1, 4000) g});
ok(DelayschedTest::poll_until($primary, $held, 't', 60),
	'a standby behind: load control holds deliveries back before they begin, and says why');
$primary->safe_psql('postgres', q{
	SELECT count(*) FROM sched.add_many('orders', array_fill(now(), ARRAY[3000]),
										array_fill('{}'::jsonb, ARRAY[3000]))});
cmp_ok($primary->safe_psql('postgres', qq{SELECT standby_lag_bytes $launcher}), '>', 262144,
	'the lag shown is above delaysched.load_max_standby_lag');
cmp_ok($primary->safe_psql('postgres', q{
	SELECT value FROM sched.metric_samples() WHERE family = 'delaysched_load_standby_lag_bytes'}),
	'>', 262144, 'and in the metrics');

# While held back, deliveries stay within the allowance.
my $delivered = q{SELECT count(*) FROM sched.task WHERE state = 'd'};
ok(DelayschedTest::poll_until($primary, "SELECT ($delivered) > 0", 't', 60),
	'the tasks fall due and deliveries begin');
my $start = time;
my $before = $primary->safe_psql('postgres', $delivered);
my $most = 0;
while (time - $start < 3)
{
	my $allowed = $primary->safe_psql('postgres', qq{
		SELECT coalesce(deliveries_allowed, 1e9) $launcher});
	$most = $allowed if $allowed > $most;
	usleep(100_000);
}
my $count = $primary->safe_psql('postgres', $delivered) - $before;
my $elapsed = time - $start;
# A tenth of a second of the bucket, a tick's rounding, and the reads' lag.
my $bound = $most * ($elapsed + 0.5) + 100;
cmp_ok($count, '<=', $bound,
	sprintf('held back: %d delivered in %.1f s, within %.0f a second allowed', $count, $elapsed, $most));
cmp_ok($primary->safe_psql('postgres', q{SELECT count(*) FROM sched.task WHERE state = 'p'}),
	'>', 0, 'the burst is not all delivered at once');

# Replay resumes: the standby catches up, the burst drains, the limit goes.
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
ok(DelayschedTest::poll_until($primary, q{SELECT count(*) FROM sched.task WHERE state <> 'd'}, '0', 300),
	'the standby caught up: every task delivered');
is($primary->safe_psql('postgres', q{
	SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || max(attempt) FROM sched.task}),
	'3000 3000 1', 'each once, at its first attempt');
ok(DelayschedTest::poll_until($primary,
	qq{SELECT flow_control = 'holding back' $launcher}, 'f', 60),
	'the backlog gone: load control lets go');

# Which standbys: the synchronous ones only, and this one is not...
$primary->append_conf('postgresql.conf', 'delaysched.load_standbys = synchronous');
$primary->reload;
ok(DelayschedTest::poll_until($primary, qq{SELECT standby_lag_bytes IS NULL $launcher}, 't', 30),
	'load_standbys = synchronous: an asynchronous standby is not watched');
# ... until synchronous_standby_names lists it.
$primary->append_conf('postgresql.conf', q{synchronous_standby_names = 'replica'});
$primary->reload;
ok(DelayschedTest::poll_until($primary, qq{SELECT standby_lag_bytes IS NOT NULL $launcher}, 't', 30),
	'a synchronous standby is watched');
# And -1: standbys left out.
$primary->append_conf('postgresql.conf', 'delaysched.load_max_standby_lag = -1');
$primary->reload;
ok(DelayschedTest::poll_until($primary, qq{SELECT standby_lag_bytes IS NULL $launcher}, 't', 30),
	'load_max_standby_lag = -1: no standby is watched');
is($primary->safe_psql('postgres', q{
	SELECT value FROM sched.metric_samples() WHERE family = 'delaysched_load_standby_lag_bytes'}),
	'-1', 'and the metric says -1');
# Nor is anything held back for it: a hold from before (a moment's lag on
# a slow machine) lets go, and three seconds of quiet bring no cut (an
# absence has no event to poll for).
# ('open', or 'starting' if this test's own sessions count as an
# application: either way, not holding back.)
ok(DelayschedTest::poll_until($primary, qq{SELECT flow_control <> 'holding back' $launcher}, 't', 60),
	'load_max_standby_lag = -1: load control lets go');
my $cuts = q{SELECT value FROM sched.metric_samples() WHERE family = 'delaysched_load_cuts_total'};
my $cuts_before = $primary->safe_psql('postgres', $cuts);
my $holding = 0;
$start = time;
while (time - $start < 3)
{
	$holding++ if $primary->safe_psql('postgres', qq{SELECT flow_control $launcher}) eq 'holding back';
	usleep(100_000);
}
is($holding . ' ' . $primary->safe_psql('postgres', $cuts), '0 ' . $cuts_before,
	'load_max_standby_lag = -1: nothing held back, no cut');

$standby->stop;
$primary->stop;
done_testing();
