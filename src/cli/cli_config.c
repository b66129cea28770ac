/* Loading the configuration for a command, the same way for every one. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/config.h>

int cli_load_config(cli_globals *g, tk_config **out) {
  /* --env wins over $TASKER_ENV; --env '' turns the overlay off. */
  const char *env = g->env ? g->env : getenv("TASKER_ENV");
  tk_config_source src = {g->config, TK_CONFIG_DEFAULT_PATH, env, g->sets, g->nsets};
  tk_err err;
  if (tk_config_load(&src, out, &err) != 0) {
    cli_error(NULL, "%s", err.msg);
    return CLI_EXIT_CONFIG;
  }
  return 0;
}

int cli_config_profile(const char *cmd, const tk_config *cfg, const char *name,
                       const tk_backoff_policy **out) {
  if ((*out = tk_config_profile(cfg, name)) != NULL) return 0;
  char known[512] = "";
  for (size_t i = 0; i < tk_config_profile_count(cfg); i++) {
    size_t used = strlen(known);
    snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
             tk_config_profile_name(cfg, i));
  }
  cli_error(cmd, "unknown profile \"%s\" (known profiles: %s)", name, known);
  return CLI_EXIT_USAGE;
}
