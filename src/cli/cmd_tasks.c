/* tasker tasks: one page of the tasks that match filters, newest first, as
 * a table or as the API's JSON (tk_tasks_json). Also the filter flags the
 * bulk operator forms share (cli_task_filter). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/query.h>

#define STR_(x) #x
#define STR(x) STR_(x)

const char cmd_tasks_usage[] =
    "usage: tasker tasks [--state STATE] [--template NAME] [--since DURATION|RFC3339]\n"
    "                    [--error TEXT] [--limit N] [--cursor C] [--json]\n\n"
    "One page of the tasks that match, newest first: id, state, template@version, age,\n"
    "steps done/total, next retry, last error. Filters (each optional):\n"
    "  --state STATE     pending, in_progress, complete, error or cancelled\n"
    "  --template NAME   NAME or NAMESPACE/NAME, any version\n"
    "  --since WHEN      created within a duration (\"1h\") or at or after an RFC 3339\n"
    "                    time (\"2026-11-24T05:00:00Z\")\n"
    "  --error TEXT      text in the last error of any of the task's steps\n"
    "  --limit N         tasks per page, 1 to " STR(TK_PAGE_MAX) " (default 50)\n"
    "  --cursor C        the next page: C is what the previous page's last line\n"
    "                    (or next_cursor in --json) gave\n"
    "--json prints the page as {\"tasks\": [...], \"next_cursor\": ...} (docs/api.md).\n";

int cli_task_filter(const char *cmd, const cli_opt *o, int64_t now, tk_task_filter *f,
                    int *any) {
  memset(f, 0, sizeof *f);
  *any = 0;
  for (int k = 0; k < CLI_F_N; k++) {
    if (!o[k].seen) continue;
    /* "" would read as "no condition" and widen a bulk action silently. */
    if (o[k].value[0] == '\0') {
      cli_error(cmd, "--%s: invalid value \"\": expected %s", o[k].name,
                k == CLI_F_SINCE ? "a duration such as \"1h\" or an RFC 3339 time"
                                 : "a non-empty value");
      return CLI_EXIT_USAGE;
    }
    *any = 1;
  }
  tk_err err;
  if (o[CLI_F_SINCE].seen &&
      tk_time_arg_parse(o[CLI_F_SINCE].value, now, &f->created_since, &err) != 0) {
    cli_error(cmd, "--since: %s", err.msg);
    return CLI_EXIT_USAGE;
  }
  /* Before the epoch every task matches: the same as no condition (0). */
  if (f->created_since < 0) f->created_since = 0;
  f->state = o[CLI_F_STATE].seen ? o[CLI_F_STATE].value : NULL;
  f->template_name = o[CLI_F_TEMPLATE].seen ? o[CLI_F_TEMPLATE].value : NULL;
  f->error_text = o[CLI_F_ERROR].seen ? o[CLI_F_ERROR].value : NULL;
  /* Each member checked alone, so that the message names its flag. */
  const tk_task_filter one[CLI_F_N] = {[CLI_F_STATE] = {.state = f->state},
                                       [CLI_F_TEMPLATE] = {.template_name = f->template_name},
                                       [CLI_F_SINCE] = {.created_since = f->created_since},
                                       [CLI_F_ERROR] = {.error_text = f->error_text}};
  for (int k = 0; k < CLI_F_N; k++) {
    if (tk_task_filter_check(&one[k], &err) != 0) {
      cli_error(cmd, "--%s: %s", o[k].name, err.msg);
      return CLI_EXIT_USAGE;
    }
  }
  return 0;
}

static const char *str(json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : "";
}

/* An error message on one line, at most `max` characters (UTF-8 code
 * points, never cut inside one), "..." ending a cut one. */
static void one_line(const char *s, size_t max, char *buf, size_t len) {
  size_t chars = 0, n = 0, cut = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p && n + 4 < len; p++) {
    if ((*p & 0xC0) != 0x80) { /* a code point starts here */
      if (chars == max - 3) cut = n;
      if (chars++ == max) {
        memcpy(buf + cut, "...", 4);
        return;
      }
    }
    buf[n++] = *p < 0x20 || *p == 0x7F ? ' ' : (char)*p;
  }
  buf[n] = '\0';
}

enum { C_ID, C_STATE, C_TEMPLATE, C_CREATED, C_STEPS, C_NEXT, C_N };
#define CELL 160

/* The page as a table, columns as wide as their widest cell. Returns an
 * exit status. */
static int print_table(json_t *page, int64_t now) {
  static const char *const heads[C_N] = {"ID", "STATE", "TEMPLATE", "CREATED", "STEPS",
                                         "NEXT RETRY"};
  json_t *tasks = json_object_get(page, "tasks");
  size_t n = json_array_size(tasks), i;
  if (n == 0) {
    printf("no tasks match\n");
    return 0;
  }
  char(*cells)[C_N][CELL] = calloc(n, sizeof *cells);
  if (cells == NULL) {
    cli_error("tasks", "out of memory");
    return CLI_EXIT_FAILURE;
  }
  int width[C_N];
  for (int k = 0; k < C_N; k++) width[k] = (int)strlen(heads[k]);
  json_t *t;
  json_array_foreach(tasks, i, t) {
    json_t *tp = json_object_get(t, "template");
    snprintf(cells[i][C_ID], CELL, "%lld",
             (long long)json_integer_value(json_object_get(t, "id")));
    snprintf(cells[i][C_STATE], CELL, "%s", str(t, "state"));
    int other_ns = strcmp(str(tp, "namespace"), "default") != 0;
    snprintf(cells[i][C_TEMPLATE], CELL, "%s%s%s@%s", other_ns ? str(tp, "namespace") : "",
             other_ns ? "/" : "", str(tp, "name"), str(tp, "version"));
    char buf[64];
    snprintf(cells[i][C_CREATED], CELL, "%s",
             cli_relative(json_object_get(t, "created_at"), now, 0, buf, sizeof buf));
    snprintf(cells[i][C_STEPS], CELL, "%lld/%lld",
             (long long)json_integer_value(json_object_get(t, "steps_done")),
             (long long)json_integer_value(json_object_get(t, "steps_total")));
    json_t *next = json_object_get(t, "next_run_at");
    if (json_is_integer(next) && json_integer_value(next) <= now) strcpy(cells[i][C_NEXT], "now");
    else snprintf(cells[i][C_NEXT], CELL, "%s", cli_relative(next, now, 0, buf, sizeof buf));
    for (int k = 0; k < C_N; k++)
      if ((int)strlen(cells[i][k]) > width[k]) width[k] = (int)strlen(cells[i][k]);
  }
  printf("%*s", width[C_ID], heads[C_ID]);
  for (int k = 1; k < C_N; k++) printf("  %-*s", width[k], heads[k]);
  printf("  LAST ERROR\n");
  json_array_foreach(tasks, i, t) {
    char err[64 * 4];
    one_line(str(t, "last_error"), 60, err, sizeof err);
    printf("%*s", width[C_ID], cells[i][C_ID]);
    for (int k = 1; k < C_N; k++) printf("  %-*s", width[k], cells[i][k]);
    printf("  %s\n", err[0] ? err : "-");
  }
  free(cells);
  const char *cursor = json_string_value(json_object_get(page, "next_cursor"));
  if (cursor) printf("more tasks match: add --cursor %s for the next page\n", cursor);
  return 0;
}

int cmd_tasks(cli_globals *g, int argc, char **argv) {
  enum { O_LIMIT = CLI_F_N, O_CURSOR, O_N };
  cli_opt o[O_N] = {CLI_FILTER_OPTS, {"limit", "N", NULL, 0}, {"cursor", "C", NULL, 0}};
  const char *pos[1];
  int npos, rc = cli_parse("tasks", o, O_N, argc, argv, pos, &npos, 0);
  if (rc) return rc;
  int64_t limit = 50;
  if (o[O_LIMIT].seen && (rc = cli_int("tasks", &o[O_LIMIT], 1, TK_PAGE_MAX, &limit))) return rc;
  tk_config *cfg;
  if ((rc = cli_load_config(g, &cfg))) return rc;
  tk_store *s;
  if ((rc = cli_open_store("tasks", g, cfg, 1, &s))) {
    tk_config_free(cfg);
    return rc;
  }
  tk_clock clock = tk_store_clock(s);
  int64_t now = tk_clock_now(&clock);
  tk_task_filter f;
  int any;
  char *text = NULL;
  tk_err err;
  if ((rc = cli_task_filter("tasks", o, now, &f, &any)) == 0 &&
      tk_tasks_json(s, &f, o[O_CURSOR].value, (int)limit, &text, &err) != 0) {
    /* EINVAL here is the cursor: the filter was checked above. */
    int bad_cursor = err.code == TK_EINVAL && o[O_CURSOR].seen;
    cli_error("tasks", "%s%s", bad_cursor ? "--cursor: " : "", err.msg);
    rc = err.code == TK_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
  }
  tk_store_close(s);
  tk_config_free(cfg);
  if (rc) return rc;
  json_t *page = json_loads(text, JSON_PRESERVE_ORDER, NULL);
  free(text);
  if (page == NULL) {
    cli_error("tasks", "the store's answer is not JSON");
    return CLI_EXIT_FAILURE;
  }
  if (g->json) {
    char *out = json_dumps(page, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    puts(out ? out : "null");
    free(out);
  } else {
    rc = print_table(page, now);
  }
  json_decref(page);
  return rc;
}
