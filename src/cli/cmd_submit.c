/* tasker submit NAME: create a task; its id alone goes to stdout. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/workflow.h>

const char cmd_submit_usage[] =
    "usage: tasker submit NAME [--version V] [--context JSON|@FILE] [--identity KEY]\n"
    "\n"
    "Create a task from template NAME (or NAMESPACE/NAME), newest version unless\n"
    "--version is given, and print its id on stdout. With --identity, submitting\n"
    "the same key again prints the existing task's id instead (and says so on\n"
    "stderr).\n";

/* Read a whole file for --context @FILE. */
static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (len + 1 == cap) {
      char *b = realloc(buf, cap *= 2);
      if (b == NULL) free(buf);
      buf = b;
    }
  }
  fclose(f);
  if (buf) buf[len] = '\0';
  return buf;
}

int cmd_submit(cli_globals *g, int argc, char **argv) {
  enum { O_VERSION, O_CONTEXT, O_IDENTITY, O_N };
  cli_opt o[O_N] = {{"version", "V", NULL, 0}, {"context", "JSON", NULL, 0},
                    {"identity", "KEY", NULL, 0}};
  const char *pos[1];
  int npos, rc = cli_parse("submit", o, O_N, argc, argv, pos, &npos, 1);
  if (rc) return rc;
  if (npos != 1) {
    cli_error("submit", "expected the template's name (see tasker template list)");
    return CLI_EXIT_USAGE;
  }
  char *context = NULL;
  if (o[O_CONTEXT].seen && o[O_CONTEXT].value[0] == '@') {
    context = read_file(o[O_CONTEXT].value + 1);
    if (context == NULL) {
      cli_error("submit", "--context: cannot read \"%s\"", o[O_CONTEXT].value + 1);
      return CLI_EXIT_USAGE;
    }
  }
  tk_config *cfg;
  if ((rc = cli_load_config(g, &cfg))) {
    free(context);
    return rc;
  }
  tk_store *s;
  if ((rc = cli_open_store("submit", g, cfg, 1, &s))) {
    tk_config_free(cfg);
    free(context);
    return rc;
  }
  tk_submit_request req = {
      .template_name = pos[0],
      .version = o[O_VERSION].value,
      .context_json = context ? context : o[O_CONTEXT].value,
      .identity = o[O_IDENTITY].value,
  };
  tk_clock clock = tk_clock_system();
  int64_t id = 0;
  int existed = 0;
  tk_err err;
  if (tk_task_submit(s, cfg, &req, tk_clock_now(&clock), &id, &existed, &err) != 0) {
    cli_error("submit", "%s", err.msg);
    /* An unknown template or version is a usage error, as an unknown task
     * is for show, why, retry, resolve and cancel. */
    rc = err.code == TK_EINVAL || err.code == TK_ENOENT ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
  } else {
    printf("%lld\n", (long long)id);
    if (existed)
      fprintf(stderr, "task %lld already exists with identity \"%s\"; nothing submitted\n",
              (long long)id, req.identity);
  }
  tk_store_close(s);
  tk_config_free(cfg);
  free(context);
  return rc;
}
