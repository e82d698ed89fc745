/*-------------------------------------------------------------------------
 *
 * message.c
 *		The NOTIFY payloads delaysched sends: the JSON message of a delivered
 *		task of a notify type, and the announcement that a pull type has
 *		tasks to claim.  The scanner's tick builds them here in C for every
 *		delivery; sched._message() and sched._announcement() expose the same
 *		builders to SQL (lease expiry, sched.claim's announcements, tests).
 *
 * The text is what json_build_object() would give, so that a listener sees
 * the same bytes whichever path delivered a task:
 *
 *	{"id" : 42, "biz_type" : "orders", "run_at" : "2026-11-21T10:00:00+00:00",
 *	 "payload" : {...}, "attempt" : 1}
 *
 * and a firing of a recurring schedule ends with the schedule's name, a task
 * added with a key with its key (the schedule first):
 *
 *	 ..., "attempt" : 1, "schedule" : "nightly_report"}
 *	 ..., "attempt" : 1, "key" : "tenant-42"}
 *
 * A NOTIFY payload must be shorter than 8000 bytes (BLCKSZ 8192); one that would
 * not fit goes with "payload_omitted" : true instead of its payload, and the
 * walk and the drain record it in the task's last_error.
 *
 * IDENTIFICATION
 *	  src/base/message.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "base/base.h"

/*
 * NOTIFY refuses a payload of NOTIFY_PAYLOAD_MAX_LENGTH bytes or more.
 * async.c defines that limit but no header exports it; it is made of build
 * constants, the same here, so that a server built with another block size
 * is followed.
 */
#ifndef NOTIFY_PAYLOAD_MAX_LENGTH
#define NOTIFY_PAYLOAD_MAX_LENGTH	(BLCKSZ - NAMEDATALEN - 128)
#endif
#define LARGEST_NOTIFY_PAYLOAD	(NOTIFY_PAYLOAD_MAX_LENGTH - 1)

PG_FUNCTION_INFO_V1(delaysched_message);
PG_FUNCTION_INFO_V1(delaysched_announcement);

/*
 * Append a task's message to buf; a NULL payload says "payload_omitted", a
 * NULL schedule that the task is not a firing, a NULL key that it has none.
 * The NOTIFY messages and the
 * body of an HTTP request are this text.
 */
void
delaysched_append_message(StringInfo buf, int64 id, const char *biz_type, TimestampTz run_at,
						  Jsonb *payload, int32 attempt, const char *schedule, const char *key)
{
	char		when[MAXDATELEN + 1];

	appendStringInfo(buf, "{\"id\" : " INT64_FORMAT ", \"biz_type\" : ", id);
	escape_json(buf, biz_type);
	appendStringInfoString(buf, ", \"run_at\" : \"");
	appendStringInfoString(buf, JsonEncodeDateTime(when, TimestampTzGetDatum(run_at),
												   TIMESTAMPTZOID, NULL));
	if (payload != NULL)
	{
		appendStringInfoString(buf, "\", \"payload\" : ");
		(void) JsonbToCString(buf, &payload->root, VARSIZE(payload));
		appendStringInfo(buf, ", \"attempt\" : %d", attempt);
	}
	else
		appendStringInfo(buf, "\", \"payload_omitted\" : true, \"attempt\" : %d", attempt);
	if (schedule != NULL)
	{
		appendStringInfoString(buf, ", \"schedule\" : ");
		escape_json(buf, schedule);
	}
	if (key != NULL)
	{
		appendStringInfoString(buf, ", \"key\" : ");
		escape_json(buf, key);
	}
	appendStringInfoChar(buf, '}');
}

/*
 * The message a LISTENer of a notify type receives for one delivery, in
 * the current memory context.
 */
char *
delaysched_delivery_message(int64 id, const char *biz_type, TimestampTz run_at,
							Jsonb *payload, int32 attempt, const char *schedule,
							const char *key, int *omitted_bytes)
{
	StringInfoData buf;

	initStringInfo(&buf);
	delaysched_append_message(&buf, id, biz_type, run_at, payload, attempt, schedule, key);
	if (omitted_bytes)
		*omitted_bytes = 0;
	if (buf.len > LARGEST_NOTIFY_PAYLOAD)
	{
		if (omitted_bytes)
			*omitted_bytes = buf.len;
		resetStringInfo(&buf);
		delaysched_append_message(&buf, id, biz_type, run_at, NULL, attempt, schedule, key);
	}
	return buf.data;
}

/*
 * A delivery went without its payload (omitted_bytes, the message it would
 * have made): say so in the task's last_error, with the stable code
 * payload_omitted, unless an earlier failure is there to keep.  Called by
 * the walk and the drain, which are connected to SPI; rare, so one
 * statement for each, planned once.
 */
void
delaysched_note_payload_omitted(int64 id, int16 bucket, int omitted_bytes)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[3] = {INT8OID, INT2OID, TEXTOID};
	Datum		values[3];

	if (plan == NULL)
		plan = delaysched_prepare_kept("UPDATE sched.task t SET last_error = $3"
									   " WHERE t.id = $1 AND t.bucket = $2 AND t.last_error IS NULL",
									   3, types);
	values[0] = Int64GetDatum(id);
	values[1] = Int16GetDatum(bucket);
	values[2] = CStringGetTextDatum(psprintf("payload_omitted: the message would have been %d bytes, more than a"
											 " NOTIFY carries; read the payload from sched.tasks",
											 omitted_bytes));
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record an omitted payload");
}

/*
 * The announcement on a pull type's channel that tasks are ready to claim.
 */
char *
delaysched_ready_message(const char *biz_type)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"biz_type\" : ");
	escape_json(&buf, biz_type);
	appendStringInfoString(&buf, ", \"ready\" : true}");
	return buf.data;
}

/*
 * sched._message(id bigint, biz_type text, run_at timestamptz, payload jsonb,
 *				  attempt int, schedule text, key text) RETURNS text
 *
 * NULL if any argument but the schedule and the key is NULL.  A 0.1
 * schema, before ALTER EXTENSION UPDATE, declares it strict and without
 * the schedule; a 0.2 schema without the key.
 */
Datum
delaysched_message(PG_FUNCTION_ARGS)
{
	char	   *message;

	for (int i = 0; i < 5; i++)
		if (PG_ARGISNULL(i))
			PG_RETURN_NULL();
	message = delaysched_delivery_message(PG_GETARG_INT64(0),
										  text_to_cstring(PG_GETARG_TEXT_PP(1)),
										  PG_GETARG_TIMESTAMPTZ(2),
										  PG_GETARG_JSONB_P(3),
										  PG_GETARG_INT32(4),
										  PG_NARGS() > 5 && !PG_ARGISNULL(5) ?
										  text_to_cstring(PG_GETARG_TEXT_PP(5)) : NULL,
										  PG_NARGS() > 6 && !PG_ARGISNULL(6) ?
										  text_to_cstring(PG_GETARG_TEXT_PP(6)) : NULL, NULL);
	PG_RETURN_TEXT_P(cstring_to_text(message));
}

/*
 * sched._announcement(biz_type text) RETURNS text
 */
Datum
delaysched_announcement(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(delaysched_ready_message(text_to_cstring(PG_GETARG_TEXT_PP(0)))));
}
