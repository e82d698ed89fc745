/*-------------------------------------------------------------------------
 *
 * spi_plans.h
 *		Small helpers for the statements the workers prepare once and keep
 *		(tick.c, drain.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_SPI_PLANS_H
#define DELAYSCHED_SPI_PLANS_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "executor/spi.h"

extern SPIPlanPtr delaysched_prepare_kept(const char *sql, int nargs, Oid *types);
extern void delaysched_free_plan(SPIPlanPtr *plan);
extern bool delaysched_fetch_timestamp(SPIPlanPtr plan, Datum *values, TimestampTz *result);
extern int	delaysched_fetch_int(SPIPlanPtr plan, Datum *values);

#endif							/* DELAYSCHED_SPI_PLANS_H */
