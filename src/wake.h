/*-------------------------------------------------------------------------
 *
 * wake.h
 *		Waking the scanner after a commit that added a task due sooner, and
 *		the drain after one that parked tasks or freed a slot.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_WAKE_H
#define DELAYSCHED_WAKE_H

#include "fmgr.h"

extern void delaysched_drain_after_commit(void);
extern void delaysched_hints_after_commit(void);
extern Datum delaysched_wake(PG_FUNCTION_ARGS);
extern Datum delaysched_wake_drain(PG_FUNCTION_ARGS);

#endif							/* DELAYSCHED_WAKE_H */
