# Fail-over: a standby runs no scanner; once promoted it delivers, from the
# replicated time pointer, the tasks the old primary had scheduled.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Cluster;
use Test::More;

my $primary = DelayschedTest::new_node('primary',
	init => { allows_streaming => 1 },
	extra_conf => 'max_prepared_transactions = 2');
$primary->safe_psql('postgres', "SELECT sched.define_biz('orders')");
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;

# A prepared transaction holding the pointer row survives the fail-over and
# keeps the new primary's scanner waiting until a listener is connected.
# It is taken before the tasks are added, so that none can go out here
# before it, however slow the machine.
$primary->safe_psql('postgres', q{
	BEGIN;
	SELECT 1 FROM sched.pointer FOR UPDATE;
	PREPARE TRANSACTION 'hold_scanner'});
# Tasks due after the fail-over.
$primary->safe_psql('postgres', q{
	SELECT sched.add('orders', clock_timestamp() + interval '1 second' + i * interval '50 milliseconds',
					 jsonb_build_object('i', i))
	FROM generate_series(1, 20) AS i});
$primary->wait_for_catchup($standby);
my $pointer = $primary->safe_psql('postgres', 'SELECT string_agg(extract(epoch FROM pointer)::text, \',\' ORDER BY range_id) FROM sched.time_pointer');
is($standby->safe_psql('postgres', 'SELECT string_agg(extract(epoch FROM pointer)::text, \',\' ORDER BY range_id) FROM sched.time_pointer'),
	$pointer, 'the standby has the primary\'s time pointer');

is($standby->safe_psql('postgres', "SELECT count(*) FROM sched.tasks WHERE state = 'pending'"),
	'20', 'the standby has the tasks');
is($standby->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'delaysched scanner'"),
	'0', 'no scanner runs on a standby');

$primary->stop('immediate');
$standby->promote;
my $listener = DelayschedTest::Listener->start($standby, 'postgres', ['--ack'], 'orders');
$standby->safe_psql('postgres', "ROLLBACK PREPARED 'hold_scanner'");

my @got = $listener->wait_for(20, 30);
is(scalar @got, 20, 'the promoted standby delivered every task');
is(scalar(grep { $_->{late_us} < 0 } @got), 0, 'none early');
my ($ranges, $disorder) = DelayschedTest::out_of_order_within_ranges($standby, @got);
is($disorder, 0, "the new primary walked them in run_at order within each of $ranges ranges");
ok(DelayschedTest::poll_until($standby,
	"SELECT count(*) FROM sched.tasks WHERE state = 'done'", '20', 30), 'all acknowledged');
$listener->stop;

$standby->stop;
done_testing();
