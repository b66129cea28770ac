/* The builtin "batch" handler: a stand-in for a downstream service that
 * accepts some items and refuses others, decided by a fixed rule so that
 * tests and benchmarks know each item's exact history. */
#include "handlers/handler.h"

#include <string.h>

/* Whether `key` is listed in the poison array. */
static int is_poison(json_t *poison, const char *key) {
  size_t i;
  json_t *v;
  json_array_foreach(poison, i, v) {
    if (strcmp(json_string_value(v), key) == 0) return 1;
  }
  return 0;
}

void tk__builtin_batch_run(const tk_batch_call *call, json_t *spec, tk_item_report *reports,
                           tk_handler_result *out) {
  json_t *every_v = json_object_get(spec, "reject_every");
  json_t *times_v = json_object_get(spec, "reject_times");
  json_t *poison = json_object_get(spec, "poison");
  int64_t every = json_is_integer(every_v) ? json_integer_value(every_v) : 0;
  int64_t times = json_is_integer(times_v) ? json_integer_value(times_v) : 1;
  static const char poisoned[] = "builtin batch: poison item, always rejected";
  static const char on_purpose[] = "builtin batch: rejected on purpose (reject_every/reject_times)";
  int rejected = 0;
  for (size_t i = 0; i < call->n; i++) {
    const tk_batch_item *it = &call->items[i];
    /* Every `every`-th item (the every-th, the 2·every-th, ...) is refused
     * on its first `times` deliveries; a poison item always. The reasons
     * are static, so they outlive the call as the API requires. */
    if (poison != NULL && is_poison(poison, it->key)) {
      reports[i] = (tk_item_report){TK_ITEM_REJECTED, poisoned};
      rejected++;
    } else if (every > 0 && (it->index + 1) % every == 0 && it->attempt <= times) {
      reports[i] = (tk_item_report){TK_ITEM_REJECTED, on_purpose};
      rejected++;
    } else {
      reports[i] = (tk_item_report){TK_ITEM_ACKED, NULL};
    }
  }
  /* Like a throttling service, ask for a delay only when something was
   * refused. */
  json_t *hint = json_object_get(spec, "retry_after_ms");
  if (rejected > 0 && json_is_integer(hint)) out->retry_after_ms = json_integer_value(hint);
}
