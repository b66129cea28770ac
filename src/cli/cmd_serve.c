/* tasker serve: placeholder until its issue-13 part lands (replaced whole). */
#include "cli.h"

const char cmd_serve_usage[] = "usage: tasker serve\n";

int cmd_serve(cli_globals *g, int argc, char **argv) {
  (void)g;
  (void)argc;
  (void)argv;
  cli_error("serve", "not built yet");
  return CLI_EXIT_FAILURE;
}
