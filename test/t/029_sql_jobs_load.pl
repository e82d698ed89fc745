# SQL jobs: a long job holds up no other.  With the default two SQL
# workers, one runs a 30-second job (SELECT pg_sleep(30)) while 1,000
# one-statement jobs of the same type, due over the next ten seconds, run on
# the other: every one of them runs exactly once, none before its run_at,
# and all commit long before the long job ends, which is still running
# then; the long job ends done, at its first attempt.
#
# Their start lateness (the clock when the job's insert ran, from a column
# default, minus its run_at) is printed, and checked only with
# PG_TEST_EXTRA=delaysched_timing (DelayschedTest::timing_checked).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $JOBS = 1000;
my $LONG = 30;
my $SPACING_MS = 10;

# track_commit_timestamp: when each job's transaction committed.
my $node = DelayschedTest::new_node('sql_jobs_load',
	extra_conf => "delaysched.sql_workers = 2\ntrack_commit_timestamp = on");

sub sql { return $node->safe_psql('postgres', $_[0]) }

sql(q{
	CREATE TABLE ran (n int NOT NULL, started timestamptz NOT NULL DEFAULT clock_timestamp());
	CREATE TABLE short_job (n int PRIMARY KEY, id bigint NOT NULL);
	SELECT sched.define_biz('batch', delivery => 'sql');
});

my $long = sql("SELECT sched.add_sql('batch', now(), 'SELECT pg_sleep($LONG)')");
ok(DelayschedTest::poll_until($node, qq{
	SELECT count(*) FROM sched.tasks t JOIN sched.workers w ON w.role = 'sql' AND w.holds = 'job ' || t.id
	WHERE t.id = $long AND t.status = 'running'}, '1', 30),
	'the long job runs in an SQL worker');

# The short jobs, due 10 ms apart from a second after they are added: a
# hundred a second, which one SQL worker runs as they fall due.
sql(qq{
	INSERT INTO short_job (n, id)
	SELECT n, sched.add_sql('batch', b.base + n * interval '$SPACING_MS milliseconds',
							pg_catalog.format('INSERT INTO ran (n) VALUES (%s)', n))
	FROM generate_series(1, $JOBS) AS n,
		 (SELECT clock_timestamp() + interval '1 second' AS base) AS b});

ok(DelayschedTest::poll_until($node, 'SELECT count(*) FROM ran', $JOBS, 2 * $LONG),
	"all $JOBS short jobs ran");
is(sql("SELECT state || ' ' || status FROM sched.tasks WHERE id = $long"), 'delivered running',
	'the long job is still running');
is(sql(q{SELECT count(DISTINCT n) || ' ' || min(n) || ' ' || max(n) FROM ran}), "$JOBS 1 $JOBS",
	'each short job ran once');
is(sql(q{SELECT count(*) FROM sched.tasks t JOIN short_job s ON s.id = t.id
		 WHERE t.state = 'done' AND t.attempt = 1}), $JOBS,
	'each short job is done, at its first attempt');
is(sql(q{SELECT count(*) FROM ran r JOIN short_job s USING (n) JOIN sched.tasks t ON t.id = s.id
		 WHERE r.started < t.run_at}), '0', 'no short job started before its run_at');
# The long job's lease began before its command did: this bound is the
# stricter one.
is(sql(qq{SELECT max(pg_xact_commit_timestamp(r.xmin)) < t.delivered_at + interval '$LONG seconds'
		  FROM ran r, sched.tasks t WHERE t.id = $long GROUP BY t.delivered_at}), 't',
	'every short job committed before the long job could end');

my ($p50, $p99, $worst) = split /\|/, sql(q{
	SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY l), percentile_cont(0.99) WITHIN GROUP (ORDER BY l), max(l)
	FROM (SELECT extract(epoch FROM r.started - t.run_at) * 1000 AS l
		  FROM ran r JOIN short_job s USING (n) JOIN sched.tasks t ON t.id = s.id) x});
note(sprintf('start lateness of the short jobs: p50 %.1f ms, p99 %.1f ms, worst %.1f ms', $p50, $p99, $worst));
# A hundred jobs a second leave the free worker idle most of the time:
# below capacity, a job starts within a few milliseconds (promise 2).
DelayschedTest::timing_cmp_ok($p50, '<=', 5, 'start lateness p50 at most 5 ms');
DelayschedTest::timing_cmp_ok($p99, '<=', 25, 'start lateness p99 at most 25 ms');

ok(DelayschedTest::poll_until($node, "SELECT state FROM sched.tasks WHERE id = $long", 'done', 2 * $LONG),
	'the long job ends done');
is(sql(qq{SELECT string_agg(attempt || ':' || outcome || ':' || (duration >= interval '$LONG seconds'), ',')
		  FROM sched.attempts WHERE id = $long}), '1:done:true',
	'the long job ran once, for its whole length');

$node->stop;
done_testing();
