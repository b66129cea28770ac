/* tasker schedule add NAME --cron EXPR ... | list | remove NAME */
#include "cli.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/cron.h>
#include <tasker/query.h>
#include <tasker/schedule.h>

const char cmd_schedule_usage[] =
    "usage: tasker schedule add NAME --cron EXPR [--zone ZONE] --template NAME\n"
    "                           [--version V] [--context JSON] [--missed skip|catch_up]\n"
    "       tasker schedule list [--count N] [--from TIME] [--json]\n"
    "       tasker schedule remove NAME\n"
    "\n"
    "A schedule submits its template with its context once per slot of its cron\n"
    "expression (five fields or @hourly/@daily/@weekly/@monthly/@yearly), in ZONE\n"
    "(a tz database name; UTC by default), however many orchestrators run. Each\n"
    "slot's task has the identity schedule:NAME:SLOT. --missed says what happens\n"
    "to slots missed while no orchestrator ran: skip (default) or catch_up.\n"
    "list shows each schedule's last slot and its next fire times (UTC and local):\n"
    "--count N of them (default 3, at most 1000), from now, or with --from TIME\n"
    "(RFC 3339, e.g. 2026-10-25T00:00:00Z) those at or after TIME.\n"
    "Schedules in the configuration ([schedules.NAME]) are listed too; they are\n"
    "changed in the configuration, not here. See docs/schedules.md.\n";

/* add's flags, then list's. */
enum { O_CRON, O_ZONE, O_TEMPLATE, O_VERSION, O_CONTEXT, O_MISSED, O_COUNT, O_FROM, O_N };
#define O_ADD_N O_COUNT

/* How many fire times list shows by default, and at most. */
#define LIST_COUNT 3
#define LIST_COUNT_MAX 1000

/* The flags of add checked one by one, so that each error names its flag;
 * then the template, which needs the store. Returns an exit status. */
static int add(tk_config *cfg, tk_store *s, const char *name, cli_opt *o) {
  const char *cmd = "schedule add";
  tk_err err;
  if (!o[O_CRON].seen || !o[O_TEMPLATE].seen) {
    cli_error(cmd, "%s is required", !o[O_CRON].seen ? "--cron EXPR" : "--template NAME");
    return CLI_EXIT_USAGE;
  }
  tk_schedule_def d = {.name = name, .cron = o[O_CRON].value, .zone = o[O_ZONE].value,
                       .template_name = o[O_TEMPLATE].value, .version = o[O_VERSION].value,
                       .context_json = o[O_CONTEXT].value};
  /* The expression alone, then the zone: each error names its flag. */
  tk_cron *c = NULL;
  int rc = tk_cron_parse(d.cron, NULL, &c, &err);
  tk_cron_free(c);
  if (rc) {
    cli_error(cmd, "--cron \"%s\": %s", d.cron, err.msg);
    return CLI_EXIT_USAGE;
  }
  if (tk_schedule_zone_check(d.zone, &err) != 0) {
    cli_error(cmd, "--zone \"%s\": %s", d.zone, err.msg);
    return CLI_EXIT_USAGE;
  }
  if (o[O_MISSED].seen) {
    if (strcmp(o[O_MISSED].value, "skip") == 0) d.missed = TK_MISSED_SKIP;
    else if (strcmp(o[O_MISSED].value, "catch_up") == 0) d.missed = TK_MISSED_CATCH_UP;
    else {
      cli_error(cmd, "--missed: invalid value \"%s\": expected skip (missed slots do not "
                "fire) or catch_up (they fire, oldest first)", o[O_MISSED].value);
      return CLI_EXIT_USAGE;
    }
  }
  tk_clock clock = tk_store_clock(s);
  rc = tk_schedule_add(s, cfg, &d, tk_clock_now(&clock), &err);
  if (rc == 0) {
    fprintf(stderr, "added schedule %s: %s%s%s, template %s\n", name, d.cron,
            d.zone ? " in " : "", d.zone ? d.zone : "", d.template_name);
    return CLI_EXIT_OK;
  }
  if (strncmp(err.msg, "context", 7) == 0)
    cli_error(cmd, "--context %s: %s", d.context_json, err.msg);
  else if (rc == TK_ENOENT || strstr(err.msg, "template"))
    cli_error(cmd, "--template %s%s%s: %s", d.template_name, d.version ? " --version " : "",
              d.version ? d.version : "", err.msg);
  else
    cli_error(cmd, "%s", err.msg);
  return rc == TK_ESTORE || rc == TK_ENOMEM || rc == TK_EDISCONNECTED ? CLI_EXIT_FAILURE
                                                                       : CLI_EXIT_USAGE;
}

/* One line of `next` times for the table: "UTC (local)". */
static void print_next(json_t *next) {
  size_t i;
  json_t *n;
  json_array_foreach(next, i, n) {
    const char *utc = json_string_value(json_object_get(n, "utc"));
    const char *local = json_string_value(json_object_get(n, "local"));
    printf("    next %s", utc);
    if (local && strcmp(local, utc) != 0) printf("  (%s)", local);
    printf("\n");
  }
}

/* list's --count and --from into *count and *from (INT64_MIN: from now).
 * Exit code, with the message printed. */
static int list_options(const cli_opt *o, int64_t now, int *count, int64_t *from) {
  *count = LIST_COUNT;
  *from = INT64_MIN;
  if (o[O_COUNT].seen) {
    int64_t n;
    int rc = cli_int("schedule list", &o[O_COUNT], 1, LIST_COUNT_MAX, &n);
    if (rc) return rc;
    *count = (int)n;
  }
  if (o[O_FROM].seen) {
    const char *t = o[O_FROM].value;
    tk_err err;
    /* A date starts with a four-digit year and a dash; a duration (which
     * tk_time_arg_parse takes as "that long ago") does not. */
    if (strlen(t) <= 4 || t[4] != '-' || tk_time_arg_parse(t, now, from, &err) != 0) {
      cli_error("schedule list", "--from: invalid value \"%s\": expected an RFC 3339 time "
                "such as 2026-10-25T00:00:00Z or 2026-10-25T02:00:00+02:00", t);
      return CLI_EXIT_USAGE;
    }
  }
  return 0;
}

static int list(cli_globals *g, const tk_config *cfg, tk_store *s, const cli_opt *opts) {
  tk_clock clock = tk_store_clock(s);
  tk_err err;
  char *text;
  int64_t now = tk_clock_now(&clock), from;
  int count, rc = list_options(opts, now, &count, &from);
  if (rc) return rc;
  if (tk_schedule_list_json(s, cfg, now, from, count, &text, &err) != 0) {
    cli_error("schedule list", "%s", err.msg);
    return CLI_EXIT_FAILURE;
  }
  if (g->json) {
    puts(text);
    free(text);
    return 0;
  }
  json_t *all = json_loads(text, 0, NULL);
  free(text);
  /* Unreadable, it would print as "no schedules": say so instead. */
  if (all == NULL) {
    cli_error("schedule list", "the store's answer is not JSON");
    return CLI_EXIT_FAILURE;
  }
  if (json_array_size(all) == 0) printf("no schedules\n");
  size_t i;
  json_t *o;
  json_array_foreach(all, i, o) {
    const char *zone = json_string_value(json_object_get(o, "zone"));
    const char *fired = json_string_value(json_object_get(o, "last_fired"));
    printf("%s  %s  %s  template %s  missed=%s  (%s)\n",
           json_string_value(json_object_get(o, "name")),
           json_string_value(json_object_get(o, "cron")), zone ? zone : "UTC",
           json_string_value(json_object_get(o, "template")),
           json_string_value(json_object_get(o, "missed")),
           json_string_value(json_object_get(o, "source")));
    if (!json_is_true(json_object_get(o, "stored")))
      printf("    configured: an orchestrator starting with this configuration adds it\n");
    else if (fired)
      printf("    last %s  task %lld\n", fired,
             (long long)json_integer_value(json_object_get(o, "last_task_id")));
    else
      printf("    last (none yet)\n");
    print_next(json_object_get(o, "next"));
    const char *bad = json_string_value(json_object_get(o, "error"));
    if (bad) printf("    error %s\n", bad);
  }
  json_decref(all);
  return 0;
}

int cmd_schedule(cli_globals *g, int argc, char **argv) {
  cli_opt o[O_N] = {{"cron", "EXPR", NULL, 0},        {"zone", "ZONE", NULL, 0},
                    {"template", "NAME", NULL, 0},    {"version", "V", NULL, 0},
                    {"context", "JSON", NULL, 0},     {"missed", "skip|catch_up", NULL, 0},
                    {"count", "N", NULL, 0},          {"from", "TIME", NULL, 0}};
  const char *pos[8];
  int npos, rc = cli_parse("schedule", o, O_N, argc, argv, pos, &npos, 8);
  if (rc) return rc;
  const char *verb = npos ? pos[0] : "";
  int is_add = strcmp(verb, "add") == 0, is_list = strcmp(verb, "list") == 0,
      is_remove = strcmp(verb, "remove") == 0;
  if (!is_add && !is_list && !is_remove) {
    cli_error("schedule", "expected `add NAME ...`, `list` or `remove NAME`%s%s%s",
              npos ? ", got \"" : "", verb, npos ? "\"" : "");
    return CLI_EXIT_USAGE;
  }
  if ((is_list && npos != 1) || (!is_list && npos != 2)) {
    cli_error("schedule", "%s takes %s", verb, is_list ? "no arguments" : "one NAME");
    return CLI_EXIT_USAGE;
  }
  for (int i = 0; i < O_N; i++)
    if (o[i].seen && (i < O_ADD_N ? !is_add : !is_list)) {
      cli_error("schedule", "--%s: only `schedule %s` takes it", o[i].name,
                i < O_ADD_N ? "add" : "list");
      return CLI_EXIT_USAGE;
    }
  tk_config *cfg;
  if ((rc = cli_load_config(g, &cfg))) return rc;
  tk_store *s;
  char cmd[32];
  snprintf(cmd, sizeof cmd, "schedule %s", verb);
  if ((rc = cli_open_store(cmd, g, cfg, 1, &s))) {
    tk_config_free(cfg);
    return rc;
  }
  if (is_add) {
    rc = add(cfg, s, pos[1], o);
  } else if (is_list) {
    rc = list(g, cfg, s, o);
  } else {
    tk_err err;
    int r = tk_schedule_remove(s, pos[1], &err);
    if (r == 0) fprintf(stderr, "removed schedule %s\n", pos[1]);
    else cli_error(cmd, "%s", err.msg);
    rc = r == 0 ? 0 : r == TK_ENOENT || r == TK_ESTATE ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
  }
  tk_store_close(s);
  tk_config_free(cfg);
  return rc;
}
