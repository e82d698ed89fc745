# Scale-out with delaysched_router: three delaysched nodes and a router
# database (PL/Proxy) on a fourth server.  Adds are spread across the nodes
# and delivered exactly once to a consumer listening on every node (the
# example in contrib/router, acknowledging through the router); ack, cancel
# and claim go by id to the right node; a dedupe key holds across the
# cluster; a rate limit is split across the nodes and the cluster holds it;
# a stopped node: adds go on, its ids and keys fail naming it, and its
# tasks are delivered when it is back.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $consumer_py = "$FindBin::Bin/../../contrib/router/consumer.py";
my $python = -x '/usr/bin/python3' ? '/usr/bin/python3' : 'python3';
DelayschedTest::skip_all('psycopg2 is not installed (python3-psycopg2)')
  if system($python, '-c', 'import psycopg2') != 0;

my @nodes = map { DelayschedTest::new_node("node$_") } 1 .. 3;
my $router = PostgreSQL::Test::Cluster->new('router');
$router->init;
$router->append_conf('postgresql.conf', "timezone = 'UTC'\nlog_min_messages = warning\n");
$router->start;
$router->safe_psql('postgres', 'CREATE DATABASE router');
$router->safe_psql('router', 'CREATE EXTENSION delaysched_router CASCADE');

sub conninfo { my ($n) = @_; return sprintf('host=%s port=%d dbname=postgres', $n->host, $n->port) }
sub r { return $router->safe_psql('router', $_[0]) }

# Run $sql on the router; (stdout, stderr) of a statement that may fail.
sub r_try
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	$router->psql('router', $sql, stdout => \$out, stderr => \$err);
	return ($out, $err);
}

# The second node ran alone before and has made ids; the others are new.
my $solo = $nodes[1]->safe_psql('postgres',
	"SELECT sched.define_biz('solo'); SELECT sched.add('solo', now() + interval '1 day')");
my $list = join(', ', map { "'" . conninfo($_) . "'" } @nodes);
my @numbers = split /\n/, r("SELECT node FROM sched.set_nodes(ARRAY[$list]) ORDER BY position");
is(scalar(@numbers), 3, 'set_nodes lists three nodes');
is($numbers[1], 0, 'the node that has made ids alone keeps 0, though listed second');
is("$numbers[0] $numbers[2]", '1 2', 'the new ones get 1 and 2');
for my $i (0 .. 2)
{
	is($nodes[$i]->safe_psql('postgres', 'SELECT sched.node_number()'), $numbers[$i],
		"node at position $i carries number $numbers[$i]");
}
is(r('SELECT string_agg(status, \',\' ORDER BY position) FROM sched.nodes'), 'up,up,up', 'sched.nodes: every node is up');
is(r("SELECT sched.cancel($solo)"), 't', 'an id node 0 made before it joined is reached through the router');

# A consumer of the example: it listens on every node and acks through the router.
sub start_consumer
{
	my (@args) = @_;
	my %c = (out => '', err => '');
	$c{h} = IPC::Run::start(
		[ $python, $consumer_py, '--router', $router->connstr('router'),
		  (map { ('--node', conninfo($_)) } @nodes), @args ],
		'<', \undef, '>', \$c{out}, '2>', \$c{err});
	my $deadline = time + 30;
	while ($c{err} !~ /listening on 3 nodes/)
	{
		die "consumer did not start: $c{err}" if time > $deadline || !$c{h}->pumpable;
		$c{h}->pump_nb;
		usleep(20_000);
	}
	return \%c;
}

sub finish_consumer
{
	my ($c, $timeout) = @_;
	my $deadline = time + $timeout;
	$c->{h}->pump_nb while $c->{h}->pumpable && time < $deadline && usleep(50_000) >= 0;
	$c->{h}->kill_kill if $c->{h}->pumpable;
	$c->{h}->finish;
	return split /\n/, $c->{out};
}

# --- 10,000 tasks through the router: spread, and each delivered once ---
r("SELECT sched.define_biz('orders')");
my $consumer = start_consumer('--channel', 'orders', '--count', '10000', '--idle', '90');
my $added = r(q{
	SELECT count(*) FROM (
		SELECT sched.add('orders', clock_timestamp() + interval '3 seconds', jsonb_build_object('n', g)) AS id
		FROM generate_series(1, 10000) g) a});
is($added, 10000, '10,000 single adds through the router');
my @per_node = map { $_->safe_psql('postgres', "SELECT count(*) FROM sched.tasks WHERE biz_type = 'orders'") } @nodes;
is($per_node[0] + $per_node[1] + $per_node[2], 10000, 'the nodes hold the 10,000 tasks');
for my $i (0 .. 2)
{
	cmp_ok(abs($per_node[$i] - 10000 / 3), '<=', 10000 / 3 * 0.10,
		"node $i holds $per_node[$i] tasks: within 10% of a third");
}
my @got = finish_consumer($consumer, 120);
my %seen;
$seen{$_}++ for @got;
is(scalar(@got), 10000, 'the consumer received 10,000 messages');
is(scalar(grep { $seen{$_} > 1 } keys %seen), 0, 'no task was received twice');
for my $i (0 .. 2)
{
	ok(DelayschedTest::poll_until($nodes[$i], "SELECT count(*) FROM sched.tasks WHERE biz_type = 'orders' AND state = 'done'",
			$per_node[$i], 30), "acks through the router finished every task of node $i");
}

# --- by id: ack, nack, cancel, reschedule, claim ---
r("SELECT sched.define_biz('jobs', delivery => 'pull', ack_timeout => '1 hour')");
r("SELECT sched.add_many('jobs', array_fill(now(), ARRAY[30]))");
ok(poll_until_router("SELECT sum(due_now) FROM sched.biz_stats WHERE biz_type = 'jobs'", '30', 30),
	'30 pull tasks are due on the nodes');
my @claimed = split /\n/, r("SELECT id FROM sched.claim('jobs', 20)");
is(scalar(@claimed), 20, 'claim through the router takes at most max_tasks from the nodes together');
my %claimed_nodes = map { r("SELECT sched.node_of($_)") => 1 } @claimed;
cmp_ok(scalar(keys %claimed_nodes), '>=', 2, 'claim took from more than one node');
is(r("SELECT count(*) FROM sched.claim('jobs', 100)"), '10', 'the next claim takes the other 10');
is(r("SELECT sched.ack($claimed[0])"), 't', 'ack by id through the router');
is(r("SELECT sched.ack($claimed[0])"), 'f', 'a second ack of the id finds nothing to acknowledge');
my $owner = $nodes[ r("SELECT position FROM sched.node WHERE node = sched.node_of($claimed[0])") ];
is($owner->safe_psql('postgres', "SELECT state FROM sched.tasks WHERE id = $claimed[0]"), 'done',
	'the task is done on the node its id names');
is(r("SELECT sched.ack_many(ARRAY[" . join(',', @claimed[1 .. 9]) . "])"), '9', 'ack_many splits the ids by node');
is(r("SELECT sched.nack($claimed[10], interval '1 hour')"), 't', 'nack by id through the router');
is(r("SELECT sched.extend($claimed[11], '2 hours') > now() + interval '1 hour 59 minutes'"), 't',
	'extend by id through the router');
is($nodes[ r("SELECT position FROM sched.node WHERE node = sched.node_of($claimed[11])") ]->safe_psql('postgres',
		"SELECT lease_until > now() + interval '1 hour 59 minutes' FROM sched.tasks WHERE id = $claimed[11]"),
	't', 'the lease is extended on the node its id names');
my $later = r("SELECT sched.add('jobs', now() + interval '1 day')");
is(r("SELECT sched.reschedule($later, now() + interval '2 days')"), 't', 'reschedule by id');
is(r("SELECT sched.cancel($later)"), 't', 'cancel by id through the router');
is(r("SELECT state FROM sched.tasks WHERE id = $later"), 'cancelled', 'sched.tasks on the router shows it cancelled');
my (undef, $err) = r_try('SELECT sched.ack(' . ((32000 << 48) + 5) . ')');
like($err, qr/belongs to node 32000, which is not in this router's node list/, 'an id of no listed node is a clear error');

# --- a dedupe key through the router: replace and cancel on the key's owner ---
my $keyed = r("SELECT sched.add('jobs', now() + interval '1 day', '{\"v\": 1}', 'routed-key')");
is(r("SELECT sched.add('jobs', now() + interval '2 days', '{\"v\": 2}', 'routed-key', 'replace')"), $keyed,
	'a replace through the router reaches the task holding the key');
is(r("SELECT payload->>'v' FROM sched.tasks WHERE id = $keyed"), '2', 'which took the new payload');
is(r("SELECT sched.cancel_by_key('jobs', 'routed-key')"), 't', 'cancel_by_key through the router');
is(r("SELECT state FROM sched.tasks WHERE id = $keyed"), 'cancelled', 'on the node that owns the key');
is(r("SELECT sched.cancel_by_key('jobs', 'routed-key')"), 'f', 'a second cancel_by_key finds nothing');

# --- dedupe across the cluster ---
my $ids = r(q{
	SELECT count(DISTINCT id) || ' ' || count(*) FROM (
		SELECT sched.add('orders', now() + interval '1 day', '{}', 'key-' || (g % 50)) AS id
		FROM generate_series(1, 200) g) a});
is($ids, '50 200', '200 adds of 50 dedupe keys made 50 tasks');
my $holders = join(',', map { $_->safe_psql('postgres', "SELECT count(*) FROM sched.tasks WHERE dedupe_key LIKE 'key-%'") } @nodes);
my $sum = 0;
$sum += $_ for split /,/, $holders;
is($sum, 50, "each key is held on one node only ($holders)");
is(scalar(grep { $_ > 0 } split /,/, $holders), 3, 'the keys are spread over the nodes');
is(r(q{SELECT count(DISTINCT a) FROM sched.add_many('orders', array_fill(now() + interval '1 day', ARRAY[50]), NULL,
		ARRAY(SELECT 'key-' || g FROM generate_series(0, 49) g)) a
		WHERE a IN (SELECT id FROM sched.tasks WHERE dedupe_key LIKE 'key-%')}), '50',
	'add_many with the same keys returns the ids the keys have, on their nodes');

# --- a rate limit split across the nodes ---
r("SELECT sched.define_biz('limited', rate_limit => 60, burst => 3)");
is(join(' ', map { $_->safe_psql('postgres', "SELECT rate_limit || '/' || burst FROM sched.biz WHERE name = 'limited'") } @nodes),
	'20/1 20/1 20/1', 'each node has a third of the rate (burst at least 1)');
is(r("SELECT rate_limit || '/' || burst FROM sched.biz_stats WHERE biz_type = 'limited'"), '60/3',
	'biz_stats on the router shows the cluster-wide limit');
r("SELECT sched.add_many('limited', array_fill(now(), ARRAY[900]))");
ok(poll_until_router("SELECT sum(pending) FROM sched.biz_stats WHERE biz_type = 'limited'", '0', 60),
	'the 900 limited tasks are delivered');
my @lasts;
my @times;
for my $n (@nodes)
{
	my @t = split /\n/, $n->safe_psql('postgres',
		"SELECT extract(epoch FROM delivered_at) FROM sched.tasks WHERE biz_type = 'limited' ORDER BY 1");
	push @lasts, $t[-1];
	push @times, @t;
}
@times = sort { $a <=> $b } @times;
my $from = $times[0] + 1;    # after the buckets' first burst
my $to = (sort { $a <=> $b } @lasts)[0];    # while every node still had tasks
my $in_window = grep { $_ > $from && $_ <= $to } @times;
my $rate = $in_window / ($to - $from);
# Each node keeps its share (20/s, burst 1) on its own clock: the cluster
# never more than 3 x (1 + 20) in a second, whatever the machine's speed.
my $busiest = DelayschedTest::busiest_window(1.0, @times);
cmp_ok($busiest, '<=', 63, "the cluster kept under the limit of 60/s (at most $busiest in any second)");
DelayschedTest::timing_cmp_ok(abs($rate - 60) / 60, '<=', 0.05, sprintf('the cluster delivered %.1f/s for a limit of 60/s (within 5%%)', $rate));

# Re-split when the node list changes: two nodes get half each.
r("SELECT count(*) FROM sched.set_nodes(ARRAY['" . conninfo($nodes[0]) . "', '" . conninfo($nodes[1]) . "'])");
is(join(' ', map { $_->safe_psql('postgres', "SELECT rate_limit FROM sched.biz WHERE name = 'limited'") } @nodes[0, 1]),
	'30 30', 'with two nodes, each has half of the rate');
my @again = split /\n/, r("SELECT node FROM sched.set_nodes(ARRAY[$list]) ORDER BY position");
is("@again", "@numbers", 'a node put back keeps its number');
is($nodes[2]->safe_psql('postgres', "SELECT rate_limit FROM sched.biz WHERE name = 'limited'"), '20',
	'with three nodes again, a third each');

# --- two changes of the node list at once: the second waits, then succeeds;
# routed calls wait for the new list (a call reads a node's position, and
# PL/Proxy the list, apart: the list may not change in between) ---
my $holder = DelayschedTest::hold_in_transaction($router, "SELECT count(*) FROM sched.set_nodes(ARRAY[$list])", 'router');
my %waiting;
for my $what ('set_nodes', 'add')
{
	my $sql = $what eq 'add' ? "SELECT sched.add('orders', now() + interval '1 day') > 0"
	  : "SELECT count(*) FROM sched.set_nodes(ARRAY[$list])";
	$waiting{$what} = { out => '', err => '' };
	$waiting{$what}{h} = IPC::Run::start([ 'psql', '-X', '-At', '-d', $router->connstr('router'), '-c', $sql ],
		'>', \$waiting{$what}{out}, '2>', \$waiting{$what}{err});
}
ok(poll_until_router("SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'sched.node'::regclass", '2', 30),
	'a second set_nodes and a routed add wait for the first set_nodes');
DelayschedTest::release_session($holder, 1);
$_->{h}->finish for values %waiting;
is($waiting{set_nodes}{out}, "3\n", 'the second set_nodes sets the list once the first committed') or diag($waiting{set_nodes}{err});
is($waiting{add}{out}, "t\n", 'and the add goes on with the new list') or diag($waiting{add}{err});

# --- administration on every node ---
is(r("SELECT sched.pause('orders')"), 't', 'pause on every node');
is(join(',', map { $_->safe_psql('postgres', "SELECT paused FROM sched.biz WHERE name = 'orders'") } @nodes), 't,t,t',
	'every node has it paused');
is(r("SELECT sched.resume('orders')"), 't', 'resume on every node');
(undef, $err) = r_try("SELECT sched.define_biz('Bad')");
like($err, qr/invalid business type name "Bad"/, "a node's own error comes as the node gave it");

# --- a node stopped ---
my $down = $nodes[1];
my $down_number = $numbers[1];
# (A message sent while the consumer is not listening again yet comes back
# after the lease: a short one.)
r("SELECT sched.define_biz('late', ack_timeout => '3 seconds')");
my $late_consumer = start_consumer('--channel', 'late', '--idle', '15', '--quiet');
my $late_ids = r("SELECT count(*) FROM sched.add_many('late', array_fill(clock_timestamp() + interval '4 seconds', ARRAY[300]))");
my $on_down = $down->safe_psql('postgres', "SELECT count(*) FROM sched.tasks WHERE biz_type = 'late'");
cmp_ok($on_down, '>', 0, "the node to stop holds $on_down of them");
r("SELECT sched.add_many('jobs', array_fill(now(), ARRAY[30]))");
my $jobs_on_down = $down->safe_psql('postgres',
	"SELECT count(*) FROM sched.tasks WHERE biz_type = 'jobs' AND state = 'pending' AND run_at <= now()");
$down->stop('fast');

my $stored = r(q{SELECT count(*) FROM (SELECT sched.add('orders', now() + interval '1 day') FROM generate_series(1, 300)) a});
is($stored, '300', 'adds without a dedupe key go on with a node stopped');
my ($out, $warn) = r_try("SELECT count(*) FROM sched.tasks WHERE sched.node_of(id) = $down_number");
is($out, '0', 'sched.tasks leaves out the stopped node');
like($warn, qr/WARNING:  node $down_number \(.*\) is unavailable: sched.tasks leaves out its rows/, 'with a warning naming it');
is(r("SELECT count(*) FROM sched.add_many('orders', array_fill(now() + interval '1 day', ARRAY[90]))"), '90',
	'add_many without dedupe keys goes around the stopped node');
($out, $warn) = r_try("SELECT count(*) FROM sched.claim('jobs', 100)");
is($out, 30 - $jobs_on_down, 'claim takes what the other nodes have');
like($warn, qr/WARNING:  node $down_number \(.*\) is unavailable: its tasks were not claimed/, 'and warns of the stopped node');
my $key = r("SELECT k FROM (SELECT 'owned-' || g AS k FROM generate_series(1, 1000) g) x
			 WHERE (sched._owner('orders', k)).node = $down_number LIMIT 1");
(undef, $err) = r_try("SELECT sched.add('orders', now(), '{}', '$key')");
like($err, qr/node $down_number \(.*\) is unavailable/, "an add whose dedupe key the stopped node owns fails naming it");
my $down_id = ($down_number << 48) + 60;
(undef, $err) = r_try("SELECT sched.ack($down_id)");
like($err, qr/node $down_number \(.*\) is unavailable/, 'a call for its ids fails naming it');
(undef, $err) = r_try("SELECT sched.pause('orders')");
like($err, qr/node $down_number \(.*\) is unavailable/, 'administration refuses before changing any node');
is($nodes[0]->safe_psql('postgres', "SELECT paused FROM sched.biz WHERE name = 'orders'"), 'f',
	'and the other nodes were not changed');

$down->start;
my @late = finish_consumer($late_consumer, 90);
is(scalar(@late), 0, 'the quiet consumer printed nothing');
like($late_consumer->{err}, qr/300 tasks received, 300 acknowledged/, 'every task, those of the stopped node too, was delivered once the node was back');
is($down->safe_psql('postgres', "SELECT count(*) FROM sched.tasks WHERE biz_type = 'late' AND state = 'done'"), $on_down,
	"the node's own tasks are done");

$_->stop for @nodes;
$router->stop;
done_testing();

sub poll_until_router { return DelayschedTest::poll_until_in($router, 'router', @_) }
