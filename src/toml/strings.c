/* The four string kinds: basic "..." and literal '...', each on one line or
 * multi-line with triple quotes. Strings without escapes are returned as
 * slices of the input; the rest are decoded into the parser's scratch
 * buffer, so nothing is allocated per character. */
#include "toml/parser.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

char *tk__toml_scratch(tk__toml_parser *P, size_t n) {
  if (P->buf_cap - P->buf_len < n) {
    size_t cap = P->buf_cap ? P->buf_cap : 256;
    while (cap - P->buf_len < n) {
      if (cap > SIZE_MAX / 2) return NULL;
      cap *= 2;
    }
    char *grown = realloc(P->buf, cap);
    if (grown == NULL) return NULL;
    P->buf = grown;
    P->buf_cap = cap;
  }
  return P->buf + P->buf_len;
}

/* Append n bytes to the scratch buffer; 0 or TK_ENOMEM. */
static int put(tk__toml_parser *P, const char *s, size_t n) {
  if (n == 0) return 0;
  char *dst = tk__toml_scratch(P, n);
  if (dst == NULL) return tk__toml_nomem(P);
  memcpy(dst, s, n);
  P->buf_len += n;
  return 0;
}

/* Append code point cp as UTF-8. */
static int put_utf8(tk__toml_parser *P, uint32_t cp) {
  char b[4];
  size_t n;
  if (cp < 0x80) {
    b[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    b[0] = (char)(0xC0 | (cp >> 6));
    b[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    b[0] = (char)(0xE0 | (cp >> 12));
    b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    b[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    b[0] = (char)(0xF0 | (cp >> 18));
    b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  return put(P, b, n);
}

/* \uXXXX or \UXXXXXXXX at p (the backslash): decode, check it is a Unicode
 * scalar value, append; *next gets the byte after it. */
static int unicode_escape(tk__toml_parser *P, const char *p, const char **next) {
  int digits = p[1] == 'u' ? 4 : 8;
  uint32_t cp = 0;
  for (int i = 0; i < digits; i++) {
    const char *d = p + 2 + i;
    int h = d < P->end ? tk__toml_digit(*d, 16) : -1;
    if (h < 0)
      return tk__toml_fail(P, p, TK_ESYNTAX,
                           "invalid escape sequence: \\%c must be followed by %d hex digits",
                           p[1], digits);
    cp = (cp << 4) | (uint32_t)h;
  }
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
    return tk__toml_fail(P, p, TK_ESYNTAX,
                         "invalid escape sequence \\%c%.*s: not a Unicode scalar value "
                         "(surrogates and values past 10FFFF are not allowed)",
                         p[1], digits, p + 2);
  *next = p + 2 + digits;
  return put_utf8(P, cp);
}

/* A backslash at the end of a line in a multi-line basic string: it must be
 * followed only by whitespace up to the newline; it swallows all whitespace
 * and newlines after it. */
static int line_ending_backslash(tk__toml_parser *P, const char *p, const char **next) {
  const char *q = p + 1, *end = P->end;
  while (q < end && (*q == ' ' || *q == '\t')) q++;
  if (!(q < end && (*q == '\n' || (*q == '\r' && q + 1 < end && q[1] == '\n'))))
    return tk__toml_fail(P, p, TK_ESYNTAX,
                         "invalid escape sequence: a backslash followed by whitespace must "
                         "be the last thing on its line");
  for (;;) {
    if (q < end && (*q == ' ' || *q == '\t' || *q == '\n')) q++;
    else if (q + 1 < end && *q == '\r' && q[1] == '\n') q += 2;
    else break;
  }
  *next = q;
  return 0;
}

/* One escape sequence at p (the backslash) in a basic string. */
static int escape(tk__toml_parser *P, const char *p, int multi, const char **next) {
  char c;
  char e = p + 1 < P->end ? p[1] : '\0';
  switch (e) {
  case 'b': c = '\b'; break;
  case 't': c = '\t'; break;
  case 'n': c = '\n'; break;
  case 'f': c = '\f'; break;
  case 'r': c = '\r'; break;
  case '"': c = '"'; break;
  case '\\': c = '\\'; break;
  case 'u':
  case 'U': return unicode_escape(P, p, next);
  default:
    if (multi && (e == ' ' || e == '\t' || e == '\n' || e == '\r'))
      return line_ending_backslash(P, p, next);
    if (e >= 0x21 && e < 0x7F)
      return tk__toml_fail(P, p, TK_ESYNTAX,
                           "invalid escape sequence \\%c; the escapes are \\b \\t \\n \\f \\r "
                           "\\\" \\\\ \\uXXXX and \\UXXXXXXXX",
                           e);
    char buf[48];
    return tk__toml_fail(P, p, TK_ESYNTAX, "invalid escape sequence: a backslash followed by %s",
                         tk__toml_found(P, p + 1, buf, sizeof buf));
  }
  *next = p + 2;
  return put(P, &c, 1);
}

/* The error for a string that was not closed where `p` needs it closed. */
static int unterminated(tk__toml_parser *P, const char *open, const char *p, char q, int multi) {
  tk_toml_pos at = tk__toml_pos(P, open);
  char buf[48];
  const char *delim = q == '"' ? (multi ? "\"\"\"" : "\"") : (multi ? "'''" : "'");
  return tk__toml_fail(P, p, TK_ESYNTAX,
                       "unterminated string: expected %s to close the string that opened at "
                       "line %u, column %u, found %s",
                       delim, (unsigned)at.line, (unsigned)at.column,
                       tk__toml_found(P, p, buf, sizeof buf));
}

/* The body of a string whose opening delimiter is at P->p: quote q ('"'
 * or '\''), multi-line or not. Leaves P->p after the closing delimiter. */
static int scan(tk__toml_parser *P, char q, int multi, tk__toml_slice *out) {
  const char *open = P->p, *end = P->end;
  const char *p = open + (multi ? 3 : 1);
  /* A basic string stops at its escapes; a literal one has none. */
  const char esc = q == '"' ? '\\' : q;
  int copying = 0, rc;
  if (multi) { /* a newline right after the opening delimiter is trimmed */
    if (p < end && *p == '\n') p++;
    else if (p + 1 < end && *p == '\r' && p[1] == '\n') p += 2;
  }
  const char *start = p, *stop;
  P->buf_len = 0;
  for (;;) {
    const char *run = p;
    while (p < end && (unsigned char)(*p - 0x20) < 0x5F && *p != q && *p != esc) p++;
    if (copying && p > run && (rc = put(P, run, (size_t)(p - run))) != 0) return rc;
    if (p == end) return unterminated(P, open, p, q, multi);
    unsigned char c = (unsigned char)*p;
    size_t n = 1;
    if (c == (unsigned char)q) {
      if (!multi) {
        stop = p++;
        break;
      }
      while (p + n < end && p[n] == q && n < 6) n++;
      if (n >= 3) {
        if (n > 5)
          return tk__toml_fail(P, p, TK_ESYNTAX,
                               "too many quotes: at most two may stand right before the closing "
                               "%c%c%c of a multi-line string",
                               q, q, q);
        /* Up to two quotes before the closing delimiter belong to the text. */
        stop = p + n - 3;
        if (copying && n > 3 && (rc = put(P, p, n - 3)) != 0) return rc;
        p += n;
        break;
      }
    } else if (c == '\\' && q == '"') {
      if (!copying) {
        copying = 1;
        if ((rc = put(P, start, (size_t)(p - start))) != 0) return rc;
      }
      if ((rc = escape(P, p, multi, &p)) != 0) return rc;
      continue;
    } else if (c == '\t' || (multi && c == '\n')) {
      /* allowed as is */
    } else if (multi && c == '\r' && p + 1 < end && p[1] == '\n') {
      /* CRLF becomes LF so a value does not depend on the file's line ends. */
      if (!copying) {
        copying = 1;
        if ((rc = put(P, start, (size_t)(p - start))) != 0) return rc;
      }
      if ((rc = put(P, "\n", 1)) != 0) return rc;
      p += 2;
      continue;
    } else if (c >= 0x80) {
      n = tk__toml_utf8_len((const unsigned char *)p, (const unsigned char *)end);
      if (n == 0)
        return tk__toml_fail(P, p, TK_ESYNTAX, "invalid UTF-8 in string (byte 0x%02X)", c);
    } else if (!multi && (c == '\n' || (c == '\r' && p + 1 < end && p[1] == '\n'))) {
      return unterminated(P, open, p, q, multi);
    } else if (q == '"') {
      return tk__toml_fail(P, p, TK_ESYNTAX,
                           "control character U+%04X must be escaped in a string (write "
                           "\\u%04X)",
                           c, c);
    } else {
      return tk__toml_fail(P, p, TK_ESYNTAX,
                           "control character U+%04X is not allowed in a literal string; use "
                           "a basic string with \\u%04X",
                           c, c);
    }
    if (copying && (rc = put(P, p, n)) != 0) return rc;
    p += n;
  }
  P->p = p;
  if (copying) {
    out->ptr = P->buf;
    out->len = P->buf_len;
  } else {
    out->ptr = start;
    out->len = (size_t)(stop - start);
  }
  return 0;
}

/* Whether a triple quote starts at p. */
static int is_multi(const tk__toml_parser *P, const char *p) {
  return P->end - p >= 3 && p[1] == p[0] && p[2] == p[0];
}

int tk__toml_parse_string(tk__toml_parser *P, tk_toml_value *v) {
  tk__toml_slice s;
  int rc = scan(P, *P->p, is_multi(P, P->p), &s);
  if (rc != 0) return rc;
  char *copy = tk__toml_strndup(&P->mem->bytes, s.ptr, s.len);
  if (copy == NULL) return tk__toml_nomem(P);
  v->type = TK_TOML_STRING;
  v->u.s.ptr = copy;
  v->u.s.len = s.len;
  return 0;
}

int tk__toml_parse_quoted_key(tk__toml_parser *P, tk__toml_key *k) {
  if (is_multi(P, P->p))
    return tk__toml_fail(P, P->p, TK_ESYNTAX,
                         "a multi-line string cannot be a key; use \"...\" or '...'");
  tk__toml_slice s;
  int rc = scan(P, *P->p, 0, &s);
  if (rc != 0) return rc;
  k->len = s.len;
  k->ptr = s.ptr;
  /* The scratch buffer is reused by the next string: keep a copy. */
  if (s.ptr == P->buf && (k->ptr = tk__toml_strndup(&P->mem->bytes, s.ptr, s.len)) == NULL)
    return tk__toml_nomem(P);
  return 0;
}
