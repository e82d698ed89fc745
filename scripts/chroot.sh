# scripts/chroot.sh: PostgreSQL majors that bookworm does not ship, in
# Debian chroots.
#
# Sourced, not run (scripts/test.sh and scripts/package.sh use it).  Debian's
# own archive, the one apt already uses here, serves PostgreSQL 17 in trixie
# and 18 in sid; their binaries need a newer C library than bookworm's, so
# each major gets a minimal Debian of its suite (debootstrap --variant=minbase)
# under $DELAYSCHED_CHROOTS, made once and kept: making one takes a minute or
# two, and later runs only check that its package list is installed.
#
#   chroot_suite MAJOR          the Debian suite that ships MAJOR ("" if none)
#   chroot_ensure MAJOR         make (or complete) the chroot, one caller at a
#                               time; prints its path
#   chroot_mount DIR            mount /proc, /dev/shm, /dev/pts in it (idempotent)
#   chroot_umount DIR           undo chroot_mount, once no other user is left
#   chroot_tree_begin MAJOR SRC a copy of the tree SRC in MAJOR's chroot,
#                               mounted: sets CHROOT_DIR, CHROOT_TREE (its
#                               path here) and CHROOT_INSIDE (its path inside)
#   chroot_tree_end             unmount and remove that copy (idempotent)
#
# Inside, the tree's own scripts run as they do on the host, as root, with
# PG_MAJOR set: they find PostgreSQL where Debian puts it.

DELAYSCHED_CHROOTS=${DELAYSCHED_CHROOTS:-/var/cache/delaysched/chroots}

chroot_suite() {
	case $1 in
		17) echo trixie ;;
		18) echo sid ;;
		*) echo "" ;;
	esac
}

# The Debian mirror apt uses on this machine (deb822 or one-line sources).
chroot_mirror() {
	local uri
	uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '{print $2}' | grep -E '/debian/?$' | head -n 1)
	[ -z "$uri" ] && uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null |
		awk '{print $2}' | grep -E '/debian/?$' | head -n 1)
	echo "${uri:-http://deb.debian.org/debian}"
}

# Everything the suite, the package build and the benchmarks' smoke runs
# need inside a chroot for major $1 (the lists are lib.sh's, which a minbase
# Debian lacks perl, procps and gnuplot besides).
chroot_packages() {
	echo "$(major_packages "$1") $(test_packages "$1") $PACKAGE_BUILD_PACKAGES" \
		"perl procps gnuplot-nox postgresql-$1-cron"
}

# Several scripts may use one chroot at once (the suite, a benchmark, a
# package build): each registers while it uses the mounts, under a lock, as
# its process id (and KEY, if given: chroot_ensure's own use), and the last
# one out (or the first to find only dead users' entries) unmounts.
#   chroot_mount DIR [KEY]    chroot_umount DIR [KEY]
chroot_mount() {
	local dir=$1 user=$$${2:+.$2}
	mkdir -p "$dir.users"
	(
		flock 9
		touch "$dir.users/$user"
		mountpoint -q "$dir/proc" || mount -t proc proc "$dir/proc"
		mkdir -p "$dir/dev/shm" "$dir/dev/pts"
		mountpoint -q "$dir/dev/shm" || mount -t tmpfs -o mode=1777 shm "$dir/dev/shm"
		mountpoint -q "$dir/dev/pts" ||
			mount -t devpts -o newinstance,ptmxmode=0666 devpts "$dir/dev/pts" 2>/dev/null || true
	) 9>"$dir.lock"
}

chroot_umount() {
	local dir=$1 me=$$${2:+.$2} m user pid
	(
		flock 9
		rm -f "$dir.users/$me"
		for user in "$dir".users/*; do
			[ -e "$user" ] || continue
			pid=${user##*/}
			kill -0 "${pid%%.*}" 2>/dev/null && exit 0
			rm -f "$user"
		done
		for m in dev/pts dev/shm proc; do
			if mountpoint -q "$dir/$m"; then umount -l "$dir/$m"; fi
		done
	) 9>"$dir.lock"
	return 0
}

# A scratch copy of the tree $2 (its tracked files, as lib.sh's
# copy_tracked_files takes them) inside major $1's chroot, made if missing,
# with the mounts registered; the caller runs its scripts there with
# chroot_run "$CHROOT_DIR" ... "$CHROOT_INSIDE/...", and ends with
# chroot_tree_end (from its EXIT trap too).  Copies older than a day, left
# by runs that were killed, are removed (a newer one may be in use).
CHROOT_DIR="" CHROOT_TREE="" CHROOT_INSIDE=""
chroot_tree_begin() {
	CHROOT_DIR=$(chroot_ensure "$1") || return 1
	find "$CHROOT_DIR" "$CHROOT_DIR/tmp" -maxdepth 1 \( -name 'build.*' -o -name 'delaysched.*' \) \
		-mmin +1440 -exec rm -rf {} + 2>/dev/null
	CHROOT_TREE=$(mktemp -d "$CHROOT_DIR/build.XXXXXX")
	CHROOT_INSIDE=/${CHROOT_TREE#"$CHROOT_DIR"/}
	# The servers' user runs test programs from the copy: let it in.
	chmod 755 "$CHROOT_TREE"
	copy_tracked_files "$2" "$CHROOT_TREE"
	chroot_mount "$CHROOT_DIR"
}

chroot_tree_end() {
	[ -n "$CHROOT_TREE" ] && rm -rf "$CHROOT_TREE"
	[ -n "$CHROOT_DIR" ] && chroot_umount "$CHROOT_DIR"
	CHROOT_DIR="" CHROOT_TREE="" CHROOT_INSIDE=""
	return 0
}

# Run a command inside the chroot $1 as root, in a clean environment.
chroot_run() {
	local dir=$1
	shift
	chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# Make (or complete) the chroot of major $1, one caller at a time; print
# its path.
chroot_ensure() {
	local dir=$DELAYSCHED_CHROOTS/pg$1 status
	mkdir -p "$DELAYSCHED_CHROOTS"
	exec 8>"$dir.ensure.lock"
	flock 8
	chroot_make "$1"
	status=$?
	flock -u 8
	exec 8>&-
	return $status
}

chroot_make() {
	local major=$1 suite dir mirror pkgs
	suite=$(chroot_suite "$major")
	if [ -z "$suite" ]; then
		echo "chroot: no Debian suite ships PostgreSQL $major here" >&2
		return 1
	fi
	dir=$DELAYSCHED_CHROOTS/pg$major
	pkgs=$(chroot_packages "$major")
	if [ -f "$dir/.delaysched-ready" ] && [ "$(cat "$dir/.delaysched-ready")" = "$pkgs" ]; then
		echo "$dir"
		return 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		echo "chroot: making $dir needs root" >&2
		return 1
	fi
	mirror=$(chroot_mirror)
	if [ ! -x "$dir/usr/bin/apt-get" ]; then
		command -v debootstrap >/dev/null || {
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null || return 1
		}
		log "making a $suite chroot for PostgreSQL $major in $dir (from $mirror)"
		rm -rf "$dir"
		mkdir -p "$dir"
		if ! debootstrap --variant=minbase "$suite" "$dir" "$mirror" >"$dir.debootstrap.log" 2>&1; then
			tail -n 20 "$dir.debootstrap.log" >&2
			echo "chroot: debootstrap $suite failed (log: $dir.debootstrap.log)" >&2
			return 1
		fi
	fi
	# apt: the archive's sid can be past its Release file's valid-until
	# date; nothing recommended; no service started by a package's scripts.
	echo "deb $mirror $suite main" >"$dir/etc/apt/sources.list"
	cat >"$dir/etc/apt/apt.conf.d/99delaysched" <<'CONF'
Acquire::Check-Valid-Until "false";
APT::Install-Recommends "false";
APT::Install-Suggests "false";
CONF
	printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
	chmod 755 "$dir/usr/sbin/policy-rc.d"
	# No main cluster: the tests make their own.
	mkdir -p "$dir/etc/postgresql-common/createcluster.d"
	echo "create_main_cluster = false" >"$dir/etc/postgresql-common/createcluster.d/delaysched.conf"
	cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
	log "installing PostgreSQL $major and the suite's packages in $dir"
	chroot_mount "$dir" ensure
	if ! { chroot_run "$dir" apt-get update -qq &&
		chroot_run "$dir" apt-get install -y -qq $pkgs; } >"$dir.apt.log" 2>&1; then
		chroot_umount "$dir" ensure
		tail -n 20 "$dir.apt.log" >&2
		echo "chroot: installing packages in $dir failed (log: $dir.apt.log)" >&2
		return 1
	fi
	chroot_umount "$dir" ensure
	echo "$pkgs" >"$dir/.delaysched-ready"
	echo "$dir"
}
