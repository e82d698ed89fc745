/*-------------------------------------------------------------------------
 *
 * utility.h
 *		The hook on database and extension commands (utility.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_UTILITY_H
#define DELAYSCHED_UTILITY_H

extern void delaysched_install_utility_hook(void);

#endif							/* DELAYSCHED_UTILITY_H */
