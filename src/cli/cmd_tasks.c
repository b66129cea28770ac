/* tasker tasks: placeholder until its issue-13 part lands (replaced whole). */
#include "cli.h"

const char cmd_tasks_usage[] = "usage: tasker tasks\n";

int cmd_tasks(cli_globals *g, int argc, char **argv) {
  (void)g;
  (void)argc;
  (void)argv;
  cli_error("tasks", "not built yet");
  return CLI_EXIT_FAILURE;
}
