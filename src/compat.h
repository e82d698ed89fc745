/*-------------------------------------------------------------------------
 *
 * compat.h
 *		Every PostgreSQL version difference delaysched cares about, in one
 *		place.  Code elsewhere calls the names defined here and never tests
 *		PG_VERSION_NUM itself.
 *
 * Supported: PostgreSQL 13 to 17 (developed against 15).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_COMPAT_H
#define DELAYSCHED_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM < 130000
#error "delaysched requires PostgreSQL 13 or later"
#endif

/*
 * PostgreSQL 15 added shmem_request_hook; before it, shared memory had to be
 * requested directly from _PG_init.
 */
#if PG_VERSION_NUM >= 150000
#define DELAYSCHED_HAS_SHMEM_REQUEST_HOOK 1
#endif

/* MarkGUCPrefixReserved replaced EmitWarningsOnPlaceholders in 15. */
#if PG_VERSION_NUM >= 150000
#define delaysched_reserve_guc_prefix(prefix) MarkGUCPrefixReserved(prefix)
#else
#define delaysched_reserve_guc_prefix(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/* The stock SIGTERM handler moved from bgworker's die to postmaster/interrupt.h in 13. */
#include "postmaster/interrupt.h"

/* BackgroundWorkerInitializeConnection gained a flags argument in 11; fine for 13+. */

#endif							/* DELAYSCHED_COMPAT_H */
