/*-------------------------------------------------------------------------
 *
 * http_store.c
 *		What an HTTP worker reads and writes in the database: the http
 *		business types, the tasks it leases (sched._http_claim) or was
 *		handed over (http_handoff.c), the results it records (sched._http_record)
 *		and, when it starts, the requests a previous run of it left
 *		unfinished (sched._http_release).
 *
 * Every function here runs in the worker's transaction (SPI connected by
 * the caller's caller; see http_worker.c), never across network I/O.
 *
 * The type table.  The worker keeps every http type's definition as it
 * last read it, and how many requests of the type it has in flight (the
 * claim shares the worker's slots out by them).  The definitions are read
 * again at every claim, and when a handed-over task's type is unknown or
 * its sched.biz.updated_at moved; a type whose updated_at moved gets a new
 * definition, and requests under way keep the one they started with.
 *
 * IDENTIFICATION
 *	  src/http/http_store.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "compat.h"
#include "base/base.h"
#include "http/http.h"

/* One http type in the worker's table. */
typedef struct HttpTypeEntry
{
	char		name[NAMEDATALEN];	/* key */
	HttpTypeDef *def;			/* NULL once the type is gone */
	int			in_flight;
	bool		seen;			/* in the last read of the types */
} HttpTypeEntry;

static HTAB *types = NULL;

static struct
{
	SPIPlanPtr	read_types;
	SPIPlanPtr	claim;
	SPIPlanPtr	record;
	SPIPlanPtr	release;
	int			nbuckets;
	SPIPlanPtr *fetch;			/* per bucket, made at first use */
	Oid			extension;
} plans;

/*
 * Statement text of a task partition (%s): the tasks among ids $1 still
 * leased to worker $2, with their type's updated_at.  The state is compared
 * through a sub-select, as in sched._lock: given the constant, the planner
 * may prove the lease index's predicate and read the whole of it, which
 * keeps an entry for every finished task while the xmin horizon is held.
 */
static const char fetch_sql[] =
"SELECT t.id, t.biz_type, t.run_at, t.payload, t.attempt, b.updated_at, t.schedule, t.lease_until,"
"       t.key"
" FROM sched.%s t JOIN sched.biz b ON b.name = t.biz_type"
" WHERE t.id = ANY ($1) AND t.state = (SELECT 'd'::\"char\") AND t.lease_owner = $2";

static void
prepare_plans(Oid extension)
{
	if (plans.extension == extension)
		return;
	delaysched_free_plan(&plans.read_types);
	delaysched_free_plan(&plans.claim);
	delaysched_free_plan(&plans.record);
	delaysched_free_plan(&plans.release);
	if (plans.fetch != NULL)
	{
		for (int b = 0; b < plans.nbuckets; b++)
			delaysched_free_plan(&plans.fetch[b]);
		pfree(plans.fetch);
		plans.fetch = NULL;
	}
	plans.extension = InvalidOid;

	plans.nbuckets = delaysched_read_bucket_count();
	plans.fetch = MemoryContextAllocZero(TopMemoryContext, sizeof(SPIPlanPtr) * plans.nbuckets);

	plans.read_types = delaysched_prepare_kept(
		"SELECT b.name, b.url, b.headers, b.secret,"
		"       (extract(epoch FROM b.timeout) * 1000)::bigint,"
		"       (extract(epoch FROM b.min_backoff) * 1000000)::bigint,"
		"       (extract(epoch FROM b.max_backoff) * 1000000)::bigint,"
		"       b.follow_redirects, b.updated_at"
		" FROM sched.biz b WHERE b.delivery = 'http'",
		0, NULL);
	{
		Oid			argtypes[] = {INT2OID, INT4OID, INT4OID, TEXTARRAYOID, INT4ARRAYOID, INT4ARRAYOID};

		plans.claim = delaysched_prepare_kept(
			"SELECT id, bucket, biz_type, run_at, payload, attempt, schedule, key"
			" FROM sched._http_claim($1, $2, $3, $4, $5, $6)",
			6, argtypes);
	}
	{
		Oid			argtypes[] = {INT2OID, INT8ARRAYOID, INT2ARRAYOID, TEXTARRAYOID, INT4ARRAYOID,
			TEXTARRAYOID, TIMESTAMPTZARRAYOID, INT4ARRAYOID, TEXTARRAYOID, TIMESTAMPTZARRAYOID,
		FLOAT8ARRAYOID};

		plans.record = delaysched_prepare_kept(
			"SELECT sched._http_record($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
			11, argtypes);
	}
	{
		Oid			argtypes[] = {INT2OID};

		plans.release = delaysched_prepare_kept("SELECT sched._http_release($1)", 1, argtypes);
	}
	plans.extension = extension;
}

static HttpTypeEntry *
type_entry(const char *name, bool create)
{
	bool		found;
	HttpTypeEntry *entry;

	if (types == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = NAMEDATALEN;
		ctl.entrysize = sizeof(HttpTypeEntry);
		types = hash_create("delaysched HTTP types", 64, &ctl, HASH_ELEM | HASH_STRINGS);
	}
	entry = hash_search(types, name, create ? HASH_ENTER : HASH_FIND, &found);
	if (create && !found)
	{
		entry->def = NULL;
		entry->in_flight = 0;
		entry->seen = false;
	}
	return entry;
}

/* A definition from one row of read_types, in TopMemoryContext. */
static HttpTypeDef *
make_def(HeapTuple tuple, TupleDesc desc, const char *name, TimestampTz updated_at)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	HttpTypeDef *def = palloc0(sizeof(HttpTypeDef));
	bool		isnull;
	Datum		headers;

	def->refcount = 1;
	strlcpy(def->name, name, sizeof(def->name));
	def->url = TextDatumGetCString(SPI_getbinval(tuple, desc, 2, &isnull));
	if (!delaysched_http_url_origin(def->url, def->origin))
		def->origin[0] = '\0';
	headers = SPI_getbinval(tuple, desc, 3, &isnull);
	if (!isnull)
	{
		Jsonb	   *object = DatumGetJsonbP(headers);
		JsonbIterator *it = JsonbIteratorInit(&object->root);
		JsonbValue	v;
		JsonbIteratorToken token;
		char	   *key = NULL;

		while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			if (token == WJB_KEY)
				key = pnstrdup(v.val.string.val, v.val.string.len);
			else if (token == WJB_VALUE && key != NULL && v.type == jbvString)
			{
				char	   *line = psprintf("%s: %.*s", key, v.val.string.len, v.val.string.val);
				struct curl_slist *longer = curl_slist_append(def->headers, line);

				if (longer == NULL)
					ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
				def->headers = longer;
				if (pg_strcasecmp(key, "content-type") == 0)
					def->has_content_type = true;
				pfree(line);
				pfree(key);
				key = NULL;
			}
		}
	}
	{
		Datum		secret = SPI_getbinval(tuple, desc, 4, &isnull);

		if (!isnull)
			def->secret = TextDatumGetCString(secret);
	}
	def->timeout_ms = (long) DatumGetInt64(SPI_getbinval(tuple, desc, 5, &isnull));
	def->min_backoff_us = DatumGetInt64(SPI_getbinval(tuple, desc, 6, &isnull));
	def->max_backoff_us = DatumGetInt64(SPI_getbinval(tuple, desc, 7, &isnull));
	def->follow_redirects = DatumGetBool(SPI_getbinval(tuple, desc, 8, &isnull));
	def->updated_at = updated_at;
	MemoryContextSwitchTo(old);
	return def;
}

/* Read every http type again; replace the definitions that changed. */
static void
refresh_types(void)
{
	HASH_SEQ_STATUS seq;
	HttpTypeEntry *entry;
	TupleDesc	desc;

	(void) type_entry("", false);	/* make the table */
	if (SPI_execute_plan(plans.read_types, NULL, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the http business types");
	desc = SPI_tuptable->tupdesc;

	/* Types not seen below are gone (dropped, or no longer http). */
	if (types != NULL)
	{
		hash_seq_init(&seq, types);
		while ((entry = hash_seq_search(&seq)) != NULL)
			entry->seen = false;
	}
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		bool		isnull;
		char	   *name = TextDatumGetCString(SPI_getbinval(tuple, desc, 1, &isnull));
		TimestampTz updated_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 9, &isnull));

		entry = type_entry(name, true);
		entry->seen = true;
		if (entry->def != NULL && entry->def->updated_at == updated_at)
			continue;
		if (entry->def != NULL)
			delaysched_http_typedef_release(entry->def);
		entry->def = make_def(tuple, desc, name, updated_at);
	}
	hash_seq_init(&seq, types);
	while ((entry = hash_seq_search(&seq)) != NULL)
	{
		if (entry->seen)
			continue;
		if (entry->def != NULL)
			delaysched_http_typedef_release(entry->def);
		entry->def = NULL;
		if (entry->in_flight == 0)
			hash_search(types, entry->name, HASH_REMOVE, NULL);
	}
	SPI_freetuptable(SPI_tuptable);
}

/* One more (or one less, delta -1) request of a type in flight. */
void
delaysched_http_count_in_flight(const char *biz_type, int delta)
{
	HttpTypeEntry *entry = type_entry(biz_type, true);

	entry->in_flight += delta;
	if (entry->in_flight <= 0)
	{
		entry->in_flight = 0;
		if (entry->def == NULL)
			hash_search(types, biz_type, HASH_REMOVE, NULL);
	}
}

/*
 * Arrays for sched._http_claim: the types of the table (text[]), how many
 * requests of each are in flight (int4[]), and how many more tasks of each
 * its url's origin can take now (int4[], see delaysched_http_origin_room).
 */
static void
busy_arrays(Datum *names, Datum *counts, Datum *rooms)
{
	int			n = types ? (int) hash_get_num_entries(types) : 0;
	Datum	   *name_values = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *count_values = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *room_values = palloc(sizeof(Datum) * Max(n, 1));
	int			k = 0;

	if (types != NULL)
	{
		HASH_SEQ_STATUS seq;
		HttpTypeEntry *entry;

		hash_seq_init(&seq, types);
		while ((entry = hash_seq_search(&seq)) != NULL)
		{
			if (entry->def == NULL && entry->in_flight <= 0)
				continue;
			name_values[k] = CStringGetTextDatum(entry->name);
			count_values[k] = Int32GetDatum(entry->in_flight);
			/* A url without an origin fails at once: no reason to hold it. */
			room_values[k] = Int32GetDatum(entry->def == NULL || entry->def->origin[0] == '\0'
										   ? PG_INT32_MAX
										   : delaysched_http_origin_room(entry->def->origin));
			k++;
		}
	}
	*names = PointerGetDatum(construct_array(name_values, k, TEXTOID, -1, false, TYPALIGN_INT));
	*counts = PointerGetDatum(construct_array(count_values, k, INT4OID, 4, true, TYPALIGN_INT));
	*rooms = PointerGetDatum(construct_array(room_values, k, INT4OID, 4, true, TYPALIGN_INT));
}

/* Set task->schedule from column "column" of a row (NULL: not a firing). */
static void
copy_schedule(HttpTask *task, HeapTuple tuple, TupleDesc desc, int column)
{
	bool		isnull;
	Datum		value = SPI_getbinval(tuple, desc, column, &isnull);

	task->schedule[0] = '\0';
	if (!isnull)
		text_to_cstring_buffer(DatumGetTextPP(value), task->schedule, sizeof(task->schedule));
}

/*
 * Lease up to room tasks and make a request of each (not started: the
 * caller starts them after the commit).  Returns how many; *requests gets
 * an array of them in TopMemoryContext, *next_claim when a rate-limited
 * type has its next token (DT_NOEND if none waits for one), and
 * *held_back whether a type waits at its fair share or concurrency cap.
 */
int
delaysched_http_claim(Oid extension, int worker, int room, int max_in_flight,
					  HttpRequest ***requests, TimestampTz *next_claim, bool *held_back)
{
	Datum		values[6];
	TupleDesc	desc;
	int			n;

	prepare_plans(extension);
	refresh_types();

	values[0] = Int16GetDatum((int16) worker);
	values[1] = Int32GetDatum(room);
	values[2] = Int32GetDatum(max_in_flight);
	busy_arrays(&values[3], &values[4], &values[5]);
	if (SPI_execute_plan(plans.claim, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "sched._http_claim failed");

	desc = SPI_tuptable->tupdesc;
	/* Past SPI_finish (SPI calls leave SPI's own context current). */
	*requests = MemoryContextAlloc(TopMemoryContext, sizeof(HttpRequest *) * Max(SPI_processed, 1));
	*next_claim = DT_NOEND;
	*held_back = false;
	n = 0;
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		bool		isnull;
		HttpTask	task;
		HttpTypeEntry *entry;

		task.id = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
		if (isnull)
		{
			Datum		next_token = SPI_getbinval(tuple, desc, 4, &isnull);

			/* A limit held a type back (see sched._http_claim). */
			if (!isnull)
				*next_claim = DatumGetTimestampTz(next_token);
			*held_back = DatumGetInt32(SPI_getbinval(tuple, desc, 6, &isnull)) == 1;
			continue;
		}
		task.bucket = DatumGetInt16(SPI_getbinval(tuple, desc, 2, &isnull));
		text_to_cstring_buffer(DatumGetTextPP(SPI_getbinval(tuple, desc, 3, &isnull)),
							   task.biz_type, sizeof(task.biz_type));
		task.run_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 4, &isnull));
		task.payload = DatumGetJsonbP(SPI_getbinval(tuple, desc, 5, &isnull));
		task.attempt = DatumGetInt32(SPI_getbinval(tuple, desc, 6, &isnull));
		copy_schedule(&task, tuple, desc, 7);
		task.key = delaysched_spi_text(tuple, desc, 8, CurrentMemoryContext);

		entry = type_entry(task.biz_type, false);
		if (entry == NULL || entry->def == NULL)
			elog(ERROR, "claimed a task of \"%s\", which is not an http type", task.biz_type);
		(*requests)[n++] = delaysched_http_request_new(&task, entry->def);
		delaysched_http_count_in_flight(task.biz_type, 1);
	}
	SPI_freetuptable(SPI_tuptable);
	return n;
}

static int
compare_handoffs(const void *a, const void *b)
{
	const HttpHandoff *x = (const HttpHandoff *) a;
	const HttpHandoff *y = (const HttpHandoff *) b;

	if (x->bucket != y->bucket)
		return x->bucket < y->bucket ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return 0;
}

/* The plan reading the leased tasks of one bucket. */
static SPIPlanPtr
fetch_plan(int bucket)
{
	if (bucket < 0 || bucket >= plans.nbuckets)
		elog(ERROR, "a task was handed over in bucket %d, out of range", bucket);
	if (plans.fetch[bucket] == NULL)
	{
		Oid			argtypes[] = {INT8ARRAYOID, INT2OID};
		char		partition[NAMEDATALEN];

		/* The partitions' names, as the install script makes them. */
		snprintf(partition, sizeof(partition), "task_%04d", bucket);
		plans.fetch[bucket] = delaysched_prepare_kept(psprintf(fetch_sql, partition), 2, argtypes);
	}
	return plans.fetch[bucket];
}

/*
 * The rows of one bucket's handed-over tasks (group[0..n), sorted by id)
 * that are still under the lease they were handed over with (the same
 * attempt and lease_until): a request for each, appended to requests.
 * Returns how many.
 */
static int
fetch_bucket(int worker, const HttpHandoff *group, int n, HttpRequest **requests)
{
	Datum	   *ids = palloc(sizeof(Datum) * n);
	Datum		values[2];
	SPITupleTable *rows;
	uint64		nrows;
	bool		refreshed = false;
	int			made = 0;

	for (int i = 0; i < n; i++)
		ids[i] = Int64GetDatum(group[i].id);
	values[0] = PointerGetDatum(construct_array(ids, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[1] = Int16GetDatum((int16) worker);
	if (SPI_execute_plan(fetch_plan(group[0].bucket), values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the tasks handed over to an HTTP worker");
	/* refresh_types below runs statements of its own. */
	rows = SPI_tuptable;
	nrows = SPI_processed;

	for (uint64 i = 0; i < nrows; i++)
	{
		HeapTuple	tuple = rows->vals[i];
		TupleDesc	desc = rows->tupdesc;
		bool		isnull;
		HttpTask	task;
		HttpHandoff key;
		const HttpHandoff *handed;
		HttpTypeEntry *entry;
		TimestampTz updated_at;

		key.id = task.id = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
		key.bucket = group[0].bucket;
		task.attempt = DatumGetInt32(SPI_getbinval(tuple, desc, 5, &isnull));
		handed = bsearch(&key, group, n, sizeof(HttpHandoff), compare_handoffs);
		if (handed == NULL || handed->attempt != task.attempt ||
			handed->lease_until != DatumGetTimestampTz(SPI_getbinval(tuple, desc, 8, &isnull)))
			continue;			/* parked and leased again since */
		task.bucket = key.bucket;
		text_to_cstring_buffer(DatumGetTextPP(SPI_getbinval(tuple, desc, 2, &isnull)),
							   task.biz_type, sizeof(task.biz_type));
		task.run_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 3, &isnull));
		task.payload = DatumGetJsonbP(SPI_getbinval(tuple, desc, 4, &isnull));
		updated_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 6, &isnull));
		copy_schedule(&task, tuple, desc, 7);
		task.key = delaysched_spi_text(tuple, desc, 9, CurrentMemoryContext);

		entry = type_entry(task.biz_type, false);
		if ((entry == NULL || entry->def == NULL || entry->def->updated_at != updated_at) && !refreshed)
		{
			/* A type this worker has not read yet, or one that changed. */
			refresh_types();
			refreshed = true;
			entry = type_entry(task.biz_type, false);
		}
		if (entry == NULL || entry->def == NULL)
			continue;			/* no longer http: its lease runs out */
		requests[made++] = delaysched_http_request_new(&task, entry->def);
		delaysched_http_count_in_flight(task.biz_type, 1);
	}
	SPI_freetuptable(rows);
	pfree(DatumGetPointer(values[0]));
	pfree(ids);
	return made;
}

/*
 * Make a request of each of the n tasks handed over to this worker (see
 * http_handoff.c) that is still leased to it for the same attempt; the others
 * are skipped.  Returns how many; *requests gets an array of them in
 * TopMemoryContext (not started: the caller starts them after the
 * transaction, which writes nothing).
 */
int
delaysched_http_fetch(Oid extension, int worker, HttpHandoff *handed, int n,
					  HttpRequest ***requests)
{
	int			made = 0;

	prepare_plans(extension);
	*requests = MemoryContextAlloc(TopMemoryContext, sizeof(HttpRequest *) * Max(n, 1));
	qsort(handed, n, sizeof(HttpHandoff), compare_handoffs);
	for (int start = 0; start < n;)
	{
		int			end = start + 1;

		while (end < n && handed[end].bucket == handed[start].bucket)
			end++;
		made += fetch_bucket(worker, &handed[start], end - start, *requests + made);
		start = end;
	}
	return made;
}

static const char *
outcome_name(HttpOutcome outcome)
{
	switch (outcome)
	{
		case HTTP_DONE:
			return "done";
		case HTTP_RETRY:
			return "retry";
		case HTTP_DEAD:
			return "dead";
		case HTTP_REQUEUED:
			return "requeued";
	}
	return "retry";
}

/* A one-dimensional array of n values, NULL where isnull says. */
static Datum
array_of(Datum *values, bool *isnull, int n, Oid type)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			dims[1] = {n};
	int			lbs[1] = {1};

	get_typlenbyvalalign(type, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_md_array(values, isnull, 1, dims, lbs, type,
											  typlen, typbyval, typalign));
}

/*
 * Record n results (see sched._http_record).  A result whose task's row
 * another transaction holds is not recorded: it is marked held, for the
 * worker to record again later.  Returns how many are.
 */
int
delaysched_http_record(Oid extension, int worker, HttpResult *results, int n)
{
	bool		isnull;
	Datum		held;
	int			n_held = 0;

	Datum		args[11];
	Datum	   *v[10];
	bool	   *nulls[10];
	static const Oid types_of[10] = {INT8OID, INT2OID, TEXTOID, INT4OID, TEXTOID,
	TIMESTAMPTZOID, INT4OID, TEXTOID, TIMESTAMPTZOID, FLOAT8OID};

	prepare_plans(extension);
	for (int c = 0; c < 10; c++)
	{
		v[c] = palloc(sizeof(Datum) * n);
		nulls[c] = palloc0(sizeof(bool) * n);
	}
	for (int i = 0; i < n; i++)
	{
		const HttpResult *r = &results[i];

		v[0][i] = Int64GetDatum(r->id);
		v[1][i] = Int16GetDatum(r->bucket);
		v[2][i] = CStringGetTextDatum(r->biz_type);
		v[3][i] = Int32GetDatum(r->attempt);
		v[4][i] = CStringGetTextDatum(outcome_name(r->outcome));
		v[5][i] = TimestampTzGetDatum(r->retry_at);
		nulls[5][i] = (r->outcome != HTTP_RETRY);
		v[6][i] = Int32GetDatum(r->status);
		nulls[6][i] = (r->status == 0);
		if (r->error != NULL)
			v[7][i] = CStringGetTextDatum(r->error);
		nulls[7][i] = (r->error == NULL);
		v[8][i] = TimestampTzGetDatum(r->started);
		v[9][i] = Float8GetDatum(r->duration_ms);
	}
	args[0] = Int16GetDatum((int16) worker);
	for (int c = 0; c < 10; c++)
		args[c + 1] = array_of(v[c], nulls[c], n, types_of[c]);
	if (SPI_execute_plan(plans.record, args, NULL, false, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "sched._http_record failed");
	held = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
	{
		ArrayType  *positions = DatumGetArrayTypeP(held);
		Datum	   *elems;
		bool	   *elem_nulls;
		int			count;

		deconstruct_array(positions, INT4OID, sizeof(int32), true, TYPALIGN_INT,
						  &elems, &elem_nulls, &count);
		for (int i = 0; i < count; i++)
		{
			int			position = DatumGetInt32(elems[i]);

			if (!elem_nulls[i] && position >= 1 && position <= n && !results[position - 1].held)
			{
				results[position - 1].held = true;
				n_held++;
			}
		}
	}
	SPI_freetuptable(SPI_tuptable);
	return n_held;
}

/* Park again what a previous run of this worker had in flight. */
int
delaysched_http_release(Oid extension, int worker)
{
	Datum		args[1];

	prepare_plans(extension);
	args[0] = Int16GetDatum((int16) worker);
	return delaysched_fetch_int(plans.release, args);
}
