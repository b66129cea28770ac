/* The rules of decisions and map (flow.h), shared by the engine and every
 * backend. */
#include "store/flow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int no_memory(tk_err *err) {
  return tk_err_set(err, TK_ENOMEM, "out of memory reading a template's flow");
}

/* The position of step `name` among f's steps, or -1. */
static int step_index(const tk__flow *f, const char *name) {
  for (int i = 0; name && i < f->nsteps; i++)
    if (strcmp(f->steps[i].name, name) == 0) return i;
  return -1;
}

/* Append v to the int array *a of *n. */
static int push(int **a, int *n, int v) {
  int *grown = realloc(*a, ((size_t)*n + 1) * sizeof **a);
  if (grown == NULL) return -1;
  grown[(*n)++] = v;
  *a = grown;
  return 0;
}

static int64_t int_member(json_t *o, const char *key, int64_t dflt) {
  json_t *v = json_object_get(o, key);
  return json_is_integer(v) ? json_integer_value(v) : dflt;
}

/* The decision and map settings of step i from its definition. */
static int read_step(tk__flow *f, int i, json_t *def) {
  tk__flow_step *st = &f->steps[i];
  json_t *decides = json_object_get(def, "decides");
  size_t k;
  json_t *v;
  json_array_foreach(decides, k, v) {
    int b = step_index(f, json_string_value(v));
    if (b < 0 || push(&st->decides, &st->ndecides, b)) return -1;
  }
  st->allow_none = json_is_true(json_object_get(def, "allow_none"));
  st->branches_key = json_string_value(json_object_get(def, "branches_key"));
  if (st->branches_key == NULL) st->branches_key = "branches";
  json_t *map = json_object_get(def, "map");
  if (json_is_object(map)) {
    st->map = json_is_true(json_object_get(map, "range")) ? 2 : 1;
    st->map_parent = step_index(f, json_string_value(json_object_get(map, "parent")));
    st->map_path = json_object_get(map, "path");
    st->chunk = int_member(map, "chunk", 1);
    st->max = int_member(map, "max", INT64_MAX);
    st->max_failures = int_member(map, "max_failures", 0);
    if (st->map_parent < 0 || !json_is_array(st->map_path) || st->chunk < 1) return -1;
    /* Segments are named in messages as they are: strings only. */
    json_array_foreach(st->map_path, k, v) if (!json_is_string(v)) return -1;
  }
  if (st->ndecides > 0 || st->map) f->special = 1;
  return 0;
}

int tk__flow_read(int64_t template_id, const char *definition, const int *edges, int nedges,
                  tk__flow **out, tk_err *err) {
  *out = NULL;
  json_error_t jerr;
  json_t *def = json_loads(definition, 0, &jerr);
  if (def == NULL)
    return tk_err_set(err, TK_EINVAL, "template %lld: definition does not parse: %s",
                      (long long)template_id, jerr.text);
  tk__flow *f = calloc(1, sizeof *f);
  json_t *steps = json_object_get(def, "steps");
  size_t n = json_array_size(steps);
  if (f == NULL || (f->steps = calloc(n + 1, sizeof *f->steps)) == NULL) {
    free(f);
    json_decref(def);
    return no_memory(err);
  }
  f->template_id = template_id;
  f->definition = def;
  f->nsteps = (int)n;
  for (int i = 0; i < f->nsteps; i++) {
    f->steps[i].name = json_string_value(json_object_get(json_array_get(steps, i), "name"));
    if (f->steps[i].name == NULL) f->steps[i].name = "";
  }
  int bad = 0, bad_step = -1;
  for (int e = 0; e < nedges && !bad; e++) {
    int p = edges[2 * e], c = edges[2 * e + 1];
    if (p < 0 || c < 0 || p >= f->nsteps || c >= f->nsteps) {
      tk__flow_free(f);
      return tk_err_set(err, TK_EINVAL, "template %lld: edge %d (%d -> %d) names no step of its %d",
                        (long long)template_id, e, p, c, (int)n);
    }
    bad = push(&f->steps[p].children, &f->steps[p].nchildren, c) ||
          push(&f->steps[c].parents, &f->steps[c].nparents, p);
  }
  if (bad) {
    tk__flow_free(f);
    return no_memory(err);
  }
  for (int i = 0; i < f->nsteps && bad_step < 0; i++)
    if (read_step(f, i, json_array_get(steps, i)) != 0) bad_step = i;
  if (bad_step >= 0) {
    /* read_step fails on memory too, but a damaged definition is the
     * likelier cause: name the step to look at. */
    tk_err_set(err, TK_EINVAL,
               "template %lld: step %s: its decides or map names no step of the template, "
               "or its map has no parent, path or chunk >= 1",
               (long long)template_id, f->steps[bad_step].name);
    tk__flow_free(f);
    return TK_EINVAL;
  }
  *out = f;
  return 0;
}

void tk__flow_free(tk__flow *f) {
  if (f == NULL) return;
  for (int i = 0; i < f->nsteps; i++) {
    free(f->steps[i].parents);
    free(f->steps[i].children);
    free(f->steps[i].decides);
  }
  free(f->steps);
  json_decref(f->definition);
  free(f);
}

int tk__flow_is_decision(const tk__flow *f, int idx) {
  return f && idx >= 0 && idx < f->nsteps && f->steps[idx].ndecides > 0;
}

int tk__flow_is_map(const tk__flow *f, int idx) {
  return f && idx >= 0 && idx < f->nsteps && f->steps[idx].map != 0;
}

/* Up to cap bytes of v's compact JSON into buf, "..." when cut. */
static void shown(char *buf, size_t cap, json_t *v) {
  char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  const char *t = text ? text : "nothing";
  size_t len = strlen(t);
  if (len < cap) snprintf(buf, cap, "%s", t);
  else snprintf(buf, cap, "%.*s...", (int)(cap > 4 ? cap - 4 : 0), t);
  free(text);
}

/* The names of step idx's branches, "a, b", into buf. */
static void branch_names(const tk__flow *f, int idx, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  const tk__flow_step *st = &f->steps[idx];
  for (int i = 0; i < st->ndecides && used < cap; i++) {
    int w = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "",
                     f->steps[st->decides[i]].name);
    if (w < 0) break;
    used += (size_t)w;
  }
}

int tk__flow_decide(const tk__flow *f, int idx, const char *results, unsigned char *chosen,
                    char *why, size_t whylen) {
  memset(chosen, 0, (size_t)f->nsteps);
  const tk__flow_step *st = &f->steps[idx];
  char got[120], names[200];
  branch_names(f, idx, names, sizeof names);
  json_t *r = results ? json_loads(results, JSON_DECODE_ANY, NULL) : NULL;
  json_t *list = json_is_object(r) ? json_object_get(r, st->branches_key) : NULL;
  int rc = 0;
  if (list != NULL && !json_is_null(list) && !json_is_array(list)) {
    shown(got, sizeof got, r);
    snprintf(why, whylen, "decision: results' \"%s\" must be an array of step names, got %s",
             st->branches_key, got);
    rc = TK_EINVAL;
  } else if (!json_is_object(r)) {
    shown(got, sizeof got, r);
    snprintf(why, whylen,
             "decision: results must be an object with a \"%s\" array naming the branches "
             "(%s), got %s",
             st->branches_key, names, got);
    rc = TK_EINVAL;
  }
  size_t k;
  json_t *v;
  int n = 0;
  if (rc == 0) json_array_foreach(list, k, v) {
      const char *name = json_string_value(v);
      int b = -1;
      for (int i = 0; name && i < st->ndecides && b < 0; i++)
        if (strcmp(f->steps[st->decides[i]].name, name) == 0) b = st->decides[i];
      if (b < 0) {
        shown(got, sizeof got, v);
        snprintf(why, whylen, "decision: %s is not one of the branches of %s (%s)", got,
                 st->name, names);
        rc = TK_EINVAL;
        break;
      }
      if (chosen[b]) {
        shown(got, sizeof got, v);
        snprintf(why, whylen, "decision: %s is named twice", got);
        rc = TK_EINVAL;
        break;
      }
      chosen[b] = 1;
      n++;
    }
  if (rc == 0 && n == 0 && !st->allow_none) {
    shown(got, sizeof got, list);
    snprintf(why, whylen,
             "decision: %s chose no branch (\"%s\" is %s) and does not allow none: name one "
             "of %s, or set allow_none = true",
             st->name, st->branches_key, got, names);
    rc = TK_EINVAL;
  }
  json_decref(r);
  if (rc) memset(chosen, 0, (size_t)f->nsteps);
  return rc;
}

/* The value at `path` in v (segments of digits index arrays), or NULL. */
static json_t *walk(json_t *v, json_t *path) {
  size_t k;
  json_t *seg;
  json_array_foreach(path, k, seg) {
    const char *s = json_string_value(seg);
    if (s == NULL) return NULL;
    if (json_is_array(v)) {
      char *end;
      unsigned long long i = strtoull(s, &end, 10);
      if (*s == '\0' || *end != '\0' || s[0] == '-') return NULL;
      v = json_array_get(v, (size_t)i);
    } else {
      v = json_object_get(v, s);
    }
    if (v == NULL) return NULL;
  }
  return v;
}

/* "parents.list.files" for map step st, into buf. */
static void where(const tk__flow *f, const tk__flow_step *st, char *buf, size_t cap) {
  size_t used = (size_t)snprintf(buf, cap, "parents.%s", f->steps[st->map_parent].name);
  size_t k;
  json_t *seg;
  json_array_foreach(st->map_path, k, seg) {
    if (used >= cap) break;
    used += (size_t)snprintf(buf + used, cap - used, ".%s", json_string_value(seg));
  }
}

int tk__flow_map_elements(const tk__flow *f, int idx, const char *parent_results,
                          json_t **elements, char *why, size_t whylen) {
  *elements = NULL;
  const tk__flow_step *st = &f->steps[idx];
  char at[160], got[120];
  where(f, st, at, sizeof at);
  json_t *r = parent_results ? json_loads(parent_results, JSON_DECODE_ANY, NULL) : NULL;
  json_t *v = r ? walk(r, st->map_path) : NULL;
  int rc = 0;
  if (st->map == 1) {
    if (!json_is_array(v)) {
      shown(got, sizeof got, v);
      snprintf(why, whylen, "map over {{%s}}: expected a list, got %s", at, got);
      rc = TK_EINVAL;
    } else if ((int64_t)json_array_size(v) > st->max) {
      snprintf(why, whylen, "map over {{%s}}: %zu elements, more than max %lld", at,
               json_array_size(v), (long long)st->max);
      rc = TK_ERANGE;
    } else {
      *elements = json_incref(v);
    }
  } else {
    int64_t total = json_is_integer(v) ? json_integer_value(v) : -1;
    int64_t count = total < 0 ? 0 : total / st->chunk + (total % st->chunk != 0);
    if (total < 0) {
      shown(got, sizeof got, v);
      snprintf(why, whylen, "map range {{%s}}: expected a non-negative integer, got %s", at,
               got);
      rc = TK_EINVAL;
    } else if (count > st->max) {
      snprintf(why, whylen,
               "map range {{%s}}: %lld in chunks of %lld is %lld instances, more than max %lld",
               at, (long long)total, (long long)st->chunk, (long long)count, (long long)st->max);
      rc = TK_ERANGE;
    } else if ((*elements = json_array()) == NULL) {
      rc = TK_ENOMEM;
    }
    /* Each chunk starts where the last ended: start + chunk is never
     * computed past total, where it could overflow. */
    for (int64_t start = 0, end = 0; rc == 0 && start < total; start = end) {
      end = total - start > st->chunk ? start + st->chunk : total;
      if (json_array_append_new(*elements, json_pack("{sIsI}", "start", (json_int_t)start, "end",
                                                     (json_int_t)end)) != 0)
        rc = TK_ENOMEM;
    }
  }
  if (rc == TK_ENOMEM) snprintf(why, whylen, "out of memory mapping step %s", st->name);
  if (rc) {
    json_decref(*elements);
    *elements = NULL;
  }
  json_decref(r);
  return rc;
}

int tk__flow_map_verdict(const tk__flow *f, int idx, int64_t total, int64_t failed, char *why,
                         size_t whylen) {
  const tk__flow_step *st = &f->steps[idx];
  if (failed <= st->max_failures) return 1;
  snprintf(why, whylen, "%lld of %lld instances failed; max_failures is %lld", (long long)failed,
           (long long)total, (long long)st->max_failures);
  return 0;
}

void tk__flow_instance_name(char *buf, size_t cap, const char *name, int64_t i) {
  snprintf(buf, cap, "%s[%lld]", name, (long long)i);
}
