/* tasker signal TASK STEP [--data JSON] [--fail MESSAGE] [--key KEY]: send
 * a signal to a wait step (DESIGN §18). The data become the step's
 * results, a fail becomes a failed attempt under its retry policy; a
 * signal sent before the step waits is kept and delivered when it does.
 * A running orchestrator delivers it. The rules are the library's
 * (tk_step_signal: store/rules.c), as for the API and the dashboard. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/workflow.h>

const char cmd_signal_usage[] =
    "usage: tasker signal TASK STEP [--data JSON] [--fail MESSAGE] [--key KEY] [--json]\n"
    "\n"
    "Send a signal to a wait step (handler = { kind = \"wait\", timeout = \"72h\" }).\n"
    "--data JSON      the step's results (any JSON; default null)\n"
    "--fail MESSAGE   fail the step's attempt instead: retried under its retry policy\n"
    "                 (a retry waits for another signal), else the step is in error\n"
    "--key KEY        idempotency key: the same key again is answered as the first\n"
    "                 signal was, and changes nothing\n"
    "A signal sent before the step waits is kept and delivered when it does; a running\n"
    "orchestrator (tasker run) delivers it. A step that finished refuses signals.\n";

enum { O_DATA, O_FAIL, O_KEY, O_N };

/* The answer, as text on stderr or JSON on stdout. */
static int print_answer(const cli_globals *g, const tk_signal_request *r,
                        const tk_signal_result *res) {
  if (g->json) {
    char *text;
    tk_err err;
    if (tk_signal_result_json(r, res, &text, &err) != 0) {
      cli_error("signal", "%s", err.msg);
      return CLI_EXIT_FAILURE;
    }
    puts(text);
    free(text);
    return CLI_EXIT_OK;
  }
  char when[40];
  cli_utc(res->sent_at, when, sizeof when);
  if (res->duplicate)
    fprintf(stderr, "task %lld step %s: signal %lld with key \"%s\" was already sent at %s%s\n",
            (long long)r->task_id, r->step, (long long)res->signal_id, r->key, when,
            res->delivered ? " and delivered" : "; not delivered yet");
  else
    fprintf(stderr, "task %lld step %s: signal %lld sent (%s); %s\n", (long long)r->task_id,
            r->step, (long long)res->signal_id, r->error ? "fail" : "data",
            res->step_state[0] && strcmp(res->step_state, "waiting") == 0
                ? "the step is waiting: an orchestrator delivers it now"
                : "kept until the step waits");
  return CLI_EXIT_OK;
}

int cmd_signal(cli_globals *g, int argc, char **argv) {
  cli_opt o[O_N] = {{"data", "JSON", NULL, 0}, {"fail", "MESSAGE", NULL, 0},
                    {"key", "KEY", NULL, 0}};
  const char *pos[2];
  int npos, rc = cli_parse("signal", o, O_N, argc, argv, pos, &npos, 2);
  if (rc) return rc;
  if (npos != 2) {
    cli_error("signal", "expected a task id and a step name (see tasker signal --help)");
    return CLI_EXIT_USAGE;
  }
  if (o[O_DATA].seen && o[O_FAIL].seen) {
    cli_error("signal", "--data and --fail: a signal either completes the step or fails it, "
                        "give one of them");
    return CLI_EXIT_USAGE;
  }
  tk_signal_request r = {.step = pos[1], .key = o[O_KEY].value,
                         .data_json = o[O_FAIL].seen ? NULL
                                      : o[O_DATA].seen ? o[O_DATA].value : "null",
                         .error = o[O_FAIL].seen ? o[O_FAIL].value : NULL};
  if ((rc = cli_task_id("signal", pos[0], &r.task_id))) return rc;
  tk_config *cfg;
  if ((rc = cli_load_config(g, &cfg))) return rc;
  tk_store *s;
  if ((rc = cli_open_store("signal", g, cfg, 1, &s))) {
    tk_config_free(cfg);
    return rc;
  }
  tk_clock clock = tk_store_clock(s);
  tk_signal_result res;
  tk_err err;
  if (tk_step_signal(s, &r, tk_clock_now(&clock), &res, &err) != 0) {
    cli_error("signal", "%s", err.msg);
    rc = err.code == TK_ENOENT || err.code == TK_ESTATE || err.code == TK_EINVAL
             ? CLI_EXIT_USAGE
             : CLI_EXIT_FAILURE;
  } else {
    rc = print_answer(g, &r, &res);
  }
  tk_store_close(s);
  tk_config_free(cfg);
  return rc;
}
