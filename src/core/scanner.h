/*-------------------------------------------------------------------------
 *
 * scanner.h
 *		The scanner background workers (delaysched.workers of them per
 *		database, started by the launcher), which walk the ranges and
 *		deliver tasks as they fall due (scanner.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_SCANNER_H
#define DELAYSCHED_SCANNER_H

#include "postgres.h"

extern PGDLLEXPORT void delaysched_scanner_main(Datum main_arg);

#endif							/* DELAYSCHED_SCANNER_H */
