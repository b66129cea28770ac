/* What both backends' prune reads from a request: the cutoff of each
 * finished state, the latest of them, and the minute before which the
 * activity counts go. */
#include "store/store.h"

#include <stdint.h>

void tk__prune_cutoffs(const tk__prune_request *r, int64_t cut[TK__PRUNE_STATES + 1]) {
  cut[TK__PRUNE_STATES] = INT64_MIN;
  for (int i = 0; i < TK__PRUNE_STATES; i++) {
    cut[i] = r->before[i] == TK__NONE ? INT64_MIN : r->before[i];
    if (cut[i] > cut[TK__PRUNE_STATES]) cut[TK__PRUNE_STATES] = cut[i];
  }
}

int64_t tk__prune_minutes_before(const tk__prune_request *r) {
  int64_t earliest = INT64_MAX;
  for (int i = 0; i < TK__PRUNE_STATES; i++)
    if (r->before[i] != TK__NONE && r->before[i] < earliest) earliest = r->before[i];
  if (earliest == INT64_MAX) return INT64_MIN;
  return earliest - ((earliest % TK__MINUTE_MS) + TK__MINUTE_MS) % TK__MINUTE_MS;
}
