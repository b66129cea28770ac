/* Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP-date in one of
 * its three forms (§5.6.7), turned into a delay relative to an injected now. */
#include <tasker/backoff.h>

#include <string.h>

#include "core/civil.h"

typedef struct cursor {
  const char *p, *end;
} cursor;

static const char *const short_days[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
static const char *const long_days[] = {"Monday", "Tuesday", "Wednesday", "Thursday",
                                        "Friday", "Saturday", "Sunday"};
static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Consume the literal `s` if the input continues with it (case-sensitive,
 * as the grammar requires). */
static int lit(cursor *c, const char *s) {
  size_t n = strlen(s);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0) return 0;
  c->p += n;
  return 1;
}

/* Consume exactly `n` digits into *out. */
static int digits(cursor *c, int n, int *out) {
  if (c->end - c->p < n) return 0;
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (!is_digit(c->p[i])) return 0;
    v = v * 10 + (c->p[i] - '0');
  }
  c->p += n;
  *out = v;
  return 1;
}

/* Consume one of `names` and return its index, or -1. Every name in a
 * table differs from the others in its first three letters. */
static int name_of(cursor *c, const char *const *names, int count) {
  if (c->end - c->p < 3) return -1;
  for (int i = 0; i < count; i++)
    if (c->p[0] == names[i][0] && c->p[1] == names[i][1] && c->p[2] == names[i][2])
      return lit(c, names[i]) ? i : -1;
  return -1;
}

typedef struct civil {
  int year, month, day, hour, minute, second;
} civil;

/* time-of-day = hour ":" minute ":" second */
static int time_of_day(cursor *c, civil *t) {
  return digits(c, 2, &t->hour) && lit(c, ":") && digits(c, 2, &t->minute) && lit(c, ":") &&
         digits(c, 2, &t->second);
}

/* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
static int imf_fixdate(cursor c, civil *t) {
  if (name_of(&c, short_days, 7) < 0 || !lit(&c, ", ") || !digits(&c, 2, &t->day) ||
      !lit(&c, " "))
    return 0;
  int m = name_of(&c, months, 12);
  if (m < 0 || !lit(&c, " ") || !digits(&c, 4, &t->year) || !lit(&c, " ") ||
      !time_of_day(&c, t) || !lit(&c, " GMT"))
    return 0;
  t->month = m + 1;
  return c.p == c.end;
}

/* obsolete RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" */
static int rfc850_date(cursor c, civil *t, int64_t now_ms) {
  if (name_of(&c, long_days, 7) < 0 || !lit(&c, ", ") || !digits(&c, 2, &t->day) ||
      !lit(&c, "-"))
    return 0;
  int m = name_of(&c, months, 12);
  int yy;
  if (m < 0 || !lit(&c, "-") || !digits(&c, 2, &yy) || !lit(&c, " ") || !time_of_day(&c, t) ||
      !lit(&c, " GMT"))
    return 0;
  t->month = m + 1;
  /* A two-digit year more than 50 years ahead is the most recent past year
   * with those digits (RFC 9110 §5.6.7). */
  int now_year = tk__year_of_ms(now_ms);
  int year = now_year - (now_year % 100) + yy;
  if (year > now_year + 50) year -= 100;
  t->year = year;
  return c.p == c.end;
}

/* asctime: "Sun Nov  6 08:49:37 1994" */
static int asctime_date(cursor c, civil *t) {
  if (name_of(&c, short_days, 7) < 0 || !lit(&c, " ")) return 0;
  int m = name_of(&c, months, 12);
  if (m < 0 || !lit(&c, " ")) return 0;
  if (lit(&c, " ")) {
    if (!digits(&c, 1, &t->day)) return 0;
  } else if (!digits(&c, 2, &t->day)) {
    return 0;
  }
  if (!lit(&c, " ") || !time_of_day(&c, t) || !lit(&c, " ") || !digits(&c, 4, &t->year))
    return 0;
  t->month = m + 1;
  return c.p == c.end;
}

static int no_hint(tk_err *err, const char *text, size_t len, const char *why) {
  return tk_err_set(err, TK_ENOHINT, "Retry-After \"%.*s\": %s", (int)(len > 80 ? 80 : len),
                    text, why);
}

#define EXPECTED "expected whole seconds or an HTTP-date such as \"Sun, 06 Nov 1994 08:49:37 GMT\""

int tk_retry_after_parse(const char *text, size_t len, int64_t now_ms, int64_t *delay_ms,
                         tk_err *err) {
  if (text == NULL) return no_hint(err, "", 0, "empty value; " EXPECTED);
  const char *p = text, *end = text + len;
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  while (end > p && (end[-1] == ' ' || end[-1] == '\t')) end--;
  size_t n = (size_t)(end - p);
  if (n == 0) return no_hint(err, text, len, "empty value; " EXPECTED);

  if (is_digit(*p) || *p == '-' || *p == '+' || *p == '.') {
    if (*p == '-') return no_hint(err, p, n, "negative delay; " EXPECTED);
    int64_t seconds = 0;
    int huge = 0;
    const char *q = p;
    for (; q < end && is_digit(*q); q++) {
      if (huge || seconds > (INT64_MAX / 1000 - (*q - '0')) / 10) huge = 1;
      else seconds = seconds * 10 + (*q - '0');
    }
    if (q < end && *q == '.') return no_hint(err, p, n, "fractional seconds; " EXPECTED);
    if (q != end || q == p) return no_hint(err, p, n, "malformed; " EXPECTED);
    /* Longer than milliseconds can count is still the server asking for
     * the longest wait: the caller's cap (max_server_delay) applies. */
    *delay_ms = huge ? INT64_MAX : seconds * 1000;
    return 0;
  }

  civil t;
  memset(&t, 0, sizeof t);
  cursor c = {p, end};
  if (!imf_fixdate(c, &t) && !rfc850_date(c, &t, now_ms) && !asctime_date(c, &t))
    return no_hint(err, p, n, "malformed; " EXPECTED);
  if (t.month < 1 || t.month > 12 || t.day < 1 || t.day > tk__days_in_month(t.year, t.month))
    return no_hint(err, p, n, "no such day");
  if (t.hour > 23 || t.minute > 59 || t.second > 60) /* 60: a leap second */
    return no_hint(err, p, n, "time of day out of range (hour 0-23, minute 0-59, second 0-60)");
  int64_t at = (tk__days_from_civil(t.year, t.month, t.day) * 86400 + t.hour * 3600 +
                t.minute * 60 + t.second) * 1000;
  *delay_ms = at > now_ms ? at - now_ms : 0;
  return 0;
}
