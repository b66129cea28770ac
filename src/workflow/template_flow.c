/* Decisions and maps in a template (template_flow.h): refused at `template
 * add`, with the place, whatever could only fail at run time. */
#include "workflow/template_flow.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/placeholder.h"

static int no_memory(const tk__spec_where *at) {
  return tk_err_set(at->err, TK_ENOMEM, "out of memory validating %s", at->file);
}

/* Fail as the schema does, "PATH.KEY = VALUE: what", for value v. */
static int refuse(const tk__spec_where *w, const char *key, const tk_toml_value *v,
                  const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int refuse(const tk__spec_where *w, const char *key, const tk_toml_value *v,
                  const char *fmt, ...) {
  tk__complaint why = {.at = v};
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why.what, sizeof why.what, fmt, ap);
  va_end(ap);
  return tk__spec_refuse(w, key, &why);
}

/* Whether the JSON array of strings a holds s. */
static int holds(json_t *a, const char *s) {
  size_t i;
  json_t *v;
  json_array_foreach(a, i, v) {
    if (strcmp(json_string_value(v), s) == 0) return 1;
  }
  return 0;
}

/* "a, b" of the JSON array of strings a, into buf. */
static const char *listed(json_t *a, char *buf, size_t cap) {
  size_t used = 0, i;
  json_t *v;
  buf[0] = '\0';
  json_array_foreach(a, i, v) {
    int n = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", json_string_value(v));
    if (n < 0 || (size_t)n >= cap - used) break;
    used += (size_t)n;
  }
  return buf;
}

/* ---- map ------------------------------------------------------------------------ */

static int is_seg_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

/* text, one placeholder {{parents.P.a.b}} (placeholder.h), into P (a new
 * string in *parent) and its path ["a", "b"]. 0; TK_EINVAL when it is not
 * one reference to a parent's results, with a syntax error's reason in
 * why ("" for any other). */
static int parent_ref(const char *text, json_t **parent, json_t *path, char *why, size_t whylen) {
  tk__ph *ph = NULL;
  int rc = tk__ph_compile(text, strlen(text), &ph, why, whylen);
  if (rc == TK_ENOMEM) return rc;
  int single = rc == 0 && tk__ph_single(ph);
  tk__ph_free(ph);
  if (rc == 0) why[0] = '\0';
  if (!single) return TK_EINVAL;
  /* The grammar holds: "{{", blanks, a source, ".segment"s, blanks, "}}". */
  const char *p = text + 2;
  while (*p == ' ' || *p == '\t') p++;
  if (strncmp(p, "parents", 7) != 0 || p[7] != '.') return TK_EINVAL;
  p += 7;
  *parent = NULL;
  while (*p == '.') {
    const char *seg = ++p;
    while (is_seg_char(*p)) p++;
    json_t *s = json_stringn(seg, (size_t)(p - seg));
    if (s == NULL) return TK_ENOMEM;
    if (*parent == NULL) *parent = s;
    else if (json_array_append_new(path, s) != 0) return TK_ENOMEM;
  }
  return 0;
}

/* 0 when `parent` is one of step's depends_on; else refuse key = v. */
static int need_parent(const tk__spec_where *w, const char *key, const tk_toml_value *v,
                       json_t *step, const char *parent) {
  json_t *deps = json_object_get(step, "depends_on");
  if (holds(deps, parent)) return 0;
  char have[256];
  return refuse(w, key, v, "\"%s\" is not a parent of this step (depends_on: %s)", parent,
                json_array_size(deps) ? listed(deps, have, sizeof have) : "none");
}

/* Step `where`'s map table mv into step's "map", normalized. */
static int read_map(const tk__spec_where *at, const tk_config *cfg, const char *where,
                    const tk_toml_value *mv, json_t *step) {
  static const char ref[] = "one placeholder of a parent's results, such as ";
  char key[96], max_allowed[128], over_allowed[128], range_allowed[128];
  snprintf(key, sizeof key, "%s.map", where);
  int64_t ceiling = tk_config_limits(cfg)->map_max;
  snprintf(max_allowed, sizeof max_allowed,
           "an integer from 1 to %lld (the ceiling, limits.map_max)", (long long)ceiling);
  snprintf(over_allowed, sizeof over_allowed, "%s\"{{parents.list.files}}\"", ref);
  snprintf(range_allowed, sizeof range_allowed, "%s\"{{parents.count.rows}}\"", ref);
  const tk__key keys[] = {
      {.name = "over", .kind = TK__K_STRING, .allowed = over_allowed},
      {.name = "range", .kind = TK__K_STRING, .allowed = range_allowed},
      {.name = "chunk", .kind = TK__K_INT, .min = 1, .max = INT64_MAX,
       .allowed = "an integer >= 1"},
      {.name = "max", .kind = TK__K_INT, .min = 1, .max = ceiling, .allowed = max_allowed},
      {.name = "max_failures", .kind = TK__K_INT, .min = 0, .max = INT64_MAX,
       .allowed = "an integer >= 0"},
  };
  const tk__schema schema = {"map", keys, sizeof keys / sizeof keys[0]};
  tk__spec_where w = {at->file, key, at->err};
  json_t *given = json_object(), *map = json_object(), *path = json_array(), *parent = NULL;
  int rc = 0;
  if (!given || !map || !path) {
    rc = no_memory(at);
    goto done;
  }
  if ((rc = tk__spec_read(&w, &schema, mv, given))) goto done;
  const tk_toml_value *over = tk_toml_get(mv, "over"), *range = tk_toml_get(mv, "range");
  const tk_toml_value *chunk = tk_toml_get(mv, "chunk");
  json_int_t max = json_is_integer(json_object_get(given, "max"))
                       ? json_integer_value(json_object_get(given, "max"))
                       : ceiling;
  json_t *failures = json_object_get(given, "max_failures");
  if (over && range) {
    rc = tk__spec_fail(&w, range, "range",
                       "a map runs over a list (over) or a range, not both");
  } else if (!over && !range) {
    rc = tk__spec_fail(&w, mv, NULL,
                       "missing: a map needs over = \"{{parents.STEP.PATH}}\" (a list) or "
                       "range = \"{{parents.STEP.PATH}}\" (a count)");
  } else if (chunk && !range) {
    rc = tk__spec_fail(&w, chunk, "chunk", "applies to a range only (map.range)");
  } else if (failures && json_integer_value(failures) > max) {
    rc = refuse(&w, "max_failures", tk_toml_get(mv, "max_failures"),
                "must be an integer from 0 to max (%lld)", (long long)max);
  }
  if (rc) goto done;
  const char *name = over ? "over" : "range";
  const tk_toml_value *ref_v = over ? over : range;
  char why[256];
  int got = parent_ref(json_string_value(json_object_get(given, name)), &parent, path, why,
                       sizeof why);
  if (got == TK_ENOMEM) {
    rc = no_memory(at);
    goto done;
  }
  if (got) {
    rc = refuse(&w, name, ref_v, "expected %s%s%s%s", over ? over_allowed : range_allowed,
                why[0] ? " (" : "", why, why[0] ? ")" : "");
    goto done;
  }
  if ((rc = need_parent(&w, name, ref_v, step, json_string_value(parent)))) goto done;
  int bad = json_object_set_new(map, "parent", parent) != 0;
  parent = NULL;
  bad |= json_object_set(map, "path", path) != 0;
  if (range) {
    bad |= json_object_set_new(map, "range", json_true()) != 0;
    json_t *c = json_object_get(given, "chunk");
    bad |= json_object_set_new(map, "chunk", c ? json_incref(c) : json_integer(1)) != 0;
  }
  bad |= json_object_set_new(map, "max", json_integer(max)) != 0;
  bad |= json_object_set_new(map, "max_failures",
                             failures ? json_incref(failures) : json_integer(0)) != 0;
  bad |= json_object_set(step, "map", map) != 0;
  if (bad) rc = no_memory(at);
done:
  json_decref(given);
  json_decref(map);
  json_decref(path);
  json_decref(parent);
  return rc;
}

int tk__template_flow_step(const tk__spec_where *at, const tk_config *cfg, const tk_toml_value *s,
                           const char *where, json_t *step) {
  tk__spec_where w = {at->file, where, at->err};
  const tk_toml_value *decides = tk_toml_get(s, "decides"), *map = tk_toml_get(s, "map");
  const tk_toml_value *batch = tk_toml_get(s, "batch");
  static const char *const decision_keys[] = {"allow_none", "branches_key"};
  for (size_t k = 0; !decides && k < 2; k++) {
    const tk_toml_value *v = tk_toml_get(s, decision_keys[k]);
    if (v)
      return tk__spec_fail(&w, v, decision_keys[k],
                           "applies to a decision step only (one with decides = [...])");
  }
  if (decides && map)
    return tk__spec_fail(&w, map, "map", "a step cannot both decide and map");
  if (decides && batch)
    return tk__spec_fail(&w, decides, "decides",
                         "a batch step cannot decide: its results are its items' counts");
  if (map && batch) return tk__spec_fail(&w, map, "map", "a map step cannot be a batch step");
  if (decides) {
    int bad = json_object_get(step, "allow_none") == NULL &&
              json_object_set_new(step, "allow_none", json_false()) != 0;
    bad |= json_object_get(step, "branches_key") == NULL &&
           json_object_set_new(step, "branches_key", json_string("branches")) != 0;
    if (bad) return no_memory(at);
  }
  return map ? read_map(at, cfg, where, map, step) : 0;
}

/* ---- decisions ------------------------------------------------------------------ */

/* The position of the step named `name` in steps, or -1. */
static int step_at(json_t *steps, const char *name) {
  size_t i;
  json_t *st;
  json_array_foreach(steps, i, st) {
    if (strcmp(json_string_value(json_object_get(st, "name")), name) == 0) return (int)i;
  }
  return -1;
}

/* Step i's decides (dv in the TOML): each a step that depends on it,
 * named once. */
static int check_branches(const tk__spec_where *w, json_t *steps, size_t i,
                          const tk_toml_value *dv) {
  json_t *step = json_array_get(steps, i), *decides = json_object_get(step, "decides");
  const char *self = json_string_value(json_object_get(step, "name"));
  size_t n = json_array_size(steps);
  for (size_t d = 0; d < json_array_size(decides); d++) {
    const char *name = json_string_value(json_array_get(decides, d));
    const tk_toml_value *v = tk_toml_array_at(dv, d);
    int b = step_at(steps, name);
    if (b < 0) {
      const char **names = calloc(n + 1, sizeof *names);
      if (names == NULL) return no_memory(w);
      for (size_t k = 0; k < n; k++)
        names[k] = json_string_value(json_object_get(json_array_get(steps, k), "name"));
      const char *near = tk__suggest(name, names, n);
      int rc = tk__spec_fail(w, v, "decides", "unknown step \"%s\"%s%s%s", name,
                             near ? " (did you mean \"" : "", near ? near : "",
                             near ? "\"?)" : "");
      free(names);
      return rc;
    }
    if ((size_t)b == i)
      return tk__spec_fail(w, v, "decides", "step \"%s\" cannot be its own branch", name);
    for (size_t e = 0; e < d; e++)
      if (strcmp(json_string_value(json_array_get(decides, e)), name) == 0)
        return tk__spec_fail(w, v, "decides", "\"%s\" is listed twice", name);
    if (!holds(json_object_get(json_array_get(steps, (size_t)b), "depends_on"), self))
      return tk__spec_fail(w, v, "decides",
                           "branch \"%s\" does not depend on \"%s\": a branch lists its "
                           "decider in depends_on",
                           name, self);
  }
  return 0;
}

/* One array of choose's branches (names, at nv; key "cases.X" or
 * "default" under w's handler path): each a branch of the step, once;
 * empty only when the step allows none. */
static int check_choice(const tk__spec_where *w, const char *key, json_t *step, json_t *names,
                        const tk_toml_value *nv) {
  json_t *decides = json_object_get(step, "decides");
  char have[256];
  if (json_array_size(names) == 0 && !json_is_true(json_object_get(step, "allow_none")))
    return refuse(w, key, nv,
                  "chooses no branch, and the step does not allow none: name some of %s, or "
                  "set allow_none = true",
                  listed(decides, have, sizeof have));
  for (size_t k = 0; k < json_array_size(names); k++) {
    const char *name = json_string_value(json_array_get(names, k));
    tk__complaint why = {.at = tk_toml_array_at(nv, k), .index = (int)k + 1};
    if (!holds(decides, name))
      snprintf(why.what, sizeof why.what, "expected one of the step's branches (decides: %s)",
               listed(decides, have, sizeof have));
    for (size_t e = 0; e < k && !why.what[0]; e++)
      if (strcmp(json_string_value(json_array_get(names, e)), name) == 0)
        snprintf(why.what, sizeof why.what, "\"%s\" is listed twice", name);
    if (why.what[0]) return tk__spec_refuse(w, key, &why);
  }
  return 0;
}

/* A choose handler (spec, TOML table hv) of step `step`, at `where`. */
static int check_choose(const tk__spec_where *at, const char *where, json_t *step, json_t *spec,
                        const tk_toml_value *hv) {
  char path[96], why[256];
  snprintf(path, sizeof path, "%s.handler", where);
  tk__spec_where w = {at->file, path, at->err};
  if (json_object_get(step, "decides") == NULL)
    return refuse(&w, "name", tk_toml_get(hv, "name"),
                  "the choose builtin runs on a decision step only: add decides = [...], the "
                  "branches it chooses between");
  const char *value = json_string_value(json_object_get(spec, "value"));
  tk__ph *ph = NULL;
  int rc = tk__ph_compile(value, strlen(value), &ph, why, sizeof why);
  if (rc == TK_ENOMEM) return no_memory(at);
  int single = rc == 0 && tk__ph_single(ph);
  tk__ph_free(ph);
  const char *p = value + 2;
  while (single && (*p == ' ' || *p == '\t')) p++;
  if (single && strncmp(p, "env", 3) == 0 && !is_seg_char(p[3]))
    return refuse(&w, "value", tk_toml_get(hv, "value"),
                  "expected a value of the context or of the parents' results: one from env "
                  "would be shown in the step's failures");
  if (!single)
    return refuse(&w, "value", tk_toml_get(hv, "value"),
                  "expected one placeholder such as \"{{parents.score.risk}}\"%s%s%s",
                  rc ? " (" : "", rc ? why : "", rc ? ")" : "");
  /* A parent's value: the step must depend on it, or it is never there. */
  json_t *parent = NULL, *segs = json_array();
  if (segs == NULL) return no_memory(at);
  rc = parent_ref(value, &parent, segs, why, sizeof why);
  if (rc == 0) rc = need_parent(&w, "value", tk_toml_get(hv, "value"), step,
                                json_string_value(parent));
  json_decref(parent);
  json_decref(segs);
  if (rc == TK_ENOMEM) return no_memory(at);
  if (rc == TK_ECONFIG) return rc; /* else 0, or TK_EINVAL: not a parent's value */
  const tk_toml_value *cv = tk_toml_get(hv, "cases");
  for (size_t i = 0; i < tk_toml_table_len(cv); i++) {
    const tk_toml_entry *e = tk_toml_table_at(cv, i);
    char key[160];
    snprintf(key, sizeof key, "cases.%s", e->key);
    json_t *names = json_object_get(json_object_get(spec, "cases"), e->key);
    if ((rc = check_choice(&w, key, step, names, e->value))) return rc;
  }
  json_t *dflt = json_object_get(spec, "default");
  if (dflt && (rc = check_choice(&w, "default", step, dflt, tk_toml_get(hv, "default"))))
    return rc;
  /* The handler sees its spec only: a step's own branches_key goes there,
   * so that choose answers under the key its decision is read from. */
  json_t *key = json_object_get(step, "branches_key");
  if (key && strcmp(json_string_value(key), "branches") != 0 &&
      json_object_set(spec, "branches_key", key) != 0)
    return no_memory(at);
  return 0;
}

int tk__template_flow_check(const tk__spec_where *at, const tk_toml_value *steps_v,
                            json_t *steps) {
  for (size_t i = 0; i < json_array_size(steps); i++) {
    json_t *step = json_array_get(steps, i), *spec = json_object_get(step, "handler");
    const tk_toml_value *sv = tk_toml_array_at(steps_v, i);
    char where[64];
    snprintf(where, sizeof where, "steps[%zu]", i + 1);
    tk__spec_where w = {at->file, where, at->err};
    int rc = 0;
    if (json_object_get(step, "decides"))
      rc = check_branches(&w, steps, i, tk_toml_get(sv, "decides"));
    const char *kind = json_string_value(json_object_get(spec, "kind"));
    const char *name = json_string_value(json_object_get(spec, "name"));
    if (rc == 0 && kind && name && strcmp(kind, "builtin") == 0 && strcmp(name, "choose") == 0)
      rc = check_choose(at, where, step, spec, tk_toml_get(sv, "handler"));
    if (rc) return rc;
  }
  return 0;
}
