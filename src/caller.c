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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

PG_FUNCTION_INFO_V1(delaysched_caller);

/*
 * sched._caller() RETURNS oid
 */
Datum
delaysched_caller(PG_FUNCTION_ARGS)
{
	PG_RETURN_OID(GetOuterUserId());
}
