/*-------------------------------------------------------------------------
 *
 * http_perimeter.c
 *		The HTTP workers' perimeter: which destinations a webhook may reach.
 *
 * Two lists, each a comma- or space-separated string parameter:
 *
 *	 delaysched.http_allowed_hosts	"*" (the default: anywhere not denied),
 *									or entries that each allow a host name
 *									("hooks.example.com"), every subdomain of
 *									a domain ("*.example.com"), or addresses
 *									("10.1.2.3", "10.0.0.0/8", "fd00::/8");
 *	 delaysched.http_denied_hosts		addresses and networks never connected
 *									to, whatever the allow list says; by
 *									default link-local and the cloud metadata
 *									services.
 *
 * A request may go ahead when its URL's host is allowed by name, or when
 * the address it connects to is allowed; and in both cases only if that
 * address is not denied.  Addresses are checked after DNS resolution, at
 * every connection libcurl opens (the worker's CURLOPT_OPENSOCKETFUNCTION),
 * so a name that resolves to a denied address is refused, and so is each
 * hop of a redirect.  An IPv4 address written as IPv6 (::ffff:a.b.c.d,
 * 64:ff9b::a.b.c.d of NAT64, ::a.b.c.d) is checked as the IPv4 address it
 * is.
 *
 * The lists are parsed by the parameters' check hooks into a flat array of
 * entries (GUC "extra" data), so that the check at connection time only
 * compares bytes: it runs inside a libcurl callback, where nothing may
 * allocate memory or raise an error.
 *
 * IDENTIFICATION
 *	  src/http/http_perimeter.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>

#include "compat.h"
#include "http/http.h"

char	   *delaysched_http_allowed_hosts = NULL;
char	   *delaysched_http_denied_hosts = NULL;

#define HOST_ENTRY_MAX	256

typedef enum HostEntryKind
{
	ENTRY_ANY,					/* "*" */
	ENTRY_NAME,					/* an exact host name */
	ENTRY_SUFFIX,				/* "*.example.com": name holds ".example.com" */
	ENTRY_NETWORK				/* an address with a prefix length */
} HostEntryKind;

typedef struct HostEntry
{
	HostEntryKind kind;
	int			family;			/* AF_INET or AF_INET6 (ENTRY_NETWORK) */
	int			prefix;			/* bits that must match */
	unsigned char addr[16];
	char		name[HOST_ENTRY_MAX];
} HostEntry;

/* A parsed list: the GUC "extra" of one parameter. */
typedef struct HostList
{
	int			count;
	HostEntry	entries[FLEXIBLE_ARRAY_MEMBER];
} HostList;

static const HostList *allowed_list = NULL;
static const HostList *denied_list = NULL;

/* Parse "addr" or "addr/prefix" into *entry; false if it is not one. */
static bool
parse_network(const char *text, HostEntry *entry)
{
	char		copy[HOST_ENTRY_MAX];
	char	   *slash;
	int			max_prefix;

	strlcpy(copy, text, sizeof(copy));
	slash = strchr(copy, '/');
	if (slash != NULL)
		*slash = '\0';
	if (inet_pton(AF_INET, copy, entry->addr) == 1)
	{
		entry->family = AF_INET;
		max_prefix = 32;
	}
	else if (inet_pton(AF_INET6, copy, entry->addr) == 1)
	{
		entry->family = AF_INET6;
		max_prefix = 128;
	}
	else
		return false;

	entry->prefix = max_prefix;
	if (slash != NULL)
	{
		char	   *end;
		long		prefix = strtol(slash + 1, &end, 10);

		if (slash[1] == '\0' || *end != '\0' || prefix < 0 || prefix > max_prefix)
			return false;
		entry->prefix = (int) prefix;
	}
	entry->kind = ENTRY_NETWORK;
	return true;
}

/* A host name as a URL may carry it: letters, digits, '-', '.', '_'. */
static bool
valid_host_name(const char *name)
{
	if (*name == '\0' || *name == '.')
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char) *p) && *p != '-' && *p != '.' && *p != '_')
			return false;
	return true;
}

/*
 * Check hook of both parameters: parse the list into a HostList, kept as
 * the parameter's extra data.
 */
bool
delaysched_check_host_list(char **newval, void **extra, GucSource source)
{
	const char *p = *newval ? *newval : "";
	int			capacity = 1;
	HostList   *list;

	for (const char *q = p; *q; q++)
		if (*q == ',' || *q == ' ' || *q == '\t')
			capacity++;
	/* GUC extra data: PostgreSQL frees it (compat.h). */
	list = (HostList *) delaysched_guc_extra_alloc(offsetof(HostList, entries) +
												   sizeof(HostEntry) * capacity);
	if (list == NULL)
	{
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		return false;
	}
	list->count = 0;

	while (*p)
	{
		char		item[HOST_ENTRY_MAX];
		size_t		len = strcspn(p, ", \t");
		HostEntry  *entry = &list->entries[list->count];

		if (len == 0)
		{
			p++;
			continue;
		}
		if (len >= sizeof(item))
		{
			GUC_check_errdetail("Entry \"%.40s...\" is too long.", p);
			delaysched_guc_extra_free(list);
			return false;
		}
		memcpy(item, p, len);
		item[len] = '\0';
		p += len;

		memset(entry, 0, sizeof(*entry));
		if (strcmp(item, "*") == 0)
			entry->kind = ENTRY_ANY;
		else if (parse_network(item, entry))
			 /* kind set */ ;
		else if (strncmp(item, "*.", 2) == 0 && valid_host_name(item + 2))
		{
			entry->kind = ENTRY_SUFFIX;
			strlcpy(entry->name, item + 1, sizeof(entry->name));
		}
		else if (strchr(item, '/') == NULL && strchr(item, ':') == NULL && valid_host_name(item))
		{
			entry->kind = ENTRY_NAME;
			strlcpy(entry->name, item, sizeof(entry->name));
		}
		else
		{
			GUC_check_errdetail("\"%s\" is not \"*\", a host name, \"*.domain\", an address or a network (address/bits).",
								item);
			delaysched_guc_extra_free(list);
			return false;
		}
		list->count++;
	}
	*extra = list;
	return true;
}

/*
 * Check hook of delaysched.http_denied_hosts: the allow list's syntax, but
 * addresses and networks only (names are checked against URLs, and a
 * denied name would be passed by an address).
 */
bool
delaysched_check_denied_list(char **newval, void **extra, GucSource source)
{
	HostList   *list;

	if (!delaysched_check_host_list(newval, extra, source))
		return false;
	list = (HostList *) *extra;
	for (int i = 0; i < list->count; i++)
	{
		if (list->entries[i].kind != ENTRY_NETWORK)
		{
			GUC_check_errdetail("The deny list holds addresses and networks (address/bits), not \"%s\".",
								list->entries[i].kind == ENTRY_ANY ? "*" : list->entries[i].name);
			delaysched_guc_extra_free(list);
			*extra = NULL;
			return false;
		}
	}
	return true;
}

void
delaysched_assign_allowed_hosts(const char *newval, void *extra)
{
	allowed_list = (const HostList *) extra;
}

void
delaysched_assign_denied_hosts(const char *newval, void *extra)
{
	denied_list = (const HostList *) extra;
}

bool
delaysched_host_allowed_by_name(const char *host)
{
	size_t		host_len = strlen(host);

	/* No list (its parameter never parsed): fail closed. */
	if (allowed_list == NULL)
		return false;
	for (int i = 0; i < allowed_list->count; i++)
	{
		const HostEntry *e = &allowed_list->entries[i];

		if (e->kind == ENTRY_ANY)
			return true;
		if (e->kind == ENTRY_NAME && pg_strcasecmp(e->name, host) == 0)
			return true;
		if (e->kind == ENTRY_SUFFIX)
		{
			size_t		suffix_len = strlen(e->name);

			if (host_len > suffix_len &&
				pg_strcasecmp(host + host_len - suffix_len, e->name) == 0)
				return true;
		}
	}
	return false;
}

/* Does the network entry e contain the address (family, bytes)? */
static bool
network_contains(const HostEntry *e, int family, const unsigned char *bytes)
{
	int			whole = e->prefix / 8;
	int			rest = e->prefix % 8;

	if (e->kind != ENTRY_NETWORK || e->family != family)
		return false;
	if (memcmp(e->addr, bytes, whole) != 0)
		return false;
	if (rest != 0)
	{
		unsigned char mask = (unsigned char) (0xFF << (8 - rest));

		if ((e->addr[whole] & mask) != (bytes[whole] & mask))
			return false;
	}
	return true;
}

/* The caller sees to a NULL list (see delaysched_address_refusal). */
static bool
list_contains(const HostList *list, int family, const unsigned char *bytes)
{
	for (int i = 0; i < list->count; i++)
		if (network_contains(&list->entries[i], family, bytes))
			return true;
	return false;
}

const char *
delaysched_address_refusal(const struct sockaddr *addr, bool allowed_by_name,
						   char *buf, size_t buflen)
{
	unsigned char bytes[16];
	int			family;
	char		shown[INET6_ADDRSTRLEN];

	if (addr->sa_family == AF_INET)
	{
		family = AF_INET;
		memcpy(bytes, &((const struct sockaddr_in *) addr)->sin_addr, 4);
	}
	else if (addr->sa_family == AF_INET6)
	{
		const unsigned char *v6 = (const unsigned char *) &((const struct sockaddr_in6 *) addr)->sin6_addr;
		static const unsigned char v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
		static const unsigned char nat64[12] = {0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0};
		static const unsigned char v4_compatible[12] = {0};

		/*
		 * An IPv4 address inside IPv6: mapped (::ffff:a.b.c.d), translated
		 * by NAT64's well-known prefix (64:ff9b::a.b.c.d), or the old
		 * compatible form (::a.b.c.d, but not :: or ::1).
		 */
		if (memcmp(v6, v4_mapped, 12) == 0 || memcmp(v6, nat64, 12) == 0 ||
			(memcmp(v6, v4_compatible, 12) == 0 && v6[12] != 0))
		{
			family = AF_INET;
			memcpy(bytes, v6 + 12, 4);
		}
		else
		{
			family = AF_INET6;
			memcpy(bytes, v6, 16);
		}
	}
	else
	{
		snprintf(buf, buflen, "destination refused: not an IPv4 or IPv6 address");
		return buf;
	}

	if (inet_ntop(family, bytes, shown, sizeof(shown)) == NULL)
		strlcpy(shown, "?", sizeof(shown));

	/*
	 * Either list missing (its parameter never parsed; cannot happen once
	 * the parameters are defined): fail closed, whatever the other says.
	 */
	if (denied_list == NULL || allowed_list == NULL)
	{
		snprintf(buf, buflen, "destination %s refused: the perimeter's lists are not loaded", shown);
		return buf;
	}
	if (list_contains(denied_list, family, bytes))
	{
		snprintf(buf, buflen, "destination %s is blocked by delaysched.http_denied_hosts", shown);
		return buf;
	}
	if (!allowed_by_name && !list_contains(allowed_list, family, bytes))
	{
		snprintf(buf, buflen, "destination %s is not in delaysched.http_allowed_hosts", shown);
		return buf;
	}
	return NULL;
}

/*
 * Define delaysched.http_allowed_hosts and delaysched.http_denied_hosts,
 * whose hooks are above.  Called once from _PG_init, after the other
 * parameters (base/guc.c).
 */
void
delaysched_define_perimeter_gucs(void)
{
	DefineCustomStringVariable("delaysched.http_allowed_hosts",
							   "Where webhooks may go: \"*\", host names, \"*.domain\", addresses or networks.",
							   "Checked against the URL's host and, after DNS resolution, the address.",
							   &delaysched_http_allowed_hosts,
							   "*",
							   PGC_SUSET,
							   0,
							   delaysched_check_host_list, delaysched_assign_allowed_hosts, NULL);

	DefineCustomStringVariable("delaysched.http_denied_hosts",
							   "Addresses and networks webhooks never reach, whatever http_allowed_hosts says.",
							   "Checked after DNS resolution, at every connection and redirect.",
							   &delaysched_http_denied_hosts,
							   DELAYSCHED_DEFAULT_DENIED_HOSTS,
							   PGC_SUSET,
							   0,
							   delaysched_check_denied_list, delaysched_assign_denied_hosts, NULL);
}
