/* tasker config: validate a configuration file, or print every effective
 * setting and where it came from. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/config.h>
#include <tasker/duration.h>

const char cmd_config_usage[] =
    "usage: tasker config check [FILE]\n"
    "       tasker config show [--json]\n"
    "\n"
    "check  validate FILE (with --env and --set if given) or, without FILE, the\n"
    "       configuration every command loads; exit 78 naming the first problem\n"
    "show   print every effective setting and where it came from: default,\n"
    "       FILE:LINE or --set; a profile key it does not set shows the default\n"
    "       profile's value as inherited\n"
    "\n"
    "  --json   print {\"KEY\": {\"value\": V, \"origin\": \"...\"}}; durations also\n"
    "           carry \"ms\", inherited keys \"inherited_from\"\n"
    "\n"
    "Layers, later wins: built-in defaults, --config FILE (default\n"
    "config/tasker.toml if present), FILE's environments/ENV.toml for --env ENV\n"
    "(default $TASKER_ENV), then --set KEY=VALUE in order.\n";

static int check(cli_globals *g, const char *file) {
  tk_config *cfg = NULL;
  int rc;
  if (file == NULL) {
    rc = cli_load_config(g, &cfg);
  } else {
    /* Only the flags given: $TASKER_ENV belongs to the running system, and
     * FILE may be an overlay that has no environments of its own. */
    tk_config_source src = {file, NULL, g->env, g->sets, g->nsets};
    tk_err err;
    rc = tk_config_load(&src, &cfg, &err) == 0 ? 0 : CLI_EXIT_CONFIG;
    if (rc) cli_error(NULL, "%s", err.msg);
  }
  if (rc) return rc;
  printf("%s: ok (%zu profile%s)\n", file ? file : "configuration",
         tk_config_profile_count(cfg), tk_config_profile_count(cfg) == 1 ? "" : "s");
  tk_config_free(cfg);
  return CLI_EXIT_OK;
}

static void show_text(const tk_config *cfg) {
  size_t n = tk_config_setting_count(cfg);
  int width = 0;
  for (size_t i = 0; i < n; i++) {
    const tk_config_setting *s = tk_config_setting_at(cfg, i);
    int w = (int)(strlen(s->key) + 3 + strlen(s->text));
    if (w > width) width = w;
  }
  if (width > 64) width = 64;
  for (size_t i = 0; i < n; i++) {
    const tk_config_setting *s = tk_config_setting_at(cfg, i);
    char line[2048], origin[1024];
    snprintf(line, sizeof line, "%s = %s", s->key, s->text);
    tk_config_origin_format(&s->origin, origin, sizeof origin);
    if (s->inherited_from)
      printf("%-*s  # inherited from %s (%s)\n", width, line, s->inherited_from, origin);
    else
      printf("%-*s  # %s\n", width, line, origin);
  }
}

static json_t *duration_json(int64_t ms) {
  char buf[48];
  tk_duration_format(ms, buf, sizeof buf);
  return json_string(buf);
}

static json_t *setting_json(const tk_config_setting *s) {
  char origin[1024];
  tk_config_origin_format(&s->origin, origin, sizeof origin);
  json_t *o = json_object();
  switch (s->kind) {
  case TK_CONFIG_DURATION:
    json_object_set_new(o, "value", duration_json(s->i));
    json_object_set_new(o, "ms", json_integer((json_int_t)s->i));
    break;
  case TK_CONFIG_DURATIONS: {
    json_t *v = json_array(), *ms = json_array();
    for (int i = 0; i < s->list_len; i++) {
      json_array_append_new(v, duration_json(s->list[i]));
      json_array_append_new(ms, json_integer((json_int_t)s->list[i]));
    }
    json_object_set_new(o, "value", v);
    json_object_set_new(o, "ms", ms);
    break;
  }
  case TK_CONFIG_INTEGER: json_object_set_new(o, "value", json_integer((json_int_t)s->i)); break;
  case TK_CONFIG_NUMBER: json_object_set_new(o, "value", json_real(s->f)); break;
  case TK_CONFIG_STRING: json_object_set_new(o, "value", json_string(s->s)); break;
  case TK_CONFIG_BOOLEAN: json_object_set_new(o, "value", json_boolean(s->i)); break;
  }
  json_object_set_new(o, "origin", json_string(origin));
  if (s->inherited_from) json_object_set_new(o, "inherited_from", json_string(s->inherited_from));
  return o;
}

static int show(cli_globals *g) {
  tk_config *cfg = NULL;
  int rc = cli_load_config(g, &cfg);
  if (rc) return rc;
  if (g->json) {
    json_t *all = json_object();
    for (size_t i = 0; i < tk_config_setting_count(cfg); i++) {
      const tk_config_setting *s = tk_config_setting_at(cfg, i);
      json_object_set_new(all, s->key, setting_json(s));
    }
    /* 15 digits: 0.1 prints as 0.1, and no setting needs more. */
    char *text =
        json_dumps(all, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    if (text) puts(text);
    free(text);
    json_decref(all);
  } else {
    show_text(cfg);
  }
  tk_config_free(cfg);
  return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

int cmd_config(cli_globals *g, int argc, char **argv) {
  const char *pos[2];
  int npos;
  int rc = cli_parse("config", NULL, 0, argc, argv, pos, &npos, 2);
  if (rc) return rc;
  if (npos == 0) {
    cli_error("config", "expected a subcommand: check [FILE] or show");
    return CLI_EXIT_USAGE;
  }
  if (strcmp(pos[0], "check") == 0) return check(g, npos > 1 ? pos[1] : NULL);
  if (strcmp(pos[0], "show") == 0) {
    if (npos > 1) {
      cli_error("config", "show: unexpected argument \"%s\"", pos[1]);
      return CLI_EXIT_USAGE;
    }
    return show(g);
  }
  cli_error("config", "unknown subcommand \"%s\" (expected check or show)", pos[0]);
  return CLI_EXIT_USAGE;
}
