/*-------------------------------------------------------------------------
 *
 * lease.h
 *		The lease transition, written once.
 *
 * A task is delivered by leasing it, whichever way it goes out: NOTIFY from
 * the walk (walk.c) or from the drain (drain.c), a pull claim
 * (sched.claim), a hand-off to an HTTP worker (delivery.c) or its claim
 * (sched._http_claim), a redelivery after a lease ran out
 * (sched._expire_leases).  Every one sets the same columns the same way:
 *
 *	 state = 'd', attempt = attempt + 1, delivered_at = AT,
 *	 lease_until = AT + FOR, lease_owner = OWNER
 *
 * (OWNER is the HTTP worker sending it; NULL for the others.)  The walk and
 * the drain write their statements in C and use the macros below; the
 * functions written in SQL call sched._lease (lease.c), whose statement is
 * built from the same macro.  The row being updated must be aliased "t".
 *
 * The walk parks, in the same statement, the tasks it does not deliver
 * (state 'r', no lease, as for the drain or the HTTP workers): one UPDATE
 * costs a notify tick 40% less CPU than one for each.  So the transition
 * is written as "lease where LEASES holds, park elsewhere", and a plain
 * lease is that with LEASES = true, which the planner folds away.
 *
 * The arguments are SQL expressions; AT is evaluated once per column.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_LEASE_H
#define DELAYSCHED_LEASE_H

#define DELAYSCHED_LEASE_OR_PARK(leases, at, lease_for, owner) \
	"state = CASE WHEN " leases " THEN 'd' ELSE 'r' END::\"char\"," \
	" attempt = t.attempt + CASE WHEN " leases " THEN 1 ELSE 0 END," \
	" delivered_at = CASE WHEN " leases " THEN " at " ELSE t.delivered_at END," \
	" lease_until = CASE WHEN " leases " THEN " at " + " lease_for " END," \
	" lease_owner = CASE WHEN " leases " THEN " owner " END"

#define DELAYSCHED_LEASE(at, lease_for, owner) \
	DELAYSCHED_LEASE_OR_PARK("true", at, lease_for, owner)

#endif							/* DELAYSCHED_LEASE_H */
