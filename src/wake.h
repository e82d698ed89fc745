/*-------------------------------------------------------------------------
 *
 * wake.h
 *		Waking the scanner after a commit that added a task due sooner.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_WAKE_H
#define DELAYSCHED_WAKE_H

#include "fmgr.h"

extern Datum delaysched_wake(PG_FUNCTION_ARGS);

#endif							/* DELAYSCHED_WAKE_H */
