/* Configuration layering: defaults -> file -> overlay -> --set, profile
 * inheritance from the effective default, value forms, origins, and the
 * example configuration. Runs with cwd = repo root. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tasker/config.h>

#define LAYERS "tests/config/fixtures/layers/tasker.toml"
#define CI "tests/config/fixtures/layers/environments/ci.toml"
#define EXAMPLE "examples/config/tasker.toml"

/* Load or fail the test with the loader's message. */
static tk_config *load(const char *path, const char *env, const char *const *sets, int nsets) {
  tk_config_source src = {path, NULL, env, sets, nsets};
  tk_config *c = NULL;
  tk_err err;
  int rc = tk_config_load(&src, &c, &err);
  if (rc != 0) fail_msg("tk_config_load: %s", err.msg);
  return c;
}

static const tk_config_setting *find(const tk_config *c, const char *key) {
  const tk_config_setting *s = tk_config_find(c, key);
  if (s == NULL) fail_msg("no setting %s", key);
  return s;
}

/* Where `key` came from, as `config show` prints it. */
static void assert_origin(const tk_config *c, const char *key, const char *want) {
  char buf[256];
  tk_config_origin_format(&find(c, key)->origin, buf, sizeof buf);
  assert_string_equal(buf, want);
}

static void defaults_only(void **state) {
  (void)state;
  tk_config *c = NULL;
  assert_int_equal(tk_config_load(NULL, &c, NULL), 0);
  tk_backoff_policy want;
  tk_backoff_policy_default(&want);
  const tk_backoff_policy *p = tk_config_profile(c, "default");
  assert_non_null(p);
  assert_memory_equal(p, &want, sizeof want);
  assert_int_equal(want.base_ms, 1000);
  assert_true(want.multiplier == 2.0);
  assert_int_equal(want.max_delay_ms, 300000);
  assert_int_equal(want.min_delay_ms, 0);
  assert_int_equal(want.jitter, TK_JITTER_PROPORTIONAL);
  assert_true(want.jitter_fraction == 0.1);
  assert_int_equal(want.max_server_delay_ms, 3600000);
  const tk_engine_settings *e = tk_config_engine(c);
  assert_int_equal(e->max_attempts, 5);
  assert_int_equal(e->lease_ms, 30000);
  assert_int_equal(e->heartbeat_ms, 10000);
  assert_int_equal(e->claim_batch, 64);
  assert_int_equal(e->workers, 4);
  assert_int_equal(e->max_async, 1000);
  assert_string_equal(e->db, "sqlite:./tasker.db");
  assert_int_equal(tk_config_batch(c)->max_in_call_retries, 2);
  assert_int_equal(tk_config_batch(c)->max_item_attempts, 5);
  assert_int_equal(tk_config_setting_count(c), 8 + 10 + 2 + 6 + 1 + 1); /* + [retention], [limits], [server] */
  assert_int_equal(tk_config_limits(c)->map_max, 100000);
  assert_string_equal(e->reconnect_backoff, "default");
  assert_int_equal(e->reconnect_give_up_ms, 300000);
  for (size_t i = 0; i < tk_config_setting_count(c); i++)
    assert_int_equal(tk_config_setting_at(c, i)->origin.kind, TK_CONFIG_DEFAULT);
  assert_null(tk_config_setting_at(c, 28));
  assert_string_equal(find(c, "backoff.max_delay")->text, "\"5m\"");
  assert_string_equal(find(c, "backoff.multiplier")->text, "2.0");
  assert_string_equal(find(c, "backoff.schedule")->text, "[]");
  assert_string_equal(find(c, "engine.db")->text, "\"sqlite:./tasker.db\"");
  tk_config_free(c);
}

static void layering_order(void **state) {
  (void)state;
  const char *sets[] = {"backoff.jitter=none", "engine.workers=7"};
  tk_config *c = load(LAYERS, "ci", sets, 2);
  const tk_backoff_policy *d = tk_config_profile(c, "default");
  assert_int_equal(d->base_ms, 2000);      /* file */
  assert_int_equal(d->max_delay_ms, 30000); /* overlay over file */
  assert_int_equal(d->jitter, TK_JITTER_NONE); /* --set over overlay over file */
  assert_true(d->multiplier == 2.0);        /* default */
  assert_int_equal(tk_config_engine(c)->workers, 7);
  assert_int_equal(tk_config_engine(c)->claim_batch, 16);
  assert_int_equal(tk_config_engine(c)->lease_ms, 5000);
  assert_origin(c, "backoff.base", LAYERS ":3");
  assert_origin(c, "backoff.max_delay", CI ":2");
  assert_origin(c, "backoff.jitter", "--set");
  assert_origin(c, "backoff.multiplier", "default");
  assert_origin(c, "engine.workers", "--set");
  assert_origin(c, "engine.claim_batch", LAYERS ":16");
  const tk_config_setting *s = find(c, "backoff.max_delay");
  assert_int_equal(s->origin.kind, TK_CONFIG_FILE);
  assert_int_equal(s->origin.line, 2);
  assert_int_equal(s->origin.column, 13);
  assert_int_equal(s->origin.layer, 2);
  s = find(c, "engine.workers");
  assert_int_equal(s->origin.layer, 4); /* the second --set */
  assert_string_equal(s->origin.file, "engine.workers=7");
  tk_config_free(c);

  /* The same file without the overlay or flags. */
  c = load(LAYERS, NULL, NULL, 0);
  assert_int_equal(tk_config_profile(c, "default")->max_delay_ms, 60000);
  assert_int_equal(tk_config_profile(c, "default")->jitter, TK_JITTER_EQUAL);
  assert_int_equal(tk_config_engine(c)->workers, 2);
  tk_config_free(c);
}

static void later_set_wins(void **state) {
  (void)state;
  const char *sets[] = {"engine.workers=7", "engine.workers=9"};
  tk_config *c = load(NULL, NULL, sets, 2);
  assert_int_equal(tk_config_engine(c)->workers, 9);
  assert_string_equal(find(c, "engine.workers")->origin.file, "engine.workers=9");
  tk_config_free(c);
}

static void profiles_inherit_the_effective_default(void **state) {
  (void)state;
  tk_config *c = load(LAYERS, "ci", NULL, 0);
  const tk_backoff_policy *quick = tk_config_profile(c, "quick");
  assert_non_null(quick);
  assert_int_equal(quick->base_ms, 100);
  assert_int_equal(quick->max_delay_ms, 30000); /* the overlay's backoff.max_delay */
  assert_int_equal(quick->jitter, TK_JITTER_FULL);
  const tk_config_setting *s = find(c, "backoff.profiles.quick.max_delay");
  assert_string_equal(s->inherited_from, "backoff.max_delay");
  assert_origin(c, "backoff.profiles.quick.max_delay", CI ":2");
  assert_null(find(c, "backoff.profiles.quick.base")->inherited_from);
  assert_origin(c, "backoff.profiles.quick.base", LAYERS ":12");
  /* A profile's own value is not touched by the default's. */
  assert_int_equal(tk_config_profile(c, "payments")->max_delay_ms, 600000);
  tk_config_free(c);
}

static void set_overrides_one_profile_field(void **state) {
  (void)state;
  const char *sets[] = {"backoff.profiles.payments.max_delay=45s"};
  tk_config *c = load(LAYERS, NULL, sets, 1);
  const tk_backoff_policy *p = tk_config_profile(c, "payments");
  assert_int_equal(p->max_delay_ms, 45000);
  assert_int_equal(p->schedule_len, 2); /* the rest of the profile stays */
  assert_int_equal(p->schedule_ms[0], 1000);
  assert_int_equal(p->schedule_ms[1], 5000);
  assert_int_equal(p->base_ms, 2000); /* inherited */
  assert_origin(c, "backoff.profiles.payments.max_delay", "--set");
  assert_origin(c, "backoff.profiles.payments.schedule", LAYERS ":8");
  assert_int_equal(tk_config_profile(c, "default")->max_delay_ms, 60000);
  assert_int_equal(tk_config_profile(c, "quick")->max_delay_ms, 60000);
  tk_config_free(c);
}

static void set_value_forms(void **state) {
  (void)state;
  const char *sets[] = {
      "backoff.jitter=full",             /* not TOML: a bare string */
      "backoff.base=0.25",               /* a float: seconds */
      "backoff.max_delay=90",            /* an integer: seconds */
      "backoff.schedule=[\"1s\",\"2s\"]", /* a TOML array */
      "engine.db=sqlite:/tmp/x.db",      /* not TOML: a bare string */
      "engine.workers=8",
      "backoff.profiles.new={base=\"3s\"}", /* an inline table makes a profile */
      "batch.max_item_attempts=9",
  };
  tk_config *c = load(NULL, NULL, sets, 8);
  const tk_backoff_policy *d = tk_config_profile(c, "default");
  assert_int_equal(d->jitter, TK_JITTER_FULL);
  assert_int_equal(d->base_ms, 250);
  assert_int_equal(d->max_delay_ms, 90000);
  assert_int_equal(d->schedule_len, 2);
  assert_int_equal(d->schedule_ms[1], 2000);
  assert_string_equal(tk_config_engine(c)->db, "sqlite:/tmp/x.db");
  assert_int_equal(tk_config_engine(c)->workers, 8);
  assert_int_equal(tk_config_profile(c, "new")->base_ms, 3000);
  assert_int_equal(tk_config_batch(c)->max_item_attempts, 9);
  assert_string_equal(find(c, "backoff.schedule")->text, "[\"1s\", \"2s\"]");
  assert_string_equal(find(c, "backoff.max_delay")->text, "\"1m30s\"");
  tk_config_free(c);
}

static void profile_names_and_lookup(void **state) {
  (void)state;
  tk_config *c = load(LAYERS, NULL, NULL, 0);
  assert_int_equal(tk_config_profile_count(c), 3);
  assert_string_equal(tk_config_profile_name(c, 0), "default");
  assert_string_equal(tk_config_profile_name(c, 1), "payments");
  assert_string_equal(tk_config_profile_name(c, 2), "quick");
  assert_null(tk_config_profile_name(c, 3));
  assert_null(tk_config_profile(c, "paymnts"));
  assert_int_equal(tk_config_setting_count(c), 3 * 8 + 10 + 2 + 6 + 1 + 1);
  /* Show order: [backoff], each profile, [engine], [batch], [retention],
   * [limits]. */
  assert_string_equal(tk_config_setting_at(c, 0)->key, "backoff.schedule");
  assert_string_equal(tk_config_setting_at(c, 8)->key, "backoff.profiles.payments.schedule");
  assert_string_equal(tk_config_setting_at(c, 24)->key, "engine.max_attempts");
  assert_string_equal(tk_config_setting_at(c, 34)->key, "batch.max_in_call_retries");
  assert_string_equal(tk_config_setting_at(c, 36)->key, "retention.finished_after");
  assert_string_equal(tk_config_setting_at(c, 42)->key, "limits.map_max");
  tk_config_free(c);
}

/* [budgets.NAME] tables layer like profiles (a flag changes one key of
 * one), keys a budget does not set keep their built-in defaults, and
 * `config show` lists every key of each, after [batch]. */
static void budgets_layer_with_defaults(void **state) {
  (void)state;
  const char *sets[] = {"budgets.api.ratio=0.25", "budgets.search.per_host=true"};
  tk_config *c = load(LAYERS, NULL, sets, 2);
  assert_int_equal(tk_config_budget_count(c), 2);
  assert_string_equal(tk_config_budget_name(c, 0), "api");
  assert_string_equal(tk_config_budget_name(c, 1), "search");
  assert_null(tk_config_budget_name(c, 2));
  assert_null(tk_config_budget(c, "nope"));
  const tk_budget_settings *api = tk_config_budget(c, "api");
  assert_true(api->budget.ratio == 0.25);
  assert_int_equal(api->budget.window_ms, 10000);
  assert_true(api->budget.min_per_second == 1.0);
  assert_int_equal(api->per_host, 0);
  assert_int_equal(tk_config_budget(c, "search")->per_host, 1);
  assert_origin(c, "budgets.api.ratio", "--set");
  assert_origin(c, "budgets.api.window", "default");
  const tk_config_setting *ph = find(c, "budgets.search.per_host");
  assert_int_equal(ph->kind, TK_CONFIG_BOOLEAN);
  assert_int_equal(ph->i, 1);
  assert_string_equal(ph->text, "true");
  assert_string_equal(find(c, "budgets.api.window")->text, "\"10s\"");
  /* After [batch], in schema order, one budget after the other. */
  size_t n = tk_config_setting_count(c);
  assert_string_equal(tk_config_setting_at(c, n - 8)->key, "budgets.api.ratio");
  assert_string_equal(tk_config_setting_at(c, n - 1)->key, "budgets.search.per_host");
  tk_config_free(c);
  /* The example configuration's budget. */
  c = load(EXAMPLE, NULL, NULL, 0);
  const tk_budget_settings *pay = tk_config_budget(c, "payments");
  assert_non_null(pay);
  assert_true(pay->budget.ratio == 0.1);
  assert_int_equal(pay->per_host, 0);
  tk_config_free(c);
}

static void default_path_is_optional(void **state) {
  (void)state;
  tk_config *c = NULL;
  tk_err err;
  tk_config_source present = {NULL, LAYERS, NULL, NULL, 0};
  assert_int_equal(tk_config_load(&present, &c, &err), 0);
  assert_int_equal(tk_config_engine(c)->workers, 2);
  tk_config_free(c);
  tk_config_source absent = {NULL, "tests/config/fixtures/nowhere/tasker.toml", NULL, NULL, 0};
  assert_int_equal(tk_config_load(&absent, &c, &err), 0);
  assert_int_equal(tk_config_engine(c)->workers, 4);
  tk_config_free(c);
  /* Without a file, the overlay is still looked for beside the default. */
  tk_config_source env = {NULL, "tests/config/fixtures/layers/none.toml", "ci", NULL, 0};
  assert_int_equal(tk_config_load(&env, &c, &err), 0);
  assert_int_equal(tk_config_engine(c)->workers, 3);
  assert_int_equal(tk_config_engine(c)->claim_batch, 64);
  tk_config_free(c);
}

static void missing_files_are_errors(void **state) {
  (void)state;
  tk_config *c = (tk_config *)1;
  tk_err err;
  tk_config_source src = {"tests/config/fixtures/nowhere.toml", NULL, NULL, NULL, 0};
  assert_int_equal(tk_config_load(&src, &c, &err), TK_ENOENT);
  assert_null(c);
  assert_string_equal(err.msg, "config file tests/config/fixtures/nowhere.toml not found");
  tk_config_source env = {LAYERS, NULL, "staging", NULL, 0};
  assert_int_equal(tk_config_load(&env, &c, &err), TK_ECONFIG);
  assert_string_equal(err.msg, "environment \"staging\": overlay file "
                               "tests/config/fixtures/layers/environments/staging.toml not found");
  tk_config_source bad = {LAYERS, NULL, "../layers/ci", NULL, 0};
  assert_int_equal(tk_config_load(&bad, &c, &err), TK_ECONFIG);
  assert_string_equal(err.msg, "environment \"../layers/ci\": a name must use only letters, "
                               "digits, \"_\", \"-\" and \".\", and not start with \".\"");
}

static void example_configuration(void **state) {
  (void)state;
  tk_config *base = load(EXAMPLE, NULL, NULL, 0);
  tk_config *test = load(EXAMPLE, "test", NULL, 0);
  tk_config *prod = load(EXAMPLE, "production", NULL, 0);
  const char *names[] = {"default", "payments", "fast", "contended"};
  for (size_t i = 0; i < 4; i++) {
    const tk_backoff_policy *b = tk_config_profile(base, names[i]);
    const tk_backoff_policy *t = tk_config_profile(test, names[i]);
    const tk_backoff_policy *p = tk_config_profile(prod, names[i]);
    assert_non_null(b);
    assert_non_null(t);
    assert_non_null(p);
    assert_true(t->max_delay_ms <= 200); /* fast delays for tests */
    assert_true(p->max_delay_ms >= b->max_delay_ms); /* longer caps in production */
  }
  const tk_backoff_policy *pay = tk_config_profile(base, "payments");
  assert_int_equal(pay->schedule_len, 3);
  assert_int_equal(pay->max_delay_ms, 600000);
  assert_int_equal(tk_config_profile(prod, "default")->max_delay_ms, 30 * 60000);
  assert_int_equal(tk_config_profile(prod, "payments")->max_delay_ms, 60 * 60000);
  assert_int_equal(tk_config_engine(test)->lease_ms, 2000);
  assert_int_equal(tk_config_engine(prod)->workers, 32);
  tk_config_free(base);
  tk_config_free(test);
  tk_config_free(prod);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(defaults_only),
      cmocka_unit_test(layering_order),
      cmocka_unit_test(later_set_wins),
      cmocka_unit_test(profiles_inherit_the_effective_default),
      cmocka_unit_test(set_overrides_one_profile_field),
      cmocka_unit_test(set_value_forms),
      cmocka_unit_test(profile_names_and_lookup),
      cmocka_unit_test(budgets_layer_with_defaults),
      cmocka_unit_test(default_path_is_optional),
      cmocka_unit_test(missing_files_are_errors),
      cmocka_unit_test(example_configuration),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
