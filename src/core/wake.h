/*-------------------------------------------------------------------------
 *
 * wake.h
 *		Waking the scanner after a commit that added a task due sooner, and
 *		the drain after one that parked tasks or freed a slot, the HTTP
 *		workers after one that parked tasks of an http type.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_WAKE_H
#define DELAYSCHED_WAKE_H

#include "fmgr.h"

extern void delaysched_drain_after_commit(void);
extern void delaysched_note_parked(const char *biz);
extern void delaysched_http_after_commit(void);
extern Datum delaysched_wake(PG_FUNCTION_ARGS);
extern Datum delaysched_wake_drain(PG_FUNCTION_ARGS);

#endif							/* DELAYSCHED_WAKE_H */
