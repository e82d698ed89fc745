/*-------------------------------------------------------------------------
 *
 * message.h
 *		The NOTIFY payloads of deliveries and pull announcements, and the
 *		body of an HTTP delivery (the same message).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_MESSAGE_H
#define DELAYSCHED_MESSAGE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "utils/jsonb.h"

extern void delaysched_append_message(StringInfo buf, int64 id, const char *biz_type,
									  TimestampTz run_at, Jsonb *payload, int32 attempt,
									  const char *schedule);
extern char *delaysched_delivery_message(int64 id, const char *biz_type, TimestampTz run_at,
										 Jsonb *payload, int32 attempt, const char *schedule,
										 int *omitted_bytes);
extern void delaysched_note_payload_omitted(int64 id, int16 bucket, int omitted_bytes);
extern char *delaysched_ready_message(const char *biz_type);

#endif							/* DELAYSCHED_MESSAGE_H */
