/* Crash recovery with real processes: a `tasker run` is killed with
 * SIGKILL while a command step runs; a second `tasker run --until-idle`
 * reaps the dead orchestrator's lease, retries the step and finishes the
 * task. The attempt rows account for every claim and nothing completes
 * twice. Synchronization is on observable state (the events file, the
 * step's pid file), never on a fixed sleep. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/engine_fixture.h"
#include "common/run_cli.h"

#define LIMIT_MS 30000 /* generous: the sanitizer build is slow */

typedef struct crash {
  char dir[256], db[320], url[340], cfg[400], events1[400], events2[400], pidfile[400];
} crash;

/* The first attempt of `work` records its pid and hangs; later attempts
 * succeed at once with their attempt number as results. */
static const char template_fmt[] =
    "name = \"crashy\"\nversion = \"1\"\n"
    "[[steps]]\nname = \"prepare\"\nhandler = { kind = \"builtin\", name = \"noop\" }\n"
    "[[steps]]\nname = \"side\"\ndepends_on = [\"prepare\"]\n"
    "handler = { kind = \"builtin\", name = \"noop\" }\n"
    "[[steps]]\nname = \"work\"\ndepends_on = [\"prepare\"]\n"
    "handler = { kind = \"command\", argv = [\"sh\", \"-c\", \"if [ \\\"$TASKER_ATTEMPT\\\" = 1 ]; "
    "then echo $$ > %s.tmp && mv %s.tmp %s; exec sleep 60; fi; "
    "echo '{\\\"attempt\\\": '$TASKER_ATTEMPT'}'\"] }\n"
    "retry = { max_attempts = 3 }\n"
    "[[steps]]\nname = \"finish\"\ndepends_on = [\"work\", \"side\"]\n"
    "handler = { kind = \"builtin\", name = \"noop\" }\n";

static const char config[] = "[backoff]\njitter = \"none\"\nbase = \"50ms\"\n"
                             "[engine]\nworkers = 2\n";

/* Run a CLI command against the crash store; returns the result. */
#define CLI(c, r, ...)                                                                     \
  do {                                                                                     \
    const char *args_[] = {"--config", (c)->cfg, "--db", (c)->url, __VA_ARGS__, NULL};      \
    assert_int_equal(run_cli((r), NULL, args_), 0);                                        \
  } while (0)

/* Event lines of a file, parsed. */
static json_t *events_of(const char *path) {
  char *text = efx_read(path);
  json_t *all = json_array();
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    json_t *e = json_loads(line, 0, NULL);
    if (e == NULL) fail_msg("%s: not a JSON line: %s", path, line);
    json_array_append_new(all, e);
  }
  free(text);
  return all;
}

static int count(json_t *events, const char *type, const char *step) {
  int n = 0;
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e) {
    const char *s = json_string_value(json_object_get(e, "step"));
    if (strcmp(json_string_value(json_object_get(e, "type")), type) == 0 &&
        (step == NULL || (s && strcmp(s, step) == 0)))
      n++;
  }
  return n;
}

/* The first run has claimed `work`, its command is running, and `side`
 * (claimed in the same pass, run by the other worker) is recorded, in the
 * store and as its event line: what the test expects of the first run at
 * the kill, however slowly the noop's outcome reaches the store. */
static int work_is_running(void *ud) {
  crash *c = ud;
  if (access(c->pidfile, F_OK) != 0) return 0;
  json_t *ev = events_of(c->events1);
  int claimed = count(ev, "step.claimed", "work"), side = count(ev, "step.completed", "side");
  json_decref(ev);
  return claimed == 1 && side == 1 &&
         efx_sql_int(c->db, "SELECT COUNT(*) FROM steps WHERE name = 'side'"
                            " AND state = 'complete'") == 1;
}

static void a_killed_orchestrator_is_recovered_by_the_next(void **state) {
  (void)state;
  crash c;
  efx_tmpdir(c.dir, sizeof c.dir);
  snprintf(c.db, sizeof c.db, "%s/tasker.db", c.dir);
  snprintf(c.url, sizeof c.url, "sqlite:%s", c.db);
  snprintf(c.events1, sizeof c.events1, "%s/events1.jsonl", c.dir);
  snprintf(c.events2, sizeof c.events2, "%s/events2.jsonl", c.dir);
  snprintf(c.pidfile, sizeof c.pidfile, "%s/work.pid", c.dir);
  efx_write(c.dir, "tasker.toml", config, c.cfg, sizeof c.cfg);
  char toml[2048], tpath[400];
  snprintf(toml, sizeof toml, template_fmt, c.pidfile, c.pidfile, c.pidfile);
  efx_write(c.dir, "crashy.toml", toml, tpath, sizeof tpath);

  run_result r;
  CLI(&c, &r, "init");
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  CLI(&c, &r, "template", "add", tpath);
  if (r.status != 0) fail_msg("template add: %s", r.err);
  run_result_free(&r);
  CLI(&c, &r, "submit", "crashy");
  assert_int_equal(r.status, 0);
  assert_string_equal(r.out, "1\n");
  run_result_free(&r);

  const char *run1[] = {"--config", c.cfg, "--db", c.url, "--set", "engine.lease=500ms",
                        "--set", "engine.heartbeat=100ms", "run", "--id", "run-1", "--events",
                        c.events1, NULL};
  char err1[400];
  snprintf(err1, sizeof err1, "%s/run1.err", c.dir);
  pid_t pid = efx_spawn(run1, NULL, err1);
  int running = efx_wait_for(work_is_running, &c, LIMIT_MS);
  assert_int_equal(kill(pid, SIGKILL), 0);
  assert_int_equal(efx_wait(pid), 128 + SIGKILL);
  /* The step's command outlives its orchestrator; end it too. */
  char *child = efx_read(c.pidfile);
  if (atoi(child) > 0) kill(atoi(child), SIGKILL);
  free(child);
  if (!running) fail_msg("the first run never started the work step with side recorded");

  /* Mid-step: the dead orchestrator still holds work's lease. */
  efx_sql_expect(c.db, "prepare|complete|1|NULL\nside|complete|1|NULL\n"
                      "work|in_progress|1|run-1\nfinish|pending|0|NULL",
                 "SELECT name, state, attempts, lease_owner FROM steps ORDER BY idx");

  const char *run2[] = {"--config", c.cfg, "--db", c.url, "--set", "engine.lease=500ms",
                        "--set", "engine.heartbeat=100ms", "run", "--until-idle", "--id",
                        "run-2", "--events", c.events2, NULL};
  char err2[400];
  snprintf(err2, sizeof err2, "%s/run2.err", c.dir);
  assert_int_equal(efx_wait_limit(efx_spawn(run2, NULL, err2), LIMIT_MS), 0);
  char *stderr2 = efx_read(err2);
  if (strstr(stderr2, "1 leases expired") == NULL) fail_msg("run 2 said: %s", stderr2);
  free(stderr2);

  efx_sql_expect(c.db, "complete", "SELECT state FROM tasks");
  /* Every claim has its attempt row, and every attempt row an outcome. */
  json_t *ev1 = events_of(c.events1), *ev2 = events_of(c.events2);
  assert_int_equal(efx_sql_int(c.db, "SELECT COUNT(*) FROM attempts"),
                   count(ev1, "step.claimed", NULL) + count(ev2, "step.claimed", NULL));
  assert_int_equal(efx_sql_int(c.db, "SELECT COUNT(*) FROM attempts WHERE outcome IS NULL"
                                     " OR finished_at IS NULL"),
                   0);
  efx_sql_expect(c.db, "prepare|1|run-1|success\nside|1|run-1|success\n"
                      "work|1|run-1|lease_expired\nwork|2|run-2|success\n"
                      "finish|1|run-2|success",
                 "SELECT s.name, a.attempt, a.owner, a.outcome FROM attempts a"
                 " JOIN steps s ON s.id = a.step_id ORDER BY s.idx, a.id");
  /* Nothing completed twice. */
  assert_int_equal(efx_sql_int(c.db, "SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM transitions"
                                     " WHERE to_state = 'complete' GROUP BY step_id)"),
                   1);
  assert_int_equal(efx_sql_int(c.db, "SELECT COUNT(*) FROM transitions WHERE to_state ="
                                     " 'complete'"),
                   5);
  assert_int_equal(count(ev1, "step.completed", NULL) + count(ev2, "step.completed", NULL), 4);
  assert_int_equal(count(ev1, "task.completed", NULL) + count(ev2, "task.completed", NULL), 1);
  assert_int_equal(count(ev2, "step.lease_expired", "work"), 1);
  efx_sql_expect(c.db, "{\"attempt\":2}", "SELECT results FROM steps WHERE name = 'work'");
  json_decref(ev1);
  json_decref(ev2);
  efx_rmtree(c.dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_killed_orchestrator_is_recovered_by_the_next),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
