/* Secrets of one attempt, replaced by "[REDACTED]" in its message and its
 * results (redact.h). */
#include "handlers/redact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define REDACTED "[REDACTED]"

/* Keep a copy of value[0..len) (NUL-terminated). */
static void keep(tk__secrets *s, const char *value, size_t len) {
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

void tk__secret_add(tk__secrets *s, const char *value, size_t len) {
  /* A NUL inside would cut the copy short: keep what a C string holds. */
  const char *nul = memchr(value, '\0', len);
  if (nul) len = (size_t)(nul - value);
  if (len < TK__SECRET_MIN) return;
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

const char *tk__secret_getenv(void *secrets, const char *name) {
  const char *v = getenv(name);
  if (v) tk__secret_add(secrets, v, strlen(v));
  return v;
}

void tk__secrets_free(tk__secrets *s) {
  for (size_t i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  *s = (tk__secrets){0};
}

void tk__scrub(const tk__secrets *s, char *msg, size_t cap) {
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

/* Where secret[0..sl) first occurs in p[0..len), or NULL (any bytes). */
static const char *find(const char *p, size_t len, const char *secret, size_t sl) {
  for (size_t i = 0; i + sl <= len; i++)
    if (p[i] == secret[0] && memcmp(p + i, secret, sl) == 0) return p + i;
  return NULL;
}

void tk__scrub_bytes(const tk__secrets *s, const char *p, size_t len, tk__buf *out) {
  tk__buf a = {0}, b = {0};
  tk__buf_add(&a, p, len);
  /* One pass per secret, in the order they were added, as tk__scrub. */
  for (size_t i = 0; i < s->n && !a.oom; i++) {
    size_t sl = strlen(s->v[i]);
    const char *at, *from = a.p ? a.p : "", *end = from + a.len;
    if (find(from, a.len, s->v[i], sl) == NULL) continue;
    while ((at = find(from, (size_t)(end - from), s->v[i], sl)) != NULL) {
      tk__buf_add(&b, from, (size_t)(at - from));
      tk__buf_adds(&b, REDACTED);
      from = at + sl;
    }
    tk__buf_add(&b, from, (size_t)(end - from));
    tk__buf t = a;
    a = b;
    b = t;
    tk__buf_free(&b);
  }
  if (a.oom) out->oom = 1;
  else tk__buf_add(out, a.p ? a.p : "", a.len);
  tk__buf_free(&a);
}

/* A string's bytes with the secrets replaced: a new JSON string, or NULL
 * when out of memory. */
static json_t *scrubbed_string(const tk__secrets *s, const char *p, size_t len) {
  tk__buf b = {0};
  tk__scrub_bytes(s, p, len, &b);
  json_t *v = b.oom ? NULL : json_stringn(b.p ? b.p : "", b.len);
  tk__buf_free(&b);
  return v;
}

/* A copy of v with the secrets replaced in every string and member name
 * (a new reference), or NULL when out of memory. */
static json_t *scrubbed(const tk__secrets *s, json_t *v) {
  if (json_is_string(v)) return scrubbed_string(s, json_string_value(v), json_string_length(v));
  if (json_is_array(v)) {
    json_t *a = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
      if (a == NULL || json_array_append_new(a, scrubbed(s, e)) != 0) {
        json_decref(a);
        return NULL;
      }
    }
    return a;
  }
  if (json_is_object(v)) {
    json_t *o = json_object();
    const char *k;
    size_t klen;
    json_t *e;
    json_object_keylen_foreach(v, k, klen, e) {
      json_t *name = o ? scrubbed_string(s, k, klen) : NULL;
      int bad = name == NULL ||
                json_object_setn_new(o, json_string_value(name), json_string_length(name),
                                     scrubbed(s, e)) != 0;
      json_decref(name);
      if (bad) {
        json_decref(o);
        return NULL;
      }
    }
    return o;
  }
  return json_incref(v);
}

void tk__redact_result(const tk__secrets *s, tk_handler_result *out) {
  if (s->n == 0) return;
  tk__scrub(s, out->error, sizeof out->error);
  if (out->results == NULL) return;
  json_t *doc = json_loads(out->results, JSON_DECODE_ANY, NULL);
  json_t *clean = doc ? scrubbed(s, doc) : NULL;
  char *text = clean ? json_dumps(clean, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  json_decref(doc);
  json_decref(clean);
  free(out->results);
  out->results = text;
  if (text == NULL) {
    out->status = TK_HANDLER_RETRY;
    snprintf(out->error, sizeof out->error,
             "out of memory taking secrets out of the results; they were not kept");
  }
}
