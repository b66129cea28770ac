/* tasker config: validate a configuration file, or print every effective
 * setting and where it came from. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/config.h>
#include <tasker/duration.h>
#include <tasker/schedule.h>

const char cmd_config_usage[] =
    "usage: tasker config check [FILE]\n"
    "       tasker config show [--json]\n"
    "\n"
    "check  validate FILE (with --env and --set if given) or, without FILE, the\n"
    "       configuration every command loads; exit 78 naming the first problem\n"
    "show   print every effective setting and where it came from: default,\n"
    "       FILE:LINE or --set; a profile key it does not set shows the default\n"
    "       profile's value as inherited; then each budget's, each\n"
    "       schedule's (schedules.NAME.KEY) and each queue's keys\n"
    "       (queues.NAME.KEY)\n"
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

/* The keys of a configured schedule, in the order shown. */
static const char *const schedule_keys[] = {"cron",    "zone",    "template",
                                            "version", "context", "missed"};
#define SCHEDULE_NKEYS (sizeof schedule_keys / sizeof schedule_keys[0])

/* Key k of configured schedule d as JSON (the effective value: a default
 * for a key not set), or NULL for a version not set (the newest, when each
 * slot fires: no value to show). */
static json_t *schedule_value(const tk_schedule_def *d, size_t k) {
  switch (k) {
  case 0: return json_string(d->cron);
  case 1: return json_string(d->zone ? d->zone : "UTC");
  case 2: return json_string(d->template_name);
  case 3: return d->version ? json_string(d->version) : NULL;
  case 4: {
    json_t *v = json_loads(d->context_json ? d->context_json : "{}", 0, NULL);
    return v ? v : json_object();
  }
  default: return json_string(d->missed == TK_MISSED_CATCH_UP ? "catch_up" : "skip");
  }
}

/* A key config show lists after the settings: one of a schedule's or a
 * queue's, its effective value (JSON) and where it was set. */
typedef struct extra_key {
  char key[160];
  json_t *value;
  tk_config_origin origin;
} extra_key;

/* Key k (0..2: concurrency, rate, burst) of configured queue q as JSON, or
 * NULL for a limit not configured (a burst goes with a rate). */
static json_t *queue_value(const tk_queue_settings *q, size_t k) {
  switch (k) {
  case 0: return q->concurrency > 0 ? json_integer(q->concurrency) : NULL;
  case 1: return q->rate_text ? json_string(q->rate_text) : NULL;
  default: return q->rate_text ? json_integer(q->burst) : NULL;
  }
}
static const char *const queue_keys[] = {"concurrency", "rate", "burst"};

/* Extra key i: each key with a value of each schedule, then of each
 * queue; 0 when i is past the end. out->value is the caller's. */
static int extra_at(const tk_config *cfg, size_t i, extra_key *out) {
  size_t at = 0, nschedules = tk_config_schedule_count(cfg);
  for (size_t k = 0; k < nschedules + tk_config_queue_count(cfg); k++) {
    const tk_schedule_def *d = k < nschedules ? tk_config_schedule_at(cfg, k) : NULL;
    const tk_queue_settings *q = d ? NULL : tk_config_queue_at(cfg, k - nschedules);
    size_t nkeys = d ? SCHEDULE_NKEYS : sizeof queue_keys / sizeof queue_keys[0];
    for (size_t j = 0; j < nkeys; j++) {
      json_t *v = d ? schedule_value(d, j) : queue_value(q, j);
      if (v == NULL) continue;
      if (at++ != i) {
        json_decref(v);
        continue;
      }
      out->value = v;
      if (d) {
        snprintf(out->key, sizeof out->key, "schedules.%s.%s", d->name, schedule_keys[j]);
        tk_config_schedule_origin(cfg, k, schedule_keys[j], &out->origin);
      } else {
        snprintf(out->key, sizeof out->key, "queues.%s.%s", q->name, queue_keys[j]);
        tk_config_queue_origin(cfg, k - nschedules, queue_keys[j], &out->origin);
      }
      return 1;
    }
  }
  return 0;
}

/* One line of `config show`: "KEY = VALUE" and where it came from. */
typedef struct show_line {
  char line[2048];
  char origin[1024];
  const char *inherited_from;
} show_line;

/* Line i of every line config show prints (the settings, then each extra
 * key); 0 when i is past the end. */
static int line_at(const tk_config *cfg, size_t i, show_line *out) {
  size_t n = tk_config_setting_count(cfg);
  if (i < n) {
    const tk_config_setting *s = tk_config_setting_at(cfg, i);
    snprintf(out->line, sizeof out->line, "%s = %s", s->key, s->text);
    tk_config_origin_format(&s->origin, out->origin, sizeof out->origin);
    out->inherited_from = s->inherited_from;
    return 1;
  }
  extra_key x;
  if (!extra_at(cfg, i - n, &x)) return 0;
  char *text = json_dumps(x.value, JSON_ENCODE_ANY | JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(x.value);
  snprintf(out->line, sizeof out->line, "%s = %s", x.key, text ? text : "?");
  free(text);
  tk_config_origin_format(&x.origin, out->origin, sizeof out->origin);
  out->inherited_from = NULL;
  return 1;
}

static void show_text(const tk_config *cfg) {
  show_line l;
  int width = 0;
  for (size_t i = 0; line_at(cfg, i, &l); i++)
    if ((int)strlen(l.line) > width) width = (int)strlen(l.line);
  if (width > 64) width = 64;
  for (size_t i = 0; line_at(cfg, i, &l); i++) {
    if (l.inherited_from)
      printf("%-*s  # inherited from %s (%s)\n", width, l.line, l.inherited_from, l.origin);
    else
      printf("%-*s  # %s\n", width, l.line, l.origin);
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

/* Each extra key into all, as the settings are: "schedules.NAME.KEY"
 * or "queues.NAME.KEY": {"value", "origin"}. */
static void extras_json(const tk_config *cfg, json_t *all) {
  extra_key x;
  for (size_t i = 0; extra_at(cfg, i, &x); i++) {
    char origin[1024];
    tk_config_origin_format(&x.origin, origin, sizeof origin);
    json_object_set_new(all, x.key, json_pack("{s:o, s:s}", "value", x.value, "origin", origin));
  }
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
    extras_json(cfg, all);
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
