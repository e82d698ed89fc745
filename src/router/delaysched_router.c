/*-------------------------------------------------------------------------
 *
 * delaysched_router.c
 *		The router's own small library: exchanges with the nodes over libpq
 *		that end by their deadline whatever the nodes do.
 *		  sched._node_query(conninfo, query, timeout_ms)       one node
 *		  sched._node_queries(conninfos, queries, timeout_ms)  several at once
 *
 * Why not PL/Proxy.  The rounds of a router that follows its nodes
 * (sched.follow_nodes, doc/scale-out.md) must reach every node that
 * answers before the leases run out, even while another node hangs: a host
 * whose packets are dropped, or a server stopped (SIGSTOP) whose kernel
 * still accepts connections.  PL/Proxy connects with libpq's nonblocking
 * calls, under which libpq ignores connect_timeout, and takes no connect
 * timeout of its own; its query_timeout covers a query already sent, and
 * cancelling it sends a blocking PQcancel to the hung node.  Here every
 * wait is on the sockets and the backend's latch with the deadline left,
 * and a node that is late is dropped (PQfinish closes the socket), never
 * cancelled.  The nodes of one call are asked at once, so a round takes
 * the longest exchange, not their sum.
 *
 * Why a library of its own.  The delaysched library refuses to load unless
 * it is in shared_preload_libraries, and CREATE FUNCTION ... LANGUAGE c loads
 * the library it names: a router's server needs the preload only to follow
 * its nodes (the follower is a worker of that library), not to have
 * delaysched_router installed.
 *
 * Connections are kept between calls, per conninfo and role, as PL/Proxy
 * keeps its own, and dropped after any failure.  As PL/Proxy does, a
 * conninfo without a user connects as the current role.  As dblink does, a
 * role that is not a superuser must have used a password.
 *
 * A query may hold several statements; they run in one transaction on the
 * node (its implicit transaction), and the answer is the first column of
 * the first row of the last result, or NULL.  (The deadline does not cover
 * a host name's lookup, which libpq makes before it connects: give the
 * nodes' addresses, or a resolver that answers at once.)
 *
 * IDENTIFICATION
 *	  src/router/delaysched_router.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq-fe.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "compat.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(delaysched_node_query);
PG_FUNCTION_INFO_V1(delaysched_node_queries);

/*
 * A connection kept between calls.  "busy" while a call of the moment
 * uses it: two calls to one node in one batch take two connections.
 */
typedef struct NodeConnection
{
	char	   *key;			/* conninfo, a newline, the role */
	PGconn	   *conn;
	bool		busy;
	struct NodeConnection *next;
} NodeConnection;

static NodeConnection *connections = NULL;

typedef enum CallState
{
	CALL_NEW,
	CALL_CONNECTING,
	CALL_SENDING,
	CALL_READING,
	CALL_DONE
} CallState;

/* One exchange with a node, and what it found. */
typedef struct NodeCall
{
	const char *conninfo;
	const char *role;			/* NULL: the conninfo names the user */
	const char *query;
	char	   *key;
	CallState	state;
	PGconn	   *conn;			/* while connecting: not kept yet */
	NodeConnection *kept;		/* once connected */
	PostgresPollingStatusType polling;	/* while connecting */
	char	   *answer;			/* the last result's first value, or NULL */
	char	   *failure;		/* could not reach the node, or not by the deadline */
	int			failure_code;
	char	   *remote_message; /* the node's own error */
	char	   *remote_detail;
	char	   *remote_hint;
	int			remote_code;
} NodeCall;

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

/* A kept connection for key that is open, idle and not in use, or NULL. */
static NodeConnection *
take_kept_connection(const char *key)
{
	NodeConnection *node = connections;

	while (node != NULL)
	{
		NodeConnection *next = node->next;

		if (!node->busy && strcmp(node->key, key) == 0)
		{
			if (PQstatus(node->conn) == CONNECTION_OK && PQtransactionStatus(node->conn) == PQTRANS_IDLE)
			{
				node->busy = true;
				return node;
			}
			drop_connection(node);
		}
		node = next;
	}
	return NULL;
}

/* A copy of libpq's message, without its trailing newline. */
static char *
trimmed(const char *message)
{
	char	   *copy = pstrdup(message);
	int			len = strlen(copy);

	while (len > 0 && copy[len - 1] == '\n')
		copy[--len] = '\0';
	return copy;
}

/* The libpq error of conn. */
static char *
conn_error(PGconn *conn)
{
	return trimmed(PQerrorMessage(conn));
}

/* The call failed: say why, and let its connection go. */
static void
fail(NodeCall *call, int code, char *failure)
{
	call->failure = failure;
	call->failure_code = code;
	if (call->kept != NULL)
		drop_connection(call->kept);
	else if (call->conn != NULL)
		PQfinish(call->conn);
	call->kept = NULL;
	call->conn = NULL;
	call->state = CALL_DONE;
}

/* Keep what res says in call, and clear it. */
static void
take_result(NodeCall *call, PGresult *res)
{
	switch (PQresultStatus(res))
	{
		case PGRES_TUPLES_OK:
			call->answer = (PQntuples(res) > 0 && PQnfields(res) > 0 && !PQgetisnull(res, 0, 0)) ?
				pstrdup(PQgetvalue(res, 0, 0)) : NULL;
			break;
		case PGRES_COMMAND_OK:
		case PGRES_EMPTY_QUERY:
			call->answer = NULL;
			break;
		default:
			if (call->remote_message == NULL)
			{
				const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
				const char *message = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
				const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
				const char *hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);

				call->remote_message = pstrdup(message ? message : PQresultErrorMessage(res));
				call->remote_detail = detail ? pstrdup(detail) : NULL;
				call->remote_hint = hint ? pstrdup(hint) : NULL;
				call->remote_code = (state != NULL && strlen(state) == 5) ?
					MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]) :
					ERRCODE_CONNECTION_FAILURE;
			}
			break;
	}
	PQclear(res);
}

/* Connected (or a kept connection taken): send the query. */
static void
send_query(NodeCall *call)
{
	PGconn	   *conn = call->kept->conn;

	if (!PQsendQuery(conn, call->query))
	{
		fail(call, ERRCODE_CONNECTION_FAILURE, psprintf("could not send the query: %s", conn_error(conn)));
		return;
	}
	call->state = CALL_SENDING;
}

/* Start the call: a kept connection, or a new one. */
static void
start_call(NodeCall *call)
{
	const char *keywords[4];
	const char *values[4];
	int			n = 0;

	call->kept = take_kept_connection(call->key);
	if (call->kept != NULL)
	{
		send_query(call);
		return;
	}

	keywords[n] = "dbname";
	values[n++] = call->conninfo;
	if (call->role != NULL)
	{
		keywords[n] = "user";
		values[n++] = call->role;
	}
	keywords[n] = "fallback_application_name";
	values[n++] = "delaysched router";
	keywords[n] = NULL;
	values[n] = NULL;

	call->conn = PQconnectStartParams(keywords, values, 1);
	if (call->conn == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	if (PQstatus(call->conn) == CONNECTION_BAD)
	{
		fail(call, ERRCODE_CONNECTION_FAILURE, psprintf("could not connect: %s", conn_error(call->conn)));
		return;
	}
	call->state = CALL_CONNECTING;
	call->polling = PGRES_POLLING_WRITING;
}

/* The call's socket is ready as it waited for: take the next step. */
static void
advance(NodeCall *call)
{
	switch (call->state)
	{
		case CALL_CONNECTING:
			call->polling = PQconnectPoll(call->conn);
			if (call->polling == PGRES_POLLING_FAILED)
				fail(call, ERRCODE_CONNECTION_FAILURE, psprintf("could not connect: %s", conn_error(call->conn)));
			else if (call->polling == PGRES_POLLING_OK)
			{
				if (!superuser() && !PQconnectionUsedPassword(call->conn))
				{
					fail(call, ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED,
						 pstrdup("password is required: a role that is not a superuser must connect to a node with a password"));
					return;
				}
				if (PQsetnonblocking(call->conn, 1) != 0)
				{
					fail(call, ERRCODE_CONNECTION_FAILURE, psprintf("could not connect: %s", conn_error(call->conn)));
					return;
				}
				call->kept = MemoryContextAllocZero(TopMemoryContext, sizeof(NodeConnection));
				call->kept->key = MemoryContextStrdup(TopMemoryContext, call->key);
				call->kept->conn = call->conn;
				call->kept->busy = true;
				call->kept->next = connections;
				connections = call->kept;
				call->conn = NULL;
				send_query(call);
			}
			break;
		case CALL_SENDING:
			{
				int			flushed;

				if (!PQconsumeInput(call->kept->conn))
				{
					fail(call, ERRCODE_CONNECTION_FAILURE,
						 psprintf("could not read the answer: %s", conn_error(call->kept->conn)));
					return;
				}
				flushed = PQflush(call->kept->conn);
				if (flushed < 0)
					fail(call, ERRCODE_CONNECTION_FAILURE,
						 psprintf("could not send the query: %s", conn_error(call->kept->conn)));
				else if (flushed == 0)
				{
					call->state = CALL_READING;
					advance(call);
				}
			}
			break;
		case CALL_READING:
			if (!PQconsumeInput(call->kept->conn))
			{
				fail(call, ERRCODE_CONNECTION_FAILURE,
					 psprintf("could not read the answer: %s", conn_error(call->kept->conn)));
				return;
			}
			while (!PQisBusy(call->kept->conn))
			{
				PGresult   *res = PQgetResult(call->kept->conn);

				if (res == NULL)
				{
					call->kept->busy = false;
					call->state = CALL_DONE;
					return;
				}
				take_result(call, res);
			}
			break;
		case CALL_NEW:
		case CALL_DONE:
			break;
	}
}

/* What the call waits for on its socket. */
static uint32
waits_for(NodeCall *call)
{
	switch (call->state)
	{
		case CALL_CONNECTING:
			return call->polling == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
		case CALL_SENDING:
			return WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE;
		case CALL_READING:
			return WL_SOCKET_READABLE;
		case CALL_NEW:
		case CALL_DONE:
			break;
	}
	return 0;
}

static pgsocket
socket_of(NodeCall *call)
{
	return PQsocket(call->state == CALL_CONNECTING ? call->conn : call->kept->conn);
}

/* The milliseconds left until deadline, at least 0. */
static long
ms_left(TimestampTz deadline)
{
	TimestampTz now = GetCurrentTimestamp();

	return now >= deadline ? 0 : (long) ((deadline - now + 999) / 1000);
}

/* One wait on every call's socket and the latch, up to the deadline. */
static void
wait_once(NodeCall *calls, int ncalls, long timeout)
{
	WaitEventSet *volatile set = delaysched_create_wait_event_set(ncalls + 2);
	WaitEvent  *occurred = palloc(sizeof(WaitEvent) * (ncalls + 2));
	int			nevents = 0;
	bool		latch_set = false;

	PG_TRY();
	{
		AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
		for (int i = 0; i < ncalls; i++)
			if (calls[i].state != CALL_DONE)
				AddWaitEventToSet(set, waits_for(&calls[i]), socket_of(&calls[i]), NULL, &calls[i]);
		nevents = WaitEventSetWait(set, timeout, occurred, ncalls + 2, PG_WAIT_EXTENSION);
	}
	PG_FINALLY();
	{
		FreeWaitEventSet(set);
	}
	PG_END_TRY();

	for (int e = 0; e < nevents; e++)
	{
		if (occurred[e].events & WL_LATCH_SET)
			latch_set = true;
		else if (occurred[e].user_data != NULL)
			advance((NodeCall *) occurred[e].user_data);
	}
	pfree(occurred);
	if (latch_set)
	{
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* Let every call that has not ended go: an error is leaving. */
static void
abandon_calls(NodeCall *calls, int ncalls)
{
	for (int i = 0; i < ncalls; i++)
	{
		if (calls[i].state == CALL_DONE)
			continue;
		if (calls[i].kept != NULL)
			drop_connection(calls[i].kept);
		else if (calls[i].conn != NULL)
			PQfinish(calls[i].conn);
		calls[i].kept = NULL;
		calls[i].conn = NULL;
		calls[i].state = CALL_DONE;
	}
}

/*
 * Run every call at once until each has ended or timeout_ms have passed.
 * Each call says what it found; only an interrupt (or out of memory)
 * raises, and then no connection of these calls is kept.
 */
static void
run_calls(NodeCall *calls, int ncalls, int timeout_ms)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

	PG_TRY();
	{
		for (int i = 0; i < ncalls; i++)
			if (calls[i].state == CALL_NEW)
				start_call(&calls[i]);
		for (;;)
		{
			bool		pending = false;
			long		timeout;

			for (int i = 0; i < ncalls; i++)
				pending |= calls[i].state != CALL_DONE;
			if (!pending)
				break;
			timeout = ms_left(deadline);
			if (timeout <= 0)
			{
				for (int i = 0; i < ncalls; i++)
					if (calls[i].state != CALL_DONE)
						fail(&calls[i], ERRCODE_CONNECTION_FAILURE,
							 calls[i].state == CALL_CONNECTING ?
							 psprintf("could not connect within %d ms", timeout_ms) :
							 psprintf("no answer within %d ms", timeout_ms));
				break;
			}
			wait_once(calls, ncalls, timeout);
		}
	}
	PG_CATCH();
	{
		abandon_calls(calls, ncalls);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/* Fill in a call to conninfo: its role (the current one, unless named) and key. */
static void
prepare_call(NodeCall *call, char *conninfo, char *query)
{
	PQconninfoOption *options;
	char	   *parse_error = NULL;

	memset(call, 0, sizeof(*call));
	call->conninfo = conninfo;
	call->query = query;
	options = PQconninfoParse(conninfo, &parse_error);
	if (options == NULL)
	{
		call->failure = psprintf("invalid conninfo for a node: %s",
								 trimmed(parse_error ? parse_error : "out of memory"));
		call->failure_code = ERRCODE_INVALID_PARAMETER_VALUE;
		call->state = CALL_DONE;
		if (parse_error)
			PQfreemem(parse_error);
		return;
	}
	call->role = GetUserNameFromId(GetUserId(), false);
	for (PQconninfoOption *o = options; o->keyword != NULL; o++)
		if (strcmp(o->keyword, "user") == 0 && o->val != NULL && o->val[0] != '\0')
			call->role = NULL;
	PQconninfoFree(options);
	call->key = psprintf("%s\n%s", conninfo, call->role ? call->role : "");
}

static void
check_timeout(int timeout_ms)
{
	if (timeout_ms <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout_ms must be positive")));
}

/* The call's error as one line of text, or NULL if it succeeded. */
static char *
call_error(NodeCall *call)
{
	if (call->failure != NULL)
		return call->failure;
	return call->remote_message;
}

/*
 * sched._node_query(conninfo text, query text, timeout_ms int) RETURNS text
 *
 * A node's error is raised with its message and SQLSTATE; a failure to
 * reach the node, or the deadline, as connection_failure.
 */
Datum
delaysched_node_query(PG_FUNCTION_ARGS)
{
	NodeCall	call;
	int			timeout_ms = PG_GETARG_INT32(2);

	check_timeout(timeout_ms);
	prepare_call(&call, text_to_cstring(PG_GETARG_TEXT_PP(0)), text_to_cstring(PG_GETARG_TEXT_PP(1)));
	run_calls(&call, 1, timeout_ms);
	if (call.failure != NULL)
		ereport(ERROR, (errcode(call.failure_code), errmsg("%s", call.failure)));
	if (call.remote_message != NULL)
		ereport(ERROR,
				(errcode(call.remote_code),
				 errmsg("%s", call.remote_message),
				 call.remote_detail ? errdetail("%s", call.remote_detail) : 0,
				 call.remote_hint ? errhint("%s", call.remote_hint) : 0));
	if (call.answer == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(call.answer));
}

/*
 * sched._node_queries(conninfos text[], queries text[], timeout_ms int)
 *   RETURNS TABLE (ord int, answer text, error text)
 *
 * The calls at once, a row each in their order (ord from 1): the answer,
 * or the error (a node's own message, or why it was not reached).
 */
Datum
delaysched_node_queries(PG_FUNCTION_ARGS)
{
	ArrayType  *conninfos = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *queries = PG_GETARG_ARRAYTYPE_P(1);
	int			timeout_ms = PG_GETARG_INT32(2);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum	   *conninfo_values;
	Datum	   *query_values;
	bool	   *conninfo_nulls;
	bool	   *query_nulls;
	int			nconninfos;
	int			nqueries;
	NodeCall   *calls;

	check_timeout(timeout_ms);
	deconstruct_array(conninfos, TEXTOID, -1, false, TYPALIGN_INT, &conninfo_values, &conninfo_nulls, &nconninfos);
	deconstruct_array(queries, TEXTOID, -1, false, TYPALIGN_INT, &query_values, &query_nulls, &nqueries);
	if (nconninfos != nqueries)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("conninfos and queries must have as many elements")));
	calls = palloc0(sizeof(NodeCall) * Max(nconninfos, 1));
	for (int i = 0; i < nconninfos; i++)
	{
		if (conninfo_nulls[i] || query_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("a conninfo or query is null")));
		prepare_call(&calls[i], TextDatumGetCString(conninfo_values[i]), TextDatumGetCString(query_values[i]));
	}
	run_calls(calls, nconninfos, timeout_ms);

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < nconninfos; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};
		char	   *error = call_error(&calls[i]);

		values[0] = Int32GetDatum(i + 1);
		if (error == NULL && calls[i].answer != NULL)
			values[1] = CStringGetTextDatum(calls[i].answer);
		else
			nulls[1] = true;
		if (error != NULL)
			values[2] = CStringGetTextDatum(error);
		else
			nulls[2] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
