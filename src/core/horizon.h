/*-------------------------------------------------------------------------
 *
 * horizon.h
 *		The warning about a held xmin horizon (see horizon.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_HORIZON_H
#define DELAYSCHED_HORIZON_H

#include "postgres.h"

#include "datatype/timestamp.h"

extern TimestampTz delaysched_check_horizon(TimestampTz now);

#endif							/* DELAYSCHED_HORIZON_H */
