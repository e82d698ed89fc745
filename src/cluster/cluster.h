/*-------------------------------------------------------------------------
 *
 * cluster.h
 *		The databases delaysched serves, in shared memory: one entry per
 *		database where the extension is installed, each with the state of
 *		its own workers (shmem.h: ranges, scanners, drain; http_shmem.h:
 *		HTTP workers and hand-off rings), and the launcher (launcher.c),
 *		which starts and stops those workers.
 *
 * An entry is taken for a database when a CREATE EXTENSION delaysched in it
 * commits (utility.c), or when the launcher's probe of a database finds the
 * extension there (launcher.c).  It is given back by the launcher once the
 * database is no longer to be served (the extension or the database was
 * dropped, the database left delaysched.databases or became a template)
 * and none of its workers runs any more.
 *
 * Every process reaches its database's state through the globals of
 * shmem.h (delaysched_shared) and http_shmem.h (delaysched_http_slots): a
 * worker sets them once, at its start, to the entry the launcher started it
 * for; an ordinary backend looks its database up when it first needs them
 * (delaysched_current_database) and checks the entry's dboid on every later
 * use, since an entry given back may be taken for another database.  A
 * backend only lowers wake-up times and sets latches there, so a stale
 * entry costs at most a needless wake-up.
 *
 * Locking.  cluster->lock (LWLock, DELAYSCHED_LWLOCK_CLUSTER) guards the
 * entries' fields but the atomic dboid, which is written with the lock
 * held exclusive and may be read without it, and the launcher's pid and
 * latch.  Taken exclusive to take, change or give back an entry; shared to
 * look one up or read it.  A worker attaching to its entry holds it shared
 * while it takes its slot (a per-database lock, shmem.h), so that the
 * launcher, which gives back an entry only with it exclusive and after
 * finding every slot empty, cannot give the entry away meanwhile.  Order:
 * the cluster lock before any per-database lock, never the other way.
 * Held for a lookup or a few assignments; never while setting a latch,
 * sending a signal or across anything that can fail.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_CLUSTER_H
#define DELAYSCHED_CLUSTER_H

#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#include "base/shmem.h"

/* Upper bound of delaysched.max_databases. */
#define DELAYSCHED_MAX_DATABASES	1024

/* What should become of a database's workers. */
typedef enum DatabaseWant
{
	DATABASE_SERVE = 0,			/* run them (as many as granted) */
	DATABASE_STOP				/* stop them; the entry is then given back */
} DatabaseWant;

/* One database served (or being stopped). */
typedef struct DatabaseEntry
{
	/* The database; InvalidOid while the entry is free.  Atomic. */
	pg_atomic_uint32 dboid;

	/* Under cluster->lock. */
	DatabaseWant want;

	/*
	 * A backend running a command that needs the database to itself (DROP
	 * DATABASE, ALTER DATABASE RENAME or SET TABLESPACE, CREATE DATABASE
	 * from it as a template): its workers leave and none starts until it
	 * is 0 again.  See utility.c.
	 */
	pid_t		leaving_for;

	/* The launcher's, for the sched.cluster view. */
	int			scanners_granted;
	int			http_granted;
	int			failures;		/* workers that ended early in a row */
	TimestampTz retry_at;		/* no worker starts before this */
	TimestampTz served_since;
} DatabaseEntry;

typedef struct DelayschedCluster
{
	LWLock	   *lock;

	/* Under lock. */
	pid_t		launcher_pid;	/* 0 while it does not run */
	Latch	   *launcher_latch;

	/*
	 * Set by a backend whose commit changed what is served (an extension
	 * created or dropped, a database created, dropped or altered); the
	 * launcher exchanges it for 0 and looks at pg_database again.  Atomic.
	 */
	pg_atomic_uint32 rescan;

	int			max_databases;	/* entries below */
	DatabaseEntry databases[FLEXIBLE_ARRAY_MEMBER];
} DelayschedCluster;

extern DelayschedCluster *delaysched_cluster;

/* The entry of the database this process works for, or -1. */
extern int	delaysched_database_index;

extern Size delaysched_cluster_shmem_size(void);
extern void delaysched_cluster_shmem_init(void);

extern void delaysched_use_database(int index);
extern bool delaysched_current_database(void);
extern int	delaysched_find_database(Oid dboid);
extern int	delaysched_serve_database(Oid dboid);
extern void delaysched_stop_database(Oid dboid);
extern bool delaysched_database_has_room(Oid dboid);
extern void delaysched_wake_launcher(void);
extern void delaysched_wake_database_workers(int index);
/* The pids in database entry d's worker slots, by kind and index (0: none). */
typedef struct DatabasePids
{
	pid_t		scanners[DELAYSCHED_MAX_WORKERS];
	pid_t		http[DELAYSCHED_MAX_HTTP_WORKERS];
	int			nscanners;		/* non-zero among scanners[] */
	int			nhttp;			/* non-zero among http[] */
} DatabasePids;

extern void delaysched_database_pids(int index, DatabasePids *pids);

#endif							/* DELAYSCHED_CLUSTER_H */
