/*-------------------------------------------------------------------------
 *
 * schedule_parse.c
 *		Parsing of schedule rules into a ScheduleRule.
 *
 * The kind of a rule is told by its text:
 *
 *	 "@daily", "@hourly", ...	a cron macro (the whole text)
 *	 "every 30 seconds"			a fixed interval of elapsed time
 *	 "{...}" or "[...]"			a readable repeat rule, a JSON object
 *	 anything else				cron, 5 fields (minute hour day-of-month
 *								month day-of-week) or 6 (seconds first)
 *
 * Every refusal is an ERRCODE_INVALID_PARAMETER_VALUE error whose message
 * quotes the schedule and names the bad part, with a hint showing a valid
 * rule of the same kind.  doc/schedule_rules.md is the reference.
 *
 * IDENTIFICATION
 *	  src/schedule/schedule_parse.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "compat.h"
#include "schedule/schedule.h"

#define CRON_HINT \
	"A cron rule has 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), such as '*/15 * * * *'."
#define MACRO_HINT \
	"The cron macros are @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly."
#define EVERY_HINT \
	"An interval rule is \"every N unit\" with a positive whole N and a unit of seconds, minutes, hours, days or weeks, such as 'every 30 seconds'."
#define RULE_HINT \
	"A readable rule is a JSON object with a \"unit\" (hour, day, week, month, year or workday), such as '{\"unit\": \"month\", \"days\": [1, 15], \"at\": \"09:00\"}'."

/* Longest interval of an "every" rule: 10 years of 365.25 days. */
#define EVERY_MAX_SECONDS	INT64CONST(315576000)

/* Largest "every" of a readable rule. */
#define RULE_MAX_EVERY		1000

/* Report a refused schedule: the message names the text and the bad part. */
#define schedule_error(text, hint, ...) \
	ereport(ERROR, \
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE), \
			 errmsg("invalid schedule \"%s\": %s", (text), psprintf(__VA_ARGS__)), \
			 errhint("%s", (hint))))

/* The fields of a cron rule. */
typedef struct CronField
{
	const char *name;			/* as in error messages */
	int			min;
	int			max;
	const char *const *names;	/* names of values, from min; or NULL */
} CronField;

static const char *const month_names[] = {
	"jan", "feb", "mar", "apr", "may", "jun",
	"jul", "aug", "sep", "oct", "nov", "dec", NULL
};

static const char *const wday_names[] = {
	"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL
};

enum
{
	CRON_SECOND,
	CRON_MINUTE,
	CRON_HOUR,
	CRON_MDAY,
	CRON_MONTH,
	CRON_WDAY
};

static const CronField cron_fields[] = {
	{"seconds", 0, 59, NULL},
	{"minute", 0, 59, NULL},
	{"hour", 0, 23, NULL},
	{"day-of-month", 1, 31, NULL},
	{"month", 1, 12, month_names},
	{"day-of-week", 0, 7, wday_names}
};

/* The cron macros and what they stand for. */
static const struct
{
	const char *name;
	const char *rule;
}			cron_macros[] = {
	{"@yearly", "0 0 1 1 *"},
	{"@annually", "0 0 1 1 *"},
	{"@monthly", "0 0 1 * *"},
	{"@weekly", "0 0 * * 0"},
	{"@daily", "0 0 * * *"},
	{"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"}
};

static const struct
{
	const char *name;
	ScheduleUnit unit;
}			rule_units[] = {
	{"hour", SCHEDULE_UNIT_HOUR},
	{"day", SCHEDULE_UNIT_DAY},
	{"week", SCHEDULE_UNIT_WEEK},
	{"month", SCHEDULE_UNIT_MONTH},
	{"year", SCHEDULE_UNIT_YEAR},
	{"workday", SCHEDULE_UNIT_WORKDAY}
};

/* Days in each month of a leap year: what a rule may ever match. */
static const int max_month_days[13] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

static void parse_cron(ScheduleRule *rule, const char *text, const char *cron);
static void parse_every(ScheduleRule *rule, const char *text);
static void parse_rule(ScheduleRule *rule, const char *text);

/*
 * Parse a schedule's text into a palloc'd rule; ereport if it is not valid.
 */
ScheduleRule *
delaysched_parse_schedule(const char *text)
{
	ScheduleRule *rule;
	const char *p = text;
	size_t		len = strlen(text);

	if (len > SCHEDULE_MAX_LENGTH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schedule is too long"),
				 errdetail("A schedule has at most %d bytes; this one has %zu.",
						   SCHEDULE_MAX_LENGTH, len),
				 errhint(CRON_HINT)));

	rule = palloc0(sizeof(ScheduleRule));
	while (isspace((unsigned char) *p))
		p++;
	if (*p == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schedule is empty"),
				 errhint(CRON_HINT)));

	if (*p == '{' || *p == '[')
		parse_rule(rule, text);
	else if (pg_strncasecmp(p, "every", 5) == 0 &&
			 (p[5] == '\0' || isspace((unsigned char) p[5])))
		parse_every(rule, text);
	else if (*p == '@')
	{
		const char *end = p + strlen(p);
		char	   *word;
		int			i;

		while (end > p && isspace((unsigned char) end[-1]))
			end--;
		word = pnstrdup(p, end - p);
		for (i = 0; i < (int) lengthof(cron_macros); i++)
		{
			if (pg_strcasecmp(word, cron_macros[i].name) == 0)
			{
				parse_cron(rule, text, cron_macros[i].rule);
				return rule;
			}
		}
		schedule_error(text, MACRO_HINT, "unknown macro \"%s\"", word);
	}
	else
		parse_cron(rule, text, text);
	return rule;
}

/*
 * The name of a rule's kind, as sched._check_schedule returns it.
 */
const char *
delaysched_schedule_kind_name(const ScheduleRule *rule)
{
	switch (rule->kind)
	{
		case SCHEDULE_CRON:
			return "cron";
		case SCHEDULE_EVERY:
			return "every";
		case SCHEDULE_RULE:
			return "rule";
	}
	return "unknown";
}

/* ---------------------------------------------------------------------
 * cron
 * ---------------------------------------------------------------------
 */

/*
 * The character at p, whole (a multibyte one is several bytes), for an
 * error message to quote.
 */
static char *
character_at(const char *p)
{
	return pnstrdup(p, pg_mblen(p));
}

/*
 * Read a value of a cron field at *pp: digits, or a name the field knows.
 * Advances *pp past it.
 */
static int
cron_value(const char *text, const CronField *field, const char **pp)
{
	const char *p = *pp;
	int			value = 0;

	if (isdigit((unsigned char) *p))
	{
		int			digits = 0;

		while (isdigit((unsigned char) *p))
		{
			if (++digits > 6)
				schedule_error(text, CRON_HINT,
							   "a value is out of range in the %s field", field->name);
			value = value * 10 + (*p - '0');
			p++;
		}
		if (value < field->min || value > field->max)
			schedule_error(text, CRON_HINT,
						   "%d is out of range in the %s field (%d to %d)",
						   value, field->name, field->min, field->max);
	}
	else if (isalpha((unsigned char) *p) && field->names != NULL)
	{
		const char *start = p;
		int			i;

		/* A word, letters beyond ASCII included, so that it is named whole. */
		while (isalpha((unsigned char) *p) || IS_HIGHBIT_SET(*p))
			p += pg_mblen(p);
		for (i = 0; field->names[i] != NULL; i++)
		{
			if (p - start == 3 && pg_strncasecmp(start, field->names[i], 3) == 0)
				break;
		}
		if (field->names[i] == NULL)
			schedule_error(text, CRON_HINT, "unknown name \"%s\" in the %s field",
						   pnstrdup(start, p - start), field->name);
		value = field->min + i;
	}
	else if (*p == '\0')
		schedule_error(text, CRON_HINT, "a value is missing in the %s field",
					   field->name);
	else
		schedule_error(text, CRON_HINT, "unexpected \"%s\" in the %s field",
					   character_at(p), field->name);
	*pp = p;
	return value;
}

/*
 * Parse one cron field (the text of one field, NUL-terminated) into a bit
 * mask.  The day-of-week field's 7 is Sunday (bit 0).
 */
static uint64
parse_cron_field(const char *text, const char *ftext, int fieldno)
{
	const CronField *field = &cron_fields[fieldno];
	uint64		mask = 0;
	const char *p = ftext;

	for (;;)
	{
		const char *item = p;
		int			lo,
					hi,
					step = 1;
		int			v;

		if (*p == ',' || *p == '\0')
			schedule_error(text, CRON_HINT, "empty list item in the %s field",
						   field->name);
		if (*p == '*')
		{
			lo = field->min;
			/* a star over the days of the week is 0-6: 7 repeats Sunday */
			hi = (fieldno == CRON_WDAY) ? 6 : field->max;
			p++;
		}
		else
		{
			lo = hi = cron_value(text, field, &p);
			if (*p == '-')
			{
				p++;
				hi = cron_value(text, field, &p);
				if (hi < lo)
					schedule_error(text, CRON_HINT,
								   "range \"%s\" is reversed in the %s field",
								   pnstrdup(item, p - item), field->name);
			}
			else if (*p == '/')
				hi = field->max;	/* "a/n": a through the largest value */
		}
		if (*p == '/')
		{
			int			digits = 0;

			p++;
			if (!isdigit((unsigned char) *p))
				schedule_error(text, CRON_HINT,
							   "a step must be a positive whole number in the %s field",
							   field->name);
			step = 0;
			while (isdigit((unsigned char) *p))
			{
				if (++digits > 6)
					schedule_error(text, CRON_HINT,
								   "step is out of range in the %s field", field->name);
				step = step * 10 + (*p - '0');
				p++;
			}
			if (step == 0)
				schedule_error(text, CRON_HINT, "step 0 in the %s field",
							   field->name);
			if (step > field->max - field->min + 1)
				schedule_error(text, CRON_HINT,
							   "step %d is out of range in the %s field (1 to %d)",
							   step, field->name, field->max - field->min + 1);
		}
		if (*p != ',' && *p != '\0')
			schedule_error(text, CRON_HINT, "unexpected \"%s\" in the %s field",
						   character_at(p), field->name);

		for (v = lo; v <= hi; v += step)
			mask |= UINT64CONST(1) << ((fieldno == CRON_WDAY && v == 7) ? 0 : v);

		if (*p == '\0')
			break;
		p++;					/* the comma */
	}
	return mask;
}

/*
 * Parse cron fields (cron: the rule itself or a macro's expansion; text:
 * what the user wrote, for messages).
 */
static void
parse_cron(ScheduleRule *rule, const char *text, const char *cron)
{
	char	   *copy = pstrdup(cron);
	char	   *fields[7];
	int			nfields = 0;
	char	   *p = copy;
	int			i;
	bool		fires;

	for (;;)
	{
		while (isspace((unsigned char) *p))
			*p++ = '\0';
		if (*p == '\0')
			break;
		if (nfields < (int) lengthof(fields))
			fields[nfields] = p;
		nfields++;
		while (*p != '\0' && !isspace((unsigned char) *p))
			p++;
	}
	if (nfields != 5 && nfields != 6)
		schedule_error(text, CRON_HINT, "a cron rule has 5 or 6 fields, not %d",
					   nfields);

	rule->kind = SCHEDULE_CRON;
	rule->seconds = (nfields == 6) ? parse_cron_field(text, fields[0], CRON_SECOND)
		: UINT64CONST(1);
	for (i = CRON_MINUTE; i <= CRON_WDAY; i++)
	{
		const char *f = fields[(nfields == 6) ? i : i - 1];
		uint64		mask = parse_cron_field(text, f, i);

		switch (i)
		{
			case CRON_MINUTE:
				rule->minutes = mask;
				break;
			case CRON_HOUR:
				rule->hours = (uint32) mask;
				/* a specific local time: the hour is neither '*' nor a step */
				rule->fixed_time = (f[0] != '*' && strchr(f, '/') == NULL);
				break;
			case CRON_MDAY:
				rule->mdays = (uint32) mask;
				rule->dom_restricted = (f[0] != '*');
				break;
			case CRON_MONTH:
				rule->months = (uint32) mask;
				break;
			case CRON_WDAY:
				rule->wdays = (uint32) mask;
				rule->dow_restricted = (f[0] != '*');
				break;
		}
	}

	/*
	 * When the day of the month decides (alone or with the day of the week),
	 * some chosen month must have a chosen day; the days of the week then
	 * come round over the years.
	 */
	if (rule->dom_restricted && rule->dow_restricted)
		return;
	fires = false;
	for (i = 1; i <= 12 && !fires; i++)
	{
		if ((rule->months & (1U << i)) &&
			(rule->mdays & ((UINT64CONST(1) << (max_month_days[i] + 1)) - 2)))
			fires = true;
	}
	if (!fires)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid schedule \"%s\": the rule never fires", text),
				 errdetail("None of the months in the month field has any of the days in the day-of-month field."),
				 errhint(CRON_HINT)));
}

/* ---------------------------------------------------------------------
 * every N unit
 * ---------------------------------------------------------------------
 */

static void
parse_every(ScheduleRule *rule, const char *text)
{
	char	   *copy = pstrdup(text);
	char	   *words[4];
	int			nwords = 0;
	char	   *p = copy;
	int64		count = 0;
	int64		unit_seconds;
	const char *unit;
	size_t		ulen;

	for (;;)
	{
		while (isspace((unsigned char) *p))
			*p++ = '\0';
		if (*p == '\0')
			break;
		if (nwords < (int) lengthof(words))
			words[nwords] = p;
		nwords++;
		while (*p != '\0' && !isspace((unsigned char) *p))
			p++;
	}
	if (nwords != 3)
		schedule_error(text, EVERY_HINT,
					   "an interval rule has 3 words (every N unit), not %d", nwords);

	for (p = words[1]; *p != '\0'; p++)
	{
		if (!isdigit((unsigned char) *p))
			schedule_error(text, EVERY_HINT, "\"%s\" is not a positive whole number",
						   words[1]);
		if (count <= EVERY_MAX_SECONDS)
			count = count * 10 + (*p - '0');
	}
	if (count == 0)
		schedule_error(text, EVERY_HINT, "the interval must be greater than zero");

	unit = words[2];
	ulen = strlen(unit);
	if (ulen > 1 && pg_ascii_tolower((unsigned char) unit[ulen - 1]) == 's')
		ulen--;					/* plural */
	if (ulen == 6 && pg_strncasecmp(unit, "second", 6) == 0)
		unit_seconds = 1;
	else if (ulen == 6 && pg_strncasecmp(unit, "minute", 6) == 0)
		unit_seconds = SECS_PER_MINUTE;
	else if (ulen == 4 && pg_strncasecmp(unit, "hour", 4) == 0)
		unit_seconds = SECS_PER_HOUR;
	else if (ulen == 3 && pg_strncasecmp(unit, "day", 3) == 0)
		unit_seconds = SECS_PER_DAY;
	else if (ulen == 4 && pg_strncasecmp(unit, "week", 4) == 0)
		unit_seconds = 7 * SECS_PER_DAY;
	else
		schedule_error(text, EVERY_HINT, "unknown unit \"%s\"", unit);

	if (count > EVERY_MAX_SECONDS / unit_seconds)
		schedule_error(text, EVERY_HINT, "the interval is longer than 10 years");

	rule->kind = SCHEDULE_EVERY;
	rule->interval = count * unit_seconds * USECS_PER_SEC;
}

/* ---------------------------------------------------------------------
 * readable repeat rules (JSON)
 * ---------------------------------------------------------------------
 */

/* The JSON type of a value, for messages. */
static const char *
json_type_name(const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return "null";
		case jbvString:
			return "a string";
		case jbvNumeric:
			return "a number";
		case jbvBool:
			return "a boolean";
		case jbvBinary:
			return JsonContainerIsArray(v->val.binary.data) ? "an array" : "an object";
		default:
			return "a JSON value";
	}
}

/*
 * A JSON number that must be a whole number from min to max.
 */
static int
rule_integer(const char *text, const char *key, const JsonbValue *v, int min, int max)
{
	char	   *s;
	const char *p;
	int64		value = 0;

	if (v->type != jbvNumeric)
		schedule_error(text, RULE_HINT, "\"%s\" must hold whole numbers, not %s",
					   key, json_type_name(v));
	s = DatumGetCString(DirectFunctionCall1(numeric_out,
											NumericGetDatum(v->val.numeric)));
	p = (*s == '-') ? s + 1 : s;
	for (; *p != '\0'; p++)
	{
		if (!isdigit((unsigned char) *p))
			schedule_error(text, RULE_HINT, "\"%s\" value %s is not a whole number",
						   key, s);
		if (value <= max)
			value = value * 10 + (*p - '0');
	}
	if (*s == '-' || value < min || value > max)
		schedule_error(text, RULE_HINT, "\"%s\" value %s is out of range (%d to %d)",
					   key, s, min, max);
	return (int) value;
}

/*
 * The values of a key that takes one value or a list of them: fills vals
 * (at most SCHEDULE_MAX_LIST) and returns how many.
 */
static int
rule_list(const char *text, const char *key, JsonbValue *v, JsonbValue *vals)
{
	JsonbIterator *it;
	JsonbIteratorToken tok;
	JsonbValue	elem;
	int			n = 0;

	if (v->type != jbvBinary)
	{
		vals[0] = *v;
		return 1;
	}
	if (!JsonContainerIsArray(v->val.binary.data))
		schedule_error(text, RULE_HINT, "\"%s\" must be a value or a list, not an object",
					   key);
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &elem, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (n >= SCHEDULE_MAX_LIST)
			schedule_error(text, RULE_HINT, "\"%s\" has more than %d entries",
						   key, SCHEDULE_MAX_LIST);
		vals[n++] = elem;
	}
	if (n == 0)
		schedule_error(text, RULE_HINT, "\"%s\" must not be an empty list", key);
	return n;
}

/*
 * A time of the "at" key: "HH:MM" or "HH:MM:SS" (seconds after midnight), or
 * for unit hour ":MM" or ":MM:SS" (seconds after the hour).  -1 if not one.
 */
static int32
rule_time(const char *s, bool in_hour)
{
	int			h = 0,
				m,
				sec = 0;
	const char *p = s;

	if (!in_hour)
	{
		if (!isdigit((unsigned char) p[0]))
			return -1;
		h = *p++ - '0';
		if (isdigit((unsigned char) *p))
			h = h * 10 + (*p++ - '0');
		if (h > 23)
			return -1;
	}
	if (*p++ != ':' || !isdigit((unsigned char) p[0]) || !isdigit((unsigned char) p[1]))
		return -1;
	m = (p[0] - '0') * 10 + (p[1] - '0');
	p += 2;
	if (*p == ':')
	{
		p++;
		if (!isdigit((unsigned char) p[0]) || !isdigit((unsigned char) p[1]))
			return -1;
		sec = (p[0] - '0') * 10 + (p[1] - '0');
		p += 2;
	}
	if (*p != '\0' || m > 59 || sec > 59)
		return -1;
	return h * SECS_PER_HOUR + m * SECS_PER_MINUTE + sec;
}

static int
int32_cmp(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return (x > y) - (x < y);
}

/*
 * Parse a readable repeat rule.  Keys may come in any order; the checks
 * that depend on the unit run once every key is read.
 */
static void
parse_rule(ScheduleRule *rule, const char *text)
{
	JsonLexContext *lex;
	JsonParseErrorType jerr;
	Jsonb	   *jb;
	JsonbIterator *it;
	JsonbIteratorToken tok;
	JsonbValue	v;
	JsonbValue *days = NULL;
	JsonbValue *months = NULL;
	JsonbValue *at = NULL;
	JsonbValue *calendar = NULL;
	bool		have_unit = false;
	int			i;

	/* refuse malformed JSON with a message naming the schedule */
	lex = delaysched_json_lexer(pstrdup(text), strlen(text),
								GetDatabaseEncoding(), true);
	jerr = pg_parse_json(lex, &nullSemAction);
	if (jerr != JSON_SUCCESS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid schedule \"%s\": not valid JSON", text),
				 errdetail("%s", json_errdetail(jerr, lex)),
				 errhint(RULE_HINT)));

	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
	if (!JB_ROOT_IS_OBJECT(jb))
		schedule_error(text, RULE_HINT, "a readable rule must be a JSON object");

	rule->kind = SCHEDULE_RULE;
	rule->every = 1;

	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *key;

		if (tok != WJB_KEY)
			continue;
		key = pnstrdup(v.val.string.val, v.val.string.len);
		tok = JsonbIteratorNext(&it, &v, true);
		Assert(tok == WJB_VALUE);

		if (strcmp(key, "unit") == 0)
		{
			char	   *name;

			if (v.type != jbvString)
				schedule_error(text, RULE_HINT, "\"unit\" must be a string, not %s",
							   json_type_name(&v));
			name = pnstrdup(v.val.string.val, v.val.string.len);
			for (i = 0; i < (int) lengthof(rule_units); i++)
			{
				if (strcmp(name, rule_units[i].name) == 0)
					break;
			}
			if (i == (int) lengthof(rule_units))
				schedule_error(text, RULE_HINT, "unknown unit \"%s\"", name);
			rule->unit = rule_units[i].unit;
			have_unit = true;
		}
		else if (strcmp(key, "every") == 0)
			rule->every = rule_integer(text, "every", &v, 1, RULE_MAX_EVERY);
		else if (strcmp(key, "days") == 0)
			days = memcpy(palloc(sizeof(JsonbValue)), &v, sizeof(JsonbValue));
		else if (strcmp(key, "months") == 0)
			months = memcpy(palloc(sizeof(JsonbValue)), &v, sizeof(JsonbValue));
		else if (strcmp(key, "at") == 0)
			at = memcpy(palloc(sizeof(JsonbValue)), &v, sizeof(JsonbValue));
		else if (strcmp(key, "calendar") == 0)
			calendar = memcpy(palloc(sizeof(JsonbValue)), &v, sizeof(JsonbValue));
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid schedule \"%s\": unknown key \"%s\"", text, key),
					 errdetail("The keys of a readable rule are \"unit\", \"every\", \"days\", \"months\", \"at\" and \"calendar\"."),
					 errhint(RULE_HINT)));
	}

	if (!have_unit)
		schedule_error(text, RULE_HINT, "\"unit\" is missing");

	if (days != NULL)
	{
		JsonbValue	vals[SCHEDULE_MAX_LIST];
		int			n;
		int			maxday;

		if (rule->unit != SCHEDULE_UNIT_WEEK && rule->unit != SCHEDULE_UNIT_MONTH &&
			rule->unit != SCHEDULE_UNIT_YEAR)
			schedule_error(text, RULE_HINT,
						   "\"days\" is not allowed for unit \"%s\" (only for week, month and year)",
						   rule_units[rule->unit].name);
		maxday = (rule->unit == SCHEDULE_UNIT_WEEK) ? 7 : 31;
		n = rule_list(text, "days", days, vals);
		for (i = 0; i < n; i++)
			rule->days |= UINT64CONST(1) << rule_integer(text, "days", &vals[i], 1, maxday);
		rule->days_given = true;
	}

	if (months != NULL)
	{
		JsonbValue	vals[SCHEDULE_MAX_LIST];
		int			n;

		if (rule->unit != SCHEDULE_UNIT_YEAR)
			schedule_error(text, RULE_HINT,
						   "\"months\" is not allowed for unit \"%s\" (only for year)",
						   rule_units[rule->unit].name);
		n = rule_list(text, "months", months, vals);
		for (i = 0; i < n; i++)
			rule->months |= 1U << rule_integer(text, "months", &vals[i], 1, 12);
		rule->months_given = true;
	}

	if (at != NULL)
	{
		JsonbValue	vals[SCHEDULE_MAX_LIST];
		bool		in_hour = (rule->unit == SCHEDULE_UNIT_HOUR);
		int			n;
		int			k = 0;

		n = rule_list(text, "at", at, vals);
		for (i = 0; i < n; i++)
		{
			char	   *s;
			int32		t;

			if (vals[i].type != jbvString)
				schedule_error(text, RULE_HINT, "\"at\" must hold times as strings, not %s",
							   json_type_name(&vals[i]));
			s = pnstrdup(vals[i].val.string.val, vals[i].val.string.len);
			t = rule_time(s, in_hour);
			if (t < 0)
				schedule_error(text, RULE_HINT,
							   in_hour ? "\"at\" value \"%s\" is not a time past the hour (\":MM\" or \":MM:SS\")"
							   : "\"at\" value \"%s\" is not a time of day (\"HH:MM\" or \"HH:MM:SS\", 00:00 to 23:59:59)",
							   s);
			rule->times[i] = t;
		}
		qsort(rule->times, n, sizeof(int32), int32_cmp);
		for (i = 0; i < n; i++)
		{
			if (k == 0 || rule->times[k - 1] != rule->times[i])
				rule->times[k++] = rule->times[i];
		}
		rule->ntimes = k;
	}

	if (calendar != NULL)
	{
		char	   *name;
		const char *p;

		if (rule->unit != SCHEDULE_UNIT_WORKDAY)
			schedule_error(text, RULE_HINT,
						   "\"calendar\" is not allowed for unit \"%s\" (only for workday)",
						   rule_units[rule->unit].name);
		if (calendar->type != jbvString)
			schedule_error(text, RULE_HINT, "\"calendar\" must be a string, not %s",
						   json_type_name(calendar));
		name = pnstrdup(calendar->val.string.val, calendar->val.string.len);
		for (p = name; *p != '\0'; p++)
		{
			if (!((*p >= 'a' && *p <= 'z') || *p == '_' ||
				  (p > name && *p >= '0' && *p <= '9')))
				break;
		}
		if (*name == '\0' || *p != '\0' || strlen(name) >= SCHEDULE_CALENDAR_LEN)
			schedule_error(text, RULE_HINT,
						   "\"calendar\" value \"%s\" is not a calendar name (a lowercase identifier of at most %d bytes)",
						   name, SCHEDULE_CALENDAR_LEN - 1);
		strlcpy(rule->calendar, name, SCHEDULE_CALENDAR_LEN);
	}

	/* a year rule whose chosen months lack every chosen day never fires */
	if (rule->unit == SCHEDULE_UNIT_YEAR && rule->days_given && rule->months_given)
	{
		bool		fires = false;

		for (i = 1; i <= 12 && !fires; i++)
		{
			if ((rule->months & (1U << i)) &&
				(rule->days & ((UINT64CONST(1) << (max_month_days[i] + 1)) - 2)))
				fires = true;
		}
		if (!fires)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid schedule \"%s\": the rule never fires", text),
					 errdetail("None of the \"months\" has any of the \"days\"."),
					 errhint(RULE_HINT)));
	}

	/* every unit but hour names specific local times */
	rule->fixed_time = (rule->unit != SCHEDULE_UNIT_HOUR);
}
