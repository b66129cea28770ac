/* Behaviours docs/cli.md and the README promise, through the real binary
 * on real SQLite files: $TASKER_DB chooses the store (between --db and
 * engine.db); submit --count N with --identity is refused and stores
 * nothing; run --events - writes the events to stdout, nothing else
 * there; run on SIGTERM lets a running handler finish and records its
 * outcome before it exits, and a SIGTERM while it opens its store is
 * caught; several `tasker init` at once on one new file
 * all succeed (or fail cleanly, the store busy), leaving a valid store. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cli_expect.h"
#include "common/cli_store.h"
#include "common/engine_fixture.h"
#include "common/run_cli.h"

static const char quick_toml[] = "name = \"quick\"\nversion = \"1\"\n" EFX_STEP("s") EFX_NOOP;

/* Run tasker with args (NULL-terminated); fail unless it exits 0. */
static void ok(const char *const *args) {
  run_result r;
  assert_int_equal(run_cli(&r, NULL, args), 0);
  if (r.status != 0) fail_msg("%s: exit %d: %s", args[0], r.status, r.err);
  run_result_free(&r);
}

/* An initialized store at DIR/NAME holding template quick; its URL in url. */
static void store_with_quick(const char *dir, const char *name, const char *tpl, char *url,
                             size_t len) {
  snprintf(url, len, "sqlite:%s/%s", dir, name);
  ok(ARGS("--db", url, "init"));
  ok(ARGS("--db", url, "template", "add", tpl));
}

static int64_t tasks_in(const char *dir, const char *name) {
  char db[400];
  snprintf(db, sizeof db, "%s/%s", dir, name);
  return efx_sql_int(db, "SELECT count(*) FROM tasks");
}

/* --db, else $TASKER_DB, else the configuration's engine.db. */
static void tasker_db_chooses_the_store(void **state) {
  (void)state;
  char dir[256], tpl[400], cfg[400], env_url[400], cfg_url[400], flag_url[400], text[600];
  efx_tmpdir(dir, sizeof dir);
  efx_write(dir, "quick.toml", quick_toml, tpl, sizeof tpl);
  store_with_quick(dir, "env.db", tpl, env_url, sizeof env_url);
  store_with_quick(dir, "config.db", tpl, cfg_url, sizeof cfg_url);
  store_with_quick(dir, "flag.db", tpl, flag_url, sizeof flag_url);
  snprintf(text, sizeof text, "[engine]\ndb = \"%s\"\n", cfg_url);
  efx_write(dir, "tasker.toml", text, cfg, sizeof cfg);

  setenv("TASKER_DB", env_url, 1);
  ok(ARGS("--config", cfg, "submit", "quick"));
  assert_int_equal(tasks_in(dir, "env.db"), 1);
  assert_int_equal(tasks_in(dir, "config.db"), 0);
  /* Read back through the same choice. */
  run_result r;
  RUN(&r, "--config", cfg, "--json", "status");
  assert_int_equal(r.status, 0);
  json_t *s = json_loads(r.out, 0, NULL);
  assert_non_null(s);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "tasks"), "pending")), 1);
  json_decref(s);
  run_result_free(&r);
  /* --db wins over it. */
  ok(ARGS("--config", cfg, "--db", flag_url, "submit", "quick"));
  assert_int_equal(tasks_in(dir, "flag.db"), 1);
  assert_int_equal(tasks_in(dir, "env.db"), 1);
  /* Without it, engine.db. */
  unsetenv("TASKER_DB");
  ok(ARGS("--config", cfg, "submit", "quick"));
  assert_int_equal(tasks_in(dir, "config.db"), 1);
  assert_int_equal(tasks_in(dir, "env.db"), 1);
  efx_rmtree(dir);
}

/* A store of its own (cli_store_open) holding template quick. */
static cli *quick_store(void) {
  cli *c = cli_store_open("");
  char tpl[400];
  efx_write(c->dir, "quick.toml", quick_toml, tpl, sizeof tpl);
  free(cli_stdout(c, ARGS("template", "add", tpl)));
  return c;
}

/* One identity names one task: --count 2 with it is a usage error. */
static void submit_count_with_identity_is_refused(void **state) {
  (void)state;
  cli *c = quick_store();
  run_result r;
  char *before = efx_snapshot(c->db);
  CLI(c, &r, "submit", "quick", "--count", "2", "--identity", "nightly-1");
  assert_int_equal(r.status, 2);
  assert_string_equal(r.out, "");
  assert_string_equal(r.err,
                      "tasker submit: --count 2 with --identity: one identity names one task\n");
  run_result_free(&r);
  efx_unchanged(c->db, before);
  cli_store_close(c);
}

/* --events - : one JSON object per line on stdout, and only that. */
static void run_events_dash_is_stdout(void **state) {
  (void)state;
  cli *c = quick_store();
  free(cli_stdout(c, ARGS("submit", "quick")));
  /* In the store's directory, where a file named "-" would land (the
   * binary by its absolute path). */
  char *here = getcwd(NULL, 0), bin[4200];
  assert_non_null(here);
  const char *path = tasker_path();
  if (path[0] == '/') snprintf(bin, sizeof bin, "%s", path);
  else snprintf(bin, sizeof bin, "%.2000s/%.2000s", here, path);
  setenv("TASKER", bin, 1);
  assert_int_equal(chdir(c->dir), 0);
  run_result r;
  CLI(c, &r, "run", "--until-idle", "--workers", "0", "--id", "orch-e", "--events", "-");
  assert_int_equal(chdir(here), 0);
  free(here);
  if (r.status != 0) fail_msg("run: exit %d: %s", r.status, r.err);
  char types[256] = "";
  for (char *line = r.out, *end; *line; line = end + 1) {
    end = strchr(line, '\n');
    if (end == NULL) fail_msg("stdout does not end with a newline: %s", r.out);
    *end = '\0';
    json_error_t e;
    json_t *ev = json_loads(line, 0, &e);
    if (!json_is_object(ev)) fail_msg("not a JSON object on stdout: %s", line);
    assert_string_equal(json_string_value(json_object_get(ev, "orchestrator")), "orch-e");
    strncat(types, json_string_value(json_object_get(ev, "type")), sizeof types - strlen(types) - 2);
    strcat(types, " ");
    json_decref(ev);
  }
  assert_string_equal(types, "step.claimed step.completed task.completed ");
  assert_non_null(strstr(r.err, "run finished: 1 claimed, 1 completed"));
  run_result_free(&r);
  char dash[400];
  snprintf(dash, sizeof dash, "%s/-", c->dir);
  assert_int_equal(access(dash, F_OK), -1);
  cli_store_close(c);
}

typedef struct marker {
  char path[400];
} marker;

static int marker_exists(void *ud) { return access(((marker *)ud)->path, F_OK) == 0; }

/* SIGTERM stops claiming but lets the running handler finish: its outcome
 * is recorded (complete, its results stored, the attempt a success) before
 * run exits 0. The handler waits, after the signal, for a file the test
 * creates only once the signal was sent. */
static void run_finishes_a_running_handler_on_sigterm(void **state) {
  (void)state;
  cli *c = cli_store_open("");
  marker started, release;
  snprintf(started.path, sizeof started.path, "%s/started", c->dir);
  snprintf(release.path, sizeof release.path, "%s/release", c->dir);
  char text[1400], tpl[400];
  snprintf(text, sizeof text,
           "name = \"slow\"\nversion = \"1\"\n" EFX_STEP("s")
           "handler = { kind = \"command\", argv = [\"sh\", \"-c\", '''touch %s; "
           "while [ ! -e %s ]; do sleep 0.05; done; echo '{\"finished\": true}' '''] }\n",
           started.path, release.path);
  efx_write(c->dir, "slow.toml", text, tpl, sizeof tpl);
  free(cli_stdout(c, ARGS("template", "add", tpl)));
  free(cli_stdout(c, ARGS("submit", "slow")));
  char err_path[400];
  snprintf(err_path, sizeof err_path, "%s/run.err", c->dir);
  const char *args[] = {"--config", c->cfg, "--db", c->url, "run", "--workers", "1", NULL};
  pid_t pid = efx_spawn(args, NULL, err_path);
  if (!efx_wait_for(marker_exists, &started, 120000)) {
    kill(pid, SIGKILL);
    efx_wait(pid);
    fail_msg("the handler never started: %s", efx_read(err_path));
  }
  assert_int_equal(kill(pid, SIGTERM), 0);
  efx_write(c->dir, "release", "", release.path, sizeof release.path);
  int status = efx_wait_limit(pid, 120000);
  if (status != 0) fail_msg("run: exit %d: %s", status, efx_read(err_path));
  efx_sql_expect(c->db, "complete|complete|{\"finished\":true}",
                 "SELECT t.state, s.state, s.results FROM tasks t JOIN steps s ON s.task_id = t.id");
  efx_sql_expect(c->db, "1|success", "SELECT attempt, outcome FROM attempts");
  cli_store_close(c);
}

/* A listening socket that accepts nothing: a connection to it waits for
 * a server's first word that never comes. */
typedef struct mute_server {
  int fd;
  int port;
} mute_server;

static int connection_pending(void *ud) {
  struct pollfd p = {.fd = ((mute_server *)ud)->fd, .events = POLLIN};
  return poll(&p, 1, 0) == 1;
}

/* SIGTERM while run is still opening its store (here a PostgreSQL server
 * that never answers) is caught from the start: when the open then fails,
 * run exits with its own status and message, not killed by the signal's
 * default (a service manager stopping it just after its start). */
static void run_catches_sigterm_while_opening_the_store(void **state) {
  (void)state;
  mute_server m = {.fd = socket(AF_INET, SOCK_STREAM, 0)};
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  assert_int_equal(bind(m.fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(m.fd, 4), 0);
  assert_int_equal(getsockname(m.fd, (struct sockaddr *)&a, &len), 0);
  char dir[256], url[200], err_path[400];
  efx_tmpdir(dir, sizeof dir);
  snprintf(url, sizeof url, "postgresql://tasker@127.0.0.1:%d/tasker?connect_timeout=120",
           ntohs(a.sin_port));
  snprintf(err_path, sizeof err_path, "%s/run.err", dir);
  const char *args[] = {"--db", url, "run", NULL};
  pid_t pid = efx_spawn(args, NULL, err_path);
  if (!efx_wait_for(connection_pending, &m, 120000)) {
    kill(pid, SIGKILL);
    efx_wait(pid);
    fail_msg("run never connected: %s", efx_read(err_path));
  }
  assert_int_equal(kill(pid, SIGTERM), 0);
  /* The server goes away: the open fails, and run says so. */
  close(accept(m.fd, NULL, NULL));
  close(m.fd);
  int status = efx_wait_limit(pid, 120000);
  char *err = efx_read(err_path);
  if (status != 1 || strstr(err, "tasker run: ") != err)
    fail_msg("run: exit %d (%d is SIGTERM's default), want 1 with its message: %s", status,
             128 + SIGTERM, err);
  free(err);
  efx_rmtree(dir);
}

/* Whether `err` is one clean line saying the store was busy. */
static int busy_line(const char *err) {
  return strncmp(err, "tasker init: ", 13) == 0 && strchr(err, '\n') == err + strlen(err) - 1 &&
         (strstr(err, "locked") || strstr(err, "busy"));
}

/* `tasker --json init` on url, expecting exit 0: how many migrations it
 * applied; the schema version it reports goes to *version. */
static int64_t init_applied(const char *url, int64_t *version) {
  run_result r;
  RUN(&r, "--json", "--db", url, "init");
  if (r.status != 0) fail_msg("init %s: exit %d: %s", url, r.status, r.err);
  json_t *j = json_loads(r.out, 0, NULL);
  if (j == NULL) fail_msg("init --json: not JSON: %s", r.out);
  int64_t applied = json_integer_value(json_object_get(j, "applied"));
  *version = json_integer_value(json_object_get(j, "schema_version"));
  json_decref(j);
  run_result_free(&r);
  return applied;
}

/* Three `tasker init` at once on one new file, several times over: each
 * succeeds, or fails cleanly because the store stayed busy (one line, exit
 * 1), and between them every migration is applied exactly once (their
 * "applied" counts add up to one init's on its own). Then the store is
 * whole: init has nothing left to do, and a task runs on it. */
static void concurrent_inits_leave_a_valid_store(void **state) {
  (void)state;
  enum { ROUNDS = 6, AT_ONCE = 3 };
  char dir[256], tpl[400], url[340];
  efx_tmpdir(dir, sizeof dir);
  efx_write(dir, "quick.toml", quick_toml, tpl, sizeof tpl);
  int64_t latest, all;
  snprintf(url, sizeof url, "sqlite:%s/alone.db", dir);
  all = init_applied(url, &latest);
  assert_true(all >= 1);
  for (int round = 0; round < ROUNDS; round++) {
    char db[320], out_path[AT_ONCE][400], err_path[AT_ONCE][400];
    snprintf(db, sizeof db, "%s/store-%d.db", dir, round);
    snprintf(url, sizeof url, "sqlite:%s", db);
    pid_t pid[AT_ONCE];
    for (int i = 0; i < AT_ONCE; i++) {
      snprintf(out_path[i], sizeof out_path[i], "%s/init-%d-%d.out", dir, round, i);
      snprintf(err_path[i], sizeof err_path[i], "%s/init-%d-%d.err", dir, round, i);
      pid[i] = efx_spawn(ARGS("--json", "--db", url, "init"), out_path[i], err_path[i]);
    }
    int succeeded = 0;
    int64_t applied = 0;
    for (int i = 0; i < AT_ONCE; i++) {
      int status = efx_wait_limit(pid[i], 120000);
      char *out = efx_read(out_path[i]), *err = efx_read(err_path[i]);
      if (status == 0) {
        json_t *j = json_loads(out, 0, NULL);
        if (j == NULL) fail_msg("round %d: init %d: not JSON: %s", round, i, out);
        assert_int_equal(json_integer_value(json_object_get(j, "schema_version")), latest);
        applied += json_integer_value(json_object_get(j, "applied"));
        json_decref(j);
        succeeded++;
      } else if (status != 1 || !busy_line(err)) {
        fail_msg("round %d: init %d: exit %d: %s", round, i, status, err);
      }
      free(out);
      free(err);
    }
    assert_true(succeeded >= 1);
    if (applied != all)
      fail_msg("round %d: %d inits applied %lld migrations between them, one alone applies %lld",
               round, succeeded, (long long)applied, (long long)all);
    char *check = efx_sql_text(db, "PRAGMA integrity_check");
    assert_string_equal(check, "ok");
    free(check);
    int64_t version;
    assert_int_equal(init_applied(url, &version), 0);
    assert_int_equal(version, latest);
    ok(ARGS("--db", url, "template", "add", tpl));
    ok(ARGS("--db", url, "submit", "quick"));
    ok(ARGS("--db", url, "run", "--until-idle", "--workers", "0"));
    assert_int_equal(efx_sql_int(db, "SELECT count(*) FROM tasks WHERE state = 'complete'"), 1);
  }
  efx_rmtree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tasker_db_chooses_the_store),
      cmocka_unit_test(submit_count_with_identity_is_refused),
      cmocka_unit_test(run_events_dash_is_stdout),
      cmocka_unit_test(run_finishes_a_running_handler_on_sigterm),
      cmocka_unit_test(run_catches_sigterm_while_opening_the_store),
      cmocka_unit_test(concurrent_inits_leave_a_valid_store),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
