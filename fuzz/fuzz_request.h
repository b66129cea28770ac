/* What the fuzz targets of the server's requests share (fuzz_api.c,
 * fuzz_worker.c): their input's layout and the check of a refusal. */
#ifndef TASKER_FUZZ_REQUEST_H
#define TASKER_FUZZ_REQUEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/request_parse.h"

/* A refusal must be whole (a status from 400 to 599, a code, a message),
 * and its JSON must say the same status, code and a message. */
static void fuzz_check_error(const tk__api_error *e) {
  if (e->status < 400 || e->status > 599 || e->code == NULL || e->message[0] == '\0') abort();
  char *text = tk__api_error_json(e);
  if (text == NULL) abort();
  json_t *j = json_loads(text, 0, NULL);
  json_t *inner = json_object_get(j, "error");
  const char *code = json_string_value(json_object_get(inner, "code"));
  if (json_integer_value(json_object_get(inner, "status")) != e->status || code == NULL ||
      strcmp(code, e->code) != 0 || json_string_value(json_object_get(inner, "message")) == NULL)
    abort();
  json_decref(j);
  free(text);
}

/* One request from a fuzz input: a byte choosing one of methods[4], the
 * request target up to a NUL (*target, *tlen), then the body, copied with
 * a NUL of its own as the server hands it over (*body, *blen; the
 * caller frees it). 0, or -1 for an empty input or no memory. */
static int fuzz_request_split(const uint8_t *data, size_t size, const char *const methods[4],
                              const char **method, const char **target, size_t *tlen,
                              char **body, size_t *blen) {
  if (size == 0) return -1;
  *method = methods[data[0] % 4];
  const char *rest = (const char *)data + 1;
  size_t n = size - 1;
  const char *nul = memchr(rest, 0, n);
  *target = rest;
  *tlen = nul ? (size_t)(nul - rest) : n;
  *blen = nul ? n - *tlen - 1 : 0;
  if ((*body = malloc(*blen + 1)) == NULL) return -1;
  memcpy(*body, nul ? nul + 1 : "", *blen);
  (*body)[*blen] = '\0';
  return 0;
}

#endif
