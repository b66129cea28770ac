/* Parsing and formatting of durations ("150ms", "2s", "1m30s", "1.5"). */
#include <tasker/duration.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#define DURATION_FORMS "a number with a unit ms, s, m or h (\"150ms\", \"2s\", \"1m30s\") or plain seconds (\"30\", \"1.5\")"

/* Largest ms value we accept; far beyond any sane delay but safe to add. */
#define DURATION_MAX_MS ((double)INT64_MAX / 4)

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Read an unsigned decimal number with an optional fraction at *p. */
static int read_number(const char **p, double *out) {
  const char *s = *p;
  double v = 0;
  int digits = 0;
  while (is_digit(*s)) {
    v = v * 10 + (*s - '0');
    s++;
    digits++;
  }
  if (*s == '.') {
    s++;
    double scale = 0.1;
    while (is_digit(*s)) {
      v += (*s - '0') * scale;
      scale /= 10;
      s++;
      digits++;
    }
  }
  if (digits == 0) return 0;
  *p = s;
  *out = v;
  return 1;
}

/* Read a unit at *p and return its size in ms, or 0 if there is none. */
static double read_unit(const char **p) {
  const char *s = *p;
  if (s[0] == 'm' && s[1] == 's') { *p = s + 2; return 1; }
  if (s[0] == 's') { *p = s + 1; return 1000; }
  if (s[0] == 'm') { *p = s + 1; return 60000; }
  if (s[0] == 'h') { *p = s + 1; return 3600000; }
  return 0;
}

int tk_duration_parse(const char *text, int64_t *ms, tk_err *err) {
  if (text == NULL || *text == '\0')
    return tk_err_set(err, TK_ESYNTAX, "invalid duration \"\": expected " DURATION_FORMS);
  if (text[0] == '-')
    return tk_err_set(err, TK_ERANGE, "invalid duration \"%s\": must not be negative", text);
  const char *p = text;
  double total = 0;
  int parts = 0;
  while (*p != '\0') {
    double v;
    if (!read_number(&p, &v))
      return tk_err_set(err, TK_ESYNTAX, "invalid duration \"%s\": expected " DURATION_FORMS, text);
    double unit = read_unit(&p);
    if (unit == 0) {
      /* A bare number is seconds, but only on its own. */
      if (parts == 0 && *p == '\0') unit = 1000;
      else
        return tk_err_set(err, TK_ESYNTAX, "invalid duration \"%s\": expected " DURATION_FORMS, text);
    }
    total += v * unit;
    parts++;
    if (total > DURATION_MAX_MS)
      return tk_err_set(err, TK_ERANGE, "invalid duration \"%s\": too large", text);
  }
  *ms = (int64_t)llround(total);
  return 0;
}

int tk_duration_from_seconds(double seconds, int64_t *ms, tk_err *err) {
  if (!isfinite(seconds) || seconds < 0)
    return tk_err_set(err, TK_ERANGE, "invalid duration %g: must be a finite number of seconds >= 0", seconds);
  double v = seconds * 1000.0;
  if (v > DURATION_MAX_MS)
    return tk_err_set(err, TK_ERANGE, "invalid duration %g s: too large", seconds);
  *ms = (int64_t)llround(v);
  return 0;
}

int tk_duration_format(int64_t ms, char *buf, size_t len) {
  const char *sign = "";
  uint64_t v;
  if (ms < 0) {
    sign = "-";
    v = (uint64_t)0 - (uint64_t)ms;
  } else {
    v = (uint64_t)ms;
  }
  if (v < 1000) return snprintf(buf, len, "%s%llums", sign, (unsigned long long)v);
  uint64_t h = v / 3600000, m = (v / 60000) % 60, s = (v / 1000) % 60, frac = v % 1000;
  char sec[32] = "";
  if (s != 0 || frac != 0) {
    if (frac == 0) snprintf(sec, sizeof sec, "%llus", (unsigned long long)s);
    else {
      /* Up to three decimals, trailing zeros dropped. */
      char f[8];
      snprintf(f, sizeof f, "%03llu", (unsigned long long)frac);
      for (int i = 2; i > 0 && f[i] == '0'; i--) f[i] = '\0';
      snprintf(sec, sizeof sec, "%llu.%ss", (unsigned long long)s, f);
    }
  }
  if (h > 0 && m == 0 && sec[0] == '\0')
    return snprintf(buf, len, "%s%lluh", sign, (unsigned long long)h);
  if (h > 0)
    return snprintf(buf, len, "%s%lluh%llum%s", sign, (unsigned long long)h,
                    (unsigned long long)m, sec);
  if (m > 0)
    return snprintf(buf, len, "%s%llum%s", sign, (unsigned long long)m, sec);
  return snprintf(buf, len, "%s%s", sign, sec);
}
