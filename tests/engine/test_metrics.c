/* Prometheus metrics (issue 13 part 2, DESIGN §11, docs/metrics.md): an
 * engine on a real SQLite store with the manual clock, its steps failing
 * and retrying; every render parsed back (the text format's rules checked
 * on every line) and its counts, bucket placements and sums asserted. Also
 * retries a budget deferred, the store-wide render, a fenced write and an
 * expired lease across two orchestrators, events the engine rarely emits
 * fed to the observer, and renders from another thread while an engine
 * runs on workers. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <tasker/metrics.h>

#include "common/engine_fixture.h"
#include "engine/metrics_internal.h"

/* ---- a small parser of the text exposition format ---------------------- */

enum { MAX_SAMPLES = 2048, MAX_FAMILIES = 64 };

typedef struct sample {
  char name[96];
  char key[192]; /* the labels but le, unescaped, "k=v,k=v" in order */
  char le[24];   /* the le label, or "" */
  double value;
} sample;

typedef struct parsed {
  int n, nf;
  sample s[MAX_SAMPLES];
  struct {
    char name[96];
    char type[16];
    int help;
  } f[MAX_FAMILIES];
  char error[256]; /* why the text is not valid; "" when it is */
} parsed;

static int bad(parsed *p, const char *line, const char *why) {
  snprintf(p->error, sizeof p->error, "%s: %.160s", why, line);
  return -1;
}

static int family(const parsed *p, const char *name) {
  for (int i = 0; i < p->nf; i++)
    if (strcmp(p->f[i].name, name) == 0) return i;
  return -1;
}

static int name_char(char c, int first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

/* A metric name at *s into out; advances *s. */
static int read_name(const char **s, char *out, size_t len) {
  size_t n = 0;
  if (!name_char(**s, 1)) return -1;
  while (name_char(**s, n == 0) && n + 1 < len) out[n++] = *(*s)++;
  out[n] = 0;
  return 0;
}

/* `{k="v",...}` at *s: the labels but le into key, le into le. */
static int read_labels(const char **s, char *key, size_t klen, char *le, size_t llen) {
  key[0] = le[0] = 0;
  if (**s != '{') return 0;
  (*s)++;
  while (**s != '}') {
    char k[64], v[128];
    size_t n = 0;
    if (read_name(s, k, sizeof k) || *(*s)++ != '=' || *(*s)++ != '"') return -1;
    while (**s != '"') {
      char c = *(*s)++;
      if (c == 0 || c == '\n') return -1;
      if (c == '\\') {
        c = *(*s)++;
        if (c == 'n') c = '\n';
        else if (c != '\\' && c != '"') return -1;
      }
      if (n + 1 < sizeof v) v[n++] = c;
    }
    v[n] = 0;
    (*s)++;
    if (strcmp(k, "le") == 0) snprintf(le, llen, "%.23s", v);
    else snprintf(key + strlen(key), klen - strlen(key), "%s%s=%s", key[0] ? "," : "", k, v);
    if (**s == ',') (*s)++;
    else if (**s != '}') return -1;
  }
  (*s)++;
  return 0;
}

/* The family a sample belongs to: its own name, or a histogram's. */
static int family_of(const parsed *p, const char *name) {
  int f = family(p, name);
  if (f >= 0) return strcmp(p->f[f].type, "histogram") == 0 ? -1 : f;
  static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(name), k = strlen(suffixes[i]);
    if (n <= k || strcmp(name + n - k, suffixes[i]) != 0) continue;
    char base[96];
    snprintf(base, sizeof base, "%.*s", (int)(n - k), name);
    f = family(p, base);
    if (f >= 0 && strcmp(p->f[f].type, "histogram") == 0) return f;
  }
  return -1;
}

static double le_value(const char *le) { return strcmp(le, "+Inf") == 0 ? INFINITY : atof(le); }

/* Every histogram series: buckets with ascending le, cumulative, ending
 * in +Inf equal to _count, and a _sum. */
static int check_histograms(parsed *p) {
  for (int i = 0; i < p->n; i++) {
    const sample *c = &p->s[i];
    size_t n = strlen(c->name);
    if (n < 6 || strcmp(c->name + n - 6, "_count") != 0) continue;
    int f = family_of(p, c->name);
    if (strcmp(p->f[f].type, "histogram") != 0) continue;
    char bucket[110], sum[110];
    snprintf(bucket, sizeof bucket, "%s_bucket", p->f[f].name);
    snprintf(sum, sizeof sum, "%s_sum", p->f[f].name);
    double last_le = -INFINITY, last = 0;
    int buckets = 0, sums = 0;
    for (int k = 0; k < p->n; k++) {
      const sample *b = &p->s[k];
      if (strcmp(b->key, c->key) != 0) continue;
      if (strcmp(b->name, sum) == 0) sums++;
      if (strcmp(b->name, bucket) != 0) continue;
      if (!b->le[0] || le_value(b->le) <= last_le || b->value < last)
        return bad(p, b->name, "buckets not ascending and cumulative");
      last_le = le_value(b->le);
      last = b->value;
      buckets++;
    }
    if (buckets == 0 || !isinf(last_le) || last != c->value || sums != 1)
      return bad(p, c->name, "no +Inf bucket equal to _count, or no single _sum");
  }
  return 0;
}

/* Parse `text` into p; -1 with p->error on the first thing the format
 * does not allow. */
static int parse(parsed *p, const char *text) {
  memset(p, 0, sizeof *p);
  const char *line = text;
  while (*line) {
    const char *end = strchr(line, '\n');
    if (end == NULL) return bad(p, line, "last line without a newline");
    char buf[512];
    snprintf(buf, sizeof buf, "%.*s", (int)(end - line), line);
    const char *s = buf;
    if (strncmp(s, "# HELP ", 7) == 0 || strncmp(s, "# TYPE ", 7) == 0) {
      int help = s[2] == 'H';
      char name[96];
      s += 7;
      if (read_name(&s, name, sizeof name) || *s++ != ' ') return bad(p, buf, "bad comment");
      int f = family(p, name);
      if (help) {
        if (f >= 0) return bad(p, buf, "second HELP");
        if (p->nf == MAX_FAMILIES) return bad(p, buf, "too many families");
        f = p->nf++;
        snprintf(p->f[f].name, sizeof p->f[f].name, "%s", name);
        p->f[f].help = 1;
      } else {
        if (f < 0 || p->f[f].type[0]) return bad(p, buf, "TYPE without HELP, or twice");
        if (strcmp(s, "counter") && strcmp(s, "gauge") && strcmp(s, "histogram"))
          return bad(p, buf, "unknown type");
        snprintf(p->f[f].type, sizeof p->f[f].type, "%s", s);
      }
    } else if (buf[0] == '#') {
      return bad(p, buf, "a comment of another kind");
    } else {
      if (p->n == MAX_SAMPLES) return bad(p, buf, "too many samples");
      sample *x = &p->s[p->n];
      if (read_name(&s, x->name, sizeof x->name) ||
          read_labels(&s, x->key, sizeof x->key, x->le, sizeof x->le) || *s++ != ' ')
        return bad(p, buf, "bad sample");
      char *rest;
      x->value = strtod(s, &rest);
      if (rest == s || *rest != 0) return bad(p, buf, "bad value");
      int f = family_of(p, x->name);
      if (f < 0 || !p->f[f].type[0]) return bad(p, buf, "a sample without HELP and TYPE");
      if (x->le[0] && strcmp(p->f[f].type, "histogram") != 0) return bad(p, buf, "le outside a histogram");
      p->n++;
    }
    line = end + 1;
  }
  return check_histograms(p);
}

/* The value of series name{key}, failing the test when it is absent. */
static double value(const parsed *p, const char *name, const char *key) {
  for (int i = 0; i < p->n; i++)
    if (strcmp(p->s[i].name, name) == 0 && strcmp(p->s[i].key, key) == 0) return p->s[i].value;
  fail_msg("no series %s{%s}", name, key);
  return 0;
}

/* Whether series name{key} is present. */
static int has(const parsed *p, const char *name, const char *key) {
  for (int i = 0; i < p->n; i++)
    if (strcmp(p->s[i].name, name) == 0 && strcmp(p->s[i].key, key) == 0) return 1;
  return 0;
}

/* A histogram's cumulative bucket le of series {key}. */
static double bucket(const parsed *p, const char *name, const char *key, const char *le) {
  char b[110];
  snprintf(b, sizeof b, "%s_bucket", name);
  for (int i = 0; i < p->n; i++)
    if (strcmp(p->s[i].name, b) == 0 && strcmp(p->s[i].key, key) == 0 &&
        strcmp(p->s[i].le, le) == 0)
      return p->s[i].value;
  fail_msg("no bucket %s{%s,le=%s}", name, key, le);
  return 0;
}

/* ms or us in seconds, as a render prints a sum; exact in a double for
 * the small values of these tests. */
#define SECONDS(ms) ((double)(ms) / 1000.0)

/* A render's text parsed (and freed), failing the test when not valid. */
static parsed *parsed_of(char *text, size_t len) {
  assert_int_equal(len, strlen(text));
  parsed *p = malloc(sizeof *p);
  assert_non_null(p);
  if (parse(p, text) != 0) fail_msg("%s", p->error);
  free(text);
  return p;
}

static parsed *render(tk_metrics *m) {
  char *text = NULL;
  size_t len = 0;
  tk_err err;
  assert_int_equal(tk_metrics_render(m, &text, &len, &err), 0);
  return parsed_of(text, len);
}

static parsed *render_store(efx *f) {
  char *text = NULL;
  size_t len = 0;
  tk_err err;
  assert_int_equal(tk_metrics_render_store(f->store, f->clock.now_ms, &text, &len, &err), 0);
  return parsed_of(text, len);
}

static tk_metrics *attached(tk_engine *e) {
  tk_metrics *m;
  tk_err err;
  assert_int_equal(tk_metrics_new(&m, &err), 0);
  assert_int_equal(tk_metrics_attach(m, e, &err), 0);
  return m;
}

/* ---- an engine with retries --------------------------------------------- */

static const char *const sets[] = {"backoff.base=2s", "backoff.jitter=none", NULL};

/* Three tasks on the manual clock: one failing twice (computed delays 2 s
 * and 4 s), one asking for 30 s (a server delay), one failing for good
 * after a 2 s retry. Every count, the buckets the delays land in and the
 * sums are exact. */
static void test_engine_with_retries(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  tk_metrics *m = attached(f->engine);
  efx_one_step(f, "twice", "{ kind = \"builtin\", name = \"fail\", times = 2 }",
               "{ max_attempts = 3 }");
  efx_one_step(f, "server", "{ kind = \"builtin\", name = \"fail\", times = 1, retry_after = \"30s\" }",
               "{ max_attempts = 3 }");
  efx_one_step(f, "never", "{ kind = \"builtin\", name = \"fail\" }", "{ max_attempts = 2 }");
  efx_submit(f, "twice", NULL);
  efx_submit(f, "server", NULL);
  efx_submit(f, "never", NULL);
  efx_drive(f, 50);
  parsed *p = render(m);

  assert_true(value(p, "tasker_step_attempts_total", "outcome=success") == 2);
  assert_true(value(p, "tasker_step_attempts_total", "outcome=failure") == 5);
  assert_true(value(p, "tasker_step_attempts_total", "outcome=timeout") == 0);
  assert_true(value(p, "tasker_step_attempts_total", "outcome=lease_expired") == 0);
  assert_false(has(p, "tasker_step_attempts_total", "outcome=other"));

  /* Computed: 2 s (twice, attempt 1), 4 s (twice, attempt 2), 2 s (never). */
  const char *bd = "tasker_backoff_delay_seconds";
  assert_true(bucket(p, bd, "source=computed", "1") == 0);
  assert_true(bucket(p, bd, "source=computed", "2") == 2); /* le is inclusive */
  assert_true(bucket(p, bd, "source=computed", "5") == 3);
  assert_true(bucket(p, bd, "source=computed", "+Inf") == 3);
  assert_true(value(p, "tasker_backoff_delay_seconds_sum", "source=computed") == 8.0);
  assert_true(value(p, "tasker_backoff_delay_seconds_count", "source=computed") == 3);
  assert_true(bucket(p, bd, "source=server", "10") == 0);
  assert_true(bucket(p, bd, "source=server", "30") == 1);
  assert_true(value(p, "tasker_backoff_delay_seconds_sum", "source=server") == 30.0);
  assert_true(value(p, "tasker_backoff_delay_seconds_count", "source=budget") == 0);
  assert_true(value(p, "tasker_backoff_delay_seconds_count", "source=in_call") == 0);

  /* The clock jumps to each due time: every handler starts on time. */
  assert_true(value(p, "tasker_ready_lateness_seconds_count", "") == 7);
  assert_true(bucket(p, "tasker_ready_lateness_seconds", "", "0.001") == 7);
  assert_true(value(p, "tasker_ready_lateness_seconds_sum", "") == 0);
  assert_true(value(p, "tasker_claim_duration_seconds_count", "") == 7);
  assert_true(value(p, "tasker_handler_duration_seconds_count", "") == 7);

  assert_true(value(p, "tasker_tasks_finished_total", "state=complete") == 2);
  assert_true(value(p, "tasker_tasks_finished_total", "state=error") == 1);
  assert_true(value(p, "tasker_retries_deferred_total", "") == 0);
  assert_true(value(p, "tasker_fenced_writes_total", "") == 0);
  assert_true(value(p, "tasker_lease_expired_total", "") == 0);
  assert_true(value(p, "tasker_steps_in_flight", "") == 0);

  /* The engine's own counters say the same. */
  tk_engine_stats st = tk_engine_stats_get(f->engine);
  assert_int_equal(st.completed, 2);
  assert_int_equal(st.retried, 4);
  assert_int_equal(st.claimed, 7);
  free(p);

  /* The store-wide view of the same store. */
  p = render_store(f);
  assert_true(value(p, "tasker_store_tasks", "state=complete") == 2);
  assert_true(value(p, "tasker_store_tasks", "state=error") == 1);
  assert_true(value(p, "tasker_store_tasks", "state=pending") == 0);
  assert_true(value(p, "tasker_store_steps", "state=complete") == 2);
  assert_true(value(p, "tasker_store_steps", "state=error") == 1);
  assert_true(value(p, "tasker_store_steps", "state=waiting_for_retry") == 0);
  /* Decisions' and maps' states (DESIGN §17) exist before any step is in
   * them, as every state's series does. */
  assert_true(value(p, "tasker_store_steps", "state=skipped") == 0);
  assert_true(value(p, "tasker_store_steps", "state=mapped") == 0);
  assert_true(value(p, "tasker_store_steps_ready", "") == 0);
  assert_true(value(p, "tasker_store_fenced_writes_total", "") == 0);
  /* No orchestrator's name among the store's: nothing is summed twice. */
  for (int i = 0; i < p->n; i++) assert_int_equal(strncmp(p->s[i].name, "tasker_store_", 13), 0);
  free(p);
  tk_engine_free(f->engine); /* before the metrics its observer points to */
  f->engine = NULL;
  tk_metrics_free(m);
}

/* A retry budget deferring retries (the case of test_retry_budget.c's
 * spreading): four steps fail three times; two retries keep their
 * computed 100 ms, six are deferred to 1000 ms after their failure (two),
 * 1900 ms (two) and 2000 ms (two), with source budget. */
static void test_budget_deferrals(void **state) {
  static const char *const budget_sets[] = {"backoff.jitter=none", "backoff.base=100ms",
                                            "backoff.multiplier=1", "budgets.api.ratio=0",
                                            "budgets.api.window=1s",
                                            "budgets.api.min_per_second=2", NULL};
  efx *f = *state = efx_new(budget_sets, "orch-1");
  tk_metrics *m = attached(f->engine);
  efx_one_step(f, "down", "{ kind = \"builtin\", name = \"fail\" }",
               "{ max_attempts = 3, budget = \"api\" }");
  for (int i = 0; i < 4; i++) efx_submit(f, "down", NULL);
  efx_drive(f, 40);
  parsed *p = render(m);
  const char *bd = "tasker_backoff_delay_seconds";
  assert_true(value(p, "tasker_retries_deferred_total", "") == 6);
  assert_true(bucket(p, bd, "source=budget", "0.5") == 0);
  assert_true(bucket(p, bd, "source=budget", "1") == 2);
  assert_true(bucket(p, bd, "source=budget", "2") == 6);
  assert_true(value(p, "tasker_backoff_delay_seconds_sum", "source=budget") == 9.8);
  assert_true(bucket(p, bd, "source=computed", "0.1") == 2);
  assert_true(value(p, "tasker_backoff_delay_seconds_count", "source=computed") == 2);
  assert_true(value(p, "tasker_step_attempts_total", "outcome=failure") == 12);
  assert_true(value(p, "tasker_tasks_finished_total", "state=error") == 4);
  /* Deferred or not, every retry started at its run_at. */
  assert_true(bucket(p, "tasker_ready_lateness_seconds", "", "0.001") == 12);
  free(p);
  tk_engine_free(f->engine);
  f->engine = NULL;
  tk_metrics_free(m);
}

/* The store-wide render of a store with work waiting: pending, ready,
 * waiting for a retry, and a step that is not ready yet. */
static void test_store_render(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  efx_one_step(f, "once", "{ kind = \"builtin\", name = \"fail\", times = 1 }",
               "{ max_attempts = 3 }");
  efx_template(f, "name = \"two\"\nversion = \"1\"\n" EFX_STEP("a") EFX_NOOP EFX_STEP("b") EFX_NOOP
                  "depends_on = [\"a\"]\n");
  efx_submit(f, "once", NULL);
  efx_tick(f); /* fails once: waiting for its retry in 2 s */
  efx_submit(f, "two", NULL);
  efx_submit(f, "two", NULL);
  parsed *p = render_store(f);
  assert_true(value(p, "tasker_store_tasks", "state=in_progress") +
                  value(p, "tasker_store_tasks", "state=pending") ==
              3);
  assert_true(value(p, "tasker_store_steps", "state=waiting_for_retry") == 1);
  assert_true(value(p, "tasker_store_steps", "state=pending") == 4);
  assert_true(value(p, "tasker_store_steps_ready", "") == 2); /* the two a's */
  assert_true(value(p, "tasker_store_steps", "state=resolved_manually") == 0);
  free(p);
  /* Two seconds later the retry is ready too. */
  f->clock.now_ms += 2000;
  p = render_store(f);
  assert_true(value(p, "tasker_store_steps_ready", "") == 3);
  free(p);
  /* It matches `tasker status --json` of the same moment. */
  char *status;
  tk_err err;
  assert_int_equal(tk_engine_status_json(f->store, f->clock.now_ms, &status, &err), 0);
  json_t *st = json_loads(status, 0, NULL);
  free(status);
  assert_int_equal(json_integer_value(json_object_get(st, "ready_now")), 3);
  json_decref(st);
}

/* ---- two orchestrators: a lease expires, a late write is fenced --------- */

typedef struct race {
  efx *f;
  tk_engine *b;
} race;

static void b_work(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)call, (void)ud;
  out->results = strdup("{}");
}

/* A's handler hangs past its lease, while B reaps it and runs the retry. */
static void a_hangs(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)call;
  race *r = ud;
  tk_err err;
  int64_t due;
  r->f->clock.now_ms += 10000;
  if (tk_engine_tick(r->b, &due, &err) != 0) fail_msg("B: %s", err.msg);
  r->f->clock.now_ms = due;
  if (tk_engine_tick(r->b, &due, &err) != 0) fail_msg("B: %s", err.msg);
  out->results = strdup("{}");
}

static const char *const lease_sets[] = {"backoff.base=3s", "backoff.jitter=none",
                                         "engine.lease=10s", "engine.heartbeat=2s", NULL};

static void test_lease_expired_and_fenced(void **state) {
  efx *f = *state = efx_new(lease_sets, "orch-A");
  tk_store *second;
  tk_err err;
  assert_int_equal(tk_store_open(f->url, &second, &err), 0);
  race r = {f, efx_engine_on(f, second, "orch-B")};
  tk_metrics *ma = attached(f->engine), *mb = attached(r.b);
  assert_int_equal(tk_metrics_attach(ma, r.b, &err), TK_EINVAL); /* one engine each */
  assert_int_equal(tk_engine_register(f->engine, "work", a_hangs, &r, NULL), 0);
  assert_int_equal(tk_engine_register(r.b, "work", b_work, NULL, NULL), 0);
  efx_one_step(f, "one", "{ kind = \"function\", name = \"work\" }", "{ max_attempts = 3 }");
  efx_submit(f, "one", NULL);
  efx_tick(f);

  parsed *a = render(ma), *b = render(mb), *s = render_store(f);
  /* A: one claim, its outcome refused; no attempt of A's was recorded. */
  assert_true(value(a, "tasker_fenced_writes_total", "") == 1);
  assert_true(value(a, "tasker_claim_duration_seconds_count", "") == 1);
  assert_true(value(a, "tasker_step_attempts_total", "outcome=success") == 0);
  assert_true(value(a, "tasker_lease_expired_total", "") == 0);
  /* B: the expired lease (an attempt recorded as lease_expired, retried
   * after the computed 3 s), then the retry that succeeded. */
  assert_true(value(b, "tasker_lease_expired_total", "") == 1);
  assert_true(value(b, "tasker_step_attempts_total", "outcome=lease_expired") == 1);
  assert_true(value(b, "tasker_step_attempts_total", "outcome=success") == 1);
  assert_true(bucket(b, "tasker_backoff_delay_seconds", "source=computed", "2") == 0);
  assert_true(bucket(b, "tasker_backoff_delay_seconds", "source=computed", "5") == 1);
  assert_true(value(b, "tasker_backoff_delay_seconds_sum", "source=computed") == 3.0);
  /* The reaped attempt never ran on B: no lateness or duration from it. */
  assert_true(value(b, "tasker_ready_lateness_seconds_count", "") == 1);
  assert_true(value(b, "tasker_handler_duration_seconds_count", "") == 1);
  assert_true(value(b, "tasker_tasks_finished_total", "state=complete") == 1);
  assert_true(value(b, "tasker_fenced_writes_total", "") == 0);
  /* The store counts the fenced write once, under its own name. */
  assert_true(value(s, "tasker_store_fenced_writes_total", "") == 1);
  /* And the lease B's reaper expired, in B's transaction. */
  assert_true(value(s, "tasker_store_lease_expired_total", "") == 1);
  assert_true(value(s, "tasker_store_tasks", "state=complete") == 1);
  free(a);
  free(b);
  free(s);
  tk_engine_free(r.b);
  tk_store_close(second);
  tk_engine_free(f->engine);
  f->engine = NULL;
  tk_metrics_free(ma);
  tk_metrics_free(mb);
}

/* ---- events fed to the observer ----------------------------------------- */

static void feed(tk_metrics *m, tk_event ev) { tk_observer_metrics.on_event(&ev, m); }

/* Events a small run does not produce, fed directly: lateness and
 * durations on bucket bounds and past the last one, negative lateness,
 * every delay source, an unknown outcome, batch items, a deferral. */
static void test_observer_fed_directly(void **state) {
  (void)state;
  tk_metrics *m;
  tk_err err;
  assert_int_equal(tk_metrics_new(&m, &err), 0);
  tk_event ev = {.type = TK_EV_STEP_COMPLETED, .has_late_ms = 1, .late_ms = 5,
                 .has_duration_us = 1, .duration_us = 1000};
  feed(m, ev); /* late 5 ms (le 0.005), ran 1 ms (le 0.001) */
  ev.late_ms = -3; /* started early: counted as on time */
  ev.duration_us = 4000000000LL; /* past 3600 s: +Inf only */
  feed(m, ev);
  ev = (tk_event){.type = TK_EV_STEP_FAILED, .has_late_ms = 1, .late_ms = 1};
  ev.u.failed.outcome = "timeout";
  feed(m, ev);
  ev.u.failed.outcome = "something new";
  ev.type = TK_EV_STEP_EXHAUSTED;
  feed(m, ev);
  for (int s = 0; s < 4; s++) {
    ev = (tk_event){.type = TK_EV_STEP_RETRY_SCHEDULED};
    ev.u.retry.source = (tk_delay_source)s;
    ev.u.retry.delay_ms = 100000000; /* 27.8 h: past the last bound */
    feed(m, ev);
  }
  ev = (tk_event){.type = TK_EV_STEP_CLAIMED};
  ev.u.claimed.claim_us = 100; /* on the first bound */
  feed(m, ev);
  ev.u.claimed.claim_us = 101;
  feed(m, ev);
  feed(m, (tk_event){.type = TK_EV_STEP_RETRY_DEFERRED});
  feed(m, (tk_event){.type = TK_EV_ITEM_GAVE_UP});
  feed(m, (tk_event){.type = TK_EV_ITEM_GAVE_UP});
  feed(m, (tk_event){.type = TK_EV_STEP_FENCED_OUT, .has_duration_us = 1});
  feed(m, (tk_event){.type = TK_EV_STEP_LEASE_EXPIRED});
  feed(m, (tk_event){.type = TK_EV_TASK_CREATED}); /* not of interest: ignored */
  assert_false(tk_observer_metrics.interest & TK_EV_BIT(TK_EV_TASK_CREATED));
  ev = (tk_event){.type = TK_EV_TASK_FAILED};
  ev.u.finished.state = "cancelled";
  feed(m, ev);

  parsed *p = render(m);
  assert_true(value(p, "tasker_step_attempts_total", "outcome=success") == 2);
  assert_true(value(p, "tasker_step_attempts_total", "outcome=timeout") == 1);
  assert_true(value(p, "tasker_step_attempts_total", "outcome=other") == 1);
  assert_true(bucket(p, "tasker_ready_lateness_seconds", "", "0.001") == 3); /* -3, 1, 1 */
  assert_true(bucket(p, "tasker_ready_lateness_seconds", "", "0.005") == 4);
  assert_true(value(p, "tasker_ready_lateness_seconds_sum", "") == SECONDS(7));
  assert_true(bucket(p, "tasker_handler_duration_seconds", "", "0.001") == 1);
  assert_true(bucket(p, "tasker_handler_duration_seconds", "", "3600") == 1);
  assert_true(value(p, "tasker_handler_duration_seconds_count", "") == 2);
  assert_true(value(p, "tasker_handler_duration_seconds_sum", "") == 4000.001);
  const char *src[] = {"source=computed", "source=server", "source=in_call", "source=budget"};
  for (int s = 0; s < 4; s++) {
    assert_true(bucket(p, "tasker_backoff_delay_seconds", src[s], "86400") == 0);
    assert_true(bucket(p, "tasker_backoff_delay_seconds", src[s], "+Inf") == 1);
    assert_true(value(p, "tasker_backoff_delay_seconds_sum", src[s]) == 100000.0);
  }
  assert_true(bucket(p, "tasker_claim_duration_seconds", "", "0.0001") == 1);
  assert_true(bucket(p, "tasker_claim_duration_seconds", "", "0.00025") == 2);
  assert_true(value(p, "tasker_claim_duration_seconds_sum", "") == 0.000201);
  assert_true(value(p, "tasker_retries_deferred_total", "") == 1);
  assert_true(value(p, "tasker_items_gave_up_total", "") == 2);
  assert_true(value(p, "tasker_fenced_writes_total", "") == 1);
  assert_true(value(p, "tasker_lease_expired_total", "") == 1);
  assert_true(value(p, "tasker_tasks_finished_total", "state=other") == 1);
  assert_true(value(p, "tasker_tasks_finished_total", "state=complete") == 0);
  /* No engine attached: no in-flight gauge. */
  assert_false(has(p, "tasker_steps_in_flight", ""));
  free(p);
  tk_metrics_free(m);
}

/* Label values and HELP text escaped as the format requires. */
static void test_escaping(void **state) {
  (void)state;
  tk__buf b = {0};
  tk__prom_family(&b, "x_total", "counter", "a \\ b\nc \"q\"");
  tk__prom_int(&b, "x_total", "state", "a\"b\\c\nd", 3);
  char *text = tk__buf_take(&b);
  assert_string_equal(text, "# HELP x_total a \\\\ b\\nc \"q\"\n"
                            "# TYPE x_total counter\n"
                            "x_total{state=\"a\\\"b\\\\c\\nd\"} 3\n");
  parsed *p = malloc(sizeof *p);
  assert_int_equal(parse(p, text), 0);
  assert_true(value(p, "x_total", "state=a\"b\\c\nd") == 3);
  /* The parser refuses what the format does not allow. */
  assert_int_equal(parse(p, "x_total 1\n"), -1);                              /* no HELP/TYPE */
  assert_int_equal(parse(p, "# HELP y h\n# TYPE y gauge\ny{a=\"b} 1\n"), -1); /* open quote */
  assert_int_equal(parse(p, "# HELP y h\n# TYPE y gauge\ny 1 2 3\n"), -1);
  assert_int_equal(parse(p, "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\n"
                            "h_bucket{le=\"+Inf\"} 1\nh_sum 0\nh_count 1\n"),
                   -1); /* not cumulative */
  assert_int_equal(parse(p, "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
                            "h_sum 0\nh_count 1\n"),
                   -1); /* no +Inf */
  free(p);
  free(text);
}

/* ---- renders from another thread while an engine runs ------------------- */

typedef struct scraper {
  tk_metrics *m;
  atomic_int done;
  int renders;
  double last_success;
  char error[256];
} scraper;

/* Render and parse until told to stop: every render valid, the counter
 * never going back. */
static void *scrape(void *ud) {
  scraper *s = ud;
  parsed *p = malloc(sizeof *p);
  while (!atomic_load(&s->done) && !s->error[0]) {
    char *text = NULL;
    tk_err err;
    if (tk_metrics_render(s->m, &text, NULL, &err) != 0) {
      snprintf(s->error, sizeof s->error, "render: %.200s", err.msg);
      break;
    }
    if (parse(p, text) != 0) snprintf(s->error, sizeof s->error, "%s", p->error);
    for (int i = 0; i < p->n && !s->error[0]; i++)
      if (strcmp(p->s[i].name, "tasker_step_attempts_total") == 0 &&
          strcmp(p->s[i].key, "outcome=success") == 0) {
        if (p->s[i].value < s->last_success) snprintf(s->error, sizeof s->error, "went back");
        s->last_success = p->s[i].value;
      }
    free(text);
    s->renders++;
  }
  free(p);
  return NULL;
}

static void test_render_while_running(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  efx_one_step(f, "one", "{ kind = \"builtin\", name = \"noop\" }", "{ max_attempts = 1 }");
  enum { N = 300 };
  for (int i = 0; i < N; i++) efx_submit(f, "one", NULL);
  tk_engine *e = efx_workers_engine(f, "w", 2, NULL, NULL);
  tk_err err;
  tk_metrics *m = attached(e);
  scraper s = {.m = m};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, scrape, &s), 0);
  int rc = tk_engine_run(e, 1, &err);
  atomic_store(&s.done, 1);
  pthread_join(t, NULL);
  assert_int_equal(rc, 0);
  if (s.error[0]) fail_msg("%s", s.error);
  assert_true(s.renders > 0);
  parsed *p = render(m);
  assert_true(value(p, "tasker_step_attempts_total", "outcome=success") == N);
  assert_true(value(p, "tasker_tasks_finished_total", "state=complete") == N);
  assert_true(value(p, "tasker_claim_duration_seconds_count", "") == N);
  assert_true(value(p, "tasker_handler_duration_seconds_count", "") == N);
  assert_true(value(p, "tasker_ready_lateness_seconds_count", "") == N);
  assert_true(value(p, "tasker_steps_in_flight", "") == 0);
  free(p);
  efx_workers_end(f, e);
  tk_metrics_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_engine_with_retries, efx_teardown),
      cmocka_unit_test_teardown(test_budget_deferrals, efx_teardown),
      cmocka_unit_test_teardown(test_store_render, efx_teardown),
      cmocka_unit_test_teardown(test_lease_expired_and_fenced, efx_teardown),
      cmocka_unit_test(test_observer_fed_directly),
      cmocka_unit_test(test_escaping),
      cmocka_unit_test_teardown(test_render_while_running, efx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
