/*-------------------------------------------------------------------------
 *
 * caller.c
 *		sched._caller(): the role on whose behalf a public function runs.
 *
 * The public functions are SECURITY DEFINER: inside them current_user is
 * the extension's owner.  PostgreSQL keeps the role the session is running
 * as (the login role, or the one chosen with SET ROLE) as the "outer" user
 * across SECURITY DEFINER calls; the per-type grants (sched.grant_biz) are
 * checked against it.  Outside a SECURITY DEFINER function it is simply
 * current_user.
 *
 * sched._caller_is_admin() answers the question every public function asks
 * first, on the fast path of sched.add: may the caller do everything?  Yes
 * for superusers and for members of the extension's owner -- who, inside
 * the SECURITY DEFINER functions that call it, is the current user.  Both
 * checks use PostgreSQL's caches, so the answer costs no query.
 *
 * delaysched_readable_types() answers it for the internal functions the
 * views call (sched._task_status, sched._tokens, sched._type_counts).
 * PostgreSQL checks EXECUTE on a function a view calls against the role
 * reading the view, so these are executable by PUBLIC, and any role with
 * USAGE on the schema can call them directly, with any type's name: they
 * answer only about the types the session's role may read, the rule of
 * the views (sched._viewer and sched._viewer_types): every type if the
 * current user is an administrator (inside sched.metrics(), say) or the
 * session's role is; else the types it holds a grant on.
 *
 * IDENTIFICATION
 *	  src/base/caller.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"

#include "base/base.h"

PG_FUNCTION_INFO_V1(delaysched_caller);
PG_FUNCTION_INFO_V1(delaysched_caller_is_admin);

/*
 * sched._caller() RETURNS oid
 */
Datum
delaysched_caller(PG_FUNCTION_ARGS)
{
	PG_RETURN_OID(GetOuterUserId());
}

/*
 * sched._caller_is_admin() RETURNS boolean
 *
 * Only meaningful inside the extension's SECURITY DEFINER functions.
 */
Datum
delaysched_caller_is_admin(PG_FUNCTION_ARGS)
{
	Oid			caller = GetOuterUserId();

	PG_RETURN_BOOL(superuser_arg(caller) || has_privs_of_role(caller, GetUserId()));
}

/* The role that owns the extension (InvalidOid if it is not installed). */
Oid
delaysched_extension_owner(void)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	Oid			owner = InvalidOid;

	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("delaysched"));
	rel = table_open(ExtensionRelationId, AccessShareLock);
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		owner = ((Form_pg_extension) GETSTRUCT(tuple))->extowner;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return owner;
}

/* May role do everything: a superuser, or a member of the extension's owner? */
static bool
is_admin(Oid role, Oid owner)
{
	return superuser_arg(role) || (OidIsValid(owner) && has_privs_of_role(role, owner));
}

static int
compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * Run a constant statement of the extension's as its owner, as a SECURITY
 * DEFINER function would (the session's role, GetOuterUserId, stays what
 * it is), and restricted: it names every object with its schema and uses
 * no operator, so the caller's search_path cannot reach into it.  An error
 * gives the user back with the transaction.  SPI connected.
 */
void
delaysched_execute_as_owner(Oid owner, const char *sql, int nargs, Oid *types, Datum *values)
{
	Oid			save_userid;
	int			save_sec_context;
	int			ret;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	ret = SPI_execute_with_args(sql, nargs, types, values, NULL, true, 0);
	SetUserIdAndSecContext(save_userid, save_sec_context);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "could not run \"%s\": %s", sql, SPI_result_code_string(ret));
}

/*
 * The business types the session's role may read, worked out at the first
 * call of the function fcinfo is for in a statement and kept in its
 * fn_extra for the others: no query at all for an administrator; for any
 * other role, one query of sched._viewer_types as the extension's owner.
 */
const ReadableTypes *
delaysched_readable_types(FunctionCallInfo fcinfo)
{
	FmgrInfo   *flinfo = fcinfo->flinfo;
	ReadableTypes *readable = (ReadableTypes *) flinfo->fn_extra;
	Oid			owner;

	if (readable != NULL)
		return readable;
	readable = MemoryContextAllocZero(flinfo->fn_mcxt, sizeof(ReadableTypes));
	owner = delaysched_extension_owner();
	readable->all = is_admin(GetUserId(), owner) || is_admin(GetOuterUserId(), owner);
	if (!readable->all)
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		delaysched_execute_as_owner(owner, "SELECT vt.biz_type FROM sched._viewer_types vt",
									0, NULL, NULL);
		readable->ntypes = (int) SPI_processed;
		readable->types = MemoryContextAlloc(flinfo->fn_mcxt,
											 sizeof(char *) * Max(readable->ntypes, 1));
		for (int i = 0; i < readable->ntypes; i++)
		{
			char	   *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

			readable->types[i] = MemoryContextStrdup(flinfo->fn_mcxt, name);
		}
		SPI_finish();
		qsort(readable->types, readable->ntypes, sizeof(char *), compare_names);
	}
	flinfo->fn_extra = readable;
	return readable;
}

/* May the role of delaysched_readable_types read biz_type? */
bool
delaysched_may_read(const ReadableTypes *readable, const char *biz_type)
{
	if (readable->all)
		return true;
	return bsearch(&biz_type, readable->types, readable->ntypes, sizeof(char *),
				   compare_names) != NULL;
}
