/*-------------------------------------------------------------------------
 *
 * delaysched_router.c
 *		The router's own small library: exchanges with the nodes over libpq
 *		that end by their deadline whatever the nodes do.
 *		  sched._node_query(conninfo, query, params, timeout_ms)  one node
 *		  sched._node_queries(conninfos, queries, timeout_ms)     several at once
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
 * the first row of the last result, or NULL.  With parameters, one
 * statement, and their values are not in its text (nor in the node's log
 * of it).  A query that starts a COPY fails.  A kept connection found dead
 * when it is used gets one more try on a new one, within the deadline.
 * (libpq looks up a host name when the call starts, synchronously: the
 * lookups of a batch run one after another, uninterruptibly, and their
 * time counts against the deadline.  Give the nodes' addresses, or a
 * resolver that answers at once.)  The deadline runs on the monotonic
 * clock.  Connections unused for five minutes are closed when the next
 * call looks for one.
 *
 * IDENTIFICATION
 *	  src/router/delaysched_router.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "libpq-fe.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "storage/fd.h"
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
	instr_time	last_used;
	struct NodeConnection *next;
} NodeConnection;

/* A kept connection unused this long is closed (a node removed, say). */
#define IDLE_CONNECTION_MS	(5 * 60 * 1000)

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
	int			nparams;		/* parameters of the query ($1, ...), as text */
	const char *const *params;
	char	   *key;
	CallState	state;
	bool		reused;			/* on a kept connection */
	bool		retried;		/* on a new one, after the kept one had died */
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

/*
 * Every connection is counted against the backend's file descriptors, as
 * dblink and postgres_fdw do: close_conn gives back what open_conn took.
 */
static PGconn *
open_conn(const char *const *keywords, const char *const *values)
{
	PGconn	   *conn;

	if (!AcquireExternalFD())
		return NULL;
	conn = PQconnectStartParams(keywords, values, 1);
	if (conn == NULL)
	{
		ReleaseExternalFD();
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	}
	return conn;
}

static void
close_conn(PGconn *conn)
{
	PQfinish(conn);
	ReleaseExternalFD();
}

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
		close_conn(node->conn);
	pfree(node->key);
	pfree(node);
}

/* A kept connection for key that is open, idle and not in use, or NULL. */
static NodeConnection *
take_kept_connection(const char *key)
{
	NodeConnection *node = connections;
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	while (node != NULL)
	{
		NodeConnection *next = node->next;
		instr_time	idle = now;

		INSTR_TIME_SUBTRACT(idle, node->last_used);
		if (!node->busy && INSTR_TIME_GET_MILLISEC(idle) > IDLE_CONNECTION_MS)
			drop_connection(node);
		else if (!node->busy && strcmp(node->key, key) == 0)
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

static void start_call(NodeCall *call);

/*
 * The call failed: say why, and let its connection go.  (fail() for a
 * failure of the connection, which may be retried; fail_call(..., false)
 * for the deadline, which may not.)  A kept connection
 * that turns out to have died while idle (the node restarted, its
 * idle_session_timeout) gets one more try on a new connection, within the
 * same deadline, unless the node had begun to answer.
 */
static void
fail_call(NodeCall *call, int code, char *failure, bool may_retry)
{
	bool		retry = may_retry && call->reused && !call->retried &&
		code == ERRCODE_CONNECTION_FAILURE && call->answer == NULL && call->remote_message == NULL;

	if (call->kept != NULL)
		drop_connection(call->kept);
	else if (call->conn != NULL)
		close_conn(call->conn);
	call->kept = NULL;
	call->conn = NULL;
	if (retry)
	{
		call->retried = true;
		call->reused = false;
		call->state = CALL_NEW;
		start_call(call);
		return;
	}
	call->failure = failure;
	call->failure_code = code;
	call->state = CALL_DONE;
}

static void
fail(NodeCall *call, int code, char *failure)
{
	fail_call(call, code, failure, true);
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
		case PGRES_COPY_IN:
		case PGRES_COPY_OUT:
		case PGRES_COPY_BOTH:
			/* Never asked for; the connection cannot go on (see advance). */
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

	if (call->nparams > 0 ?
		!PQsendQueryParams(conn, call->query, call->nparams, NULL, call->params, NULL, NULL, 0) :
		!PQsendQuery(conn, call->query))
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

	call->kept = call->retried ? NULL : take_kept_connection(call->key);
	if (call->kept != NULL)
	{
		call->reused = true;
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

	call->conn = open_conn(keywords, values);
	if (call->conn == NULL)
	{
		fail(call, ERRCODE_CONNECTION_FAILURE,
			 pstrdup("could not connect: too many open files (raise max_files_per_process)"));
		return;
	}
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
						 pstrdup("password is required: a role that is not a superuser must connect to a node with the password in its conninfo"));
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
				INSTR_TIME_SET_CURRENT(call->kept->last_used);
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
				ExecStatusType status;

				if (res == NULL)
				{
					call->kept->busy = false;
					INSTR_TIME_SET_CURRENT(call->kept->last_used);
					call->state = CALL_DONE;
					return;
				}
				status = PQresultStatus(res);
				take_result(call, res);
				if (status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH)
				{
					fail(call, ERRCODE_FEATURE_NOT_SUPPORTED, pstrdup("a node's query may not use COPY"));
					return;
				}
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

/* The milliseconds left of timeout_ms since start (the monotonic clock), at least 0. */
static long
ms_left(instr_time start, int timeout_ms)
{
	instr_time	now;
	double		elapsed;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	elapsed = INSTR_TIME_GET_MILLISEC(now);
	return elapsed >= timeout_ms ? 0 : (long) ceil(timeout_ms - elapsed);
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
			close_conn(calls[i].conn);
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
	instr_time	start;

	INSTR_TIME_SET_CURRENT(start);
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
			timeout = ms_left(start, timeout_ms);
			if (timeout <= 0)
			{
				for (int i = 0; i < ncalls; i++)
					if (calls[i].state != CALL_DONE)
						fail_call(&calls[i], ERRCODE_CONNECTION_FAILURE,
								  calls[i].state == CALL_CONNECTING ?
								  psprintf("could not connect within %d ms", timeout_ms) :
								  psprintf("no answer within %d ms", timeout_ms),
								  false);
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
	/* (The key names the current role even when the conninfo names a user.) */
	call->key = psprintf("%s\n%s", conninfo, call->role);
	for (PQconninfoOption *o = options; o->keyword != NULL; o++)
	{
		if (strcmp(o->keyword, "user") == 0 && o->val != NULL && o->val[0] != '\0')
			call->role = NULL;
		if (strcmp(o->keyword, "password") == 0 && (o->val == NULL || o->val[0] == '\0') && !superuser())
		{
			/* As dblink: not a password of the server's own ~/.pgpass. */
			call->failure = pstrdup("password is required: a role that is not a superuser must connect to a node with the password in its conninfo");
			call->failure_code = ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED;
			call->state = CALL_DONE;
		}
	}
	PQconninfoFree(options);
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
 * sched._node_query(conninfo text, query text, params text[], timeout_ms int)
 *   RETURNS text
 *
 * params (NULL or empty: none) are the query's $1, $2, ... as text: one
 * statement then, and the values are not part of its text (nor of the
 * node's log of it).  A node's error is raised with its message and
 * SQLSTATE; a failure to reach the node, or the deadline, as
 * connection_failure.  Not STRICT: params may be NULL.
 */
Datum
delaysched_node_query(PG_FUNCTION_ARGS)
{
	NodeCall	call;
	int			timeout_ms;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(3))
		PG_RETURN_NULL();
	timeout_ms = PG_GETARG_INT32(3);
	check_timeout(timeout_ms);
	prepare_call(&call, text_to_cstring(PG_GETARG_TEXT_PP(0)), text_to_cstring(PG_GETARG_TEXT_PP(1)));
	if (!PG_ARGISNULL(2))
	{
		Datum	   *values;
		bool	   *nulls;
		int			n;
		char	  **params;

		deconstruct_array(PG_GETARG_ARRAYTYPE_P(2), TEXTOID, -1, false, TYPALIGN_INT, &values, &nulls, &n);
		params = palloc0(sizeof(char *) * Max(n, 1));
		for (int i = 0; i < n; i++)
			params[i] = nulls[i] ? NULL : TextDatumGetCString(values[i]);
		call.nparams = n;
		call.params = (const char *const *) params;
	}
	run_calls(&call, 1, timeout_ms);
	if (call.failure != NULL)
		ereport(ERROR, (errcode(call.failure_code), errmsg("%s", call.failure)));
	if (call.remote_message != NULL)
	{
		/*
		 * The node's own SQLSTATE, unless it is one plpgsql's WHEN OTHERS
		 * does not catch (a statement_timeout or cancel there, an assertion):
		 * the caller's handler must see a node's failure as one.
		 */
		int			code = call.remote_code;

		if (code == ERRCODE_QUERY_CANCELED || code == ERRCODE_ASSERT_FAILURE)
			code = ERRCODE_CONNECTION_FAILURE;
		ereport(ERROR,
				(errcode(code),
				 errmsg("%s", call.remote_message),
				 call.remote_detail ? errdetail("%s", call.remote_detail) : 0,
				 call.remote_hint ? errhint("%s", call.remote_hint) : 0));
	}
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
