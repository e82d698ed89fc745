/*-------------------------------------------------------------------------
 *
 * schedule_sql.c
 *		The SQL functions of the schedule rule engine:
 *
 *	 sched._check_schedule(schedule, time_zone)			the rule's kind
 *	 sched._schedule_next(schedule, time_zone, anchor, after)
 *														the next firing
 *	 sched._schedule_span(schedule, time_zone, anchor, from_at, to_at)
 *														firings in a span
 *	 sched._next_runs(schedule, time_zone, after, n, starts_at)
 *														the next n firings
 *
 * None is strict: a NULL argument is refused with an error naming it
 * (except starts_at, whose NULL means "at after").  Infinite timestamps are
 * refused too.  The rule and zone are parsed on every call.
 *
 * IDENTIFICATION
 *	  src/schedule/schedule_sql.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "schedule/schedule.h"

/* The most firings sched.next_runs lists. */
#define NEXT_RUNS_MAX	10000

PG_FUNCTION_INFO_V1(delaysched_check_schedule);
PG_FUNCTION_INFO_V1(delaysched_schedule_next);
PG_FUNCTION_INFO_V1(delaysched_schedule_span);
PG_FUNCTION_INFO_V1(delaysched_next_runs);

/* Refuse a NULL argument, naming it. */
static void
require_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name),
				 strcmp(name, "schedule") == 0 ?
				 errhint("Pass a schedule rule such as '*/15 * * * *'.") :
				 strcmp(name, "time_zone") == 0 ?
				 errhint("Pass a time zone name such as 'Europe/Berlin'.") :
				 errhint("Pass a value for %s.", name)));
}

/* A timestamp argument that must be given and finite. */
static TimestampTz
finite_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	TimestampTz t;

	require_arg(fcinfo, argno, name);
	t = PG_GETARG_TIMESTAMPTZ(argno);
	if (TIMESTAMP_NOT_FINITE(t))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("%s must be a finite timestamp, not %s", name,
						TIMESTAMP_IS_NOBEGIN(t) ? "-infinity" : "infinity"),
				 errhint("Pass a date and time such as '2030-01-01 09:00+00'.")));
	return t;
}

/* The rule and the zone of arguments 0 and 1. */
static ScheduleRule *
rule_and_zone(FunctionCallInfo fcinfo, pg_tz **tz)
{
	ScheduleRule *rule;

	require_arg(fcinfo, 0, "schedule");
	require_arg(fcinfo, 1, "time_zone");
	rule = delaysched_parse_schedule(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	*tz = delaysched_schedule_zone(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	return rule;
}

/*
 * sched._check_schedule(schedule text, time_zone text) RETURNS text
 *
 * Refuse a rule or zone that is not valid; return the kind of the rule:
 * 'cron', 'every' or 'rule'.
 */
Datum
delaysched_check_schedule(PG_FUNCTION_ARGS)
{
	pg_tz	   *tz;
	ScheduleRule *rule = rule_and_zone(fcinfo, &tz);

	PG_RETURN_TEXT_P(cstring_to_text(delaysched_schedule_kind_name(rule)));
}

/*
 * sched._schedule_next(schedule text, time_zone text, anchor timestamptz,
 *						after timestamptz) RETURNS timestamptz
 *
 * The first firing strictly after "after" of a schedule that starts at
 * anchor; NULL if there is none in the next 100 years.
 */
Datum
delaysched_schedule_next(PG_FUNCTION_ARGS)
{
	pg_tz	   *tz;
	ScheduleRule *rule = rule_and_zone(fcinfo, &tz);
	TimestampTz anchor = finite_arg(fcinfo, 2, "anchor");
	TimestampTz after = finite_arg(fcinfo, 3, "after");
	TimestampTz next;

	next = delaysched_schedule_next_firing(rule, tz, anchor, after);
	if (next == DT_NOEND)
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(next);
}

/*
 * sched._schedule_span(schedule text, time_zone text, anchor timestamptz,
 *						from_at timestamptz, to_at timestamptz,
 *						OUT n bigint, OUT first_at timestamptz,
 *						OUT last_at timestamptz)
 *
 * How many firings fall in [from_at, to_at], and the first and last.
 */
Datum
delaysched_schedule_span(PG_FUNCTION_ARGS)
{
	pg_tz	   *tz;
	ScheduleRule *rule = rule_and_zone(fcinfo, &tz);
	TimestampTz anchor = finite_arg(fcinfo, 2, "anchor");
	TimestampTz from = finite_arg(fcinfo, 3, "from_at");
	TimestampTz to = finite_arg(fcinfo, 4, "to_at");
	TimestampTz first = 0;
	TimestampTz last = 0;
	int64		n = 0;
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	if (from <= to)
		n = delaysched_schedule_span_firings(rule, tz, anchor, from, to, &first, &last);
	values[0] = Int64GetDatum(n);
	values[1] = TimestampTzGetDatum(first);
	values[2] = TimestampTzGetDatum(last);
	nulls[1] = nulls[2] = (n == 0);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * sched._next_runs(schedule text, time_zone text, after timestamptz, n int,
 *					starts_at timestamptz) RETURNS SETOF timestamptz
 *
 * The first n firings strictly after "after" of a schedule that starts at
 * starts_at (NULL: at after).  Fewer when the schedule ends within the
 * search horizon.
 */
Datum
delaysched_next_runs(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	pg_tz	   *tz;
	ScheduleRule *rule = rule_and_zone(fcinfo, &tz);
	TimestampTz after = finite_arg(fcinfo, 2, "after");
	TimestampTz anchor = after;
	ScheduleEval *ev;
	int32		n;
	int32		i;

	require_arg(fcinfo, 3, "n");
	n = PG_GETARG_INT32(3);
	if (n < 1 || n > NEXT_RUNS_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n must be between 1 and %d, not %d", NEXT_RUNS_MAX, n),
				 errhint("Ask for 1 to %d firings; for more, call again with after set to the last one listed.", NEXT_RUNS_MAX)));
	if (!PG_ARGISNULL(4))
		anchor = finite_arg(fcinfo, 4, "starts_at");

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	ev = delaysched_schedule_begin(rule, tz, anchor);
	for (i = 0; i < n; i++)
	{
		Datum		value;
		bool		isnull = false;

		after = delaysched_schedule_eval_next(ev, after);
		if (after == DT_NOEND)
			break;
		value = TimestampTzGetDatum(after);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
	}
	delaysched_schedule_end(ev);
	return (Datum) 0;
}
