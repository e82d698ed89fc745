/*
 * dsbench.c
 *		Load driver for the benchmark suite: schedules tasks through a
 *		system's public interface, receives them as a user would, timestamps
 *		every receipt, and prints one result row (and a CSV line).
 *
 *	usage: dsbench --system delaysched|raw
 *				   --workload burst|neighbour|steady|idle|pending|enqueue
 *				   [--size N] [--rate R] [--seconds S] [--pending N] [--batch N]
 *				   [--rate-limit R [--burst B]] [--hold snapshot|xid] [--ack-timeout S]
 *				   [--type NAME] [--label NAME] [--name NAME] [--csv FILE] [--receipts FILE]
 *				   [--keys N]
 *				   CONNINFO
 *
 * Systems:
 *	 delaysched  sched.add / sched.add_many; a LISTEN client on channel
 *				 "bench" that acknowledges in batches with sched.ack_many.
 *	 raw         the raw-SQL baseline: a plain table with a run_at index and
 *				 one loop (a child process) that runs DELETE ... FOR UPDATE SKIP
 *				 LOCKED ... RETURNING with pg_notify, sleeping 1 ms when idle;
 *				 what PostgreSQL itself can do on the machine.
 *
 * Workloads:
 *	 burst    SIZE tasks (default 50,000) due at the same instant, 2 s
 *			  (plus 20 us a task) after the insert starts
 *	 neighbour  the burst (SIZE, default 300,000) and, beside it, a second
 *			  type ("neighbour"; in the raw table, tasks whose payload says
 *			  so) due RATE times a second (default 20) for SECONDS (default
 *			  10) from the burst's due time: one type's backlog against
 *			  another's punctuality.  Two result rows: the burst's
 *			  (label), and the neighbour's lateness (label-n); --receipts
 *			  writes the neighbour's to FILE.n.  With --keys N (delaysched), the
 *			  neighbour is not a type but N keys ("n0".."n{N-1}", in turn) of
 *			  the burst's own type, whose tasks all have the key "A": one key's
 *			  backlog against the other keys' punctuality
 *	 steady   RATE tasks/s (default 300) for SECONDS (default 30), each due
 *			  1 to 5 s after it is added
 *	 idle     SIZE tasks (default 200) scattered over SECONDS (default 20)
 *	 pending  PENDING tasks (default 1,000,000) spread over the next day are
 *			  added first, then the steady workload runs beside them
 *	 enqueue  BATCH tasks per statement (default 1: sched.add; more:
 *			  sched.add_many) from 2 connections for SECONDS (default 10);
 *			  no delivery
 *
 * --rate-limit defines delaysched's type with that rate_limit (and burst):
 * the burst workload then measures the limiter pacing a backlog.
 *
 * --hold keeps a transaction open and idle on another connection for the
 * whole measured part of a delivery workload, holding back the xmin horizon
 * as a forgotten session would: "snapshot" takes a REPEATABLE READ snapshot
 * (BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1), "xid" also takes a
 * transaction id.  Nothing can be vacuumed meanwhile.  The result row then
 * counts the dead tuples of the system's tables at the end (the "dead"
 * column, from pg_stat_user_tables; -1 where not measured).
 *
 * --type names delaysched's type and its channel (default "bench").  With
 * it, several dsbench runs share one database: each empties only its own
 * type's tasks at the start instead of the whole store.
 *
 * --ack-timeout gives delaysched's type that ack_timeout in seconds (by
 * default one hour, so that no slow acknowledgement is ever redelivered;
 * the xmin workloads use the product's default, 30 s, so that lease expiry
 * meets the leases of acknowledged tasks as it would in production).
 *
 * Lateness is receipt time minus run_at, both on this machine's clock.
 * "cpu %" is the CPU time of the whole server (the postmaster and all its
 * children, read from /proc) while receiving, per second of wall time, so it
 * needs the server on this machine.  --receipts writes one line per receipt,
 * "seconds since the burst's due time (or the start)  lateness in ms", for
 * the plots.  Every delivery workload starts with a warm-up of 20 tasks that
 * is not measured.  Exit status 3: not every task arrived before the
 * deadline (SECONDS + 60 s, or 600 s after a burst's due time).  Progress goes to stderr every second on long runs.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

#include "dsclient.h"

typedef struct Options
{
	const char *system;
	const char *workload;
	const char *conninfo;
	const char *csv;
	const char *receipts;
	const char *label;
	const char *name;			/* the system column; --system by default */
	long		size;
	double		rate;
	double		seconds;
	long		pending;
	long		batch;
	double		rate_limit;		/* 0: none */
	long		burst;			/* 0: the default */
	const char *hold;			/* NULL, "snapshot" or "xid": see --hold */
	long		ack_timeout_s;	/* delaysched's ack_timeout */
	const char *type;			/* delaysched's type and channel; see --type */
	bool		rate_given;		/* --rate was given */
	long		keys;			/* neighbour: its keys in the burst's type; 0:
								 * a type of its own */
} Options;

static void
die(const char *what, PGconn *conn)
{
	fprintf(stderr, "dsbench: %s: %s", what, conn ? PQerrorMessage(conn) : "\n");
	exit(1);
}

/* Setup statements raise NOTICEs ("already exists, skipping"); not news. */
static void
ignore_notice(void *arg, const char *message)
{
	(void) arg;
	(void) message;
}

static PGconn *
connect_or_die(const char *conninfo)
{
	PGconn	   *conn = PQconnectdb(conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
		die("connect", conn);
	PQsetNoticeProcessor(conn, ignore_notice, NULL);
	return conn;
}

/* Run a statement that returns nothing we need; die on error. */
static void
exec_or_die(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "dsbench: %s\n  in: %s\n", PQerrorMessage(conn), sql);
		exit(1);
	}
	PQclear(res);
}

/* ------------------------------------------------------------------------
 * Systems: how to prepare, schedule and acknowledge
 * ------------------------------------------------------------------------
 */

static bool
is_raw(const Options *o)
{
	return strcmp(o->system, "raw") == 0;
}

static bool
is_neighbour(const Options *o)
{
	return strcmp(o->workload, "neighbour") == 0;
}

/* The neighbour workload's second type, and its channel. */
#define NEIGHBOUR_TYPE "neighbour"

/*
 * Every message carries the run_at as microseconds since the epoch in the
 * payload ("due"), so that both systems are measured the same way.
 */
static void
prepare_system(PGconn *conn, const Options *o)
{
	if (is_raw(o))
	{
		exec_or_die(conn, "DROP TABLE IF EXISTS bench_raw");
		exec_or_die(conn, "CREATE TABLE bench_raw (id bigserial PRIMARY KEY,"
					" run_at timestamptz NOT NULL, payload jsonb NOT NULL)");
		exec_or_die(conn, "CREATE INDEX ON bench_raw (run_at)");
	}
	else
	{
		char		sql[256];

		exec_or_die(conn, "CREATE EXTENSION IF NOT EXISTS delaysched");
		/* Start from an empty store: no pending load from an earlier run. */
		if (strcmp(o->type, "bench") == 0)
			exec_or_die(conn, "TRUNCATE sched.task, sched.finished, sched.dedupe");
		else
		{
			snprintf(sql, sizeof(sql), "DELETE FROM sched.task WHERE biz_type = '%s'", o->type);
			exec_or_die(conn, sql);
			snprintf(sql, sizeof(sql), "DELETE FROM sched.finished WHERE biz_type = '%s'", o->type);
			exec_or_die(conn, sql);
		}

		if (o->rate_limit > 0 && o->burst > 0)
			snprintf(sql, sizeof(sql),
					 "SELECT sched.define_biz('%s', ack_timeout => '%ld s', rate_limit => %g, burst => %ld)",
					 o->type, o->ack_timeout_s, o->rate_limit, o->burst);
		else if (o->rate_limit > 0)
			snprintf(sql, sizeof(sql),
					 "SELECT sched.define_biz('%s', ack_timeout => '%ld s', rate_limit => %g)",
					 o->type, o->ack_timeout_s, o->rate_limit);
		else
			snprintf(sql, sizeof(sql), "SELECT sched.define_biz('%s', ack_timeout => '%ld s')",
					 o->type, o->ack_timeout_s);
		exec_or_die(conn, sql);
		if (is_neighbour(o) && o->keys == 0)
		{
			snprintf(sql, sizeof(sql), "SELECT sched.define_biz('%s', ack_timeout => '%ld s')",
					 NEIGHBOUR_TYPE, o->ack_timeout_s);
			exec_or_die(conn, sql);
		}
	}
}

/*
 * Schedule n tasks in one statement, the i-th (from 0) due at first + i *
 * step epoch microseconds: a burst when step is 0, a spread otherwise.
 * neighbour: of the neighbour workload's second type (raw: marked "n" in
 * the payload), or with --keys of its keys in the burst's type (whose own
 * tasks then have the key "A").
 */
static void
schedule_tasks(PGconn *conn, const Options *o, long n, usec_t first, usec_t step,
			   bool neighbour)
{
	char		sql[1024];
	char		keys[256] = "";

	if (o->keys > 0)
		snprintf(keys, sizeof(keys),
				 neighbour ? ", keys => ARRAY(SELECT 'n' || (g %% %ld) FROM generate_series(0, %ld - 1) g)"
				 : ", keys => array_fill('A'::text, ARRAY[%ld])",
				 neighbour ? o->keys : n, n);
	if (is_raw(o))
		snprintf(sql, sizeof(sql),
				 "INSERT INTO bench_raw (run_at, payload)"
				 " SELECT to_timestamp(d / 1e6), jsonb_build_object('due', d%s)"
				 " FROM (SELECT %lld + %lld::bigint * g AS d FROM generate_series(0, %ld - 1) g) s",
				 neighbour ? ", 'n', 1" : "", first, step, n);
	else
		snprintf(sql, sizeof(sql),
				 "WITH s AS (SELECT array_agg(to_timestamp(d / 1e6)) AS run_at,"
				 "  array_agg(jsonb_build_object('due', d)) AS payload"
				 "  FROM (SELECT %lld + %lld::bigint * g AS d FROM generate_series(0, %ld - 1) g) x)"
				 " SELECT count(*) FROM s, sched.add_many('%s', s.run_at, s.payload%s)",
				 first, step, n, neighbour && o->keys == 0 ? NEIGHBOUR_TYPE : o->type, keys);
	exec_or_die(conn, sql);
}

static void
schedule_batch(PGconn *conn, const Options *o, long n, usec_t first, usec_t step)
{
	schedule_tasks(conn, o, n, first, step, false);
}

/* Schedule one task due at the given epoch microseconds. */
static void
schedule_one(PGconn *conn, const Options *o, usec_t due)
{
	char		sql[512];

	if (is_raw(o))
		snprintf(sql, sizeof(sql),
				 "INSERT INTO bench_raw (run_at, payload)"
				 " VALUES (to_timestamp(%lld / 1e6), jsonb_build_object('due', %lld))", due, due);
	else
		snprintf(sql, sizeof(sql),
				 "SELECT sched.add('%s', to_timestamp(%lld / 1e6), jsonb_build_object('due', %lld))",
				 o->type, due, due);
	exec_or_die(conn, sql);
}

/*
 * The raw baseline's delivery loop, run in a child process until killed.
 */
static void
raw_baseline_loop(const char *conninfo)
{
	PGconn	   *conn = connect_or_die(conninfo);

	for (;;)
	{
		PGresult   *res = PQexec(conn,
								 "WITH due AS (DELETE FROM bench_raw WHERE id IN ("
								 "  SELECT id FROM bench_raw WHERE run_at <= now()"
								 "  ORDER BY run_at LIMIT 1000 FOR UPDATE SKIP LOCKED)"
								 " RETURNING id, payload)"
								 " SELECT count(pg_notify('bench', json_build_object("
								 "  'id', id, 'payload', payload)::text)) FROM due");

		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			die("raw baseline", conn);
		if (atol(PQgetvalue(res, 0, 0)) == 0)
			usleep(1000);
		PQclear(res);
	}
}

/* ------------------------------------------------------------------------
 * The consumer: LISTEN, timestamp, acknowledge in batches
 * ------------------------------------------------------------------------
 */

typedef struct Receipts
{
	long		count;
	long		capacity;
	usec_t	   *lateness;
	usec_t	   *at;				/* receipt times, for --receipts */
	usec_t		first;
	usec_t		last;
	/* ids waiting for sched.ack_many */
	char	   *ack_ids;
	size_t		ack_len;
	size_t		ack_cap;
	long		ack_pending;
	usec_t		ack_since;
} Receipts;

/*
 * Send the collected ids with sched.ack_many without waiting for the answer,
 * so that acknowledging never delays the timestamping of receipts.  One
 * call is in flight at a time; ids keep collecting meanwhile.
 */
static bool ack_in_flight = false;

static void
poll_ack(PGconn *ack_conn, bool wait)
{
	PGresult   *res;

	while (ack_in_flight)
	{
		if (!PQconsumeInput(ack_conn))
			die("acknowledge", ack_conn);
		if (PQisBusy(ack_conn) && !wait)
			return;
		while ((res = PQgetResult(ack_conn)) != NULL)
		{
			if (PQresultStatus(res) != PGRES_TUPLES_OK)
				die("sched.ack_many", ack_conn);
			PQclear(res);
		}
		ack_in_flight = false;
	}
}

static void
send_acks(PGconn *ack_conn, Receipts *r)
{
	char	   *sql;

	if (r->ack_pending == 0 || ack_in_flight)
		return;
	sql = malloc(r->ack_len + 64);
	snprintf(sql, r->ack_len + 64, "SELECT sched.ack_many('{%s}'::bigint[])", r->ack_ids);
	if (!PQsendQuery(ack_conn, sql))
		die("acknowledge", ack_conn);
	free(sql);
	ack_in_flight = true;
	r->ack_len = 0;
	r->ack_ids[0] = '\0';
	r->ack_pending = 0;
}

/* The neighbour workload's second type's receipts, and how many are due. */
static Receipts *neighbour_receipts = NULL;
static long neighbour_expected = 0;

static void queue_ack(Receipts *r, const char *payload, usec_t at);

static void
note_receipt(Receipts *r, const char *payload, usec_t at, bool ack)
{
	const char *due = json_value(payload, "due");

	if (due == NULL)
		return;
	if (r->count == r->capacity)
	{
		r->capacity = r->capacity ? r->capacity * 2 : 1024;
		r->lateness = realloc(r->lateness, r->capacity * sizeof(usec_t));
		r->at = realloc(r->at, r->capacity * sizeof(usec_t));
	}
	r->at[r->count] = at;
	r->lateness[r->count++] = at - atoll(due);
	if (r->first == 0)
		r->first = at;
	r->last = at;
	if (ack)
		queue_ack(r, payload, at);
}

/* Add a task's id to r's next sched.ack_many. */
static void
queue_ack(Receipts *r, const char *payload, usec_t at)
{
	const char *id = json_value(payload, "id");
	char		buf[32];
	int			len;

	len = snprintf(buf, sizeof(buf), "%s%lld", r->ack_len ? "," : "", atoll(id));
	if (r->ack_len + len + 1 > r->ack_cap)
	{
		r->ack_cap = (r->ack_cap + len + 1) * 2;
		r->ack_ids = realloc(r->ack_ids, r->ack_cap);
	}
	memcpy(r->ack_ids + r->ack_len, buf, len + 1);
	r->ack_len += len;
	if (r->ack_pending++ == 0)
		r->ack_since = at;
}

/*
 * Receive until `expected` tasks arrived or `deadline` passed.  Acknowledge
 * (delaysched) every 500 tasks or 20 ms, on a second connection.
 */
static void
receive(PGconn *listen_conn, PGconn *ack_conn, Receipts *r, long expected,
		usec_t deadline, bool ack)
{
	usec_t		next_progress = now_us() + 1000000;

	while ((r->count < expected ||
			(neighbour_receipts != NULL && neighbour_receipts->count < neighbour_expected)) &&
		   now_us() < deadline)
	{
		int			sock = PQsocket(listen_conn);
		fd_set		input;
		struct timeval tv = {0, 10000};
		PGnotify   *n;

		FD_ZERO(&input);
		FD_SET(sock, &input);
		if (select(sock + 1, &input, NULL, NULL, &tv) < 0 && errno != EINTR)
			die("select", NULL);
		if (!PQconsumeInput(listen_conn))
			die("receive", listen_conn);
		while ((n = PQnotifies(listen_conn)) != NULL)
		{
			usec_t		at = now_us();

			/*
			 * The neighbour's tasks: on their own channel, marked in the raw
			 * table, or of the keys "n..." (--keys).
			 */
			const char *key = json_value(n->extra, "key");

			if (neighbour_receipts != NULL &&
				(strcmp(n->relname, NEIGHBOUR_TYPE) == 0 || json_value(n->extra, "n") != NULL ||
				 (key != NULL && strncmp(key, "\"n", 2) == 0)))
			{
				/* Acknowledged in the same batches as the others. */
				note_receipt(neighbour_receipts, n->extra, at, false);
				if (ack)
					queue_ack(r, n->extra, at);
			}
			else
				note_receipt(r, n->extra, at, ack);
			PQfreemem(n);
		}
		if (ack)
		{
			poll_ack(ack_conn, false);
			if (r->ack_pending >= 500 ||
				(r->ack_pending > 0 && now_us() - r->ack_since > 20000))
				send_acks(ack_conn, r);
		}
		if (now_us() >= next_progress && expected > 1000)
		{
			fprintf(stderr, "  ... %ld of %ld received\n", r->count, expected);
			next_progress += 1000000;
		}
	}
	if (ack)
	{
		poll_ack(ack_conn, true);
		send_acks(ack_conn, r);
		poll_ack(ack_conn, true);
	}
}

/* ------------------------------------------------------------------------
 * Server CPU: the postmaster and all its children, from /proc
 * ------------------------------------------------------------------------
 */

/*
 * Add the CPU ticks of one process to *ticks: user and system time, and with
 * `reaped` also the time of its children that have exited.  Returns its
 * parent's pid, or -1 when the process is gone.
 */
static long
add_process_ticks(long pid, bool reaped, long long *ticks)
{
	char		path[64];
	char		buf[1024];
	FILE	   *f;
	size_t		len;
	char	   *p;
	long		ppid;
	unsigned long long utime, stime;
	long long	cutime, cstime;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	/* The command name may hold spaces; the fields start after its ')'. */
	if ((p = strrchr(buf, ')')) == NULL ||
		sscanf(p + 2, "%*c %ld %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu %lld %lld",
			   &ppid, &utime, &stime, &cutime, &cstime) != 5)
		return -1;
	*ticks += utime + stime + (reaped ? cutime + cstime : 0);
	return ppid;
}

/* The postmaster's pid, from postmaster.pid in the data directory. */
static long
postmaster_pid(PGconn *conn)
{
	static long pid = 0;
	PGresult   *res;
	char		path[1024];
	FILE	   *f;

	if (pid != 0)
		return pid;
	res = PQexec(conn, "SHOW data_directory");
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		die("show data_directory", conn);
	snprintf(path, sizeof(path), "%s/postmaster.pid", PQgetvalue(res, 0, 0));
	PQclear(res);
	if ((f = fopen(path, "r")) == NULL || fscanf(f, "%ld", &pid) != 1)
		pid = -1;
	if (f)
		fclose(f);
	return pid;
}

/* CPU seconds the server has used so far, or -1 when it cannot be read. */
static double
server_cpu_seconds(PGconn *conn)
{
	long		pm = postmaster_pid(conn);
	long long	ticks = 0;
	DIR		   *proc;
	struct dirent *e;

	if (pm <= 0 || add_process_ticks(pm, true, &ticks) < 0)
		return -1;
	if ((proc = opendir("/proc")) == NULL)
		return -1;
	while ((e = readdir(proc)) != NULL)
	{
		long		pid = atol(e->d_name);
		long long	child = 0;

		if (pid > 0 && pid != pm && add_process_ticks(pid, false, &child) == pm)
			ticks += child;
	}
	closedir(proc);
	return (double) ticks / sysconf(_SC_CLK_TCK);
}

/* ------------------------------------------------------------------------
 * Results
 * ------------------------------------------------------------------------
 */

static int
cmp_usec(const void *a, const void *b)
{
	usec_t		x = *(const usec_t *) a,
				y = *(const usec_t *) b;

	return (x > y) - (x < y);
}

static double
percentile_ms(const Receipts *r, double p)
{
	long		rank;

	if (r->count == 0)
		return -1;
	rank = (long) (p * r->count + 0.999999) - 1;
	if (rank < 0)
		rank = 0;
	if (rank >= r->count)
		rank = r->count - 1;
	return r->lateness[rank] / 1000.0;
}

/*
 * What one run measured, beside the receipts: how fast tasks were added,
 * the drain time, the server's CPU while receiving, and the instant the
 * receipt times of --receipts count from.
 */
typedef struct Measures
{
	double		enqueue_per_s;
	double		drain_s;
	double		cpu_pct;
	usec_t		reference;
	long		dead_tuples;	/* -1: not measured */
} Measures;

static void
write_receipts(const Options *o, const Receipts *r, usec_t reference)
{
	FILE	   *f = fopen(o->receipts, "w");

	if (f == NULL)
	{
		perror(o->receipts);
		exit(1);
	}
	fprintf(f, "# %s %s: seconds since reference, lateness ms\n", o->name, o->label);
	for (long i = 0; i < r->count; i++)
		fprintf(f, "%.4f %.3f\n", (r->at[i] - reference) / 1e6, r->lateness[i] / 1000.0);
	fclose(f);
}

/* Print the row and the CSV line; false when tasks went missing. */
static bool
report(const Options *o, long expected, Receipts *r, const Measures *m)
{
	double		delivered_per_s = m->drain_s > 0 ? r->count / m->drain_s : 0;
	double		p50, p90, p99, pmax;
	char		cpu[16] = "-";
	FILE	   *csv;

	if (m->cpu_pct >= 0)
		snprintf(cpu, sizeof(cpu), "%.0f", m->cpu_pct);
	if (o->receipts)
		write_receipts(o, r, m->reference);
	qsort(r->lateness, r->count, sizeof(usec_t), cmp_usec);
	p50 = percentile_ms(r, 0.50);
	p90 = percentile_ms(r, 0.90);
	p99 = percentile_ms(r, 0.99);
	pmax = percentile_ms(r, 1.0);

	printf("%-24s %-13s %9ld %9ld %11.0f %8.2f %11.0f %9.1f %9.1f %9.1f %9.1f %6s %8ld\n",
		   o->name, o->label, expected, r->count, m->enqueue_per_s, m->drain_s,
		   delivered_per_s, p50, p90, p99, pmax, cpu, m->dead_tuples);
	if (o->csv && (csv = fopen(o->csv, "a")) != NULL)
	{
		fprintf(csv, "%s,%s,%ld,%ld,%.0f,%.3f,%.0f,%.2f,%.2f,%.2f,%.2f,%.0f,%ld\n",
				o->name, o->label, expected, r->count, m->enqueue_per_s, m->drain_s,
				delivered_per_s, p50, p90, p99, pmax, m->cpu_pct, m->dead_tuples);
		fclose(csv);
	}
	if (r->count < expected && strcmp(o->workload, "enqueue") != 0)
	{
		fprintf(stderr, "dsbench: only %ld of %ld tasks arrived\n", r->count, expected);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------
 * Workloads
 * ------------------------------------------------------------------------
 */

/*
 * Fork a producer that runs fn(conn, o) on its own connection, so that
 * scheduling and receiving overlap.
 */
static pid_t
start_producer(const Options *o, void (*fn) (PGconn *, const Options *))
{
	pid_t		pid = fork();

	if (pid < 0)
		die("fork", NULL);
	if (pid == 0)
	{
		PGconn	   *conn = connect_or_die(o->conninfo);

		fn(conn, o);
		PQfinish(conn);
		_exit(0);
	}
	return pid;
}

/* steady: RATE tasks/s for SECONDS, each due 1 to 5 s later */
static void
produce_steady(PGconn *conn, const Options *o)
{
	long		total = (long) (o->rate * o->seconds);
	usec_t		start = now_us();

	srand(42);
	for (long i = 0; i < total; i++)
	{
		usec_t		when = start + (usec_t) (i * 1e6 / o->rate);
		usec_t		now = now_us();

		if (when > now)
			usleep((useconds_t) (when - now));
		schedule_one(conn, o, now_us() + 1000000 + (usec_t) (rand() % 4000000));
	}
}

/* idle: SIZE tasks scattered over SECONDS, added up front */
static void
produce_idle(PGconn *conn, const Options *o)
{
	usec_t		start = now_us() + 1000000;

	srand(7);
	for (long i = 0; i < o->size; i++)
		schedule_one(conn, o, start + (usec_t) ((double) rand() / RAND_MAX * o->seconds * 1e6));
}

/*
 * pending: PENDING tasks spread evenly over the day that starts in ten
 * minutes, so that none falls due during the run; added in batches.
 */
static void
add_pending_load(PGconn *conn, const Options *o)
{
	const long	chunk = 50000;
	usec_t		day = 86400LL * 1000000;
	usec_t		from = now_us() + 600LL * 1000000;
	usec_t		step = day / (o->pending > 0 ? o->pending : 1);

	for (long done = 0; done < o->pending; done += chunk)
	{
		long		n = o->pending - done < chunk ? o->pending - done : chunk;

		schedule_batch(conn, o, n, from + done * step, step);
		fprintf(stderr, "  ... %ld of %ld pending tasks added\n", done + n, o->pending);
	}
	/* What autovacuum would have done by now on a server that ran a while. */
	exec_or_die(conn, "VACUUM ANALYZE");
}

/*
 * Warm up: a few tasks due within a quarter of a second, received and
 * acknowledged before measuring, so that a fresh server's first plans and
 * caches are not charged to the workload.
 */
static void
warm_up(PGconn *conn, PGconn *listen_conn, PGconn *ack_conn, const Options *o, bool ack)
{
	const long	n = 20;
	Receipts	r;

	memset(&r, 0, sizeof(r));
	for (long i = 0; i < n; i++)
		schedule_one(conn, o, now_us() + 50000 + i * 10000);
	receive(listen_conn, ack_conn, &r, n, now_us() + 30 * 1000000LL, ack);
	if (r.count < n)
	{
		fprintf(stderr, "dsbench: warm-up: only %ld of %ld tasks arrived\n", r.count, n);
		exit(1);
	}
	free(r.lateness);
	free(r.at);
	free(r.ack_ids);
}

/*
 * --hold: open a transaction on a connection of its own that holds back the
 * xmin horizon until the connection is closed, and leave it idle.
 */
static PGconn *
hold_horizon(const Options *o)
{
	PGconn	   *conn = connect_or_die(o->conninfo);

	exec_or_die(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ");
	exec_or_die(conn, "SELECT 1");
	if (strcmp(o->hold, "xid") == 0)
		exec_or_die(conn, "SELECT pg_catalog.txid_current()");
	return conn;
}

/*
 * Dead tuples in the system's tables now (as the statistics last heard of
 * them): delaysched's schema, or the raw baseline's table.
 */
static long
dead_tuples(PGconn *conn, const Options *o)
{
	PGresult   *res;
	long		n;

	res = PQexec(conn, is_raw(o) ?
				 "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables"
				 " WHERE relname = 'bench_raw'" :
				 "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables"
				 " WHERE schemaname = 'sched'");
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		die("dead tuples", conn);
	n = atol(PQgetvalue(res, 0, 0));
	PQclear(res);
	return n;
}

static bool
run_delivery_workload(const Options *o)
{
	PGconn	   *setup = connect_or_die(o->conninfo);
	PGconn	   *listen_conn = connect_or_die(o->conninfo);
	PGconn	   *ack_conn = connect_or_die(o->conninfo);
	Receipts	r;
	Receipts	neighbour;
	Measures	m = {0, 0, -1, 0, -1};
	pid_t		baseline = 0;
	pid_t		producer = 0;
	PGconn	   *hold_conn = NULL;
	long		expected;
	double		cpu_before;
	usec_t		cpu_from;
	bool		ack = !is_raw(o);

	memset(&r, 0, sizeof(r));
	memset(&neighbour, 0, sizeof(neighbour));
	prepare_system(setup, o);
	if (strcmp(o->workload, "pending") == 0)
		add_pending_load(setup, o);
	{
		char		listen[128];

		snprintf(listen, sizeof(listen), "LISTEN %s", is_raw(o) ? "bench" : o->type);
		exec_or_die(listen_conn, listen);
		if (is_neighbour(o) && !is_raw(o))
			exec_or_die(listen_conn, "LISTEN " NEIGHBOUR_TYPE);
	}
	if (is_raw(o))
	{
		baseline = fork();
		if (baseline == 0)
			raw_baseline_loop(o->conninfo);
	}
	warm_up(setup, listen_conn, ack_conn, o, ack);
	if (o->hold)
		hold_conn = hold_horizon(o);

	if (strcmp(o->workload, "burst") == 0 || is_neighbour(o))
	{
		/* Due 2 s after the insert starts, or when the insert ends. */
		usec_t		t0 = now_us();
		usec_t		due = t0 + 2000000 + o->size * 20;
		usec_t		t1;

		expected = o->size;
		if (is_neighbour(o))
		{
			/* The neighbour's tasks first, so that the burst's insert is timed alone. */
			neighbour_expected = (long) (o->rate * o->seconds);
			neighbour_receipts = &neighbour;
			schedule_tasks(setup, o, neighbour_expected, due, (usec_t) (1e6 / o->rate), true);
			t0 = now_us();
		}
		schedule_batch(setup, o, o->size, due, 0);
		t1 = now_us();
		/*
		 * Fresh statistics, as autovacuum would soon have them: a queue
		 * whose plans depend on them must not be measured by the luck of
		 * autovacuum's timing.  Deliveries may start meanwhile.
		 */
		exec_or_die(setup, "ANALYZE");
		m.enqueue_per_s = o->size / ((t1 - t0) / 1e6);
		/* From the due time, or from the end of the insert if that came later. */
		m.reference = t1 > due ? t1 : due;
		/* The receive window is mostly the wait for the due time: no CPU. */
		cpu_before = -1;
		cpu_from = 0;
		receive(listen_conn, ack_conn, &r, expected, due + 600 * 1000000LL, ack);
		m.drain_s = (r.last - m.reference) / 1e6;
	}
	else
	{
		bool		idle = strcmp(o->workload, "idle") == 0;

		m.reference = now_us();
		expected = idle ? o->size : (long) (o->rate * o->seconds);
		cpu_before = server_cpu_seconds(setup);
		cpu_from = now_us();
		producer = start_producer(o, idle ? produce_idle : produce_steady);
		receive(listen_conn, ack_conn, &r, expected,
				m.reference + (usec_t) ((o->seconds + 60) * 1e6), ack);
		m.drain_s = (r.last - r.first) / 1e6;
	}
	if (cpu_before >= 0)
		m.cpu_pct = 100 * (server_cpu_seconds(setup) - cpu_before) / ((now_us() - cpu_from) / 1e6);

	if (producer)
		waitpid(producer, NULL, 0);
	/* The acknowledgements are in (receive waited for the last). */
	m.dead_tuples = dead_tuples(setup, o);
	if (hold_conn)
		PQfinish(hold_conn);
	if (baseline)
	{
		kill(baseline, SIGTERM);
		waitpid(baseline, NULL, 0);
	}
	PQfinish(ack_conn);
	PQfinish(listen_conn);
	PQfinish(setup);
	if (is_neighbour(o))
	{
		/* The neighbour's row: its lateness beside the burst. */
		Options		n = *o;
		Measures	nm = m;
		char		label[128];
		char		receipts[1024];
		bool		ok;

		snprintf(label, sizeof(label), "%s-n", o->label);
		n.label = label;
		if (o->receipts)
		{
			snprintf(receipts, sizeof(receipts), "%s.n", o->receipts);
			n.receipts = receipts;
		}
		nm.enqueue_per_s = 0;
		nm.drain_s = (neighbour.last - neighbour.first) / 1e6;
		ok = report(o, expected, &r, &m);
		return report(&n, neighbour_expected, &neighbour, &nm) && ok;
	}
	return report(o, expected, &r, &m);
}

/* enqueue: BATCH tasks per statement from 2 connections for SECONDS */
static void
produce_for_seconds(PGconn *conn, const Options *o)
{
	usec_t		end = now_us() + (usec_t) (o->seconds * 1e6);
	long		n = 0;
	char		out[64];
	FILE	   *f;

	while (now_us() < end)
	{
		if (o->batch > 1)
			schedule_batch(conn, o, o->batch, now_us() + 86400LL * 1000000, 0);
		else
			schedule_one(conn, o, now_us() + 86400LL * 1000000);
		n += o->batch;
	}
	snprintf(out, sizeof(out), "/tmp/dsbench-enqueue.%d", (int) getpid());
	if ((f = fopen(out, "w")) != NULL)
	{
		fprintf(f, "%ld\n", n);
		fclose(f);
	}
}

static bool
run_enqueue_workload(const Options *o)
{
	PGconn	   *setup = connect_or_die(o->conninfo);
	pid_t		producers[2];
	long		total = 0;
	Receipts	r;
	Measures	m = {0, 0, -1, 0, -1};
	double		cpu_before;
	usec_t		cpu_from;

	memset(&r, 0, sizeof(r));
	prepare_system(setup, o);
	cpu_before = server_cpu_seconds(setup);
	cpu_from = now_us();
	for (int i = 0; i < 2; i++)
		producers[i] = start_producer(o, produce_for_seconds);
	for (int i = 0; i < 2; i++)
	{
		char		path[64];
		FILE	   *f;
		long		n = 0;

		waitpid(producers[i], NULL, 0);
		snprintf(path, sizeof(path), "/tmp/dsbench-enqueue.%d", (int) producers[i]);
		if ((f = fopen(path, "r")) != NULL)
		{
			if (fscanf(f, "%ld", &n) != 1)
				n = 0;
			fclose(f);
			unlink(path);
		}
		total += n;
	}
	if (cpu_before >= 0)
		m.cpu_pct = 100 * (server_cpu_seconds(setup) - cpu_before) / ((now_us() - cpu_from) / 1e6);
	m.enqueue_per_s = total / o->seconds;
	PQfinish(setup);
	return report(o, total, &r, &m);
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: dsbench --system delaysched|raw --workload burst|neighbour|steady|idle|pending|enqueue\n"
			"               [--size N] [--rate R] [--seconds S] [--pending N] [--batch N]\n"
			"               [--rate-limit R [--burst B]] [--hold snapshot|xid] [--ack-timeout S]\n"
			"               [--type NAME] [--label NAME] [--name NAME] [--csv FILE] [--receipts FILE]\n"
			"               [--keys N] [--header] CONNINFO\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	Options		o = {0};
	int			i;

	o.size = -1;
	o.rate = 300;
	o.seconds = -1;
	o.pending = 1000000;
	o.batch = 1;
	o.ack_timeout_s = 3600;
	o.type = "bench";
	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++)
	{
		if (strcmp(argv[i], "--header") == 0)
		{
			printf("%-24s %-13s %9s %9s %11s %8s %11s %9s %9s %9s %9s %6s %8s\n",
				   "system", "workload", "tasks", "received", "enqueue/s", "drain s",
				   "deliver/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "cpu %", "dead");
			if (argc == 2)
				return 0;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		if (strcmp(argv[i], "--system") == 0)
			o.system = argv[++i];
		else if (strcmp(argv[i], "--workload") == 0)
			o.workload = argv[++i];
		else if (strcmp(argv[i], "--size") == 0)
			o.size = atol(argv[++i]);
		else if (strcmp(argv[i], "--rate") == 0)
		{
			o.rate = atof(argv[++i]);
			o.rate_given = true;
		}
		else if (strcmp(argv[i], "--seconds") == 0)
			o.seconds = atof(argv[++i]);
		else if (strcmp(argv[i], "--pending") == 0)
			o.pending = atol(argv[++i]);
		else if (strcmp(argv[i], "--batch") == 0)
			o.batch = atol(argv[++i]);
		else if (strcmp(argv[i], "--rate-limit") == 0)
			o.rate_limit = atof(argv[++i]);
		else if (strcmp(argv[i], "--burst") == 0)
			o.burst = atol(argv[++i]);
		else if (strcmp(argv[i], "--hold") == 0)
			o.hold = argv[++i];
		else if (strcmp(argv[i], "--ack-timeout") == 0)
			o.ack_timeout_s = atol(argv[++i]);
		else if (strcmp(argv[i], "--type") == 0)
			o.type = argv[++i];
		else if (strcmp(argv[i], "--label") == 0)
			o.label = argv[++i];
		else if (strcmp(argv[i], "--name") == 0)
			o.name = argv[++i];
		else if (strcmp(argv[i], "--csv") == 0)
			o.csv = argv[++i];
		else if (strcmp(argv[i], "--receipts") == 0)
			o.receipts = argv[++i];
		else if (strcmp(argv[i], "--keys") == 0)
			o.keys = atol(argv[++i]);
		else
			usage();
	}
	if (i != argc - 1 || o.system == NULL || o.workload == NULL || o.batch < 1 ||
		o.ack_timeout_s < 1)
		usage();
	if (strcmp(o.system, "delaysched") != 0 && strcmp(o.system, "raw") != 0)
		usage();
	/* A name that needs no quoting: it is written into SQL as it is. */
	if (o.type[0] == '\0' || strlen(o.type) > 60 ||
		strspn(o.type, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(o.type))
		usage();
	if (o.hold && strcmp(o.hold, "snapshot") != 0 && strcmp(o.hold, "xid") != 0)
		usage();
	o.conninfo = argv[i];
	if (o.label == NULL)
		o.label = o.workload;
	if (o.name == NULL)
		o.name = o.system;
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* Each workload's defaults; then one of the two runners. */
	if (strcmp(o.workload, "burst") == 0)
		o.size = o.size < 0 ? 50000 : o.size;
	else if (strcmp(o.workload, "neighbour") == 0)
	{
		o.size = o.size < 0 ? 300000 : o.size;
		o.rate = o.rate_given ? o.rate : 20;
		o.seconds = o.seconds < 0 ? 10 : o.seconds;
	}
	else if (strcmp(o.workload, "steady") == 0 || strcmp(o.workload, "pending") == 0)
		o.seconds = o.seconds < 0 ? 30 : o.seconds;
	else if (strcmp(o.workload, "idle") == 0)
	{
		o.size = o.size < 0 ? 200 : o.size;
		o.seconds = o.seconds < 0 ? 20 : o.seconds;
	}
	else if (strcmp(o.workload, "enqueue") == 0)
		o.seconds = o.seconds < 0 ? 10 : o.seconds;
	else
		usage();

	if (strcmp(o.workload, "enqueue") == 0)
		return run_enqueue_workload(&o) ? 0 : 3;
	return run_delivery_workload(&o) ? 0 : 3;
}
