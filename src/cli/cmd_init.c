/* tasker init: create the store or bring its schema up to date. */
#include "cli.h"

#include <stdio.h>

#include <tasker/config.h>
#include <tasker/store.h>

const char cmd_init_usage[] =
    "usage: tasker init [--db URL]\n"
    "\n"
    "Create the store (default sqlite:./tasker.db) or apply the migrations it\n"
    "lacks. Running it again changes nothing.\n";

int cmd_init(cli_globals *g, int argc, char **argv) {
  const char *pos[1];
  int npos, rc = cli_parse("init", NULL, 0, argc, argv, pos, &npos, 0);
  if (rc) return rc;
  tk_config *cfg;
  if ((rc = cli_load_config(g, &cfg))) return rc;
  tk_store *s;
  if ((rc = cli_open_store("init", g, cfg, 0, &s))) {
    tk_config_free(cfg);
    return rc;
  }
  int applied = 0, version = 0;
  tk_err err;
  if (tk_store_migrate(s, &applied, &version, &err) != 0) {
    cli_error("init", "%s", err.msg);
    rc = CLI_EXIT_FAILURE;
  } else if (g->json) {
    printf("{\"store\": \"%s\", \"schema_version\": %d, \"applied\": %d}\n",
           cli_store_url(g, cfg), version, applied);
  } else {
    fprintf(stderr, "%s: schema version %d (%d migration%s applied)\n", cli_store_url(g, cfg),
            version, applied, applied == 1 ? "" : "s");
  }
  tk_store_close(s);
  tk_config_free(cfg);
  return rc;
}
