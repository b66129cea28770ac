/* Templates: validating a TOML workflow into its normalized definition.
 * Every rejection names FILE:LINE:COLUMN, the key, the value and what was
 * expected, and nothing is stored unless the whole template is valid. */
#include "workflow/template.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/duration.h>

#include "config/internal.h" /* tk__suggest */

typedef struct parse_ctx {
  const char *file;
  const tk_config *cfg;
  tk_err *err;
} parse_ctx;

/* Fail at value v (or the document start) with "FILE:L:C: key: message". */
static int fail_at(parse_ctx *c, const tk_toml_value *v, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static int fail_at(parse_ctx *c, const tk_toml_value *v, const char *key, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tk_toml_pos pos = v ? tk_toml_pos_of(v) : (tk_toml_pos){1, 1};
  return tk_err_set(c->err, TK_ECONFIG, "%s:%u:%u: %s%s%s", c->file, pos.line, pos.column,
                    key ? key : "", key ? ": " : "", msg);
}

/* The value as TOML text, for messages. */
static const char *show(const tk_toml_value *v, char *buf, size_t len) {
  tk_toml_format_value(v, buf, len);
  return buf;
}

/* Reject keys of `table` not in `known`, suggesting the nearest one. */
static int check_keys(parse_ctx *c, const tk_toml_value *table, const char *where,
                      const char *const *known, size_t nknown) {
  for (size_t i = 0; i < tk_toml_table_len(table); i++) {
    const tk_toml_entry *e = tk_toml_table_at(table, i);
    int ok = 0;
    for (size_t k = 0; k < nknown && !ok; k++) ok = strcmp(e->key, known[k]) == 0;
    if (ok) continue;
    const char *near = tk__suggest(e->key, known, nknown);
    char hint[96] = "";
    if (near) snprintf(hint, sizeof hint, " (did you mean \"%s\"?)", near);
    return tk_err_set(c->err, TK_ECONFIG, "%s:%u:%u: unknown key \"%s%s%s\"%s", c->file,
                      e->key_pos.line, e->key_pos.column, where ? where : "", where ? "." : "",
                      e->key, hint);
  }
  return 0;
}

/* The type of v with its article: "a string", "an integer", "an array". */
static const char *a_type(const tk_toml_value *v, char *buf, size_t len) {
  const char *t = tk_toml_type_name(tk_toml_type_of(v));
  snprintf(buf, len, "%s %s", strchr("aeiou", t[0]) ? "an" : "a", t);
  return buf;
}

static int want_type(parse_ctx *c, const tk_toml_value *v, const char *key, tk_toml_type t,
                     const char *expected) {
  if (tk_toml_type_of(v) == t) return 0;
  char buf[128], type[32];
  return fail_at(c, v, key, "%s: expected %s, got %s", show(v, buf, sizeof buf), expected,
                 a_type(v, type, sizeof type));
}

/* A non-empty string made of letters, digits, '_', '-', '.' (names that
 * are safe in URLs, paths and messages). */
static int check_name(parse_ctx *c, const tk_toml_value *v, const char *key) {
  int rc = want_type(c, v, key, TK_TOML_STRING, "a string");
  if (rc) return rc;
  const char *s = tk_toml_string(v, NULL);
  size_t n = strlen(s);
  int ok = n > 0 && n <= 128;
  for (size_t i = 0; ok && i < n; i++)
    ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
         (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.';
  if (!ok)
    return fail_at(c, v, key,
                   "\"%s\": expected 1 to 128 letters, digits, '_', '-' or '.'", s);
  return 0;
}

static int get_duration(parse_ctx *c, const tk_toml_value *v, const char *key, int64_t *ms) {
  tk_err e;
  char buf[128];
  int rc;
  switch (tk_toml_type_of(v)) {
  case TK_TOML_STRING: rc = tk_duration_parse(tk_toml_string(v, NULL), ms, &e); break;
  case TK_TOML_INTEGER: {
    int64_t i;
    tk_toml_int(v, &i);
    rc = tk_duration_from_seconds((double)i, ms, &e);
    break;
  }
  case TK_TOML_FLOAT: {
    double f;
    tk_toml_float(v, &f);
    rc = tk_duration_from_seconds(f, ms, &e);
    break;
  }
  default: {
    char type[32];
    return fail_at(c, v, key, "%s: expected a duration (\"150ms\", \"2s\", \"5m\") or seconds, "
                   "got %s", show(v, buf, sizeof buf), a_type(v, type, sizeof type));
  }
  }
  if (rc) return fail_at(c, v, key, "%s", e.msg);
  return 0;
}

static int get_int(parse_ctx *c, const tk_toml_value *v, const char *key, int64_t lo,
                   int64_t hi, int64_t *out) {
  char buf[128];
  if (tk_toml_type_of(v) != TK_TOML_INTEGER || tk_toml_int(v, out) != 0 || *out < lo ||
      *out > hi)
    return fail_at(c, v, key, "%s: expected an integer from %lld to %lld",
                   show(v, buf, sizeof buf), (long long)lo, (long long)hi);
  return 0;
}

/* Copy the optional boolean `name` of `table` (at `where`) into out. */
static int copy_bool(parse_ctx *c, const tk_toml_value *table, const char *where,
                     const char *name, json_t *out) {
  const tk_toml_value *v = tk_toml_get(table, name);
  if (v == NULL) return 0;
  char key[160];
  int b, rc;
  snprintf(key, sizeof key, "%s.%s", where, name);
  if ((rc = want_type(c, v, key, TK_TOML_BOOLEAN, "true or false"))) return rc;
  tk_toml_bool(v, &b);
  json_object_set_new(out, name, json_boolean(b));
  return 0;
}

/* The [retry] table of the template or of a step, into JSON. */
static int parse_retry(parse_ctx *c, const tk_toml_value *t, const char *where, json_t **out) {
  static const char *const keys[] = {"max_attempts", "backoff", "retryable"};
  char key[160];
  int rc = want_type(c, t, where, TK_TOML_TABLE, "a table");
  if (!rc) rc = check_keys(c, t, where, keys, 3);
  if (rc) return rc;
  json_t *r = json_object();
  const tk_toml_value *v;
  if ((v = tk_toml_get(t, "max_attempts"))) {
    int64_t n;
    snprintf(key, sizeof key, "%s.max_attempts", where);
    if ((rc = get_int(c, v, key, 1, 1000000, &n))) goto fail;
    json_object_set_new(r, "max_attempts", json_integer((json_int_t)n));
  }
  if ((v = tk_toml_get(t, "backoff"))) {
    snprintf(key, sizeof key, "%s.backoff", where);
    if ((rc = want_type(c, v, key, TK_TOML_STRING, "a backoff profile name"))) goto fail;
    const char *name = tk_toml_string(v, NULL);
    if (tk_config_profile(c->cfg, name) == NULL) {
      char known[256] = "";
      size_t used = 0;
      for (size_t i = 0; i < tk_config_profile_count(c->cfg); i++) {
        int n = snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                         tk_config_profile_name(c->cfg, i));
        if (n < 0 || (size_t)n >= sizeof known - used) break;
        used += (size_t)n;
      }
      rc = fail_at(c, v, key, "unknown backoff profile \"%s\" (configured: %s)", name, known);
      goto fail;
    }
    json_object_set_new(r, "backoff", json_string(name));
  }
  if ((rc = copy_bool(c, t, where, "retryable", r))) goto fail;
  *out = r;
  return 0;
fail:
  json_decref(r);
  return rc;
}

/* An array of strings into a JSON array; `nonempty` requires one at least. */
static int string_array(parse_ctx *c, const tk_toml_value *v, const char *key, int nonempty,
                        json_t **out) {
  char buf[128];
  if (tk_toml_type_of(v) != TK_TOML_ARRAY || (nonempty && tk_toml_array_len(v) == 0))
    return fail_at(c, v, key, "%s: expected %s array of strings", show(v, buf, sizeof buf),
                   nonempty ? "a non-empty" : "an");
  json_t *a = json_array();
  for (size_t i = 0; i < tk_toml_array_len(v); i++) {
    const tk_toml_value *e = tk_toml_array_at(v, i);
    if (tk_toml_type_of(e) != TK_TOML_STRING) {
      json_decref(a);
      return fail_at(c, e, key, "element %zu is %s: expected a string", i + 1,
                     show(e, buf, sizeof buf));
    }
    json_array_append_new(a, json_string(tk_toml_string(e, NULL)));
  }
  *out = a;
  return 0;
}

/* The batch builtin's rule (docs/batch.md): reject_every, reject_times,
 * poison. */
static int parse_batch_rule(parse_ctx *c, const tk_toml_value *h, const char *where,
                            json_t *out) {
  char key[160];
  int64_t n;
  int rc;
  const tk_toml_value *v;
  if ((v = tk_toml_get(h, "reject_every"))) {
    snprintf(key, sizeof key, "%s.reject_every", where);
    if ((rc = get_int(c, v, key, 1, INT32_MAX, &n))) return rc;
    json_object_set_new(out, "reject_every", json_integer(n));
  }
  if ((v = tk_toml_get(h, "reject_times"))) {
    snprintf(key, sizeof key, "%s.reject_times", where);
    if ((rc = get_int(c, v, key, 0, INT32_MAX, &n))) return rc;
    json_object_set_new(out, "reject_times", json_integer(n));
  }
  if ((v = tk_toml_get(h, "poison"))) {
    json_t *keys = NULL;
    snprintf(key, sizeof key, "%s.poison", where);
    if ((rc = string_array(c, v, key, 0, &keys))) return rc;
    json_object_set_new(out, "poison", keys);
  }
  return 0;
}

static int parse_builtin(parse_ctx *c, const tk_toml_value *h, const char *where, json_t *out) {
  static const char *const keys[] = {"kind", "name", "duration", "times", "retry_after",
                                     "permanent", "probability", "seed", "timeout",
                                     "reject_every", "reject_times", "poison"};
  static const char *const names[] = {"noop", "sleep", "fail", "flaky", "batch"};
  char key[160], buf[128];
  int rc = check_keys(c, h, where, keys, sizeof keys / sizeof keys[0]);
  if (rc) return rc;
  const tk_toml_value *v = tk_toml_get(h, "name");
  snprintf(key, sizeof key, "%s.name", where);
  if (v == NULL)
    return fail_at(c, h, key,
                   "missing: a builtin handler needs a name (noop, sleep, fail, flaky or batch)");
  if ((rc = want_type(c, v, key, TK_TOML_STRING, "a string"))) return rc;
  const char *name = tk_toml_string(v, NULL);
  int known = 0;
  for (size_t i = 0; i < 5; i++) known |= strcmp(name, names[i]) == 0;
  if (!known) {
    const char *near = tk__suggest(name, names, 5);
    return fail_at(c, v, key,
                   "unknown builtin \"%s\": expected noop, sleep, fail, flaky or batch%s%s%s",
                   name, near ? " (did you mean \"" : "", near ? near : "", near ? "\"?)" : "");
  }
  json_object_set_new(out, "name", json_string(name));
  int64_t ms, n;
  if ((v = tk_toml_get(h, "duration"))) {
    snprintf(key, sizeof key, "%s.duration", where);
    if ((rc = get_duration(c, v, key, &ms))) return rc;
    json_object_set_new(out, "duration_ms", json_integer(ms));
  } else if (strcmp(name, "sleep") == 0) {
    snprintf(key, sizeof key, "%s.duration", where);
    return fail_at(c, h, key, "missing: the sleep builtin needs a duration");
  }
  if ((v = tk_toml_get(h, "times"))) {
    snprintf(key, sizeof key, "%s.times", where);
    if ((rc = get_int(c, v, key, 0, 1000000000, &n))) return rc;
    json_object_set_new(out, "times", json_integer(n));
  }
  if ((v = tk_toml_get(h, "retry_after"))) {
    snprintf(key, sizeof key, "%s.retry_after", where);
    if ((rc = get_duration(c, v, key, &ms))) return rc;
    json_object_set_new(out, "retry_after_ms", json_integer(ms));
  }
  if ((rc = copy_bool(c, h, where, "permanent", out))) return rc;
  if ((v = tk_toml_get(h, "probability"))) {
    double p = -1;
    int64_t i;
    snprintf(key, sizeof key, "%s.probability", where);
    if (tk_toml_float(v, &p) != 0 && tk_toml_int(v, &i) == 0) p = (double)i;
    if (!(p >= 0 && p <= 1))
      return fail_at(c, v, key, "%s: expected a number from 0 to 1", show(v, buf, sizeof buf));
    json_object_set_new(out, "probability", json_real(p));
  }
  if ((v = tk_toml_get(h, "seed"))) {
    snprintf(key, sizeof key, "%s.seed", where);
    if ((rc = get_int(c, v, key, 0, INT64_MAX, &n))) return rc;
    json_object_set_new(out, "seed", json_integer(n));
  }
  return parse_batch_rule(c, h, where, out);
}

static int parse_command(parse_ctx *c, const tk_toml_value *h, const char *where, json_t *out) {
  static const char *const keys[] = {"kind", "argv", "shell", "cwd", "env", "timeout",
                                     "permanent_exit_codes", "max_output"};
  char key[160], buf[128];
  int rc = check_keys(c, h, where, keys, sizeof keys / sizeof keys[0]);
  if (rc) return rc;
  const tk_toml_value *v = tk_toml_get(h, "argv");
  snprintf(key, sizeof key, "%s.argv", where);
  if (v == NULL) return fail_at(c, h, key, "missing: a command handler needs argv = [\"program\", \"arg\", ...]");
  json_t *argv = NULL;
  if ((rc = string_array(c, v, key, 1, &argv))) return rc;
  json_object_set_new(out, "argv", argv);
  if ((rc = copy_bool(c, h, where, "shell", out))) return rc;
  if ((v = tk_toml_get(h, "cwd"))) {
    snprintf(key, sizeof key, "%s.cwd", where);
    if ((rc = want_type(c, v, key, TK_TOML_STRING, "a directory path"))) return rc;
    json_object_set_new(out, "cwd", json_string(tk_toml_string(v, NULL)));
  }
  if ((v = tk_toml_get(h, "env"))) {
    snprintf(key, sizeof key, "%s.env", where);
    if ((rc = want_type(c, v, key, TK_TOML_TABLE, "a table of strings"))) return rc;
    json_t *env = json_object();
    for (size_t i = 0; i < tk_toml_table_len(v); i++) {
      const tk_toml_entry *e = tk_toml_table_at(v, i);
      if (tk_toml_type_of(e->value) != TK_TOML_STRING) {
        json_decref(env);
        return fail_at(c, e->value, key, "%s = %s: expected a string", e->key,
                       show(e->value, buf, sizeof buf));
      }
      json_object_set_new(env, e->key, json_string(tk_toml_string(e->value, NULL)));
    }
    json_object_set_new(out, "env", env);
  }
  if ((v = tk_toml_get(h, "permanent_exit_codes"))) {
    snprintf(key, sizeof key, "%s.permanent_exit_codes", where);
    json_t *codes = json_array();
    if (tk_toml_type_of(v) != TK_TOML_ARRAY) {
      json_decref(codes);
      return fail_at(c, v, key, "%s: expected an array of exit codes (1 to 255)",
                     show(v, buf, sizeof buf));
    }
    for (size_t i = 0; i < tk_toml_array_len(v); i++) {
      int64_t code;
      if ((rc = get_int(c, tk_toml_array_at(v, i), key, 1, 255, &code))) {
        json_decref(codes);
        return rc;
      }
      json_array_append_new(codes, json_integer(code));
    }
    json_object_set_new(out, "permanent_exit_codes", codes);
  }
  if ((v = tk_toml_get(h, "max_output"))) {
    int64_t n;
    snprintf(key, sizeof key, "%s.max_output", where);
    if ((rc = get_int(c, v, key, 1, 64 << 20, &n))) return rc;
    json_object_set_new(out, "max_output", json_integer(n));
  }
  return 0;
}

/* { kind = "function", name = "..." }: an in-process C handler that the
 * embedding program registers; only the name can be checked here. */
static int parse_function(parse_ctx *c, const tk_toml_value *h, const char *where, json_t *out) {
  static const char *const keys[] = {"kind", "name", "timeout"};
  char key[160];
  int rc = check_keys(c, h, where, keys, 3);
  if (rc) return rc;
  const tk_toml_value *v = tk_toml_get(h, "name");
  snprintf(key, sizeof key, "%s.name", where);
  if (v == NULL) return fail_at(c, h, key, "missing: a function handler needs the registered name");
  if ((rc = check_name(c, v, key))) return rc;
  json_object_set_new(out, "name", json_string(tk_toml_string(v, NULL)));
  return 0;
}

static int parse_handler(parse_ctx *c, const tk_toml_value *h, const char *where, json_t **out) {
  static const char *const kinds[] = {"builtin", "command", "function"};
  char key[160];
  int rc = want_type(c, h, where, TK_TOML_TABLE, "a table such as { kind = \"command\", argv = [...] }");
  if (rc) return rc;
  const tk_toml_value *kind = tk_toml_get(h, "kind");
  snprintf(key, sizeof key, "%s.kind", where);
  if (kind == NULL)
    return fail_at(c, h, key, "missing: expected kind = \"builtin\", \"command\" or \"function\"");
  if ((rc = want_type(c, kind, key, TK_TOML_STRING, "a string"))) return rc;
  const char *k = tk_toml_string(kind, NULL);
  json_t *spec = json_pack("{s:s}", "kind", k);
  if (strcmp(k, "builtin") == 0) rc = parse_builtin(c, h, where, spec);
  else if (strcmp(k, "command") == 0) rc = parse_command(c, h, where, spec);
  else if (strcmp(k, "function") == 0) rc = parse_function(c, h, where, spec);
  else {
    const char *near = tk__suggest(k, kinds, 3);
    rc = fail_at(c, kind, key,
                 "unknown handler kind \"%s\": expected builtin, command or function%s%s%s", k,
                 near ? " (did you mean \"" : "", near ? near : "", near ? "\"?)" : "");
  }
  const tk_toml_value *t;
  if (!rc && (t = tk_toml_get(h, "timeout"))) {
    int64_t ms;
    snprintf(key, sizeof key, "%s.timeout", where);
    if (!(rc = get_duration(c, t, key, &ms))) json_object_set_new(spec, "timeout_ms", json_integer(ms));
  }
  if (rc) {
    json_decref(spec);
    return rc;
  }
  *out = spec;
  return 0;
}

/* A step's batch table (DESIGN §9, docs/batch.md) into JSON. Settings it
 * leaves out come from the configuration's [batch] table at submit. */
static int parse_batch(parse_ctx *c, const tk_toml_value *b, const char *where, json_t **out) {
  static const char *const keys[] = {"items_from", "max_in_call_retries", "max_item_attempts",
                                     "fail_if_any_gave_up"};
  char key[160];
  int rc = want_type(c, b, where, TK_TOML_TABLE, "a table such as { items_from = \"items\" }");
  if (!rc) rc = check_keys(c, b, where, keys, sizeof keys / sizeof keys[0]);
  if (rc) return rc;
  json_t *batch = json_object();
  const tk_toml_value *v = tk_toml_get(b, "items_from");
  snprintf(key, sizeof key, "%s.items_from", where);
  if (v == NULL) {
    rc = fail_at(c, b, key, "missing: a batch step needs items_from = \"KEY\", the context key "
                 "whose array holds its items");
    goto fail;
  }
  if ((rc = want_type(c, v, key, TK_TOML_STRING, "a context key"))) goto fail;
  if (tk_toml_string(v, NULL)[0] == '\0') {
    rc = fail_at(c, v, key, "\"\": expected a non-empty context key");
    goto fail;
  }
  json_object_set_new(batch, "items_from", json_string(tk_toml_string(v, NULL)));
  /* The same ranges as the [batch] configuration table. */
  static const struct { const char *name; int64_t lo, hi; } ints[] = {
      {"max_in_call_retries", 0, 1000}, {"max_item_attempts", 1, INT32_MAX}};
  for (size_t k = 0; k < 2; k++) {
    int64_t n;
    if ((v = tk_toml_get(b, ints[k].name)) == NULL) continue;
    snprintf(key, sizeof key, "%s.%s", where, ints[k].name);
    if ((rc = get_int(c, v, key, ints[k].lo, ints[k].hi, &n))) goto fail;
    json_object_set_new(batch, ints[k].name, json_integer(n));
  }
  if ((rc = copy_bool(c, b, where, "fail_if_any_gave_up", batch))) goto fail;
  *out = batch;
  return 0;
fail:
  json_decref(batch);
  return rc;
}

/* A batch step needs a handler that takes batches (the builtin "batch" or
 * a function), and the builtin "batch" needs a batch step. */
static int check_batch_handler(parse_ctx *c, const tk_toml_value *s, const char *where,
                               json_t *step) {
  json_t *h = json_object_get(step, "handler");
  const char *kind = json_string_value(json_object_get(h, "kind"));
  const char *name = json_string_value(json_object_get(h, "name"));
  int batch_builtin = strcmp(kind, "builtin") == 0 && strcmp(name, "batch") == 0;
  const tk_toml_value *b = tk_toml_get(s, "batch");
  char key[96];
  if (b == NULL && batch_builtin) {
    snprintf(key, sizeof key, "%s.handler.name", where);
    return fail_at(c, tk_toml_get(tk_toml_get(s, "handler"), "name"), key,
                   "the builtin \"batch\" runs only in a batch step: add "
                   "batch = { items_from = \"KEY\" }");
  }
  if (b == NULL || batch_builtin || strcmp(kind, "function") == 0) return 0;
  snprintf(key, sizeof key, "%s.batch", where);
  if (strcmp(kind, "command") == 0)
    return fail_at(c, b, key, "a command handler does not take batches yet: use the builtin "
                   "\"batch\" or a function handler (tk_engine_register_batch)");
  return fail_at(c, b, key, "the builtin \"%s\" does not take batches: use the builtin "
                 "\"batch\" or a function handler (tk_engine_register_batch)", name);
}

static int parse_step(parse_ctx *c, const tk_toml_value *s, size_t i, json_t **out) {
  static const char *const keys[] = {"name", "handler", "depends_on", "retry", "timeout",
                                     "description", "batch"};
  char where[64], key[96];
  snprintf(where, sizeof where, "steps[%zu]", i + 1);
  int rc = want_type(c, s, where, TK_TOML_TABLE, "a table ([[steps]])");
  if (!rc) rc = check_keys(c, s, where, keys, sizeof keys / sizeof keys[0]);
  if (rc) return rc;
  json_t *step = json_object();
  const tk_toml_value *v = tk_toml_get(s, "name");
  snprintf(key, sizeof key, "%s.name", where);
  if (v == NULL) { rc = fail_at(c, s, key, "missing: every step needs a name"); goto fail; }
  if ((rc = check_name(c, v, key))) goto fail;
  json_object_set_new(step, "name", json_string(tk_toml_string(v, NULL)));
  snprintf(key, sizeof key, "%s.handler", where);
  if ((v = tk_toml_get(s, "handler")) == NULL) {
    rc = fail_at(c, s, key, "missing: every step needs a handler");
    goto fail;
  }
  json_t *handler = NULL;
  if ((rc = parse_handler(c, v, key, &handler))) goto fail;
  json_object_set_new(step, "handler", handler);
  json_t *deps = json_array();
  json_object_set_new(step, "depends_on", deps);
  if ((v = tk_toml_get(s, "depends_on"))) {
    snprintf(key, sizeof key, "%s.depends_on", where);
    json_t *d = NULL;
    if ((rc = string_array(c, v, key, 0, &d))) goto fail;
    json_object_set_new(step, "depends_on", d);
  }
  if ((v = tk_toml_get(s, "retry"))) {
    snprintf(key, sizeof key, "%s.retry", where);
    json_t *r = NULL;
    if ((rc = parse_retry(c, v, key, &r))) goto fail;
    json_object_set_new(step, "retry", r);
  }
  if ((v = tk_toml_get(s, "timeout"))) {
    int64_t ms;
    snprintf(key, sizeof key, "%s.timeout", where);
    if ((rc = get_duration(c, v, key, &ms))) goto fail;
    json_object_set_new(json_object_get(step, "handler"), "timeout_ms", json_integer(ms));
  }
  if ((v = tk_toml_get(s, "description"))) {
    snprintf(key, sizeof key, "%s.description", where);
    if ((rc = want_type(c, v, key, TK_TOML_STRING, "a string"))) goto fail;
    json_object_set_new(step, "description", json_string(tk_toml_string(v, NULL)));
  }
  if ((v = tk_toml_get(s, "batch"))) {
    snprintf(key, sizeof key, "%s.batch", where);
    json_t *b = NULL;
    if ((rc = parse_batch(c, v, key, &b))) goto fail;
    json_object_set_new(step, "batch", b);
  }
  if ((rc = check_batch_handler(c, s, where, step))) goto fail;
  *out = step;
  return 0;
fail:
  json_decref(step);
  return rc;
}

/* Resolve depends_on names to indices, reject unknown and duplicate names
 * and cycles, and fill the edge list. */
static int build_dag(parse_ctx *c, const tk_toml_value *steps_v, json_t *steps,
                     tk__template *out) {
  size_t n = json_array_size(steps);
  const char **names = calloc(n, sizeof *names);
  int **parents = calloc(n, sizeof *parents);
  int *nparents = calloc(n, sizeof *nparents);
  int rc = 0, nedges = 0;
  if (!names || !parents || !nparents) { rc = TK_ENOMEM; goto done; }
  for (size_t i = 0; i < n; i++) {
    names[i] = json_string_value(json_object_get(json_array_get(steps, i), "name"));
    for (size_t j = 0; j < i && rc == 0; j++)
      if (strcmp(names[i], names[j]) == 0) {
        const tk_toml_value *nv = tk_toml_get(tk_toml_array_at(steps_v, i), "name");
        tk_toml_pos first = tk_toml_pos_of(tk_toml_get(tk_toml_array_at(steps_v, j), "name"));
        char key[64];
        snprintf(key, sizeof key, "steps[%zu].name", i + 1);
        rc = fail_at(c, nv, key, "duplicate step name \"%s\" (first used at line %u)", names[i],
                     first.line);
      }
  }
  for (size_t i = 0; i < n && rc == 0; i++) {
    json_t *deps = json_object_get(json_array_get(steps, i), "depends_on");
    size_t nd = json_array_size(deps);
    parents[i] = calloc(nd + 1, sizeof **parents);
    if (!parents[i]) { rc = TK_ENOMEM; break; }
    for (size_t d = 0; d < nd && rc == 0; d++) {
      const char *dep = json_string_value(json_array_get(deps, d));
      const tk_toml_value *dv = tk_toml_array_at(tk_toml_get(tk_toml_array_at(steps_v, i), "depends_on"), d);
      char key[64];
      snprintf(key, sizeof key, "steps[%zu].depends_on", i + 1);
      int found = -1;
      for (size_t j = 0; j < n; j++)
        if (strcmp(dep, names[j]) == 0) found = (int)j;
      if (found < 0) {
        const char *near = tk__suggest(dep, names, n);
        rc = fail_at(c, dv, key, "unknown step \"%s\"%s%s%s", dep,
                     near ? " (did you mean \"" : "", near ? near : "", near ? "\"?)" : "");
      } else if ((size_t)found == i) {
        rc = fail_at(c, dv, key, "step \"%s\" depends on itself", dep);
      } else {
        for (int k = 0; k < nparents[i]; k++)
          if (parents[i][k] == found)
            rc = fail_at(c, dv, key, "\"%s\" is listed twice", dep);
        if (!rc) {
          parents[i][nparents[i]++] = found;
          nedges++;
        }
      }
    }
  }
  if (rc == 0) {
    char cycle[512], key[64];
    int step = 0, dep = 0;
    rc = tk__dag_check((int)n, (const int *const *)parents, nparents, names, cycle, sizeof cycle,
                       &step, &dep);
    if (rc == TK_ECONFIG) {
      /* Point at the dependency that closes the cycle: depends_on entries
       * were taken in order, so entry `dep` of the parents is entry `dep`
       * of the step's depends_on. */
      const tk_toml_value *dv =
          tk_toml_array_at(tk_toml_get(tk_toml_array_at(steps_v, (size_t)step), "depends_on"),
                           (size_t)dep);
      snprintf(key, sizeof key, "steps[%d].depends_on", step + 1);
      rc = fail_at(c, dv ? dv : steps_v, dv ? key : "steps", "the dependencies form a cycle: %s",
                   cycle);
    }
  }
  if (rc == 0) {
    out->edges = malloc(((size_t)nedges + 1) * 2 * sizeof *out->edges);
    if (!out->edges) { rc = TK_ENOMEM; goto done; }
    out->nedges = 0;
    for (size_t i = 0; i < n; i++)
      for (int k = 0; k < nparents[i]; k++) {
        out->edges[2 * out->nedges] = parents[i][k];
        out->edges[2 * out->nedges + 1] = (int)i;
        out->nedges++;
      }
  }
done:
  if (rc == TK_ENOMEM) tk_err_set(c->err, TK_ENOMEM, "out of memory validating %s", c->file);
  for (size_t i = 0; parents && i < n; i++) free(parents[i]);
  free(parents);
  free(nparents);
  free(names);
  return rc;
}

int tk__template_from_toml(const tk_toml_doc *doc, const char *file, const tk_config *cfg,
                           tk__template *out, tk_err *err) {
  static const char *const keys[] = {"name", "namespace", "version", "description", "retry",
                                     "steps"};
  parse_ctx c = {file, cfg, err};
  memset(out, 0, sizeof *out);
  const tk_toml_value *root = tk_toml_root(doc);
  int rc = check_keys(&c, root, NULL, keys, sizeof keys / sizeof keys[0]);
  if (rc) return rc;
  json_t *def = json_object();
  const tk_toml_value *v;
  static const char *const ids[] = {"name", "namespace", "version"};
  for (int i = 0; i < 3; i++) {
    v = tk_toml_get(root, ids[i]);
    if (v == NULL) {
      if (i == 1) {
        json_object_set_new(def, "namespace", json_string("default"));
        continue;
      }
      rc = fail_at(&c, NULL, ids[i], "missing: a template needs %s = \"...\"", ids[i]);
      goto fail;
    }
    if ((rc = check_name(&c, v, ids[i]))) goto fail;
    json_object_set_new(def, ids[i], json_string(tk_toml_string(v, NULL)));
  }
  json_object_set_new(def, "description", json_string(""));
  if ((v = tk_toml_get(root, "description"))) {
    if ((rc = want_type(&c, v, "description", TK_TOML_STRING, "a string"))) goto fail;
    json_object_set_new(def, "description", json_string(tk_toml_string(v, NULL)));
  }
  json_t *retry = json_object();
  json_object_set_new(def, "retry", retry);
  if ((v = tk_toml_get(root, "retry"))) {
    if ((rc = parse_retry(&c, v, "retry", &retry))) goto fail;
    json_object_set_new(def, "retry", retry);
  }
  const tk_toml_value *steps_v = tk_toml_get(root, "steps");
  if (steps_v == NULL || tk_toml_type_of(steps_v) != TK_TOML_ARRAY ||
      tk_toml_array_len(steps_v) == 0) {
    rc = fail_at(&c, steps_v, "steps",
                 "a template needs at least one step ([[steps]] with a name and a handler)");
    goto fail;
  }
  json_t *steps = json_array();
  json_object_set_new(def, "steps", steps);
  for (size_t i = 0; i < tk_toml_array_len(steps_v); i++) {
    json_t *step = NULL;
    if ((rc = parse_step(&c, tk_toml_array_at(steps_v, i), i, &step))) goto fail;
    json_array_append_new(steps, step);
  }
  if ((rc = build_dag(&c, steps_v, steps, out))) goto fail;
  out->definition = def;
  return 0;
fail:
  json_decref(def);
  return rc;
}

int tk__template_from_file(const char *path, const tk_config *cfg, tk__template *out,
                           tk_err *err) {
  tk_toml_doc *doc;
  int rc = tk_toml_parse_file(path, &doc, err);
  if (rc) return rc;
  rc = tk__template_from_toml(doc, path, cfg, out, err);
  tk_toml_free(doc);
  return rc;
}

void tk__template_free(tk__template *t) {
  json_decref(t->definition);
  free(t->edges);
  memset(t, 0, sizeof *t);
}
