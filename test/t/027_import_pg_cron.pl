# sched.import_pg_cron beside a live pg_cron: its jobs become schedules of an
# sql type -- the rule, command, role, time zone and pause of each -- or are
# left out with a note that says why (@reboot, '$', another database,
# another server, a dropped role, VACUUM among other statements); pg_cron's jobs are untouched; a
# second import makes nothing new; the statements a note gives for another
# database work there; an imported job runs as its pg_cron user.  Refused:
# a role that is not an administrator, a type that does not run commands,
# a database without pg_cron.
#
# pg_cron is postgresql-N-cron (1.4 on bookworm's 15, 1.6 in the 17 and 18
# chroots): without it for this major the test is skipped, and says so.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
DelayschedTest::skip_all("pg_cron is not installed for this PostgreSQL ($sharedir/extension/pg_cron.control)")
  unless -e "$sharedir/extension/pg_cron.control";

# cron.timezone is pg_cron 1.5's: 1.4 leaves it a placeholder and runs in GMT.
my $node = DelayschedTest::new_node('pg_cron', extra_conf => <<'EOC');
shared_preload_libraries = 'pg_cron,delaysched'
cron.database_name = 'postgres'
cron.timezone = 'Asia/Shanghai'
# pg_cron's launcher and two databases' workers
max_worker_processes = 24
EOC
sub sql { my ($q, $db) = @_; return $node->safe_psql($db // 'postgres', $q) }

# The SQLSTATE and message of a statement that must fail, as role $role.
sub refusal
{
	my ($q, %opts) = @_;
	my ($rc, $out, $err) = $node->psql($opts{db} // 'postgres', "\\set VERBOSITY verbose\n$q",
		extra_params => [ $opts{role} ? ('-U', $opts{role}) : () ]);
	return ($rc, $err =~ /ERROR:\s+([0-9A-Z]{5}): ([^\n]*)/ ? ($1, $2) : ('', $err), $err);
}

sql(q{
	CREATE EXTENSION pg_cron;
	CREATE ROLE alice LOGIN;
	CREATE ROLE carol LOGIN;
	CREATE ROLE mallory LOGIN;
	CREATE DATABASE otherdb;
	CREATE TABLE run_log (who text, at timestamptz DEFAULT now());
	GRANT INSERT ON run_log TO alice;
});
my $pg_cron = sql("SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'");
my $zone = sql("SELECT count(*) FROM pg_settings WHERE name = 'cron.timezone'") ? 'Asia/Shanghai' : 'UTC';
note("pg_cron $pg_cron: schedules are read in $zone");

# pg_cron's jobs.  Its own functions make what they accept; what only a
# later pg_cron accepts ('30 seconds' in 1.5, '$' in 1.6) and a job on
# another server are written into cron.job directly (pg_cron 1.4 skips a
# schedule it cannot read).
my %id;
$id{$_->[0]} = sql($_->[1]) for (
	[ nightly_cleanup => q{SELECT cron.schedule('nightly_cleanup', '0 3 * * *', $$DELETE FROM run_log WHERE at < now() - interval '1 year'$$)} ],
	[ alice_log => q{SELECT cron.schedule_in_database('alice-log', '0 4 1 1 *', $$INSERT INTO run_log (who) SELECT current_user$$, 'postgres', 'alice')} ],
	[ paused_job => q{SELECT cron.schedule_in_database('paused_job', '@daily', 'SELECT 1', 'postgres', NULL, false)} ],
	[ other_db => q{SELECT cron.schedule_in_database('other_db_job', '15 2 * * *', 'SELECT 2', 'otherdb', 'alice')} ],
	[ dropped_user => q{SELECT cron.schedule_in_database('carols_job', '0 5 * * *', 'SELECT 3', 'postgres', 'carol')} ],
	[ at_boot => q{SELECT cron.schedule('at_boot', '@reboot', 'SELECT 4')} ],
	[ vacuum => q{SELECT cron.schedule('nightly_vacuum', '0 2 * * *', 'VACUUM')} ],
	[ vacuum_among => q{SELECT cron.schedule('purge_and_vacuum', '0 2 * * *', 'DELETE FROM run_log; VACUUM run_log')} ],
	[ report_postgres => q{SELECT cron.schedule('report', '0 7 * * 1', 'SELECT 8')} ],
	[ report_alice => q{SELECT cron.schedule_in_database('report', '0 8 * * 1', 'SELECT 9', 'postgres', 'alice')} ],
	[ unnamed => q{SELECT cron.schedule('0 9 1 * *', 'SELECT 10')} ],
	[ seconds => q{INSERT INTO cron.job (schedule, command, nodename, nodeport, database, username, jobname)
		VALUES ('30 seconds', 'SELECT 5', 'localhost', current_setting('port')::int, 'postgres', 'postgres', 'every_30s')
		RETURNING jobid} ],
	[ month_end => q{INSERT INTO cron.job (schedule, command, nodename, nodeport, database, username, jobname)
		VALUES ('0 0 $ * *', 'SELECT 6', 'localhost', current_setting('port')::int, 'postgres', 'postgres', 'month_end')
		RETURNING jobid} ],
	[ remote => q{INSERT INTO cron.job (schedule, command, nodename, nodeport, database, username, jobname)
		VALUES ('0 6 * * *', 'SELECT 7', 'db2.example.com', 5432, 'postgres', 'postgres', 'remote_job')
		RETURNING jobid} ]);
sql('DROP ROLE carol');
my $jobs_before = sql('SELECT string_agg(j::text, E\'\n\' ORDER BY jobid) FROM cron.job j');

###########################################################################
# 1. The import: one row per job.
###########################################################################
my %row;
for (split /\n/, sql(q{SELECT jobid, coalesce(jobname, ''), schedule_name, imported, coalesce(note, '')
					  FROM sched.import_pg_cron() ORDER BY jobid}))
{
	my ($jobid, $jobname, $name, $imported, $note) = split /\|/, $_, 5;
	$row{$jobid} = { jobname => $jobname, name => $name, imported => $imported, note => $note };
	note("job $jobid ($jobname): $name, imported $imported, $note");
}
is(scalar keys %row, scalar keys %id, 'one row per pg_cron job');
is(sql("SELECT delivery FROM sched.biz WHERE name = 'pg_cron'"), 'sql', "the type pg_cron was made, delivery 'sql'");

sub row { my ($key) = @_; return $row{ $id{$key} } // {} }
sub imported_ok
{
	my ($key, $name, $note) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $r = row($key);
	is_deeply([ $r->{name}, $r->{imported}, $r->{note} ], [ $name, 't', $note ], "$key: imported as $name")
	  or diag(explain($r));
}
sub left_out_like
{
	my ($key, $pattern) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $r = row($key);
	ok($r->{imported} eq 'f' && $r->{note} =~ $pattern, "$key: not imported, and the note says why")
	  or diag(explain($r));
}
imported_ok('nightly_cleanup', 'nightly_cleanup', '');
imported_ok('alice_log', "pg_cron_$id{alice_log}", '');
imported_ok('paused_job', 'paused_job', 'paused: the job is inactive in pg_cron');
imported_ok('seconds', 'every_30s', '');
imported_ok('unnamed', "pg_cron_$id{unnamed}", '');
imported_ok('report_postgres', "pg_cron_$id{report_postgres}", '');
imported_ok('report_alice', "pg_cron_$id{report_alice}", '');
left_out_like('at_boot', qr/^\@reboot runs the job when the server starts/);
left_out_like('month_end', qr/^"\$" \(the last day of the month\) has no equivalent/);
left_out_like('remote', qr/^the job runs on another server \(db2\.example\.com:5432\)/);
left_out_like('dropped_user', qr/^role "carol", the job's user, does not exist/);
imported_ok('vacuum', 'nightly_vacuum', '');
left_out_like('vacuum_among', qr/^VACUUM cannot run inside a transaction block, and the statements of a command with several run in one/);
left_out_like('other_db', qr/^the job runs in database "otherdb", and a schedule runs in the database it is defined in; there, as a superuser: /);

###########################################################################
# 2. The schedules: rule, command, role, time zone, pause, as pg_cron ran them.
###########################################################################
my %expect = (
	nightly_cleanup => [ '0 3 * * *', q{DELETE FROM run_log WHERE at < now() - interval '1 year'}, 'postgres', 'f' ],
	"pg_cron_$id{alice_log}" => [ '0 4 1 1 *', 'INSERT INTO run_log (who) SELECT current_user', 'alice', 'f' ],
	paused_job => [ '@daily', 'SELECT 1', 'postgres', 't' ],
	every_30s => [ 'every 30 seconds', 'SELECT 5', 'postgres', 'f' ],
	"pg_cron_$id{unnamed}" => [ '0 9 1 * *', 'SELECT 10', 'postgres', 'f' ],
	"pg_cron_$id{report_postgres}" => [ '0 7 * * 1', 'SELECT 8', 'postgres', 'f' ],
	"pg_cron_$id{report_alice}" => [ '0 8 * * 1', 'SELECT 9', 'alice', 'f' ],
	nightly_vacuum => [ '0 2 * * *', 'VACUUM', 'postgres', 'f' ]);
my %got = map { my ($n, @f) = split /\|/, $_, -1; ($n => \@f) } split /\n/, sql(q{
	SELECT name, schedule, command, run_as::text, paused, time_zone, catch_up, allow_overlap
	FROM sched.schedules WHERE biz_type = 'pg_cron'});
is_deeply([ sort keys %got ], [ sort keys %expect ], 'a schedule for each job imported, and no other');
for my $name (sort keys %expect)
{
	is_deeply($got{$name}, [ @{ $expect{$name} }, $zone, 'none', 'f' ],
		"$name: rule, command, role, pause; time zone $zone, catch_up none, no overlap");
}
is(sql(q{SELECT string_agg(schedule || ':' || run_as::text || ':' || command, ',' ORDER BY schedule COLLATE "C")
		 FROM sched.tasks WHERE biz_type = 'pg_cron' AND state = 'pending'}),
	join(',', map { "$_:$expect{$_}[2]:$expect{$_}[1]" } sort grep { $expect{$_}[3] eq 'f' } keys %expect),
	'each active schedule has its pending firing, run as the job\'s user; the paused one none');
is(sql('SELECT string_agg(j::text, E\'\n\' ORDER BY jobid) FROM cron.job j'), $jobs_before,
	"pg_cron's jobs are untouched");

###########################################################################
# 3. Again: nothing new, the schedules as they were.
###########################################################################
# (What a firing changes left out: every_30s fires meanwhile.)
my $definitions = q{SELECT string_agg(concat_ws('|', name, schedule, command, run_as, paused, time_zone, created_at),
									  E'\n' ORDER BY name) FROM sched.schedules WHERE biz_type = 'pg_cron'};
my $schedules_before = sql($definitions);
my %again = map { my ($jobid, $imported, $note) = split /\|/, $_, 3; ($jobid => "$imported|$note") }
  split /\n/, sql(q{SELECT jobid, imported, coalesce(note, '') FROM sched.import_pg_cron()});
is(scalar(grep { $again{$_} =~ /^t/ } keys %again), 0, 'a second import imports nothing');
is(join(',', sort grep { $again{$_} eq 'f|exists' } keys %again),
	join(',', sort map { $id{$_} } grep { $row{ $id{$_} }{imported} eq 't' } keys %id),
	"every job imported the first time is 'exists' the second");
is(sql($definitions), $schedules_before, 'and the schedules are as they were');
is(sql(q{SELECT count(*) FROM sched.tasks WHERE biz_type = 'pg_cron' AND last_error LIKE 'schedule_redefined%'}), '0',
	'none was defined again');
is(sql('SELECT string_agg(j::text, E\'\n\' ORDER BY jobid) FROM cron.job j'), $jobs_before,
	"pg_cron's jobs are still untouched");

###########################################################################
# 4. An imported job runs as its pg_cron user; another database's job is
#    made there by the statements its note gives.
###########################################################################
sql(qq{SELECT sched.run_now('pg_cron_$id{alice_log}', 'pg_cron')});
ok(DelayschedTest::poll_until($node, 'SELECT who FROM run_log', 'alice', 60),
	"run now, alice's job ran as alice")
  or diag(sql(q{SELECT string_agg(a::text, E'\n') FROM sched.attempts a}));

my ($statements) = row('other_db')->{note} =~ /as a superuser: (.*)$/;
sql($statements, 'otherdb');
is(sql(q{SELECT name || '|' || schedule || '|' || command || '|' || run_as::text || '|' || time_zone || '|' || paused
		 FROM sched.schedules WHERE biz_type = 'pg_cron'}, 'otherdb'),
	"other_db_job|15 2 * * *|SELECT 2|alice|$zone|false",
	"the note's statements make the other database's job there, run as its user");

###########################################################################
# 5. Refusals.
###########################################################################
my ($rc, $state, $message) = refusal('SELECT * FROM sched.import_pg_cron()', role => 'mallory');
is("$state $message", '42501 permission denied for schema sched', 'a role without grants is refused');
sql('GRANT USAGE ON SCHEMA sched TO mallory; GRANT EXECUTE ON FUNCTION sched.import_pg_cron(text) TO mallory');
($rc, $state, $message) = refusal('SELECT * FROM sched.import_pg_cron()', role => 'mallory');
is("$state $message", '42501 permission denied for function import_pg_cron',
	'a role granted EXECUTE is refused too: it is not an administrator');
sql("SELECT sched.define_biz('pushed')");
($rc, $state, $message) = refusal(q{SELECT * FROM sched.import_pg_cron('pushed')});
is("$state $message", '42809 business type "pushed" does not run sql commands', 'a type that is not sql is refused');
($rc, $state, $message) = refusal('SELECT * FROM sched.import_pg_cron()', db => 'otherdb');
is("$state $message", '42704 extension "pg_cron" is not installed in this database',
	'a database without pg_cron is refused');
like((refusal('SELECT * FROM sched.import_pg_cron()', db => 'otherdb'))[3],
	qr/HINT:  pg_cron keeps its jobs in database "postgres" \(cron\.database_name\)/, '... with a hint that names its database');
is(sql(q{SELECT count(*) FROM sched.schedules WHERE biz_type = 'pushed'}), '0', 'the refusals made nothing');

$node->stop;
done_testing();
