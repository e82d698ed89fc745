/*-------------------------------------------------------------------------
 *
 * compat.h
 *		Every PostgreSQL version difference delaysched cares about, in one
 *		place.  Code elsewhere calls the names defined here and never tests
 *		PG_VERSION_NUM itself.
 *
 * Built and tested: PostgreSQL 15, 17 and 18 (scripts/test.sh runs the
 * whole suite on each).  13, 14 and 16 are kept compiling in principle,
 * through the names below, but no test runs on them.  (libcurl's own
 * version checks are in http_request.c, the one file that needs them.)
 *
 * IDENTIFICATION
 *	  src/compat.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_COMPAT_H
#define DELAYSCHED_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM < 130000
#error "delaysched requires PostgreSQL 13 or later"
#endif

/*
 * PostgreSQL 15 added shmem_request_hook; before it, shared memory had to be
 * requested directly from _PG_init.
 */
#if PG_VERSION_NUM >= 150000
#define DELAYSCHED_HAS_SHMEM_REQUEST_HOOK 1
#endif

/* MarkGUCPrefixReserved replaced EmitWarningsOnPlaceholders in 15. */
#if PG_VERSION_NUM >= 150000
#define delaysched_reserve_guc_prefix(prefix) MarkGUCPrefixReserved(prefix)
#else
#define delaysched_reserve_guc_prefix(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/* The stock SIGTERM handler moved from bgworker's die to postmaster/interrupt.h in 13. */
#include "postmaster/interrupt.h"

/* BackgroundWorkerInitializeConnection gained a flags argument in 11; fine for 13+. */

/*
 * InitMaterializedSRF (15) sets up a set-returning function's tuplestore;
 * before it, every function did so by hand.
 */
#if PG_VERSION_NUM < 150000
#include "access/tupdesc.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/tuplestore.h"

static inline void
delaysched_init_materialized_srf(FunctionCallInfo fcinfo)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TupleDesc	tupdesc;
	MemoryContext old;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
	{
		/* SETOF a scalar type: one column of it. */
		tupdesc = CreateTemplateTupleDesc(1);
		TupleDescInitEntry(tupdesc, (AttrNumber) 1, "value",
						   get_fn_expr_rettype(fcinfo->flinfo), -1, 0);
	}
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->setDesc = CreateTupleDescCopy(tupdesc);
	MemoryContextSwitchTo(old);
}
#define MAT_SRF_USE_EXPECTED_DESC 0x01
#define InitMaterializedSRF(fcinfo, flags) delaysched_init_materialized_srf(fcinfo)
#endif

/* Hash tables keyed by C strings said so with HASH_STRINGS from 14 on. */
#include "utils/hsearch.h"
#if PG_VERSION_NUM < 140000
#define HASH_STRINGS 0
#endif

/* A uniform random number in [0, 1): pg_prng from 15 on. */
#if PG_VERSION_NUM >= 150000
#include "common/pg_prng.h"
#define delaysched_random_fraction() pg_prng_double(&pg_global_prng_state)
#else
#define delaysched_random_fraction() ((double) random() / ((double) MAX_RANDOM_VALUE + 1))
#endif

/*
 * HMAC: common/hmac.h from 14 on.  Before it, delaysched's http types
 * cannot sign their requests (sched.define_biz refuses a secret).
 */
#if PG_VERSION_NUM >= 140000
#define DELAYSCHED_HAS_HMAC 1
#endif

/*
 * The ProcessUtility hook gained readOnlyTree in 14.
 */
#include "tcop/utility.h"
#if PG_VERSION_NUM >= 140000
#define DELAYSCHED_UTILITY_ARGS PlannedStmt *pstmt, const char *queryString, \
	bool readOnlyTree, ProcessUtilityContext context, ParamListInfo params, \
	QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc
#define DELAYSCHED_UTILITY_CALL pstmt, queryString, readOnlyTree, context, params, \
	queryEnv, dest, qc
#else
#define DELAYSCHED_UTILITY_ARGS PlannedStmt *pstmt, const char *queryString, \
	ProcessUtilityContext context, ParamListInfo params, \
	QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc
#define DELAYSCHED_UTILITY_CALL pstmt, queryString, context, params, queryEnv, dest, qc
#endif

/* Does the current role own database dboid?  object_ownercheck from 16 on. */
#include "utils/acl.h"
#if PG_VERSION_NUM >= 160000
#include "catalog/pg_database.h"
#define delaysched_owns_database(dboid) \
	object_ownercheck(DatabaseRelationId, (dboid), GetUserId())
#else
#define delaysched_owns_database(dboid) pg_database_ownercheck((dboid), GetUserId())
#endif

/*
 * A database left half-dropped by an interrupted DROP DATABASE is marked
 * invalid from 15.4 (and 13.12, 14.9) on; before, there is no such mark.
 */
#include "catalog/pg_database.h"
#ifdef DATCONNLIMIT_INVALID_DB
#define delaysched_database_is_invalid(form) ((form)->datconnlimit == DATCONNLIMIT_INVALID_DB)
#else
#define delaysched_database_is_invalid(form) false
#endif

/*
 * A GUC check hook's "extra" data: PostgreSQL frees it with free() up to 15
 * and with guc_free() (pfree in the GUC memory context) from 16 on, so it
 * must come from the matching allocator.  NULL when out of memory.
 */
#include "utils/guc.h"
#if PG_VERSION_NUM >= 160000
#define delaysched_guc_extra_alloc(size) guc_malloc(LOG, (size))
#define delaysched_guc_extra_free(ptr) guc_free(ptr)
#else
#define delaysched_guc_extra_alloc(size) malloc(size)
#define delaysched_guc_extra_free(ptr) free(ptr)
#endif

/*
 * A WaitEventSet is owned by a ResourceOwner from 17 on (NULL: it lives as
 * long as the process, as ours do); before, by a memory context.
 */
#include "storage/latch.h"
#include "utils/memutils.h"
#if PG_VERSION_NUM >= 170000
#define delaysched_create_wait_event_set(nevents) CreateWaitEventSet(NULL, (nevents))
#else
#define delaysched_create_wait_event_set(nevents) \
	CreateWaitEventSet(TopMemoryContext, (nevents))
#endif

/*
 * A JSON lexer over a C string: from 17 on the caller may pass the context
 * to fill (NULL: a new one is allocated, as before).
 */
#include "common/jsonapi.h"
#if PG_VERSION_NUM >= 170000
#define delaysched_json_lexer(json, len, encoding, need_escapes) \
	makeJsonLexContextCstringLen(NULL, (json), (len), (encoding), (need_escapes))
#else
#define delaysched_json_lexer(json, len, encoding, need_escapes) \
	makeJsonLexContextCstringLen((json), (len), (encoding), (need_escapes))
#endif

/*
 * Running a portal: 18 dropped PortalRun's run_once (every run of ours is
 * the portal's only one).
 */
#include "tcop/pquery.h"
#if PG_VERSION_NUM >= 180000
#define delaysched_portal_run(portal, count, top_level, dest, altdest, qc) \
	PortalRun((portal), (count), (top_level), (dest), (altdest), (qc))
#else
#define delaysched_portal_run(portal, count, top_level, dest, altdest, qc) \
	PortalRun((portal), (count), (top_level), true, (dest), (altdest), (qc))
#endif

/*
 * A background worker may connect as a role that cannot log in from 17 on
 * (BGWORKER_BYPASS_ROLELOGINCHECK); before, such a role's session fails.
 */
#include "postmaster/bgworker.h"
#ifdef BGWORKER_BYPASS_ROLELOGINCHECK
#define DELAYSCHED_BGW_ANY_ROLE BGWORKER_BYPASS_ROLELOGINCHECK
#else
#define DELAYSCHED_BGW_ANY_ROLE 0
#endif

/*
 * The current process's number among the PGPROCs: MyProcNumber from 17 on,
 * MyProc->pgprocno before.
 */
#include "storage/proc.h"
#if PG_VERSION_NUM >= 170000
#define delaysched_my_proc_number() ((int) MyProcNumber)
#else
#define delaysched_my_proc_number() (MyProc != NULL ? MyProc->pgprocno : -1)
#endif

/*
 * Where this server's WAL is flushed up to: GetFlushRecPtr took the timeline
 * as an argument from 15 on.
 */
#include "access/xlog.h"
#if PG_VERSION_NUM >= 150000
#define delaysched_flush_rec_ptr() GetFlushRecPtr(NULL)
#else
#define delaysched_flush_rec_ptr() GetFlushRecPtr()
#endif

/*
 * Is a WAL sender's peer a physical standby?  Its kind is recorded from 17
 * on; before, a logical subscriber's sender cannot be told apart and counts
 * as one.
 */
#if PG_VERSION_NUM >= 170000
#define delaysched_walsnd_is_physical(walsnd) ((walsnd)->kind == REPLICATION_KIND_PHYSICAL)
#else
#define delaysched_walsnd_is_physical(walsnd) true
#endif

#endif							/* DELAYSCHED_COMPAT_H */
