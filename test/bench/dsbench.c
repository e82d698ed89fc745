/*
 * dsbench.c
 *		Load driver for the benchmark suite: schedules tasks through a
 *		system's public interface, receives them as a user would, timestamps
 *		every receipt, and prints one result row (and a CSV line).
 *
 *	usage: dsbench --system delaysched|raw --workload burst|steady|idle|enqueue
 *				   [--size N] [--rate R] [--seconds S] [--csv FILE] CONNINFO
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
 *	 burst    SIZE tasks (default 50,000) due at the same instant
 *	 steady   RATE tasks/s (default 300) for SECONDS (default 30), each due
 *			  1 to 5 s after it is added
 *	 idle     SIZE tasks (default 200) scattered over SECONDS (default 20)
 *	 enqueue  one task per statement from 2 connections for SECONDS
 *			  (default 10); no delivery
 *
 * Lateness is receipt time minus run_at, both on this machine's clock.
 * Progress goes to stderr every second on long runs.
 */
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
	long		size;
	double		rate;
	double		seconds;
} Options;

static void
die(const char *what, PGconn *conn)
{
	fprintf(stderr, "dsbench: %s: %s", what, conn ? PQerrorMessage(conn) : "\n");
	exit(1);
}

static PGconn *
connect_or_die(const char *conninfo)
{
	PGconn	   *conn = PQconnectdb(conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
		die("connect", conn);
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
		exec_or_die(conn, "CREATE EXTENSION IF NOT EXISTS delaysched");
		/* Start from an empty store: no pending load from an earlier run. */
		exec_or_die(conn, "TRUNCATE sched.task, sched.finished, sched.dedupe");
		exec_or_die(conn, "SELECT sched.define_biz('bench', ack_timeout => '1 hour')");
	}
}

/* Schedule n tasks due at the given epoch microseconds, in one statement. */
static void
schedule_batch(PGconn *conn, const Options *o, long n, usec_t due)
{
	char		sql[1024];

	if (is_raw(o))
		snprintf(sql, sizeof(sql),
				 "INSERT INTO bench_raw (run_at, payload)"
				 " SELECT to_timestamp(%lld / 1e6), jsonb_build_object('due', %lld)"
				 " FROM generate_series(1, %ld)", due, due, n);
	else
		snprintf(sql, sizeof(sql),
				 "SELECT count(*) FROM sched.add_many('bench',"
				 " array_fill(to_timestamp(%lld / 1e6), ARRAY[%ld]),"
				 " array_fill(jsonb_build_object('due', %lld), ARRAY[%ld]))",
				 due, n, due, n);
	exec_or_die(conn, sql);
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
				 "SELECT sched.add('bench', to_timestamp(%lld / 1e6), jsonb_build_object('due', %lld))",
				 due, due);
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
								 "  SELECT id FROM bench_raw WHERE run_at <= clock_timestamp()"
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
	}
	r->lateness[r->count++] = at - atoll(due);
	if (r->first == 0)
		r->first = at;
	r->last = at;

	if (ack)
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

	while (r->count < expected && now_us() < deadline)
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
			note_receipt(r, n->extra, now_us(), ack);
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

static void
report(const Options *o, long expected, const Receipts *r, double enqueue_per_s,
	   double drain_s)
{
	double		delivered_per_s = drain_s > 0 ? r->count / drain_s : 0;
	double		p50, p90, p99, pmax;
	FILE	   *csv;

	qsort(r->lateness, r->count, sizeof(usec_t), cmp_usec);
	p50 = percentile_ms(r, 0.50);
	p90 = percentile_ms(r, 0.90);
	p99 = percentile_ms(r, 0.99);
	pmax = percentile_ms(r, 1.0);

	printf("%-20s %-8s %9ld %9ld %11.0f %8.2f %11.0f %9.1f %9.1f %9.1f %9.1f\n",
		   o->system, o->workload, expected, r->count, enqueue_per_s, drain_s,
		   delivered_per_s, p50, p90, p99, pmax);
	if (o->csv && (csv = fopen(o->csv, "a")) != NULL)
	{
		fprintf(csv, "%s,%s,%ld,%ld,%.0f,%.3f,%.0f,%.2f,%.2f,%.2f,%.2f\n",
				o->system, o->workload, expected, r->count, enqueue_per_s, drain_s,
				delivered_per_s, p50, p90, p99, pmax);
		fclose(csv);
	}
	if (r->count < expected && strcmp(o->workload, "enqueue") != 0)
		fprintf(stderr, "dsbench: only %ld of %ld tasks arrived\n", r->count, expected);
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

static void
run_delivery_workload(const Options *o)
{
	PGconn	   *setup = connect_or_die(o->conninfo);
	PGconn	   *listen_conn = connect_or_die(o->conninfo);
	PGconn	   *ack_conn = connect_or_die(o->conninfo);
	Receipts	r;
	pid_t		baseline = 0;
	pid_t		producer = 0;
	long		expected;
	double		enqueue_per_s = 0;
	double		drain_s = 0;
	bool		ack = !is_raw(o);

	memset(&r, 0, sizeof(r));
	prepare_system(setup, o);
	exec_or_die(listen_conn, "LISTEN bench");
	if (is_raw(o))
	{
		baseline = fork();
		if (baseline == 0)
			raw_baseline_loop(o->conninfo);
	}

	if (strcmp(o->workload, "burst") == 0)
	{
		/* Due 5 s after the insert starts, or when the insert ends. */
		usec_t		t0 = now_us();
		usec_t		due = t0 + 5000000 + o->size * 20;
		usec_t		t1;

		expected = o->size;
		schedule_batch(setup, o, o->size, due);
		t1 = now_us();
		enqueue_per_s = o->size / ((t1 - t0) / 1e6);
		receive(listen_conn, ack_conn, &r, expected, due + 600 * 1000000LL, ack);
		/* From the due time, or from the end of the insert if that came later. */
		drain_s = (r.last - (t1 > due ? t1 : due)) / 1e6;
	}
	else
	{
		bool		steady = strcmp(o->workload, "steady") == 0;
		usec_t		start = now_us();

		expected = steady ? (long) (o->rate * o->seconds) : o->size;
		producer = start_producer(o, steady ? produce_steady : produce_idle);
		receive(listen_conn, ack_conn, &r, expected,
				start + (usec_t) ((o->seconds + 60) * 1e6), ack);
		drain_s = (r.last - r.first) / 1e6;
	}

	if (producer)
		waitpid(producer, NULL, 0);
	if (baseline)
	{
		kill(baseline, SIGTERM);
		waitpid(baseline, NULL, 0);
	}
	report(o, expected, &r, enqueue_per_s, drain_s);
	PQfinish(ack_conn);
	PQfinish(listen_conn);
	PQfinish(setup);
}

/* enqueue: one task per statement from 2 connections for SECONDS */
static void
produce_for_seconds(PGconn *conn, const Options *o)
{
	usec_t		end = now_us() + (usec_t) (o->seconds * 1e6);
	long		n = 0;
	char		out[64];
	FILE	   *f;

	while (now_us() < end)
	{
		schedule_one(conn, o, now_us() + 86400LL * 1000000);
		n++;
	}
	snprintf(out, sizeof(out), "/tmp/dsbench-enqueue.%d", (int) getpid());
	if ((f = fopen(out, "w")) != NULL)
	{
		fprintf(f, "%ld\n", n);
		fclose(f);
	}
}

static void
run_enqueue_workload(const Options *o)
{
	PGconn	   *setup = connect_or_die(o->conninfo);
	pid_t		producers[2];
	long		total = 0;
	Receipts	r;

	memset(&r, 0, sizeof(r));
	prepare_system(setup, o);
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
	report(o, total, &r, total / o->seconds, 0);
	PQfinish(setup);
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: dsbench --system delaysched|raw --workload burst|steady|idle|enqueue\n"
			"               [--size N] [--rate R] [--seconds S] [--csv FILE] [--header] CONNINFO\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	Options		o = {NULL, NULL, NULL, NULL, -1, 300, -1};
	int			i;

	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++)
	{
		if (strcmp(argv[i], "--header") == 0)
		{
			printf("%-20s %-8s %9s %9s %11s %8s %11s %9s %9s %9s %9s\n",
				   "system", "workload", "tasks", "received", "enqueue/s", "drain s",
				   "deliver/s", "p50 ms", "p90 ms", "p99 ms", "max ms");
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
			o.rate = atof(argv[++i]);
		else if (strcmp(argv[i], "--seconds") == 0)
			o.seconds = atof(argv[++i]);
		else if (strcmp(argv[i], "--csv") == 0)
			o.csv = argv[++i];
		else
			usage();
	}
	if (i != argc - 1 || o.system == NULL || o.workload == NULL)
		usage();
	if (strcmp(o.system, "delaysched") != 0 && strcmp(o.system, "raw") != 0)
		usage();
	o.conninfo = argv[i];
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (strcmp(o.workload, "burst") == 0)
	{
		if (o.size < 0)
			o.size = 50000;
		run_delivery_workload(&o);
	}
	else if (strcmp(o.workload, "steady") == 0)
	{
		if (o.seconds < 0)
			o.seconds = 30;
		run_delivery_workload(&o);
	}
	else if (strcmp(o.workload, "idle") == 0)
	{
		if (o.size < 0)
			o.size = 200;
		if (o.seconds < 0)
			o.seconds = 20;
		run_delivery_workload(&o);
	}
	else if (strcmp(o.workload, "enqueue") == 0)
	{
		if (o.seconds < 0)
			o.seconds = 10;
		run_enqueue_workload(&o);
	}
	else
		usage();
	return 0;
}
