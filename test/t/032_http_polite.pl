# The polite HTTP client (doc/flow-control.md): 200 webhooks due at once to
# a receiver with the standard library's listen backlog all arrive, none
# timed out; a hung request does not hold up the others to its receiver;
# a receiver's cap holds (requests and connections at once), the
# connections are reused, and the requests beyond it wait in the worker; a
# request that waited too long there is parked again unsent, its attempt
# not counted, and delivered later, once; a receiver that answers 503 with
# Retry-After gets nothing more until then (no retry storm).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use List::Util qw(max min);
use PostgreSQL::Test::Utils;
use Test::More;

my $node = DelayschedTest::new_node('polite', extra_conf => "delaysched.http_workers = 1\n");

sub sql { return $node->safe_psql('postgres', $_[0]) }

# Poll until every task of $type is finished (done or dead).
sub wait_finished { return DelayschedTest::wait_finished($node, @_) }

# Change settings and wait until the HTTP worker has read them: the same
# reload sets its cap (delaysched.http_max_in_flight) to $cap, which
# sched.workers shows.
sub http_settings
{
	my ($cap, %settings) = @_;
	sql("ALTER SYSTEM SET delaysched.$_ = '$settings{$_}'") for sort keys %settings;
	sql("ALTER SYSTEM SET delaysched.http_max_in_flight = $cap");
	sql('SELECT pg_reload_conf()');
	return DelayschedTest::poll_until($node,
		"SELECT holds LIKE '% of $cap;%' FROM sched.workers WHERE role = 'http'", 't', 20);
}

# --- 200 due at once to a receiver with a listen backlog of 5 ---
my $small = DelayschedTest::Receiver->start(PostgreSQL::Test::Utils::tempdir, backlog => 'default');
my $base = $small->url;
sql(qq{SELECT sched.define_biz('h_small', 'http', url => '$base/ok/small', timeout => '10 seconds')});
my $due = sql(q{SELECT extract(epoch FROM date_trunc('second', clock_timestamp()) + interval '2 seconds')});
sql(qq{SELECT count(sched.add('h_small', to_timestamp($due), jsonb_build_object('i', i)))
	FROM generate_series(1, 200) i});
ok(wait_finished('h_small', 120), 'the 200 webhooks finished');
is(sql(q{SELECT count(*) FILTER (WHERE state = 'done') || ' done, attempts ' || max(attempt)
	FROM sched.tasks WHERE biz_type = 'h_small'}), '200 done, attempts 1', 'every one done at its first attempt');
is(sql(q{SELECT count(*) FROM sched.attempts WHERE biz_type = 'h_small' AND error IS NOT NULL}), '0',
	'no request failed or timed out');
my @small = $small->requests('/ok/small');
my %ids;
$ids{ $_->{json}{id} }++ for @small;
is(scalar(keys %ids) . ' ' . scalar(@small), '200 200', 'the receiver got each once');
my $span = max(map { $_->{t} } @small) - $due;
note(sprintf('the 200 arrived within %.2f s of their due time; at most %d connections open at once',
	$span, max(map { $_->{connections} } @small)));
DelayschedTest::timing_cmp_ok($span, '<', 5, 'all 200 arrived within 5 s of their due time');
$small->stop;

# --- a hung request does not hold up the others to its receiver ---
# (Within the allowance, each request has a connection of its own: none
# waits for the hung one's to learn whether it can be shared.)
my $hanging = DelayschedTest::Receiver->start(PostgreSQL::Test::Utils::tempdir);
$base = $hanging->url;
sql(qq{SELECT sched.define_biz('h_hung', 'http', url => '$base/hang/one', timeout => '30 seconds', max_attempts => 1)});
sql(qq{SELECT sched.define_biz('h_beside', 'http', url => '$base/ok/beside')});
sql(q{SELECT sched.add('h_hung', clock_timestamp())});
$hanging->wait_requests('/hang/one', 1, 30);
sql(q{SELECT count(sched.add('h_beside', clock_timestamp())) FROM generate_series(1, 3)});
ok(wait_finished('h_beside', 20), 'three requests to the same receiver finished');
is(sql(q{SELECT count(*) FROM sched.task WHERE biz_type = 'h_hung' AND state = 'd'}), '1',
	'while the hung one was still in flight');
# Its connection closes with the receiver: the request ends.
$hanging->stop;
ok(wait_finished('h_hung', 30), 'the hung request ended with its receiver');

my $receiver = DelayschedTest::Receiver->start(PostgreSQL::Test::Utils::tempdir);
$base = $receiver->url;

# --- a cap of 8: never more at once, connections reused, the rest wait ---
ok(http_settings(999, http_max_in_flight_per_host => 8), 'the cap per receiver is 8');
sql(qq{SELECT sched.define_biz('h_capped', 'http', url => '$base/slow/200/capped')});
sql(q{SELECT count(sched.add('h_capped', clock_timestamp(), jsonb_build_object('i', i)))
	FROM generate_series(1, 100) i});
ok(DelayschedTest::poll_until($node,
	q{SELECT split_part(split_part(holds, '; ', 2), ' ', 1)::int > 0 FROM sched.workers WHERE role = 'http'}, 't', 30),
	'requests waited in the worker for their receiver');
ok(wait_finished('h_capped', 120), 'the 100 finished');
is(sql(q{SELECT count(*) FROM sched.tasks WHERE biz_type = 'h_capped' AND state = 'done' AND attempt = 1}), '100',
	'all done at their first attempt');
my @capped = $receiver->requests('/slow/200/capped');
is(scalar(@capped), 100, 'the receiver got 100 requests');
cmp_ok(max(map { $_->{busy} } @capped), '<=', 8, 'never more than 8 requests at once');
cmp_ok(max(map { $_->{connections} } @capped), '<=', 8, 'never more than 8 connections open at once');
my %connections = map { $_->{connection} => 1 } @capped;
cmp_ok(scalar(keys %connections), '<=', 8, 'the connections were reused: 8 at most for 100 requests');

# --- a request that waits too long is parked again, unsent ---
# One at a time, 8 s each: the fourth would be sent 24 s after it was
# leased, past the 20 s a request may wait, so it is parked again (its
# lease must not run out while it is sent) and sent by a later claim.
ok(http_settings(998, http_max_in_flight_per_host => 1), 'the cap per receiver is 1');
sql(qq{SELECT sched.define_biz('h_queued', 'http', url => '$base/slow/8000/queued', timeout => '10 seconds')});
my @queued = split /\n/, sql(q{SELECT sched.add('h_queued', clock_timestamp(), jsonb_build_object('i', i))
	FROM generate_series(1, 4) i});
ok(DelayschedTest::poll_until($node,
	q{SELECT count(*) > 0 FROM sched.attempts WHERE biz_type = 'h_queued' AND error LIKE 'host_busy:%'}, 't', 60),
	'a request waited too long, and was parked again unsent');
ok(wait_finished('h_queued', 60), 'the four finished');
is(sql(q{SELECT count(*) || ' done, attempts ' || max(attempt) FROM sched.tasks
	WHERE biz_type = 'h_queued' AND state = 'done'}), '4 done, attempts 1', 'all done; the wait was not counted as an attempt');
my @got = $receiver->requests('/slow/8000/queued');
my %got;
$got{ $_->{json}{id} }++ for @got;
is(join(',', map { $got{$_} // 0 } @queued), '1,1,1,1', 'the receiver got each once');
cmp_ok(max(map { $_->{busy} } @got), '<=', 1, 'one at a time');
like(sql(q{SELECT error FROM sched.attempts WHERE biz_type = 'h_queued' AND error LIKE 'host_busy:%' LIMIT 1}),
	qr/^host_busy: not sent: waited \d+ ms for a place among the requests to http:\/\/127\.0\.0\.1:\d+; parked again$/,
	'the attempt says why');

# --- a receiver busy for 10 s (503, Retry-After): no retry storm ---
# The first answers pause the receiver: nothing more goes to it until its
# Retry-After is over, then the tasks go, each delivered once.
# (A receiver of its own: one the worker has not sent to yet, whose
# allowance is 4.)
ok(http_settings(997, http_max_in_flight_per_host => 256), 'the cap per receiver is 256 again');
$receiver->stop;
$receiver = DelayschedTest::Receiver->start(PostgreSQL::Test::Utils::tempdir);
$base = $receiver->url;
sql(qq{SELECT sched.define_biz('h_busy', 'http', url => '$base/busy-for/10/x')});
sql(q{SELECT count(sched.add('h_busy', clock_timestamp(), jsonb_build_object('i', i))) FROM generate_series(1, 40) i});
ok(wait_finished('h_busy', 90), 'the 40 finished');
is(sql(q{SELECT count(*) FROM sched.tasks WHERE biz_type = 'h_busy' AND state = 'done'}), '40', 'all done');
my @busy = $receiver->requests('/busy-for/10/x');
my $first = min(map { $_->{t} } @busy);
my @refused = grep { $_->{t} < $first + 10 } @busy;
note(scalar(@refused) . ' requests came while the receiver was busy, ' . scalar(@busy) . ' in all');
cmp_ok(scalar(@refused), '<=', 4, 'at most the first allowance (4) came while it was busy, not all 40');
my %answered;
$answered{ $_->{json}{id} }++ for grep { $_->{t} >= $first + 10 } @busy;
is(scalar(grep { $_ == 1 } values %answered) . ' of ' . scalar(keys %answered), '40 of 40',
	'after the pause, each task was sent once');

$receiver->stop;
$node->stop;
done_testing();
