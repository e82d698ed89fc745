/*-------------------------------------------------------------------------
 *
 * launcher.h
 *		The launcher, which starts and stops every served database's
 *		workers, and the probe, which looks for the extension in a database
 *		(launcher.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_LAUNCHER_H
#define DELAYSCHED_LAUNCHER_H

#include "postgres.h"

extern void delaysched_register_launcher(void);
extern PGDLLEXPORT void delaysched_launcher_main(Datum main_arg);
extern PGDLLEXPORT void delaysched_probe_main(Datum main_arg);

#endif							/* DELAYSCHED_LAUNCHER_H */
