/*-------------------------------------------------------------------------
 *
 * drain.h
 *		The drain: delivering parked tasks of limited business types as
 *		tokens and slots allow (see drain.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_DRAIN_H
#define DELAYSCHED_DRAIN_H

#include "postgres.h"

#include "datatype/timestamp.h"

typedef struct DrainResult
{
	int64		delivered;
	TimestampTz next;			/* when the drain should run again; DT_NOEND
								 * if only a commit should bring it back */
} DrainResult;

extern void delaysched_drain(TimestampTz now, int batch, DrainResult *result);

#endif							/* DELAYSCHED_DRAIN_H */
