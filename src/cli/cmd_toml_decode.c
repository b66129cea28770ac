/* tasker toml-decode: TOML on stdin to tagged JSON on stdout. */
#include "cli.h"

const char cmd_toml_decode_usage[] =
    "usage: tasker toml-decode < FILE.toml\n"
    "\n"
    "Decode TOML on stdin and print it as tagged JSON (the toml-test format).\n";

int cmd_toml_decode(cli_globals *g, int argc, char **argv) {
  (void)g;
  (void)argc;
  (void)argv;
  cli_error("toml-decode", "not implemented yet");
  return CLI_EXIT_FAILURE;
}
