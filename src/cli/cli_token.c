/* The bearer token of `serve` and `run --metrics`, and the listen rule
 * checked with it before anything starts. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/server.h>

int cli_token(const char *cmd, const cli_opt *file, char **out) {
  *out = NULL;
  if (!file->seen) {
    const char *env = getenv("TASKER_TOKEN");
    if (env && *env && (*out = strdup(env)) == NULL) return CLI_EXIT_FAILURE;
    return 0;
  }
  FILE *f = fopen(file->value, "r");
  if (f == NULL) {
    cli_error(cmd, "--token-file: cannot open \"%s\": %s", file->value, strerror(errno));
    return CLI_EXIT_USAGE;
  }
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  if (n == sizeof buf) {
    cli_error(cmd, "--token-file: \"%s\" is too large: expected one line of at most %zu bytes",
              file->value, sizeof buf - 1);
    return CLI_EXIT_USAGE;
  }
  buf[n] = '\0';
  buf[strcspn(buf, "\r\n")] = '\0';
  if (buf[0] == '\0' || strchr(buf, ' ') != NULL || strchr(buf, '\t') != NULL) {
    cli_error(cmd, "--token-file: \"%s\": expected the token on its first line, without spaces",
              file->value);
    return CLI_EXIT_USAGE;
  }
  if ((*out = strdup(buf)) == NULL) return CLI_EXIT_FAILURE;
  return 0;
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
