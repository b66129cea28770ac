/* The four date-time kinds of TOML (RFC 3339 with optional parts): offset
 * date-time, local date-time, local date and local time, with every field
 * range-checked, including days per month and leap years. */
#include "core/civil.h"
#include "toml/parser.h"

#include <string.h>

/* Whether c is an ASCII digit (isdigit depends on the locale). */
static int is_digit(char c) { return c >= '0' && c <= '9'; }

int tk__toml_looks_datetime(const char *p, const char *end) {
  if (end - p >= 5 && is_digit(p[0]) && is_digit(p[1]) && is_digit(p[2]) && is_digit(p[3]) &&
      p[4] == '-')
    return 1;
  return end - p >= 3 && is_digit(p[0]) && is_digit(p[1]) && p[2] == ':';
}


/* Exactly n digits at *pp into *out; advances *pp. */
static int fixed_digits(tk__toml_parser *P, const char **pp, int n, int *out, const char *what) {
  const char *p = *pp;
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (p + i >= P->end || !is_digit(p[i])) {
      char buf[48];
      return tk__toml_fail(P, p + i, TK_ESYNTAX, "invalid date-time: expected %d digits for the %s, found %s",
                           n, what, tk__toml_found(P, p + i, buf, sizeof buf));
    }
    v = v * 10 + (p[i] - '0');
  }
  *out = v;
  *pp = p + n;
  return 0;
}

/* The separator c at *pp; advances *pp. */
static int separator(tk__toml_parser *P, const char **pp, char c, const char *before) {
  if (*pp < P->end && **pp == c) {
    ++*pp;
    return 0;
  }
  char buf[48];
  return tk__toml_fail(P, *pp, TK_ESYNTAX, "invalid date-time: expected '%c' before the %s, found %s",
                       c, before, tk__toml_found(P, *pp, buf, sizeof buf));
}

/* A field in [lo, hi] or the error naming it. */
static int in_range(tk__toml_parser *P, const char *at, int v, int lo, int hi, const char *what) {
  if (v >= lo && v <= hi) return 0;
  return tk__toml_fail(P, at, TK_ESYNTAX, "invalid %s %02d: expected %02d to %02d", what, v, lo, hi);
}

/* YYYY-MM-DD at *pp. */
static int parse_date(tk__toml_parser *P, const char **pp, tk_toml_datetime *dt) {
  int rc;
  const char *at_month, *at_day;
  if ((rc = fixed_digits(P, pp, 4, &dt->year, "year")) != 0) return rc;
  if ((rc = separator(P, pp, '-', "month")) != 0) return rc;
  at_month = *pp;
  if ((rc = fixed_digits(P, pp, 2, &dt->month, "month")) != 0) return rc;
  if ((rc = separator(P, pp, '-', "day")) != 0) return rc;
  at_day = *pp;
  if ((rc = fixed_digits(P, pp, 2, &dt->day, "day")) != 0) return rc;
  if ((rc = in_range(P, at_month, dt->month, 1, 12, "month")) != 0) return rc;
  int days = tk__days_in_month(dt->year, dt->month);
  if (dt->day < 1 || dt->day > days)
    return tk__toml_fail(P, at_day, TK_ESYNTAX, "invalid day %02d: %04d-%02d has %d days", dt->day,
                         dt->year, dt->month, days);
  return 0;
}

/* HH:MM:SS[.fraction] at *pp; digits past nanoseconds are dropped. */
static int parse_time(tk__toml_parser *P, const char **pp, tk_toml_datetime *dt) {
  int rc;
  const char *at_hour = *pp, *at_minute, *at_second;
  if ((rc = fixed_digits(P, pp, 2, &dt->hour, "hour")) != 0) return rc;
  if ((rc = separator(P, pp, ':', "minute")) != 0) return rc;
  at_minute = *pp;
  if ((rc = fixed_digits(P, pp, 2, &dt->minute, "minute")) != 0) return rc;
  if (*pp >= P->end || **pp != ':')
    return tk__toml_fail(P, *pp, TK_ESYNTAX,
                         "invalid time: seconds are required in TOML 1.0 (write HH:MM:SS)");
  ++*pp;
  at_second = *pp;
  if ((rc = fixed_digits(P, pp, 2, &dt->second, "second")) != 0) return rc;
  if ((rc = in_range(P, at_hour, dt->hour, 0, 23, "hour")) != 0) return rc;
  if ((rc = in_range(P, at_minute, dt->minute, 0, 59, "minute")) != 0) return rc;
  if ((rc = in_range(P, at_second, dt->second, 0, 60, "second")) != 0) return rc;
  const char *p = *pp;
  if (p < P->end && *p == '.') {
    p++;
    if (p >= P->end || !is_digit(*p))
      return tk__toml_fail(P, p - 1, TK_ESYNTAX,
                           "invalid time: a decimal point must be followed by digits");
    int n = 0, ns = 0;
    for (; p < P->end && is_digit(*p); p++)
      if (n < 9) {
        ns = ns * 10 + (*p - '0');
        n++;
      }
    dt->frac_digits = n;
    for (int i = n; i < 9; i++) ns *= 10;
    dt->nanosecond = ns;
  }
  *pp = p;
  return 0;
}

/* Z or +HH:MM / -HH:MM at *pp, if any: then *type becomes
 * TK_TOML_OFFSET_DATETIME. */
static int parse_offset(tk__toml_parser *P, const char **pp, tk_toml_datetime *dt, int *type) {
  const char *p = *pp;
  int rc, h = 0, m = 0;
  if (p < P->end && (*p == 'Z' || *p == 'z')) {
    *pp = p + 1;
    *type = TK_TOML_OFFSET_DATETIME;
    return 0;
  }
  if (!(p < P->end && (*p == '+' || *p == '-'))) return 0;
  const char *q = p + 1;
  if ((rc = fixed_digits(P, &q, 2, &h, "offset hour")) != 0 ||
      (rc = separator(P, &q, ':', "offset minute")) != 0 ||
      (rc = fixed_digits(P, &q, 2, &m, "offset minute")) != 0 ||
      (rc = in_range(P, p + 1, h, 0, 23, "offset hour")) != 0 ||
      (rc = in_range(P, p + 4, m, 0, 59, "offset minute")) != 0)
    return rc;
  dt->offset_minutes = (*p == '-' ? -1 : 1) * (h * 60 + m);
  *pp = q;
  *type = TK_TOML_OFFSET_DATETIME;
  return 0;
}

int tk__toml_parse_datetime(tk__toml_parser *P, tk_toml_value *v) {
  const char *p = P->p, *end = P->end;
  tk_toml_datetime dt;
  int rc, type;
  memset(&dt, 0, sizeof dt);
  if (p[2] == ':') {
    if ((rc = parse_time(P, &p, &dt)) != 0) return rc;
    type = TK_TOML_LOCAL_TIME;
  } else {
    if ((rc = parse_date(P, &p, &dt)) != 0) return rc;
    type = TK_TOML_LOCAL_DATE;
    /* A space separates date and time only when a time follows it. */
    if (p < end && (*p == 'T' || *p == 't' ||
                    (*p == ' ' && end - p >= 4 && is_digit(p[1]) && is_digit(p[2]) && p[3] == ':'))) {
      p++;
      if ((rc = parse_time(P, &p, &dt)) != 0) return rc;
      type = TK_TOML_LOCAL_DATETIME;
      if ((rc = parse_offset(P, &p, &dt, &type)) != 0) return rc;
    }
  }
  if (p < end && !tk__toml_is_delim((unsigned char)*p)) {
    char buf[48];
    return tk__toml_fail(P, p, TK_ESYNTAX, "invalid %s: unexpected %s after it",
                         tk_toml_type_name((tk_toml_type)type), tk__toml_found(P, p, buf, sizeof buf));
  }
  v->type = (uint8_t)type;
  tk__toml_dt_pack(&dt, &v->u.dt);
  P->p = p;
  return 0;
}
