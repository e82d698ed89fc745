/*
 * dsclient.h
 *		What the two libpq clients (test/dslisten.c, test/bench/dsbench.c)
 *		share: a microsecond clock and a reader for the flat JSON messages
 *		delaysched sends.  Header-only; each client is one C file.
 */
#ifndef DSCLIENT_H
#define DSCLIENT_H

#include <stdio.h>
#include <string.h>
#include <sys/time.h>

typedef long long usec_t;

/* This machine's clock, in microseconds since the epoch. */
static inline usec_t
now_us(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (usec_t) tv.tv_sec * 1000000 + tv.tv_usec;
}

/*
 * Find "key" in a JSON message and return a pointer to the start of its
 * value, or NULL.  Enough for delaysched's messages, whose keys are unique
 * and never appear inside strings; not a JSON parser.
 */
static inline const char *
json_value(const char *json, const char *key)
{
	char		quoted[64];
	const char *p;

	snprintf(quoted, sizeof(quoted), "\"%s\"", key);
	p = strstr(json, quoted);
	if (p == NULL)
		return NULL;
	p += strlen(quoted);
	while (*p == ' ' || *p == ':')
		p++;
	return p;
}

#endif							/* DSCLIENT_H */
