/*-------------------------------------------------------------------------
 *
 * firing.h
 *		Telling the schedules that their firings are being delivered, from
 *		the C paths that deliver (see firing.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_FIRING_H
#define DELAYSCHED_FIRING_H

#include "postgres.h"

#include "datatype/timestamp.h"

/* The first deliveries of schedule firings among one statement's rows. */
typedef struct FiringBatch
{
	int			n;
	int			capacity;
	Datum	   *ids;
	Datum	   *buckets;
	Datum	   *run_ats;
	Datum	   *schedules;
	int			nsuppressed;
	int64	   *suppressed;		/* sorted: the ids not to send */
} FiringBatch;

extern void delaysched_firings_init(FiringBatch *batch);
extern void delaysched_firings_add(FiringBatch *batch, int64 id, int16 bucket,
								   TimestampTz run_at, Datum schedule);
extern void delaysched_firings_fire(FiringBatch *batch, TimestampTz now);
extern bool delaysched_firing_suppressed(const FiringBatch *batch, int64 id);

#endif							/* DELAYSCHED_FIRING_H */
