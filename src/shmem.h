/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		State shared between the scanner worker and ordinary backends.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_SHMEM_H
#define DELAYSCHED_SHMEM_H

#include "storage/latch.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

/* What the scanner is doing, for sched.workers. */
typedef enum ScannerStatus
{
	SCANNER_STOPPED = 0,
	SCANNER_WAITING_FOR_EXTENSION,
	SCANNER_DELIVERING,
	SCANNER_SLEEPING
} ScannerStatus;

/*
 * One struct in shared memory.  Every field is protected by mutex; hold it
 * only to copy a few fields in or out, never across anything that can fail.
 */
typedef struct DelayschedShared
{
	slock_t		mutex;

	/* The scanner worker, or 0/NULL while none runs. */
	pid_t		scanner_pid;
	Latch	   *scanner_latch;
	ScannerStatus scanner_status;

	/*
	 * Earliest run_at committed by any backend since the scanner last looked
	 * (DT_NOEND when none).  Backends lower it after commit; the scanner
	 * resets it at the start of each tick.
	 */
	TimestampTz wake_at;

	/*
	 * When the sleeping scanner will wake by itself; 0 while it works.  A
	 * backend whose task is due before this sets the scanner's latch.
	 */
	TimestampTz sleep_until;

	/* For sched.workers. */
	TimestampTz last_tick;
	TimestampTz time_pointer;
	int64		delivered;
	int64		ticks;
} DelayschedShared;

extern DelayschedShared *delaysched_shared;

extern void delaysched_shmem_register(void);

#endif							/* DELAYSCHED_SHMEM_H */
