/*-------------------------------------------------------------------------
 *
 * sql_command.c
 *		sched._check_command(command, hint): refuse, when a job is added or
 *		a schedule defined, a command that could never run, so that the
 *		mistake is the caller's error now and not a dead job later.
 *
 * A command is refused if it is NULL (with the caller's hint), larger than
 * delaysched.max_payload_size, not parsable by PostgreSQL's own parser,
 * empty (nothing but white space, comments or semicolons), or holding a
 * transaction control statement (BEGIN, COMMIT, SAVEPOINT ...): a job runs
 * in a transaction of its own, which commits together with its done mark.
 * Parsing is the raw parse only: names are looked up when the job runs, as
 * the job's role, since a table may be created between now and then.
 *
 * IDENTIFICATION
 *	  src/sql/sql_command.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "tcop/utility.h"
#include "utils/builtins.h"

#include "compat.h"
#include "base/guc.h"
#include "sql/sql.h"

PG_FUNCTION_INFO_V1(delaysched_check_command);

/*
 * The statements of command, as PostgreSQL's raw parser reads them; a
 * syntax error is raised again as the command's, with its position in the
 * command as a detail (the error's own position would point into the
 * caller's query).
 */
static List *
parse_command(const char *command, const char *hint)
{
	MemoryContext caller = CurrentMemoryContext;
	List	   *statements = NIL;

	PG_TRY();
	{
		statements = raw_parser(command, RAW_PARSE_DEFAULT);
	}
	PG_CATCH();
	{
		ErrorData  *error;

		MemoryContextSwitchTo(caller);
		error = CopyErrorData();
		FlushErrorState();
		ereport(ERROR,
				(errcode(error->sqlerrcode),
				 errmsg("command is not valid SQL: %s", error->message),
				 error->cursorpos > 0 ?
				 errdetail("At character %d of the command.", error->cursorpos) : 0,
				 hint != NULL ? errhint("%s", hint) : 0));
	}
	PG_END_TRY();
	return statements;
}

/*
 * sched._check_command(command text, hint text) RETURNS void
 */
Datum
delaysched_check_command(PG_FUNCTION_ARGS)
{
	const char *hint = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	text	   *command;
	int64		bytes;
	List	   *statements;
	ListCell   *lc;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("command must not be null"),
				 hint != NULL ? errhint("%s", hint) : 0));
	command = PG_GETARG_TEXT_PP(0);
	bytes = VARSIZE_ANY_EXHDR(command);
	if (bytes > (int64) delaysched_max_payload_kb * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("command is too large"),
				 errdetail("The command is " INT64_FORMAT " bytes; delaysched.max_payload_size is %d kB.",
						   bytes, delaysched_max_payload_kb),
				 errhint("Put the work in a function or procedure, and run a call of it.")));

	statements = parse_command(text_to_cstring(command), hint);
	if (statements == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("command must not be empty"),
				 hint != NULL ? errhint("%s", hint) : 0));
	foreach(lc, statements)
	{
		RawStmt    *statement = lfirst_node(RawStmt, lc);

		if (IsA(statement->stmt, TransactionStmt))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("command must not control transactions"),
					 errdetail("It holds %s.",
							   GetCommandTagName(CreateCommandTag(statement->stmt))),
					 errhint("A job runs in a transaction of its own, which commits with its done mark.")));
	}
	PG_RETURN_VOID();
}
