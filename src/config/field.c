/* Reading, copying and printing one schema field of a settings struct. */
#include "config/internal.h"

#include <stdio.h>
#include <string.h>

#include <tasker/duration.h>

#include "toml/format.h"

void tk__field_copy(const tk__key *k, void *dst, const void *src) {
  switch (k->kind) {
  case TK__K_DURATIONS:
    *TK__LEN(dst, k) = *TK__CLEN(src, k);
    memcpy(TK__FIELD(dst, k, int64_t), TK__CFIELD(src, k, int64_t),
           (size_t)k->max * sizeof(int64_t));
    break;
  case TK__K_DURATION:
  case TK__K_INT: *TK__FIELD(dst, k, int64_t) = *TK__CFIELD(src, k, int64_t); break;
  case TK__K_NUMBER: *TK__FIELD(dst, k, double) = *TK__CFIELD(src, k, double); break;
  case TK__K_JITTER: *TK__FIELD(dst, k, tk_jitter) = *TK__CFIELD(src, k, tk_jitter); break;
  case TK__K_STRING: *TK__FIELD(dst, k, const char *) = *TK__CFIELD(src, k, const char *); break;
  case TK__K_BOOL: *TK__FIELD(dst, k, int) = *TK__CFIELD(src, k, int); break;
  TK__JSON_ONLY_KINDS: break; /* not in a settings struct */
  }
}

/* snprintf that never reports more than fits, so callers can keep
 * appending at buf + used. */
static size_t append(char *buf, size_t len, size_t used, const char *fmt, const char *s) {
  if (used >= len) return used;
  int n = snprintf(buf + used, len - used, fmt, s);
  return n < 0 ? used : used + (size_t)n;
}

static int quote(const char *s, char *buf, size_t len) {
  return tk__toml_format_string(s, strlen(s), buf, len);
}

static int format_duration(int64_t ms, char *buf, size_t len) {
  char d[48];
  tk_duration_format(ms, d, sizeof d);
  return snprintf(buf, len, "\"%s\"", d);
}

int tk__field_format(const tk__key *k, const void *obj, char *buf, size_t len) {
  switch (k->kind) {
  case TK__K_DURATIONS: {
    int n = *TK__CLEN(obj, k);
    const int64_t *list = TK__CFIELD(obj, k, int64_t);
    size_t used = append(buf, len, 0, "%s", "[");
    for (int i = 0; i < n; i++) {
      char d[64];
      format_duration(list[i], d, sizeof d);
      used = append(buf, len, used, i ? ", %s" : "%s", d);
    }
    return (int)append(buf, len, used, "%s", "]");
  }
  case TK__K_DURATION: return format_duration(*TK__CFIELD(obj, k, int64_t), buf, len);
  case TK__K_INT: return snprintf(buf, len, "%lld", (long long)*TK__CFIELD(obj, k, int64_t));
  case TK__K_NUMBER: return tk__toml_format_float(*TK__CFIELD(obj, k, double), buf, len);
  case TK__K_JITTER: return quote(tk_jitter_name(*TK__CFIELD(obj, k, tk_jitter)), buf, len);
  case TK__K_STRING: return quote(*TK__CFIELD(obj, k, const char *), buf, len);
  case TK__K_BOOL: return snprintf(buf, len, "%s", *TK__CFIELD(obj, k, int) ? "true" : "false");
  TK__JSON_ONLY_KINDS: break; /* not in a settings struct */
  }
  return snprintf(buf, len, "?");
}
