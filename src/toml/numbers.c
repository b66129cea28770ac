/* Integers (decimal, 0x, 0o, 0b; exact int64 with overflow detection) and
 * floats (fraction and exponent forms, inf, nan). Floats are converted
 * without depending on the process locale. */
#include "toml/parser.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Digits of `base` from p with single underscores between digits. Returns
 * where the run ends; *count gets the digits; *bad the first misplaced
 * underscore, or NULL. */
static const char *scan_digits(const char *p, const char *end, int base, size_t *count,
                               const char **bad) {
  int prev_digit = 0;
  *count = 0;
  *bad = NULL;
  while (p < end) {
    if (tk__toml_digit(*p, base) >= 0) {
      ++*count;
      prev_digit = 1;
    } else if (*p == '_') {
      if (!prev_digit || p + 1 >= end || tk__toml_digit(p[1], base) < 0) {
        *bad = p;
        return p;
      }
      prev_digit = 0;
    } else {
      break;
    }
    p++;
  }
  return p;
}

/* Where the word at p ends, for quoting a malformed number. */
static const char *word_end(const char *p, const char *end) {
  while (p < end && !tk__toml_is_delim((unsigned char)*p) && (unsigned char)*p > 0x20 &&
         (unsigned char)*p < 0x7F)
    p++;
  return p;
}

/* "invalid number "TEXT": WHY" for the word at start. */
static int bad_number(tk__toml_parser *P, const char *start, const char *at, const char *why) {
  const char *stop = word_end(start, P->end);
  int n = (int)(stop - start);
  return tk__toml_fail(P, at, TK_ESYNTAX, "invalid number \"%.*s%s\": %s", n > 40 ? 40 : n, start,
                       n > 40 ? "..." : "", why);
}

/* Whether a scalar may end at p. */
static int is_end(const tk__toml_parser *P, const char *p) {
  return p == P->end || tk__toml_is_delim((unsigned char)*p);
}

/* 0x, 0o, 0b integers: no sign, leading zeros allowed, must fit int64. */
static int prefixed_int(tk__toml_parser *P, const char *start, tk_toml_value *v) {
  int base = start[1] == 'x' ? 16 : start[1] == 'o' ? 8 : 2;
  const char *names = base == 16 ? "hexadecimal" : base == 8 ? "octal" : "binary";
  const char *bad, *p = start + 2;
  size_t n;
  const char *stop = scan_digits(p, P->end, base, &n, &bad);
  if (bad != NULL)
    return bad_number(P, start, bad, "an underscore must stand between two digits");
  if (n == 0 || !is_end(P, stop)) {
    char why[64];
    snprintf(why, sizeof why, "expected %s digits after %.2s", names, start);
    return bad_number(P, start, stop, why);
  }
  uint64_t acc = 0;
  for (; p < stop; p++) {
    if (*p == '_') continue;
    uint64_t d = (uint64_t)tk__toml_digit(*p, base);
    if (acc > ((uint64_t)INT64_MAX - d) / (uint64_t)base)
      return tk__toml_fail(P, start, TK_ERANGE,
                           "integer %.*s does not fit in a 64-bit signed integer",
                           (int)(stop - start), start);
    acc = acc * (uint64_t)base + d;
  }
  v->type = TK_TOML_INTEGER;
  v->u.i = (int64_t)acc;
  P->p = stop;
  return 0;
}

/* A decimal integer at digits [p, stop) (underscores allowed), negated
 * when neg. */
static int decimal_int(tk__toml_parser *P, const char *start, const char *p, const char *stop,
                       int neg, tk_toml_value *v) {
  uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  uint64_t acc = 0;
  for (; p < stop; p++) {
    if (*p == '_') continue;
    uint64_t d = (uint64_t)(*p - '0');
    if (acc > (limit - d) / 10)
      return tk__toml_fail(P, start, TK_ERANGE,
                           "integer %.*s does not fit in a 64-bit signed integer (%s)",
                           (int)(stop - start), start,
                           neg ? "-9223372036854775808 is the smallest"
                               : "9223372036854775807 is the largest");
    acc = acc * 10 + d;
  }
  v->type = TK_TOML_INTEGER;
  v->u.i = neg ? (int64_t)(0 - acc) : (int64_t)acc;
  return 0;
}

/* A float at [start, stop): drop the underscores and convert. */
static int decimal_float(tk__toml_parser *P, const char *start, const char *stop,
                         tk_toml_value *v) {
  size_t len = (size_t)(stop - start);
  size_t saved = P->buf_len;
  char *tmp = tk__toml_scratch(P, len);
  if (tmp == NULL) return tk__toml_nomem(P);
  size_t n = 0;
  for (const char *p = start; p < stop; p++)
    if (*p != '_') tmp[n++] = *p;
  P->buf_len = saved;
  double d;
  int rc = tk__toml_strtod(tmp, n, &d);
  if (rc == TK_ENOMEM) return tk__toml_nomem(P);
  if (rc != 0)
    return tk__toml_fail(P, start, TK_ERANGE, "float %.*s is out of range for a 64-bit float",
                         (int)(len > 60 ? 60 : len), start);
  v->type = TK_TOML_FLOAT;
  v->u.f = d;
  return 0;
}

/* inf or nan after an optional sign at p. */
static int special_float(tk__toml_parser *P, const char *start, const char *p, int neg,
                         tk_toml_value *v) {
  const char *end = P->end;
  if (end - p >= 3 && is_end(P, p + 3)) {
    if (memcmp(p, "inf", 3) == 0) {
      v->type = TK_TOML_FLOAT;
      v->u.f = neg ? -INFINITY : INFINITY;
      P->p = p + 3;
      return 0;
    }
    if (memcmp(p, "nan", 3) == 0) {
      v->type = TK_TOML_FLOAT;
      v->u.f = neg ? -NAN : NAN;
      P->p = p + 3;
      return 0;
    }
  }
  const char *stop = word_end(start, end);
  int n = (int)(stop - start);
  return tk__toml_fail(P, start, TK_ESYNTAX,
                       "invalid value \"%.*s%s\": expected a string, number, boolean, date-time, "
                       "array or inline table (inf and nan are lowercase)",
                       n > 40 ? 40 : n, start, n > 40 ? "..." : "");
}

int tk__toml_parse_number(tk__toml_parser *P, tk_toml_value *v) {
  const char *start = P->p, *end = P->end, *p = start, *bad;
  int neg = 0;
  if (*p == '+' || *p == '-') neg = *p++ == '-';
  if (p < end && (*p == 'i' || *p == 'n')) return special_float(P, start, p, neg, v);
  if (p == end || *p < '0' || *p > '9')
    return bad_number(P, start, p, "expected a digit, inf or nan after the sign");
  if (*p == '0' && p + 1 < end && (p[1] == 'x' || p[1] == 'o' || p[1] == 'b')) {
    if (p != start)
      return bad_number(P, start, start,
                        "a sign is not allowed on hexadecimal, octal or binary integers");
    return prefixed_int(P, start, v);
  }
  const char *int_start = p;
  size_t n;
  p = scan_digits(p, end, 10, &n, &bad);
  if (bad != NULL) return bad_number(P, start, bad, "an underscore must stand between two digits");
  if (*int_start == '0' && n > 1)
    return bad_number(P, start, int_start, "leading zeros are not allowed");
  int is_float = 0;
  if (p < end && *p == '.') {
    if (p + 1 >= end || p[1] < '0' || p[1] > '9')
      return bad_number(P, start, p, "a decimal point must have digits on both sides");
    p = scan_digits(p + 1, end, 10, &n, &bad);
    if (bad != NULL)
      return bad_number(P, start, bad, "an underscore must stand between two digits");
    is_float = 1;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    const char *q = p + 1;
    if (q < end && (*q == '+' || *q == '-')) q++;
    if (q >= end || *q < '0' || *q > '9')
      return bad_number(P, start, p, "an exponent needs digits");
    p = scan_digits(q, end, 10, &n, &bad);
    if (bad != NULL)
      return bad_number(P, start, bad, "an underscore must stand between two digits");
    is_float = 1;
  }
  if (!is_end(P, p)) {
    char why[64], buf[48];
    snprintf(why, sizeof why, "unexpected %s", tk__toml_found(P, p, buf, sizeof buf));
    return bad_number(P, start, p, why);
  }
  int rc = is_float ? decimal_float(P, start, p, v) : decimal_int(P, start, int_start, p, neg, v);
  if (rc == 0) P->p = p;
  return rc;
}

/* Powers of ten that are exact doubles. */
static const double exact_pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Exactly rounded for up to 15 significant digits and |exponent| <= 22:
 * both operands are exact doubles, so one IEEE operation rounds once.
 * Returns 0 when the text is outside that range. */
static int fast_strtod(const char *s, const char *end, double *out) {
  int neg = 0;
  if (s < end && (*s == '+' || *s == '-')) neg = *s++ == '-';
  uint64_t m = 0;
  int digits = 0, exp10 = 0;
  for (; s < end && *s >= '0' && *s <= '9'; s++) {
    if (m == 0 && *s == '0') continue;
    if (++digits > 15) return 0;
    m = m * 10 + (uint64_t)(*s - '0');
  }
  if (s < end && *s == '.') {
    for (s++; s < end && *s >= '0' && *s <= '9'; s++) {
      exp10--;
      if (m == 0 && *s == '0') continue;
      if (++digits > 15) return 0;
      m = m * 10 + (uint64_t)(*s - '0');
    }
  }
  if (s < end && (*s == 'e' || *s == 'E')) {
    s++;
    int eneg = 0, e = 0;
    if (s < end && (*s == '+' || *s == '-')) eneg = *s++ == '-';
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
      if (e > 10000) return 0;
      e = e * 10 + (*s - '0');
    }
    exp10 += eneg ? -e : e;
  }
  if (s != end) return 0;
  double d = (double)m;
  if (m != 0) {
    if (exp10 < -22 || exp10 > 22) return 0;
    d = exp10 < 0 ? d / exact_pow10[-exp10] : d * exact_pow10[exp10];
  }
  *out = neg ? -d : d;
  return 1;
}

int tk__toml_strtod(const char *text, size_t len, double *out) {
  if (fast_strtod(text, text + len, out)) return 0;
  /* strtod reads the decimal point of the current locale: run it in the
   * "C" locale, on this thread only. */
  char *copy = malloc(len + 1);
  if (copy == NULL) return TK_ENOMEM;
  memcpy(copy, text, len);
  copy[len] = '\0';
  locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
  if (c == (locale_t)0) {
    free(copy);
    return TK_ENOMEM;
  }
  locale_t old = uselocale(c);
  errno = 0;
  double d = strtod(copy, NULL);
  int overflow = errno == ERANGE && isinf(d);
  uselocale(old);
  freelocale(c);
  free(copy);
  if (overflow) return TK_ERANGE;
  *out = d;
  return 0;
}
