# The reference docs agree with the catalog, both ways: every delaysched.*
# setting, public function and public view exists if and only if the docs
# describe it, with the same arguments, columns, types, defaults and ranges;
# and every link in README.md and doc/*.md reaches a file and a heading.
#
# What counts as documented (the conventions the docs follow):
#   settings   a row of a table in doc/configuration.md whose first cell
#              names it (| [`delaysched.x`](#...) | type | unit | default |
#              range | context |), the developer options' table included;
#   functions  a row of the first table of doc/functions.md, and a signature
#              at the start of a line in a ```sql block of doc/functions.md
#              or doc/schedules.md: sched.x(arg type [DEFAULT ...], ...)
#              RETURNS type;
#   views      a row of the first table of doc/views.md, and a heading
#              "## sched.x" (doc/views.md) or "## The view sched.x"
#              (doc/schedules.md) followed by a | Column | Type | Meaning |
#              table;
#   the router (delaysched_router, when PL/Proxy is installed): every public
#              function and view named in the tables of doc/scale-out.md's
#              "The router's functions and views", and what a node has and
#              the router not, and the router's own, in its paragraph there.
# Names starting with "_" are internal and need no documentation.  Nothing
# here depends on the extension's version.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../perl";
use DelayschedTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = "$FindBin::Bin/../..";
my %doc = map { $_ => slurp_file("$root/doc/$_.md") } qw(configuration functions schedules views scale-out);

my $node = DelayschedTest::new_node('docs');
sub sql { return $node->safe_psql($_[1] // 'postgres', $_[0]) }

# Compare two sets of names (hash refs); one failure per name out of place.
sub both_ways
{
	my ($what, $exists, $documented) = @_;
	for my $name (sort keys %$exists)
	{
		ok($documented->{$name}, "$what $name is documented");
	}
	for my $name (sort keys %$documented)
	{
		ok($exists->{$name}, "documented $what $name exists");
	}
}

# The rows of the markdown tables in $text: for each table, its header cells
# and its rows (lists of cells).
sub tables
{
	my ($text) = @_;
	my @tables;
	my $current;
	for my $line (split /\n/, $text)
	{
		if ($line !~ /^\|/)
		{
			undef $current;
			next;
		}
		my @cells = map { s/^\s+|\s+$//gr } split /(?<!\\)\|/, substr($line, 1);
		if (!$current)
		{
			$current = { header => \@cells, rows => [] };
			push @tables, $current;
		}
		elsif ($line !~ /^\|[-|: ]+$/)
		{
			push @{ $current->{rows} }, \@cells;
		}
	}
	return @tables;
}

# Type names as the server writes them: 'int' and 'integer' are one type.
my %canonical;
sub canonical_types
{
	my @new = grep { !exists $canonical{$_} } @_;
	return unless @new;
	for (@new) { die "odd type name '$_'" unless /^[a-z0-9_ \[\]]+$/i }
	my $list = join(',', map { "('$_')" } @new);
	for my $row (split /\n/, sql("SELECT t, coalesce(format_type(to_regtype(t), NULL), '?' || t) FROM (VALUES $list) v(t)"))
	{
		my ($t, $c) = split /\|/, $row;
		$canonical{$t} = $c;
	}
}
sub type_of { my ($t) = @_; canonical_types($t); return $canonical{$t} }

# Split $text at the commas outside parentheses and quotes.
sub split_top
{
	my ($text) = @_;
	my ($depth, $quoted, $cur, @parts) = (0, 0, '');
	for my $ch (split //, $text)
	{
		$quoted = !$quoted if $ch eq "'";
		$depth++ if !$quoted && $ch eq '(';
		$depth-- if !$quoted && $ch eq ')';
		if ($ch eq ',' && !$depth && !$quoted) { push @parts, $cur; $cur = ''; next }
		$cur .= $ch;
	}
	push @parts, $cur if $cur =~ /\S/;
	return map { s/^\s+|\s+$//gr } @parts;
}

# ---- settings --------------------------------------------------------------

my %setting;
for my $row (split /\n/, sql("SELECT name, vartype, unit, boot_val, min_val, max_val, context FROM pg_settings WHERE name LIKE 'delaysched.%'"))
{
	my @f = split /\|/, $row, -1;
	$setting{ $f[0] } = { type => $f[1], unit => $f[2], default => $f[3], min => $f[4], max => $f[5], context => $f[6] };
}
ok(exists $setting{'delaysched.full_sweep_interval'}, 'pg_settings shows the developer options');

my %documented_setting;
my %doc_context = (restart => 'postmaster', reload => 'sighup', superuser => 'superuser');
my %doc_type = (string => 'string', integer => 'integer', real => 'real', boolean => 'bool');
for my $table (tables($doc{configuration}))
{
	next unless ($table->{header}[0] // '') eq 'Name';
	my %col;
	@col{ @{ $table->{header} } } = 0 .. $#{ $table->{header} };
	for my $cells (@{ $table->{rows} })
	{
		my ($name) = $cells->[0] =~ /`(delaysched\.\w+)`/ or next;
		$documented_setting{$name} = 1;
		my $s = $setting{$name} or next;
		is($doc_type{ $cells->[ $col{Type} ] } // $cells->[ $col{Type} ], $s->{type}, "$name: type");
		is($cells->[ $col{Unit} ], $s->{unit}, "$name: unit") if $s->{unit} ne '';
		my ($context) = $cells->[ $col{Context} ] =~ /^(\w+)/;
		is($doc_context{ $context // '' } // $context, $s->{context}, "$name: context");
		if (my ($default) = $cells->[ $col{Default} ] =~ /^`([^`]*)`/)
		{
			is($default, $s->{default}, "$name: default");
		}
		if (my ($min, $max) = $cells->[ $col{Range} ] =~ /^([-\d.]+) – ([-\d.]+)/)
		{
			ok($min == $s->{min} && $max == $s->{max}, "$name: range $min – $max")
			  or diag("the server's range is $s->{min} – $s->{max}");
		}
	}
}
both_ways('setting', \%setting, \%documented_setting);

# ---- functions -------------------------------------------------------------

# The catalog's signature of each public function, written as the docs'
# signatures are read below: "name type, name type = ... -> result".
my %function;
for my $row (split /\n/, sql(q{
	SELECT p.proname,
	       coalesce((SELECT string_agg(coalesce(a.n, '') || ' ' || format_type(a.t, NULL) || ' ' || a.m, ',' ORDER BY a.o)
	                 FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]),
	                             coalesce(p.proargmodes::text[], array_fill('i'::text, ARRAY[p.pronargs])),
	                             p.proargnames) WITH ORDINALITY AS a(t, m, n, o)), ''),
	       p.pronargdefaults, p.proretset, format_type(p.prorettype, NULL)
	FROM pg_proc p
	WHERE p.pronamespace = 'sched'::regnamespace AND p.proname !~ '^_'}))
{
	my ($name, $args, $ndefaults, $retset, $result) = split /\|/, $row, -1;
	my (@in, @out);
	for my $arg (split /,/, $args)
	{
		my ($n, $t, $m) = $arg =~ /^(\S*) (.+) (\w)$/;
		if ($m =~ /[iv]/) { push @in, "$n $t" }
		else { push @out, "$n $t" }
	}
	$in[ $#in - $_ ] .= ' = ...' for 0 .. $ndefaults - 1;
	$result = ($retset eq 't' ? 'SETOF ' : '') . $result;
	$result = 'TABLE(' . join(', ', @out) . ')' if @out;
	push @{ $function{$name} }, join(', ', @in) . " -> $result";
}

# The signatures in the docs.
my %signature;
my $parens = qr/(\((?:[^()']++|'[^']*'|(?-1))*\))/;
for my $file (qw(functions schedules))
{
	while ($doc{$file} =~ /^```sql\n(.*?)^```/gms)
	{
		my $block = $1 =~ s/--[^\n]*//gr;
		while ($block =~ /^sched\.(\w+)\s*$parens\s*RETURNS\s+(SETOF[ \t]+[\w\[\]]+|TABLE[ \t]*$parens|[\w\[\]]+)/gms)
		{
			my ($name, $args, $result, $columns) = ($1, $2, $3, $4);
			my @in;
			for my $arg (split_top(substr($args, 1, -1)))
			{
				my ($n, $t, $default) = $arg =~ /^(\w+)\s+(.+?)(\s+DEFAULT\s+.*)?$/si
				  or BAIL_OUT("cannot read argument '$arg' of sched.$name in doc/$file.md");
				push @in, "$n " . type_of($t) . ($default ? ' = ...' : '');
			}
			if ($columns)
			{
				$result = 'TABLE(' . join(', ', map {
					my ($n, $t) = /^(\w+)\s+(.+)$/;
					"$n " . type_of($t) } split_top(substr($columns, 1, -1))) . ')';
			}
			elsif ($result =~ /^SETOF\s+(.+)$/i) { $result = 'SETOF ' . type_of($1) }
			else { $result = type_of($result) }
			push @{ $signature{$name} }, join(', ', @in) . " -> $result";
		}
	}
}
both_ways('function', \%function, \%signature);
for my $name (sort grep { $signature{$_} } keys %function)
{
	is(join("\n", sort @{ $signature{$name} }), join("\n", sort @{ $function{$name} }),
		"sched.$name: the documented signature is the function's");
}

# The list at the top of doc/functions.md.
my ($listed) = tables($doc{functions});
my %listed_function = map { $_->[0] =~ /`sched\.(\w+)`/ ? ($1 => 1) : () } @{ $listed->{rows} };
both_ways('function (in the list of doc/functions.md)', \%function, \%listed_function);

# ---- views -----------------------------------------------------------------

my %view;
for my $row (split /\n/, sql(q{
	SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod)
	FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
	WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind = 'v' AND c.relname !~ '^_'}))
{
	my ($v, $column, $type) = split /\|/, $row;
	$view{$v}{$column} = $type;
}

my %view_doc;
for my $file (qw(views schedules))
{
	while ($doc{$file} =~ /^## (?:The view )?sched\.(\w+)\n(.*?)(?=^##|\z)/gms)
	{
		my ($v, $body) = ($1, $2);
		my ($columns) = grep { ($_->{header}[0] // '') eq 'Column' } tables($body);
		$view_doc{$v} = {};
		next unless $columns;
		for my $cells (@{ $columns->{rows} })
		{
			my $type = type_of($cells->[1] =~ s/`//gr);
			$view_doc{$v}{$_} = $type for $cells->[0] =~ /`(\w+)`/g;
		}
	}
}
both_ways('view', \%view, \%view_doc);
for my $v (sort grep { $view_doc{$_} } keys %view)
{
	my (@missing, @extra, @wrong);
	for my $c (sort keys %{ $view{$v} })
	{
		if (!exists $view_doc{$v}{$c}) { push @missing, $c }
		elsif ($view_doc{$v}{$c} ne $view{$v}{$c}) { push @wrong, "$c is $view{$v}{$c}, not $view_doc{$v}{$c}" }
	}
	@extra = grep { !exists $view{$v}{$_} } sort keys %{ $view_doc{$v} };
	ok(!@missing && !@extra && !@wrong, "sched.$v: its columns are documented, with their types")
	  or diag("sched.$v: undocumented columns: @missing; documented but absent: @extra; types: @{[ join('; ', @wrong) ]}");
}

($listed) = grep { ($_->{header}[0] // '') eq 'View' } tables($doc{views});
my %listed_view = map { $_->[0] =~ /`sched\.(\w+)`/ ? ($1 => 1) : () } @{ $listed->{rows} };
both_ways('view (in the list of doc/views.md)', \%view, \%listed_view);

# ---- the router ------------------------------------------------------------

SKIP:
{
	skip 'PL/Proxy is not installed: the router is not compared with doc/scale-out.md', 1
	  unless sql("SELECT count(*) FROM pg_available_extensions WHERE name = 'plproxy'");
	sql('CREATE DATABASE router');
	sql('CREATE EXTENSION delaysched_router CASCADE', 'router');
	my %router = map { $_ => 1 } split /\n/, sql(q{
		SELECT proname FROM pg_proc WHERE pronamespace = 'sched'::regnamespace AND proname !~ '^_'
		UNION SELECT relname FROM pg_class WHERE relnamespace = 'sched'::regnamespace AND relkind = 'v' AND relname !~ '^_'},
		'router');
	my %on_node = (%function, %view);

	my ($section) = $doc{'scale-out'} =~ /^## The router's functions and views\n(.*?)(?=^## )/ms
	  or BAIL_OUT("doc/scale-out.md has no section \"The router's functions and views\"");
	my %in_tables;
	for my $table (tables($section))
	{
		for my $cells (@{ $table->{rows} })
		{
			my $first = $cells->[0] =~ s/→.*//r;
			$in_tables{$_} = 1 for $first =~ /`(?:sched\.)?(\w+)[^`]*`/g;
		}
	}
	both_ways('router function or view', \%router, \%in_tables);

	my $list = qr/((?:`sched\.\w+`(?:,\s+|\s+and\s+)?)+)/;
	my ($lacks) = $section =~ /What a node has and the router does not:\s+$list/
	  or BAIL_OUT('doc/scale-out.md does not list what the router lacks');
	my ($own) = $section =~ /What the router has and a node does not:\s+$list/
	  or BAIL_OUT('doc/scale-out.md does not list what only the router has');
	my %lacks = map { $_ => 1 } $lacks =~ /`sched\.(\w+)`/g;
	my %own = map { $_ => 1 } $own =~ /`sched\.(\w+)`/g;
	both_ways('node function or view missing on the router',
		{ map { $_ => 1 } grep { !$router{$_} } keys %on_node }, \%lacks);
	both_ways("router's own function or view",
		{ map { $_ => 1 } grep { !$on_node{$_} } keys %router }, \%own);
}

# ---- links -----------------------------------------------------------------

# GitHub's anchors: the heading in lower case, without punctuation, spaces
# made hyphens; a repeated one gets -1, -2, ...
my %anchors;
sub anchors_of
{
	my ($file) = @_;
	return $anchors{$file} if $anchors{$file};
	my (%seen, %a);
	my $text = slurp_file($file) =~ s/^```.*?^```//gmsr;
	for my $heading ($text =~ /^#+\s+(.+?)\s*$/gm)
	{
		my $slug = lc($heading =~ s/\[([^\]]*)\]\([^)]*\)/$1/gr);
		$slug =~ s/[^\w\- ]//g;
		$slug =~ s/ /-/g;
		my $n = $seen{$slug}++;
		$a{ $n ? "$slug-$n" : $slug } = 1;
	}
	return $anchors{$file} = \%a;
}

for my $file ("$root/README.md", glob("$root/doc/*.md"))
{
	my $short = $file =~ s/^\Q$root\E\///r;
	(my $dir = $file) =~ s/[^\/]+$//;
	my $text = slurp_file($file) =~ s/^```.*?^```//gmsr;
	my @broken;
	while ($text =~ /\]\(([^)\s]+)\)/g)
	{
		my $link = $1;
		next if $link =~ /^[a-z]+:/;
		my ($path, $anchor) = $link =~ /^([^#]*)(?:#(.*))?$/;
		my $target = $path eq '' ? $file : "$dir$path";
		if (!-e $target) { push @broken, "$link (no such file)"; next }
		push @broken, "$link (no such heading)"
		  if defined $anchor && $target =~ /\.md$/ && !anchors_of($target)->{$anchor};
	}
	ok(!@broken, "$short: every link reaches its file and heading") or diag(join("\n", @broken));
}

done_testing();
