/* "Did you mean": the known name nearest to a misspelt one. */
#include "config/internal.h"

#include <stdio.h>
#include <string.h>

#define WORD_MAX 64

static size_t min3(size_t a, size_t b, size_t c) {
  size_t m = a < b ? a : b;
  return m < c ? m : c;
}

/* Optimal string alignment distance: insertions, deletions, substitutions
 * and swaps of two adjacent characters each cost 1, since "max_dealy" is
 * one slip of the fingers, not two. Words longer than WORD_MAX are never
 * close to anything we know. */
static size_t distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > WORD_MAX || m > WORD_MAX) return (size_t)-1;
  size_t d[WORD_MAX + 1][WORD_MAX + 1];
  for (size_t i = 0; i <= n; i++) d[i][0] = i;
  for (size_t j = 0; j <= m; j++) d[0][j] = j;
  for (size_t i = 1; i <= n; i++) {
    for (size_t j = 1; j <= m; j++) {
      size_t cost = a[i - 1] != b[j - 1];
      d[i][j] = min3(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          d[i - 2][j - 2] + 1 < d[i][j])
        d[i][j] = d[i - 2][j - 2] + 1;
    }
  }
  return d[n][m];
}

const char *tk__suggest(const char *word, const char *const *cands, size_t n) {
  /* A third of the word may be wrong, at least one character: close enough
   * to be a typo, far enough that "db" does not suggest "base". */
  size_t limit = strlen(word) / 3;
  if (limit < 1) limit = 1;
  const char *best = NULL;
  size_t best_d = limit + 1;
  for (size_t i = 0; i < n; i++) {
    size_t d = distance(word, cands[i]);
    if (d < best_d) {
      best = cands[i];
      best_d = d;
    }
  }
  return best;
}

void tk__unknown_key(char *buf, size_t len, const char *path, const char *name,
                     const char *const *cands, size_t n) {
  const char *guess = tk__suggest(name, cands, n);
  const char *dot = path && *path ? "." : "";
  if (path == NULL) path = "";
  if (guess != NULL) {
    snprintf(buf, len, "unknown key \"%s%s%s\" (did you mean \"%s\"?)", path, dot, name, guess);
    return;
  }
  int used = snprintf(buf, len, "unknown key \"%s%s%s\" (known keys: ", path, dot, name);
  for (size_t i = 0; i < n && used >= 0 && (size_t)used < len; i++)
    used += snprintf(buf + used, len - (size_t)used, "%s%s", i ? ", " : "", cands[i]);
  if (used >= 0 && (size_t)used < len) snprintf(buf + used, len - (size_t)used, ")");
}
