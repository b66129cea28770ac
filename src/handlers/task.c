/* The task handler (DESIGN §18, issue 24 part 3; docs/children.md):
 *
 *   { kind = "task", template = "ship", version = "2",
 *     context = { order = "{{context.order}}" } }
 *
 * starts one child task of that template and waits for it, holding no
 * worker and no lease. The engine never runs it: a claim of a task step
 * renders the child's context here (tk__task_child_context) and starts
 * the child in the store in the transaction that parks the step
 * (engine/children.c, store op child_start). The child's end becomes the
 * attempt's outcome: complete with the results of its leaf steps, or a
 * failed attempt under the step's retry policy (a retry starts a new
 * child). Whether the template exists is looked at when the step runs:
 * templates are added in any order, and a newer version may come later. */
#include "handlers/handler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/spec.h"
#include "handlers/placeholder.h"
#include "toml/json.h"

static const tk__key keys[] = {
    TK__HANDLER_COMMON_KEYS,
    {.name = "template", .kind = TK__K_STRING,
     .allowed = "a template's name, such as \"ship\" or \"shop/ship\"",
     .missing = "a task handler needs the template of the child task it starts, such as "
                "template = \"ship\""},
    {.name = "version", .kind = TK__K_STRING, .allowed = "a template version, such as \"2\""},
    {.name = "context", .kind = TK__K_OTHER},
};

static const tk__schema schema = {"task", keys, sizeof keys / sizeof keys[0]};

/* The placeholders of every string in v (named by its path, such as
 * context.order or context.lines[2], and placed at the string itself). */
static int check_context(const tk__spec_where *w, const tk_toml_value *v, char *path,
                         size_t plen) {
  size_t used = strlen(path);
  int rc = 0;
  if (tk_toml_type_of(v) == TK_TOML_STRING) {
    size_t len;
    const char *text = tk_toml_string(v, &len);
    char why[256];
    tk__ph *t = NULL;
    rc = tk__ph_compile(text, len, &t, why, sizeof why);
    tk__ph_free(t);
    if (rc == TK_ENOMEM) return tk_err_set(w->err, TK_ENOMEM, "out of memory reading %s", w->file);
    if (rc) return tk__spec_fail(w, v, path, "%s", why);
  } else if (tk_toml_type_of(v) == TK_TOML_TABLE) {
    for (size_t i = 0; rc == 0 && i < tk_toml_table_len(v); i++) {
      const tk_toml_entry *e = tk_toml_table_at(v, i);
      snprintf(path + used, plen - used, ".%s", e->key);
      rc = check_context(w, e->value, path, plen);
    }
  } else if (tk_toml_type_of(v) == TK_TOML_ARRAY) {
    for (size_t i = 0; rc == 0 && i < tk_toml_array_len(v); i++) {
      snprintf(path + used, plen - used, "[%zu]", i + 1);
      rc = check_context(w, tk_toml_array_at(v, i), path, plen);
    }
  }
  path[used] = '\0';
  return rc;
}

static int validate(const tk__handler_site *site, const tk_toml_value *table, json_t *spec) {
  const tk__spec_where *w = &site->where;
  int rc = tk__spec_read(w, &schema, table, spec);
  if (rc) return rc;
  if (site->batch != NULL)
    return tk__spec_fail(w, tk_toml_get(table, "kind"), "kind",
                         "a task step cannot be a batch step: it starts one child task");
  const tk_toml_value *ctx = tk_toml_get(table, "context");
  if (ctx == NULL) return 0;
  if (tk_toml_type_of(ctx) != TK_TOML_TABLE)
    return tk__spec_fail(w, ctx, "context", "expected a table, the child's context, such as "
                         "{ order = \"{{context.order}}\" }");
  char path[256] = "context";
  if ((rc = check_context(w, ctx, path, sizeof path))) return rc;
  json_t *j;
  const tk_toml_value *bad = NULL;
  rc = tk__toml_to_json(ctx, &j, &bad);
  if (rc == TK_ECONFIG) return tk__spec_fail(w, bad, "context", "JSON has no nan or inf");
  if (rc || json_object_set_new(spec, "context", j) != 0)
    return tk_err_set(w->err, TK_ENOMEM, "out of memory reading %s", w->file);
  return 0;
}

/* The environment as a child's context sees it: never there, and asked
 * for (the context is stored with the child, and a secret must not be). */
static const char *no_env(void *asked, const char *name) {
  (void)name;
  *(int *)asked = 1;
  return NULL;
}

int tk__task_child_context(json_t *spec, const char *input, int64_t task_id, const char *step,
                           int attempt, char **out, char *why, size_t whylen) {
  *out = NULL;
  json_t *tmpl = json_object_get(spec, "context");
  if (tmpl == NULL) {
    *out = strdup("{}");
    return *out ? 0 : TK_ENOMEM;
  }
  json_error_t jerr;
  json_t *in = input ? json_loads(input, 0, &jerr) : NULL;
  if (input && in == NULL) {
    snprintf(why, whylen, "cannot read the step's input: %s", jerr.text);
    return TK_EINVAL;
  }
  int env = 0;
  tk__ph_scope sc = {.input = in, .task_id = task_id, .step = step, .attempt = attempt,
                     .getenv = no_env, .env_ud = &env};
  json_t *ctx = NULL;
  int rc = tk__ph_fill_json(tmpl, &sc, &ctx, why, whylen);
  json_decref(in);
  if (env) {
    json_decref(ctx);
    snprintf(why, whylen, "context: {{env.*}} cannot go into a child's context (it is stored "
             "with the child, and a secret must not be)");
    return TK_EINVAL;
  }
  if (rc) return rc;
  *out = json_dumps(ctx, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(ctx);
  return *out ? 0 : TK_ENOMEM;
}

/* Never called by an engine (it starts the child instead); a stored step
 * that came here anyway fails for good rather than pretend to. */
static void run(const tk__handler_step *step, const tk_handler_call *call,
                tk_handler_result *out) {
  (void)step;
  (void)call;
  tk__handler_fail(out, TK_HANDLER_PERMANENT,
                   "a task step was handed to a handler: it starts a child task and is never run");
}

const tk__handler_kind tk__task_kind = {
    .version = TK__HANDLER_KIND_VERSION,
    .name = "task",
    .takes_input = 1,
    .validate = validate,
    .run = run,
};
