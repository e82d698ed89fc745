# pg_dump and restore: business types, unfinished and finished tasks, dedupe
# keys and the id sequence come back; the restore raises no error.  Per-type
# grants come back by role name in another cluster, whose roles have other
# OIDs; a dropped role's grants do not.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = DelayschedTest::new_node('dump');
$node->safe_psql('postgres', q{
	SELECT sched.define_biz('orders', max_attempts => 5);
	SELECT sched.define_biz('inbox', delivery => 'pull');
	SELECT sched.add('orders', now() + interval '1 day', '{"a": 1}', dedupe_key => 'k1');
	SELECT sched.add('orders', now() + interval '2 days', '{"a": 2}');
	SELECT sched.cancel(sched.add('inbox', now() + interval '1 day', '{"c": 1}'));
	CREATE ROLE regress_app;
	CREATE ROLE regress_reader;
	CREATE ROLE regress_gone;
	SELECT sched.grant_biz('orders', 'regress_app');
	SELECT sched.grant_biz('inbox', 'regress_reader', 'read');
	SELECT sched.grant_biz('inbox', 'regress_gone', 'consume');
	DROP ROLE regress_gone;
});
my $tasks_query = 'SELECT id, biz_type, run_at, state, attempt, payload, dedupe_key FROM sched.tasks ORDER BY id';
my $before = $node->safe_psql('postgres', $tasks_query);

my $dump = $node->basedir . '/dump.sql';
$node->command_ok([ 'pg_dump', '-d', $node->connstr('postgres'), '-f', $dump ], 'pg_dump succeeds');
$node->safe_psql('postgres', 'CREATE DATABASE copy');
$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('copy'), '-f', $dump ],
	'the dump restores without error');

is($node->safe_psql('copy', $tasks_query), $before, 'tasks restored as they were');
is($node->safe_psql('copy', 'SELECT name, delivery, max_attempts FROM sched.biz ORDER BY name'),
	"inbox|pull|10\norders|notify|5", 'business types restored');
is($node->safe_psql('copy', 'SELECT count(*) FROM sched.dedupe'), '1', 'dedupe keys restored');
cmp_ok($node->safe_psql('copy', "SELECT last_value FROM sched.task_seq"), '>=', 3,
	'the id sequence continues');
is($node->safe_psql('copy', 'SELECT count(*) FROM sched.task WHERE bucket <> sched._bucket(run_at)'),
	'0', 'every task in its bucket');

# Another cluster, whose roles (made first, as pg_dumpall --globals-only
# would) have other OIDs than in the first.
my $grants_query = 'SELECT biz_type, role, privilege FROM sched.biz_grants ORDER BY 1, 2, 3';
my $dump_fc = $node->basedir . '/dump.custom';
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('postgres'), '-f', $dump_fc ],
	'pg_dump -Fc succeeds');
my $other = DelayschedTest::new_node('other', extra_conf => "delaysched.databases = 'copy'");
$other->safe_psql('postgres', q{
	CREATE ROLE regress_filler_1;
	CREATE ROLE regress_filler_2;
	CREATE ROLE regress_reader;
	CREATE ROLE regress_app;
	GRANT USAGE ON SCHEMA sched TO regress_app;
	CREATE DATABASE copy;
});
isnt($other->safe_psql('postgres', "SELECT 'regress_app'::regrole::oid"),
	$node->safe_psql('postgres', "SELECT 'regress_app'::regrole::oid"),
	'the role has another OID in the other cluster');
$other->command_ok([ 'pg_restore', '--exit-on-error', '-d', $other->connstr('copy'), $dump_fc ],
	'pg_restore into another cluster succeeds');
is($other->safe_psql('copy', $grants_query), "inbox|regress_reader|read\norders|regress_app|schedule",
	'grants restored by role name; the dropped role\'s grant is not');
is($other->safe_psql('copy', 'SELECT count(*) FROM sched.biz_grant'), '2',
	'nothing of the dropped role stored');
is($other->safe_psql('copy', q{
	GRANT USAGE ON SCHEMA sched TO regress_app;
	GRANT EXECUTE ON FUNCTION sched.add(text, timestamptz, jsonb, text, text, interval, text, int) TO regress_app;
	SET ROLE regress_app;
	SELECT sched.add('orders', now() + interval '1 day') > 0;
}), 't', 'the restored grant lets the role schedule in the other cluster');
$other->stop;

$node->stop;
done_testing();
