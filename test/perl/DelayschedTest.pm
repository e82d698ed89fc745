# DelayschedTest.pm: what the delaysched TAP tests share.
#
#   my $node = DelayschedTest::new_node('main', extra_conf => "...");
#   my $l = DelayschedTest::Listener->start($node, 'postgres', ['--ack'], 'orders');
#   my @got = $l->wait_for(10, 30);     # 10 notifications, 30 s deadline
#
# A Listener runs test/dslisten (a libpq LISTEN client) in the background and
# parses its lines: { recv_us, late_us, run_at_us, channel, message (decoded
# JSON), id, attempt }.
#
#   my $r = DelayschedTest::Receiver->start($dir);   # test/http_receiver.py
#   my @req = $r->wait_requests('/ok/x', 3, 30);     # 3 requests to /ok/x...
#
# A Receiver runs the scriptable webhook receiver on 127.0.0.1 and reads its
# log: one { t (arrival, epoch seconds), path, headers, body, json (the body
# decoded) } per request, in arrival order.
package DelayschedTest;

use strict;
use warnings;

use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

# A started cluster with delaysched preloaded and the extension created.
# Options: extra_conf (postgresql.conf lines), init (options for init).
sub new_node
{
	my ($name, %opts) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%{ $opts{init} // {} });
	$node->append_conf('postgresql.conf', <<"EOC");
shared_preload_libraries = 'delaysched'
timezone = 'UTC'
log_min_messages = warning
@{[ $opts{extra_conf} // '' ]}
EOC
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION delaysched');
	return $node;
}

# The size of a test's large data set (hundreds of thousands of tasks),
# times DELAYSCHED_TEST_SCALE (a number above 0 and at most 1; 1 unless
# set).  scripts/test.sh sets it below 1 for the second and later majors of
# a run: the first major runs the full sizes, and the checks (counts,
# duplicates, order) are the same at any size.
sub scaled
{
	my ($n) = @_;
	my $scale = $ENV{DELAYSCHED_TEST_SCALE} // 1;
	die "DELAYSCHED_TEST_SCALE must be a number above 0 and at most 1, not '$scale'"
	  unless $scale =~ /^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$/ && $scale > 0 && $scale <= 1;
	return int($n * $scale) || 1;
}

# Poll $query until it returns $expected or $timeout seconds pass; true if it did.
sub poll_until
{
	my ($node, $query, $expected, $timeout) = @_;
	return poll_until_in($node, 'postgres', $query, $expected, $timeout);
}

# Poll until no task of business type $type is left unfinished (every one
# done, dead or cancelled) or $timeout seconds (60) pass; true if none is.
sub wait_finished
{
	my ($node, $type, $timeout) = @_;
	return poll_until($node, "SELECT count(*) = 0 FROM sched.task WHERE biz_type = '$type'", 't',
		$timeout // 60);
}

# Claim tasks of pull type $type in database $dbname until $want were
# claimed or $timeout seconds (30) pass; returns how many.  (A claim skips
# the tasks a scanner's tick holds at that moment: one claim may take fewer
# than are there.)  $prefix runs before each claim ("SET ROLE r;", say).
sub claim_count
{
	my ($node, $dbname, $type, $want, $timeout, $prefix) = @_;
	my $deadline = time + ($timeout // 30);
	my $got = 0;
	while ($got < $want && time < $deadline)
	{
		$got += $node->safe_psql($dbname, ($prefix // '') . "SELECT count(*) FROM sched.claim('$type', 100)");
		usleep(50_000) if $got < $want;
	}
	return $got;
}

# The same in database $dbname.
sub poll_until_in
{
	my ($node, $dbname, $query, $expected, $timeout) = @_;
	my $deadline = time + ($timeout // 30);
	while (time < $deadline)
	{
		my $got = $node->safe_psql($dbname, $query);
		return 1 if $got eq $expected;
		usleep(50_000);
	}
	return 0;
}

# Run $sql in a new session inside an open transaction and keep it open
# (with its locks) until release_session, in database $dbname (postgres if
# not given).  Returns the session; its backend's pid is $session->{pid}.
sub hold_in_transaction
{
	my ($node, $sql, $dbname) = @_;
	my $session = {
		in => "BEGIN;\n$sql;\nSELECT 'holder pid ' || pg_backend_pid();\n\\echo held\n",
		out => '',
		node => $node,
		dbname => $dbname // 'postgres' };
	$session->{harness} = IPC::Run::start(
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($dbname // 'postgres') ],
		'<', \$session->{in}, '>', \$session->{out}, '2>', \$session->{out});
	my $deadline = time + 30;
	until ($session->{out} =~ /^held$/m)
	{
		die "could not hold: $session->{out}" if time > $deadline || !$session->{harness}->pumpable;
		$session->{harness}->pump_nb;
		usleep(10_000);
	}
	($session->{pid}) = $session->{out} =~ /holder pid (\d+)/;
	return $session;
}

# Is a held session still inside the transaction it began (so still holding
# its locks)?
sub still_holding
{
	my ($session) = @_;
	return $session->{node}->safe_psql($session->{dbname}, qq{
		SELECT count(*) FROM pg_stat_activity
		WHERE pid = $session->{pid} AND state = 'idle in transaction'}) eq '1';
}

# End a held session's transaction: ROLLBACK, or COMMIT if $commit.
sub release_session
{
	my ($session, $commit) = @_;
	$session->{in} .= ($commit ? "COMMIT" : "ROLLBACK") . ";\n\\q\n";
	$session->{harness}->finish;
}

# Timing bounds (lateness percentiles, rates within 5%, "within a second")
# say how fast the machine was as much as whether delaysched is right, so
# the default suite does not assert them: as PostgreSQL's own suites do with
# PG_TEST_EXTRA, they are checked only when it names delaysched_timing, and
# otherwise their figures are printed as notes.  Counts, order, duplicates
# and loss are always checked.
sub timing_checked
{
	return (($ENV{PG_TEST_EXTRA} // '') =~ /\bdelaysched_timing\b/) ? 1 : 0;
}

# Skip the whole test, saying why in a line scripts/suite.sh reports as
# unchecked.
sub skip_all
{
	my ($why) = @_;
	diag("unchecked: $0: $why");
	plan skip_all => $why;
}

# Tests that set the sweep to 60 s tell a task sent by a wake-up from one
# left for the sweep by this bound (seconds): far below the sweep, far above
# what a loaded machine adds.
our $BEFORE_SWEEP = 10;

# cmp_ok($got, $op, $bound, $name) when timing is checked; a note otherwise.
sub timing_cmp_ok
{
	my ($got, $op, $bound, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return Test::More->builder->cmp_ok($got, $op, $bound, $name) if timing_checked();
	note(sprintf('timing, not checked: %s (%s %s %s)', $name, $got // 'undef', $op, $bound));
	return 1;
}

# ok($condition, $name) when timing is checked; a note otherwise.
sub timing_ok
{
	my ($condition, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return Test::More->builder->ok($condition, $name) if timing_checked();
	note(sprintf('timing, not checked: %s (%s)', $name, $condition ? 'held' : 'missed'));
	return 1;
}

# The most of the sorted times @t (seconds) within any window of $width
# seconds: what a rate limit of burst + rate x width must never exceed.
sub busiest_window
{
	my ($width, @t) = @_;
	my ($max, $j) = (0, 0);
	for my $i (0 .. $#t)
	{
		$j++ while $j < @t && $t[$j] < $t[$i] + $width;
		$max = $j - $i if $j - $i > $max;
	}
	return $max;
}

# Percentile (0..1) of a list of numbers, nearest-rank.
sub percentile
{
	my ($p, @values) = @_;
	return undef unless @values;
	my @sorted = sort { $a <=> $b } @values;
	my $rank = int($p * @sorted + 0.999999) - 1;
	$rank = 0 if $rank < 0;
	$rank = $#sorted if $rank > $#sorted;
	return $sorted[$rank];
}

# "p50 X ms, p99 Y ms, max Z ms" of lateness figures in milliseconds.
sub lateness_summary
{
	my (@ms) = @_;
	return sprintf('p50 %.1f ms, p99 %.1f ms, max %.1f ms',
		percentile(0.5, @ms), percentile(0.99, @ms), percentile(1, @ms));
}

# Were the received messages delivered in run_at order within each range?
# Ranges (door numbers) are walked in parallel, so only the order inside
# one is promised.  Returns the number of ranges seen and the number of
# messages that arrived before one of the same range due earlier.
sub out_of_order_within_ranges
{
	my ($node, @messages) = @_;
	return (0, 0) unless @messages;
	my $ids = join ',', map { $_->{id} } @messages;
	my %door = map { split /\|/ } split /\n/, $node->safe_psql('postgres',
		"SELECT id || '|' || sched._door(id) FROM unnest('{$ids}'::bigint[]) AS id");
	my (%last, %last_id, $disorder);
	$disorder = 0;
	for my $m (@messages)
	{
		my $d = $door{ $m->{id} };
		if (defined $last{$d} && $m->{run_at_us} < $last{$d})
		{
			$disorder++;
			# What a failure needs to be understood: the pair, and how each went.
			Test::More::diag("range $d: task $m->{id} (due $m->{run_at_us} us) came after task "
				  . "$last_id{$d} (due $last{$d} us)\n"
				  . $node->safe_psql('postgres',
					"SELECT id, run_at, state, attempt, delivered_at, priority, key, schedule"
					  . " FROM sched.tasks WHERE id IN ($m->{id}, $last_id{$d}) ORDER BY run_at"));
		}
		$last{$d} = $m->{run_at_us};
		$last_id{$d} = $m->{id};
	}
	return (scalar(keys %last), $disorder);
}

package DelayschedTest::Listener;

use strict;
use warnings;

use JSON::PP;
use Time::HiRes qw(usleep time);

sub start
{
	my ($class, $node, $dbname, $options, @channels) = @_;
	my $self = bless { out => '', err => '', parsed => [], buffer => '' }, $class;
	my $bin = $ENV{DSLISTEN} // 'test/dslisten';
	$self->{harness} = IPC::Run::start(
		[ $bin, @$options, $node->connstr($dbname), @channels ],
		'<', \undef, '>', \$self->{out}, '2>', \$self->{err});
	# Wait until it is listening, so nothing sent after this returns is missed.
	my $deadline = time + 30;
	while ($self->{out} !~ /^listening$/m)
	{
		die "dslisten did not start: $self->{err}" if time > $deadline || !$self->{harness}->pumpable;
		$self->{harness}->pump_nb;
		usleep(10_000);
	}
	$self->{out} =~ s/^listening\n//m;
	return $self;
}

# Parse whatever complete lines arrived; return all notifications so far.
sub received
{
	my ($self) = @_;
	$self->{harness}->pump_nb if $self->{harness}->pumpable;
	while ($self->{out} =~ s/^([^\n]*)\n//)
	{
		my ($recv, $late, $channel, $json) = split /\t/, $1, 4;
		my $message = JSON::PP::decode_json($json);
		push @{ $self->{parsed} }, {
			recv_us => $recv,
			late_us => ($late eq '-' ? undef : $late),
			run_at_us => ($late eq '-' ? undef : $recv - $late),
			channel => $channel,
			message => $message,
			id => $message->{id},
			attempt => $message->{attempt},
		};
	}
	return @{ $self->{parsed} };
}

# Wait until at least $count notifications arrived or $timeout seconds passed.
sub wait_for
{
	my ($self, $count, $timeout) = @_;
	my $deadline = time + ($timeout // 30);
	# (Counted in scalar context, not copied: a test may wait for tens of
	# thousands of messages.)
	while (scalar($self->received) < $count && time < $deadline)
	{
		usleep(10_000);
	}
	return $self->received;
}

sub stop
{
	my ($self) = @_;
	$self->received;
	$self->{harness}->kill_kill if $self->{harness}->pumpable;
	$self->{harness}->finish;
	return $self->received;
}

package DelayschedTest::Receiver;

use strict;
use warnings;

use FindBin;
use JSON::PP;
use Time::HiRes qw(usleep time);

# Options: backlog (its listen backlog, 1,024 unless given; "default":
# the standard library's).
sub start
{
	my ($class, $dir, %opts) = @_;
	my $self = bless { port_file => "$dir/receiver.port", log => "$dir/receiver.log" }, $class;
	unlink $self->{port_file}, $self->{log};
	my $script = "$FindBin::Bin/../http_receiver.py";
	$self->{harness} = IPC::Run::start(
		[ 'python3', $script, '--port-file', $self->{port_file}, '--log', $self->{log},
		  '--backlog', $opts{backlog} // '1024' ],
		'<', \undef, '>', \$self->{out}, '2>', \$self->{err});
	my $deadline = time + 30;
	until (-s $self->{port_file})
	{
		die "http_receiver.py did not start: " . ($self->{err} // '')
		  if time > $deadline || !$self->{harness}->pumpable;
		$self->{harness}->pump_nb;
		usleep(10_000);
	}
	open my $fh, '<', $self->{port_file} or die;
	chomp($self->{port} = <$fh>);
	close $fh;
	return $self;
}

sub port { return $_[0]->{port} }

# The base URL of the receiver.
sub url { return "http://127.0.0.1:$_[0]->{port}" }

# Every request logged so far whose path starts with $prefix.
sub requests
{
	my ($self, $prefix) = @_;
	$self->{harness}->pump_nb if $self->{harness}->pumpable;
	open my $fh, '<', $self->{log} or return ();
	my @all;
	while (my $line = <$fh>)
	{
		next unless $line =~ /\n$/;
		my $r = JSON::PP::decode_json($line);
		next if defined $prefix && index($r->{path}, $prefix) != 0;
		$r->{json} = eval { JSON::PP::decode_json($r->{body}) };
		push @all, $r;
	}
	close $fh;
	return @all;
}

# Wait until at least $count requests to $prefix arrived or $timeout passed.
sub wait_requests
{
	my ($self, $prefix, $count, $timeout) = @_;
	my $deadline = time + ($timeout // 30);
	my @got = $self->requests($prefix);
	while (@got < $count && time < $deadline)
	{
		usleep(20_000);
		@got = $self->requests($prefix);
	}
	return @got;
}

sub stop
{
	my ($self) = @_;
	$self->{harness}->kill_kill if $self->{harness}->pumpable;
	$self->{harness}->finish;
}

# A test that dies before stop() must not leave the server running: this
# one would outlive the test, unlike the clients of the stopped cluster.
sub DESTROY
{
	my ($self) = @_;
	local $@;
	eval { $self->{harness}->kill_kill if $self->{harness} && $self->{harness}->pumpable };
}

1;
