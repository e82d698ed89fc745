/*-------------------------------------------------------------------------
 *
 * http_handoff.h
 *		A scanner's commit handing leased http tasks straight to an HTTP
 *		worker (see http_handoff.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_HTTP_HANDOFF_H
#define DELAYSCHED_HTTP_HANDOFF_H

#include "fmgr.h"

#include "base/shmem.h"

/* The scanner's side, in a tick's transaction. */
extern int	delaysched_handoff_reserve(int want);
extern Datum delaysched_handoff_lease(PG_FUNCTION_ARGS);
extern void delaysched_handoff_add(int64 id, int16 bucket, int32 attempt,
								   TimestampTz lease_until);
extern void delaysched_handoff_settle(void);

/* The HTTP worker's side. */
extern void delaysched_handoff_clear(int worker);
extern int	delaysched_handoff_take(int worker, HttpHandoff *out, int max);
extern void delaysched_http_wake_all(void);

#endif							/* DELAYSCHED_HTTP_HANDOFF_H */
