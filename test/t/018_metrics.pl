# The numbers a monitoring system scrapes, and the statuses of sched.tasks
# that need an HTTP worker or a second session.  sched.metrics() is valid for
# Prometheus's own parser (python3-prometheus-client); the HTTP counters and
# duration histogram follow real requests; counters survive a worker's
# restart and start from zero at a server's; the gauges are counted again
# after a restart, after TRUNCATE and after a prepared transaction, and then
# agree with the tables; and prometheus-postgres-exporter, given
# contrib/prometheus/delaysched-queries.yaml, exposes the same samples on
# 127.0.0.1 and sees the counters move.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use HTTP::Tiny;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $python = '/usr/bin/python3';
my $exporter = '/usr/bin/prometheus-postgres-exporter';
my $queries = "$FindBin::Bin/../../contrib/prometheus/delaysched-queries.yaml";
my $dashboard = "$FindBin::Bin/../../contrib/grafana/delaysched-dashboard.json";

my $node = DelayschedTest::new_node('metrics',
	extra_conf => "delaysched.http_workers = 1\ndelaysched.http_max_in_flight = 1\nmax_prepared_transactions = 2\n");
my $receiver = DelayschedTest::Receiver->start(PostgreSQL::Test::Utils::tempdir);
my $base = $receiver->url;

sub sql { return $node->safe_psql('postgres', $_[0]) }

# A sample of sched.metrics(), by its name and labels as written.
sub metric
{
	my ($name, $labels) = @_;
	my $text = sql('SELECT sched.metrics()');
	return $text =~ /^\Q$name\E\{database="postgres",\Q$labels\E\} (\S+)$/m ? $1 : undef;
}

# Shared memory and the tables agree on every type's tasks by state (the
# rows that differ are shown if not).
sub gauges_agree
{
	my $differ = sql(q{
		(SELECT 'memory', biz_type, pending, ready, delivered, done, dead, cancelled
		 FROM sched._type_counts(ARRAY(SELECT biz_type FROM sched._task_counts))
		 EXCEPT SELECT 'memory', biz_type, pending, ready, delivered, done, dead, cancelled FROM sched._task_counts)
		UNION ALL
		(SELECT 'tables', biz_type, pending, ready, delivered, done, dead, cancelled FROM sched._task_counts
		 EXCEPT SELECT 'tables', biz_type, pending, ready, delivered, done, dead, cancelled
		 FROM sched._type_counts(ARRAY(SELECT biz_type FROM sched._task_counts)))});
	diag("shared memory and the tables differ:\n$differ") if $differ ne '';
	return $differ eq '';
}

sub wait_counted
{
	return DelayschedTest::poll_until($node,
		"SELECT coalesce(bool_and(counted), false) FROM sched._type_counts('{any}')", 't', 30);
}

# Parse Prometheus text with Prometheus's own client library; returns
# "name{label=value,...} value" lines, labels sorted, without the ones named.
sub parse_prometheus
{
	my ($text, @drop) = @_;
	my $script = <<'PY';
import sys
from prometheus_client.parser import text_string_to_metric_families
drop = set(sys.argv[1:])
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        labels = ",".join("%s=%s" % kv for kv in sorted(s.labels.items()) if kv[0] not in drop)
        print("%s{%s} %r" % (s.name, labels, s.value))
PY
	my ($out, $err);
	my $ok = IPC::Run::run([ $python, '-c', $script, @drop ], '<', \$text, '>', \$out, '2>', \$err);
	return ($ok, $out, $err);
}

ok(wait_counted(), 'the gauges are counted when the workers start');

# --- valid for Prometheus's parser, with every family documented ---
sql(qq{
	SELECT sched.define_biz('x_notify', ack_timeout => '1 hour');
	SELECT sched.define_biz('x_hook', 'http', url => '$base/ok/x', max_attempts => 3, min_backoff => '1 second');
	SELECT sched.define_biz('x_flaky', 'http', url => '$base/status/503,200/x', max_attempts => 3,
		min_backoff => '1 second', max_backoff => '1 second');
	SELECT sched.define_biz('x_limited', rate_limit => 5, burst => 5);
	SELECT sched.add('x_notify', now(), jsonb_build_object('n', i)) FROM generate_series(1, 5) i;
	SELECT sched.add('x_hook', now(), jsonb_build_object('n', i)) FROM generate_series(1, 4) i;
	SELECT sched.add('x_flaky', now(), '{}');
});
is(scalar $receiver->wait_requests('/ok/x', 4, 30), 4, 'the four webhooks were POSTed');
is(scalar $receiver->wait_requests('/status/503,200/x', 2, 30), 2, 'the flaky one twice');
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM sched.tasks WHERE biz_type IN ('x_hook', 'x_flaky') AND state = 'done'", '5', 30),
	'and all are done');
my ($parsed_ok, $parsed, $parse_error) = parse_prometheus(sql('SELECT sched.metrics()'));
ok($parsed_ok, 'sched.metrics() parses with prometheus_client') or diag($parse_error);
like($parsed, qr/^delaysched_tasks_added_total\{biz_type=x_notify,database=postgres\} 5\.0$/m,
	'a counter, as the parser reads it');
like($parsed, qr/^delaysched_lateness_seconds_bucket\{biz_type=x_notify,database=postgres,le=\+Inf\} 5\.0$/m,
	'a histogram bucket, as the parser reads it');

# --- the Grafana dashboard asks only for samples that exist ---
my $panels = JSON::PP->new->decode(PostgreSQL::Test::Utils::slurp_file($dashboard))->{panels};
my %asked = map { $_ => 1 } map { /\b(delaysched_[a-z_]+)/g } map { $_->{expr} } map { @{ $_->{targets} } } @$panels;
my %exists = map { /^(delaysched_[a-z_]+)\{/ ? ($1 => 1) : () } split /\n/, sql('SELECT sched.metrics()');
cmp_ok(scalar keys %asked, '>=', 15, 'the dashboard asks for the metrics');
is_deeply([ grep { !$exists{$_} } sort keys %asked ], [], 'every metric the dashboard asks for is in sched.metrics()');

# --- the HTTP counters and the duration histogram ---
is(metric('delaysched_http_requests_total', 'biz_type="x_hook",class="2xx",outcome="done"'), '4',
	'four 2xx requests, done');
is(metric('delaysched_http_requests_total', 'biz_type="x_flaky",class="5xx",outcome="retry"'), '1',
	'a 503, to be retried');
is(metric('delaysched_http_requests_total', 'biz_type="x_flaky",class="2xx",outcome="done"'), '1',
	'then its 2xx');
is(metric('delaysched_http_request_duration_seconds_count', 'biz_type="x_hook"'), '4',
	'four durations in the histogram');
is(metric('delaysched_tasks_delivered_total', 'biz_type="x_hook",delivery="http"'), '4',
	'four http deliveries');
is(metric('delaysched_tasks_delivered_total', 'biz_type="x_flaky",delivery="http"'), '2',
	'the flaky task delivered twice');
is(metric('delaysched_tasks_acked_total', 'biz_type="x_hook"'), '4', 'a 2xx counts as acknowledged');
is(metric('delaysched_bucket_tokens', 'biz_type="x_limited"'), '5', 'a full bucket of the rate-limited type');

# --- error codes: last_error and sched.attempts.error start with a stable code ---
like(sql("SELECT error FROM sched.attempts WHERE biz_type = 'x_flaky' AND outcome = 'retry'"), qr/^http_503(: |$)/,
	'a 503 is http_503');
sql("SELECT sched.define_biz('x_refused', 'http', url => 'http://127.0.0.1:1/x', max_attempts => 1)");
my $refused = sql("SELECT sched.add('x_refused', now())");
ok(DelayschedTest::poll_until($node, "SELECT state FROM sched.tasks WHERE id = $refused", 'dead', 30),
	'a request to a closed port ends dead after its one attempt');
like(sql("SELECT last_error FROM sched.tasks WHERE id = $refused"), qr/^connect_failed: /, 'as connect_failed');
is(metric('delaysched_http_requests_total', 'biz_type="x_refused",class="none",outcome="dead"'), '1',
	'counted as a request with no answer, dead');

# --- a worker's restart keeps the counters; the gauges stay right ---
my $added_before = metric('delaysched_tasks_added_total', 'biz_type="x_notify"');
ok(DelayschedTest::poll_until($node,
	"SELECT count(*) FROM sched.tasks WHERE biz_type = 'x_notify' AND state = 'delivered'", '5', 30),
	'the notify tasks are delivered');
my $scanner = sql("SELECT pid FROM sched.workers WHERE worker = 0");
sql("SELECT pg_terminate_backend($scanner)");
ok(DelayschedTest::poll_until($node,
	"SELECT pid IS NOT NULL AND pid <> $scanner FROM sched.workers WHERE worker = 0", 't', 60),
	'scanner worker 0 is back');
is(metric('delaysched_tasks_added_total', 'biz_type="x_notify"'), $added_before,
	'the counters survive a worker restart');
ok(gauges_agree(), 'the gauges agree with the tables after the worker restart');

# --- a prepared transaction: counted again once it has committed ---
sql("BEGIN; SELECT sched.add('x_notify', now() + interval '1 day') FROM generate_series(1, 3); PREPARE TRANSACTION 'x_two_phase'");
is(sql("SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'x_two_phase'"), '1', 'a transaction is prepared');
is(sql("SELECT bool_and(counted) FROM sched._type_counts('{x_notify}')"), 'f',
	'the gauges are not ready while it is prepared');
sql("COMMIT PREPARED 'x_two_phase'");
ok(wait_counted(), 'counted again once it has committed');
ok(gauges_agree(), 'and they agree with the tables, its three tasks included');

# --- TRUNCATE: counted again ---
sql('TRUNCATE sched.finished');
ok(wait_counted(), 'counted again after TRUNCATE');
is(metric('delaysched_finished_tasks', 'biz_type="x_hook",state="done"'), '0', 'no finished task kept');
ok(gauges_agree(), 'and they agree with the tables');

# --- prometheus-postgres-exporter with the queries file ---
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $dsn = sprintf('host=%s port=%d user=%s dbname=postgres sslmode=disable',
	$node->host, $node->port, scalar getpwuid($<));
my $exporter_log = PostgreSQL::Test::Utils::tempdir() . '/exporter.log';
my $exporter_run = IPC::Run::start(
	[ $exporter, "--web.listen-address=127.0.0.1:$port", "--extend.query-path=$queries",
	  '--disable-default-metrics', '--disable-settings-metrics' ],
	'>', $exporter_log, '2>&1', init => sub { $ENV{DATA_SOURCE_NAME} = $dsn });
my $http = HTTP::Tiny->new(timeout => 10);

# The exporter's samples of ours (name starting with delaysched_).
sub scrape
{
	my $deadline = time + 30;
	while (time < $deadline)
	{
		my $response = $http->get("http://127.0.0.1:$port/metrics");
		if ($response->{success} && $response->{content} =~ /^delaysched_stats_ready/m)
		{
			my ($ok, $out) = parse_prometheus($response->{content}, 'server');
			return join("\n", grep { /^delaysched_/ } split /\n/, $out) if $ok;
		}
		usleep(200_000);
	}
	return '';
}

# The names and labels of samples (not of the workers by state, which a
# scanner changes between two reads).
sub sample_names
{
	return join("\n", sort grep { !/^delaysched_workers\{/ } map { (split / /)[0] } split /\n/, $_[0]);
}

my $scraped = scrape();
isnt($scraped, '', 'the exporter serves our metrics on 127.0.0.1');
my (undef, $ours) = parse_prometheus(sql('SELECT sched.metrics()'));
$ours = join("\n", grep { /^delaysched_/ } split /\n/, $ours);
is(sample_names($scraped), sample_names($ours), 'the same samples, with the same names and labels, as sched.metrics()');
like($scraped, qr/^delaysched_workers\{database=postgres,role=scanner,state=\w+\} /m, 'the workers too');
my ($acked_before) = $scraped =~ /^delaysched_tasks_acked_total\{biz_type=x_notify,database=postgres\} (\S+)$/m;
sql("SELECT sched.ack(id) FROM sched.tasks WHERE biz_type = 'x_notify' AND state = 'delivered'");
my ($acked_after) = scrape() =~ /^delaysched_tasks_acked_total\{biz_type=x_notify,database=postgres\} (\S+)$/m;
is($acked_after - $acked_before, 5, 'the counters move: five acknowledgements later, five more');
$exporter_run->kill_kill;

# --- the statuses only an HTTP worker or a second session can show ---
# (test/t/018's node: one HTTP worker with room for one request.)
sub status_of { return sql("SELECT status FROM sched.tasks WHERE id = $_[0]") }
sub wait_status
{
	my ($id, $status) = @_;
	return DelayschedTest::poll_until($node, "SELECT status FROM sched.tasks WHERE id = $id", $status, 30);
}
sql(qq{SELECT sched.define_biz('x_hang', 'http', url => '$base/hang/x', timeout => '60 seconds')});
# Handed over: the HTTP worker is stopped (SIGSTOP), so the scanner's
# hand-off waits in its ring.
my $http_pid = sql("SELECT pid FROM sched.workers WHERE role = 'http'");
kill 'STOP', $http_pid;
my $handed = sql("SELECT sched.add('x_hang', now())");
ok(wait_status($handed, 'handed_to_http_worker'), 'handed_to_http_worker: in the stopped worker\'s ring')
  or diag(status_of($handed));
kill 'CONT', $http_pid;
ok(wait_status($handed, 'request_in_flight'), 'request_in_flight: the worker started it, and it hangs')
  or diag(status_of($handed));
# The worker has room for one request: the next waits for a slot.
my $slotless = sql("SELECT sched.add('x_hang', now())");
ok(wait_status($slotless, 'waiting_for_http_slot'), 'waiting_for_http_slot: parked until the worker has room')
  or diag(status_of($slotless));
sql("SELECT sched.drop_biz('x_hang', cancel_tasks => true)");
# Lease expired: a delivery whose lease ran out while a session holds its
# row, so that the sweep cannot redeliver it yet.
# (Five seconds: the hold must begin before the lease runs out, and a busy
# machine can take seconds to start a session.)
sql("SELECT sched.define_biz('x_short', ack_timeout => '5 seconds')");
my $leased = sql("SELECT sched.add('x_short', now())");
ok(wait_status($leased, 'awaiting_ack'), 'awaiting_ack: delivered');
my $holder = DelayschedTest::hold_in_transaction($node, "SELECT 1 FROM sched.task WHERE id = $leased FOR UPDATE");
ok(wait_status($leased, 'lease_expired'), 'lease_expired: its lease ran out, the redelivery waits for the row')
  or diag(status_of($leased));
DelayschedTest::release_session($holder);
ok(DelayschedTest::poll_until($node, "SELECT attempt >= 2 FROM sched.tasks WHERE id = $leased", 't', 30),
	'and once the row is free it is delivered again');
sql("SELECT sched.drop_biz('x_short', cancel_tasks => true)");

# --- a server restart: counters from zero, gauges counted from the tables ---
$node->restart;
ok(wait_counted(), 'counted after the restart');
is(metric('delaysched_tasks_added_total', 'biz_type="x_notify"'), '0', 'counters start from zero at a server start');
ok(gauges_agree(), 'the gauges agree with the tables after the restart');
is(metric('delaysched_tasks_pending', 'biz_type="x_notify"'), '3', 'the three prepared tasks are pending');

# --- DROP EXTENSION and CREATE EXTENSION again: the gauges start over ---
# (DROP EXTENSION leaves the database's numbers in shared memory, and its
# workers; the new extension must not take the old gauges over.)
$node->safe_psql('postgres', 'CREATE DATABASE x_again');
$node->safe_psql('x_again', q{
	CREATE EXTENSION delaysched;
	SELECT sched.define_biz('x_kept');
	SELECT sched.add_many('x_kept', array_fill(now() + interval '1 day', ARRAY[4]))});
ok(DelayschedTest::poll_until_in($node, 'x_again',
		"SELECT pending || ' ' || counted FROM sched._type_counts('{x_kept}')", '4 true', 30),
	'the gauges count the first life\'s four tasks');
$node->safe_psql('x_again', q{
	DROP EXTENSION delaysched;
	CREATE EXTENSION delaysched;
	SELECT sched.define_biz('x_kept')});
ok(DelayschedTest::poll_until_in($node, 'x_again',
		"SELECT pending || ' ' || counted FROM sched._type_counts('{x_kept}')", '0 true', 30),
	'after DROP and CREATE EXTENSION they are counted again: no task pending');
is($node->safe_psql('x_again', "SELECT pending FROM sched.biz_stats WHERE biz_type = 'x_kept'"), '0',
	'sched.biz_stats shows none');

$receiver->stop;
$node->stop;
done_testing();
