/* The rule for a worker queue's name (handler.h), in a file of its own so
 * that the server's path parsing (and its fuzz target) take it without the
 * worker handler. */
#include "handlers/handler.h"

int tk__queue_name_ok(const char *s, size_t len) {
  if (len == 0 || len > TK__QUEUE_NAME_MAX) return 0;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
      return 0;
  }
  return 1;
}
