/*-------------------------------------------------------------------------
 *
 * message.h
 *		The NOTIFY payloads of deliveries and pull announcements.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_MESSAGE_H
#define DELAYSCHED_MESSAGE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/jsonb.h"

extern char *delaysched_delivery_message(int64 id, const char *biz_type, TimestampTz run_at,
										 Jsonb *payload, int32 attempt);
extern char *delaysched_ready_message(const char *biz_type);

#endif							/* DELAYSCHED_MESSAGE_H */
