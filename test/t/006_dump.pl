# pg_dump and restore: business types, unfinished and finished tasks, dedupe
# keys and the id sequence come back; the restore raises no error.
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

$node->stop;
done_testing();
