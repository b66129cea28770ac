/* The store reports `tasker queues` and `tasker budgets` print: one shape
 * for both (cli.h: cli_report). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/store.h>

int cli_report(cli_globals *g, const char *cmd, int argc, char **argv, cli_report_fn report,
               void (*print)(json_t *rows, int64_t now), const char *empty) {
  const char *pos[1];
  int npos, rc = cli_parse(cmd, NULL, 0, argc, argv, pos, &npos, 0);
  if (rc) return rc;
  tk_config *cfg;
  if ((rc = cli_load_config(g, &cfg))) return rc;
  tk_store *s;
  if ((rc = cli_open_store(cmd, g, cfg, 1, &s))) {
    tk_config_free(cfg);
    return rc;
  }
  tk_clock clock = tk_store_clock(s);
  int64_t now = tk_clock_now(&clock);
  char *text = NULL;
  tk_err err;
  if (report(s, cfg, now, &text, &err) != 0) {
    cli_error(cmd, "%s", err.msg);
    rc = CLI_EXIT_FAILURE;
  } else if (g->json) {
    puts(text);
  } else {
    json_t *rows = json_loads(text, 0, NULL);
    if (json_array_size(rows) == 0) puts(empty);
    else print(rows, now);
    json_decref(rows);
  }
  free(text);
  tk_store_close(s);
  tk_config_free(cfg);
  if (rc == 0 && fflush(stdout) != 0) rc = CLI_EXIT_FAILURE;
  return rc;
}
