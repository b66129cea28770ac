/* tasker budgets: every retry budget state the store keeps (one per
 * budget, and with per_host one per budget and host), with its figures,
 * what it allows now, its deferred retries and when it was last updated
 * (tk_budgets_json, the report the API and the dashboard show too). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include <tasker/budget_report.h>
#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/duration.h>
#include <tasker/store.h>

const char cmd_budgets_usage[] =
    "usage: tasker budgets [--json]\n"
    "\n"
    "Every retry budget state the store keeps ([budgets.NAME]; with per_host = true,\n"
    "one per destination host), shared by every orchestrator, one line each:\n"
    "  RATIO      retries per first attempt in the window it allows\n"
    "  FLOOR      retries per second it allows besides (min_per_second)\n"
    "  WINDOW     its sliding window\n"
    "  LEFT       retries it allows now, asked one after another\n"
    "  NEXT       with none left, when the next retry would be allowed\n"
    "  RESERVED   deferred retries waiting for the time it gave them\n"
    "  UNTIL      the latest of those times\n"
    "  DEFERRED   retries it deferred since its state began\n"
    "  EARLIER    deferred retries brought earlier when it had room\n"
    "  UPDATED    when an orchestrator last updated it\n"
    "The figures are the configuration's; a budget it does not define is marked *\n"
    "and shown with those an orchestrator last applied to it.\n";

/* A time as "in 3s" / "2m ago", or "-" for null. */
static const char *when(json_t *at, int64_t now, char *buf, size_t len) {
  if (json_is_integer(at)) return cli_relative(at, now, 0, buf, len);
  snprintf(buf, len, "-");
  return buf;
}

/* A real as text with up to 6 significant digits, or "-" for null. */
static const char *real(json_t *v, char *buf, size_t len) {
  if (json_is_number(v)) snprintf(buf, len, "%g", json_number_value(v));
  else snprintf(buf, len, "-");
  return buf;
}

static void print_table(json_t *budgets, int64_t now) {
  printf("%-24s %-24s %6s %6s %7s %5s %8s %8s %8s %8s %7s %8s\n", "BUDGET", "HOST", "RATIO",
         "FLOOR", "WINDOW", "LEFT", "NEXT", "RESERVED", "UNTIL", "DEFERRED", "EARLIER", "UPDATED");
  size_t i;
  json_t *b;
  int unconfigured = 0;
  json_array_foreach(budgets, i, b) {
    char name[80], ratio[24], floor[24], window[24], left[24], next[32], until[32], updated[32];
    int mark = json_is_false(json_object_get(b, "configured"));
    unconfigured |= mark;
    snprintf(name, sizeof name, "%s%s", json_string_value(json_object_get(b, "name")),
             mark ? "*" : "");
    json_t *host = json_object_get(b, "host"), *w = json_object_get(b, "window_ms"),
           *avail = json_object_get(b, "available");
    if (json_is_integer(w)) tk_duration_format(json_integer_value(w), window, sizeof window);
    else snprintf(window, sizeof window, "-");
    if (json_is_integer(avail))
      snprintf(left, sizeof left, "%lld", (long long)json_integer_value(avail));
    else snprintf(left, sizeof left, "-");
    printf("%-24s %-24s %6s %6s %7s %5s %8s %8lld %8s %8lld %7lld %8s\n", name,
           json_is_string(host) ? json_string_value(host) : "-",
           real(json_object_get(b, "ratio"), ratio, sizeof ratio),
           real(json_object_get(b, "min_per_second"), floor, sizeof floor), window, left,
           when(json_object_get(b, "next_retry_at"), now, next, sizeof next),
           (long long)json_integer_value(json_object_get(b, "reserved")),
           when(json_object_get(b, "reserved_until"), now, until, sizeof until),
           (long long)json_integer_value(json_object_get(b, "deferred")),
           (long long)json_integer_value(json_object_get(b, "brought_earlier")),
           when(json_object_get(b, "updated_at"), now, updated, sizeof updated));
  }
  if (unconfigured)
    printf("* not in this configuration: its figures are those an orchestrator last applied\n");
}

int cmd_budgets(cli_globals *g, int argc, char **argv) {
  return cli_report(g, "budgets", argc, argv, tk_budgets_json, print_table,
                    "no retry budget states: a step names a budget with retry = { budget = "
                    "\"NAME\" }, [budgets.NAME] configures it, and its state is stored once a "
                    "step naming it ran");
}
