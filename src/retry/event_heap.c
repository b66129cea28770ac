/* The simulator's event queue: a binary min-heap on (time, seq). */
#include "event_heap.h"

static int before(const tk__event *a, const tk__event *b) {
  return a->at_us < b->at_us || (a->at_us == b->at_us && a->seq < b->seq);
}

int tk__heap_push(tk__event_heap *h, int64_t at_us, int32_t who, int32_t kind) {
  if (h->len == h->cap) return -1;
  tk__event e = {at_us, h->next_seq++, who, kind};
  size_t i = h->len++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!before(&e, &h->ev[parent])) break;
    h->ev[i] = h->ev[parent];
    i = parent;
  }
  h->ev[i] = e;
  return 0;
}

/* Put `e` at the root and move it down to where it belongs. */
static void sift_down_from_root(tk__event_heap *h, tk__event e) {
  size_t i = 0, n = h->len;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && before(&h->ev[c + 1], &h->ev[c])) c++;
    if (!before(&h->ev[c], &e)) break;
    h->ev[i] = h->ev[c];
    i = c;
  }
  h->ev[i] = e;
}

int tk__heap_pop(tk__event_heap *h, tk__event *out) {
  if (h->len == 0) return -1;
  *out = h->ev[0];
  tk__event last = h->ev[--h->len];
  if (h->len > 0) sift_down_from_root(h, last);
  return 0;
}

int tk__heap_replace_top(tk__event_heap *h, int64_t at_us, int32_t who, int32_t kind) {
  if (h->len == 0) return -1;
  tk__event e = {at_us, h->next_seq++, who, kind};
  sift_down_from_root(h, e);
  return 0;
}
