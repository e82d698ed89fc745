/*-------------------------------------------------------------------------
 *
 * shares.c
 *		Sharing a number of deliveries across business types by weight:
 *		the drain (drain.c) shares its batch and the global cap's tokens
 *		among rate-limited types, the fair walk (fair_walk.c) a statement's
 *		batch among the types with due tasks in a range.
 *
 * Weighted water-filling.  Every type may use up to its cap.  Taken in
 * increasing order of cap per unit of weight, each type gets its weight's
 * part of what is left (weight / the weights not served yet), or its cap
 * if that is less; what a type cannot use so goes to the types after it,
 * in proportion to their weights.  The parts are rounded down; what the
 * rounding leaves goes one by one to the types that can take more, in
 * turn from *rotation, which moves on at every share-out, so that no type
 * is favoured by the rounding over time.
 *
 * With weights 3 and 1, a batch of 1,000 and both types able to take it
 * all, the shares are 750 and 250; if the first can use only 100, the
 * second gets 900.
 *
 * IDENTIFICATION
 *	  src/core/shares.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "core/core.h"

static int
compare_cap_per_weight(const void *a, const void *b)
{
	const ShareClaim *x = *(ShareClaim *const *) a;
	const ShareClaim *y = *(ShareClaim *const *) b;

	/* x->cap / x->weight against y->cap / y->weight, without division. */
	int64		left = (int64) x->cap * y->weight;
	int64		right = (int64) y->cap * x->weight;

	return (left > right) - (left < right);
}

/*
 * Share "total" across claims[0 .. count-1] (sets each share; the sum is at
 * most total and at most the sum of the caps).
 */
void
delaysched_share_out(ShareClaim *claims, int count, int total, int *rotation)
{
	ShareClaim **order;
	int64		weights = 0;
	int			left = Max(total, 0);

	if (count <= 0)
		return;
	order = palloc(sizeof(ShareClaim *) * count);
	for (int i = 0; i < count; i++)
	{
		order[i] = &claims[i];
		claims[i].weight = Max(claims[i].weight, 1);
		claims[i].cap = Max(claims[i].cap, 0);
		weights += claims[i].weight;
	}
	qsort(order, count, sizeof(ShareClaim *), compare_cap_per_weight);
	for (int i = 0; i < count; i++)
	{
		ShareClaim *c = order[i];
		int			part = (int) ((int64) left * c->weight / weights);

		c->share = Min(c->cap, part);
		left -= c->share;
		weights -= c->weight;
	}
	for (int k = 0; left > 0 && k < count; k++)
	{
		ShareClaim *c = &claims[(*rotation + k) % count];

		if (c->share < c->cap)
		{
			c->share++;
			left--;
		}
	}
	*rotation = (*rotation + 1) % count;
	pfree(order);
}
