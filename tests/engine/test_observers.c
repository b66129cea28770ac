/* Typed events and observers (issue 13, DESIGN §11): order of typed events
 * for a run with a retry, nothing built without observers, the JSON lines
 * from the same events, task.created from the library, and statistics
 * read from another thread during a run. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <tasker/events.h>
#include <tasker/workflow.h>

#include "common/engine_fixture.h"
#include "engine/engine_internal.h"

typedef struct seen {
  int n;
  tk_event_type types[64];
  char json[64][512]; /* tk_event_json of each */
  int64_t delay_ms;
  tk_delay_source source;
  char orchestrator[64];
  char template_name[64];
} seen;

static void record(const tk_event *ev, void *ud) {
  seen *s = ud;
  assert_true(s->n < 64);
  s->types[s->n] = ev->type;
  char *line = tk_event_json(ev);
  assert_non_null(line);
  snprintf(s->json[s->n], sizeof s->json[0], "%s", line);
  free(line);
  if (ev->type == TK_EV_STEP_RETRY_SCHEDULED) {
    s->delay_ms = ev->u.retry.delay_ms;
    s->source = ev->u.retry.source;
  }
  if (ev->orchestrator) snprintf(s->orchestrator, sizeof s->orchestrator, "%s", ev->orchestrator);
  if (ev->type == TK_EV_TASK_CREATED)
    snprintf(s->template_name, sizeof s->template_name, "%s", ev->u.created.template_name);
  s->n++;
}

/* Replace the digits of a "claim_us" value in line with N (in place),
 * failing unless there are some: the one measured field of an event. */
static void mask_claim_us(char *line) {
  char *v = strstr(line, "\"claim_us\":");
  if (v == NULL) return;
  v += strlen("\"claim_us\":");
  size_t digits = strspn(v, "0123456789");
  if (digits == 0) fail_msg("claim_us is not a count: %s", line);
  *v = 'N';
  memmove(v + 1, v + digits, strlen(v + digits) + 1);
}

static const char *const sets[] = {"backoff.base=1s", "backoff.jitter=none",
                                   NULL};

/* A step failing once then succeeding: the typed events in order, the
 * same as the JSON lines the options' sink received. */
static void test_typed_events_in_order(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  seen s = {0};
  tk_observer obs = {TK_OBSERVER_VERSION, TK_EV_ALL, record};
  tk_err err;
  assert_int_equal(tk_engine_observe(f->engine, &obs, &s, &err), 0);
  efx_one_step(f, "once", "{ kind = \"builtin\", name = \"fail\", times = 1 }",
               "{ max_attempts = 3 }");
  efx_submit(f, "once", NULL);
  efx_drive(f, 20);
  const tk_event_type want[] = {TK_EV_STEP_CLAIMED,   TK_EV_STEP_FAILED,
                                TK_EV_STEP_RETRY_SCHEDULED, TK_EV_STEP_CLAIMED,
                                TK_EV_STEP_COMPLETED, TK_EV_TASK_COMPLETED};
  assert_int_equal(s.n, 6);
  for (int i = 0; i < 6; i++) assert_int_equal(s.types[i], want[i]);
  assert_int_equal(s.delay_ms, 1000);
  assert_int_equal(s.source, TK_DELAY_COMPUTED);
  assert_string_equal(s.orchestrator, "orch-1");
  /* The JSON-lines observer wrote the same events, line for line, and
   * they are the documented lines (docs/cli.md, Events), written out here:
   * the manual clock at EFX_T0 (1767225600000), the retry 1 s later. Only
   * claim_us is measured; it is checked to be a count and masked as N. */
  static const char *const want_lines[] = {
      "{\"type\":\"step.claimed\",\"at\":1767225600000,\"orchestrator\":\"orch-1\",\"task\":1,"
      "\"step\":\"s\",\"attempt\":1,\"max_attempts\":3,\"late_ms\":0,\"claim_us\":N}",
      "{\"type\":\"step.failed\",\"at\":1767225600000,\"orchestrator\":\"orch-1\",\"task\":1,"
      "\"step\":\"s\",\"attempt\":1,\"late_ms\":0,"
      "\"error\":\"builtin fail: failing attempt 1 of the first 1 on purpose\","
      "\"outcome\":\"failure\"}",
      "{\"type\":\"step.retry_scheduled\",\"at\":1767225600000,\"orchestrator\":\"orch-1\","
      "\"task\":1,\"step\":\"s\",\"attempt\":1,\"late_ms\":0,\"delay_ms\":1000,"
      "\"source\":\"computed\",\"run_at\":1767225601000}",
      "{\"type\":\"step.claimed\",\"at\":1767225601000,\"orchestrator\":\"orch-1\",\"task\":1,"
      "\"step\":\"s\",\"attempt\":2,\"max_attempts\":3,\"late_ms\":0,\"claim_us\":N}",
      "{\"type\":\"step.completed\",\"at\":1767225601000,\"orchestrator\":\"orch-1\",\"task\":1,"
      "\"step\":\"s\",\"attempt\":2,\"late_ms\":0,\"children_released\":0}",
      "{\"type\":\"task.completed\",\"at\":1767225601000,\"orchestrator\":\"orch-1\",\"task\":1,"
      "\"state\":\"complete\"}",
  };
  assert_int_equal(json_array_size(f->events), 6);
  for (int i = 0; i < 6; i++) {
    char *line = json_dumps(json_array_get(f->events, i), JSON_COMPACT);
    assert_string_equal(line, s.json[i]);
    mask_claim_us(line);
    assert_string_equal(line, want_lines[i]);
    free(line);
  }
}

/* No observer: no event is built; one observer of task.completed only:
 * one event built. */
static void test_nothing_built_without_observers(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  tk_engine_options o = {.store = f->store, .config = f->cfg, .clock = tk_clock_manual(&f->clock),
                         .seed = 42, .id = "quiet", .workers = 0};
  tk_engine *e;
  tk_err err;
  assert_int_equal(tk_engine_new(&o, &e, &err), 0);
  tk_engine_free(f->engine);
  f->engine = e;
  efx_one_step(f, "once", "{ kind = \"builtin\", name = \"fail\", times = 1 }",
               "{ max_attempts = 3 }");
  efx_submit(f, "once", NULL);
  efx_drive(f, 20);
  assert_int_equal(e->events_built, 0);
  assert_int_equal(tk_engine_stats_get(e).completed, 1);
  assert_int_equal(tk_engine_stats_get(e).retried, 1);

  seen s = {0};
  tk_observer obs = {TK_OBSERVER_VERSION, TK_EV_BIT(TK_EV_TASK_COMPLETED), record};
  assert_int_equal(tk_engine_observe(e, &obs, &s, &err), 0);
  efx_submit(f, "once", NULL);
  efx_drive(f, 20);
  assert_int_equal(e->events_built, 1);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.types[0], TK_EV_TASK_COMPLETED);

  tk_observer bad = {TK_OBSERVER_VERSION + 1, TK_EV_ALL, record};
  assert_int_equal(tk_engine_observe(e, &bad, &s, &err), TK_EINVAL);
}

/* task.created comes from tk_task_submit, only for a task it created. */
static void test_task_created_from_library(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  efx_one_step(f, "one", "{ kind = \"builtin\", name = \"noop\" }", "{ max_attempts = 1 }");
  seen s = {0};
  tk_observer obs = {TK_OBSERVER_VERSION, TK_EV_BIT(TK_EV_TASK_CREATED), record};
  tk_submit_request req = {.template_name = "one", .identity = "k1", .observer = &obs,
                           .observer_ud = &s};
  int64_t id = 0;
  int existed = 0;
  tk_err err;
  assert_int_equal(tk_task_submit(f->store, f->cfg, &req, EFX_T0, &id, &existed, &err), 0);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.types[0], TK_EV_TASK_CREATED);
  assert_string_equal(s.template_name, "one");
  char want[256];
  snprintf(want, sizeof want,
           "{\"type\":\"task.created\",\"at\":%lld,\"task\":%lld,\"template\":\"one\","
           "\"identity\":\"k1\"}",
           (long long)EFX_T0, (long long)id);
  assert_string_equal(s.json[0], want);
  /* The same identity again: nothing created, no event. */
  assert_int_equal(tk_task_submit(f->store, f->cfg, &req, EFX_T0, &id, &existed, &err), 0);
  assert_int_equal(existed, 1);
  assert_int_equal(s.n, 1);
  /* An observer not interested in task.created is not called. */
  obs.interest = TK_EV_BIT(TK_EV_STEP_CLAIMED);
  req.identity = NULL;
  assert_int_equal(tk_task_submit(f->store, f->cfg, &req, EFX_T0, &id, &existed, &err), 0);
  assert_int_equal(s.n, 1);
}

typedef struct reader {
  tk_engine *e;
  atomic_int done;
  int64_t reads, last_completed;
  int went_back;
} reader;

static void *read_stats(void *ud) {
  reader *r = ud;
  while (!atomic_load(&r->done)) {
    tk_engine_stats st = tk_engine_stats_get(r->e);
    if (st.completed < r->last_completed) r->went_back = 1;
    r->last_completed = st.completed;
    r->reads++;
  }
  return NULL;
}

/* Statistics read from a second thread while an engine with workers runs. */
static void test_stats_from_another_thread(void **state) {
  efx *f = *state = efx_new(sets, "orch-1");
  efx_one_step(f, "one", "{ kind = \"builtin\", name = \"noop\" }", "{ max_attempts = 1 }");
  enum { N = 200 };
  for (int i = 0; i < N; i++) efx_submit(f, "one", NULL);
  tk_engine *e = efx_workers_engine(f, "w", 2, NULL, NULL);
  tk_err err;
  reader r = {.e = e};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, read_stats, &r), 0);
  int rc = tk_engine_run(e, 1, &err);
  atomic_store(&r.done, 1);
  pthread_join(t, NULL);
  assert_int_equal(rc, 0);
  tk_engine_stats st = tk_engine_stats_get(e);
  assert_int_equal(st.completed, N);
  assert_int_equal(st.claimed, N);
  assert_int_equal(st.in_flight, 0);
  assert_false(r.went_back);
  assert_true(r.reads > 0);
  efx_workers_end(f, e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_typed_events_in_order, efx_teardown),
      cmocka_unit_test_teardown(test_nothing_built_without_observers, efx_teardown),
      cmocka_unit_test_teardown(test_task_created_from_library, efx_teardown),
      cmocka_unit_test_teardown(test_stats_from_another_thread, efx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
