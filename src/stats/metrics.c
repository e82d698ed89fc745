/*-------------------------------------------------------------------------
 *
 * metrics.c
 *		sched.metrics(): the current database's numbers in Prometheus's
 *		text exposition format; and the readers of shared memory behind
 *		sched.biz_stats (sched._type_counts()), and sched.recount_stats().
 *
 * The format (version 0.0.4): for each metric family a "# HELP" and a
 * "# TYPE" line, then one line per series, "name{label="value",...} number".
 * Names follow Prometheus's conventions: the prefix delaysched_, counters
 * end in _total, durations are in seconds, a histogram is its cumulative
 * _bucket series (le="..." up to "+Inf"), _sum and _count.  Every series
 * has the label database; a type's, biz_type.  doc/monitoring.md lists
 * them all.
 *
 * The counters and histograms come from shared memory (stats.c); the
 * gauges from shared memory too when the database's are ready, else from a
 * count of the tables (sched._counts); the due tasks from an index search
 * (sched._due), the time pointers and the workers from their small table
 * and from shared memory.  sched.metrics() runs as the extension's owner
 * (SECURITY DEFINER) and is granted to pg_monitor.
 *
 * IDENTIFICATION
 *	  src/stats/metrics.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "commands/dbcommands.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/jsonb.h"

#include "compat.h"
#include "base/base.h"
#include "stats/stats.h"

PG_FUNCTION_INFO_V1(delaysched_metrics_sql);
PG_FUNCTION_INFO_V1(delaysched_metric_samples_sql);
PG_FUNCTION_INFO_V1(delaysched_type_counts_sql);
PG_FUNCTION_INFO_V1(delaysched_recount_stats_sql);

/* One business type's numbers, from the tables and from shared memory. */
typedef struct TypeMetrics
{
	char		name[NAMEDATALEN];	/* hash key */
	bool		defined;		/* in sched.biz */
	char		kind;
	bool		paused;
	bool		limited;		/* has a rate limit: tokens is set */
	double		tokens;
	int64		pending;		/* 'p' */
	int64		ready;			/* 'r' */
	int64		delivered;		/* 'd' */
	int64		done;
	int64		dead;
	int64		cancelled;
	int64		due_pending;	/* 'p' with run_at <= now() */
	int64		consumer_cap;	/* its consumers' pace holds it to; -1: not held */
	int64		v[SS_COUNT];	/* shared memory's, zeros if none */
} TypeMetrics;

/* The types' gauges, with what sched.biz says of them. */
static const char types_sql[] =
"SELECT b.name, b.delivery, b.paused, b.rate_limit IS NOT NULL,"
"       sched._tokens(b.name, b.rate_limit, b.burst),"
"       coalesce(c.pending, 0), coalesce(c.ready, 0), coalesce(c.delivered, 0),"
"       coalesce(c.done, 0), coalesce(c.dead, 0), coalesce(c.cancelled, 0),"
"       coalesce(d.due, 0),"
"       coalesce(CASE WHEN b.delivery IN ('notify', 'pull') THEN sched._consumer_cap(b.name) END, -1)::int8"
"  FROM sched.biz b"
"  LEFT JOIN sched._counts c ON c.biz_type = b.name"
"  LEFT JOIN sched._due d ON d.biz_type = b.name";

static const char pointers_sql[] =
"SELECT p.range_id, extract(epoch FROM now() - p.pointer)::float8"
"  FROM sched.pointer p ORDER BY p.range_id";

static const char workers_sql[] =
"SELECT w.role, w.state, count(*) FROM sched._workers() w GROUP BY 1, 2 ORDER BY 1, 2";

/*
 * Run one of the statements above, planned once per session and kept:
 * planning them (sched._due and sched._counts span every partition) cost
 * more than running them.
 */
static void
run_kept(const char *sql, SPIPlanPtr *plan, const char *what)
{
	if (*plan == NULL)
		*plan = delaysched_prepare_kept(sql, 0, NULL);
	if (SPI_execute_plan(*plan, NULL, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read %s", what);
}

static SPIPlanPtr types_plan = NULL;
static SPIPlanPtr pointers_plan = NULL;
static SPIPlanPtr workers_plan = NULL;

/*
 * Where the samples go: Prometheus's text (sched.metrics()), or rows
 * (sched.metric_samples(), which the exporter's queries read).  Every
 * sample is written through sample(), so both say the same.
 */
typedef struct Emitter
{
	StringInfo	text;			/* text format, or NULL */
	ReturnSetInfo *rows;		/* rows, or NULL */
	const char *database;		/* the label of every sample */
	const char *family;			/* the family being written */
} Emitter;

/* A label besides database and biz_type. */
typedef struct Label
{
	const char *name;
	const char *value;
} Label;

static void
append_escaped(StringInfo out, const char *value)
{
	for (const char *c = value; *c; c++)
	{
		if (*c == '\\' || *c == '"')
			appendStringInfoChar(out, '\\');
		if (*c == '\n')
			appendStringInfoString(out, "\\n");
		else
			appendStringInfoChar(out, *c);
	}
}

static void
family(Emitter *e, const char *name, const char *type, const char *help)
{
	e->family = name;
	if (e->text)
		appendStringInfo(e->text, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * One sample: metric "name" (the family's name, or a histogram's
 * name_bucket, _sum, _count) of type "t" (NULL: the database's own), with
 * nlabels more labels.
 */
static void
sample(Emitter *e, const char *name, const TypeMetrics *t, const Label *labels, int nlabels,
	   double value)
{
	if (e->text)
	{
		StringInfo	out = e->text;

		appendStringInfo(out, "%s{database=\"", name);
		append_escaped(out, e->database);
		appendStringInfoChar(out, '"');
		if (t != NULL)
			appendStringInfo(out, ",biz_type=\"%s\"", t->name);
		for (int i = 0; i < nlabels; i++)
		{
			appendStringInfo(out, ",%s=\"", labels[i].name);
			append_escaped(out, labels[i].value);
			appendStringInfoChar(out, '"');
		}
		if (value == rint(value) && fabs(value) < 1e15)
			appendStringInfo(out, "} %.0f\n", value);
		else
			appendStringInfo(out, "} %.6f\n", value);
	}
	if (e->rows)
	{
		Datum		values[5];
		bool		nulls[5] = {false};
		StringInfoData json;

		initStringInfo(&json);
		appendStringInfoChar(&json, '{');
		for (int i = 0; i < nlabels; i++)
		{
			if (i > 0)
				appendStringInfoString(&json, ", ");
			escape_json(&json, labels[i].name);
			appendStringInfoString(&json, ": ");
			escape_json(&json, labels[i].value);
		}
		appendStringInfoChar(&json, '}');
		values[0] = CStringGetTextDatum(e->family);
		values[1] = CStringGetTextDatum(name);
		if (t != NULL)
			values[2] = CStringGetTextDatum(t->name);
		else
			nulls[2] = true;
		values[3] = DirectFunctionCall1(jsonb_in, CStringGetDatum(json.data));
		values[4] = Float8GetDatum(value);
		tuplestore_putvalues(e->rows->setResult, e->rows->setDesc, values, nulls);
	}
}

/* A histogram of type "t": cumulative buckets up to +Inf, sum, count. */
static void
histogram(Emitter *e, const TypeMetrics *t, int first, int nbuckets, const double *bounds,
		  int sum_slot)
{
	int64		cumulative = 0;
	char		name[NAMEDATALEN * 2];

	snprintf(name, sizeof(name), "%s_bucket", e->family);
	for (int i = 0; i < nbuckets; i++)
	{
		char		le[32];
		Label		label = {"le", le};

		cumulative += t->v[first + i];
		if (i < nbuckets - 1)
			snprintf(le, sizeof(le), "%g", bounds[i]);
		else
			strlcpy(le, "+Inf", sizeof(le));
		sample(e, name, t, &label, 1, (double) cumulative);
	}
	snprintf(name, sizeof(name), "%s_sum", e->family);
	sample(e, name, t, NULL, 0, (double) t->v[sum_slot] / USECS_PER_SEC);
	snprintf(name, sizeof(name), "%s_count", e->family);
	sample(e, name, t, NULL, 0, (double) cumulative);
}

/* A family with one sample per type, from a slot of shared memory. */
typedef struct CounterFamily
{
	const char *name;
	const char *help;
	int			slot;
} CounterFamily;

static const CounterFamily counter_families[] = {
	{"delaysched_tasks_added_total", "Tasks added (sched.add and friends, schedule firings).", SS_ADDED},
	{"delaysched_tasks_acked_total", "Tasks finished as done: acknowledged, or answered with a 2xx.", SS_ACKED},
	{"delaysched_tasks_nacked_total", "Negative acknowledgements (sched.nack).", SS_NACKED},
	{"delaysched_tasks_ack_timeouts_total", "Deliveries whose lease ran out before an acknowledgement (each then redelivered, claimable again, or dead).", SS_ACK_TIMEOUTS},
	{"delaysched_tasks_dead_total", "Tasks finished as dead.", SS_DEAD},
	{"delaysched_tasks_cancelled_total", "Tasks finished as cancelled.", SS_CANCELLED},
	{"delaysched_tasks_parked_total", "Due tasks of notify types set aside for a rate limit, a concurrency cap or a pause.", SS_PARKED},
};


static int
compare_types(const void *a, const void *b)
{
	return strcmp(((const TypeMetrics *) a)->name, ((const TypeMetrics *) b)->name);
}

static int64
int8_at(int row, int column)
{
	bool		isnull;
	Datum		value = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, column, &isnull);

	return isnull ? 0 : DatumGetInt64(value);
}

static bool
bool_at(int row, int column)
{
	bool		isnull;
	Datum		value = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, column, &isnull);

	return !isnull && DatumGetBool(value);
}

static double
float8_at(int row, int column)
{
	bool		isnull;
	Datum		value = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, column, &isnull);

	return isnull ? 0 : DatumGetFloat8(value);
}

/*
 * Every type of the database, defined or with numbers in shared memory,
 * sorted by name; *ntypes is set.  SPI connected.
 */
static TypeMetrics *
collect_types(int *ntypes)
{
	HASHCTL		info;
	HTAB	   *types;
	HASH_SEQ_STATUS scan;
	TypeMetrics *t;
	TypeMetrics *sorted;
	ListCell   *lc;
	List	   *copies = delaysched_stats_copy(MyDatabaseId);
	int			n = 0;

	memset(&info, 0, sizeof(info));
	info.keysize = NAMEDATALEN;
	info.entrysize = sizeof(TypeMetrics);
	info.hcxt = CurrentMemoryContext;
	types = hash_create("delaysched metrics types", 64, &info, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);

	run_kept(types_sql, &types_plan, "the business types");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		char	   *delivery = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		bool		found;

		t = hash_search(types, name, HASH_ENTER, &found);
		memset((char *) t + NAMEDATALEN, 0, sizeof(TypeMetrics) - NAMEDATALEN);
		t->defined = true;
		t->kind = delaysched_stats_kind_of(delivery);
		t->paused = bool_at(i, 3);
		t->limited = bool_at(i, 4);
		t->tokens = float8_at(i, 5);
		t->pending = int8_at(i, 6);
		t->ready = int8_at(i, 7);
		t->delivered = int8_at(i, 8);
		t->done = int8_at(i, 9);
		t->dead = int8_at(i, 10);
		t->cancelled = int8_at(i, 11);
		t->due_pending = int8_at(i, 12);
		t->consumer_cap = int8_at(i, 13);
	}
	foreach(lc, copies)
	{
		StatsCopy  *copy = lfirst(lc);
		bool		found;

		t = hash_search(types, copy->biz_type, HASH_ENTER, &found);
		if (!found)
		{
			memset((char *) t + NAMEDATALEN, 0, sizeof(TypeMetrics) - NAMEDATALEN);
			t->kind = copy->kind;
		}
		memcpy(t->v, copy->v, sizeof(t->v));
	}

	sorted = palloc0(sizeof(TypeMetrics) * (hash_get_num_entries(types) + 1));
	hash_seq_init(&scan, types);
	while ((t = hash_seq_search(&scan)) != NULL)
		sorted[n++] = *t;
	qsort(sorted, n, sizeof(TypeMetrics), compare_types);
	*ntypes = n;
	return sorted;
}

static void
put_counters(Emitter *e, const TypeMetrics *types, int ntypes)
{
	for (size_t f = 0; f < lengthof(counter_families); f++)
	{
		family(e, counter_families[f].name, "counter", counter_families[f].help);
		for (int i = 0; i < ntypes; i++)
			sample(e, e->family, &types[i], NULL, 0, (double) types[i].v[counter_families[f].slot]);
	}

	family(e, "delaysched_tasks_delivered_total", "counter",
		   "Deliveries (redeliveries included), by the type's delivery kind: NOTIFY sent, pull claims, HTTP requests started, SQL jobs leased to an SQL worker.");
	for (int i = 0; i < ntypes; i++)
	{
		const TypeMetrics *t = &types[i];
		static const struct
		{
			char		kind;
			int			slot;
		}			kinds[] = {
			{STATS_KIND_NOTIFY, SS_DELIVERED_NOTIFY},
			{STATS_KIND_PULL, SS_DELIVERED_PULL},
			{STATS_KIND_HTTP, SS_DELIVERED_HTTP},
			{STATS_KIND_SQL, SS_DELIVERED_SQL}
		};

		for (size_t k = 0; k < lengthof(kinds); k++)
		{
			int64		value = t->v[kinds[k].slot];
			Label		label = {"delivery", delaysched_stats_kind_name(kinds[k].kind)};

			/* Those made before the kind was known count as the type's kind now. */
			if (kinds[k].kind == (t->kind ? t->kind : STATS_KIND_NOTIFY))
				value += t->v[SS_DELIVERED_UNKNOWN];
			else if (value == 0)
				continue;
			sample(e, e->family, t, &label, 1, (double) value);
		}
	}

	family(e, "delaysched_http_requests_total", "counter",
		   "HTTP requests answered or failed, by status class (none: no answer) and outcome.");
	for (int i = 0; i < ntypes; i++)
		for (int c = 0; c < STATS_HTTP_CLASSES; c++)
			for (int o = 0; o < STATS_HTTP_OUTCOMES; o++)
			{
				int64		value = types[i].v[SS_HTTP_FIRST + c * STATS_HTTP_OUTCOMES + o];
				Label		labels[2] = {
					{"class", delaysched_http_class_names[c]},
					{"outcome", delaysched_http_outcome_names[o]}
				};

				if (value != 0)
					sample(e, e->family, &types[i], labels, 2, (double) value);
			}

	family(e, "delaysched_http_request_duration_seconds", "histogram",
		   "Duration of HTTP requests, redirects included, to the answer, the timeout or the failure.");
	for (int i = 0; i < ntypes; i++)
		if (types[i].kind == STATS_KIND_HTTP)
			histogram(e, &types[i], SS_DURATION_FIRST, STATS_DURATION_BUCKETS,
					  delaysched_duration_bounds, SS_DURATION_SUM_US);

	family(e, "delaysched_sql_runs_total", "counter",
		   "Runs of SQL jobs, by outcome: done (committed), retry, dead, cancelled, stale.");
	for (int i = 0; i < ntypes; i++)
		for (int o = 0; o < STATS_SQL_OUTCOMES; o++)
		{
			int64		value = types[i].v[SS_SQL_RUN_FIRST + o];
			Label		label = {"outcome", delaysched_sql_outcome_names[o]};

			if (value != 0)
				sample(e, e->family, &types[i], &label, 1, (double) value);
		}

	family(e, "delaysched_sql_run_duration_seconds", "histogram",
		   "Duration of SQL jobs' runs, from the command's start to its end, done or failed.");
	for (int i = 0; i < ntypes; i++)
		if (types[i].kind == STATS_KIND_SQL)
			histogram(e, &types[i], SS_SQL_DURATION_FIRST, STATS_DURATION_BUCKETS,
					  delaysched_duration_bounds, SS_SQL_DURATION_SUM_US);

	family(e, "delaysched_lateness_seconds", "histogram",
		   "Lateness of first deliveries: delivered_at - run_at.");
	for (int i = 0; i < ntypes; i++)
		histogram(e, &types[i], SS_LATENESS_FIRST, STATS_LATENESS_BUCKETS,
				  delaysched_lateness_bounds, SS_LATENESS_SUM_US);
}

/* A gauge family with one sample per defined type. */
static void
put_type_gauge(Emitter *e, const char *name, const char *help, const TypeMetrics *types, int ntypes,
			   int64 (*value) (const TypeMetrics *t))
{
	family(e, name, "gauge", help);
	for (int i = 0; i < ntypes; i++)
		if (types[i].defined)
			sample(e, name, &types[i], NULL, 0, (double) value(&types[i]));
}

static int64
pending_of(const TypeMetrics *t)
{
	return t->pending + t->ready;
}

static int64
due_of(const TypeMetrics *t)
{
	return t->due_pending + t->ready;
}

static int64
awaiting_of(const TypeMetrics *t)
{
	return t->delivered;
}

static int64
throttled_of(const TypeMetrics *t)
{
	return t->kind == STATS_KIND_NOTIFY && !t->paused ? t->ready : 0;
}

static int64
paused_of(const TypeMetrics *t)
{
	return t->paused ? 1 : 0;
}

static void
put_gauges(Emitter *e, const TypeMetrics *types, int ntypes)
{
	put_type_gauge(e, "delaysched_tasks_pending", "Unfinished tasks not delivered, due or not.",
				   types, ntypes, pending_of);
	put_type_gauge(e, "delaysched_tasks_due", "Pending tasks whose run_at has come: due, not yet delivered.",
				   types, ntypes, due_of);
	put_type_gauge(e, "delaysched_tasks_awaiting_ack", "Delivered tasks awaiting acknowledgement.",
				   types, ntypes, awaiting_of);
	put_type_gauge(e, "delaysched_tasks_throttled",
				   "Due tasks of a notify type that is not paused, set aside for a token, a slot or a share of the global cap.",
				   types, ntypes, throttled_of);
	put_type_gauge(e, "delaysched_biz_paused", "1 while the type is paused (sched.pause).",
				   types, ntypes, paused_of);

	family(e, "delaysched_finished_tasks", "gauge", "Finished tasks kept within their retention, by state.");
	for (int i = 0; i < ntypes; i++)
		if (types[i].defined)
		{
			const char *states[] = {"done", "dead", "cancelled"};
			int64		values[] = {types[i].done, types[i].dead, types[i].cancelled};

			for (size_t s = 0; s < lengthof(states); s++)
			{
				Label		label = {"state", states[s]};

				sample(e, e->family, &types[i], &label, 1, (double) values[s]);
			}
		}

	family(e, "delaysched_bucket_tokens", "gauge", "Tokens in the token bucket of a rate-limited type.");
	for (int i = 0; i < ntypes; i++)
		if (types[i].defined && types[i].limited)
			sample(e, e->family, &types[i], NULL, 0, types[i].tokens);

	family(e, "delaysched_consumer_cap", "gauge",
		   "Deliveries awaiting acknowledgement a type is held to while its consumers fall behind (0: being set).");
	for (int i = 0; i < ntypes; i++)
		if (types[i].defined && types[i].consumer_cap >= 0)
			sample(e, e->family, &types[i], NULL, 0, (double) types[i].consumer_cap);
}

/*
 * Load control's figures (stats/load.c).  They are the cluster's, the same
 * in every database's metrics, as the database label says where they were
 * read.
 */
static void
put_load(Emitter *e)
{
	LoadStatus	load;

	delaysched_load_status(&load);
	family(e, "delaysched_load_deliveries_allowed", "gauge",
		   "Deliveries per second load control allows the cluster; 0 while it does not hold them back.");
	sample(e, e->family, NULL, NULL, 0, load.enabled ? load.allowance : 0);
	family(e, "delaysched_load_busy_sessions", "gauge",
		   "Client sessions busy on average over the last second, consumers left out (load control's signal).");
	sample(e, e->family, NULL, NULL, 0, load.busy);
	family(e, "delaysched_load_usual_busy_sessions", "gauge",
		   "The same while delaysched delivered little: what load control compares with.");
	sample(e, e->family, NULL, NULL, 0, load.usual);
	family(e, "delaysched_load_standby_lag_bytes", "gauge",
		   "WAL the watched standbys have yet to replay, the most of them, in bytes (load control's second signal); -1 while none is watched.");
	sample(e, e->family, NULL, NULL, 0, load.enabled ? (double) load.standby_lag : -1.0);
	family(e, "delaysched_load_cuts_total", "counter",
		   "Times load control cut the deliveries allowed per second, since the server started.");
	sample(e, e->family, NULL, NULL, 0, (double) load.cuts);
}

/* The database's own series: pointers, workers, the state of the numbers. */
static void
put_database(Emitter *e)
{
	family(e, "delaysched_pointer_lag_seconds", "gauge",
		   "How far each range's time pointer is behind now (range r is door number r).");
	run_kept(pointers_sql, &pointers_plan, "the time pointers");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Label		label = {"range", SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1)};

		sample(e, e->family, NULL, &label, 1, float8_at(i, 2));
	}

	family(e, "delaysched_workers", "gauge", "Background workers of the database, by role and state.");
	run_kept(workers_sql, &workers_plan, "the workers");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Label		labels[2] = {
			{"role", SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1)},
			{"state", SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2)}
		};

		sample(e, e->family, NULL, labels, 2, (double) int8_at(i, 3));
	}

	family(e, "delaysched_stats_ready", "gauge",
		   "1 when the task gauges come from shared memory; 0 while they are counted from the tables (after a start).");
	sample(e, e->family, NULL, NULL, 0, delaysched_stats_ready(MyDatabaseId) ? 1 : 0);
	family(e, "delaysched_stats_full", "gauge",
		   "1 when a business type found no room in shared memory (raise delaysched.max_stats_types).");
	sample(e, e->family, NULL, NULL, 0, delaysched_stats_full(MyDatabaseId) ? 1 : 0);
	put_load(e);
}

/* Every family, in the order of doc/monitoring.md. */
static void
emit_all(Emitter *e)
{
	TypeMetrics *types;
	int			ntypes;

	e->database = get_database_name(MyDatabaseId);
	SPI_connect();
	types = collect_types(&ntypes);
	put_counters(e, types, ntypes);
	put_gauges(e, types, ntypes);
	put_database(e);
	SPI_finish();
}

/* sched.metrics() RETURNS text */
Datum
delaysched_metrics_sql(PG_FUNCTION_ARGS)
{
	StringInfoData out;
	Emitter		e = {0};

	initStringInfo(&out);
	e.text = &out;
	emit_all(&e);
	PG_RETURN_TEXT_P(cstring_to_text_with_len(out.data, out.len));
}

/*
 * sched.metric_samples(): the same samples as rows (family, metric,
 * biz_type, labels, value), for queries: the exporter's, a dashboard's.
 */
Datum
delaysched_metric_samples_sql(PG_FUNCTION_ARGS)
{
	Emitter		e = {0};

	InitMaterializedSRF(fcinfo, 0);
	e.rows = (ReturnSetInfo *) fcinfo->resultinfo;
	emit_all(&e);
	return (Datum) 0;
}

/*
 * sched._type_counts(biz_types text[]): the tasks by state of the given
 * types from shared memory (zeros for a type with none), and "counted":
 * whether the database's gauges are ready.  When they are not, the numbers
 * are not to be used (sched._counts counts the tables instead).  A caller
 * learns only of the types it names, and of those only the ones the
 * session's role may read: no row for the others (any role may call it:
 * see base/caller.c).
 */
Datum
delaysched_type_counts_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType  *names = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *elements;
	bool	   *element_nulls;
	int			nelements;
	bool		ready = delaysched_stats_ready(MyDatabaseId);
	const ReadableTypes *readable = delaysched_readable_types(fcinfo);

	InitMaterializedSRF(fcinfo, 0);
	deconstruct_array(names, TEXTOID, -1, false, TYPALIGN_INT, &elements, &element_nulls, &nelements);
	for (int i = 0; i < nelements; i++)
	{
		Datum		values[8];
		bool		nulls[8] = {false};
		char		name[NAMEDATALEN];
		int64		gauges[SS_COUNT] = {0};

		if (element_nulls[i])
			continue;
		text_to_cstring_buffer(DatumGetTextPP(elements[i]), name, NAMEDATALEN);
		if (!delaysched_may_read(readable, name))
			continue;
		if (ready)
			(void) delaysched_stats_gauges(MyDatabaseId, name, gauges);
		values[0] = elements[i];
		values[1] = Int64GetDatum(gauges[SS_STATE_PENDING]);
		values[2] = Int64GetDatum(gauges[SS_STATE_READY]);
		values[3] = Int64GetDatum(gauges[SS_STATE_DELIVERED]);
		values[4] = Int64GetDatum(gauges[SS_KEPT_DONE]);
		values[5] = Int64GetDatum(gauges[SS_KEPT_DEAD]);
		values[6] = Int64GetDatum(gauges[SS_KEPT_CANCELLED]);
		values[7] = BoolGetDatum(ready);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * sched.recount_stats(): count this database's gauges again (scanner
 * worker 0 does, within a second or so).  For after something bypassed
 * the triggers that keep them (ALTER TABLE ... DISABLE TRIGGER, a restore
 * with --disable-triggers).
 */
Datum
delaysched_recount_stats_sql(PG_FUNCTION_ARGS)
{
	delaysched_stats_mark_stale(MyDatabaseId);
	PG_RETURN_VOID();
}
