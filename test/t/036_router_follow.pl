# A router that follows its nodes (delaysched_router's sched.follow_nodes,
# run by the router server's follower worker; src/cluster/share_lease.c):
# three nodes share a type limited to 60 a second.  One is stopped: once
# its lease has run out, the other two take its share, and the cluster's
# rate comes back to 60 a second.  It is started again: it delivers nothing
# until the router has taken its share back from the others, then its
# share.  Following that starts while a node is down keeps that node counted
# until it answers.  A node that hangs, a round that rolls back, and a drop
# and a join in one round (whole-number shares) follow.  Every second of the run, the cluster delivers at most 66 (the
# limit, and the buckets' burst); each task is delivered once.  How soon the
# rate recovers (within 10 s) is checked with PG_TEST_EXTRA=delaysched_timing.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use List::Util qw(max sum);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my @nodes = map { DelayschedTest::new_node("follow$_") } 1 .. 3;
my $router = DelayschedTest::new_node('follow_router');
$router->safe_psql('postgres', 'CREATE DATABASE router');
$router->safe_psql('router', 'CREATE EXTENSION delaysched_router CASCADE');
$router->append_conf('postgresql.conf',
	"delaysched.router_database = 'router'\ndelaysched.router_follow_interval = '500ms'\n");
$router->restart;

sub conninfo { my ($n) = @_; return sprintf('host=%s port=%d dbname=postgres', $n->host, $n->port) }
sub r { return $router->safe_psql('router', $_[0]) }

my $list = join(', ', map { "'" . conninfo($_) . "'" } @nodes);
r("SELECT count(*) FROM sched.set_nodes(ARRAY[$list])");
# 60 a second for the cluster, a burst of 3 (one token a node); nobody
# acknowledges, so every delivery stays in sched.task with its time.
r(q{SELECT sched.define_biz('split', rate_limit => 60, burst => 3, ack_timeout => '1 hour')});
is(join(',', map { $_->safe_psql('postgres', q{SELECT rate_limit FROM sched.biz WHERE name = 'split'}) } @nodes),
	'20,20,20', 'each node has a third of the limit');

is(r(q{SELECT sched.set_following(true, lease => '2 seconds')}), 't', 'the router follows its nodes');
ok(DelayschedTest::poll_until_in($router, 'router',
	q{SELECT count(*) FILTER (WHERE counted AND lease_until > clock_timestamp()) FROM sched.node_shares}, '3', 30),
	'every node holds a lease on its shares')
  or diag(r('SELECT * FROM sched.node_shares'));
is(join(',', map { $_->safe_psql('postgres', 'SELECT EXISTS (SELECT FROM sched.router_follow)') } @nodes),
	't,t,t', 'every node knows it is followed');

# 2,000 tasks a node, all due now: more than the run delivers.
for my $n (@nodes)
{
	$n->safe_psql('postgres', q{
		SELECT count(*) FROM sched.add_many('split', array_fill(now(), ARRAY[2000]),
											array_fill('{}'::jsonb, ARRAY[2000]))});
}
my $start = time;

# Deliveries a second, over every node that answers: {second => count}.
sub per_second
{
	my %count;
	for my $n (@_)
	{
		for my $row (split /\n/, $n->safe_psql('postgres', q{
			SELECT s || ' ' || count(*)
			FROM (SELECT floor(extract(epoch FROM delivered_at))::bigint AS s
				  FROM sched.task WHERE biz_type = 'split' AND state = 'd') d
			GROUP BY s}))
		{
			my ($second, $c) = split / /, $row;
			$count{$second} += $c;
		}
	}
	return \%count;
}

# The cluster's deliveries in the whole seconds between $from and $to.
sub rate_between
{
	my ($counts, $from, $to) = @_;
	my @seconds = grep { $_ >= int($from) + 1 && $_ < int($to) } keys %$counts;
	return @seconds ? sum(map { $counts->{$_} } @seconds) / scalar(@seconds) : 0;
}

# Steady, then node 3 stops.
sleep 5;	# the window being measured
my $stopped_at = time;
$nodes[2]->stop('fast');

# Its lease runs out (2 s), the next round counts it out and the two others
# get half the limit each.
ok(DelayschedTest::poll_until_in($router, 'router',
	q{SELECT string_agg(counted::text, ',' ORDER BY position) FROM sched.node_shares}, 'true,true,false', 30),
	'the stopped node is counted out');
my $counted_out = time - $stopped_at;
is(join(',', map { $_->safe_psql('postgres', q{SELECT rate_limit FROM sched.biz WHERE name = 'split'}) } @nodes[0, 1]),
	'30,30', 'the two others have half the limit each');
like(r(q{SELECT last_error FROM sched.node_shares WHERE position = 2}), qr/\S/, 'sched.node_shares says why');

# Seconds from $since to the first of two whole seconds in which nodes 1 and
# 2 together delivered 54 or more (the cluster's 60 a second, back); undef
# if that did not happen within 60 s.
sub recovered_after
{
	my ($since) = @_;
	my $deadline = time + 60;
	while (time < $deadline)
	{
		my $counts = per_second(@nodes[0, 1]);
		my @good = sort { $a <=> $b } grep { $_ > $since && $counts->{$_} >= 54 } keys %$counts;
		return $good[0] - $since if @good >= 2;
		usleep(200_000);
	}
	return undef;
}

# The rate comes back to 60 a second: two whole seconds at 54 or more.
my $recovered = recovered_after($stopped_at);
ok(defined $recovered, 'the two others deliver the cluster\'s 60 a second');
note(sprintf('counted out %.1f s after the stop; 54 a second or more from %.1f s after it',
	$counted_out, $recovered // -1));
DelayschedTest::timing_cmp_ok($recovered // 99, '<=', 10, 'the rate recovered within 10 s of the stop');

# Node 3 starts again: nothing of the type until the router has given the
# others their smaller shares and it its lease; then its share.
sleep 3;	# the window being measured
my $restarted_at = time;
$nodes[2]->start;
ok(DelayschedTest::poll_until_in($router, 'router',
	q{SELECT string_agg(counted::text, ',' ORDER BY position) FROM sched.node_shares}, 'true,true,true', 30),
	'the node that came back is counted again');
ok(DelayschedTest::poll_until($nodes[2],
	q{SELECT count(*) > 0 FROM sched.task WHERE biz_type = 'split' AND state = 'd' AND delivered_at > now() - interval '2 seconds'},
	't', 30), 'it delivers again');
is(join(',', map { $_->safe_psql('postgres', q{SELECT rate_limit FROM sched.biz WHERE name = 'split'}) } @nodes),
	'20,20,20', 'each node has a third again');
sleep 4;	# the window being measured
my $end = time;

# Every second: at most 66, the three nodes together.
my $counts = per_second(@nodes);
my @seconds = grep { $_ > int($start) && $_ < int($end) } sort { $a <=> $b } keys %$counts;
my $most = max(map { $counts->{$_} } @seconds);
cmp_ok($most, '<=', 66, "the cluster never delivered more than 66 in a second (at most $most)");
note(sprintf('a second: %.1f before the stop, %.1f with two nodes, %.1f after the restart',
	rate_between($counts, $start, $stopped_at), rate_between($counts, $stopped_at + $recovered, $restarted_at),
	rate_between($counts, $restarted_at + 2, $end)));
note('per second: ' . join(' ', map { $counts->{$_} } @seconds));
my $total = sum(map { $_->safe_psql('postgres', q{SELECT count(DISTINCT id) || ' ' || count(*) FROM sched.task WHERE biz_type = 'split' AND state = 'd'}) =~ /^(\d+) \1$/ ? $1 : -1 } @nodes);
cmp_ok($total, '>', 0, "each delivered task once ($total delivered)");

# Stop following: every node gets a third of the limit, with no lease.
is(r(q{SELECT sched.set_following(false)}), 't', 'following stops');
is(join(',', map { $_->safe_psql('postgres', 'SELECT EXISTS (SELECT FROM sched.router_follow)') } @nodes),
	'f,f,f', 'no node waits for a lease any more');

# Following starts while a node is down: it may still deliver its old share,
# so it stays counted (its share unused) until it answers and is marked.
$nodes[2]->stop('fast');
is(r(q{SELECT sched.set_following(true, lease => '2 seconds')}), 't', 'following again, a node down');
ok(DelayschedTest::poll_until_in($router, 'router',
	q{SELECT string_agg(counted || '/' || coalesce((lease_until > clock_timestamp())::text, 'none'), ',' ORDER BY position)
	  FROM sched.node_shares},
	'true/true,true/true,true/none', 30),
	'the two that answer are leased; the one never leased stays counted');
is(join(',', map { $_->safe_psql('postgres', q{SELECT rate_limit FROM sched.biz WHERE name = 'split'}) } @nodes[0, 1]),
	'20,20', 'and the others keep a third each');
$nodes[2]->start;
ok(DelayschedTest::poll_until_in($router, 'router',
	q{SELECT count(*) FILTER (WHERE counted AND lease_until > clock_timestamp()) FROM sched.node_shares}, '3', 30),
	'once it answers, it is marked and leased too');
is(r(q{SELECT sched.set_following(false)}), 't', 'following stops again');

# A node that hangs: its server and every process of it stopped (SIGSTOP),
# so that the kernel still accepts connections to it and nothing answers.
# Every round must still reach the two others in time for their leases: they
# take its share once its lease has run out, and deliver the cluster's 60 a
# second.
sub server_processes
{
	my ($n) = @_;
	my $postmaster = $n->{_pid};
	my @pids = ($postmaster);
	for my $stat (glob '/proc/[0-9]*/stat')
	{
		open my $fh, '<', $stat or next;
		my $line = <$fh>;
		close $fh;
		next unless defined $line && $line =~ /^(\d+) \(.*\) \S (\d+) /;
		push @pids, $1 if $2 == $postmaster;
	}
	return @pids;
}
for my $n (@nodes)
{
	$n->safe_psql('postgres', q{
		SELECT count(*) FROM sched.add_many('split', array_fill(now(), ARRAY[2000]),
											array_fill('{}'::jsonb, ARRAY[2000]))});
}
is(r(q{SELECT sched.set_following(true, lease => '3 seconds')}), 't', 'following, the lease 3 s');
ok(DelayschedTest::poll_until_in($router, 'router',
	q{SELECT count(*) FILTER (WHERE counted AND lease_until > clock_timestamp()) FROM sched.node_shares}, '3', 30),
	'every node leased');
my @hung = server_processes($nodes[2]);
kill 'STOP', @hung;
my $hung_at = time;
ok(DelayschedTest::poll_until_in($router, 'router',
	q{SELECT string_agg(counted::text, ',' ORDER BY position) FROM sched.node_shares}, 'true,true,false', 60),
	'the hung node is counted out');
my $hung_recovered = recovered_after($hung_at);
ok(defined $hung_recovered, 'the two others deliver the cluster\'s 60 a second while it hangs');
note(sprintf('hung node: 54 a second or more from %.1f s after it hung', $hung_recovered // -1));
kill 'CONT', @hung;
ok(DelayschedTest::poll_until_in($router, 'router',
	q{SELECT count(*) FILTER (WHERE counted AND lease_until > clock_timestamp()) FROM sched.node_shares}, '3', 60),
	'once it answers again, it is counted and leased');
is(r(q{SELECT sched.set_following(false)}), 't', 'following stops for the last time');

# A round that rolls back after it gave a node new shares: the node keeps
# them, with their split's number, and the next round must give every node
# a split of a new number, never that one again (another round's counted
# nodes may differ).  A trigger makes the round fail once, just after a node
# has taken its shares, and says the split's number in the log.
is(r(q{SELECT sched.set_following(true, lease => '2 seconds')}), 't', 'following, for a round that rolls back');
ok(DelayschedTest::poll_until_in($router, 'router',
	q{SELECT count(*) FILTER (WHERE counted AND lease_until > clock_timestamp()) FROM sched.node_shares}, '3', 30),
	'every node leased again');
r(q{CREATE SEQUENCE public.regress_fail_once});
r(q{CREATE FUNCTION public.regress_fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF NEW.generation IS NOT NULL AND OLD.generation IS NOT NULL
		   AND NEW.generation <> OLD.generation AND nextval('public.regress_fail_once') = 1 THEN
			RAISE EXCEPTION 'regress: the round fails after giving split %', NEW.generation;
		END IF;
		RETURN NEW;
	END $$});
r(q{CREATE TRIGGER regress_fail_once BEFORE UPDATE ON sched.node_follow
	FOR EACH ROW EXECUTE FUNCTION public.regress_fail_once()});
my $log_at = -s $router->logfile;
$nodes[2]->stop('fast');
$log_at = $router->wait_for_log(qr/regress: the round fails after giving split \d+/, $log_at);
my ($failed_split) = PostgreSQL::Test::Utils::slurp_file($router->logfile) =~ /.*regress: the round fails after giving split (\d+)/s;
ok(DelayschedTest::poll_until_in($router, 'router',
	q{SELECT string_agg(counted::text, ',' ORDER BY position) FROM sched.node_shares}, 'true,true,false', 30),
	'the next round counts the stopped node out');
my $split = r(q{SELECT generation FROM sched.follow});
isnt($split, $failed_split, "the split has a new number ($split), not the rolled-back round's ($failed_split)");
ok(DelayschedTest::poll_until($nodes[0], 'SELECT sched._share_generation()', $split, 30),
	'and the node that took the rolled-back split has the new one');
is(join(',', map { $_->safe_psql('postgres', q{SELECT rate_limit FROM sched.biz WHERE name = 'split'}) } @nodes[0, 1]),
	'30,30', 'the two others have half the limit each');
r(q{DROP TRIGGER regress_fail_once ON sched.node_follow});
$nodes[2]->start;
is(r(q{SELECT sched.set_following(false)}), 't', 'following stops');

# A drop and a join in one round: how many nodes are counted stays the same,
# but which ones changes, and with it each node's whole-number shares.  A
# type capped at 5 deliveries at a time is split 3 and 2 by the counted
# nodes' order.  Nodes 2 and 3 are counted (3 and 2); then node 3 stops and
# node 1 comes back while no round runs (a session holds sched.follow).
# Node 1 answers at once but joins only when node 3 may no longer hold a
# lease: the round that counts node 3 out counts node 1 in.  Node 2 must
# then go from 3 to 2, or the cluster could run 6 at a time.
sub caps
{
	return join(',', map { $_->safe_psql('postgres', q{SELECT max_concurrency FROM sched.biz WHERE name = 'whole'}) } @_);
}
r(q{SELECT sched.define_biz('whole', max_concurrency => 5)});
is(r(q{SELECT sched.set_following(true, lease => '2 seconds')}), 't', 'following, for a drop and a join in one round');
ok(DelayschedTest::poll_until_in($router, 'router',
	q{SELECT count(*) FILTER (WHERE counted AND lease_until > clock_timestamp()) FROM sched.node_shares}, '3', 30),
	'every node leased once more');
$nodes[0]->stop('fast');
ok(DelayschedTest::poll_until_in($router, 'router',
	q{SELECT string_agg(counted::text, ',' ORDER BY position) FROM sched.node_shares}, 'false,true,true', 30),
	'node 1 is counted out');
ok(DelayschedTest::poll_until($nodes[1], q{SELECT max_concurrency FROM sched.biz WHERE name = 'whole'}, '3', 30),
	'node 2 takes the larger whole share');
is(caps(@nodes[1, 2]), '3,2', 'nodes 2 and 3 can run 3 and 2 at a time');
my $held = DelayschedTest::hold_in_transaction($router, 'SELECT FROM sched.follow FOR UPDATE', 'router');
$nodes[2]->stop('fast');
$nodes[0]->start;
is(r(q{SELECT string_agg(counted::text, ',' ORDER BY position) FROM sched.node_shares}), 'false,true,true',
	'no round ran while node 3 stopped and node 1 started');
$log_at = -s $router->logfile;
DelayschedTest::release_session($held);
ok(DelayschedTest::poll_until_in($router, 'router',
	q{SELECT string_agg(counted::text, ',' ORDER BY position) FROM sched.node_shares}, 'true,true,false', 30),
	'node 1 is counted in and node 3 out');
my @splits = substr(PostgreSQL::Test::Utils::slurp_file($router->logfile), $log_at) =~ /(the limits are split over nodes .*)/g;
is(scalar(@splits), 1, 'in one round') or diag(join("\n", @splits));
ok(DelayschedTest::poll_until($nodes[1], q{SELECT max_concurrency FROM sched.biz WHERE name = 'whole'}, '2', 30),
	'node 2 gives up its larger share');
is(caps(@nodes[0, 1]), '3,2', 'nodes 1 and 2 can run 3 and 2 at a time: 5 in all');
$nodes[2]->start;
is(r(q{SELECT sched.set_following(false)}), 't', 'following stops');

$_->stop for @nodes, $router;
done_testing();
