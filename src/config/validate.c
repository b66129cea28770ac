/* Reading one TOML value as a key's type, with its range checked: into a
 * settings struct (the configuration) or into JSON (template tables and
 * handler specs, config/spec.c). */
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

/* An integer within k's range. */
static int read_int(const tk__key *k, const tk_toml_value *v, int64_t *i, tk__complaint *why) {
  if (tk_toml_int(v, i) != 0) return wrong_type(why, v, k->allowed);
  if (*i < k->min || *i > k->max) return complain(why, v, "must be %s", k->allowed);
  return 0;
}

/* A number within k's range. */
static int read_number(const tk__key *k, const tk_toml_value *v, double *f, tk__complaint *why) {
  int64_t i;
  if (tk_toml_int(v, &i) == 0) *f = (double)i;
  else if (tk_toml_float(v, f) != 0) return wrong_type(why, v, k->allowed);
  if (!isfinite(*f) || *f < k->fmin || *f > k->fmax)
    return complain(why, v, "must be %s", k->allowed);
  return 0;
}

/* A string; empty ones only when allow_empty; never one holding NUL. */
static int read_string(const tk__key *k, const tk_toml_value *v, int allow_empty, const char **s,
                       tk__complaint *why) {
  size_t len;
  *s = tk_toml_string(v, &len);
  if (*s == NULL) return wrong_type(why, v, k->allowed);
  if ((len == 0 && !allow_empty) || strlen(*s) != len)
    return complain(why, v, "must be %s", k->allowed);
  return 0;
}

static int read_choice(const tk__key *k, const tk_toml_value *v, const char **s,
                       tk__complaint *why);

int tk__convert(const tk__key *k, const tk_toml_value *v, void *obj, tk__complaint *why) {
  why->index = 0;
  why->member = NULL;
  switch (k->kind) {
  case TK__K_DURATIONS: return read_durations(k, v, obj, why);
  case TK__K_DURATION: {
    int64_t ms;
    int rc = read_duration(k, v, &ms, why);
    if (rc == 0) *TK__FIELD(obj, k, int64_t) = ms;
    return rc;
  }
  case TK__K_INT: return read_int(k, v, TK__FIELD(obj, k, int64_t), why);
  case TK__K_NUMBER: return read_number(k, v, TK__FIELD(obj, k, double), why);
  case TK__K_JITTER: {
    const char *s = tk_toml_string(v, NULL);
    if (s == NULL) return wrong_type(why, v, k->allowed);
    if (tk_jitter_parse(s, TK__FIELD(obj, k, tk_jitter)) != 0)
      return complain(why, v, "expected %s", k->allowed);
    return 0;
  }
  case TK__K_STRING: /* with choices: one of them (engine.durability) */
    if (k->choices) return read_choice(k, v, TK__FIELD(obj, k, const char *), why);
    return read_string(k, v, 0, TK__FIELD(obj, k, const char *), why);
  case TK__K_BOOL: {
    int b;
    if (tk_toml_bool(v, &b) != 0) return wrong_type(why, v, "true or false");
    *TK__FIELD(obj, k, int) = b != 0;
    return 0;
  }
  TK__JSON_ONLY_KINDS: break; /* not in a settings struct */
  }
  return complain(why, v, "cannot be read");
}

/* ---- JSON-only kinds ------------------------------------------------------ */

/* A name safe in URLs, paths and messages. */
static int read_name(const tk_toml_value *v, const char **s, tk__complaint *why) {
  *s = tk_toml_string(v, NULL);
  if (*s == NULL) return wrong_type(why, v, "a string");
  size_t n = strlen(*s);
  int ok = n > 0 && n <= 128;
  for (size_t i = 0; ok && i < n; i++) ok = tk__is_name_char((*s)[i]) || (*s)[i] == '.';
  if (!ok) return complain(why, v, "expected 1 to 128 letters, digits, '_', '-' or '.'");
  return 0;
}

/* One of k->choices, suggesting the nearest for a typo. */
static int read_choice(const tk__key *k, const tk_toml_value *v, const char **s,
                       tk__complaint *why) {
  *s = tk_toml_string(v, NULL);
  if (*s == NULL) return wrong_type(why, v, k->allowed);
  size_t n = 0;
  while (k->choices[n] != NULL) n++;
  for (size_t i = 0; i < n; i++)
    if (strcmp(*s, k->choices[i]) == 0) return 0;
  const char *near = tk__suggest(*s, k->choices, n);
  if (near) return complain(why, v, "expected %s (did you mean \"%s\"?)", k->allowed, near);
  return complain(why, v, "expected %s", k->allowed);
}

/* An array whose elements `elem` reads into JSON; at least k->min of them
 * for STRINGS. A bad element's 1-based index goes in why. */
static int read_array(const tk__key *k, const tk__key *elem, const tk_toml_value *v, json_t *a,
                      tk__complaint *why) {
  if (tk_toml_type_of(v) != TK_TOML_ARRAY) return wrong_type(why, v, k->allowed);
  size_t n = tk_toml_array_len(v);
  if (k->kind == TK__K_STRINGS && n < (size_t)k->min)
    return complain(why, v, "must be %s", k->allowed);
  for (size_t i = 0; i < n; i++) {
    json_t *e = NULL;
    int rc = tk__convert_json(elem, tk_toml_array_at(v, i), &e, why);
    if (rc == 0 && json_array_append_new(a, e) != 0) rc = TK_ENOMEM;
    if (rc != 0) {
      why->index = (int)i + 1;
      return rc;
    }
  }
  return 0;
}

/* A table of strings; a bad entry's key goes in why. */
static int read_strmap(const tk__key *k, const tk_toml_value *v, json_t *o, tk__complaint *why) {
  if (tk_toml_type_of(v) != TK_TOML_TABLE) return wrong_type(why, v, k->allowed);
  static const tk__key text = {.kind = TK__K_TEXT, .allowed = "a string"};
  for (size_t i = 0; i < tk_toml_table_len(v); i++) {
    const tk_toml_entry *e = tk_toml_table_at(v, i);
    json_t *s = NULL;
    int rc = tk__convert_json(&text, e->value, &s, why);
    if (rc == 0 && json_object_set_new(o, e->key, s) != 0) rc = TK_ENOMEM;
    if (rc != 0) {
      why->member = e->key;
      return rc;
    }
  }
  return 0;
}

int tk__convert_json(const tk__key *k, const tk_toml_value *v, json_t **out, tk__complaint *why) {
  why->index = 0;
  why->member = NULL;
  *out = NULL;
  int64_t i = 0;
  double f = 0;
  int b = 0, rc = TK_ECONFIG;
  const char *s = NULL;
  switch (k->kind) {
  case TK__K_DURATION:
    if ((rc = read_duration(k, v, &i, why)) == 0) *out = json_integer(i);
    break;
  case TK__K_INT:
    if ((rc = read_int(k, v, &i, why)) == 0) *out = json_integer(i);
    break;
  case TK__K_NUMBER:
    if ((rc = read_number(k, v, &f, why)) == 0) *out = json_real(f);
    break;
  case TK__K_STRING:
  case TK__K_TEXT:
    if ((rc = read_string(k, v, k->kind == TK__K_TEXT, &s, why)) == 0) *out = json_string(s);
    break;
  case TK__K_BOOL:
    if (tk_toml_bool(v, &b) != 0) return wrong_type(why, v, "true or false");
    rc = 0;
    *out = json_boolean(b);
    break;
  case TK__K_STRINGS:
  case TK__K_INTS: {
    static const tk__key text = {.kind = TK__K_TEXT, .allowed = "a string"};
    char allowed[64];
    tk__key num = {.kind = TK__K_INT, .min = k->min, .max = k->max, .allowed = allowed};
    snprintf(allowed, sizeof allowed, "an integer from %lld to %lld", (long long)k->min,
             (long long)k->max);
    if ((*out = json_array()) == NULL) break;
    if ((rc = read_array(k, k->kind == TK__K_INTS ? &num : &text, v, *out, why)) != 0) {
      json_decref(*out);
      *out = NULL;
      return rc;
    }
    break;
  }
  case TK__K_STRMAP:
    if ((*out = json_object()) == NULL) break;
    if ((rc = read_strmap(k, v, *out, why)) != 0) {
      json_decref(*out);
      *out = NULL;
      return rc;
    }
    break;
  case TK__K_CHOICE:
    if ((rc = read_choice(k, v, &s, why)) == 0) *out = json_string(s);
    break;
  case TK__K_NAME:
    if ((rc = read_name(v, &s, why)) == 0) *out = json_string(s);
    break;
  case TK__K_DURATIONS: /* settings only: no template table has one */
  case TK__K_JITTER:
  case TK__K_OTHER: return complain(why, v, "cannot be read");
  }
  if (rc == 0 && *out == NULL) rc = TK_ENOMEM;
  return rc;
}

int tk__expect_table(const tk_toml_value *v, const char *expected, tk__complaint *why) {
  why->index = 0;
  why->member = NULL;
  if (tk_toml_type_of(v) == TK_TOML_TABLE) return 0;
  return wrong_type(why, v, expected ? expected : "a table");
}
