/* Reading one TOML value as a key's type, with its range checked. */
#include "config/internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <tasker/duration.h>

#define DURATION_FORMS \
  "a duration such as \"150ms\", \"2s\", \"5m\", \"1h\" or a number of seconds"

static int complain(tk__complaint *why, const tk_toml_value *at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int complain(tk__complaint *why, const tk_toml_value *at, const char *fmt, ...) {
  why->at = at;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why->what, sizeof why->what, fmt, ap);
  va_end(ap);
  return TK_ECONFIG;
}

/* "expected X, got an integer": the type's name with its article. */
static int wrong_type(tk__complaint *why, const tk_toml_value *v, const char *expected) {
  const char *name = tk_toml_type_name(tk_toml_type_of(v));
  return complain(why, v, "expected %s, got %s %s", expected,
                  strchr("aeiou", name[0]) ? "an" : "a", name);
}

/* The complaint for a duration past what 64-bit milliseconds hold. */
static int too_large(const tk__key *k, const tk_toml_value *v, tk__complaint *why) {
  char max[48];
  tk_duration_format(k->max, max, sizeof max);
  return complain(why, v, "is too large: must be at most \"%s\"", max);
}

/* A duration string or a number of seconds, checked against k's range. */
static int read_duration(const tk__key *k, const tk_toml_value *v, int64_t *ms,
                         tk__complaint *why) {
  int64_t i;
  double f;
  const char *s;
  int rc;
  if ((s = tk_toml_string(v, NULL)) != NULL) {
    rc = tk_duration_parse(s, ms, NULL);
    if (rc == TK_ESYNTAX) return complain(why, v, "expected " DURATION_FORMS);
    if (rc != 0 && s[0] != '-') return too_large(k, v, why);
  } else if (tk_toml_int(v, &i) == 0) {
    rc = i < 0 ? TK_ERANGE : tk_duration_from_seconds((double)i, ms, NULL);
    if (rc != 0 && i >= 0) return too_large(k, v, why);
  } else if (tk_toml_float(v, &f) == 0) {
    rc = tk_duration_from_seconds(f, ms, NULL);
    if (rc != 0 && f > 0) return too_large(k, v, why);
  } else {
    return wrong_type(why, v, DURATION_FORMS);
  }
  if (rc != 0 || *ms < k->min || *ms > k->max) return complain(why, v, "must be %s", k->allowed);
  return 0;
}

static int read_durations(const tk__key *k, const tk_toml_value *v, void *obj,
                          tk__complaint *why) {
  if (tk_toml_type_of(v) != TK_TOML_ARRAY) return wrong_type(why, v, k->allowed);
  size_t n = tk_toml_array_len(v);
  if (n > (size_t)k->max) return complain(why, v, "must be %s", k->allowed);
  /* Each entry is checked as a delay of its own. */
  static const tk__key entry = {.kind = TK__K_DURATION, .min = 0, .max = INT64_MAX,
                                .allowed = "a duration >= 0"};
  int64_t list[TK_BACKOFF_SCHEDULE_MAX];
  for (size_t i = 0; i < n; i++) {
    int rc = read_duration(&entry, tk_toml_array_at(v, i), &list[i], why);
    if (rc != 0) {
      why->index = (int)i + 1;
      return rc;
    }
  }
  memcpy(TK__FIELD(obj, k, int64_t), list, n * sizeof list[0]);
  *TK__LEN(obj, k) = (int)n;
  return 0;
}

int tk__convert(const tk__key *k, const tk_toml_value *v, void *obj, tk__complaint *why) {
  why->index = 0;
  switch (k->kind) {
  case TK__K_DURATIONS: return read_durations(k, v, obj, why);
  case TK__K_DURATION: {
    int64_t ms;
    int rc = read_duration(k, v, &ms, why);
    if (rc == 0) *TK__FIELD(obj, k, int64_t) = ms;
    return rc;
  }
  case TK__K_INT: {
    int64_t i;
    if (tk_toml_int(v, &i) != 0) return wrong_type(why, v, k->allowed);
    if (i < k->min || i > k->max) return complain(why, v, "must be %s", k->allowed);
    *TK__FIELD(obj, k, int64_t) = i;
    return 0;
  }
  case TK__K_NUMBER: {
    int64_t i;
    double f;
    if (tk_toml_int(v, &i) == 0) f = (double)i;
    else if (tk_toml_float(v, &f) != 0) return wrong_type(why, v, k->allowed);
    if (!isfinite(f) || f < k->fmin || f > k->fmax)
      return complain(why, v, "must be %s", k->allowed);
    *TK__FIELD(obj, k, double) = f;
    return 0;
  }
  case TK__K_JITTER: {
    const char *s = tk_toml_string(v, NULL);
    if (s == NULL) return wrong_type(why, v, k->allowed);
    if (tk_jitter_parse(s, TK__FIELD(obj, k, tk_jitter)) != 0)
      return complain(why, v, "expected %s", k->allowed);
    return 0;
  }
  case TK__K_STRING: {
    size_t len;
    const char *s = tk_toml_string(v, &len);
    if (s == NULL) return wrong_type(why, v, k->allowed);
    if (len == 0 || strlen(s) != len) return complain(why, v, "must be %s", k->allowed);
    *TK__FIELD(obj, k, const char *) = s;
    return 0;
  }
  }
  return complain(why, v, "cannot be read");
}

int tk__expect_table(const tk_toml_value *v, tk__complaint *why) {
  why->index = 0;
  if (tk_toml_type_of(v) == TK_TOML_TABLE) return 0;
  return wrong_type(why, v, "a table");
}
