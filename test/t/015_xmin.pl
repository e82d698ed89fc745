# A held xmin horizon: a session that keeps a REPEATABLE READ snapshot open
# (so that nothing can be vacuumed) does not lose or stall tasks, nor stop
# expiry and retention (whose sweeps start where the last left off), and a
# scanner names it in the log once it has held the horizon longer than
# delaysched.xmin_warning, no more often than once per threshold.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

my $node = DelayschedTest::new_node('xmin', extra_conf => "delaysched.xmin_warning = '2s'");
$node->safe_psql('postgres', "SELECT sched.define_biz('held')");
$node->safe_psql('postgres', "SELECT sched.define_biz('short', ack_timeout => '1 second')");

# The snapshot, held idle for the whole test.
my $holder = DelayschedTest::hold_in_transaction($node,
	'SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; SELECT 1');
my $pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity
	 WHERE state = 'idle in transaction' AND backend_xmin IS NOT NULL");
like($pid, qr/^\d+$/, 'the holding session has a snapshot');

# The warning names it.
my $warning = qr/WARNING:  delaysched: process $pid has held back the xmin horizon for \d+ s/;
my $deadline = time + 60;
my $log = '';
until ($log =~ $warning || time > $deadline)
{
	usleep(100_000);
	$log = slurp_file($node->logfile);
}
like($log, $warning, 'a scanner names the process that holds the horizon');
like($log, qr/HINT:  End that transaction, or the session with pg_terminate_backend\($pid\)/,
	'and says how to end it');
my $first_warning = time;

# Tasks while the horizon is held: due over the next three seconds, and
# some already in the past (behind the pointer, for the sweep); delivered
# and acknowledged, each once, nothing left behind, while the dead rows of
# the deliveries and acknowledgements pile up.
my $listener = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'held');
my @ids = split /\n/, $node->safe_psql('postgres',
	"SELECT sched.add('held', clock_timestamp() + g * interval '1.5 milliseconds', jsonb_build_object('g', g))
	 FROM generate_series(1, 2000) g");
push @ids, split /\n/, $node->safe_psql('postgres',
	"SELECT sched.add('held', clock_timestamp() - g * interval '10 seconds', jsonb_build_object('late', g))
	 FROM generate_series(1, 20) g");
my @got = $listener->wait_for(scalar @ids, 60);
is(scalar @got, scalar @ids, 'every task delivered with the horizon held');
is_deeply([ sort { $a <=> $b } map { $_->{id} } @got ], [ sort { $a <=> $b } @ids ],
	'each task once');
ok(DelayschedTest::poll_until($node, 'SELECT count(*) FROM sched.task', '0', 30),
	'all acknowledged, none left unfinished');
ok(!grep({ $_->{message}{attempt} != 1 } @got), 'no redelivery');
ok(DelayschedTest::poll_until($node,
	"SELECT sum(n_dead_tup) >= 4000 FROM pg_stat_user_tables WHERE schemaname = 'sched'", 't', 30),
	'the dead rows of deliveries and acknowledgements stay meanwhile');
$listener->stop;

# Retention goes on while the horizon is held: with a retention of one
# second, the purge removes them all, twice over (the second batch behind the
# first's removed rows, which stay in the index meanwhile).
$node->safe_psql('postgres', "ALTER SYSTEM SET delaysched.retention = '1s'");
$node->reload;
ok(DelayschedTest::poll_until($node, "SELECT count(*) FROM sched.finished", '0', 30),
	'finished tasks removed after the retention');
$node->safe_psql('postgres',
	"SELECT sched.cancel(sched.add('held', clock_timestamp() + interval '1 hour', '{}')) FROM generate_series(1, 50)");
ok(DelayschedTest::poll_until($node, "SELECT count(*) FROM sched.finished", '0', 30),
	'and those finished later too');
$node->safe_psql('postgres', "ALTER SYSTEM RESET delaysched.retention");
$node->reload;

# An acknowledgement that rolls back after the lease ran out: the sweep,
# starting where the previous one left off, still comes back for it.
my $late_listener = DelayschedTest::Listener->start($node, 'postgres', [], 'short');
my $id = $node->safe_psql('postgres', "SELECT sched.add('short', clock_timestamp(), '{}')");
is(scalar($late_listener->wait_for(1, 30)), 1, 'delivered');
my $acker = DelayschedTest::hold_in_transaction($node, "SELECT sched.ack($id)");
ok(DelayschedTest::poll_until($node,
	"SELECT lease_until < clock_timestamp() - interval '1 second' FROM sched.task WHERE id = $id", 't', 30),
	'its lease ran out while the acknowledgement held the row');
DelayschedTest::release_session($acker, 0);
my @again = $late_listener->wait_for(2, 30);
is(scalar @again, 2, 'redelivered once the acknowledgement rolled back');
is($again[1]{attempt}, 2, 'as attempt 2');
$late_listener->stop;

# Not more often than once per threshold (2 s).
my $elapsed = time - $first_warning;
my $count = () = slurp_file($node->logfile) =~ /$warning/g;
cmp_ok($count, '<=', 2 + int($elapsed / 2), "at most one warning per 2 s ($count in ${elapsed}s)");

# Once the snapshot is gone, no warning names it any more.
DelayschedTest::release_session($holder, 0);
my $offset = -s $node->logfile;
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid", '0', 30), 'the holder has gone');
my $quiet_deadline = time + 5;
my $later = '';
while (time < $quiet_deadline)
{
	$later = substr(slurp_file($node->logfile), $offset);
	last if $later =~ $warning;
	usleep(200_000);
}
unlike($later, $warning, 'no warning about it after it ended');

$node->stop;
done_testing();
