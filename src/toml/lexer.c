/* The lexical layer shared by the parser: positions, error messages,
 * whitespace, comments, line ends and UTF-8 validation. */
#include "toml/parser.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Advance (line, col) over [from, at): newlines start a new line, every
 * byte that is not a UTF-8 continuation byte is one column. Spans are
 * short (from one key or value to the next), so one plain loop wins. */
static void advance(const char *from, const char *at, uint32_t *line, uint32_t *col) {
  uint32_t l = *line, c = *col;
  for (const char *q = from; q < at; q++) {
    if (*q == '\n') {
      l++;
      c = 1;
    } else {
      c += ((unsigned char)*q & 0xC0) != 0x80;
    }
  }
  *line = l;
  *col = c;
}

tk_toml_pos tk__toml_pos(tk__toml_parser *P, const char *at) {
  if (P->pos_at == NULL || at < P->pos_at) {
    P->pos_at = P->src;
    P->line = 1;
    P->col = 1;
  }
  advance(P->pos_at, at, &P->line, &P->col);
  P->pos_at = at;
  tk_toml_pos pos = {P->line, P->col};
  return pos;
}

int tk__toml_fail(tk__toml_parser *P, const char *at, int code, const char *fmt, ...) {
  char msg[TK_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* Errors may point back before the cached position (an unterminated
   * string names where it opened), so count from the start. */
  uint32_t line = 1, col = 1;
  if (at > P->end) at = P->end;
  advance(P->src, at, &line, &col);
  if (P->name != NULL)
    return tk_err_set(P->err, code, "%s:%u:%u: %s", P->name, (unsigned)line, (unsigned)col, msg);
  return tk_err_set(P->err, code, "line %u, column %u: %s", (unsigned)line, (unsigned)col, msg);
}

int tk__toml_nomem(tk__toml_parser *P) {
  return tk__toml_fail(P, P->p, TK_ENOMEM, "out of memory");
}

size_t tk__toml_utf8_len(const unsigned char *p, const unsigned char *end) {
  unsigned c = p[0];
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0; /* continuation byte, overlong lead byte, or past U+10FFFF */
  }
  if ((size_t)(end - p) < n) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000)) return 0; /* overlong */
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;                     /* surrogate */
  if (cp > 0x10FFFF) return 0;
  return n;
}

/* The code point of a sequence tk__toml_utf8_len accepted. */
static uint32_t utf8_decode(const unsigned char *p, size_t n) {
  static const unsigned char lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t cp = p[0] & lead_mask[n];
  for (size_t i = 1; i < n; i++) cp = (cp << 6) | (p[i] & 0x3F);
  return cp;
}

const char *tk__toml_found(const tk__toml_parser *P, const char *at, char *buf, size_t cap) {
  if (at >= P->end) return "end of input";
  unsigned char c = (unsigned char)*at;
  if (c == '\n' || (c == '\r' && at + 1 < P->end && at[1] == '\n')) return "end of line";
  if (c == '\r') return "a carriage return not followed by a newline";
  if (c == '\t') return "a tab";
  if (c == ' ') return "a space";
  if (c >= 0x20 && c < 0x7F) {
    snprintf(buf, cap, "'%c'", c);
  } else if (c < 0x80) {
    snprintf(buf, cap, "control character U+%04X", c);
  } else {
    size_t n = tk__toml_utf8_len((const unsigned char *)at, (const unsigned char *)P->end);
    if (n == 0) snprintf(buf, cap, "invalid UTF-8 byte 0x%02X", c);
    else snprintf(buf, cap, "U+%04X", (unsigned)utf8_decode((const unsigned char *)at, n));
  }
  return buf;
}

/* Longest key shown in messages, in input bytes. */
#define SHOW_MAX 60

/* `key` quoted for messages ("name", "a\nb"), shortened when very long. */
static const char *show_key(const char *key, size_t len, char *buf, size_t cap) {
  size_t o = 0;
  /* Room for one escape (6), the closing quote, "..." and the NUL. */
  if (cap < 16) {
    if (cap > 0) buf[0] = '\0';
    return buf;
  }
  buf[o++] = '"';
  size_t i;
  for (i = 0; i < len && i < SHOW_MAX && o + 12 < cap; i++) {
    unsigned char c = (unsigned char)key[i];
    if (c == '"' || c == '\\') {
      buf[o++] = '\\';
      buf[o++] = (char)c;
    } else if (c == '\n') {
      buf[o++] = '\\';
      buf[o++] = 'n';
    } else if (c == '\t') {
      buf[o++] = '\\';
      buf[o++] = 't';
    } else if (c < 0x20 || c == 0x7F) {
      o += (size_t)snprintf(buf + o, cap - o, "\\u%04X", c);
    } else {
      buf[o++] = (char)c;
    }
  }
  if (i < len) {
    /* Do not cut a UTF-8 sequence in half. */
    while (o > 1 && ((unsigned char)buf[o - 1] & 0xC0) == 0x80) o--;
    if (o > 1 && (unsigned char)buf[o - 1] >= 0xC0) o--;
    memcpy(buf + o, "...", 3);
    o += 3;
  }
  buf[o++] = '"';
  buf[o] = '\0';
  return buf;
}

/* Whether a key can be written bare. */
static int is_bare(const char *k, size_t len) {
  if (len == 0) return 0;
  for (size_t i = 0; i < len; i++)
    if (!tk__toml_is_bare_char(k[i])) return 0;
  return 1;
}

const char *tk__toml_show_path(const tk__toml_key *keys, size_t n, int quote_bare, char *buf,
                               size_t cap) {
  size_t o = 0;
  char part[96];
  int all_bare = 1;
  if (cap < 8) {
    if (cap > 0) buf[0] = '\0';
    return buf;
  }
  for (size_t i = 0; i < n; i++) all_bare = all_bare && is_bare(keys[i].ptr, keys[i].len);
  /* "a.b" reads better than a.b in a sentence; a."b c" already has quotes. */
  int outer = quote_bare && all_bare;
  if (outer) buf[o++] = '"';
  buf[o] = '\0';
  for (size_t i = 0; i < n; i++) {
    const char *s = keys[i].ptr;
    size_t len = keys[i].len;
    if (is_bare(s, len)) {
      if (len > SHOW_MAX) len = SHOW_MAX;
      snprintf(part, sizeof part, "%.*s%s", (int)len, s, len < keys[i].len ? "..." : "");
    } else {
      show_key(s, len, part, sizeof part);
    }
    size_t need = strlen(part) + (i > 0);
    if (o + need + 5 >= cap) {
      o += (size_t)snprintf(buf + o, cap - o, "...");
      break;
    }
    o += (size_t)snprintf(buf + o, cap - o, "%s%s", i > 0 ? "." : "", part);
  }
  if (outer && o + 1 < cap) {
    buf[o++] = '"';
    buf[o] = '\0';
  }
  return buf;
}

int tk__toml_skip_comment(tk__toml_parser *P) {
  const unsigned char *p = (const unsigned char *)P->p + 1;
  const unsigned char *end = (const unsigned char *)P->end;
  for (;;) {
    while (p < end && ((*p >= 0x20 && *p < 0x7F) || *p == '\t')) p++;
    if (p == end || *p == '\n' || (*p == '\r' && p + 1 < end && p[1] == '\n')) break;
    if (*p >= 0x80) {
      size_t n = tk__toml_utf8_len(p, end);
      if (n == 0)
        return tk__toml_fail(P, (const char *)p, TK_ESYNTAX,
                             "invalid UTF-8 in comment (byte 0x%02X)", *p);
      p += n;
      continue;
    }
    return tk__toml_fail(P, (const char *)p, TK_ESYNTAX,
                         "control character U+%04X is not allowed in a comment", *p);
  }
  P->p = (const char *)p;
  return 0;
}

int tk__toml_skip_ws_nl(tk__toml_parser *P) {
  for (;;) {
    tk__toml_skip_ws(P);
    const char *p = P->p;
    if (p == P->end) return 0;
    if (*p == '#') {
      int rc = tk__toml_skip_comment(P);
      if (rc != 0) return rc;
    } else if (*p == '\n') {
      P->p = p + 1;
    } else if (*p == '\r' && p + 1 < P->end && p[1] == '\n') {
      P->p = p + 2;
    } else {
      return 0;
    }
  }
}

int tk__toml_end_line(tk__toml_parser *P, const char *what) {
  tk__toml_skip_ws(P);
  if (P->p < P->end && *P->p == '#') {
    int rc = tk__toml_skip_comment(P);
    if (rc != 0) return rc;
  }
  const char *p = P->p;
  if (p == P->end) return 0;
  if (*p == '\n') {
    P->p = p + 1;
    return 0;
  }
  if (*p == '\r' && p + 1 < P->end && p[1] == '\n') {
    P->p = p + 2;
    return 0;
  }
  char buf[48];
  return tk__toml_fail(P, p, TK_ESYNTAX, "expected end of line after %s, found %s", what,
                       tk__toml_found(P, p, buf, sizeof buf));
}
