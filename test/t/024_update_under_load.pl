# ALTER EXTENSION delaysched UPDATE from 0.2 while sessions keep adding
# tasks: every add waits for the update or goes through, none fails.  One
# of the sessions, as an application that makes sure of its type before it
# adds, calls sched.define_biz and sched.add in one transaction: it holds
# sched.biz (ROW EXCLUSIVE) when it comes to sched.task, the reverse of the
# order in which the update's files lock them (the triggers on sched.task
# first, the one on sched.biz last), and its add failed with a deadlock
# (40P01) until the update took its locks up front (see
# schema/update/0.2--0.3.sql).  The update is run several times over: DROP
# EXTENSION, CREATE EXTENSION VERSION '0.2', ALTER EXTENSION UPDATE, with
# the adders paused for the first two (they are not what is tested) and
# running through the third.  (The library's workers wait while the
# database is at 0.2, so only the adds run during the update.)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $adders = 3;
my $rounds = 8;

my $node = DelayschedTest::new_node('update_load', extra_conf => "deadlock_timeout = '100ms'\n");

sub sql { return $node->safe_psql('postgres', $_[0]) }

# Poll $query until it returns 't'; die past the deadline.
sub wait_for
{
	my ($query, $what) = @_;
	DelayschedTest::poll_until($node, $query, 't', 60) or die "timed out waiting for $what";
}

# Each adder runs load_adds in its own session: one sched.add per
# transaction (the first adder: sched.define_biz, then sched.add), logging
# when it began and ended and, if it failed, its SQLSTATE.  Tables outside
# schema sched, so that DROP EXTENSION keeps them.  An adder told to pause
# says so and adds nothing until told to go on.
sql(q{
	CREATE TABLE load_control (paused boolean NOT NULL, round int NOT NULL, stop boolean NOT NULL);
	INSERT INTO load_control VALUES (true, 0, false);
	CREATE TABLE load_state (session int PRIMARY KEY, paused_round int NOT NULL DEFAULT -1);
	CREATE TABLE load_log (session int, started timestamptz, finished timestamptz, sqlstate text, message text);
	CREATE TABLE load_window (round int, created timestamptz, started timestamptz, ended timestamptz);
	CREATE PROCEDURE load_adds(p_session int) LANGUAGE plpgsql AS $$
	DECLARE
		c record;
		v_started timestamptz;
		v_detail text;
	BEGIN
		INSERT INTO load_state (session) VALUES (p_session);
		COMMIT;
		LOOP
			SELECT * INTO c FROM load_control;
			EXIT WHEN c.stop;
			IF c.paused THEN
				UPDATE load_state SET paused_round = c.round WHERE session = p_session;
				COMMIT;
				PERFORM pg_sleep(0.01);
				CONTINUE;
			END IF;
			v_started := clock_timestamp();
			BEGIN
				-- (dynamic: planned again after each DROP EXTENSION)
				IF p_session = 1 THEN
					EXECUTE $q$SELECT sched.define_biz('load', ack_timeout => '1 hour')$q$;
				END IF;
				EXECUTE $q$SELECT sched.add('load', now() + interval '1 day')$q$;
				INSERT INTO load_log VALUES (p_session, v_started, clock_timestamp(), NULL, NULL);
			EXCEPTION WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
				INSERT INTO load_log VALUES (p_session, v_started, clock_timestamp(), SQLSTATE,
											 SQLERRM || coalesce(E'\n' || nullif(v_detail, ''), ''));
			END;
			COMMIT;
		END LOOP;
	END
	$$;
});

# DROP EXTENSION, again if it deadlocks with a scanner worker of the 0.3
# the database was at (not what this test is about: noted, not failed).
sub drop_extension
{
	for my $try (1 .. 5)
	{
		my ($ret, $out, $err) = $node->psql('postgres', 'DROP EXTENSION delaysched');
		return if $ret == 0;
		die "DROP EXTENSION failed: $err" unless $err =~ /deadlock detected/;
		note("DROP EXTENSION deadlocked, try $try: $err");
	}
	die 'DROP EXTENSION deadlocked five times';
}

# Pause the adders and wait until each has seen it (none is inside an add).
sub pause_adders
{
	my ($round) = @_;
	sql("UPDATE load_control SET paused = true, round = $round");
	wait_for("SELECT count(*) = $adders FROM load_state WHERE paused_round = $round", "the adders to pause");
}

my @sessions;
for my $i (1 .. $adders)
{
	my %s = (out => '', err => '');
	$s{h} = IPC::Run::start([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
			'-c', "CALL load_adds($i)" ], '>', \$s{out}, '2>', \$s{err});
	push @sessions, \%s;
}
wait_for("SELECT count(*) = $adders FROM load_state WHERE paused_round = 0", 'the adders to start');

drop_extension();
for my $round (1 .. $rounds)
{
	sql(q{
		BEGIN;
		CREATE EXTENSION delaysched VERSION '0.2';
		SELECT sched.define_biz('load', ack_timeout => '1 hour');
		COMMIT;
	});
	sql("INSERT INTO load_window (round, created) VALUES ($round, clock_timestamp())");
	sql('UPDATE load_control SET paused = false');
	# Some adds at 0.2 first, so that the update meets adds in every state.
	wait_for(qq{SELECT count(*) >= 50 FROM load_log l, load_window w
				WHERE w.round = $round AND l.started > w.created}, "adds at 0.2 in round $round");
	sql(qq{
		UPDATE load_window SET started = clock_timestamp() WHERE round = $round;
		ALTER EXTENSION delaysched UPDATE TO '0.3';
		UPDATE load_window SET ended = clock_timestamp() WHERE round = $round;
	});
	# And some at 0.3, after it.
	wait_for(qq{SELECT count(*) >= 20 FROM load_log l, load_window w
				WHERE w.round = $round AND l.started > w.ended}, "adds at 0.3 in round $round");
	pause_adders($round);
	last if $round == $rounds;
	# Every add of the round is in the table (checked here for the last round
	# only, which stays).
	drop_extension();
}
sql('UPDATE load_control SET stop = true');
for my $s (@sessions)
{
	$s->{h}->finish;
	is($s->{err}, '', 'an adder ended without error');
}

is(sql("SELECT extversion FROM pg_extension WHERE extname = 'delaysched'"), '0.3', 'updated to 0.3');
my $during = sql(q{
	SELECT count(*) FROM load_log l, load_window w
	WHERE l.started < w.ended AND l.finished > w.started});
cmp_ok($during, '>', 0, "adds ran during the updates ($during)");
note('adds: ' . sql('SELECT count(*) FROM load_log'));
my $deadlocks = sql("SELECT count(*) FROM load_log WHERE sqlstate = '40P01'");
is($deadlocks, '0', 'no add failed with a deadlock (40P01)');
my $failed = sql("SELECT count(*) FROM load_log WHERE sqlstate IS NOT NULL");
is($failed, '0', 'no add failed at all');
# What failed, with the first of each kind's detail (the deadlock's two
# processes and their locks).
diag(sql(q{SELECT string_agg(m, E'\n') FROM (SELECT DISTINCT ON (sqlstate) sqlstate || ': ' || message AS m
		   FROM load_log WHERE sqlstate IS NOT NULL ORDER BY sqlstate, started) f}))
  if $failed ne '0';
# No add of the last round is lost.
is( sql(q{
		SELECT count(*) FROM sched.task t WHERE t.biz_type = 'load'}),
	sql(q{
		SELECT count(*) FROM load_log l, load_window w
		WHERE w.round = (SELECT max(round) FROM load_window) AND l.started > w.created AND l.sqlstate IS NULL}),
	'every add of the last round is stored');

done_testing();
