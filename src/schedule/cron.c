/* Cron expressions: parsing into bit sets, and the next fire time in a
 * time zone (the rules for daylight-saving changes are in tasker/cron.h). */
#include <tasker/cron.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/civil.h"
#include "schedule/tz.h"

struct tk_cron {
  uint64_t minutes; /* bit n: minute n */
  uint32_t hours;
  uint32_t mdays;   /* bits 1-31 */
  uint16_t months;  /* bits 1-12 */
  uint8_t wdays;    /* bits 0-6, Sunday 0 */
  int mday_star, wday_star;
  char text[128];
  tk__tz tz;
};

/* The hour set of `*` (or `0-23`, or `*` with step 1): the only one that
 * fires in both runs of an hour the clocks repeat (cron.h). Deciding on
 * the set, not on the field's first character, keeps every other hour
 * (`*` with step 2) to the first run like any other restricted hour. */
#define EVERY_HOUR UINT32_C(0xFFFFFF)

typedef struct field {
  const char *name;
  int min, max;
  const char *const *names; /* names for min.., or NULL */
} field;

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                          "jul", "aug", "sep", "oct", "nov", "dec", NULL};
static const char *const wday_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL};
static const field fields[5] = {
    {"minute", 0, 59, NULL},         {"hour", 0, 23, NULL},
    {"day-of-month", 1, 31, NULL},   {"month", 1, 12, month_names},
    {"day-of-week", 0, 7, wday_names}, /* 7 is Sunday too */
};

static const struct {
  const char *name, *expr;
} shortcuts[] = {{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
                 {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
                 {"@hourly", "0 * * * *"}};

typedef struct parse_ctx {
  const char *expr; /* as given, for messages */
  tk_err *err;
} parse_ctx;

static int fail(parse_ctx *p, const char *at, const field *f, const char *what) {
  return tk_err_set(p->err, TK_ESYNTAX, "cron expression \"%s\": column %d (%s): %s", p->expr,
                    (int)(at - p->expr) + 1, f->name, what);
}

/* A number or a name of field f at *s; advances *s. */
static int value(parse_ctx *p, const field *f, const char **s, int *v) {
  const char *at = *s;
  char msg[160];
  if (isdigit((unsigned char)*at)) {
    long n = 0;
    while (isdigit((unsigned char)**s) && n < 1000) n = n * 10 + (*(*s)++ - '0');
    if (n < f->min || n > f->max) {
      snprintf(msg, sizeof msg, "%ld is out of range: expected %d-%d", n, f->min, f->max);
      return fail(p, at, f, msg);
    }
    *v = (int)n;
    return 0;
  }
  for (int i = 0; f->names && f->names[i]; i++)
    if (strncasecmp(at, f->names[i], 3) == 0 && !isalpha((unsigned char)at[3])) {
      *v = f->min + i;
      *s += 3;
      return 0;
    }
  snprintf(msg, sizeof msg, "expected a number %d-%d%s", f->min, f->max,
           f->names ? (f == &fields[3] ? " or a month name (jan-dec)" : " or a day name (sun-sat)")
                    : "");
  return fail(p, at, f, msg);
}

/* One field's text [s, end) into the set *bits; *star when it starts with '*'. */
static int parse_field(parse_ctx *p, const field *f, const char *s, const char *end,
                       uint64_t *bits, int *star) {
  *bits = 0;
  *star = *s == '*';
  for (;;) {
    int lo, hi, step = 1, ranged = 1;
    const char *item = s;
    if (*s == '*') {
      lo = f->min;
      hi = f->max;
      s++;
    } else {
      int rc = value(p, f, &s, &lo);
      if (rc) return rc;
      hi = lo;
      ranged = *s == '-';
      if (ranged) {
        s++;
        if ((rc = value(p, f, &s, &hi))) return rc;
        if (hi < lo) return fail(p, item, f, "a range must go upwards (a-b with a <= b)");
      }
    }
    if (*s == '/') {
      const char *at = ++s;
      long n = 0;
      while (isdigit((unsigned char)*s) && n < 1000) n = n * 10 + (*s++ - '0');
      if (s == at || n < 1 || n > f->max) {
        char msg[96];
        snprintf(msg, sizeof msg, "expected a step 1-%d after '/'", f->max);
        return fail(p, at, f, msg);
      }
      if (!ranged) hi = f->max; /* "a/n": from a to the end */
      step = (int)n;
    }
    for (int v = lo; v <= hi; v += step) *bits |= UINT64_C(1) << v;
    if (s == end) return 0;
    if (*s != ',') return fail(p, s, f, "expected ',', '-', '/' or the end of the field");
    if (++s == end) return fail(p, s, f, "expected a value after ','");
  }
}

/* Whether some month in the set has some day in the set (Feb counts 29). */
static int days_possible(const tk_cron *c) {
  for (int m = 1; m <= 12; m++)
    if (c->months >> m & 1)
      for (int d = 1; d <= tk__days_in_month(2000, m); d++)
        if (c->mdays >> d & 1) return 1;
  return 0;
}

int tk_cron_parse(const char *expr, const char *tz, tk_cron **out, tk_err *err) {
  *out = NULL;
  parse_ctx p = {expr, err};
  const char *text = expr;
  while (isspace((unsigned char)*text)) text++;
  if (*text == '@') {
    size_t n = strcspn(text, " \t");
    const char *found = NULL;
    for (size_t i = 0; i < sizeof shortcuts / sizeof shortcuts[0]; i++)
      if (strlen(shortcuts[i].name) == n && strncasecmp(text, shortcuts[i].name, n) == 0)
        found = shortcuts[i].expr;
    if (found == NULL || text[n + strspn(text + n, " \t")] != '\0')
      return tk_err_set(err, TK_ESYNTAX,
                        "cron expression \"%s\": expected five fields or one of @yearly, "
                        "@annually, @monthly, @weekly, @daily, @midnight, @hourly",
                        expr);
    text = found;
    p.expr = found;
  }
  if (strlen(expr) >= sizeof((tk_cron *)0)->text)
    return tk_err_set(err, TK_ETOOBIG, "cron expression \"%.40s...\": longer than %d characters",
                      expr, (int)sizeof((tk_cron *)0)->text - 1);
  tk_cron *c = calloc(1, sizeof *c);
  if (c == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory");
  snprintf(c->text, sizeof c->text, "%s", expr);
  uint64_t bits[5];
  int star[5], nf = 0, rc = 0;
  const char *s = text;
  while (rc == 0) {
    while (*s == ' ' || *s == '\t') s++;
    if (*s == '\0') break;
    const char *end = s + strcspn(s, " \t");
    if (nf == 5) {
      rc = tk_err_set(err, TK_ESYNTAX,
                      "cron expression \"%s\": column %d: expected five fields (minute hour "
                      "day-of-month month day-of-week), found more",
                      expr, (int)(s - expr) + 1);
      break;
    }
    rc = parse_field(&p, &fields[nf], s, end, &bits[nf], &star[nf]);
    nf++;
    s = end;
  }
  if (rc == 0 && nf < 5)
    rc = tk_err_set(err, TK_ESYNTAX,
                    "cron expression \"%s\": expected five fields (minute hour day-of-month "
                    "month day-of-week), found %d",
                    expr, nf);
  if (rc == 0) {
    c->minutes = bits[0];
    c->hours = (uint32_t)bits[1];
    c->mdays = (uint32_t)bits[2];
    c->months = (uint16_t)bits[3];
    c->wdays = (uint8_t)((bits[4] | bits[4] >> 7) & 0x7f); /* 7 is Sunday */
    c->mday_star = star[2];
    c->wday_star = star[4];
    /* With the day of week restricted, some day always matches (OR rule). */
    if (c->wday_star && !days_possible(c))
      rc = tk_err_set(err, TK_EINVAL,
                      "cron expression \"%s\": never fires: no month in it has any of its days "
                      "of the month",
                      expr);
  }
  if (rc == 0) rc = tk__tz_load(tz, &c->tz, err);
  if (rc != 0) {
    tk_cron_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

void tk_cron_free(tk_cron *c) {
  if (c == NULL) return;
  tk__tz_free(&c->tz);
  free(c);
}

const char *tk_cron_text(const tk_cron *c) { return c->text; }
const char *tk_cron_zone(const tk_cron *c) { return c->tz.name; }

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

int32_t tk_cron_utc_offset(const tk_cron *c, int64_t at) {
  return tk__tz_offset(&c->tz, floor_div(at, 1000));
}

static int day_matches(const tk_cron *c, int64_t days, int mday) {
  int wday = (int)(((days % 7) + 7 + 4) % 7); /* 1970-01-01 was a Thursday */
  int by_mday = c->mdays >> mday & 1, by_wday = c->wdays >> wday & 1;
  if (!c->mday_star && !c->wday_star) return by_mday || by_wday;
  return by_mday && by_wday;
}

/* The first matching local time in [lo, hi) (local seconds: civil time
 * counted like seconds since the epoch), or INT64_MIN. */
static int64_t match_from(const tk_cron *c, int64_t lo, int64_t hi) {
  int64_t L = floor_div(lo + 59, 60) * 60;
  int64_t give_up = L + (int64_t)29 * 366 * 86400; /* past any leap-day-only schedule */
  if (hi > give_up) hi = give_up;
  while (L < hi) {
    int64_t days = floor_div(L, 86400);
    int secs = (int)(L - days * 86400), y, m, d;
    tk__civil_from_days(days, &y, &m, &d);
    int hour = secs / 3600, minute = secs % 3600 / 60;
    if (!(c->months >> m & 1)) {
      L = tk__days_from_civil(m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1, 1) * 86400;
    } else if (!day_matches(c, days, d)) {
      L = (days + 1) * 86400;
    } else if (!(c->hours >> hour & 1)) {
      L = days * 86400 + (int64_t)(hour + 1) * 3600;
    } else {
      uint64_t later = c->minutes >> minute;
      if (later == 0) {
        L = days * 86400 + (int64_t)(hour + 1) * 3600;
      } else {
        int skip = __builtin_ctzll(later); /* gcc and clang builtin */
        return L + (int64_t)skip * 60;
      }
    }
  }
  return INT64_MIN;
}

int64_t tk_cron_next(const tk_cron *c, int64_t after) {
  const tk__tz *z = &c->tz;
  int64_t t = floor_div(after, 1000) + 1; /* fire times > after, in whole seconds */
  /* Walk the zone's stretches of constant offset from t on. Every
   * expression fires within 28 years: at most two changes a year. */
  for (int stretch = 0; stretch < 200; stretch++) {
    int32_t off = tk__tz_offset(z, t);
    int64_t start = tk__tz_change_at_or_before(z, t), next = tk__tz_change_after(z, t);
    int32_t before = start == INT64_MIN ? off : tk__tz_offset(z, start - 1);
    /* Clocks jumped forward at `start`: the skipped local times fire once,
     * at the change. */
    if (start == t && off > before && match_from(c, start + before, start + off) != INT64_MIN)
      return start * 1000;
    int64_t lo = t + off, hi = next == INT64_MAX ? INT64_MAX : next + off;
    for (;;) {
      int64_t L = match_from(c, lo, hi);
      if (L == INT64_MIN) break;
      /* Clocks went back at `start`: local times up to start + before
       * happened already, and fired then, unless every hour runs. */
      if (off < before && L < start + before && c->hours != EVERY_HOUR) {
        lo = L + 60;
        continue;
      }
      return (L - off) * 1000;
    }
    if (next == INT64_MAX) break;
    t = next;
  }
  return INT64_MAX;
}
