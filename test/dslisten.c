/*
 * dslisten.c
 *		A LISTEN client for delaysched: the demo's display, the TAP tests'
 *		receiver and a reference consumer.
 *
 *	usage: dslisten [--ack | --ack-batch N] [--pretty] [--count N] [--timeout SECONDS]
 *					CONNINFO CHANNEL [CHANNEL ...]
 *
 * It LISTENs on the channels, prints "listening" once they are set up, then
 * one line per notification as it arrives:
 *
 *	 RECEIVED_US <TAB> LATENESS_US <TAB> CHANNEL <TAB> PAYLOAD
 *
 * RECEIVED_US is the receipt time (microseconds since the epoch, this
 * machine's clock) and LATENESS_US the receipt time minus the task's run_at
 * ("-" for a notification without run_at, such as a pull announcement).
 * --pretty prints the same for people.  --ack acknowledges each task with
 * sched.ack(id) on the same connection after printing it.  --ack-batch N
 * acknowledges as a consumer that works in batches does: the ids collect,
 * and one sched.ack_many goes on the same connection when N have, or when
 * no further notification is waiting (so a batch never waits for more to
 * come).  It exits 0 after
 * --count notifications, 2 when --timeout passes first, 1 on errors.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>

#include "libpq-fe.h"

#include "dsclient.h"

/*
 * Parse the run_at of a delaysched message ("2026-11-21T05:00:00.123456+00:00")
 * into microseconds since the epoch; false if there is none.
 */
static bool
parse_run_at(const char *json, usec_t *result)
{
	const char *p = json_value(json, "run_at");
	struct tm	tm;
	int			year, month, day, hour, minute, second;
	int			consumed = 0;
	usec_t		fraction = 0;
	int			digits = 0;
	int			sign, off_h = 0, off_m = 0;

	if (p == NULL || *p != '"')
		return false;
	p++;
	if (sscanf(p, "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &month, &day,
			   &hour, &minute, &second, &consumed) != 6)
		return false;
	p += consumed;
	if (*p == '.')
	{
		for (p++; isdigit((unsigned char) *p); p++, digits++)
			if (digits < 6)
				fraction = fraction * 10 + (*p - '0');
		for (; digits < 6; digits++)
			fraction *= 10;
	}
	if (*p != '+' && *p != '-')
		return false;
	sign = (*p == '-') ? -1 : 1;
	if (sscanf(p + 1, "%2d:%2d", &off_h, &off_m) < 1)
		return false;

	memset(&tm, 0, sizeof(tm));
	tm.tm_year = year - 1900;
	tm.tm_mon = month - 1;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = minute;
	tm.tm_sec = second;
	*result = ((usec_t) timegm(&tm) - sign * (off_h * 3600 + off_m * 60)) * 1000000 + fraction;
	return true;
}

static void
format_clock(usec_t t, char *buf, size_t len)
{
	time_t		seconds = (time_t) (t / 1000000);
	struct tm	tm;

	localtime_r(&seconds, &tm);
	snprintf(buf, len, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
			 (int) ((t % 1000000) / 1000));
}

static void
print_notification(PGnotify *n, usec_t received, bool pretty)
{
	usec_t		run_at = 0;
	bool		has_run_at = parse_run_at(n->extra, &run_at);

	if (!pretty)
	{
		if (has_run_at)
			printf("%lld\t%lld\t%s\t%s\n", received, received - run_at, n->relname, n->extra);
		else
			printf("%lld\t-\t%s\t%s\n", received, n->relname, n->extra);
	}
	else
	{
		char		recv_clock[32];
		char		due_clock[32];
		const char *id = json_value(n->extra, "id");
		const char *payload = json_value(n->extra, "payload");
		const char *payload_end = payload ? strstr(payload, ", \"attempt\"") : NULL;

		format_clock(received, recv_clock, sizeof(recv_clock));
		if (has_run_at && id != NULL)
		{
			format_clock(run_at, due_clock, sizeof(due_clock));
			printf("%s  received task %-6lld on %-14s due %s  late by %6.1f ms  payload %.*s\n",
				   recv_clock, atoll(id), n->relname, due_clock,
				   (received - run_at) / 1000.0,
				   payload_end ? (int) (payload_end - payload) : 0,
				   payload ? payload : "");
		}
		else
			printf("%s  %s: %s\n", recv_clock, n->relname, n->extra);
	}
	fflush(stdout);
}

static void
acknowledge(PGconn *conn, const char *payload)
{
	const char *id = json_value(payload, "id");
	char		id_text[32];
	const char *params[1];
	PGresult   *res;

	if (id == NULL || !isdigit((unsigned char) *id))
		return;
	snprintf(id_text, sizeof(id_text), "%lld", atoll(id));
	params[0] = id_text;
	res = PQexecParams(conn, "SELECT sched.ack($1::bigint)", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		fprintf(stderr, "dslisten: ack of %s failed: %s", id_text, PQerrorMessage(conn));
	PQclear(res);
}

/* The ids waiting for sched.ack_many (--ack-batch), as "1,2,3". */
static char *batch_ids = NULL;
static size_t batch_len = 0;
static size_t batch_cap = 0;
static long batch_count = 0;

static void
collect_ack(const char *payload)
{
	const char *id = json_value(payload, "id");
	char		id_text[32];
	int			len;

	if (id == NULL || !isdigit((unsigned char) *id))
		return;
	len = snprintf(id_text, sizeof(id_text), "%s%lld", batch_len > 0 ? "," : "", atoll(id));
	if (batch_len + len + 1 > batch_cap)
	{
		batch_cap = (batch_cap + len + 1) * 2;
		batch_ids = realloc(batch_ids, batch_cap);
		if (batch_ids == NULL)
		{
			fprintf(stderr, "dslisten: out of memory\n");
			exit(1);
		}
	}
	memcpy(batch_ids + batch_len, id_text, len + 1);
	batch_len += len;
	batch_count++;
}

/* Acknowledge the collected ids with one sched.ack_many, if there are any. */
static void
acknowledge_batch(PGconn *conn)
{
	char	   *array;
	const char *params[1];
	PGresult   *res;

	if (batch_count == 0)
		return;
	array = malloc(batch_len + 3);
	if (array == NULL)
	{
		fprintf(stderr, "dslisten: out of memory\n");
		exit(1);
	}
	snprintf(array, batch_len + 3, "{%s}", batch_ids);
	params[0] = array;
	res = PQexecParams(conn, "SELECT sched.ack_many($1::bigint[])", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		fprintf(stderr, "dslisten: ack_many of %ld ids failed: %s", batch_count, PQerrorMessage(conn));
	PQclear(res);
	free(array);
	batch_len = 0;
	batch_ids[0] = '\0';
	batch_count = 0;
}

static void
usage(void)
{
	fprintf(stderr, "usage: dslisten [--ack | --ack-batch N] [--pretty] [--count N] [--timeout SECONDS] CONNINFO CHANNEL [CHANNEL ...]\n");
	exit(1);
}

int
main(int argc, char **argv)
{
	bool		ack = false;
	long		ack_batch = 0;
	bool		pretty = false;
	long		count = -1;
	double		timeout_s = -1;
	long		received = 0;
	usec_t		deadline;
	PGconn	   *conn;
	int			i;

	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++)
	{
		if (strcmp(argv[i], "--ack") == 0)
			ack = true;
		else if (strcmp(argv[i], "--ack-batch") == 0 && i + 1 < argc)
		{
			ack_batch = atol(argv[++i]);
			if (ack_batch < 1)
				usage();
		}
		else if (strcmp(argv[i], "--pretty") == 0)
			pretty = true;
		else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc)
			count = atol(argv[++i]);
		else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
			timeout_s = atof(argv[++i]);
		else
			usage();
	}
	if (argc - i < 2)
		usage();

	conn = PQconnectdb(argv[i]);
	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "dslisten: %s", PQerrorMessage(conn));
		return 1;
	}
	for (i++; i < argc; i++)
	{
		char	   *quoted = PQescapeIdentifier(conn, argv[i], strlen(argv[i]));
		char		sql[256];
		PGresult   *res;

		snprintf(sql, sizeof(sql), "LISTEN %s", quoted);
		PQfreemem(quoted);
		res = PQexec(conn, sql);
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			fprintf(stderr, "dslisten: %s", PQerrorMessage(conn));
			return 1;
		}
		PQclear(res);
	}
	printf("listening\n");
	fflush(stdout);

	deadline = timeout_s >= 0 ? now_us() + (usec_t) (timeout_s * 1e6) : -1;
	while (count < 0 || received < count)
	{
		bool		acked = false;
		int			sock = PQsocket(conn);
		fd_set		input;
		struct timeval tv;
		struct timeval *tvp = NULL;
		PGnotify   *n;

		if (deadline >= 0)
		{
			usec_t		left = deadline - now_us();

			if (left <= 0)
				return 2;
			tv.tv_sec = left / 1000000;
			tv.tv_usec = left % 1000000;
			tvp = &tv;
		}
		FD_ZERO(&input);
		FD_SET(sock, &input);
		if (select(sock + 1, &input, NULL, NULL, tvp) < 0 && errno != EINTR)
		{
			perror("dslisten: select");
			return 1;
		}
		if (!PQconsumeInput(conn))
		{
			fprintf(stderr, "dslisten: %s", PQerrorMessage(conn));
			return 1;
		}
		do
		{
			while ((n = PQnotifies(conn)) != NULL)
			{
				usec_t		at = now_us();

				print_notification(n, at, pretty);
				if (ack)
					acknowledge(conn, n->extra);
				else if (ack_batch > 0)
				{
					collect_ack(n->extra);
					if (batch_count >= ack_batch)
						acknowledge_batch(conn);
				}
				PQfreemem(n);
				received++;
			}

			/*
			 * Nothing more waiting: the batch goes as it is.  What arrives
			 * meanwhile libpq reads with the answer and queues, off the
			 * socket, so look at its queue again before waiting on the
			 * socket.
			 */
			acked = batch_count > 0;
			acknowledge_batch(conn);
		} while (acked);
	}
	PQfinish(conn);
	return 0;
}
