/* Templates: validating a TOML workflow into its normalized definition.
 * Every rejection names FILE:LINE:COLUMN, the key, the value and what was
 * expected, and nothing is stored unless the whole template is valid.
 *
 * Each table is read against a key schema (config/spec.h, the mechanism
 * the configuration uses); a step's handler table by its kind
 * (src/handlers/). What is left here is the shape: steps, their
 * dependencies, and the checks that span keys. */
#include "workflow/template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/workflow.h>

#include "config/spec.h"
#include "handlers/handler.h"
#include "workflow/template_flow.h"

static const tk__key root_keys[] = {
    {.name = "name", .kind = TK__K_NAME, .missing = "a template needs name = \"...\""},
    {.name = "namespace", .kind = TK__K_NAME},
    {.name = "version", .kind = TK__K_NAME, .missing = "a template needs version = \"...\""},
    {.name = "description", .kind = TK__K_TEXT, .allowed = "a string"},
    {.name = "retry", .kind = TK__K_OTHER},
    {.name = "steps", .kind = TK__K_OTHER},
    /* The task's deadline (DESIGN §3), from its submit: tk_deadline_check's
     * range. */
    {.name = "deadline", .kind = TK__K_DURATION, .json = "deadline_ms", .min = 1,
     .max = TK_DEADLINE_MAX_MS, .allowed = "a duration > 0 and at most 100 years, such as \"2h\""},
};

static const tk__key step_keys[] = {
    {.name = "name", .kind = TK__K_NAME, .missing = "every step needs a name"},
    {.name = "handler", .kind = TK__K_OTHER, .missing = "every step needs a handler"},
    {.name = "depends_on", .kind = TK__K_STRINGS, .min = 0, .allowed = "an array of strings"},
    {.name = "retry", .kind = TK__K_OTHER},
    /* Moved into the handler's spec, over a timeout it gives. */
    {.name = "timeout", .kind = TK__K_DURATION, .json = "timeout_ms", .min = 0,
     .max = INT64_MAX, .allowed = "a duration >= 0"},
    {.name = "description", .kind = TK__K_TEXT, .allowed = "a string"},
    {.name = "batch", .kind = TK__K_OTHER},
    /* The queue whose limits its claims obey (DESIGN §19); read below. */
    {.name = "queue", .kind = TK__K_OTHER},
    TK__FLOW_STEP_KEYS,
};

static const tk__key retry_keys[] = {
    {.name = "max_attempts", .kind = TK__K_INT, .min = 1, .max = 1000000,
     .allowed = "an integer from 1 to 1000000"},
    {.name = "backoff", .kind = TK__K_STRING, .allowed = "a backoff profile name"},
    {.name = "retryable", .kind = TK__K_BOOL},
    /* A [budgets.NAME] of the configuration (DESIGN §14). */
    {.name = "budget", .kind = TK__K_STRING, .allowed = "a retry budget name"},
};

/* A step's batch table (DESIGN §9, docs/batch.md). Settings it leaves out
 * come from the configuration's [batch] table at submit; the ranges are
 * that table's (schema.c). */
static const tk__key batch_keys[] = {
    {.name = "items_from", .kind = TK__K_STRING, .allowed = "a non-empty context key",
     .missing = "a batch step needs items_from = \"KEY\", the context key whose array holds "
                "its items"},
    {.name = "max_in_call_retries", .kind = TK__K_INT, .min = 0, .max = 1000,
     .allowed = "an integer from 0 to 1000"},
    {.name = "max_item_attempts", .kind = TK__K_INT, .min = 1, .max = INT32_MAX,
     .allowed = "an integer from 1 to 2147483647"},
    {.name = "fail_if_any_gave_up", .kind = TK__K_BOOL},
};

#define SCHEMA(name, keys) {name, keys, sizeof keys / sizeof keys[0]}
static const tk__schema root_schema = SCHEMA("template", root_keys);
static const tk__schema step_schema = SCHEMA("step", step_keys);
static const tk__schema retry_schema = SCHEMA("retry", retry_keys);
static const tk__schema batch_schema = SCHEMA("batch", batch_keys);

/* Read table t (at key path `path`) against schema s into a new JSON
 * object in *out. */
static int read_table(const tk__spec_where *at, const char *path, const tk__schema *s,
                      const tk_toml_value *t, json_t **out) {
  tk__spec_where w = {at->file, path, at->err};
  *out = json_object();
  if (*out == NULL) return tk_err_set(at->err, TK_ENOMEM, "out of memory reading %s", at->file);
  int rc = tk__spec_read(&w, s, t, *out);
  if (rc) {
    json_decref(*out);
    *out = NULL;
  }
  return rc;
}

/* The names a configuration has, for "configured: a, b" (NULL entries
 * end it); "none" when there are none. */
static void known_names(const tk_config *cfg, const char *(*name_at)(const tk_config *, size_t),
                        char *known, size_t cap) {
  size_t used = 0;
  known[0] = '\0';
  for (size_t i = 0; name_at(cfg, i) != NULL; i++) {
    int n = snprintf(known + used, cap - used, "%s%s", i ? ", " : "", name_at(cfg, i));
    if (n < 0 || (size_t)n >= cap - used) break;
    used += (size_t)n;
  }
  if (used == 0) snprintf(known, cap, "none");
}

/* The retry table of the template or of a step (at `path`), with its
 * backoff profile and its retry budget looked up in the configuration. */
static int parse_retry(const tk__spec_where *at, const tk_config *cfg, const tk_toml_value *t,
                       const char *path, json_t **out) {
  int rc = read_table(at, path, &retry_schema, t, out);
  if (rc) return rc;
  /* The document's names: *out may go. */
  const tk_toml_value *pv = tk_toml_get(t, "backoff"), *bv = tk_toml_get(t, "budget");
  const char *profile = tk_toml_string(pv, NULL), *budget = tk_toml_string(bv, NULL);
  int bad_profile = profile != NULL && tk_config_profile(cfg, profile) == NULL;
  int bad_budget = !bad_profile && budget != NULL && tk_config_budget(cfg, budget) == NULL;
  if (!bad_profile && !bad_budget) return 0;
  char known[256];
  json_decref(*out);
  *out = NULL;
  tk__spec_where w = {at->file, path, at->err};
  if (bad_profile) {
    known_names(cfg, tk_config_profile_name, known, sizeof known);
    return tk__spec_fail(&w, pv, "backoff", "unknown backoff profile \"%s\" (configured: %s)",
                         profile, known);
  }
  known_names(cfg, tk_config_budget_name, known, sizeof known);
  return tk__spec_fail(&w, bv, "budget",
                       "unknown retry budget \"%s\" (configured: %s; a budget is a "
                       "[budgets.NAME] table of the configuration)",
                       budget, known);
}

/* The step's queue = "NAME" (at `where`, "steps[N]") into step: a queue
 * name by the workers' rule, and for a worker step (handler, its spec)
 * the handler's own queue, the one its workers claim from. */
static int parse_queue(const tk__spec_where *at, const char *where, const tk_toml_value *v,
                       json_t *handler, json_t *step) {
  tk__spec_where w = {at->file, where, at->err};
  size_t len;
  const char *name;
  int rc = tk__spec_queue_name(&w, "queue", v, &name, &len);
  if (rc) return rc;
  const char *own = json_string_value(json_object_get(handler, "queue"));
  if (own != NULL && strcmp(own, name) != 0) {
    tk__complaint why = {.at = v};
    snprintf(why.what, sizeof why.what,
             "a worker step's queue is its handler's (\"%.64s\"), the one its workers claim "
             "from: leave queue out or make it \"%.64s\"",
             own, own);
    return tk__spec_refuse(&w, "queue", &why);
  }
  if (json_object_set_new(step, "queue", json_stringn(name, len)) != 0)
    return tk_err_set(at->err, TK_ENOMEM, "out of memory reading %s", at->file);
  return 0;
}

/* Step i (0-based) into JSON: its keys, its handler's spec by the
 * handler's kind, its retry and batch tables. */
static int parse_step(const tk__spec_where *at, const tk_config *cfg, const tk_toml_value *s,
                      size_t i, json_t **out) {
  char where[64], key[96];
  snprintf(where, sizeof where, "steps[%zu]", i + 1);
  json_t *step = NULL, *part = NULL;
  int rc = read_table(at, where, &step_schema, s, &step);
  if (rc) return rc;
  if (json_object_get(step, "depends_on") == NULL)
    json_object_set_new(step, "depends_on", json_array());
  snprintf(key, sizeof key, "%s.handler", where);
  tk__handler_site site = {{at->file, key, at->err}, where, tk_toml_get(s, "batch")};
  if ((rc = tk__handler_spec_read(&site, tk_toml_get(s, "handler"), &part))) goto fail;
  /* The step's timeout bounds its whole attempt, whatever the kind
   * (docs/deadlines.md): given with a handler's own (a wait's, an http
   * request's), the shorter one is the attempt's; 0 is no limit of its
   * own and wins as before. */
  json_t *timeout = json_object_get(step, "timeout_ms");
  if (timeout) {
    json_int_t own = json_integer_value(json_object_get(part, "timeout_ms"));
    if (own <= 0 || json_integer_value(timeout) <= 0 || json_integer_value(timeout) < own)
      json_object_set(part, "timeout_ms", timeout);
    json_object_del(step, "timeout_ms");
  }
  json_object_set_new(step, "handler", part);
  const tk_toml_value *v;
  if ((v = tk_toml_get(s, "queue")) && (rc = parse_queue(at, where, v, part, step))) goto fail;
  if ((v = tk_toml_get(s, "retry"))) {
    snprintf(key, sizeof key, "%s.retry", where);
    if ((rc = parse_retry(at, cfg, v, key, &part))) goto fail;
    json_object_set_new(step, "retry", part);
  }
  if (site.batch) {
    snprintf(key, sizeof key, "%s.batch", where);
    if ((rc = read_table(at, key, &batch_schema, site.batch, &part))) goto fail;
    json_object_set_new(step, "batch", part);
  }
  if ((rc = tk__template_flow_step(at, cfg, s, where, step))) goto fail;
  *out = step;
  return 0;
fail:
  json_decref(step);
  return rc;
}

/* Resolve depends_on names to indices, reject unknown and duplicate names
 * and cycles, and fill the edge list. */
static int build_dag(const tk__spec_where *c, const tk_toml_value *steps_v, json_t *steps,
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
        rc = tk__spec_fail(c, nv, key, "duplicate step name \"%s\" (first used at line %u)",
                           names[i], first.line);
      }
  }
  for (size_t i = 0; i < n && rc == 0; i++) {
    json_t *deps = json_object_get(json_array_get(steps, i), "depends_on");
    size_t nd = json_array_size(deps);
    parents[i] = calloc(nd + 1, sizeof **parents);
    if (!parents[i]) { rc = TK_ENOMEM; break; }
    for (size_t d = 0; d < nd && rc == 0; d++) {
      const char *dep = json_string_value(json_array_get(deps, d));
      const tk_toml_value *dv =
          tk_toml_array_at(tk_toml_get(tk_toml_array_at(steps_v, i), "depends_on"), d);
      char key[64];
      snprintf(key, sizeof key, "steps[%zu].depends_on", i + 1);
      int found = -1;
      for (size_t j = 0; j < n; j++)
        if (strcmp(dep, names[j]) == 0) found = (int)j;
      if (found < 0) {
        const char *near = tk__suggest(dep, names, n);
        rc = tk__spec_fail(c, dv, key, "unknown step \"%s\"%s%s%s", dep,
                           near ? " (did you mean \"" : "", near ? near : "", near ? "\"?)" : "");
      } else if ((size_t)found == i) {
        rc = tk__spec_fail(c, dv, key, "step \"%s\" depends on itself", dep);
      } else {
        for (int k = 0; k < nparents[i]; k++)
          if (parents[i][k] == found)
            rc = tk__spec_fail(c, dv, key, "\"%s\" is listed twice", dep);
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
      rc = tk__spec_fail(c, dv ? dv : steps_v, dv ? key : "steps",
                         "the dependencies form a cycle: %s", cycle);
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
  tk__spec_where at = {file, "", err};
  memset(out, 0, sizeof *out);
  const tk_toml_value *root = tk_toml_root(doc);
  json_t *def = NULL, *part;
  int rc = read_table(&at, "", &root_schema, root, &def);
  if (rc) return rc;
  if (json_object_get(def, "namespace") == NULL)
    json_object_set_new(def, "namespace", json_string("default"));
  if (json_object_get(def, "description") == NULL)
    json_object_set_new(def, "description", json_string(""));
  const tk_toml_value *v = tk_toml_get(root, "retry");
  if (v == NULL) part = json_object();
  else if ((rc = parse_retry(&at, cfg, v, "retry", &part))) goto fail;
  json_object_set_new(def, "retry", part);
  const tk_toml_value *steps_v = tk_toml_get(root, "steps");
  if (steps_v == NULL || tk_toml_type_of(steps_v) != TK_TOML_ARRAY ||
      tk_toml_array_len(steps_v) == 0) {
    rc = tk__spec_fail(&at, steps_v, "steps",
                       "a template needs at least one step ([[steps]] with a name and a handler)");
    goto fail;
  }
  json_t *steps = json_array();
  json_object_set_new(def, "steps", steps);
  for (size_t i = 0; i < tk_toml_array_len(steps_v); i++) {
    json_t *step = NULL;
    if ((rc = parse_step(&at, cfg, tk_toml_array_at(steps_v, i), i, &step))) goto fail;
    json_array_append_new(steps, step);
  }
  if ((rc = build_dag(&at, steps_v, steps, out)) ||
      (rc = tk__template_flow_check(&at, steps_v, steps)))
    goto fail;
  out->definition = def;
  return 0;
fail:
  json_decref(def);
  free(out->edges); /* the DAG was built when a later check refused */
  memset(out, 0, sizeof *out);
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
