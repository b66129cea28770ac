/* The function handler: { kind = "function", name = "..." } runs a C
 * function that the embedding program registered with tk_engine_register
 * (or tk_engine_register_batch for batch steps); only the name can be
 * checked at template time. */
#include "handlers/handler.h"

#include <stdlib.h>
#include <string.h>

/* ---- the registrations ------------------------------------------------------- */

/* The entry named `name`, or NULL. */
static tk__fn *lookup(const tk__fn_table *t, const char *name) {
  for (int i = 0; i < t->n; i++)
    if (strcmp(t->fns[i]->name, name) == 0) return t->fns[i];
  return NULL;
}

int tk__fn_register(tk__fn_table *t, const char *name, tk_handler_fn fn, tk_batch_fn batch,
                    void *ud, tk_err *err) {
  if (lookup(t, name) != NULL)
    return tk_err_set(err, TK_EEXIST, "a handler named \"%s\" is already registered", name);
  tk__fn **grown = realloc(t->fns, ((size_t)t->n + 1) * sizeof *grown);
  if (grown == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory registering \"%s\"", name);
  t->fns = grown;
  tk__fn *f = malloc(sizeof *f);
  char *copy = strdup(name);
  if (f == NULL || copy == NULL) {
    free(f);
    free(copy);
    return tk_err_set(err, TK_ENOMEM, "out of memory registering \"%s\"", name);
  }
  *f = (tk__fn){copy, fn, batch, ud};
  t->fns[t->n++] = f;
  return 0;
}

void tk__fn_table_free(tk__fn_table *t) {
  for (int i = 0; i < t->n; i++) {
    free(t->fns[i]->name);
    free(t->fns[i]);
  }
  free(t->fns);
  t->fns = NULL;
  t->n = 0;
}

/* ---- the kind ---------------------------------------------------------------- */

static const tk__key keys[] = {
    TK__HANDLER_COMMON_KEYS,
    {.name = "name", .kind = TK__K_NAME, .missing = "a function handler needs the registered name"},
};

static const tk__schema schema = {"function", keys, sizeof keys / sizeof keys[0]};

/* The schema alone: whether the name is registered is known only to the
 * orchestrator that runs the step. */
static int validate(const tk__handler_site *site, const tk_toml_value *table, json_t *spec) {
  return tk__spec_read(&site->where, &schema, table, spec);
}

/* The registration of the spec's name in this engine, or NULL (the runs
 * say so): functions are registered before the engine runs, and a
 * template is loaded, so prepared, when its first step is claimed. */
static void *prepare(const tk__handler_host *host, json_t *spec) {
  return lookup(host->fns, json_string_value(json_object_get(spec, "name")));
}

/* The registration a run calls: a plain handler, or with `batch` a batch
 * handler. NULL, with the attempt failed permanently saying why, when
 * none is registered under the spec's name or the one there is of the
 * other sort. */
static const tk__fn *bound(const tk__handler_step *step, int batch, tk_handler_result *out) {
  const tk__fn *f = step->prepared;
  const char *name = json_string_value(json_object_get(step->spec, "name"));
  if (f == NULL)
    tk__handler_fail(out, TK_HANDLER_PERMANENT,
                     "no in-process %shandler is registered as \"%s\" in this orchestrator",
                     batch ? "batch " : "", name ? name : "");
  else if (batch && f->batch == NULL)
    tk__handler_fail(out, TK_HANDLER_PERMANENT,
                     "\"%s\" is not a batch handler: register it with tk_engine_register_batch",
                     f->name);
  else if (!batch && f->fn == NULL)
    tk__handler_fail(out, TK_HANDLER_PERMANENT,
                     "\"%s\" is a batch handler: its step needs batch = { items_from = ... }",
                     f->name);
  else
    return f;
  return NULL;
}

/* One attempt: the registered function's call. */
static void run(const tk__handler_step *step, const tk_handler_call *call,
                tk_handler_result *out) {
  const tk__fn *f = bound(step, 0, out);
  if (f) f->fn(call, out, f->ud);
}

/* One call of a batch step: the registered batch function's. */
static void run_batch(const tk__handler_step *step, const tk_batch_call *call,
                      tk_item_report *reports, tk_handler_result *out) {
  const tk__fn *f = bound(step, 1, out);
  if (f) f->batch(call, reports, out, f->ud);
}

const tk__handler_kind tk__function_kind = {
    .version = TK__HANDLER_KIND_VERSION,
    .name = "function",
    .takes_input = 1,
    .validate = validate,
    .prepare = prepare,
    .run = run,
    .run_batch = run_batch,
};
