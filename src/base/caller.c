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
 * IDENTIFICATION
 *	  src/base/caller.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"

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
