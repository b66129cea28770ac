/* tasker queues: every queue the store knows, with its depth, what is in
 * progress, its limits and how long its oldest ready step has waited
 * (tk_queues_json, the report the API and the dashboard show too). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/queue.h>
#include <tasker/store.h>

const char cmd_queues_usage[] =
    "usage: tasker queues [--json]\n"
    "\n"
    "Every queue the store knows (one a step names with queue = \"NAME\" or a\n"
    "worker handler, or one [queues.NAME] limits), one line each:\n"
    "  READY        steps a claim could take now but for the limits\n"
    "  IN PROGRESS  its steps claimed now, by orchestrators and workers\n"
    "  LIMIT        concurrency: the most in progress at once, store-wide\n"
    "  RATE         steps started per second, minute or hour (a token bucket)\n"
    "  TOKENS       starts the bucket allows now, of its burst\n"
    "  OLDEST       how long the oldest ready step has waited\n"
    "  WORKERS      outside workers that polled it in the last minute\n"
    "A limit not set shows as -. The limits are the configuration's, given to\n"
    "the store when `tasker run` or `tasker serve` starts.\n";

/* A member that may be null as text: "-" for null. */
static const char *text_or_dash(json_t *v, const char *fmt, char *buf, size_t len) {
  if (json_is_integer(v)) snprintf(buf, len, fmt, (long long)json_integer_value(v));
  else if (json_is_string(v)) snprintf(buf, len, "%s", json_string_value(v));
  else snprintf(buf, len, "-");
  return buf;
}

static void print_table(json_t *queues, int64_t now) {
  printf("%-24s %7s %11s %7s %9s %13s %10s %7s\n", "QUEUE", "READY", "IN PROGRESS", "LIMIT",
         "RATE", "TOKENS", "OLDEST", "WORKERS");
  size_t i;
  json_t *q;
  json_array_foreach(queues, i, q) {
    char limit[24], rate[32], tokens[48], oldest[48], workers[24];
    json_t *t = json_object_get(q, "tokens");
    if (json_is_number(t))
      snprintf(tokens, sizeof tokens, "%.1f/%lld", json_number_value(t),
               (long long)json_integer_value(json_object_get(q, "burst")));
    else
      snprintf(tokens, sizeof tokens, "-");
    json_t *at = json_object_get(q, "oldest_ready_at");
    if (json_is_integer(at)) cli_relative(at, now, 0, oldest, sizeof oldest);
    else snprintf(oldest, sizeof oldest, "-");
    if (json_is_true(json_object_get(q, "worker")))
      text_or_dash(json_object_get(q, "workers_seen"), "%lld", workers, sizeof workers);
    else
      snprintf(workers, sizeof workers, "-");
    printf("%-24s %7lld %11lld %7s %9s %13s %10s %7s\n",
           json_string_value(json_object_get(q, "name")),
           (long long)json_integer_value(json_object_get(q, "ready")),
           (long long)json_integer_value(json_object_get(q, "in_progress")),
           text_or_dash(json_object_get(q, "concurrency"), "%lld", limit, sizeof limit),
           text_or_dash(json_object_get(q, "rate"), "%lld", rate, sizeof rate), tokens, oldest,
           workers);
  }
}

/* tk_queues_json as a report: the limits are the store's, not cfg's. */
static int queues_report(tk_store *s, const tk_config *cfg, int64_t now, char **json,
                         tk_err *err) {
  (void)cfg;
  return tk_queues_json(s, now, json, err);
}

int cmd_queues(cli_globals *g, int argc, char **argv) {
  return cli_report(g, "queues", argc, argv, queues_report, print_table,
                    "no queues: a step names one with queue = \"NAME\" (or a worker handler's), "
                    "and [queues.NAME] in the configuration limits it");
}
