/* The bearer tokens of `serve` (the operator's and the workers') and
 * `run --metrics`, and the listen rule checked with them before anything
 * starts. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/server.h>

/* The first line of --`flag` (`file`), else $`env`, else none. */
static int token_from(const char *cmd, const char *flag, const char *env, const cli_opt *file,
                      char **out) {
  *out = NULL;
  if (!file->seen) {
    const char *value = getenv(env);
    if (value && *value && (*out = strdup(value)) == NULL) return CLI_EXIT_FAILURE;
    return 0;
  }
  FILE *f = fopen(file->value, "r");
  if (f == NULL) {
    cli_error(cmd, "--%s: cannot open \"%s\": %s", flag, file->value, strerror(errno));
    return CLI_EXIT_USAGE;
  }
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  if (n == sizeof buf) {
    cli_error(cmd, "--%s: \"%s\" is too large: expected one line of at most %zu bytes", flag,
              file->value, sizeof buf - 1);
    return CLI_EXIT_USAGE;
  }
  buf[n] = '\0';
  buf[strcspn(buf, "\r\n")] = '\0';
  if (buf[0] == '\0' || strchr(buf, ' ') != NULL || strchr(buf, '\t') != NULL) {
    cli_error(cmd, "--%s: \"%s\": expected the token on its first line, without spaces", flag,
              file->value);
    return CLI_EXIT_USAGE;
  }
  if ((*out = strdup(buf)) == NULL) return CLI_EXIT_FAILURE;
  return 0;
}

int cli_token(const char *cmd, const cli_opt *file, char **out) {
  return token_from(cmd, "token-file", "TASKER_TOKEN", file, out);
}

int cli_worker_token(const char *cmd, const cli_opt *file, char **out) {
  return token_from(cmd, "worker-token-file", "TASKER_WORKER_TOKEN", file, out);
}

int cli_listen_token(const char *cmd, const char *flag, const char *listen, const cli_opt *file,
                     char **token) {
  int rc = cli_token(cmd, file, token);
  if (rc) return rc;
  tk_err err;
  if (tk_server_listen_allowed(listen, *token, &err) != 0) {
    cli_error(cmd, "--%s: %s", flag, err.msg);
    free(*token);
    *token = NULL;
    return CLI_EXIT_USAGE;
  }
  return 0;
}
