/* The command handler (DESIGN §8, docs/handlers.md) with real processes:
 * shell scripts written to a temporary directory, run through the handler
 * interface as the engine runs them. Exit codes and permanent_exit_codes,
 * results and retry_after on stdout, stdout that is not a JSON object,
 * output over max_output, a timeout that stops the whole process group
 * (a grandchild that ignores SIGTERM included), the environment, the
 * working directory, and a program that is missing or cannot run. Then
 * the spec's validation, through the library and through `tasker template
 * add` (FILE:LINE:COLUMN, nothing stored), and an engine run in which a
 * malformed result fails the step instead of reaching its child as null. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/toml.h>

#include "common/engine_fixture.h"
#include "common/expect_text.h"
#include "common/run_cli.h"
#include "common/spec_read.h"
#include "handlers/handler.h"

typedef struct fx {
  char dir[256];
} fx;

static int setup(void **state) {
  fx *f = calloc(1, sizeof *f);
  efx_tmpdir(f->dir, sizeof f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  efx_rmtree(f->dir);
  free(f);
  return 0;
}

/* Write an executable script DIR/NAME ("#!/bin/sh\n" + body); its path
 * goes to path. */
static void script(fx *f, const char *name, const char *body, char *path, size_t len) {
  char text[4096];
  snprintf(text, sizeof text, "#!/bin/sh\n%s", body);
  efx_write(f->dir, name, text, path, len);
  assert_int_equal(chmod(path, 0755), 0);
}

/* Run the handler `handler` once, as attempt 2 of 5 of step "s" of task
 * 7, with `input` on stdin (NULL: the engine's {}) and, as the engine
 * does, a deadline the spec's timeout from now, on the system clock. */
static tk_handler_result run_with(const char *handler, const char *input) {
  json_t *spec = spec_of(handler);
  int64_t timeout_ms = json_integer_value(json_object_get(spec, "timeout_ms"));
  const tk__handler_kind *kind = tk__handler_kind_of(spec);
  assert_string_equal(kind->name, "command");
  tk_clock clock = tk_clock_system();
  tk__handler_step step = {spec, NULL, &clock, NULL, NULL};
  char *text = json_dumps(spec, JSON_COMPACT);
  tk_handler_call call = {.task_id = 7, .step = "s", .attempt = 2, .max_attempts = 5,
                          .input = input, .spec = text,
                          .deadline_ms = timeout_ms ? tk_clock_now(&clock) + timeout_ms : 0};
  tk_handler_result r = {.status = TK_HANDLER_SUCCESS, .retry_after_ms = -1};
  kind->run(&step, &call, &r);
  free(text);
  json_decref(spec);
  return r;
}

static tk_handler_result run(const char *handler) { return run_with(handler, NULL); }

/* { kind = "command", argv = ["PATH"] } plus `more` (", key = value"). */
static const char *cmd(const char *path, const char *more, char *buf, size_t len) {
  snprintf(buf, len, "{ kind = \"command\", argv = [\"%s\"]%s }", path, more);
  return buf;
}

static void expect_result(tk_handler_result *r, tk_handler_status status, const char *error,
                          const char *results) {
  if (r->status != status || strcmp(r->error, error) != 0 ||
      (results == NULL) != (r->results == NULL) ||
      (results && strcmp(results, r->results) != 0))
    fail_msg("status %d (want %d)\nerror: %s\n(want %s)\nresults: %s (want %s)", r->status,
             status, r->error, error, r->results ? r->results : "NULL",
             results ? results : "NULL");
  free(r->results);
  r->results = NULL;
}

/* ---- exit codes -------------------------------------------------------------- */

static void exit_codes_map_to_outcomes(void **state) {
  fx *f = *state;
  char path[400], h[600];
  script(f, "ok.sh", "exit 0\n", path, sizeof path);
  tk_handler_result r = run(cmd(path, "", h, sizeof h));
  expect_result(&r, TK_HANDLER_SUCCESS, "", NULL);
  assert_int_equal(r.retry_after_ms, -1);

  script(f, "three.sh", "echo 'starting' >&2\necho 'disk full' >&2\nexit 3\n", path,
         sizeof path);
  r = run(cmd(path, "", h, sizeof h));
  expect_result(&r, TK_HANDLER_RETRY, "exit status 3: disk full", NULL);
  r = run(cmd(path, ", permanent_exit_codes = [2, 3]", h, sizeof h));
  expect_result(&r, TK_HANDLER_PERMANENT, "exit status 3 (permanent_exit_codes): disk full", NULL);
  r = run(cmd(path, ", permanent_exit_codes = [4]", h, sizeof h));
  expect_result(&r, TK_HANDLER_RETRY, "exit status 3: disk full", NULL);
  assert_int_equal(r.timed_out, 0);

  script(f, "killed.sh", "kill -KILL $$\n", path, sizeof path);
  r = run(cmd(path, "", h, sizeof h));
  expect_result(&r, TK_HANDLER_RETRY, "killed by signal 9 (Killed)", NULL);
}

/* ---- stdout -------------------------------------------------------------------- */

static void results_and_retry_after_come_from_stdout(void **state) {
  fx *f = *state;
  char path[400], h[600];
  script(f, "rows.sh", "echo '{\"rows\": 3, \"ok\": true}'\n", path, sizeof path);
  tk_handler_result r = run(cmd(path, "", h, sizeof h));
  expect_result(&r, TK_HANDLER_SUCCESS, "", "{\"rows\":3,\"ok\":true}");

  /* stdin carries the step's input. */
  script(f, "echo.sh", "cat\n", path, sizeof path);
  r = run_with(cmd(path, "", h, sizeof h), "{\"context\":{\"order\":42},\"parents\":{}}");
  expect_result(&r, TK_HANDLER_SUCCESS, "", "{\"context\":{\"order\":42},\"parents\":{}}");
  r = run(cmd(path, "", h, sizeof h));
  expect_result(&r, TK_HANDLER_SUCCESS, "", "{}");

  /* Empty stdout, or only white space: success without results. */
  script(f, "blank.sh", "printf ' \\n\\t\\n'\n", path, sizeof path);
  r = run(cmd(path, "", h, sizeof h));
  expect_result(&r, TK_HANDLER_SUCCESS, "", NULL);

  /* A failure asks for its delay: a duration string or seconds. */
  script(f, "busy.sh",
         "echo '{\"retry_after\": \"300ms\"}'\necho 'HTTP 429 Too Many Requests' >&2\nexit 75\n",
         path, sizeof path);
  r = run(cmd(path, "", h, sizeof h));
  expect_result(&r, TK_HANDLER_RETRY, "exit status 75: HTTP 429 Too Many Requests", NULL);
  assert_int_equal(r.retry_after_ms, 300);
  script(f, "busy2.sh", "echo '{\"retry_after\": 2.5}'\nexit 1\n", path, sizeof path);
  r = run(cmd(path, "", h, sizeof h));
  expect_result(&r, TK_HANDLER_RETRY, "exit status 1", NULL);
  assert_int_equal(r.retry_after_ms, 2500);
  /* One it cannot read is ignored, and the message says so. */
  script(f, "busy3.sh", "echo '{\"retry_after\": \"soon\"}'\nexit 1\n", path, sizeof path);
  r = run(cmd(path, "", h, sizeof h));
  expect_result(&r, TK_HANDLER_RETRY,
                "exit status 1; retry_after \"soon\" ignored: expected a duration such as "
                "\"30s\" or a number of seconds",
                NULL);
  assert_int_equal(r.retry_after_ms, -1);
}

static void stdout_that_is_not_a_json_object_fails_and_says_why(void **state) {
  fx *f = *state;
  char path[400], h[600];
  static const struct {
    const char *out, *why;
  } cases[] = {
      {"printf '{\"x\": '",
       "invalid JSON at line 1, column 6: unexpected token near end of file; stdout began "
       "\"{\\\"x\\\": \""},
      {"echo '[1, 2]'", "it is an array, not an object; stdout began \"[1, 2]\\n\""},
      {"echo 42", "it is a number, not an object; stdout began \"42\\n\""},
      {"echo 'all good'",
       "invalid JSON at line 1, column 3: invalid token near 'all'; stdout began "
       "\"all good\\n\""},
      {"echo '{\"a\": 1} {\"b\": 2}'",
       "invalid JSON at line 1, column 10: end of file expected near '{'; stdout began "
       "\"{\\\"a\\\": 1} {\\\"b\\\": 2}\\n\""},
      {"echo '{\"a\": 1, \"a\": 2}'",
       "invalid JSON at line 1, column 12: duplicate object key near '\"a\"'; stdout began "
       "\"{\\\"a\\\": 1, \\\"a\\\": 2}\\n\""},
      {"head -c 200 /dev/zero | tr '\\0' 'x'",
       "invalid JSON at line 1, column 200: invalid token; stdout began "
       "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"..."},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char body[256], name[32], want[600];
    snprintf(body, sizeof body, "%s\n", cases[i].out);
    snprintf(name, sizeof name, "bad%zu.sh", i);
    script(f, name, body, path, sizeof path);
    tk_handler_result r = run(cmd(path, "", h, sizeof h));
    snprintf(want, sizeof want,
             "exit status 0, but stdout is not a JSON object (the step's results): %s",
             cases[i].why);
    expect_result(&r, TK_HANDLER_PERMANENT, want, NULL);
  }
  /* After a failure, no retry_after could be read: said, not guessed. */
  script(f, "badfail.sh", "printf '{\"retry_after\": '\necho oops >&2\nexit 2\n", path,
         sizeof path);
  tk_handler_result r = run(cmd(path, "", h, sizeof h));
  expect_result(&r, TK_HANDLER_RETRY,
                "exit status 2: oops; its stdout, not a JSON object, gave no retry_after: invalid "
                "JSON at line 1, column 16: unexpected token near end of file; stdout began "
                "\"{\\\"retry_after\\\": \"",
                NULL);
  assert_int_equal(r.retry_after_ms, -1);
}

/* Whether process pid is gone (or a zombie, which runs no more). */
static int gone(void *ud) {
  char stat_path[64], *text;
  snprintf(stat_path, sizeof stat_path, "/proc/%d/stat", *(int *)ud);
  text = efx_read(stat_path);
  const char *close_paren = strrchr(text, ')');
  int dead = text[0] == '\0' || (close_paren && close_paren[2] == 'Z');
  free(text);
  return dead;
}

/* How long a process that the handler killed may take to be gone: far
 * more than a busy machine needs, far less than the processes these tests
 * start would live (120 s and more) if nothing killed them. */
#define GONE_WAIT_MS 30000

/* Fail unless process pid (`what`) is gone, waiting for it up to
 * GONE_WAIT_MS; one still running is killed, so as not to outlive the
 * test. */
static void expect_gone(int pid, const char *what) {
  if (efx_wait_for(gone, &pid, GONE_WAIT_MS)) return;
  kill(pid, SIGKILL);
  fail_msg("%s (pid %d) still ran %d s after the attempt ended: the handler did not kill it",
           what, pid, GONE_WAIT_MS / 1000);
}

/* The pid a script wrote to DIR/NAME, waiting for it to appear. */
static int read_pid(fx *f, const char *name) {
  char path[400];
  snprintf(path, sizeof path, "%s/%s", f->dir, name);
  char *text = efx_read(path);
  int pid = atoi(text);
  free(text);
  return pid;
}

static void output_over_max_output_fails_and_stops_the_program(void **state) {
  fx *f = *state;
  char path[400], h[600], body[512];
  script(f, "chatty.sh", "head -c 5000 /dev/zero | tr '\\0' ' '\necho '{}'\n", path,
         sizeof path);
  tk_handler_result r = run(cmd(path, ", max_output = 100", h, sizeof h));
  expect_result(&r, TK_HANDLER_PERMANENT,
                "stdout passed max_output (100 bytes); the process group was killed", NULL);
  r = run(cmd(path, ", max_output = 6000", h, sizeof h));
  expect_result(&r, TK_HANDLER_SUCCESS, "", "{}");
  /* A program that would print forever is stopped at the limit: the
   * outcome is the limit's, and the program is gone. (The timeout only
   * turns a handler that lets it print on into a failure rather than a
   * hang: its outcome would be "timed out".) */
  snprintf(body, sizeof body, "echo $$ > %s/forever.pid\nexec yes\n", f->dir);
  script(f, "forever.sh", body, path, sizeof path);
  r = run(cmd(path, ", max_output = 1000, timeout = \"120s\"", h, sizeof h));
  expect_result(&r, TK_HANDLER_PERMANENT,
                "stdout passed max_output (1000 bytes); the process group was killed", NULL);
  int forever = read_pid(f, "forever.pid");
  assert_true(forever > 0);
  expect_gone(forever, "the program printing forever");
}

/* ---- timeouts ------------------------------------------------------------------ */

static void a_timeout_stops_the_whole_group_grandchildren_too(void **state) {
  fx *f = *state;
  char path[400], h[600], body[1024];
  /* The program starts a grandchild that ignores SIGTERM (from its birth:
   * the disposition is inherited, so no SIGTERM can come before its trap)
   * and keeps stdout open for 120 s at least, then waits: SIGTERM ends
   * the program, SIGKILL after kill_grace the grandchild. */
  snprintf(body, sizeof body,
           "echo $$ > %s/leader.pid\n"
           "trap '' TERM\n"
           "sh -c 'echo $$ > %s/grandchild.pid; i=0; "
           "while [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done' &\n"
           "trap - TERM\n"
           "wait\n",
           f->dir, f->dir);
  script(f, "tree.sh", body, path, sizeof path);
  int64_t t0 = tk_monotonic_ns();
  tk_handler_result r = run(cmd(path, ", timeout = \"1s\", kill_grace = \"500ms\"", h, sizeof h));
  int64_t took_ms = (tk_monotonic_ns() - t0) / 1000000;
  int leader = read_pid(f, "leader.pid"), grandchild = read_pid(f, "grandchild.pid");
  assert_true(leader > 0 && grandchild > 0);
  char want[256];
  snprintf(want, sizeof want,
           "timed out after 1s; process group %d got SIGTERM, and SIGKILL 500ms later "
           "(kill_grace)",
           leader);
  expect_result(&r, TK_HANDLER_RETRY, want, NULL);
  assert_int_equal(r.timed_out, 1);
  /* SIGKILL waited for kill_grace: a lower bound, which a busy machine
   * only makes easier to meet. That the run then ended, without waiting
   * for the grandchild, the outcome says (SIGKILL) and the processes show. */
  if (took_ms < 1000 + 500 - 20)
    fail_msg("the attempt ended %lld ms after it started: before its timeout (1s) and "
             "kill_grace (500ms) had passed", (long long)took_ms);
  expect_gone(grandchild, "the grandchild that ignores SIGTERM");
  expect_gone(leader, "the program");

  /* A program that ends on SIGTERM, with nothing left holding its output,
   * is not waited for through the grace: no SIGKILL was needed, and the
   * attempt ended long before the 2-minute grace would have (an upper
   * bound is the point here; half the grace is far beyond what a busy
   * machine takes to end a sleep on SIGTERM). */
  script(f, "sleepy.sh", "exec sleep 300\n", path, sizeof path);
  t0 = tk_monotonic_ns();
  r = run(cmd(path, ", timeout = \"200ms\", kill_grace = \"2m\"", h, sizeof h));
  took_ms = (tk_monotonic_ns() - t0) / 1000000;
  assert_int_equal(r.status, TK_HANDLER_RETRY);
  assert_int_equal(r.timed_out, 1);
  expect_contains(r.error, "timed out after 200ms; process group ");
  if (strstr(r.error, "SIGKILL")) fail_msg("%s (after %lld ms)", r.error, (long long)took_ms);
  if (took_ms >= 60000)
    fail_msg("the attempt ended %lld ms after it started: it waited through kill_grace (2m) "
             "for a program that had ended on SIGTERM", (long long)took_ms);
}

static void the_programs_leftovers_go_with_it(void **state) {
  fx *f = *state;
  char path[400], h[600], body[1024];
  /* Exits at once, leaving a background process in its group that does
   * not hold stdout: it is killed, and the result is the program's. */
  snprintf(body, sizeof body,
           "sh -c 'echo $$ > %s/bg.pid; exec sleep 300' >/dev/null 2>&1 &\n"
           "while [ ! -s %s/bg.pid ]; do sleep 0.01; done\n"
           "echo '{\"done\": 1}'\n",
           f->dir, f->dir);
  script(f, "leaves.sh", body, path, sizeof path);
  tk_handler_result r = run(cmd(path, "", h, sizeof h));
  expect_result(&r, TK_HANDLER_SUCCESS, "", "{\"done\":1}");
  int bg = read_pid(f, "bg.pid");
  assert_true(bg > 0);
  expect_gone(bg, "the background process it left");
}

/* ---- environment and working directory -------------------------------------------- */

static void the_environment_has_the_attempt_and_the_specs_variables(void **state) {
  fx *f = *state;
  char path[400], h[600];
  script(f, "env.sh",
         "printf '{\"task\": \"%s\", \"step\": \"%s\", \"attempt\": \"%s\", \"max\": \"%s\", "
         "\"extra\": \"%s\", \"over\": \"%s\", \"inherited\": \"%s\"}' \"$TASKER_TASK_ID\" "
         "\"$TASKER_STEP\" \"$TASKER_ATTEMPT\" \"$TASKER_MAX_ATTEMPTS\" \"$EXTRA\" \"$TK_OVER\" "
         "\"$TK_INHERITED\"\n",
         path, sizeof path);
  /* The orchestrator's own variables pass through; the spec's win over
   * them, and the engine's TASKER_* over both. */
  setenv("TK_INHERITED", "from the orchestrator", 1);
  setenv("TK_OVER", "outer", 1);
  setenv("TASKER_STEP", "not this one", 1);
  tk_handler_result r =
      run(cmd(path, ", env = { EXTRA = \"x y\", TK_OVER = \"inner\", TASKER_ATTEMPT = \"9\" }",
              h, sizeof h));
  expect_result(&r, TK_HANDLER_SUCCESS, "",
                "{\"task\":\"7\",\"step\":\"s\",\"attempt\":\"2\",\"max\":\"5\",\"extra\":\"x "
                "y\",\"over\":\"inner\",\"inherited\":\"from the orchestrator\"}");
  unsetenv("TK_INHERITED");
  unsetenv("TK_OVER");
  unsetenv("TASKER_STEP");
}

static void the_working_directory_is_the_specs(void **state) {
  fx *f = *state;
  char sub[400], path[400], h[800], more[600];
  snprintf(sub, sizeof sub, "%s/work", f->dir);
  assert_int_equal(mkdir(sub, 0755), 0);
  script(f, "work/here.sh", "printf '{\"pwd\": \"%s\"}' \"$(pwd)\"\n", path, sizeof path);
  /* A relative program is found in the working directory, as a shell
   * started there would find it. */
  snprintf(more, sizeof more, ", cwd = \"%s\"", sub);
  tk_handler_result r = run(cmd("./here.sh", more, h, sizeof h));
  char want[600];
  snprintf(want, sizeof want, "{\"pwd\":\"%s\"}", sub);
  expect_result(&r, TK_HANDLER_SUCCESS, "", want);
  /* So is a name on a relative PATH entry. */
  snprintf(more, sizeof more, ", cwd = \"%s\", env = { PATH = \".:/usr/bin:/bin\" }", sub);
  r = run(cmd("here.sh", more, h, sizeof h));
  expect_result(&r, TK_HANDLER_SUCCESS, "", want);

  snprintf(more, sizeof more, ", cwd = \"%s/missing\"", f->dir);
  r = run(cmd("./here.sh", more, h, sizeof h));
  snprintf(want, sizeof want, "command: working directory \"%s/missing\" does not exist", f->dir);
  expect_result(&r, TK_HANDLER_PERMANENT, want, NULL);
  snprintf(more, sizeof more, ", cwd = \"%s\"", path);
  r = run(cmd("./here.sh", more, h, sizeof h));
  snprintf(want, sizeof want, "command: working directory \"%s\" is not a directory", path);
  expect_result(&r, TK_HANDLER_PERMANENT, want, NULL);
}

/* ---- programs that cannot run ------------------------------------------------------ */

static void a_missing_or_non_executable_program_is_named_with_the_reason(void **state) {
  fx *f = *state;
  char path[400], h[800], want[1200], more[600], here[300];
  assert_non_null(getcwd(here, sizeof here));

  snprintf(path, sizeof path, "%s/nope.sh", f->dir);
  tk_handler_result r = run(cmd(path, "", h, sizeof h));
  snprintf(want, sizeof want, "command: program \"%s\" not found", path);
  expect_result(&r, TK_HANDLER_PERMANENT, want, NULL);

  /* Relative: the path it was looked for at. */
  r = run(cmd("./nope.sh", "", h, sizeof h));
  snprintf(want, sizeof want, "command: program \"./nope.sh\" (%s/nope.sh) not found", here);
  expect_result(&r, TK_HANDLER_PERMANENT, want, NULL);
  snprintf(more, sizeof more, ", cwd = \"%s\"", f->dir);
  r = run(cmd("bin/nope.sh", more, h, sizeof h));
  snprintf(want, sizeof want, "command: program \"bin/nope.sh\" (%s/bin/nope.sh) not found",
           f->dir);
  expect_result(&r, TK_HANDLER_PERMANENT, want, NULL);

  r = run(cmd("tasker-no-such-program", "", h, sizeof h));
  snprintf(want, sizeof want, "command: program \"tasker-no-such-program\" not found on PATH (%s)",
           getenv("PATH"));
  expect_result(&r, TK_HANDLER_PERMANENT, want, NULL);

  /* Not executable: 0644 (root too needs an execute bit). */
  efx_write(f->dir, "plain.sh", "#!/bin/sh\necho '{}'\n", path, sizeof path);
  assert_int_equal(chmod(path, 0644), 0);
  r = run(cmd(path, "", h, sizeof h));
  snprintf(want, sizeof want, "command: program \"%s\" is not executable (permission denied)",
           path);
  expect_result(&r, TK_HANDLER_PERMANENT, want, NULL);
  snprintf(more, sizeof more, ", env = { PATH = \"%s:/usr/bin:/bin\" }", f->dir);
  r = run(cmd("plain.sh", more, h, sizeof h));
  snprintf(want, sizeof want,
           "command: program \"plain.sh\" found on PATH as %s, which is not executable "
           "(permission denied)",
           path);
  expect_result(&r, TK_HANDLER_PERMANENT, want, NULL);

  r = run(cmd(f->dir, "", h, sizeof h));
  snprintf(want, sizeof want, "command: program \"%s\" is a directory, not a program", f->dir);
  expect_result(&r, TK_HANDLER_PERMANENT, want, NULL);

  /* Executable, but neither a binary nor a script with #!. */
  efx_write(f->dir, "garbage", "\x01\x02 not a program\n", path, sizeof path);
  assert_int_equal(chmod(path, 0755), 0);
  r = run(cmd(path, "", h, sizeof h));
  snprintf(want, sizeof want,
           "command: cannot run \"%s\" (%s): not a program and no #! line (exec format error)",
           path, path);
  expect_result(&r, TK_HANDLER_PERMANENT, want, NULL);
}

static void shell_true_runs_the_line_with_sh(void **state) {
  (void)state;
  char h[600];
  snprintf(h, sizeof h,
           "{ kind = \"command\", shell = true, argv = [\"echo \\\"{\\\\\\\"n\\\\\\\": $1}\\\"\", "
           "\"sh\", \"5\"] }");
  tk_handler_result r = run(h);
  expect_result(&r, TK_HANDLER_SUCCESS, "", "{\"n\":5}");
}

/* ---- the spec ---------------------------------------------------------------------- */

static void bad_specs_are_refused_at_their_place(void **state) {
  (void)state;
  expect_spec_error("{ kind = \"command\" }",
                    "t.toml:1:5: steps[1].handler.argv: missing: a command handler needs argv = "
                    "[\"program\", \"arg\", ...]");
  expect_spec_error("{ kind = \"command\", argvv = [\"x\"] }",
                    "t.toml:1:25: unknown key \"steps[1].handler.argvv\" (did you mean "
                    "\"argv\"?)");
  expect_spec_error("{ kind = \"command\", argv = [\"x\"], colour = 1 }",
                    "t.toml:1:39: unknown key \"steps[1].handler.colour\" (known keys: kind, "
                    "timeout, argv, shell, cwd, env, permanent_exit_codes, max_output, "
                    "kill_grace)");
  expect_spec_error("{ kind = \"command\", argv = [] }",
                    "t.toml:1:32: steps[1].handler.argv = [...]: must be a non-empty array of "
                    "strings");
  expect_spec_error("{ kind = \"command\", argv = \"ls -l\" }",
                    "t.toml:1:32: steps[1].handler.argv = \"ls -l\": expected a non-empty array "
                    "of strings, got a string");
  expect_spec_error("{ kind = \"command\", argv = [\"ls\", 3] }",
                    "t.toml:1:39: steps[1].handler.argv[2] = 3: expected a string, got an "
                    "integer");
  expect_spec_error("{ kind = \"command\", argv = [\"\"] }",
                    "t.toml:1:33: steps[1].handler.argv[1]: \"\": expected the program to run (a "
                    "name on PATH or a path)");
  expect_spec_error("{ kind = \"command\", argv = [\"x\"], permanent_exit_codes = [3, 0] }",
                    "t.toml:1:66: steps[1].handler.permanent_exit_codes[2] = 0: must be an "
                    "integer from 1 to 255");
  expect_spec_error("{ kind = \"command\", argv = [\"x\"], env = { A = 1 } }",
                    "t.toml:1:51: steps[1].handler.env.A = 1: expected a string, got an "
                    "integer");
  expect_spec_error("{ kind = \"command\", argv = [\"x\"], env = { \"A=B\" = \"1\" } }",
                    "t.toml:1:55: steps[1].handler.env: \"A=B\": an environment variable's name "
                    "must be non-empty and hold no '='");
  expect_spec_error("{ kind = \"command\", argv = [\"x\"], max_output = 0 }",
                    "t.toml:1:52: steps[1].handler.max_output = 0: must be a number of bytes "
                    "from 1 to 67108864");
  expect_spec_error("{ kind = \"command\", argv = [\"x\"], kill_grace = \"2h\" }",
                    "t.toml:1:52: steps[1].handler.kill_grace = \"2h\": must be a duration from "
                    "0 to 1h");
  expect_spec_error("{ kind = \"command\", argv = [\"x\"], shell = \"yes\" }",
                    "t.toml:1:47: steps[1].handler.shell = \"yes\": expected true or false, got "
                    "a string");
  expect_spec_error("{ argv = [\"x\"] }",
                    "t.toml:1:5: steps[1].handler.kind: missing: expected kind = \"builtin\", "
                    "\"command\", \"function\", \"http\", \"worker\", \"wait\" or \"task\"");
  /* A valid spec, normalized as it is stored. */
  json_t *spec = spec_of("{ kind = \"command\", argv = [\"x\", \"-v\"], timeout = \"2s\", "
                         "env = { A = \"1\" }, permanent_exit_codes = [3], kill_grace = 1 }");
  char *text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(text,
                      "{\"argv\":[\"x\",\"-v\"],\"env\":{\"A\":\"1\"},\"kill_grace_ms\":1000,"
                      "\"kind\":\"command\",\"permanent_exit_codes\":[3],\"timeout_ms\":2000}");
  free(text);
  json_decref(spec);
}

static const char cli_config[] = "[backoff]\njitter = \"none\"\n";

static void template_add_names_the_place_and_stores_nothing(void **state) {
  fx *f = *state;
  char cfg[400], db[400], url[420], path[400];
  efx_write(f->dir, "tasker.toml", cli_config, cfg, sizeof cfg);
  snprintf(db, sizeof db, "%s/tasker.db", f->dir);
  snprintf(url, sizeof url, "sqlite:%s", db);
  run_result r;
  const char *init[] = {"--config", cfg, "--db", url, "init", NULL};
  assert_int_equal(run_cli(&r, NULL, init), 0);
  assert_int_equal(r.status, 0);
  run_result_free(&r);
  char *before = efx_snapshot(db);
  efx_write(f->dir, "bad.toml",
            "name = \"bad\"\nversion = \"1\"\n\n[[steps]]\nname = \"a\"\n"
            "handler = { kind = \"command\", argv = [\"./run.sh\"], permanent_exit_codes = "
            "[\"3\"] }\n",
            path, sizeof path);
  const char *add[] = {"--config", cfg, "--db", url, "template", "add", path, NULL};
  assert_int_equal(run_cli(&r, NULL, add), 0);
  char want[600];
  snprintf(want, sizeof want,
           "tasker template add: %s:6:76: steps[1].handler.permanent_exit_codes[1] = \"3\": "
           "expected an integer from 1 to 255, got a string\n",
           path);
  assert_int_equal(r.status, 78);
  assert_string_equal(r.out, "");
  assert_string_equal(r.err, want);
  run_result_free(&r);
  efx_unchanged(db, before);
}

/* ---- in the engine ----------------------------------------------------------------- */

typedef struct seen {
  int calls;
} seen;

static void child(const tk_handler_call *call, tk_handler_result *out, void *ud) {
  (void)call, (void)out;
  ((seen *)ud)->calls++;
}

static void malformed_results_fail_the_step_instead_of_reaching_its_child_as_null(void **state) {
  fx *d = *state;
  char path[400], toml[1200];
  script(d, "half.sh", "printf '{\"x\": '\n", path, sizeof path);
  static const char *const sets[] = {"backoff.jitter=none", NULL};
  efx *f = efx_new(sets, "orch-1");
  seen s = {0};
  assert_int_equal(tk_engine_register(f->engine, "child", child, &s, NULL), 0);
  snprintf(toml, sizeof toml,
           "name = \"half\"\nversion = \"1\"\n"
           "[[steps]]\nname = \"a\"\nhandler = { kind = \"command\", argv = [\"%s\"] }\n"
           "retry = { max_attempts = 3 }\n"
           "[[steps]]\nname = \"b\"\ndepends_on = [\"a\"]\n"
           "handler = { kind = \"function\", name = \"child\" }\n",
           path);
  efx_template(f, toml);
  int64_t id = efx_submit(f, "half", NULL);
  efx_drive(f, 20);
  efx_expect(f, id, "error", "a", "error", "b", "pending", NULL);
  assert_int_equal(s.calls, 0);
  json_t *task = efx_task(f, id);
  json_t *a = efx_step(task, "a");
  /* Permanent: one attempt, not three. */
  assert_int_equal(json_integer_value(json_object_get(a, "attempts")), 1);
  assert_true(json_is_null(json_object_get(a, "results")));
  assert_string_equal(json_string_value(json_object_get(a, "last_error")),
                      "exit status 0, but stdout is not a JSON object (the step's results): "
                      "invalid JSON at line 1, column 6: unexpected token near end of file; "
                      "stdout began \"{\\\"x\\\": \"");
  json_decref(task);
  efx_close(f);
  free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(exit_codes_map_to_outcomes, setup, teardown),
      cmocka_unit_test_setup_teardown(results_and_retry_after_come_from_stdout, setup, teardown),
      cmocka_unit_test_setup_teardown(stdout_that_is_not_a_json_object_fails_and_says_why, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(output_over_max_output_fails_and_stops_the_program, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(a_timeout_stops_the_whole_group_grandchildren_too, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(the_programs_leftovers_go_with_it, setup, teardown),
      cmocka_unit_test_setup_teardown(the_environment_has_the_attempt_and_the_specs_variables,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(the_working_directory_is_the_specs, setup, teardown),
      cmocka_unit_test_setup_teardown(a_missing_or_non_executable_program_is_named_with_the_reason,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(shell_true_runs_the_line_with_sh, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_specs_are_refused_at_their_place, setup, teardown),
      cmocka_unit_test_setup_teardown(template_add_names_the_place_and_stores_nothing, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          malformed_results_fail_the_step_instead_of_reaching_its_child_as_null, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
