# The hand-off (src/http_handoff.c): the scanner leases a due http task to the
# HTTP worker in its own tick and hands it over through shared memory.
# Tasks that fall due one by one all go that way; a rate-limited type's go
# through the worker's claims; a burst larger than the worker's free slots
# is split between the two, each task sent once; a task cancelled, or
# parked again, before the worker reads it is not sent from the hand-off; a
# worker that stops with tasks handed over and not yet read loses none.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

# Eight slots: a hand-off may fill six of them, half of the free ones per
# statement, so a burst of twenty overflows into the claims.
my $node = DelayschedTest::new_node('http_handoff',
	extra_conf => "delaysched.http_workers = 1\ndelaysched.http_max_in_flight = 8\n");
my $receiver = DelayschedTest::Receiver->start(PostgreSQL::Test::Utils::tempdir);
my $base = $receiver->url;

sub sql { return $node->safe_psql('postgres', $_[0]) }

# The HTTP worker's counters: (handed over, claimed).
sub counters
{
	my $holds = sql("SELECT holds FROM sched.workers WHERE role = 'http'");
	$holds =~ /; (\d+) handed over, (\d+) claimed$/ or die "unexpected holds: $holds";
	return ($1, $2);
}

# Poll until every task of $type is finished (done or dead).
sub wait_finished { return DelayschedTest::wait_finished($node, @_) }

# Wait until the process is stopped (SIGSTOP has taken effect).
sub wait_stopped
{
	my ($pid) = @_;
	for (1 .. 500)
	{
		open my $fh, '<', "/proc/$pid/stat" or return 0;
		my $stat = <$fh>;
		close $fh;
		return 1 if $stat =~ /^\d+ \(.*\) T /;
		usleep(10_000);
	}
	return 0;
}

# Stop the HTTP worker with SIGSTOP, but only while it waits in its main
# loop: stopped anywhere else it could hold a spinlock or a lock that the
# scanners and this test need.  Otherwise let it go on and try again.
sub stop_idle_worker
{
	my ($pid) = @_;
	for (1 .. 300)
	{
		kill 'STOP', $pid;
		if (wait_stopped($pid))
		{
			# Its wait event, frozen with it: only its main loop's wait
			# reports Extension, and holds no lock.
			return 1
			  if sql("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $pid") eq 'Extension';
		}
		kill 'CONT', $pid;
		usleep(20_000);
	}
	return 0;
}

ok(DelayschedTest::poll_until($node, "SELECT last_tick IS NOT NULL FROM sched.workers WHERE role = 'http'", 't', 30),
	'the HTTP worker is up');

# --- tasks falling due one by one are handed over, none claimed ---
sql(qq{SELECT sched.define_biz('h_trickle', 'http', url => '$base/ok/trickle')});
my ($handed0, $claimed0) = counters();
sql(q{SELECT sched.add('h_trickle', clock_timestamp() + i * interval '50 ms', jsonb_build_object('i', i))
	  FROM generate_series(1, 20) i});
my @got = $receiver->wait_requests('/ok/trickle', 20, 30);
is(scalar @got, 20, 'every trickling task arrived');
ok(wait_finished('h_trickle'), 'and is done');
my ($handed1, $claimed1) = counters();
is($handed1 - $handed0, 20, 'all 20 were handed over by the scanner');
is($claimed1 - $claimed0, 0, 'none needed a claim');
is(sql(q{SELECT count(*) FROM sched.tasks WHERE biz_type = 'h_trickle' AND (attempt <> 1 OR delivered_at < run_at)}),
	'0', 'each one attempt, none leased before it was due');

# --- a rate-limited type goes through the claims ---
sql(qq{SELECT sched.define_biz('h_limited', 'http', url => '$base/ok/limited', rate_limit => 50)});
sql(q{SELECT sched.add('h_limited', clock_timestamp(), jsonb_build_object('i', i)) FROM generate_series(1, 10) i});
@got = $receiver->wait_requests('/ok/limited', 10, 30);
is(scalar @got, 10, 'every rate-limited task arrived');
ok(wait_finished('h_limited'), 'and is done');
my ($handed2, $claimed2) = counters();
is($handed2 - $handed1, 0, 'none of them was handed over');
is($claimed2 - $claimed1, 10, 'all 10 were claimed');

# --- a burst beyond the free slots: split between hand-off and claims ---
sql(qq{SELECT sched.define_biz('h_burst', 'http', url => '$base/slow/300/burst')});
my @ids = split /\n/, sql(q{SELECT sched.add('h_burst', clock_timestamp(), jsonb_build_object('i', i)) FROM generate_series(1, 20) i});
ok(wait_finished('h_burst'), 'the burst finishes');
@got = $receiver->requests('/slow/300/burst');
my %times;
$times{ $_->{json}{id} }++ for @got;
is(scalar(keys %times), 20, 'every task of the burst arrived');
is(scalar(grep { $_ != 1 } values %times), 0, 'each exactly once');
my ($handed3, $claimed3) = counters();
cmp_ok($handed3 - $handed2, '>=', 1, 'some were handed over (' . ($handed3 - $handed2) . ')');
cmp_ok($claimed3 - $claimed2, '>=', 1, 'the rest were claimed (' . ($claimed3 - $claimed2) . ')');
is(($handed3 - $handed2) + ($claimed3 - $claimed2), 20, 'one request each');

# --- a task whose lease is gone before the worker reads it is not sent ---
my $pid = sql("SELECT pid FROM sched.workers WHERE role = 'http'");
sql(qq{SELECT sched.define_biz('h_gone', 'http', url => '$base/ok/gone')});
sql(qq{SELECT sched.define_biz('h_after', 'http', url => '$base/ok/after')});
ok(stop_idle_worker($pid), 'the HTTP worker is stopped, idle');
my $gone = sql(q{SELECT sched.add('h_gone', clock_timestamp(), '{}')});
ok(DelayschedTest::poll_until($node, "SELECT state FROM sched.tasks WHERE id = $gone", 'delivered', 10),
	'the scanner leased the task to the stopped worker');
sql(q{SELECT sched.drop_biz('h_gone', cancel_tasks => true)});
is(sql("SELECT state FROM sched.tasks WHERE id = $gone"), 'cancelled', 'and it was cancelled while handed over');
kill 'CONT', $pid;
# The worker reads what it was handed in order: once a later task arrives,
# the cancelled one has been read.
sql(q{SELECT sched.add('h_after', clock_timestamp(), '{}')});
is(scalar($receiver->wait_requests('/ok/after', 1, 30)), 1, 'a later task arrives');
is(scalar($receiver->requests('/ok/gone')), 0, 'the cancelled one was never sent');
my ($handed4) = counters();
is($handed4 - $handed3, 1, 'only the later one was started');

# --- a task parked again while handed over is sent once, by a claim ---
# (What the sweep does when a lease runs out, done by hand here.)
sql(qq{SELECT sched.define_biz('h_moved', 'http', url => '$base/ok/moved')});
ok(stop_idle_worker($pid), 'the HTTP worker is stopped, idle');
my $moved = sql(q{SELECT sched.add('h_moved', clock_timestamp(), '{}')});
ok(DelayschedTest::poll_until($node, "SELECT state FROM sched.tasks WHERE id = $moved", 'delivered', 10),
	'the scanner leased the task to the stopped worker');
sql(qq{UPDATE sched.task SET state = 'r', attempt = attempt - 1, lease_until = NULL, lease_owner = NULL
	   WHERE id = $moved});
kill 'CONT', $pid;
ok(wait_finished('h_moved'), 'the task finishes');
sql(q{SELECT sched.add('h_after', clock_timestamp(), '{}')});
is(scalar($receiver->wait_requests('/ok/after', 2, 30)), 2, 'a later task arrives');
is(scalar($receiver->requests('/ok/moved')), 1, 'the task was sent once: its hand-off was skipped');
is(sql("SELECT state || ' ' || attempt FROM sched.tasks WHERE id = $moved"), 'done 1', 'done, at attempt 1');
my ($handed5, $claimed5) = counters();
is($handed5 - $handed4, 1, 'the later task was handed over');
cmp_ok($claimed5, '>', $claimed3, 'the parked one was claimed');

# --- a worker stopped with tasks handed over and unread loses none ---
sql(qq{SELECT sched.define_biz('h_ring', 'http', url => '$base/ok/ring')});
ok(stop_idle_worker($pid), 'the HTTP worker is stopped again, idle');
@ids = split /\n/, sql(q{SELECT sched.add('h_ring', clock_timestamp(), jsonb_build_object('i', i)) FROM generate_series(1, 5) i});
ok(DelayschedTest::poll_until($node, "SELECT count(*) FROM sched.tasks WHERE biz_type = 'h_ring' AND state = 'delivered'", '5', 10),
	'five tasks leased to it, waiting to be read');
kill 'TERM', $pid;
kill 'CONT', $pid;
ok(wait_finished('h_ring', 60), 'they all finish after the worker restarts');
my $new_pid = sql("SELECT pid FROM sched.workers WHERE role = 'http'");
ok($new_pid ne '' && $new_pid ne $pid, 'by a new HTTP worker');
@got = $receiver->requests('/ok/ring');
%times = ();
$times{ $_->{json}{id} }++ for @got;
is(scalar(grep { $times{$_} } @ids), 5, 'the receiver got every one of them');
is(scalar @got, 5, 'once each: the stopped worker had sent none');
is(sql(q{SELECT string_agg(DISTINCT state || ' ' || attempt, ',') FROM sched.tasks WHERE biz_type = 'h_ring'}),
	'done 1', 'all done, the attempt that never left not counted');
my ($handed6, $claimed6) = counters();
is("$handed6 $claimed6", '0 5', 'the new worker parked and claimed them (its counters start at 0)');

$receiver->stop;
$node->stop;
done_testing();
