/* Credentials of the http handler: which header and query parameter names
 * carry one (their values are the request's secrets, redact.h). */
#include "handlers/http.h"

#include <string.h>
#include <strings.h>

/* Whether name[0..len) holds word (lower case), in any case. */
static int holds(const char *name, size_t len, const char *word) {
  size_t w = strlen(word);
  for (size_t i = 0; i + w <= len; i++)
    if (strncasecmp(name + i, word, w) == 0) return 1;
  return 0;
}

int tk__http_is_credential(const char *name, size_t len) {
  static const char *const exact[] = {"authorization", "proxy-authorization", "cookie",
                                      "set-cookie", "x-api-key"};
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
    if (strlen(exact[i]) == len && strncasecmp(name, exact[i], len) == 0) return 1;
  static const char *const parts[] = {"token", "secret", "key", "password", "passwd",
                                      "session", "auth"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    if (holds(name, len, parts[i])) return 1;
  return 0;
}
