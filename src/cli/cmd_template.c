/* tasker template add FILE... | tasker template list */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/workflow.h>


const char cmd_template_usage[] =
    "usage: tasker template add FILE...\n"
    "       tasker template list [--json]\n"
    "\n"
    "add validates each TOML template (steps, handlers, dependencies, cycles,\n"
    "backoff profiles) and stores it; a changed template needs a new version.\n"
    "Nothing is stored unless every file is valid.\n";

/* Print why a template cannot be added; returns the exit status. */
static int add_failed(int rc, const tk_err *err) {
  fprintf(stderr, "tasker template add: %s\n", err->msg);
  return rc == TK_ECONFIG || rc == TK_ESYNTAX || rc == TK_ERANGE ? CLI_EXIT_CONFIG
                                                                   : CLI_EXIT_FAILURE;
}

static int add(cli_globals *g, tk_config *cfg, tk_store *s, int n, const char **files) {
  tk_clock clock = tk_store_clock(s);
  tk_err err;
  tk_template_info *infos = calloc((size_t)n, sizeof *infos);
  if (infos == NULL) {
    cli_error("template add", "out of memory for %d templates", n);
    return CLI_EXIT_FAILURE;
  }
  /* All files are validated, then stored together: a bad file anywhere in
   * the list leaves the store unchanged. */
  int rc = tk_template_add_files(s, cfg, files, n, tk_clock_now(&clock), infos, &err);
  if (rc) {
    free(infos);
    return add_failed(rc, &err);
  }
  for (int i = 0; i < n; i++) {
    const tk_template_info *info = &infos[i];
    if (g->json)
      printf("{\"id\": %lld, \"namespace\": \"%s\", \"name\": \"%s\", \"version\": \"%s\","
             " \"steps\": %d, \"existed\": %s}\n",
             (long long)info->id, info->namespace_, info->name, info->version, info->steps,
             info->existed ? "true" : "false");
    else
      fprintf(stderr, "%s %s/%s version %s (%d steps)%s\n", info->existed ? "unchanged" : "added",
              info->namespace_, info->name, info->version, info->steps,
              info->existed ? ": the same definition is already stored" : "");
  }
  free(infos);
  return 0;
}

static int list(cli_globals *g, tk_store *s) {
  char *text;
  tk_err err;
  if (tk_template_list_json(s, &text, &err) != 0) {
    cli_error("template list", "%s", err.msg);
    return CLI_EXIT_FAILURE;
  }
  json_t *all = json_loads(text, 0, NULL);
  if (g->json) {
    puts(text);
  } else {
    printf("%-30s %-10s %5s  %s\n", "TEMPLATE", "VERSION", "STEPS", "DESCRIPTION");
    size_t i;
    json_t *t;
    json_array_foreach(all, i, t) {
      char name[300];
      snprintf(name, sizeof name, "%s/%s", json_string_value(json_object_get(t, "namespace")),
               json_string_value(json_object_get(t, "name")));
      printf("%-30s %-10s %5lld  %s\n", name, json_string_value(json_object_get(t, "version")),
             (long long)json_integer_value(json_object_get(t, "steps")),
             json_string_value(json_object_get(t, "description")));
    }
  }
  json_decref(all);
  free(text);
  return 0;
}

int cmd_template(cli_globals *g, int argc, char **argv) {
  const char *pos[256];
  int npos, rc = cli_parse("template", NULL, 0, argc, argv, pos, &npos, 256);
  if (rc) return rc;
  if (npos == 0 || (strcmp(pos[0], "add") != 0 && strcmp(pos[0], "list") != 0)) {
    cli_error("template", "expected `add FILE...` or `list`%s%s%s", npos ? ", got \"" : "",
              npos ? pos[0] : "", npos ? "\"" : "");
    return CLI_EXIT_USAGE;
  }
  int is_add = strcmp(pos[0], "add") == 0;
  if (is_add && npos < 2) {
    cli_error("template add", "expected one or more template files");
    return CLI_EXIT_USAGE;
  }
  tk_config *cfg;
  if ((rc = cli_load_config(g, &cfg))) return rc;
  tk_store *s;
  if ((rc = cli_open_store(is_add ? "template add" : "template list", g, cfg, 1, &s))) {
    tk_config_free(cfg);
    return rc;
  }
  rc = is_add ? add(g, cfg, s, npos - 1, pos + 1) : list(g, s);
  tk_store_close(s);
  tk_config_free(cfg);
  return rc;
}
