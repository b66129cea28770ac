/* Writing values back as text: for error messages and `config show`
 * (tk_toml_format_value) and for the tagged JSON. */
#include "toml/format.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toml/parser.h"

/* snprintf into buf[len], but whatever the locale's decimal point is, the
 * text has '.'. */
static void print_g(double d, int precision, char *out, size_t cap) {
  char raw[64];
  snprintf(raw, sizeof raw, "%.*g", precision, d);
  size_t o = 0;
  int in_point = 0;
  for (const char *p = raw; *p != '\0' && o + 1 < cap; p++) {
    int plain = (*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == 'e';
    if (plain) out[o++] = *p;
    else if (!in_point) out[o++] = '.';
    in_point = !plain;
  }
  out[o] = '\0';
}

int tk__toml_format_float(double d, char *buf, size_t len) {
  char text[64];
  if (isnan(d)) return snprintf(buf, len, "nan");
  if (isinf(d)) return snprintf(buf, len, d < 0 ? "-inf" : "inf");
  /* 17 significant digits always read back exactly; try shorter first. */
  for (int precision = 15; precision <= 17; precision++) {
    double back;
    print_g(d, precision, text, sizeof text);
    if (tk__toml_strtod(text, strlen(text), &back) == 0 && back == d) break;
  }
  if (strpbrk(text, ".e") == NULL) strcat(text, ".0");
  return snprintf(buf, len, "%s", text);
}

/* RFC 3339 text of a date-time of the given kind, with as many fraction
 * digits as were written; offsets as "Z" or "+HH:MM". */
static int format_datetime(const tk_toml_datetime *dt, tk_toml_type type, char *buf,
                           size_t len) {
  char text[64];
  size_t o = 0;
  if (type != TK_TOML_LOCAL_TIME)
    o += (size_t)snprintf(text, sizeof text, "%04d-%02d-%02d", dt->year, dt->month, dt->day);
  if (type != TK_TOML_LOCAL_DATE) {
    if (o > 0) text[o++] = 'T';
    o += (size_t)snprintf(text + o, sizeof text - o, "%02d:%02d:%02d", dt->hour, dt->minute,
                          dt->second);
    if (dt->frac_digits > 0 && dt->frac_digits <= 9) {
      int frac = dt->nanosecond;
      for (int i = dt->frac_digits; i < 9; i++) frac /= 10;
      o += (size_t)snprintf(text + o, sizeof text - o, ".%0*d", dt->frac_digits, frac);
    }
  }
  if (type == TK_TOML_OFFSET_DATETIME) {
    int off = dt->offset_minutes;
    if (off == 0) snprintf(text + o, sizeof text - o, "Z");
    else
      snprintf(text + o, sizeof text - o, "%c%02d:%02d", off < 0 ? '-' : '+', abs(off) / 60,
               abs(off) % 60);
  }
  return snprintf(buf, len, "%s", text);
}

/* Append to a snprintf-style buffer, counting what does not fit. */
typedef struct out_buf {
  char *buf;
  size_t cap, len;
} out_buf;

/* Append n bytes, counting those past the end as snprintf does. */
static void out_bytes(out_buf *o, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++, o->len++)
    if (o->len + 1 < o->cap) o->buf[o->len] = s[i];
}

/* A basic string with the escapes TOML defines. */
static void out_quoted(out_buf *o, const char *s, size_t n) {
  out_bytes(o, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    char hex[8];
    switch (c) {
    case '"': esc = "\\\""; break;
    case '\\': esc = "\\\\"; break;
    case '\b': esc = "\\b"; break;
    case '\t': esc = "\\t"; break;
    case '\n': esc = "\\n"; break;
    case '\f': esc = "\\f"; break;
    case '\r': esc = "\\r"; break;
    default:
      if (c < 0x20 || c == 0x7F) {
        snprintf(hex, sizeof hex, "\\u%04X", c);
        esc = hex;
      }
    }
    if (esc != NULL) out_bytes(o, esc, strlen(esc));
    else out_bytes(o, (const char *)&c, 1);
  }
  out_bytes(o, "\"", 1);
}

/* Close a snprintf-style buffer: NUL-terminate what fits, return the
 * length the whole text needs. */
static int out_end(out_buf *o) {
  if (o->cap > 0) o->buf[o->len < o->cap ? o->len : o->cap - 1] = '\0';
  return (int)o->len;
}

int tk__toml_format_string(const char *s, size_t n, char *buf, size_t len) {
  out_buf o = {buf, len, 0};
  out_quoted(&o, s, n);
  return out_end(&o);
}

int tk_toml_format_value(const tk_toml_value *v, char *buf, size_t len) {
  char text[64];
  tk_toml_datetime dt;
  switch (tk_toml_type_of(v)) {
  case TK_TOML_STRING: return tk__toml_format_string(v->u.s.ptr, v->u.s.len, buf, len);
  case TK_TOML_INTEGER: snprintf(text, sizeof text, "%" PRId64, v->u.i); break;
  case TK_TOML_FLOAT: tk__toml_format_float(v->u.f, text, sizeof text); break;
  case TK_TOML_BOOLEAN: snprintf(text, sizeof text, "%s", v->u.b ? "true" : "false"); break;
  case TK_TOML_OFFSET_DATETIME:
  case TK_TOML_LOCAL_DATETIME:
  case TK_TOML_LOCAL_DATE:
  case TK_TOML_LOCAL_TIME:
    tk_toml_datetime_of(v, &dt);
    format_datetime(&dt, (tk_toml_type)v->type, text, sizeof text);
    break;
  case TK_TOML_ARRAY: snprintf(text, sizeof text, "[...]"); break;
  case TK_TOML_TABLE: snprintf(text, sizeof text, "{...}"); break;
  default: snprintf(text, sizeof text, "(none)"); break;
  }
  return snprintf(buf, len, "%s", text);
}
