# Bursts, again and again: a burst of tasks all due at one instant, taken by
# a LISTEN consumer that acknowledges in batches (test/dslisten --ack-batch),
# repeated in several shapes, each burst polled until every task is
# delivered and acknowledged.  Once, from the outside, a 50,000-task burst
# that usually drained in under a second started half a second late and
# took ten; a stress test finds what one run does not.
#
# The shapes, in turn:
#   ahead     added in one statement, due a little later (the next second
#             but one, so that every range is swept in between)
#   now       due at the instant it is added
#   past      due half a second before it is added
#   straddle  due at a second's boundary, added in four parts: before it,
#             just before, just after, and after its second was walked
#             (behind the ranges' pointers)
#   clock     the regress test clock_steps first (sched._tick with a clock
#             stepped forward and back, rolled back), then an "ahead" burst
#             beside a few tasks of a rate-limited type, which the drain
#             delivers
# and every other round of them with a bystander type holding tasks due in
# an hour, so that the walk after a burst's first statement goes in fair
# shares (fair_walk.c) instead of alone.
#
# The stall was the consumer's: its acknowledgements read the burst's whole
# partition, by a plan its session had made while the partition was empty
# (a queue's partition between bursts, vacuumed down to no pages), and its
# notifications, sent between its statements, waited for them.  So before
# each burst the table is vacuumed, the consumer acknowledges a task of a
# trickle (as one with other traffic would) and a second session a few
# tasks; once the burst is delivered, that session acknowledges some of the
# burst's tasks and counts the rows it read by sequential scans of task
# partitions.
#
# Always checked: every task delivered once (attempt 1, no duplicate, none
# missing) and acknowledged, each burst within a deadline of 30 s (which a
# stalled wake-up falling back to the minute's full sweep cannot meet, and
# a busy machine can); the acknowledgements read no partition whole.  Printed, and checked only with
# PG_TEST_EXTRA=delaysched_timing: each burst's start lateness (first
# receipt after the burst was due and committed) and drain time (last
# receipt after that).
#
# Knobs (doc/testing.md): DELAYSCHED_BURST_ROUNDS (rounds of the five
# shapes, default 2), DELAYSCHED_BURST_SIZE (tasks per burst, default
# 5,000), DELAYSCHED_BURST_DEADLINE (seconds, default 30).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use IPC::Run;
use Test::More;
use Time::HiRes qw(time usleep);

my $rounds = $ENV{DELAYSCHED_BURST_ROUNDS} // 2;
my $size = $ENV{DELAYSCHED_BURST_SIZE} // 5000;
my $deadline_s = $ENV{DELAYSCHED_BURST_DEADLINE} // 30;
my @shapes = qw(ahead now past straddle clock);

# Timing bounds, when checked: a burst starts within this (ms) of being
# due and committed, and drains at no less than this many tasks a second
# (the burst of the issue took 10.2 s for 50,000: 4,880/s; it usually
# drains at 50,000 to 100,000/s on two cores).
my $start_bound_ms = 250;
my $pace_bound = 20_000;

my $node = DelayschedTest::new_node('burst_stress');
$node->safe_psql('postgres', q{
	SELECT sched.define_biz('burst', ack_timeout => '1 hour');
	SELECT sched.define_biz('bystander', ack_timeout => '1 hour');
	SELECT sched.define_biz('paced', ack_timeout => '1 hour', rate_limit => 1000);
	SELECT sched.define_biz('probe', ack_timeout => '1 hour');
	SELECT sched.define_biz('trickle', ack_timeout => '1 hour');
});

# --- the consumer: dslisten acknowledging in batches, its lines parsed here ---
# It writes to a file, not a pipe, so that it never waits for this script
# to read (its receipt times are the consumer's, not this loop's); and its
# lines are parsed with patterns (not DelayschedTest::Listener's JSON
# decoder, slower than a burst of 50,000).
my $receipts = $node->basedir . '/receipts';
my $err = '';
my $listener = IPC::Run::start(
	[ $ENV{DSLISTEN} // 'test/dslisten', '--ack-batch', '500',
	  $node->connstr('postgres'), 'burst', 'paced', 'trickle' ],
	'<', \undef, '>', $receipts, '2>', \$err);
open my $receipts_fh, '<', $receipts or die "cannot read $receipts: $!";
my $partial = '';
{
	# Its first line, "listening", says it is ready (and is skipped below).
	my $until = time + 30;
	until ((-s $receipts // 0) >= length("listening\n"))
	{
		die "dslisten did not start: $err" if time > $until || !$listener->pumpable;
		$listener->pump_nb;
		usleep(10_000);
	}
}

# Receipts per channel and burst: count, first and last receipt (epoch
# seconds), ids seen (for duplicates), deliveries at another attempt than
# the first.
my %got;

sub pump_receipts
{
	$listener->pump_nb if $listener->pumpable;
	my $chunk;
	while (sysread($receipts_fh, $chunk, 1 << 20))
	{
		$partial .= $chunk;
	}
	while ($partial =~ s/^([^\n]*)\n//)
	{
		my ($recv_us, undef, $channel, $json) = split /\t/, $1, 4;
		next unless defined $json;
		my ($id) = $json =~ /^\{"id" : (\d+)/;
		my ($burst) = $json =~ /"payload" : \{"b": (\d+)\}/;
		my ($attempt) = $json =~ /"attempt" : (\d+)/;
		next unless defined $id && defined $burst;
		my $r = $got{"$channel:$burst"} //= { count => 0, ids => {}, redelivered => 0 };
		$r->{count}++;
		$r->{duplicates}++ if $r->{ids}{$id}++;
		$r->{redelivered}++ if $attempt != 1;
		my $t = $recv_us / 1e6;
		$r->{first} = $t if !defined $r->{first} || $t < $r->{first};
		$r->{last} = $t if !defined $r->{last} || $t > $r->{last};
	}
}

# --- adding a burst ---

# Add $n tasks of $type, payload {"b": $burst}, due at $at (an SQL expression
# evaluated in the statement); returns the epoch seconds of the due time
# and of the statement's end (the commit follows at once).
sub add_tasks
{
	my ($type, $n, $burst, $at) = @_;
	my $row = $node->safe_psql('postgres', qq{
		WITH a AS (
			SELECT $at AS at),
		added AS (
			SELECT count(*) AS n
			FROM a, sched.add_many('$type', array_fill(a.at, ARRAY[$n]),
								   array_fill(jsonb_build_object('b', $burst), ARRAY[$n])))
		SELECT extract(epoch FROM a.at), extract(epoch FROM clock_timestamp()), added.n
		FROM a, added});
	my ($due, $done, $count) = split /\|/, $row;
	die "added $count tasks, not $n" unless $count == $n;
	return ($due, $done);
}

# The next whole second at least $ahead seconds from now (server's clock).
sub second_ahead
{
	my ($ahead) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT extract(epoch FROM date_trunc('second', clock_timestamp() + interval '$ahead s')
									  + interval '1 s')});
}

# Wait (by the server's clock, polling) until epoch second $t.
sub wait_until_epoch
{
	my ($t) = @_;
	while ($node->safe_psql('postgres', "SELECT extract(epoch FROM clock_timestamp()) < $t") eq 't')
	{
		usleep(5_000);
	}
}

# Add burst $burst in the given shape; returns the instant from which its
# tasks are all due and committed (the reference of its timing), the
# instant the first of them was (the reference of its start), and its
# run_at (all in epoch seconds).
sub add_burst
{
	my ($shape, $burst) = @_;
	if ($shape eq 'ahead' || $shape eq 'clock')
	{
		my $at = second_ahead(1);
		my ($due, $done) = add_tasks('burst', $size, $burst, "to_timestamp($at)");
		return (($due > $done ? $due : $done), ($due > $done ? $due : $done), $due);
	}
	if ($shape eq 'now' || $shape eq 'past')
	{
		my $at = $shape eq 'now' ? 'clock_timestamp()' : "clock_timestamp() - interval '0.5 s'";
		my ($due, $done) = add_tasks('burst', $size, $burst, $at);
		return ($done, $done, $due);
	}
	# straddle: a quarter well before the boundary, one just before, one
	# just after, and the last once the boundary's second has been walked.
	my $at = second_ahead(0.5);
	my $quarter = int($size / 4);
	my @parts = ($quarter, $quarter, $quarter, $size - 3 * $quarter);
	my ($first, $last);
	for my $i (0 .. 3)
	{
		wait_until_epoch($at + (0, -0.05, 0.05, 1.1)[$i]) if $i > 0;
		my ($due, $done) = add_tasks('burst', $parts[$i], $burst, "to_timestamp($at)");
		my $ref = $due > $done ? $due : $done;
		$first //= $ref;
		$last = $ref;
	}
	return ($last, $first, $at);
}

# The regress test clock_steps, as it runs in the suite (its own
# transaction, rolled back).
sub clock_steps
{
	my $sql = "$FindBin::Bin/../../sql/clock_steps.sql";
	my ($stdout, $stderr);
	my $ok = IPC::Run::run([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d',
							 $node->connstr('postgres'), '-f', $sql ],
						   '<', \undef, '>', \$stdout, '2>', \$stderr);
	ok($ok, 'clock_steps ran') or diag($stderr);
}

# --- a consumer's acknowledgements, counted ---
# A session that acknowledges as a consumer does, kept open from burst to
# burst as a consumer's is, so that its plans are kept too.  Before each
# burst the task table is vacuumed (as autovacuum does once a burst is
# acknowledged: the emptied partitions shrink to no pages) and the session
# acknowledges a few tasks, which makes its plans then, the burst's
# partition empty.  Once the burst is delivered it acknowledges tasks of
# the burst's partition, one with sched.ack and the rest with
# sched.ack_many, and counts the rows its transaction read by scanning task
# partitions sequentially (pg_stat_xact_user_tables, this session's own):
# an acknowledgement finds its tasks by primary key, whatever size their
# partition has grown to, and reads none.
my $probe = $node->background_psql('postgres');
# (Its timeout is for each query, not for the whole run.)
$probe->set_query_timer_restart();

# Rows this session has read by sequential scans of task partitions, in
# the current transaction and those not yet reported.
my $seq_read_sql = q{SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_xact_user_tables
	WHERE schemaname = 'sched' AND relname ~ '^task_[0-9]+$'};

# Poll (deadline: $deadline_s) until $n tasks of type probe and payload
# {"b": $burst} are delivered; their ids.
sub delivered_probes
{
	my ($burst, $n) = @_;
	my $sql = qq{SELECT string_agg(id::text, ',' ORDER BY id) FROM sched.task
		WHERE biz_type = 'probe' AND state = 'd' AND payload->>'b' = '$burst'};
	my $until = time + $deadline_s;
	my @ids = split /,/, $node->safe_psql('postgres', $sql);
	while (@ids < $n && time < $until)
	{
		usleep(20_000);
		@ids = split /,/, $node->safe_psql('postgres', $sql);
	}
	return @ids;
}

# Before burst $burst: vacuum, and let the probe session and the consumer
# make their plans (the consumer acknowledges a task of a trickle, as a
# consumer with other traffic does).
sub probe_before
{
	my ($burst) = @_;
	$node->safe_psql('postgres', 'VACUUM sched.task');
	add_tasks('trickle', 1, $burst, 'clock_timestamp()');
	add_tasks('probe', 6, -$burst, 'clock_timestamp()');
	my $until = time + $deadline_s;
	usleep(20_000) until time > $until || $node->safe_psql('postgres', q{
		SELECT NOT EXISTS (SELECT FROM sched.task WHERE biz_type = 'trickle')}) eq 't';
	my @warm = delivered_probes(-$burst, 6);
	$probe->query_safe("SELECT sched.ack($_)") for @warm[0 .. 4];
	$probe->query_safe("SELECT sched.ack_many('{$warm[5]}')");
}

# After burst $burst was added, with 4 probe tasks due with it: acknowledge
# them once delivered; the rows read by sequential scans meanwhile (undef if
# they were not delivered in time).
sub probe_after
{
	my ($burst) = @_;
	my @ids = delivered_probes($burst, 4);
	return undef unless @ids == 4;
	my $out = $probe->query_safe(qq{
		BEGIN;
		$seq_read_sql;
		SELECT sched.ack($ids[0]);
		SELECT sched.ack_many('{$ids[1],$ids[2],$ids[3]}');
		$seq_read_sql;
		COMMIT;});
	my @lines = split /\n/, $out;
	return $lines[-1] - $lines[0];
}

# --- the bursts ---
my (@lateness_ms, @drain_s, @late_bursts);
my $burst_no = 0;
for my $round (1 .. $rounds)
{
	# Every other round with a bystander type pending an hour ahead.
	my $bystander = $round % 2 == 0;
	$node->safe_psql('postgres', $bystander
		? q{SELECT count(*) FROM sched.add_many('bystander',
				array_fill(now() + interval '1 hour', ARRAY[100]))}
		: q{SELECT count(sched.cancel(id)) FROM sched.task WHERE biz_type = 'bystander'});

	for my $shape (@shapes)
	{
		$burst_no++;
		my $label = sprintf('burst %d (%s%s, %d tasks)', $burst_no, $shape,
							$bystander ? ', bystander' : '', $size);
		probe_before($burst_no);
		clock_steps() if $shape eq 'clock';
		my ($ref, $start_ref, $due) = add_burst($shape, $burst_no);
		add_tasks('probe', 4, $burst_no, "to_timestamp($due)");
		my $probe_read = probe_after($burst_no);
		my $paced = 0;
		if ($shape eq 'clock')
		{
			$paced = 20;
			add_tasks('paced', $paced, $burst_no, "to_timestamp($ref)");
		}

		# Poll until every task is received and none is left unacknowledged.
		my $until = $ref + $deadline_s;
		my $r;
		for (;;)
		{
			pump_receipts();
			$r = $got{"burst:$burst_no"} // { count => 0 };
			my $p = $got{"paced:$burst_no"} // { count => 0 };
			last if $r->{count} >= $size && $p->{count} >= $paced &&
			  $node->safe_psql('postgres', q{
				SELECT NOT EXISTS (SELECT FROM sched.task WHERE biz_type IN ('burst', 'paced'))}) eq 't';
			last if time > $until;
			usleep(20_000);
		}
		pump_receipts();
		my $p = $got{"paced:$burst_no"} // { count => 0 };

		is($r->{count}, $size, "$label: every task received, within $deadline_s s");
		is($r->{duplicates} // 0, 0, "$label: none twice");
		is($r->{redelivered} // 0, 0, "$label: every one at its first attempt");
		is($node->safe_psql('postgres', qq{
			SELECT count(*) FROM sched.finished
			WHERE biz_type = 'burst' AND payload->>'b' = '$burst_no' AND state = 'done'}), $size,
			"$label: every task acknowledged");
		is($p->{count}, $paced, "$label: the rate-limited type's tasks received") if $paced;
		is($probe_read, 0,
			"$label: acknowledging its tasks read no task partition whole");

		if ($r->{count})
		{
			my $late = 1000 * ($r->{first} - $start_ref);
			my $drain = $r->{last} - $ref;
			push @lateness_ms, $late;
			push @drain_s, $drain;
			note(sprintf('%s: first %.0f ms after due, last %.3f s after (%.0f/s)',
						 $label, $late, $drain, $size / ($drain > 0.001 ? $drain : 0.001)));
			push @late_bursts, $label
			  if $late > $start_bound_ms || $drain > 0.5 + $size / $pace_bound;
		}
		# Keep the finished table small for the next bursts.
		$node->safe_psql('postgres', q{
			DELETE FROM sched.finished WHERE biz_type IN ('burst', 'paced', 'probe', 'trickle')});
		delete $got{"burst:$burst_no"};
		delete $got{"paced:$burst_no"};
		delete $got{"trickle:$burst_no"};
	}
}

$probe->quit;
$listener->kill_kill;
$listener->finish;

my @sorted_late = sort { $a <=> $b } @lateness_ms;
my @sorted_drain = sort { $a <=> $b } @drain_s;
note(sprintf('%d bursts of %d tasks: start lateness median %.0f ms, worst %.0f ms; '
			 . 'drain median %.3f s, worst %.3f s',
			 scalar(@lateness_ms), $size,
			 $sorted_late[ $#sorted_late / 2 ] // -1, $sorted_late[-1] // -1,
			 $sorted_drain[ $#sorted_drain / 2 ] // -1, $sorted_drain[-1] // -1));
DelayschedTest::timing_ok(!@late_bursts,
	sprintf('every burst started within %d ms and drained at %d/s or better%s',
			$start_bound_ms, $pace_bound,
			@late_bursts ? ' (not: ' . join('; ', @late_bursts) . ')' : ''));

done_testing();
