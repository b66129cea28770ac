/* Opening the store for a command: --db, else $TASKER_DB, else the
 * configuration's engine.db. */
#include "cli.h"

#include <stdlib.h>

#include <tasker/config.h>
#include <tasker/queue.h>
#include <tasker/store.h>

const char *cli_store_url(const cli_globals *g, const tk_config *cfg) {
  if (g->db) return g->db; /* never empty: main refuses --db "" */
  const char *env = getenv("TASKER_DB");
  if (env && *env) return env;
  return tk_config_engine(cfg)->db;
}

int cli_open_store(const char *cmd, const cli_globals *g, const tk_config *cfg, int initialized,
                   tk_store **out) {
  const char *url = cli_store_url(g, cfg);
  tk_err err;
  /* Only init makes a store: any other command on a mistyped path must
   * not leave an empty file there. */
  tk_store_open_options opts = {.create = !initialized};
  int rc = tk_store_open_with(url, &opts, out, &err);
  if (rc == TK_ENOENT) { /* no store there: the library says why */
    cli_error(cmd, "%s: run `tasker init` to create it", err.msg);
    return CLI_EXIT_FAILURE;
  }
  if (rc != 0) {
    cli_error(cmd, "%s", err.msg);
    return CLI_EXIT_FAILURE;
  }
  /* engine.durability (validated with the configuration, so it parses). */
  tk_durability d = TK_DURABILITY_FULL;
  tk_durability_parse(tk_config_engine(cfg)->durability, &d);
  if (tk_store_set_durability(*out, d, &err) != 0) {
    cli_error(cmd, "%s", err.msg);
    tk_store_close(*out);
    *out = NULL;
    return CLI_EXIT_FAILURE;
  }
  if (!initialized) return 0;
  int version = 0;
  if (tk_store_schema_version(*out, &version, &err) != 0) {
    cli_error(cmd, "%s", err.msg);
    tk_store_close(*out);
    *out = NULL;
    return CLI_EXIT_FAILURE;
  }
  if (version == 0) {
    cli_error(cmd, "store %s is not initialized: run `tasker init` first", url);
    tk_store_close(*out);
    *out = NULL;
    return CLI_EXIT_FAILURE;
  }
  return 0;
}

int cli_open_synced_store(const char *cmd, const cli_globals *g, const tk_config *cfg,
                          tk_store **out) {
  int rc = cli_open_store(cmd, g, cfg, 1, out);
  if (rc) return rc;
  tk_err err;
  if (tk_queue_sync(*out, cfg, &err) != 0) {
    cli_error(cmd, "queues: %s", err.msg);
    tk_store_close(*out);
    *out = NULL;
    return CLI_EXIT_FAILURE;
  }
  return 0;
}
