/* The Prometheus text exposition format 0.0.4: families, samples with
 * escaped label values, histograms. */
#include "engine/metrics_internal.h"

#include <stdlib.h>

/* Escape per the format: in HELP, backslash and newline; in a label
 * value, also the double quote. */
static void escaped(tk__buf *b, const char *s, int quote) {
  for (; *s; s++) {
    if (*s == '\\') tk__buf_adds(b, "\\\\");
    else if (*s == '\n') tk__buf_adds(b, "\\n");
    else if (*s == '"' && quote) tk__buf_adds(b, "\\\"");
    else tk__buf_addc(b, *s);
  }
}

void tk__prom_family(tk__buf *b, const char *name, const char *type, const char *help) {
  tk__buf_addf(b, "# HELP %s ", name);
  escaped(b, help, 0);
  tk__buf_addf(b, "\n# TYPE %s %s\n", name, type);
}

/* name{label="value" (with `le` after it when given)} */
static void series(tk__buf *b, const char *name, const char *suffix, const char *label,
                   const char *value, const char *le) {
  tk__buf_adds(b, name);
  tk__buf_adds(b, suffix);
  if (label == NULL && le == NULL) return;
  tk__buf_addc(b, '{');
  if (label != NULL) {
    tk__buf_addf(b, "%s=\"", label);
    escaped(b, value, 1);
    tk__buf_addc(b, '"');
  }
  if (le != NULL) tk__buf_addf(b, "%sle=\"%s\"", label ? "," : "", le);
  tk__buf_addc(b, '}');
}

void tk__prom_int(tk__buf *b, const char *name, const char *label, const char *value,
                  int64_t v) {
  series(b, name, "", label, value, NULL);
  tk__buf_addf(b, " %lld\n", (long long)v);
}

void tk__prom_float(tk__buf *b, const char *name, const char *label, const char *value,
                    double v) {
  series(b, name, "", label, value, NULL);
  tk__buf_addf(b, " %.15g\n", v);
}

void tk__prom_float2(tk__buf *b, const char *name, const char *l1, const char *v1,
                     const char *l2, const char *v2, double v) {
  tk__buf_addf(b, "%s{%s=\"", name, l1);
  escaped(b, v1, 1);
  tk__buf_addf(b, "\",%s=\"", l2);
  escaped(b, v2, 1);
  tk__buf_addf(b, "\"} %.15g\n", v);
}

void tk__prom_histo(tk__buf *b, const char *name, const char *label, const char *value,
                    const tk__histo *h) {
  const tk__buckets *bk = h->buckets;
  long long total = 0;
  for (int i = 0; i <= bk->n; i++) {
    total += atomic_load_explicit(&h->counts[i], memory_order_relaxed);
    series(b, name, "_bucket", label, value, i < bk->n ? bk->b[i].le : "+Inf");
    tk__buf_addf(b, " %lld\n", total);
  }
  long long sum = atomic_load_explicit(&h->sum_us, memory_order_relaxed);
  series(b, name, "_sum", label, value, NULL);
  tk__buf_addf(b, " %lld.%06lld\n", sum / 1000000, sum % 1000000);
  series(b, name, "_count", label, value, NULL);
  tk__buf_addf(b, " %lld\n", total);
}

int tk__prom_take(tk__buf *b, char **text, size_t *len, tk_err *err) {
  size_t n = b->len;
  *text = tk__buf_take(b);
  if (*text == NULL) return tk_err_set(err, TK_ENOMEM, "metrics: out of memory rendering");
  if (len) *len = n;
  return 0;
}
