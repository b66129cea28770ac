/* libFuzzer target for the placeholder syntax (src/handlers/placeholder.c).
 * The input is a template, then optionally a NUL and a JSON document used
 * as the attempt's input. Any template must compile or fail with a
 * message naming a placeholder; a compiled one must fill, plainly and
 * URL-encoded, and as a JSON string, or fail with a message, never crash;
 * a URL-encoded fill holds only unreserved bytes and %XX outside the
 * template's own literal text. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/error.h>

#include "handlers/placeholder.h"

static const char *fake_env(void *ud, const char *name) {
  (void)ud;
  return strcmp(name, "TOKEN") == 0 ? "s3cr3t value/+" : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  const uint8_t *nul = memchr(data, 0, size);
  size_t tlen = nul ? (size_t)(nul - data) : size;
  json_t *input = NULL;
  if (nul) input = json_loadb((const char *)nul + 1, size - tlen - 1, 0, NULL);
  if (input == NULL)
    input = json_pack("{s:{s:s, s:i, s:[i, s, n], s:{s:b}}, s:{s:{s:s}, s:n}, s:{s:s, s:[i]}, "
                      "s:i}",
                      "context", "id", "A 42/x", "n", 3, "list", 1, "two", "o", "ok", 1,
                      "parents", "fetch", "token", "t&k", "empty", "item", "path", "a b/c",
                      "rows", 7, "item_index", 2);
  tk__ph_scope sc = {input, 99, "step", 2, fake_env, NULL, NULL, NULL};
  char why[512];
  tk__ph *t = NULL;
  why[0] = '\0';
  int rc = tk__ph_compile(text, tlen, &t, why, sizeof why);
  if (rc != 0) {
    if (t != NULL || (rc != TK_ESYNTAX && rc != TK_ENOMEM) || why[0] == '\0') abort();
    json_decref(input);
    return 0;
  }
  for (int enc = 0; enc < 2; enc++) {
    tk__buf b = {0};
    why[0] = '\0';
    rc = tk__ph_expand(t, &sc, enc ? TK__PH_URL : TK__PH_PLAIN, &b, why, sizeof why);
    if (rc != 0 && why[0] == '\0') abort();
    if (rc == 0 && tk__ph_refs(t) == 0 && enc == 0) {
      /* Plain text without references fills to itself, but for quoted
       * literals: never longer than the template. */
      if (b.len > tlen) abort();
    }
    tk__buf_free(&b);
  }
  if (tk__ph_single(t)) {
    json_t *v = NULL;
    rc = tk__ph_value(t, &sc, &v, why, sizeof why);
    if ((rc == 0) != (v != NULL)) abort();
    json_decref(v);
  }
  tk__buf shape = {0};
  tk__ph_shape(t, "\x01", &shape);
  tk__buf_free(&shape);
  tk__ph_free(t);
  /* The same text as a string in a JSON body. */
  json_t *body = json_pack("{s:s%, s:[s%]}", "a", text, tlen, "b", text, tlen);
  if (body != NULL) {
    json_t *out = NULL;
    rc = tk__ph_fill_json(body, &sc, &out, why, sizeof why);
    if ((rc == 0) != (out != NULL)) abort();
    if (out) free(json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY));
    json_decref(out);
    json_decref(body);
  }
  json_decref(input);
  return 0;
}
