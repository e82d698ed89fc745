# HTTP delivery against a local receiver (test/http_receiver.py): on time
# and in the documented shape; retries with backoff, Retry-After, dead on a
# 4xx, timeouts; the signature; an HTTP worker stopped mid-flight loses
# nothing; the perimeter refuses a blocked destination; redirects only when
# enabled; 500 slow requests in flight do not hold up a notify type.
use strict;
use warnings;

use Digest::SHA qw(hmac_sha256_hex);
use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = DelayschedTest::new_node('http', extra_conf => "delaysched.http_workers = 1\n");
my $receiver = DelayschedTest::Receiver->start(PostgreSQL::Test::Utils::tempdir);
my $base = $receiver->url;

sub sql { return $node->safe_psql('postgres', $_[0]) }

# Poll until every task of $type is finished (done or dead).
sub wait_finished { return DelayschedTest::wait_finished($node, @_) }

# --- on time, and the request's shape ---
sql(qq{SELECT sched.define_biz('h_ontime', 'http', url => '$base/ok/ontime',
	headers => '{"Authorization": "Bearer t0ken", "X-Team": "payments"}')});
my %run_at = map { split /\|/ } split /\n/, sql(q{
	SELECT sched.add('h_ontime', r, jsonb_build_object('order', i)) || '|' || extract(epoch FROM r)
	FROM (SELECT i, clock_timestamp() + (0.5 + i * 0.05) * interval '1 second' AS r
	      FROM generate_series(1, 20) i) s});
my @got = $receiver->wait_requests('/ok/ontime', 20, 30);
is(scalar @got, 20, 'every task was POSTed once');
my @late = map { $_->{t} - $run_at{ $_->{json}{id} } } grep { $_->{json} } @got;
is(scalar(grep { $_ < 0 } @late), 0, 'none arrived before it was due');
my $p99 = DelayschedTest::percentile(0.99, @late);
DelayschedTest::timing_cmp_ok($p99, '<', 0.25, 'commit-to-arrival lateness p99 under 250 ms');
note(sprintf('lateness p50 %.1f ms, p99 %.1f ms', 1000 * DelayschedTest::percentile(0.5, @late), 1000 * $p99));
my $r = $got[0];
is_deeply([ sort keys %{ $r->{json} } ], [qw(attempt biz_type id payload run_at)], 'the body has id, biz_type, run_at, payload, attempt');
is($r->{json}{biz_type}, 'h_ontime', 'body: biz_type');
is($r->{json}{attempt}, 1, 'body: attempt 1');
ok(exists $run_at{ $r->{json}{id} }, 'body: the task id');
is($r->{headers}{'content-type'}, 'application/json', 'Content-Type: application/json');
is($r->{headers}{'idempotency-key'}, $r->{json}{id}, 'Idempotency-Key carries the task id');
is($r->{headers}{'x-delaysched-attempt'}, '1', 'X-Delaysched-Attempt');
is($r->{headers}{'authorization'}, 'Bearer t0ken', 'configured headers are sent');
is($r->{headers}{'x-team'}, 'payments', 'every configured header');
ok(!exists $r->{headers}{'x-delaysched-signature'}, 'no signature without a secret');
ok(wait_finished('h_ontime'), 'all done');
is(sql("SELECT count(*) FROM sched.tasks WHERE biz_type = 'h_ontime' AND state = 'done'"), '20', '20 done');
# sched.workers says it in the scanners' words: delivered counts the 2xx,
# ticks the claims and hand-offs, and an idle worker is sleeping.
ok(DelayschedTest::poll_until($node,
	"SELECT state || ' ' || (delivered >= 20) || ' ' || (ticks > 0) FROM sched.workers WHERE role = 'http'",
	'sleeping true true', 10), 'sched.workers: the HTTP worker delivered them, sleeping now');

# --- 503, 503, 200: three calls, then done, with backoff between them ---
sql(qq{SELECT sched.define_biz('h_503', 'http', url => '$base/status/503,503,200/a',
	min_backoff => '200 ms', max_backoff => '10 seconds')});
my $id = sql(q{SELECT sched.add('h_503', clock_timestamp(), '{}')});
ok(wait_finished('h_503'), '503,503,200 finishes');
@got = $receiver->requests('/status/503,503,200/a');
is(scalar @got, 3, 'three calls');
is(sql("SELECT state || ' ' || attempt FROM sched.tasks WHERE id = $id"), 'done 3', 'done after attempt 3');
cmp_ok($got[1]{t} - $got[0]{t}, '>=', 0.2, 'the first retry waited at least min_backoff');
cmp_ok($got[2]{t} - $got[1]{t}, '>=', 0.2, 'the second too (backoff doubles, jitter in its upper half)');
is(sql("SELECT string_agg(coalesce(http_status::text, '-') || ' ' || outcome, ', ' ORDER BY attempt) FROM sched.attempts WHERE id = $id"),
	'503 retry, 503 retry, 200 done', 'every attempt is in sched.attempts');
is($got[2]{headers}{'x-delaysched-attempt'}, '3', 'the third call says attempt 3');
is($got[2]{json}{attempt}, 3, 'and so does its body');

# --- 410: one call, dead at once ---
sql(qq{SELECT sched.define_biz('h_410', 'http', url => '$base/status/410/a')});
$id = sql(q{SELECT sched.add('h_410', clock_timestamp(), '{}')});
ok(wait_finished('h_410'), '410 finishes');
is(scalar($receiver->requests('/status/410/a')), 1, 'one call');
like(sql("SELECT state || ': ' || last_error FROM sched.tasks WHERE id = $id"), qr/^dead: http_410/, 'dead, with the status in last_error');

# --- a hanging endpoint: timeout, retry, dead after max_attempts ---
sql(qq{SELECT sched.define_biz('h_hang', 'http', url => '$base/hang/a', timeout => '500 ms',
	min_backoff => '100 ms', max_backoff => '200 ms', max_attempts => 2)});
$id = sql(q{SELECT sched.add('h_hang', clock_timestamp(), '{}')});
ok(wait_finished('h_hang', 30), 'the hanging endpoint ends');
is(scalar($receiver->requests('/hang/a')), 2, 'two calls: the timeout was retried');
like(sql("SELECT state || ': ' || last_error FROM sched.tasks WHERE id = $id"), qr/^dead: timeout: timed out after 500 ms.*\(attempt 2 of 2\)/, 'dead after the last attempt timed out');
my ($dmin, $dmax) = split /\|/, sql("SELECT min(extract(epoch FROM duration)), max(extract(epoch FROM duration)) FROM sched.attempts WHERE id = $id");
cmp_ok($dmin, '>=', 0.45, "no attempt ended before the timeout ($dmin s)");
DelayschedTest::timing_cmp_ok($dmax, '<', 2, "each attempt lasted about the timeout ($dmin..$dmax s)");

# --- Retry-After on a 429 is honoured ---
sql(qq{SELECT sched.define_biz('h_429', 'http', url => '$base/retry-after/2/429/a',
	min_backoff => '100 ms', max_backoff => '10 seconds')});
sql(q{SELECT sched.add('h_429', clock_timestamp(), '{}')});
ok(wait_finished('h_429'), 'the 429 finishes');
@got = $receiver->requests('/retry-after/2/429/a');
is(scalar @got, 2, 'two calls');
my $gap = $got[1]{t} - $got[0]{t};
cmp_ok($gap, '>=', 1.95, sprintf('the retry came after Retry-After: 2 (%.2f s)', $gap));
DelayschedTest::timing_cmp_ok($gap, '<', 3.5, 'and soon after');

# --- the signature verifies ---
my $secret = 'test-secret-0123456789';
sql(qq{SELECT sched.define_biz('h_signed', 'http', url => '$base/ok/signed', secret => '$secret')});
sql(q{SELECT sched.add('h_signed', clock_timestamp(), '{"amount": 42, "note": "caf\u00e9"}')});
($r) = $receiver->wait_requests('/ok/signed', 1, 30);
my $ts = $r->{headers}{'x-delaysched-timestamp'};
my $sig = $r->{headers}{'x-delaysched-signature'};
like($ts, qr/^\d{10}$/, 'X-Delaysched-Timestamp is Unix seconds');
ok(abs($ts - time) < 60, 'and now');
my $body = $r->{body};
utf8::encode($body);
is($sig, 'v1=' . hmac_sha256_hex("$ts.$body", $secret), 'X-Delaysched-Signature is HMAC-SHA256 of "timestamp.body"');
isnt($sig, 'v1=' . hmac_sha256_hex("$ts.$body", 'another-secret-123456'), 'and depends on the secret');

# --- an HTTP worker stopped mid-flight loses nothing ---
# The worker holds all 20 (leased): some sent, answering in 3 s, the rest
# waiting for the receiver's allowance (see doc/flow-control.md); none is
# answered within 6 s, so every one received before the stop was in flight.
sql(qq{SELECT sched.define_biz('h_slow', 'http', url => '$base/slow/6000/a')});
my @ids = split /\n/, sql(q{SELECT sched.add('h_slow', clock_timestamp(), jsonb_build_object('i', i)) FROM generate_series(1, 20) i});
ok(DelayschedTest::poll_until($node, "SELECT count(*) FROM sched.task WHERE biz_type = 'h_slow' AND state = 'd'", '20', 10), 'all 20 leased to the worker');
$receiver->wait_requests('/slow/6000/a', 1, 30);
my $pid = sql("SELECT pid FROM sched.workers WHERE role = 'http'");
my $sent_before = scalar($receiver->requests('/slow/6000/a'));
sql("SELECT pg_terminate_backend($pid)");
ok(wait_finished('h_slow', 60), 'after the worker restarts, every request finishes');
is(sql("SELECT count(*) FROM sched.tasks WHERE biz_type = 'h_slow' AND state = 'done'"), '20', 'all 20 done');
my %seen = map { $_->{json}{id} => 1 } $receiver->requests('/slow/6000/a');
is(scalar(grep { $seen{$_} } @ids), 20, 'the receiver got every one of them');
cmp_ok(scalar($receiver->requests('/slow/6000/a')), '>=', 20 + $sent_before,
	"those in flight ($sent_before) were sent again (a duplicate after a stop)");
my $new_pid = sql("SELECT pid FROM sched.workers WHERE role = 'http'");
ok($new_pid ne '' && $new_pid ne $pid, 'by a new HTTP worker');
is(sql("SELECT max(attempt) FROM sched.tasks WHERE biz_type = 'h_slow'"), '1', 'the interrupted attempt was not counted');

# --- the perimeter: a destination denied after DNS resolution ---
sql(q{ALTER SYSTEM SET delaysched.http_denied_hosts = '127.0.0.0/8, 169.254.0.0/16'});
sql(q{SELECT pg_reload_conf()});
my $port = $receiver->port;
# A name passes define_biz; the address it resolves to does not pass the worker.
ok(DelayschedTest::poll_until($node, q{SELECT current_setting('delaysched.http_denied_hosts')}, '127.0.0.0/8, 169.254.0.0/16', 10), 'reloaded');
sql(qq{SELECT sched.define_biz('h_blocked', 'http', url => 'http://localhost:$port/ok/blocked', max_attempts => 5)});
$id = sql(q{SELECT sched.add('h_blocked', clock_timestamp(), '{}')});
# The worker reads the reload when it next wakes, before this task.
ok(wait_finished('h_blocked'), 'the blocked task ends');
like(sql("SELECT state || ': ' || last_error FROM sched.tasks WHERE id = $id"),
	qr/^dead: blocked_destination: destination (127\.0\.0\.1|::1) is blocked by delaysched\.http_denied_hosts/, 'dead at once, and last_error says why');
is(scalar($receiver->requests('/ok/blocked')), 0, 'the receiver never saw it');
sql(q{ALTER SYSTEM RESET delaysched.http_denied_hosts});
sql(q{SELECT pg_reload_conf()});
ok(DelayschedTest::poll_until($node, q{SELECT current_setting('delaysched.http_denied_hosts') LIKE '169.254%'}, 't', 10), 'reset');

# --- redirects: followed only when the type says so ---
sql(qq{SELECT sched.define_biz('h_redir', 'http', url => '$base/redirect/ok/redir-followed', follow_redirects => true,
	headers => '{"Authorization": "Bearer same-origin", "X-Api-Key": "k1"}')});
sql(qq{SELECT sched.define_biz('h_noredir', 'http', url => '$base/redirect/ok/redir-not')});
sql(q{SELECT sched.add('h_redir', clock_timestamp(), '{}'), sched.add('h_noredir', clock_timestamp(), '{}')});
ok(wait_finished('h_redir') && wait_finished('h_noredir'), 'both end');
my @followed = $receiver->requests('/ok/redir-followed');
is(scalar(@followed), 1, 'the redirect was followed (same POST, same body)');
is(($followed[0]{headers}{authorization} // '') . ' ' . ($followed[0]{headers}{'x-api-key'} // ''),
	'Bearer same-origin k1', 'with the type\'s headers, to the same origin');
is(sql("SELECT state FROM sched.tasks WHERE biz_type = 'h_redir'"), 'done', 'and the task is done');
is(scalar($receiver->requests('/ok/redir-not')), 0, 'the other was not');
like(sql("SELECT state || ': ' || last_error FROM sched.tasks WHERE biz_type = 'h_noredir'"), qr/^dead: http_307: redirect to .* not followed/, 'and is dead, saying so');

# A redirect to another origin (another port) gets delaysched's own headers
# but not the type's, which are for its url's origin alone, and the log
# says so.
my $elsewhere = DelayschedTest::Receiver->start(PostgreSQL::Test::Utils::tempdir);
my $log_before_away = -s $node->logfile;
sql(qq{SELECT sched.define_biz('h_away', 'http', url => '$base/redirect-port/@{[ $elsewhere->port ]}/ok/away',
	follow_redirects => true, headers => '{"Authorization": "Bearer for-the-first-origin", "X-Api-Key": "k2"}')});
my $away_id = sql(q{SELECT sched.add('h_away', clock_timestamp(), '{}')});
ok(wait_finished('h_away'), 'the task redirected elsewhere ends');
is(sql("SELECT state FROM sched.tasks WHERE biz_type = 'h_away'"), 'done', 'done, where the redirect led');
my @first = $receiver->requests('/redirect-port/');
is($first[0]{headers}{authorization}, 'Bearer for-the-first-origin', 'the first origin got the type\'s headers');
my @away = $elsewhere->requests('/ok/away');
is(scalar(@away), 1, 'the other origin got the POST');
ok(!exists $away[0]{headers}{authorization} && !exists $away[0]{headers}{'x-api-key'},
	'without the type\'s headers');
is($away[0]{headers}{'idempotency-key'}, $away_id, 'but with delaysched\'s own');
like(substr(PostgreSQL::Test::Utils::slurp_file($node->logfile), $log_before_away),
	qr/task $away_id was redirected away from the origin of its type's url, to http:\/\/127\.0\.0\.1:\d+\/ok\/away: the type's headers are not sent there/,
	'and the log says so');
$elsewhere->stop;

# --- 500 slow requests in flight do not delay a notify type ---
# All 500 sent at once: the receiver's allowance switched off, as for a
# receiver known to take them (its slow start would send 4, 8, 16...).
# The worker has read the new settings once its cap reads 999.
sql(q{ALTER SYSTEM SET delaysched.http_max_in_flight_per_host = 0});
sql(q{ALTER SYSTEM SET delaysched.http_max_in_flight = 999});
sql(q{SELECT pg_reload_conf()});
ok(DelayschedTest::poll_until($node, "SELECT holds LIKE '% of 999;%' FROM sched.workers WHERE role = 'http'", 't', 20),
	'the HTTP worker sends without a per-receiver allowance');
# (Answers after 15 s: the count below must see them in flight on a busy
# machine too.)
sql(qq{SELECT sched.define_biz('h_many', 'http', url => '$base/slow/15000/many', timeout => '30 seconds')});
sql(q{SELECT sched.define_biz('n_beside', 'notify')});
my $listener = DelayschedTest::Listener->start($node, 'postgres', [], 'n_beside');
sql(q{SELECT count(*) FROM (SELECT sched.add('h_many', clock_timestamp(), '{}') FROM generate_series(1, 500)) s});
ok(DelayschedTest::poll_until($node, "SELECT split_part(holds, ';', 1) FROM sched.workers WHERE role = 'http'", '500 in flight of 999', 20), '500 requests in flight at once');
sql(q{SELECT count(*) FROM (SELECT sched.add('n_beside', clock_timestamp() + (0.05 + i * 0.02) * interval '1 second', '{}') FROM generate_series(1, 50) i) s});
my @notes = $listener->wait_for(50, 30);
$listener->stop;
is(scalar @notes, 50, 'the notify type got every task');
my $nlate = DelayschedTest::percentile(0.99, map { $_->{late_us} / 1000 } @notes);
DelayschedTest::timing_cmp_ok($nlate, '<', 100, "its lateness p99 stayed low ($nlate ms) while they were in flight");
is(sql("SELECT count(*) FROM sched.task WHERE biz_type = 'h_many' AND state = 'd'"), '500', 'the 500 were still in flight then');
ok(wait_finished('h_many', 60), 'the 500 finish');
is(sql("SELECT count(*) FROM sched.tasks WHERE biz_type = 'h_many' AND state = 'done'"), '500', 'all done');

$receiver->stop;
$node->stop;
done_testing();
