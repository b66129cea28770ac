/* tasker status | show TASK | why TASK STEP: what the store says. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/duration.h>
#include <tasker/engine.h>

const char cmd_status_usage[] =
    "usage: tasker status [--json]\n\nTasks and steps by state, ready work, next due time.\n";
const char cmd_show_usage[] =
    "usage: tasker show TASK [--history] [--json]\n\n"
    "Each step: state, attempts/max, next run as a relative time, last error.\n"
    "--history adds every state change of the task and its steps, oldest first.\n";
const char cmd_why_usage[] =
    "usage: tasker why TASK STEP [--json]\n\n"
    "Which readiness condition holds the step back, and until when.\n";

int cli_task_id(const char *cmd, const char *text, int64_t *id) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (*text == '\0' || *end != '\0' || errno || v <= 0) {
    cli_error(cmd, "invalid task id \"%s\": expected a positive integer", text);
    return CLI_EXIT_USAGE;
  }
  *id = v;
  return 0;
}

/* Load config and store and fetch a report as parsed JSON. */
static int fetch(const char *cmd, cli_globals *g, int64_t task_id, json_t **out, int64_t *now) {
  tk_config *cfg;
  int rc = cli_load_config(g, &cfg);
  if (rc) return rc;
  tk_store *s;
  if ((rc = cli_open_store(cmd, g, cfg, 1, &s))) {
    tk_config_free(cfg);
    return rc;
  }
  tk_clock clock = tk_store_clock(s);
  *now = tk_clock_now(&clock);
  char *text = NULL;
  tk_err err;
  int r = task_id ? tk_engine_task_json(s, task_id, *now, &text, &err)
                  : tk_engine_status_json(s, *now, &text, &err);
  if (r != 0) {
    cli_error(cmd, "%s", err.msg);
    rc = r == TK_ENOENT ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
  } else {
    *out = json_loads(text, 0, NULL);
  }
  free(text);
  tk_store_close(s);
  tk_config_free(cfg);
  return rc;
}

static void print_json(json_t *v) {
  char *text = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  puts(text ? text : "null");
  free(text);
}

static const char *str(json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : "";
}

int cmd_status(cli_globals *g, int argc, char **argv) {
  const char *pos[1];
  int npos, rc = cli_parse("status", NULL, 0, argc, argv, pos, &npos, 0);
  if (rc) return rc;
  json_t *st = NULL;
  int64_t now;
  if ((rc = fetch("status", g, 0, &st, &now))) return rc;
  if (g->json) {
    print_json(st);
  } else {
    const char *key;
    json_t *v;
    printf("tasks:");
    json_object_foreach(json_object_get(st, "tasks"), key, v)
      printf("  %s %lld", key, (long long)json_integer_value(v));
    printf("\nsteps:");
    json_object_foreach(json_object_get(st, "steps"), key, v)
      printf("  %s %lld", key, (long long)json_integer_value(v));
    char buf[64];
    printf("\nready now: %lld   next due: %s\n",
           (long long)json_integer_value(json_object_get(st, "ready_now")),
           cli_relative(json_object_get(st, "next_due_at"), now, 1, buf, sizeof buf));
    printf("store size: %.1f MiB\n",
           (double)json_integer_value(json_object_get(st, "store_bytes")) / (1024.0 * 1024.0));
    json_object_foreach(json_object_get(st, "counters"), key, v)
      printf("%s: %lld\n", key, (long long)json_integer_value(v));
  }
  json_decref(st);
  return 0;
}

/* The attempts of every step that did not succeed at once: what failed,
 * and which delay was chosen, from where. */
static void print_retries(json_t *steps) {
  size_t i, k;
  json_t *s, *a;
  int header = 0;
  json_array_foreach(steps, i, s) {
    json_t *history = json_object_get(s, "history");
    if (json_array_size(history) < 2 && json_integer_value(json_object_get(s, "attempts")) < 2 &&
        !json_is_string(json_object_get(s, "last_error")))
      continue;
    if (!header++) printf("\nattempts:\n");
    json_array_foreach(history, k, a) {
      const char *outcome = json_is_string(json_object_get(a, "outcome")) ? str(a, "outcome")
                                                                           : "running";
      /* "#2 failure: what failed; retry after 1.5s (server)": each part
       * only when the attempt has it. */
      printf("  %-18s #%-3lld %s", str(s, "name"),
             (long long)json_integer_value(json_object_get(a, "attempt")), outcome);
      if (json_is_string(json_object_get(a, "error"))) printf(": %s", str(a, "error"));
      if (json_is_integer(json_object_get(a, "delay_ms"))) {
        char d[32];
        tk_duration_format(json_integer_value(json_object_get(a, "delay_ms")), d, sizeof d);
        printf("; retry after %s (%s)", d, str(a, "delay_source"));
      }
      printf("\n");
    }
  }
}

/* Each batch step's items: how many in each state, and the ones that
 * gave up with their last rejection. */
static void print_items(json_t *steps) {
  size_t i, k;
  json_t *s, *it;
  int header = 0;
  json_array_foreach(steps, i, s) {
    json_t *items = json_object_get(s, "items");
    if (items == NULL) continue;
    if (!header++) printf("\nitems:\n");
#define N(key) (long long)json_integer_value(json_object_get(items, key))
    printf("  %-18s %lld items: %lld acked, %lld pending, %lld gave up\n", str(s, "name"),
           N("total"), N("acked"), N("pending"), N("gave_up"));
#undef N
    json_array_foreach(json_object_get(items, "given_up"), k, it)
      printf("    %s (%lld attempts): %s\n", str(it, "key"),
             (long long)json_integer_value(json_object_get(it, "attempts")), str(it, "last_error"));
  }
}

/* The task's transitions: when (after the task was created), what moved,
 * from which state to which, and why. */
static void print_transitions(json_t *t) {
  json_int_t t0 = json_integer_value(json_object_get(t, "created_at"));
  size_t i;
  json_t *r;
  printf("\nhistory:\n");
  json_array_foreach(json_object_get(t, "transitions"), i, r) {
    char at[40], d[32], what[80];
    tk_duration_format(json_integer_value(json_object_get(r, "at")) - t0, d, sizeof d);
    snprintf(at, sizeof at, "+%s", d);
    json_t *attempt = json_object_get(r, "attempt");
    if (!json_is_string(json_object_get(r, "step"))) snprintf(what, sizeof what, "task");
    else if (json_is_integer(attempt))
      snprintf(what, sizeof what, "%s #%lld", str(r, "step"), (long long)json_integer_value(attempt));
    else snprintf(what, sizeof what, "%s", str(r, "step"));
    printf("  %-10s %-22s %-17s -> %-17s %s\n", at, what,
           json_is_string(json_object_get(r, "from")) ? str(r, "from") : "-", str(r, "to"),
           str(r, "reason"));
  }
}

int cmd_show(cli_globals *g, int argc, char **argv) {
  enum { O_HISTORY, O_N };
  cli_opt o[O_N] = {{"history", NULL, NULL, 0}};
  const char *pos[1];
  int npos, rc = cli_parse("show", o, O_N, argc, argv, pos, &npos, 1);
  if (rc) return rc;
  int64_t id;
  if (npos != 1) {
    cli_error("show", "expected a task id");
    return CLI_EXIT_USAGE;
  }
  if ((rc = cli_task_id("show", pos[0], &id))) return rc;
  json_t *t = NULL;
  int64_t now;
  if ((rc = fetch("show", g, id, &t, &now))) return rc;
  if (g->json) {
    print_json(t);
    json_decref(t);
    return 0;
  }
  json_t *tp = json_object_get(t, "template");
  printf("task %lld  %s/%s %s  %s (%s)\n", (long long)id, str(tp, "namespace"), str(tp, "name"),
         str(tp, "version"), str(t, "state"), str(t, "execution_status"));
  /* A schedule's task is known by its identity (schedule:NAME:SLOT). */
  if (json_is_string(json_object_get(t, "identity"))) printf("identity: %s\n", str(t, "identity"));
  printf("%-20s %-18s %9s  %-12s %s\n", "STEP", "STATE", "ATTEMPTS", "NEXT RUN", "LAST ERROR");
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(t, "steps"), i, s) {
    char att[32], when[64];
    snprintf(att, sizeof att, "%lld/%lld", (long long)json_integer_value(json_object_get(s, "attempts")),
             (long long)json_integer_value(json_object_get(s, "max_attempts")));
    const char *state = str(s, "state");
    int schedulable = (!strcmp(state, "pending") || !strcmp(state, "waiting_for_retry")) &&
                      json_integer_value(json_object_get(s, "parents_remaining")) == 0;
    const char *next =
        schedulable ? cli_relative(json_object_get(s, "run_at"), now, 1, when, sizeof when) : "-";
    if (schedulable && json_integer_value(json_object_get(s, "run_at")) <= now) next = "now";
    printf("%-20s %-18s %9s  %-12s %s\n", str(s, "name"), state, att, next, str(s, "last_error"));
  }
  print_retries(json_object_get(t, "steps"));
  print_items(json_object_get(t, "steps"));
  if (o[O_HISTORY].seen) print_transitions(t);
  json_decref(t);
  return 0;
}

int cmd_why(cli_globals *g, int argc, char **argv) {
  const char *pos[2];
  int npos, rc = cli_parse("why", NULL, 0, argc, argv, pos, &npos, 2);
  if (rc) return rc;
  int64_t id;
  if (npos != 2) {
    cli_error("why", "expected a task id and a step name");
    return CLI_EXIT_USAGE;
  }
  if ((rc = cli_task_id("why", pos[0], &id))) return rc;
  json_t *t = NULL;
  int64_t now;
  if ((rc = fetch("why", g, id, &t, &now))) return rc;
  size_t i;
  json_t *s, *found = NULL;
  json_array_foreach(json_object_get(t, "steps"), i, s) if (strcmp(str(s, "name"), pos[1]) == 0)
      found = s;
  if (found == NULL) {
    cli_error("why", "task %lld has no step \"%s\"", (long long)id, pos[1]);
    json_decref(t);
    return CLI_EXIT_USAGE;
  }
  json_t *why = json_object_get(found, "why");
  if (g->json) {
    print_json(why);
  } else {
    json_t *until = json_object_get(why, "until");
    /* A delayed start's detail says until when in its own words; the time
     * is said here, as show says it, for every reason that has one. */
    const char *detail =
        strcmp(str(why, "reason"), "scheduled") == 0 ? "a delayed start" : str(why, "detail");
    printf("%s: %s (%s)", pos[1], str(why, "reason"), detail);
    if (json_is_integer(until)) {
      char utc[40], rel[64];
      printf(" until %s, %s", cli_utc(json_integer_value(until), utc, sizeof utc),
             cli_relative(until, now, 1, rel, sizeof rel));
    }
    printf("\n");
    json_array_foreach(json_object_get(why, "blocking"), i, s)
      printf("  waiting for %s (%s)\n", str(s, "step"), str(s, "state"));
  }
  json_decref(t);
  return 0;
}
