/* A task's family in its JSON (DESIGN §18; docs/children.md): the parent
 * that started it, if any ({task, step, attempt}), its children, and on
 * each task step the children of its attempts and the one it waits for
 * now. One read of the store (task_family); shown alike by `tasker show`,
 * `why`, the API and the dashboard. */
#include "ops/ops_internal.h"

#include <string.h>

static json_t *when(int64_t v) { return v == TK__NONE ? json_null() : json_integer(v); }

/* A child as its parent's JSON lists it. */
static json_t *child_json(const tk__child_rec *c) {
  return json_pack("{s:I, s:s, s:s, s:i, s:I, s:o}", "id", (json_int_t)c->task_id, "state",
                   c->state, "step", c->parent_step ? c->parent_step : "", "attempt",
                   c->attempt, "created_at", (json_int_t)c->created_at, "finished_at",
                   when(c->finished_at));
}

int tk__family_json(tk_store *s, int64_t task_id, json_t *task, tk_err *err) {
  if (s->ops->task_family == NULL) return 0;
  tk__child_rec up, *kids = NULL;
  int n = 0;
  int rc = s->ops->task_family(s, task_id, &up, &kids, &n, err);
  if (rc) return rc;
  json_object_set_new(task, "parent",
                      up.task_id ? json_pack("{s:I, s:s, s:I, s:i}", "task",
                                             (json_int_t)up.parent_task_id, "step",
                                             up.parent_step ? up.parent_step : "", "step_id",
                                             (json_int_t)up.parent_step_id, "attempt",
                                             up.attempt)
                                 : json_null());
  free(up.parent_step);
  json_t *all = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(all, child_json(&kids[i]));
  json_object_set_new(task, "children", all);
  size_t k;
  json_t *st;
  json_array_foreach(json_object_get(task, "steps"), k, st) {
    json_int_t id = json_integer_value(json_object_get(st, "id"));
    json_int_t attempts = json_integer_value(json_object_get(st, "attempts"));
    const char *state = json_string_value(json_object_get(st, "state"));
    json_t *mine = NULL;
    for (int i = 0; i < n; i++) {
      if (kids[i].parent_step_id != id) continue;
      if (mine == NULL) mine = json_array();
      json_array_append_new(mine, json_pack("{s:I, s:s, s:i}", "id", (json_int_t)kids[i].task_id,
                                            "state", kids[i].state, "attempt", kids[i].attempt));
      /* Its current attempt's child (perhaps just ended, its outcome
       * not taken yet). */
      if (state && strcmp(state, TK__STEP_WAITING) == 0 && kids[i].attempt == attempts)
        json_object_set_new(st, "waits_for_child", json_integer(kids[i].task_id));
    }
    if (mine) json_object_set_new(st, "children", mine);
  }
  tk__child_recs_free(kids, n);
  return 0;
}
