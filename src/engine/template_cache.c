/* The templates an engine runs from: each loaded from the store once, by
 * id, with its steps prepared for their handler kinds. */
#include "engine/engine_internal.h"

#include <stdlib.h>

#include "store/flow.h"

/* The engine's slot for kind k's engine-wide state (tk__handler_host). */
static void **kind_slot(tk_engine *e, const tk__handler_kind *k) {
  for (int i = 0; i < e->nkind_state; i++)
    if (e->kind_state[i].kind == k) return &e->kind_state[i].shared;
  /* registry.c asserts that the kinds fit. */
  e->kind_state[e->nkind_state].kind = k;
  e->kind_state[e->nkind_state].shared = NULL;
  return &e->kind_state[e->nkind_state++].shared;
}

/* Add template te's steps whose handlers take no input to e->no_input, so
 * that claims build none for them. Out of memory leaves the list as it
 * was: claims then build inputs no handler reads, nothing worse. */
static void note_no_input(tk_engine *e, const template_entry *te) {
  int add = 0;
  for (int k = 0; k < te->nsteps; k++) add += !te->steps[k].kind->takes_input;
  if (add == 0) return;
  int64_t *keys = realloc(e->no_input, ((size_t)e->nno_input + (size_t)add) * sizeof *keys);
  if (keys == NULL) return;
  e->no_input = keys;
  for (int k = 0; k < te->nsteps; k++)
    if (!te->steps[k].kind->takes_input) keys[e->nno_input++] = tk__step_key(te->id, k);
  qsort(keys, (size_t)e->nno_input, sizeof *keys, tk__step_key_cmp);
}

const template_entry *tk__engine_template(tk_engine *e, int64_t id, tk_err *err) {
  for (int i = 0; i < e->ntemplates; i++)
    if (e->templates[i].id == id) return &e->templates[i];
  tk__template_rec row;
  if (e->store->ops->template_get_by_id(e->store, id, &row, err) != 0) return NULL;
  json_t *definition = json_loads(row.definition, 0, NULL);
  /* Only the decisions are the engine's to check: no edges needed. */
  tk__flow *flow = NULL;
  if (definition && tk__flow_read(id, row.definition, NULL, 0, &flow, err) != 0) {
    json_decref(definition);
    tk__template_rec_free(&row);
    return NULL;
  }
  tk__template_rec_free(&row);
  template_entry *t = definition ? realloc(e->templates, ((size_t)e->ntemplates + 1) * sizeof *t)
                                 : NULL;
  if (t == NULL) {
    json_decref(definition);
    tk__flow_free(flow);
    tk_err_set(err, TK_ENOMEM, "out of memory loading template %lld", (long long)id);
    return NULL;
  }
  e->templates = t;
  template_entry *te = &t[e->ntemplates];
  te->id = id;
  te->definition = definition;
  te->flow = flow;
  json_t *steps = json_object_get(te->definition, "steps");
  te->nsteps = (int)json_array_size(steps);
  te->steps = calloc((size_t)te->nsteps + 1, sizeof *te->steps);
  if (te->steps == NULL) {
    json_decref(te->definition);
    tk__flow_free(te->flow);
    tk_err_set(err, TK_ENOMEM, "out of memory loading template %lld", (long long)id);
    return NULL;
  }
  for (int k = 0; k < te->nsteps; k++) {
    json_t *st = json_array_get(steps, (size_t)k);
    step_def *d = &te->steps[k];
    d->name = json_string_value(json_object_get(st, "name"));
    d->spec = json_object_get(st, "handler");
    d->kind = tk__handler_kind_of(d->spec);
    tk__handler_host host = {&e->fns, kind_slot(e, d->kind)};
    d->prepared = d->kind->prepare ? d->kind->prepare(&host, d->spec) : NULL;
    d->spec_text = json_dumps(d->spec, JSON_COMPACT);
    json_t *t_ms = json_object_get(d->spec, "timeout_ms");
    d->timeout_ms = json_is_integer(t_ms) ? json_integer_value(t_ms) : 0;
    d->callback_ms = tk__spec_int(d->spec, "callback_timeout_ms", 0);
    d->batch = json_object_get(st, "batch");
    d->budget = tk__step_budget(te->definition, st);
    d->decision = tk__flow_is_decision(te->flow, k) ? te->flow : NULL;
  }
  e->ntemplates++;
  note_no_input(e, te);
  return te;
}

void tk__engine_templates_free(tk_engine *e) {
  for (int i = 0; i < e->ntemplates; i++) {
    for (int k = 0; k < e->templates[i].nsteps; k++) {
      step_def *d = &e->templates[i].steps[k];
      if (d->kind->release) d->kind->release(d->prepared);
      free(d->spec_text);
    }
    json_decref(e->templates[i].definition);
    tk__flow_free(e->templates[i].flow);
    free(e->templates[i].steps);
  }
  free(e->templates);
  free(e->no_input);
}
