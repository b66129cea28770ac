/* Typed rows every backend builds and the callers free (store.h): arrays
 * grown and strings copied with one out-of-memory flag, a step's handler
 * input assembled from its context and parents' results. */
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

int tk__input_add(json_t **slot, const char *context, const char *parent, const char *results) {
  if (*slot == NULL) {
    json_t *ctx = context ? json_loads(context, JSON_DECODE_ANY, NULL) : NULL;
    *slot = json_pack("{s:o, s:o}", "context", ctx ? ctx : json_null(), "parents", json_object());
    if (*slot == NULL) return TK_ENOMEM;
  }
  if (parent == NULL) return 0;
  json_t *v = results ? json_loads(results, JSON_DECODE_ANY, NULL) : NULL;
  return json_object_set_new(json_object_get(*slot, "parents"), parent, v ? v : json_null()) == 0
             ? 0
             : TK_ENOMEM;
}

int tk__input_item(json_t *input, int64_t item_index, const char *item) {
  json_t *v = item ? json_loads(item, JSON_DECODE_ANY, NULL) : NULL;
  if (json_object_set_new(input, "item", v ? v : json_null()) != 0) return TK_ENOMEM;
  return json_object_set_new(input, "item_index", json_integer(item_index)) == 0 ? 0 : TK_ENOMEM;
}

char *tk__input_text(const char *built) {
  json_t *input = built ? json_loads(built, JSON_DECODE_ANY, NULL) : NULL;
  char *text = json_is_object(input) ? json_dumps(input, JSON_COMPACT) : NULL;
  json_decref(input);
  return text;
}

int tk__step_key_cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

int tk__claim_wants_input(const tk__claim_request *r, int64_t template_id, int idx) {
  if (!r->want_inputs) return 0;
  int64_t key = tk__step_key(template_id, idx);
  return r->nno_input <= 0 ||
         bsearch(&key, r->no_input, (size_t)r->nno_input, sizeof key, tk__step_key_cmp) == NULL;
}

void tk__claimed_inputs_free(tk__claimed *c, int n) {
  for (int i = 0; i < n; i++) {
    free(c[i].input);
    c[i].input = NULL;
  }
}

void tk__step_recs_free(tk__step_rec *r, int n) {
  for (int i = 0; r && i < n; i++) {
    free(r[i].name);
    free(r[i].backoff);
    free(r[i].lease_owner);
    free(r[i].last_error);
    free(r[i].results);
    free(r[i].item);
  }
  free(r);
}

void tk__task_report_free(tk__task_report *r) {
  if (r == NULL) return;
  free(r->identity);
  free(r->context);
  tk__template_rec_free(&r->template_);
  tk__step_recs_free(r->steps, r->nsteps);
  for (int i = 0; i < r->nattempts; i++) {
    tk__attempt_rec *a = &r->attempts[i];
    free(a->owner);
    free(a->outcome);
    free(a->error);
    free(a->delay_source);
  }
  free(r->attempts);
  for (int i = 0; i < r->ntransitions; i++) {
    free(r->transitions[i].from);
    free(r->transitions[i].to);
    free(r->transitions[i].reason);
    free(r->transitions[i].step);
  }
  free(r->transitions);
  for (int i = 0; i < r->ngave_up; i++) {
    free(r->gave_up[i].key);
    free(r->gave_up[i].last_error);
  }
  free(r->gave_up);
  memset(r, 0, sizeof *r);
}

void tk__task_rows_free(tk__task_row *r, int n) {
  for (int i = 0; r && i < n; i++) {
    free(r[i].namespace_);
    free(r[i].name);
    free(r[i].version);
    free(r[i].identity);
    free(r[i].last_error);
  }
  free(r);
}

void tk__step_rows_free(tk__step_row *r, int n) {
  for (int i = 0; r && i < n; i++) {
    free(r[i].name);
    free(r[i].last_error);
    free(r[i].namespace_);
    free(r[i].template_name);
    free(r[i].version);
  }
  free(r);
}

void tk__batch_load_free(tk__batch_load *b) {
  if (b == NULL) return;
  free(b->items);
  free(b->text);
  memset(b, 0, sizeof *b);
}

int tk__grow(void **arr, int *cap, int need, size_t size) {
  if (need <= *cap) return 0;
  int c = *cap ? *cap : 8;
  while (c < need) c *= 2;
  char *p = realloc(*arr, (size_t)c * size);
  if (p == NULL) return TK_ENOMEM;
  memset(p + (size_t)*cap * size, 0, (size_t)(c - *cap) * size);
  *arr = p;
  *cap = c;
  return 0;
}

char *tk__dup(const char *s, int *oom) {
  if (s == NULL) return NULL;
  char *d = strdup(s);
  if (d == NULL) *oom = 1;
  return d;
}
