/* tasker simulate: N clients contending for one versioned slot. */
#include "cli.h"

const char cmd_simulate_usage[] =
    "usage: tasker simulate [--clients FROM:TO:STEP] [--trials N] [options]\n";

int cmd_simulate(cli_globals *g, int argc, char **argv) {
  (void)g;
  (void)argc;
  (void)argv;
  cli_error("simulate", "not implemented yet");
  return CLI_EXIT_FAILURE;
}
