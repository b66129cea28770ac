/* Embedding tasker: an in-process C handler, a SQLite store, one task.
 *
 *   make examples && build/examples/embed [DB_PATH]
 *
 * (or: cc -Iinclude examples/embed.c build/lib/libtasker.a \
 *        $(pkg-config --libs jansson sqlite3) -lm -lpthread)
 *
 * The "charge_card" handler fails its first attempt the way a payment API
 * answering 429 would, asking for a 100 ms delay; the engine schedules the
 * retry from that hint, and the second attempt succeeds with results that
 * the next step receives as its parent's results. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tasker/config.h>
#include <tasker/engine.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

static const char template_toml[] =
    "name = \"checkout\"\n"
    "version = \"1\"\n"
    "[[steps]]\n"
    "name = \"charge\"\n"
    "handler = { kind = \"function\", name = \"charge_card\" }\n"
    "retry = { max_attempts = 3 }\n"
    "[[steps]]\n"
    "name = \"receipt\"\n"
    "depends_on = [\"charge\"]\n"
    "handler = { kind = \"function\", name = \"print_receipt\" }\n";

/* Fails the first attempt with a server-requested delay, then succeeds. */
static void charge_card(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)ud;
  if (call->attempt == 1) {
    out->status = TK_HANDLER_RETRY;
    out->retry_after_ms = 100;
    snprintf(out->error, sizeof out->error, "payment API: 429 Too Many Requests");
    return;
  }
  out->results = strdup("{\"charged\": 4200, \"currency\": \"EUR\"}");
}

/* Reads its parent's results from the input. */
static void print_receipt(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)ud;
  printf("receipt for task %lld: input %s\n", (long long)call->task_id, call->input);
  out->results = strdup("{\"sent\": true}");
}

static void on_event(const char *line, void *ud) {
  (void)ud;
  if (strstr(line, "retry_scheduled") || strstr(line, "task.completed")) printf("event: %s\n", line);
}

static int fail(const char *what, const tk_err *err) {
  fprintf(stderr, "embed: %s: %s\n", what, err->msg);
  return 1;
}

int main(int argc, char **argv) {
  char db[512] = "/tmp/tasker-embed-XXXXXX";
  if (argc > 1) snprintf(db, sizeof db, "%s", argv[1]);
  else if (mkdtemp(db) == NULL) return 1;
  else strcat(db, "/embed.db");
  char url[600], tpl[600];
  snprintf(url, sizeof url, "sqlite:%s", db);
  snprintf(tpl, sizeof tpl, "%s.template.toml", db);
  FILE *f = fopen(tpl, "w");
  if (f == NULL) return 1;
  fputs(template_toml, f);
  fclose(f);

  tk_err err;
  tk_config *cfg;
  tk_store *store;
  if (tk_config_load(NULL, &cfg, &err)) return fail("config", &err);
  if (tk_store_open(url, &store, &err) || tk_store_migrate(store, NULL, NULL, &err))
    return fail("store", &err);
  tk_clock clock = tk_clock_system();
  if (tk_template_add_file(store, cfg, tpl, tk_clock_now(&clock), NULL, &err))
    return fail("template", &err);
  tk_submit_request req = {.template_name = "checkout", .context_json = "{\"order\": 42}"};
  int64_t task;
  int existed;
  if (tk_task_submit(store, cfg, &req, tk_clock_now(&clock), &task, &existed, &err))
    return fail("submit", &err);

  tk_engine_options opts = {.store = store, .config = cfg, .workers = 2, .on_event = on_event};
  tk_engine *engine;
  if (tk_engine_new(&opts, &engine, &err)) return fail("engine", &err);
  tk_engine_register(engine, "charge_card", charge_card, NULL, &err);
  tk_engine_register(engine, "print_receipt", print_receipt, NULL, &err);
  if (tk_engine_run(engine, 1, &err)) return fail("run", &err);
  tk_engine_stats st = tk_engine_stats_get(engine);
  printf("completed %lld steps, %lld retry\n", (long long)st.completed, (long long)st.retried);
  tk_engine_free(engine);

  char *json;
  if (tk_engine_task_json(store, task, tk_clock_now(&clock), &json, &err)) return fail("show", &err);
  printf("%s\n", json);
  free(json);
  tk_store_close(store);
  tk_config_free(cfg);
  if (argc <= 1) {
    unlink(tpl);
  }
  return 0;
}
