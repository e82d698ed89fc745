/*-------------------------------------------------------------------------
 *
 * cluster.h
 *		The server-wide part of delaysched: the table of databases served
 *		and what it is asked to do (cluster.c), the launcher, which starts
 *		and stops every served database's workers, and the probe, which
 *		looks for the extension in a database (launcher.c), and the hook on
 *		database and extension commands (utility.c).
 *
 * The table's layout and lookups are in base/shmem.h, with the locks (see
 * Locks there).
 *
 * IDENTIFICATION
 *	  src/cluster/cluster.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_CLUSTER_H
#define DELAYSCHED_CLUSTER_H

#include "postgres.h"

#include "base/shmem.h"

/* The table of databases served (cluster.c). */
extern int	delaysched_serve_database(Oid dboid);
extern void delaysched_stop_database(Oid dboid);
extern bool delaysched_database_has_room(Oid dboid);
extern void delaysched_wake_launcher(void);
extern void delaysched_wake_database_workers(int index);

/*
 * The kinds of worker a database served has, in the order the launcher
 * grants and starts each round of them (launcher.c).
 */
typedef enum WorkerKind
{
	WORKER_SCANNER = 0,			/* core/scanner.c */
	WORKER_HTTP,				/* http/http_worker.c */
	WORKER_SQL,					/* sql/sql_worker.c */
	WORKER_KINDS
} WorkerKind;

/* How many workers of a kind every database wants (the parameters). */
extern int	delaysched_workers_wanted(WorkerKind kind);

/* The pids in database entry d's worker slots, by kind and index (0: none). */
typedef struct DatabasePids
{
	pid_t		pid[WORKER_KINDS][DELAYSCHED_MAX_WORKERS];
	int			count[WORKER_KINDS];	/* non-zero among pid[kind] */
	int			total;			/* of every kind */
} DatabasePids;

extern void delaysched_database_pids(int index, DatabasePids *pids);

/* A following router's lease on this node's shares (share_lease.c). */
extern void delaysched_note_share_lapse(bool lapsed);

/* The router's follower (router_follower.c). */
extern void delaysched_register_router_follower(void);

/* The launcher and the probe (launcher.c). */
extern void delaysched_register_launcher(void);
extern PGDLLEXPORT void delaysched_launcher_main(Datum main_arg);
extern PGDLLEXPORT void delaysched_probe_main(Datum main_arg);

/* The hook on database and extension commands (utility.c). */
extern void delaysched_install_utility_hook(void);

#endif							/* DELAYSCHED_CLUSTER_H */
