/* Batch steps at submit: the items of a step come from the task's context,
 * checked here before anything is stored (a bad submission stores nothing). */
#include "workflow/batch_items.h"

#include <stdlib.h>
#include <string.h>

/* A JSON value's kind with its article, for messages. */
static const char *a_kind(json_t *v) {
  return json_is_object(v)    ? "an object"
         : json_is_array(v)   ? "an array"
         : json_is_string(v)  ? "a string"
         : json_is_number(v)  ? "a number"
         : json_is_boolean(v) ? "a boolean"
                              : "null";
}

typedef struct keyed {
  const char *key;
  size_t at;
} keyed;

/* qsort order: by key, then by position in the array. */
static int by_key_then_position(const void *a, const void *b) {
  const keyed *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* Refuse a key used twice, naming the earliest repeat in array order. */
static int check_unique(const tk__new_item *items, size_t n, const char *from, tk_err *err) {
  if (n < 2) return 0;
  keyed *k = malloc(n * sizeof *k);
  if (k == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory checking %zu item keys", n);
  for (size_t i = 0; i < n; i++) k[i] = (keyed){items[i].key, i};
  qsort(k, n, sizeof *k, by_key_then_position);
  size_t first = 0, again = SIZE_MAX;
  for (size_t i = 1; i < n; i++)
    /* Within a key, positions ascend: the smallest repeat of a key is its
     * second use, whose neighbour is the first. */
    if (strcmp(k[i].key, k[i - 1].key) == 0 && k[i].at < again) {
      again = k[i].at;
      first = k[i - 1].at;
    }
  int rc = 0;
  if (again != SIZE_MAX)
    rc = tk_err_set(err, TK_EINVAL, "context.%s[%zu]: duplicate item key \"%s\" (first at [%zu]): "
                    "item keys must be unique within a step", from, again, items[again].key, first);
  free(k);
  return rc;
}

/* A setting of the step's batch table, else the configuration's. */
static int setting(json_t *batch, const char *key, int64_t configured) {
  json_t *v = json_object_get(batch, key);
  return (int)(v ? json_integer_value(v) : configured);
}

int tk__batch_step_resolve(json_t *step, json_t *context, const tk_config *cfg,
                           tk__new_step *ns, tk_err *err) {
  json_t *batch = json_object_get(step, "batch");
  if (batch == NULL) return 0;
  const tk_batch_settings *conf = tk_config_batch(cfg);
  const char *from = json_string_value(json_object_get(batch, "items_from"));
  json_t *arr = json_object_get(context, from);
  if (arr == NULL)
    return tk_err_set(err, TK_EINVAL,
                      "context: batch step \"%s\" takes its items from context.%s, which is "
                      "missing (expected an array such as [\"a\", \"b\"])",
                      ns->name, from);
  if (!json_is_array(arr))
    return tk_err_set(err, TK_EINVAL,
                      "context.%s: expected an array of item keys or {\"key\": ...} objects for "
                      "batch step \"%s\", got %s",
                      from, ns->name, a_kind(arr));
  size_t n = json_array_size(arr);
  if (n > INT32_MAX)
    return tk_err_set(err, TK_ETOOBIG, "context.%s: %zu items, at most %d per step", from, n,
                      INT32_MAX);
  tk__new_item *items = calloc(n ? n : 1, sizeof *items);
  if (items == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory reading %zu items", n);
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    json_t *e = json_array_get(arr, i);
    json_t *key = json_is_object(e) ? json_object_get(e, "key") : e;
    const char *k = json_string_value(key);
    if (k == NULL || k[0] == '\0') {
      rc = json_is_object(e)
               ? tk_err_set(err, TK_EINVAL, "context.%s[%zu].key: expected a non-empty string, "
                            "got %s", from, i, key ? a_kind(key) : "nothing")
               : tk_err_set(err, TK_EINVAL, "context.%s[%zu]: expected a non-empty string key "
                            "or an object with a \"key\", got %s", from, i,
                            json_is_string(e) ? "an empty string" : a_kind(e));
      break;
    }
    items[i].key = k;
    /* An object travels to the handler whole; a plain key needs no copy. */
    if (json_is_object(e) && (items[i].data = json_dumps(e, JSON_COMPACT)) == NULL)
      rc = tk_err_set(err, TK_ENOMEM, "out of memory reading item %zu", i);
  }
  ns->items = items;
  ns->nitems = (int)n;
  if (rc == 0) rc = check_unique(items, n, from, err);
  if (rc) {
    tk__batch_step_free(ns);
    return rc;
  }
  ns->batch = 1;
  ns->max_in_call_retries = setting(batch, "max_in_call_retries", conf->max_in_call_retries);
  ns->max_item_attempts = setting(batch, "max_item_attempts", conf->max_item_attempts);
  ns->fail_if_any_gave_up = json_is_true(json_object_get(batch, "fail_if_any_gave_up"));
  return 0;
}

void tk__batch_step_free(tk__new_step *ns) {
  for (int i = 0; ns->items && i < ns->nitems; i++) free((char *)ns->items[i].data);
  free((tk__new_item *)ns->items);
  ns->items = NULL;
  ns->nitems = 0;
  ns->batch = 0;
}
