# META.json is valid by the PGXN Meta Spec 1.0.0 (https://pgxn.org/spec/):
# the required keys, their types and values (name, semantic versions,
# license, release status, prereqs phases and relations, provides with a
# file and a version for each extension), and agrees with the tree: the
# files it names exist, and the extension's version is the control file's.
# (Written from the spec: Debian packages no PGXN validator.)
use strict;
use warnings;

use FindBin;
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = "$FindBin::Bin/../..";
my $meta = JSON::PP->new->decode(PostgreSQL::Test::Utils::slurp_file("$root/META.json"));

my $semver = qr/^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+)?$/;
my %licenses = map { $_ => 1 } qw(agpl_3 apache_1_1 apache_2_0 artistic_1 artistic_2 bsd freebsd gfdl_1_2
  gfdl_1_3 gpl_1 gpl_2 gpl_3 lgpl_2_1 lgpl_3_0 mit mozilla_1_0 mozilla_1_1 openssl perl_5 postgresql qpl_1_0
  ssleay sun zlib open_source restricted unrestricted unknown);

for my $key (qw(name abstract maintainer license provides meta-spec version))
{
	ok(exists $meta->{$key}, "required key $key");
}
like($meta->{name}, qr/^[^\s\/\\\x00-\x1f]{2,}$/, 'name: two characters or more, no space, slash or control');
like($meta->{version}, $semver, 'version: a semantic version');
ok(!ref $meta->{abstract} && length $meta->{abstract}, 'abstract: a string');
ok(!ref $meta->{maintainer} || (ref $meta->{maintainer} eq 'ARRAY' && !grep { ref } @{ $meta->{maintainer} }),
	'maintainer: a string or a list of strings');
ok(!ref $meta->{license} ? $licenses{ $meta->{license} }
	: ref $meta->{license} eq 'ARRAY' ? !grep { !$licenses{$_} } @{ $meta->{license} }
	: ref $meta->{license} eq 'HASH', 'license: a known name, a list of them, or a map to URLs');
is($meta->{'meta-spec'}{version}, '1.0.0', 'meta-spec version 1.0.0');
like($meta->{release_status} // 'stable', qr/^(stable|testing|unstable)$/, 'release_status');
ok(ref $meta->{tags} eq 'ARRAY' && !grep { ref || length > 255 } @{ $meta->{tags} }, 'tags: short strings');

is(ref $meta->{provides}, 'HASH', 'provides: a map of extensions');
for my $ext (sort keys %{ $meta->{provides} })
{
	my $p = $meta->{provides}{$ext};
	like($p->{version} // '', $semver, "provides $ext: a semantic version");
	ok(defined $p->{file} && -f "$root/$p->{file}", "provides $ext: its file exists");
	ok(!defined $p->{docfile} || -f "$root/$p->{docfile}", "provides $ext: its docfile exists");
}

my $phases_ok = 1;
for my $phase (keys %{ $meta->{prereqs} // {} })
{
	$phases_ok &&= $phase =~ /^(configure|build|runtime|test|develop)$/;
	for my $relation (keys %{ $meta->{prereqs}{$phase} })
	{
		$phases_ok &&= $relation =~ /^(requires|recommends|suggests|conflicts)$/;
		$phases_ok &&= !grep { $_ ne '0' && $_ !~ $semver } values %{ $meta->{prereqs}{$phase}{$relation} };
	}
}
ok($phases_ok, 'prereqs: known phases and relations, semantic versions');

my ($control) = PostgreSQL::Test::Utils::slurp_file("$root/delaysched.control") =~ /default_version\s*=\s*'([^']+)'/;
is($meta->{provides}{delaysched}{version}, "$control.0", 'the extension\'s version is the control file\'s');
is($meta->{provides}{delaysched}{file}, "delaysched--$control.sql", 'and its file the install script of that version');
my ($router_control) = PostgreSQL::Test::Utils::slurp_file("$root/delaysched_router.control") =~ /default_version\s*=\s*'([^']+)'/;
is($meta->{provides}{delaysched_router}{version}, "$router_control.0", 'delaysched_router\'s version is its control file\'s');
# The router has no install script of its own version when CREATE EXTENSION
# reaches it from an earlier one by an update the Makefile builds (0.3: the
# released 0.2 script, then delaysched_router--0.2--0.3.sql).
my ($router_from) = ($meta->{provides}{delaysched_router}{file} // '') =~ /^delaysched_router--([0-9.]+)\.sql$/;
my $makefile = PostgreSQL::Test::Utils::slurp_file("$root/Makefile");
ok(defined $router_from && -e "$root/delaysched_router--$router_from.sql" &&
   ($router_from eq $router_control ||
	$makefile =~ /^DATA_built\s*=.*\bdelaysched_router--\Q$router_from\E--\Q$router_control\E\.sql\b/m),
   "and its file the install script CREATE EXTENSION starts from ($router_from, then updated to $router_control)");

done_testing();
