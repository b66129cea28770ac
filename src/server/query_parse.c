/* Query strings: decoding, lookup, and the list parameters (docs/api.md
 * "Conventions": limit and cursor; the task filters). */
#include "server/request_parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUERY_ARGS_MAX 64

/* The value of a hex digit, or -1. */
static int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int tk__pct_decode(const char *s, size_t n, int plus_space, char *out, size_t *outlen) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= n) return -1;
      int a = hex(s[i + 1]), b = hex(s[i + 2]);
      if (a < 0 || b < 0) return -1;
      c = (char)(a * 16 + b);
      i += 2;
    } else if (c == '+' && plus_space) {
      c = ' ';
    }
    if (c == '\0') return -1;
    out[o++] = c;
  }
  out[o] = '\0';
  *outlen = o;
  return 0;
}

void tk__query_free(tk__query *q) {
  for (int i = 0; i < q->n; i++) {
    free(q->args[i].key);
    free(q->args[i].value);
  }
  free(q->args);
  q->args = NULL;
  q->n = 0;
}

/* A decoded copy of s[0..n), or NULL (*bad set when the text is bad). */
static char *decoded(const char *s, size_t n, int *bad) {
  char *out = malloc(n + 1);
  size_t len;
  if (out != NULL && tk__pct_decode(s, n, 1, out, &len) != 0) {
    free(out);
    *bad = 1;
    return NULL;
  }
  return out;
}

int tk__query_parse(const char *qs, size_t len, tk__query *q, tk__api_error *e) {
  q->args = NULL;
  q->n = 0;
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i < len && qs[i] != '&') continue;
    const char *pair = qs + start;
    size_t plen = i - start;
    start = i + 1;
    if (plen == 0) continue;
    if (q->n == QUERY_ARGS_MAX) {
      tk__query_free(q);
      return tk__api_fail(e, 400, "bad_request", NULL,
                          "too many query parameters: at most %d are allowed", QUERY_ARGS_MAX);
    }
    if (q->args == NULL && (q->args = calloc(QUERY_ARGS_MAX, sizeof *q->args)) == NULL)
      return tk__api_fail(e, 500, "internal", NULL, "out of memory reading the query");
    const char *eq = memchr(pair, '=', plen);
    size_t klen = eq ? (size_t)(eq - pair) : plen;
    int bad_key = 0, bad_value = 0;
    tk__query_arg *a = &q->args[q->n];
    a->key = decoded(pair, klen, &bad_key);
    a->value = a->key ? decoded(eq ? eq + 1 : "", eq ? plen - klen - 1 : 0, &bad_value) : NULL;
    if (a->key == NULL || a->value == NULL) {
      /* The parameter at fault: its name when that decodes, else as sent. */
      char param[64];
      snprintf(param, sizeof param, "%.*s", (int)(klen < sizeof param ? klen : sizeof param - 1),
               pair);
      if (a->key && bad_value) snprintf(param, sizeof param, "%s", a->key);
      free(a->key);
      tk__query_free(q);
      if (!bad_key && !bad_value)
        return tk__api_fail(e, 500, "internal", NULL, "out of memory reading the query");
      return tk__api_fail(e, 400, "bad_request", param,
                          "query parameter \"%.*s\": malformed %%-escape or encoded NUL: "
                          "expected %%XX with two hex digits",
                          (int)(plen > 100 ? 100 : plen), pair);
    }
    if (tk__query_get(q, a->key) != NULL) {
      tk__api_fail(e, 400, "bad_request", a->key, "query parameter \"%.100s\" is given twice",
                   a->key);
      free(a->key);
      free(a->value);
      tk__query_free(q);
      return -1;
    }
    q->n++;
  }
  return 0;
}

const char *tk__query_get(const tk__query *q, const char *key) {
  for (int i = 0; i < q->n; i++)
    if (strcmp(q->args[i].key, key) == 0) return q->args[i].value;
  return NULL;
}

int tk__name_in(const char *const *names, const char *name) {
  for (const char *const *n = names; *n; n++)
    if (strcmp(*n, name) == 0) return 1;
  return 0;
}

int tk__query_only(const tk__query *q, const char *const *known, tk__api_error *e) {
  for (int i = 0; i < q->n; i++) {
    if (tk__name_in(known, q->args[i].key)) continue;
    char list[256] = "";
    size_t used = 0;
    for (const char *const *k = known; *k && used < sizeof list - 40; k++)
      used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", k == known ? "" : ", ",
                               *k);
    return tk__api_fail(e, 400, "bad_request", q->args[i].key,
                        "unknown query parameter \"%.100s\": expected %s%s", q->args[i].key,
                        known[0] ? "one of " : "none", list);
  }
  return 0;
}

int tk__query_int(const tk__query *q, const char *key, int64_t min, int64_t max, int64_t dflt,
                  int64_t *out, tk__api_error *e) {
  const char *v = tk__query_get(q, key);
  if (v == NULL) {
    *out = dflt;
    return 0;
  }
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (v[0] == '\0' || *end != '\0' || errno != 0 || v[0] == ' ' || v[0] == '+' || n < min ||
      n > max)
    return tk__api_fail(e, 400, "bad_request", key,
                        "%s=\"%.100s\": expected an integer from %lld to %lld", key, v,
                        (long long)min, (long long)max);
  *out = n;
  return 0;
}

/* A filter's text parameter: absent, or not empty. */
static int text_param(const tk__query *q, const char *key, const char **out, tk__api_error *e) {
  *out = tk__query_get(q, key);
  if (*out != NULL && (*out)[0] == '\0')
    return tk__api_fail(e, 400, "bad_filter", key,
                        "%s is empty: give a value or leave the parameter out", key);
  return 0;
}

int tk__list_query_parse(const tk__query *q, int steps, tk__list_query *out, tk__api_error *e) {
  static const char *const task_params[] = {"state", "template", "since", "q",
                                            "limit", "cursor",   NULL};
  static const char *const step_params[] = {"state", "task_state", "template", "since",
                                            "q",     "limit",      "cursor",   NULL};
  memset(out, 0, sizeof *out);
  if (tk__query_only(q, steps ? step_params : task_params, e) != 0) return -1;
  int64_t limit;
  if (tk__query_int(q, "limit", 1, TK_PAGE_MAX, 50, &limit, e) != 0) return -1;
  out->limit = (int)limit;
  const char *state;
  if (text_param(q, steps ? "task_state" : "state", &out->filter.state, e) != 0 ||
      text_param(q, "template", &out->filter.template_name, e) != 0 ||
      text_param(q, "since", &out->since, e) != 0 ||
      text_param(q, "q", &out->filter.error_text, e) != 0 ||
      (steps && text_param(q, "state", &state, e) != 0))
    return -1;
  if (steps) out->step_state = state ? state : "error";
  out->cursor = tk__query_get(q, "cursor");
  if (out->cursor != NULL && out->cursor[0] == '\0') out->cursor = NULL;
  return 0;
}
