/* tasker retry|resolve TASK STEP, tasker cancel TASK: operator actions,
 * each one transaction. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/workflow.h>


const char cmd_retry_usage[] =
    "usage: tasker retry TASK STEP\n\n"
    "Give a step in error a fresh set of attempts; it runs again now.\n";
const char cmd_resolve_usage[] =
    "usage: tasker resolve TASK STEP\n\n"
    "Mark a pending, waiting or failed step as resolved by hand; its children run.\n";
const char cmd_cancel_usage[] =
    "usage: tasker cancel TASK\n\nCancel every unfinished step of the task.\n";

static int act(const char *cmd, cli_globals *g, int argc, char **argv, tk_operator_action a) {
  const char *pos[2];
  int want = a == TK_OP_CANCEL ? 1 : 2;
  int npos, rc = cli_parse(cmd, NULL, 0, argc, argv, pos, &npos, 2);
  if (rc) return rc;
  if (npos != want) {
    cli_error(cmd, "expected %s", want == 1 ? "a task id" : "a task id and a step name");
    return CLI_EXIT_USAGE;
  }
  int64_t id;
  if ((rc = cli_task_id(cmd, pos[0], &id))) return rc;
  tk_config *cfg;
  if ((rc = cli_load_config(g, &cfg))) return rc;
  tk_store *s;
  if ((rc = cli_open_store(cmd, g, cfg, 1, &s))) {
    tk_config_free(cfg);
    return rc;
  }
  tk_clock clock = tk_store_clock(s);
  const char *task_state = NULL;
  tk_err err;
  if (tk_task_operate(s, a, id, want == 2 ? pos[1] : NULL, tk_clock_now(&clock), &task_state,
                      &err) != 0) {
    cli_error(cmd, "%s", err.msg);
    rc = err.code == TK_ENOENT || err.code == TK_ESTATE ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
  } else {
    fprintf(stderr, "task %lld: %s%s%s\n", (long long)id,
            a == TK_OP_RETRY ? "step will be retried now"
            : a == TK_OP_RESOLVE ? "step resolved manually"
                                  : "cancelled",
            task_state ? "; task is now " : "", task_state ? task_state : "");
  }
  tk_store_close(s);
  tk_config_free(cfg);
  return rc;
}

int cmd_retry(cli_globals *g, int argc, char **argv) {
  return act("retry", g, argc, argv, TK_OP_RETRY);
}
int cmd_resolve(cli_globals *g, int argc, char **argv) {
  return act("resolve", g, argc, argv, TK_OP_RESOLVE);
}
int cmd_cancel(cli_globals *g, int argc, char **argv) {
  return act("cancel", g, argc, argv, TK_OP_CANCEL);
}
