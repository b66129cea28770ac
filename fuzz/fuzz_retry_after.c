/* libFuzzer target for the Retry-After parser (src/backoff/retry_after.c):
 * any bytes must give either a delay >= 0 or TK_ENOHINT with a message
 * that names the header, never a crash, an overflow or a read past the
 * input, whatever "now" is. The first 8 bytes choose now. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/backoff.h>

/* One parse of text[0..len) at now; aborts on a broken contract. */
static void check(const char *text, size_t len, int64_t now) {
  int64_t ms = -7;
  tk_err err;
  tk_err_clear(&err);
  int rc = tk_retry_after_parse(text, len, now, &ms, &err);
  if (rc == 0) {
    if (ms < 0) abort();
  } else if (rc != TK_ENOHINT || strncmp(err.msg, "Retry-After", 11) != 0 || ms != -7) {
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int64_t now = 1767225600000; /* 2026-01-01 */
  if (size >= 8) {
    uint64_t v;
    memcpy(&v, data, 8);
    /* Any time from 1970 to about the year 10000. */
    now = (int64_t)(v % UINT64_C(253402300800000));
  }
  /* A copy of exactly `size` bytes, so that ASan sees a read past it. */
  char *text = malloc(size ? size : 1);
  if (text == NULL) return 0;
  memcpy(text, data, size);
  check(text, size, now);
  check(text, size, 0);
  free(text);
  return 0;
}
