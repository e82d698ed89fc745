/*-------------------------------------------------------------------------
 *
 * shares.h
 *		Sharing a number of deliveries across business types by weight
 *		(see shares.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_SHARES_H
#define DELAYSCHED_SHARES_H

/* One type's claim on a share-out. */
typedef struct ShareClaim
{
	int			weight;			/* sched.biz.weight, at least 1 */
	int			cap;			/* the most it can use */
	int			share;			/* out: what it gets */
} ShareClaim;

extern void delaysched_share_out(ShareClaim *claims, int count, int total, int *rotation);

#endif							/* DELAYSCHED_SHARES_H */
