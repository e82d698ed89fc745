# scripts/lib.sh: what the demo and the test runner share.
#
# Sourced, not run.  Installs the packages delaysched needs (as root, from
# Debian's archive), builds and installs the extension, and runs commands as
# the unprivileged user that PostgreSQL insists on.

# The majors built and tested (scripts/test.sh): 15 is bookworm's own; 17
# and 18 run in chroots of trixie and sid (scripts/chroot.sh).
SUPPORTED_MAJORS="15 17 18"
PG_MAJOR=${PG_MAJOR:-15}
# PG_BINDIR may point at a relocated copy of the server (a private install
# for parallel work); the packages are still Debian's.
PG_BINDIR=${PG_BINDIR:-/usr/lib/postgresql/$PG_MAJOR/bin}
PG_PKGLIBDIR=$(dirname "$PG_BINDIR")/lib
PG_USER=${PG_USER:-postgres}
# What building and running delaysched on major $1 needs.
major_packages() {
	echo "make gcc libc6-dev postgresql-$1 postgresql-server-dev-$1 libpq-dev libipc-run-perl libcurl4-openssl-dev python3"
}
PACKAGES=$(major_packages "$PG_MAJOR")

log() { printf '==> %s\n' "$*" >&2; }

# What the tests need besides: Prometheus's parser and the exporter
# (test/t/018_metrics.pl); PL/Proxy and psycopg2 for the router and its
# example consumer (test/t/020_router.pl, the router regress test).
test_packages() {
	echo "python3-prometheus-client prometheus-postgres-exporter postgresql-$1-plproxy python3-psycopg2"
}
TEST_PACKAGES=$(test_packages "$PG_MAJOR")

# What building the Debian package needs besides (scripts/package.sh).
PACKAGE_BUILD_PACKAGES="build-essential dpkg-dev debhelper postgresql-server-dev-all"

# Install whatever of $PACKAGES (or of the list given) is missing
# (apt-get update first).
ensure_packages() {
	local missing="" p
	for p in ${1:-$PACKAGES}; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing packages:$missing (run as root to install them)" >&2
		return 1
	fi
	log "installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

# Build and install the extension from $1, and build the test programs.
# With DELAYSCHED_INSTALLED=1 the caller has done it already for this tree
# and major (.ci/run, before benchmarks that run side by side: a second
# "make install" rewrites delaysched.so while the other's servers load it).
build_and_install() {
	if [ "${DELAYSCHED_INSTALLED:-}" = 1 ]; then
		log "delaysched: built and installed already"
		return 0
	fi
	log "building and installing delaysched"
	# Warnings are errors for developers and CI (not for packagers: Makefile).
	make -C "$1" -s PG_CONFIG="$PG_BINDIR/pg_config" COPT=-Werror >/dev/null
	make -C "$1" -s PG_CONFIG="$PG_BINDIR/pg_config" COPT=-Werror install >/dev/null
	# The LISTEN client and the benchmark programs (not part of "all").
	make -C "$1" -s PG_CONFIG="$PG_BINDIR/pg_config" COPT=-Werror test-tools >/dev/null
}

# Does major $1 need a chroot here?  Only if it is not the one this system's
# Debian suite ships (scripts/chroot.sh knows which suite ships which).
major_needs_chroot() {
	local suite codename
	suite=$(chroot_suite "$1")
	[ -n "$suite" ] || return 1
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ "$suite" != "$codename" ] && ! { [ "$suite" = sid ] && grep -qs '/sid' /etc/debian_version; }
}

# Copy the files git tracks in tree $1, as they are in its working tree (no
# build products, no untracked files), to directory $2; a tree without git
# is copied whole and cleaned.
copy_tracked_files() {
	local from=$1 to=$2
	mkdir -p "$to"
	if git -C "$from" rev-parse --git-dir >/dev/null 2>&1; then
		(cd "$from" && git ls-files -z | xargs -0 cp --parents -t "$to")
	else
		cp -a "$from/." "$to"
		make -C "$to" -s clean PG_CONFIG="$PG_BINDIR/pg_config" >/dev/null 2>&1 || true
	fi
}

# Run a command as $PG_USER (PostgreSQL refuses to run as root).
as_pg_user() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$PG_USER" -- env PATH="$PG_BINDIR:$PATH" "$@"
	else
		env PATH="$PG_BINDIR:$PATH" "$@"
	fi
}

# A fresh directory the test user owns, holding a copy of the tree $1.
copy_tree_for_pg_user() {
	local dir
	dir=$(mktemp -d /tmp/delaysched.XXXXXX)
	cp -a "$1/." "$dir/"
	[ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$dir"
	echo "$dir"
}

# Start a throwaway cluster with delaysched preloaded in a new directory
# under /tmp, listening on a unix socket only.  Sets CLUSTER_DIR and
# CLUSTER_PORT; stop_throwaway_cluster removes it.  Extra settings in $2;
# "plain" as $3 leaves delaysched out altogether (for the benchmark's peers).
start_throwaway_cluster() {
	local port=$1 extra=${2:-} plain=${3:-}
	CLUSTER_DIR=$(mktemp -d /tmp/delaysched-cluster.XXXXXX)
	CLUSTER_PORT=$port
	[ "$(id -u)" -eq 0 ] && chown "$PG_USER" "$CLUSTER_DIR"
	as_pg_user initdb -D "$CLUSTER_DIR/data" -A trust -U postgres >/dev/null
	if [ "$plain" != plain ]; then
		extra="shared_preload_libraries = 'delaysched'
$extra"
	fi
	cat >>"$CLUSTER_DIR/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$CLUSTER_DIR'
port = $port
$extra
CONF
	as_pg_user pg_ctl -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" -w start >/dev/null
	[ "$plain" = plain ] && return 0
	as_pg_user psql -X -q -h "$CLUSTER_DIR" -p "$port" -U postgres -d postgres \
		-c "CREATE EXTENSION delaysched" >/dev/null
}

stop_throwaway_cluster() {
	[ -n "${CLUSTER_DIR:-}" ] || return 0
	as_pg_user pg_ctl -D "$CLUSTER_DIR/data" -m fast stop >/dev/null 2>&1 || true
	rm -rf "$CLUSTER_DIR"
	CLUSTER_DIR=""
}

# A TCP port on 127.0.0.1 that nothing listens on now.
free_tcp_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# psql against the throwaway cluster.
cluster_sql() {
	as_pg_user psql -X -q -h "$CLUSTER_DIR" -p "$CLUSTER_PORT" -U postgres -d postgres "$@"
}

cluster_conninfo() {
	echo "host=$CLUSTER_DIR port=$CLUSTER_PORT user=postgres dbname=postgres"
}
