/* The builtin handlers, for examples, tests and benchmarks: noop, sleep,
 * fail, flaky, and batch (a stand-in for a service that accepts some items
 * of a batch and refuses others, by a fixed rule, so that tests know each
 * item's exact history); and choose, the declarative chooser of a decision
 * step (DESIGN §17). */
#include "handlers/handler.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <tasker/duration.h>
#include <tasker/rand.h>

void tk__handler_fail(tk_handler_result *out, tk_handler_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->error, sizeof out->error, fmt, ap);
  va_end(ap);
  out->status = status;
}

const char *tk__quote_start(const char *s, size_t len, size_t max, int keep_utf8, char *buf,
                            size_t size) {
  size_t o = 0, i = 0;
  buf[o++] = '"';
  for (; i < len && i < max && o + 6 < size; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') o += (size_t)snprintf(buf + o, size - o, "\\%c", c);
    else if (c == '\n') o += (size_t)snprintf(buf + o, size - o, "\\n");
    else if (c < 0x20 || c == 0x7f || (c > 0x7f && !keep_utf8))
      o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
    else buf[o++] = (char)c;
  }
  snprintf(buf + o, size - o, "\"%s", i < len ? "..." : "");
  return buf;
}

int tk__hint_from_json(json_t *v, int64_t *ms) {
  if (json_is_string(v)) return tk_duration_parse(json_string_value(v), ms, NULL) ? TK_EINVAL : 0;
  if (json_is_number(v))
    return tk_duration_from_seconds(json_number_value(v), ms, NULL) ? TK_EINVAL : 0;
  return TK_EINVAL;
}

/* ---- template time --------------------------------------------------------- */

static const char *const names[] = {"noop", "sleep", "fail", "flaky", "batch", "choose", NULL};

static const tk__key keys[] = {
    TK__HANDLER_COMMON_KEYS,
    {.name = "name", .kind = TK__K_CHOICE, .choices = names,
     .allowed = "noop, sleep, fail, flaky, batch or choose",
     .missing = "a builtin handler needs a name (noop, sleep, fail, flaky, batch or choose)"},
    /* sleep */
    {.name = "duration", .kind = TK__K_DURATION, .json = "duration_ms", .min = 0,
     .max = INT64_MAX, .allowed = "a duration >= 0"},
    /* fail */
    {.name = "times", .kind = TK__K_INT, .min = 0, .max = 1000000000,
     .allowed = "an integer from 0 to 1000000000"},
    {.name = "retry_after", .kind = TK__K_DURATION, .json = "retry_after_ms", .min = 0,
     .max = INT64_MAX, .allowed = "a duration >= 0"},
    {.name = "permanent", .kind = TK__K_BOOL},
    /* flaky */
    {.name = "probability", .kind = TK__K_NUMBER, .fmin = 0, .fmax = 1,
     .allowed = "a number from 0 to 1"},
    {.name = "seed", .kind = TK__K_INT, .min = 0, .max = INT64_MAX,
     .allowed = "an integer from 0 to 9223372036854775807"},
    /* batch (docs/batch.md) */
    {.name = "reject_every", .kind = TK__K_INT, .min = 1, .max = INT32_MAX,
     .allowed = "an integer from 1 to 2147483647"},
    {.name = "reject_times", .kind = TK__K_INT, .min = 0, .max = INT32_MAX,
     .allowed = "an integer from 0 to 2147483647"},
    {.name = "poison", .kind = TK__K_STRINGS, .min = 0, .allowed = "an array of item keys"},
    /* choose (docs/handlers.md): the value looked up, the branches by its
     * text, the branches when no case matches. That the names are the
     * step's branches is checked with the whole template (workflow/). */
    {.name = "value", .kind = TK__K_STRING,
     .allowed = "one placeholder such as \"{{parents.score.risk}}\""},
    {.name = "cases", .kind = TK__K_OTHER},
    {.name = "default", .kind = TK__K_STRINGS, .min = 0, .allowed = "an array of step names"},
};

static const tk__schema schema = {"builtin", keys, sizeof keys / sizeof keys[0]};

/* choose's cases, a table of value texts to arrays of step names, into
 * spec's "cases". */
static int read_cases(const tk__spec_where *w, const tk_toml_value *cases, json_t *spec) {
  static const tk__key branches = {.kind = TK__K_STRINGS, .min = 0,
                                   .allowed = "an array of step names"};
  tk__complaint why;
  if (tk__expect_table(cases, "a table of values to arrays of step names, such as "
                              "{ high = [\"review\"] }",
                       &why))
    return tk__spec_refuse(w, "cases", &why);
  json_t *out = json_object();
  if (out == NULL || json_object_set_new(spec, "cases", out) != 0)
    return tk_err_set(w->err, TK_ENOMEM, "out of memory reading %s", w->file);
  for (size_t i = 0; i < tk_toml_table_len(cases); i++) {
    const tk_toml_entry *e = tk_toml_table_at(cases, i);
    json_t *names = NULL;
    int rc = tk__convert_json(&branches, e->value, &names, &why);
    if (rc == TK_ECONFIG) {
      char key[160];
      snprintf(key, sizeof key, "cases.%s", e->key);
      return tk__spec_refuse(w, key, &why);
    }
    if (rc != 0 || json_object_set_new(out, e->key, names) != 0)
      return tk_err_set(w->err, TK_ENOMEM, "out of memory reading %s", w->file);
  }
  return 0;
}

/* The schema, then what depends on the name: sleep needs a duration,
 * choose a value and cases, and batch runs in batch steps and only it
 * does. */
static int validate(const tk__handler_site *site, const tk_toml_value *table, json_t *spec) {
  const tk__spec_where *w = &site->where;
  int rc = tk__spec_read(w, &schema, table, spec);
  if (rc) return rc;
  const char *name = json_string_value(json_object_get(spec, "name"));
  if (strcmp(name, "sleep") == 0 && json_object_get(spec, "duration_ms") == NULL)
    return tk__spec_fail(w, table, "duration", "missing: the sleep builtin needs a duration");
  if (strcmp(name, "choose") == 0) {
    if (json_object_get(spec, "value") == NULL)
      return tk__spec_fail(w, table, "value",
                           "missing: the choose builtin needs value = \"{{...}}\", the value "
                           "whose text picks a case");
    const tk_toml_value *cases = tk_toml_get(table, "cases");
    if (cases == NULL)
      return tk__spec_fail(w, table, "cases",
                           "missing: the choose builtin needs cases = { VALUE = [\"BRANCH\", "
                           "...] }");
    if ((rc = read_cases(w, cases, spec))) return rc;
  }
  int batch = strcmp(name, "batch") == 0;
  if (batch && site->batch == NULL)
    return tk__spec_fail(w, tk_toml_get(table, "name"), "name",
                         "the builtin \"batch\" runs only in a batch step: add "
                         "batch = { items_from = \"KEY\" }");
  if (!batch && site->batch != NULL) {
    tk__spec_where step = {w->file, site->step, w->err};
    return tk__spec_fail(&step, site->batch, "batch",
                         "the builtin \"%s\" does not take batches: use the builtin \"batch\" or "
                         "a function handler (tk_engine_register_batch)",
                         name);
  }
  return 0;
}

/* ---- run time ------------------------------------------------------------- */

json_int_t tk__spec_int(json_t *spec, const char *key, json_int_t dflt) {
  json_t *v = json_object_get(spec, key);
  return json_is_integer(v) ? json_integer_value(v) : dflt;
}

/* noop: succeeds without results. */
static void run_noop(const tk__handler_step *step, const tk_handler_call *call,
                     tk_handler_result *out) {
  (void)step, (void)call, (void)out;
}

/* sleep: honours the step's deadline, failing as a timeout past it. */
static void run_sleep(const tk__handler_step *step, const tk_handler_call *call,
                      tk_handler_result *out) {
  int64_t ms = tk__spec_int(step->spec, "duration_ms", 0);
  int64_t now = tk_clock_now(step->clock);
  if (call->deadline_ms > 0 && now + ms > call->deadline_ms) {
    tk_clock_sleep(step->clock, call->deadline_ms - now);
    char d[32];
    tk_duration_format(call->deadline_ms - now, d, sizeof d);
    tk__handler_fail(out, TK_HANDLER_RETRY, "timed out after %s", d);
    out->timed_out = 1;
    return;
  }
  tk_clock_sleep(step->clock, ms);
}

/* fail: the first `times` attempts fail (all of them without `times`). */
static void run_fail(const tk__handler_step *step, const tk_handler_call *call,
                     tk_handler_result *out) {
  json_int_t times = tk__spec_int(step->spec, "times", -1);
  if (times >= 0 && call->attempt > times) return;
  tk_handler_status status = json_is_true(json_object_get(step->spec, "permanent"))
                                 ? TK_HANDLER_PERMANENT
                                 : TK_HANDLER_RETRY;
  if (times >= 0)
    tk__handler_fail(out, status, "builtin fail: failing attempt %d of the first %lld on purpose",
                     call->attempt, (long long)times);
  else
    tk__handler_fail(out, status, "builtin fail: failing every attempt on purpose (attempt %d)",
                     call->attempt);
  out->retry_after_ms = tk__spec_int(step->spec, "retry_after_ms", -1);
}

/* flaky: fails with the given probability, drawn from a generator seeded
 * by (seed, task, step, attempt) so a run can be reproduced. */
static void run_flaky(const tk__handler_step *step, const tk_handler_call *call,
                      tk_handler_result *out) {
  json_t *pv = json_object_get(step->spec, "probability");
  double p = json_is_number(pv) ? json_number_value(pv) : 0.5;
  uint64_t seed = (uint64_t)tk__spec_int(step->spec, "seed", 0);
  seed ^= (uint64_t)call->task_id * 0x9e3779b97f4a7c15ULL;
  for (const char *s = call->step; *s; s++) seed = (seed ^ (unsigned char)*s) * 1099511628211ULL;
  seed ^= (uint64_t)call->attempt << 32;
  tk_rand r;
  tk_rand_seed(&r, seed);
  if (tk_rand_unit(&r) < p)
    tk__handler_fail(out, TK_HANDLER_RETRY, "builtin flaky: failed (probability %g)", p);
}

/* batch outside a batch step (templates refuse it; a stored spec may not). */
static void run_batch_alone(const tk__handler_step *step, const tk_handler_call *call,
                            tk_handler_result *out) {
  (void)step, (void)call;
  tk__handler_fail(out, TK_HANDLER_PERMANENT,
                   "builtin batch runs only in a batch step (batch = { items_from = ... })");
}

/* choose: the engine runs it as tk__choose_kind (builtin_choose.c), which
 * takes the step's input; a caller of this kind's run gets the same. */
static void run_choose(const tk__handler_step *step, const tk_handler_call *call,
                       tk_handler_result *out) {
  tk__choose_kind.run(step, call, out);
}

/* Each builtin's run, by name (the order of `names`). */
static void (*const runs[])(const tk__handler_step *, const tk_handler_call *,
                            tk_handler_result *) = {run_noop,  run_sleep,       run_fail,
                                                    run_flaky, run_batch_alone, run_choose};
_Static_assert(sizeof runs / sizeof runs[0] == sizeof names / sizeof names[0] - 1,
               "a run for every builtin name");

/* One attempt: the named builtin's run. */
static void run(const tk__handler_step *step, const tk_handler_call *call,
                tk_handler_result *out) {
  const char *name = json_string_value(json_object_get(step->spec, "name"));
  for (size_t i = 0; name && names[i]; i++)
    if (strcmp(name, names[i]) == 0) {
      runs[i](step, call, out);
      return;
    }
  tk__handler_fail(out, TK_HANDLER_PERMANENT, "unknown builtin handler \"%s\"", name ? name : "");
}

/* Whether `key` is listed in the poison array. */
static int is_poison(json_t *poison, const char *key) {
  size_t i;
  json_t *v;
  json_array_foreach(poison, i, v) {
    if (strcmp(json_string_value(v), key) == 0) return 1;
  }
  return 0;
}

/* batch: acks or rejects each offered item by the rule in the spec
 * (reject_every, reject_times, poison, retry_after); deterministic. */
static void run_batch(const tk__handler_step *step, const tk_batch_call *call,
                      tk_item_report *reports, tk_handler_result *out) {
  json_t *spec = step->spec;
  int64_t every = tk__spec_int(spec, "reject_every", 0);
  int64_t times = tk__spec_int(spec, "reject_times", 1);
  json_t *poison = json_object_get(spec, "poison");
  static const char poisoned[] = "builtin batch: poison item, always rejected";
  static const char on_purpose[] = "builtin batch: rejected on purpose (reject_every/reject_times)";
  int rejected = 0;
  for (size_t i = 0; i < call->n; i++) {
    const tk_batch_item *it = &call->items[i];
    /* Every `every`-th item (the every-th, the 2·every-th, ...) is refused
     * on its first `times` deliveries; a poison item always. The reasons
     * are static, so they outlive the call as the API requires. */
    if (poison != NULL && is_poison(poison, it->key)) {
      reports[i] = (tk_item_report){TK_ITEM_REJECTED, poisoned};
      rejected++;
    } else if (every > 0 && (it->index + 1) % every == 0 && it->attempt <= times) {
      reports[i] = (tk_item_report){TK_ITEM_REJECTED, on_purpose};
      rejected++;
    } else {
      reports[i] = (tk_item_report){TK_ITEM_ACKED, NULL};
    }
  }
  /* Like a throttling service, ask for a delay only when something was
   * refused. */
  json_t *hint = json_object_get(spec, "retry_after_ms");
  if (rejected > 0 && json_is_integer(hint)) out->retry_after_ms = json_integer_value(hint);
}

const tk__handler_kind tk__builtin_kind = {
    .version = TK__HANDLER_KIND_VERSION,
    .name = "builtin",
    .takes_input = 0,
    .validate = validate,
    .run = run,
    .run_batch = run_batch,
};
