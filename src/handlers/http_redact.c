/* Credentials of the http handler: which header and query parameter names
 * carry one, and keeping their values out of the messages that go to the
 * store (last_error, attempt rows), events and logs. */
#include "handlers/http.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REDACTED "[REDACTED]"
/* Shorter values are not secrets worth blanking out of every message. */
#define MIN_SECRET 4

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

/* Keep a copy of value[0..len) (NUL-terminated). */
static void keep(tk__http_secrets *s, const char *value, size_t len) {
  for (size_t i = 0; i < s->n; i++)
    if (strlen(s->v[i]) == len && memcmp(s->v[i], value, len) == 0) return;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 4;
    char **grown = realloc(s->v, cap * sizeof *grown);
    if (grown == NULL) return;
    s->v = grown;
    s->cap = cap;
  }
  char *copy = malloc(len + 1);
  if (copy == NULL) return;
  memcpy(copy, value, len);
  copy[len] = '\0';
  s->v[s->n++] = copy;
}

void tk__http_secret_add(tk__http_secrets *s, const char *value, size_t len) {
  if (len < MIN_SECRET) return;
  keep(s, value, len);
  /* In a URL the value appears percent-encoded. */
  tk__buf enc = {0};
  static const char hex[] = "0123456789ABCDEF";
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)value[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      tk__buf_addc(&enc, (char)c);
    } else {
      char e[3] = {'%', hex[c >> 4], hex[c & 15]};
      tk__buf_add(&enc, e, 3);
    }
  }
  if (!enc.oom && enc.len != len) keep(s, enc.p, enc.len);
  tk__buf_free(&enc);
}

void tk__http_secrets_free(tk__http_secrets *s) {
  for (size_t i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  *s = (tk__http_secrets){0};
}

void tk__http_scrub(const tk__http_secrets *s, char *msg, size_t cap) {
  size_t rl = strlen(REDACTED);
  for (size_t i = 0; i < s->n; i++) {
    const char *secret = s->v[i];
    size_t sl = strlen(secret);
    char *at = msg;
    while ((at = strstr(at, secret)) != NULL) {
      size_t len = strlen(msg), tail = len - (size_t)(at - msg) - sl;
      /* Shift the rest, dropping what no longer fits in cap. */
      size_t room = cap - 1 - (size_t)(at - msg);
      size_t put = rl < room ? rl : room;
      size_t moved = tail < room - put ? tail : room - put;
      memmove(at + put, at + sl, moved);
      memcpy(at, REDACTED, put);
      at[put + moved] = '\0';
      at += put;
    }
  }
}
