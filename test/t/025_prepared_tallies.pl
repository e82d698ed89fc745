# Only what commits counts, for a two-phase transaction too: tasks added by
# a transaction that is prepared (PREPARE TRANSACTION) count in
# delaysched_tasks_added_total once COMMIT PREPARED has run, never after
# ROLLBACK PREPARED, and also when the server restarts between the two (a
# prepared transaction survives a restart; the counters start from zero at
# a server start, so the restart's part is counted from zero).  An ordinary
# role with the 'schedule' grant prepares one of them: its bookkeeping must
# not fail, and that role cannot write the counters' table itself; nor
# must a transaction made read-only after its adds fail to prepare.  The
# gauges are counted again after either end and agree with the tables.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = DelayschedTest::new_node('prepared', extra_conf => "max_prepared_transactions = 4\n");

sub sql { return $node->safe_psql('postgres', $_[0]) }

# delaysched_tasks_added_total of x_two, from sched.metrics().
sub added
{
	my $text = sql('SELECT sched.metrics()');
	return $text =~ /^delaysched_tasks_added_total\{database="postgres",biz_type="x_two"\} (\S+)$/m
	  ? $1 : 'none';
}

# Wait until added_total is $expected (counted within a moment of the commit).
sub added_becomes
{
	my ($expected, $what) = @_;
	my $ok = DelayschedTest::poll_until($node,
		q{SELECT substring(sched.metrics() FROM
			'delaysched_tasks_added_total\{database="postgres",biz_type="x_two"\} (\d+)')},
		$expected, 30);
	ok($ok, $what) or diag('added_total is ' . added());
}

# The gauges are counted (not stale) and x_two has $pending pending tasks.
sub pending_counted
{
	my ($pending, $what) = @_;
	ok(DelayschedTest::poll_until($node,
		"SELECT pending || ' ' || counted FROM sched._type_counts('{x_two}')", "$pending true", 30),
		$what)
	  or diag(sql("SELECT pending || ' ' || counted FROM sched._type_counts('{x_two}')"));
}

# $n tasks of x_two, a day ahead (not delivered while the test runs).
sub adds
{
	my ($n) = @_;
	return "SELECT sched.add('x_two', now() + interval '1 day') FROM generate_series(1, $n);";
}

sql(q{
	CREATE ROLE x_app LOGIN;
	GRANT USAGE ON SCHEMA sched TO x_app;
	GRANT EXECUTE ON FUNCTION sched.add(text, timestamptz, jsonb, text, text, interval, text, int) TO x_app;
	SELECT sched.define_biz('x_two');
	SELECT sched.grant_biz('x_two', 'x_app')});
pending_counted(0, 'the gauges are counted');
is(added(), '0', 'nothing added yet');

sql(adds(10));
added_becomes(10, 'ten committed adds count ten');

# Prepared, then rolled back: nothing counts.
sql('BEGIN;' . adds(100) . "PREPARE TRANSACTION 'x_rolled_back'");
is(added(), '10', 'a prepared transaction does not count while it is prepared');
sql("ROLLBACK PREPARED 'x_rolled_back'");
pending_counted(10, 'after ROLLBACK PREPARED the gauges are counted again: ten pending');
is(added(), '10', 'ROLLBACK PREPARED counts nothing');

# Prepared by an ordinary role, then committed: its five count.
$node->safe_psql('postgres', 'BEGIN;' . adds(5) . "PREPARE TRANSACTION 'x_committed'",
	extra_params => [ '-U', 'x_app' ]);
is(added(), '10', 'the ordinary role\'s prepared adds do not count yet');
$node->safe_psql('postgres', "COMMIT PREPARED 'x_committed'", extra_params => [ '-U', 'x_app' ]);
added_becomes(15, 'COMMIT PREPARED counts its five adds');
pending_counted(15, 'and the gauges are counted again: fifteen pending');

# The ordinary role cannot write the table that holds a prepared
# transaction's numbers until its commit.
my ($rc, $out, $err) = $node->psql('postgres',
	"INSERT INTO sched._prepared_tally (biz_type, slots) VALUES ('x_two', '{1000}')",
	extra_params => [ '-U', 'x_app' ]);
like($err, qr/permission denied/, 'an ordinary role cannot forge a prepared transaction\'s numbers');
is(sql('SELECT count(*) FROM sched._prepared_tally'), '0', 'no numbers left waiting');

# Made read-only after its adds (which PostgreSQL allows): its PREPARE must
# not fail for the bookkeeping, and its adds count once committed.
sql(q{SELECT sched.define_biz('x_read_only');
	BEGIN;
	SELECT sched.add('x_read_only', now() + interval '1 day') FROM generate_series(1, 3);
	SET TRANSACTION READ ONLY;
	PREPARE TRANSACTION 'x_read_only'});
sql("COMMIT PREPARED 'x_read_only'");
ok(DelayschedTest::poll_until($node,
		q{SELECT substring(sched.metrics() FROM
			'delaysched_tasks_added_total\{database="postgres",biz_type="x_read_only"\} (\d+)')},
		'3', 30),
	'a transaction made read-only after its adds prepares, and its adds count once committed');

# Prepared, the server restarted, then committed: its seven count (from
# zero, where the counters start after a restart).
sql('BEGIN;' . adds(7) . "PREPARE TRANSACTION 'x_across_restart'");
is(added(), '15', 'prepared before a restart: not counted yet');
my $before_restart = added();
$node->restart;
is(sql("SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'x_across_restart'"), '1',
	'the prepared transaction survived the restart');
ok(DelayschedTest::poll_until($node,
		"SELECT count(*) > 0 FROM sched.workers WHERE role = 'scanner' AND state <> 'stopped'", 't', 30),
	'the scanners are back');
is(added(), '0', 'the counters start from zero, and the prepared adds do not count yet');
sql("COMMIT PREPARED 'x_across_restart'");
added_becomes(7, 'COMMIT PREPARED after the restart counts its seven adds');
pending_counted(22, 'and the gauges count all 22 tasks');
is(sql('SELECT count(*) FROM sched._prepared_tally'), '0', 'no numbers left waiting');

# 10 + 5 before the restart, 7 after it; 100 never.
is($before_restart + added(), 10 + 5 + 7, 'added_total grew by exactly 10 + 5 + 7 over the two lives');

$node->stop;
done_testing();
