/*-------------------------------------------------------------------------
 *
 * delaysched_router.c
 *		The router's own small library: sched._node_query(conninfo, query,
 *		timeout_ms), one exchange with a node over libpq that ends by its
 *		deadline whatever the node does.
 *
 * Why not PL/Proxy.  The rounds of a router that follows its nodes
 * (sched.follow_nodes, doc/scale-out.md) must reach every node that
 * answers before the leases run out, even while another node hangs: a host
 * whose packets are dropped, or a server stopped (SIGSTOP) whose kernel
 * still accepts connections.  PL/Proxy connects with libpq's nonblocking
 * calls, under which libpq ignores connect_timeout, and takes no connect
 * timeout of its own; its query_timeout covers a query already sent, and
 * cancelling it sends a blocking PQcancel to the hung node.  Here every
 * wait is on the socket and the backend's latch with the deadline left,
 * and a node that is late is dropped (PQfinish closes the socket), never
 * cancelled.
 *
 * Why a library of its own.  The delaysched library refuses to load unless
 * it is in shared_preload_libraries, and CREATE FUNCTION ... LANGUAGE c loads
 * the library it names: a router's server needs the preload only to follow
 * its nodes (the follower is a worker of that library), not to have
 * delaysched_router installed.
 *
 * Connections are kept between calls, one per conninfo and role, as
 * PL/Proxy keeps its own, and dropped after any failure.  As PL/Proxy
 * does, a conninfo without a user connects as the current role.  As dblink
 * does, a role that is not a superuser must have used a password.
 *
 * The query may hold several statements; they run in one transaction on
 * the node (its implicit transaction), and the answer is the first column
 * of the first row of the last result, or NULL.  A node's error is raised
 * with its message and SQLSTATE; a failure to reach the node, or the
 * deadline, as connection_failure.  (The deadline does not cover a host
 * name's lookup, which libpq makes before it connects: give the nodes'
 * addresses, or a resolver that answers at once.)
 *
 * IDENTIFICATION
 *	  src/router/delaysched_router.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq-fe.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(delaysched_node_query);

/* A connection kept between calls. */
typedef struct NodeConnection
{
	char	   *key;			/* conninfo, a newline, the role */
	PGconn	   *conn;
	struct NodeConnection *next;
} NodeConnection;

static NodeConnection *connections = NULL;

/* Forget a kept connection and close it. */
static void
drop_connection(NodeConnection *node)
{
	NodeConnection **p;

	for (p = &connections; *p != NULL; p = &(*p)->next)
	{
		if (*p == node)
		{
			*p = node->next;
			break;
		}
	}
	if (node->conn != NULL)
		PQfinish(node->conn);
	pfree(node->key);
	pfree(node);
}

/* The milliseconds left until deadline, at least 0. */
static long
ms_left(TimestampTz deadline)
{
	TimestampTz now = GetCurrentTimestamp();

	return now >= deadline ? 0 : (long) ((deadline - now + 999) / 1000);
}

/*
 * Wait until the connection's socket is ready as asked (WL_SOCKET_READABLE
 * and/or WRITEABLE), or the deadline: false at the deadline.  An interrupt
 * (a cancel, a SIGTERM) is raised from here.
 */
static bool
wait_socket(PGconn *conn, int events, TimestampTz deadline)
{
	for (;;)
	{
		long		timeout = ms_left(deadline);
		int			rc;

		if (timeout <= 0)
			return false;
		rc = WaitLatchOrSocket(MyLatch,
							   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH | events,
							   PQsocket(conn), timeout, PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		if (rc & events)
			return true;
	}
}

/* The libpq error of conn, without its trailing newline. */
static char *
conn_error(PGconn *conn)
{
	char	   *message = pstrdup(PQerrorMessage(conn));
	int			len = strlen(message);

	while (len > 0 && message[len - 1] == '\n')
		message[--len] = '\0';
	return message;
}

/*
 * Open a connection to conninfo as role by the deadline; NULL and *error
 * set if not.
 */
static PGconn *
connect_by(const char *conninfo, const char *role, TimestampTz deadline, int timeout_ms, char **error)
{
	const char *keywords[4];
	const char *values[4];
	int			n = 0;
	PGconn	   *conn;
	volatile PostgresPollingStatusType state = PGRES_POLLING_WRITING;

	keywords[n] = "dbname";
	values[n++] = conninfo;
	if (role != NULL)
	{
		keywords[n] = "user";
		values[n++] = role;
	}
	keywords[n] = "fallback_application_name";
	values[n++] = "delaysched router";
	keywords[n] = NULL;
	values[n] = NULL;

	conn = PQconnectStartParams(keywords, values, 1);
	if (conn == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	if (PQstatus(conn) == CONNECTION_BAD)
	{
		*error = psprintf("could not connect: %s", conn_error(conn));
		PQfinish(conn);
		return NULL;
	}
	PG_TRY();
	{
		while (state != PGRES_POLLING_OK && state != PGRES_POLLING_FAILED)
		{
			if (!wait_socket(conn, state == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE,
							 deadline))
				break;
			state = PQconnectPoll(conn);
		}
	}
	PG_CATCH();
	{
		PQfinish(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (state != PGRES_POLLING_OK)
	{
		*error = state == PGRES_POLLING_FAILED ?
			psprintf("could not connect: %s", conn_error(conn)) :
			psprintf("could not connect within %d ms", timeout_ms);
		PQfinish(conn);
		return NULL;
	}
	if (!superuser() && !PQconnectionUsedPassword(conn))
	{
		PQfinish(conn);
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("A role that is not a superuser must connect to a node with a password.")));
	}
	if (PQsetnonblocking(conn, 1) != 0)
	{
		*error = psprintf("could not connect: %s", conn_error(conn));
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

/* The kept connection for key, if it is open and idle. */
static NodeConnection *
kept_connection(const char *key)
{
	NodeConnection *volatile node;

	for (node = connections; node != NULL; node = node->next)
	{
		if (strcmp(node->key, key) != 0)
			continue;
		if (PQstatus(node->conn) == CONNECTION_OK && PQtransactionStatus(node->conn) == PQTRANS_IDLE)
			return node;
		drop_connection(node);
		return NULL;
	}
	return NULL;
}

/* What one exchange found. */
typedef struct Exchange
{
	char	   *answer;			/* the last result's first value, or NULL */
	char	   *failure;		/* could not reach the node, or not by the deadline */
	char	   *remote_message; /* the node's own error */
	char	   *remote_detail;
	char	   *remote_hint;
	int			remote_code;
} Exchange;

/* Keep what res says in *x, and clear it. */
static void
take_result(PGresult *res, Exchange *x)
{
	switch (PQresultStatus(res))
	{
		case PGRES_TUPLES_OK:
			x->answer = (PQntuples(res) > 0 && PQnfields(res) > 0 && !PQgetisnull(res, 0, 0)) ?
				pstrdup(PQgetvalue(res, 0, 0)) : NULL;
			break;
		case PGRES_COMMAND_OK:
		case PGRES_EMPTY_QUERY:
			x->answer = NULL;
			break;
		default:
			if (x->remote_message == NULL)
			{
				const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
				const char *message = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
				const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
				const char *hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);

				x->remote_message = pstrdup(message ? message : PQresultErrorMessage(res));
				x->remote_detail = detail ? pstrdup(detail) : NULL;
				x->remote_hint = hint ? pstrdup(hint) : NULL;
				x->remote_code = (state != NULL && strlen(state) == 5) ?
					MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]) :
					ERRCODE_CONNECTION_FAILURE;
			}
			break;
	}
	PQclear(res);
}

/*
 * Send query on conn and read every result by the deadline.  false (with
 * x->failure) if the connection broke or the deadline came.
 */
static bool
exchange(PGconn *conn, const char *query, TimestampTz deadline, int timeout_ms, Exchange *x)
{
	int			flushed;

	if (!PQsendQuery(conn, query))
	{
		x->failure = psprintf("could not send the query: %s", conn_error(conn));
		return false;
	}
	while ((flushed = PQflush(conn)) == 1)
	{
		if (!wait_socket(conn, WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE, deadline))
		{
			x->failure = psprintf("no answer within %d ms", timeout_ms);
			return false;
		}
		if (!PQconsumeInput(conn))
		{
			x->failure = psprintf("could not read the answer: %s", conn_error(conn));
			return false;
		}
	}
	if (flushed < 0)
	{
		x->failure = psprintf("could not send the query: %s", conn_error(conn));
		return false;
	}
	for (;;)
	{
		PGresult   *res;

		while (PQisBusy(conn))
		{
			if (!wait_socket(conn, WL_SOCKET_READABLE, deadline))
			{
				x->failure = psprintf("no answer within %d ms", timeout_ms);
				return false;
			}
			if (!PQconsumeInput(conn))
			{
				x->failure = psprintf("could not read the answer: %s", conn_error(conn));
				return false;
			}
		}
		res = PQgetResult(conn);
		if (res == NULL)
			return true;
		take_result(res, x);
	}
}

/*
 * sched._node_query(conninfo text, query text, timeout_ms int) RETURNS text
 */
Datum
delaysched_node_query(PG_FUNCTION_ARGS)
{
	char	   *conninfo = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *query = text_to_cstring(PG_GETARG_TEXT_PP(1));
	int			timeout_ms = PG_GETARG_INT32(2);
	TimestampTz deadline;
	PQconninfoOption *options;
	char	   *parse_error = NULL;
	const char *role = NULL;
	char	   *key;
	NodeConnection *volatile node;
	Exchange	x;
	volatile bool done = false;

	if (timeout_ms <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout_ms must be positive")));
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

	/* A conninfo without a user connects as the current role (as PL/Proxy). */
	options = PQconninfoParse(conninfo, &parse_error);
	if (options == NULL)
	{
		char	   *message = parse_error ? pstrdup(parse_error) : pstrdup("out of memory");

		if (parse_error)
			PQfreemem(parse_error);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid conninfo for a node: %s", message)));
	}
	role = GetUserNameFromId(GetUserId(), false);
	for (PQconninfoOption *o = options; o->keyword != NULL; o++)
		if (strcmp(o->keyword, "user") == 0 && o->val != NULL && o->val[0] != '\0')
			role = NULL;
	PQconninfoFree(options);
	key = psprintf("%s\n%s", conninfo, role ? role : "");

	node = kept_connection(key);
	if (node == NULL)
	{
		char	   *error = NULL;
		PGconn	   *conn = connect_by(conninfo, role, deadline, timeout_ms, &error);

		if (conn == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("%s", error)));
		node = MemoryContextAllocZero(TopMemoryContext, sizeof(NodeConnection));
		node->key = MemoryContextStrdup(TopMemoryContext, key);
		node->conn = conn;
		node->next = connections;
		connections = node;
	}

	memset(&x, 0, sizeof(x));
	PG_TRY();
	{
		done = exchange(node->conn, query, deadline, timeout_ms, &x);
	}
	PG_CATCH();
	{
		/* Interrupted: the connection is in the middle of an exchange. */
		drop_connection(node);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (!done)
	{
		drop_connection(node);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("%s", x.failure)));
	}
	if (x.remote_message != NULL)
		ereport(ERROR,
				(errcode(x.remote_code),
				 errmsg("%s", x.remote_message),
				 x.remote_detail ? errdetail("%s", x.remote_detail) : 0,
				 x.remote_hint ? errhint("%s", x.remote_hint) : 0));
	if (x.answer == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(x.answer));
}
