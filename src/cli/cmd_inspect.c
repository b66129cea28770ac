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
#include <tasker/query.h>

const char cmd_status_usage[] =
    "usage: tasker status [--json]\n\nTasks and steps by state, ready work, next due time.\n";
const char cmd_show_usage[] =
    "usage: tasker show TASK [--history] [--json]\n"
    "       tasker show TASK --instances STEP [--after N] [--limit N] [--json]\n\n"
    "Each step: state, attempts/max, next run as a relative time, and the last error\n"
    "(a skipped step: why; a decision: what it chose; a map: its instances' counts).\n"
    "--history adds every state change of the task and its steps, oldest first.\n"
    "--instances STEP lists a map step's instances in element order, a page at a time:\n"
    "  --after N   those after item index N (the last one of the previous page)\n"
    "  --limit N   instances per page, 1 to 1000 (default 50)\n";
const char cmd_why_usage[] =
    "usage: tasker why TASK STEP [--json]\n\n"
    "Which readiness condition holds the step back, and until when. STEP may name an\n"
    "instance of a map step: process[12].\n";

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

/* What fetch reads: the store's status (task 0), a task's report, or a
 * page of a map step's instances (step set; after -1: the first page). */
typedef struct wanted {
  int64_t task;
  const char *step;
  int after, limit;
} wanted;

/* Load config and store and fetch what w names as parsed JSON. */
static int fetch(const char *cmd, cli_globals *g, wanted w, json_t **out, int64_t *now) {
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
  int r = w.step   ? tk_instances_json(s, w.task, w.step, w.after, w.limit, *now, &text, &err)
          : w.task ? tk_engine_task_json(s, w.task, *now, &text, &err)
                   : tk_engine_status_json(s, *now, &text, &err);
  if (r != 0) {
    cli_error(cmd, "%s", err.msg);
    rc = r == TK_ENOENT || r == TK_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
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

/* An integer member, for printf's %lld. */
#define N(o, key) ((long long)json_integer_value(json_object_get(o, key)))

int cmd_status(cli_globals *g, int argc, char **argv) {
  const char *pos[1];
  int npos, rc = cli_parse("status", NULL, 0, argc, argv, pos, &npos, 0);
  if (rc) return rc;
  json_t *st = NULL;
  int64_t now;
  if ((rc = fetch("status", g, (wanted){0, NULL, -1, 0}, &st, &now))) return rc;
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
    printf("  %-18s %lld items: %lld acked, %lld pending, %lld gave up\n", str(s, "name"),
           N(items, "total"), N(items, "acked"), N(items, "pending"), N(items, "gave_up"));
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

/* "10 instances: 3 done, 1 failed, 6 waiting" of a map's counts. */
static void instance_counts(json_t *c, char *buf, size_t cap) {
  snprintf(buf, cap, "%lld instances: %lld done, %lld failed, %lld waiting", N(c, "total"),
           N(c, "done"), N(c, "failed"), N(c, "waiting"));
}

/* The DETAIL of a step's line: why a skipped step was skipped, what a
 * decision chose, a map's instance counts, then the last error. */
static const char *step_detail(json_t *s, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = '\0';
  json_t *chosen = json_object_get(s, "chosen"), *counts = json_object_get(s, "instances");
  if (strcmp(str(s, "state"), "skipped") == 0) {
    len += (size_t)snprintf(buf, cap, "skipped: %s",
                            json_is_string(json_object_get(s, "skipped_reason"))
                                ? str(s, "skipped_reason")
                                : "no reason recorded");
  } else if (json_is_array(chosen)) {
    size_t i;
    json_t *b;
    len += (size_t)snprintf(buf, cap, "chose %s", json_array_size(chosen) ? "" : "none");
    json_array_foreach(chosen, i, b) if (len < cap)
      len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", json_string_value(b));
  } else if (json_is_object(counts)) {
    instance_counts(counts, buf, cap);
    len = strlen(buf);
  }
  if (json_is_string(json_object_get(s, "last_error")) && len < cap)
    snprintf(buf + len, cap - len, "%s%s", len ? "; " : "", str(s, "last_error"));
  return buf;
}

/* One instance of a map step: index, name, state, attempts, and its last
 * error or else its element (cut to one short line). */
static void print_instance(const char *indent, json_t *in) {
  char att[32], what[96];
  snprintf(att, sizeof att, "%lld/%lld", N(in, "attempts"), N(in, "max_attempts"));
  if (json_is_string(json_object_get(in, "last_error"))) {
    snprintf(what, sizeof what, "%s", str(in, "last_error"));
  } else {
    char *item = json_dumps(json_object_get(in, "item"), JSON_COMPACT | JSON_ENCODE_ANY);
    snprintf(what, sizeof what, "item %s", item ? item : "null");
    if (item && strlen(item) + 5 >= sizeof what) strcpy(what + sizeof what - 4, "...");
    free(item);
  }
  printf("%s%-6lld %-20s %-18s %9s  %s\n", indent, N(in, "item_index"), str(in, "name"),
         str(in, "state"), att, what);
}

/* The next page's command, when there is one. */
static void print_more(const char *indent, int64_t task, const char *step, json_t *next_after) {
  if (json_is_integer(next_after))
    printf("%smore: tasker show %lld --instances %s --after %lld\n", indent, (long long)task, step,
           (long long)json_integer_value(next_after));
}

/* Each map step's counts and its first instances. */
static void print_instances(int64_t task, json_t *steps) {
  size_t i, k;
  json_t *s, *in;
  int header = 0;
  json_array_foreach(steps, i, s) {
    json_t *c = json_object_get(s, "instances");
    if (!json_is_object(c)) continue;
    if (!header++) printf("\ninstances:\n");
    char counts[160];
    instance_counts(c, counts, sizeof counts);
    printf("  %-18s %s\n", str(s, "name"), counts);
    json_array_foreach(json_object_get(c, "first"), k, in) print_instance("    ", in);
    print_more("    ", task, str(s, "name"), json_object_get(c, "next_after"));
  }
}

/* A task's deadline (DESIGN §3) and, once it ended the task, so. */
static void show_deadline(json_t *t, int64_t now) {
  json_t *at = json_object_get(t, "deadline_at");
  if (!json_is_integer(at)) return;
  char utc[64], rel[64];
  const char *ended = json_string_value(json_object_get(t, "end_reason"));
  printf("deadline: %s, %s%s\n", cli_utc(json_integer_value(at), utc, sizeof utc),
         cli_relative(at, now, 1, rel, sizeof rel),
         ended && strcmp(ended, "deadline") == 0
             ? " (passed: the task ended in error, reason deadline; its unfinished steps "
               "were cancelled)"
             : "");
}

/* show TASK --instances STEP: one page of a map step's instances. */
static int show_instances(cli_globals *g, int64_t id, const cli_opt *step, const cli_opt *after,
                          const cli_opt *limit) {
  int64_t from = -1, n = 50;
  int rc;
  if ((after->seen && (rc = cli_int("show", after, 0, INT32_MAX - 1, &from))) ||
      (limit->seen && (rc = cli_int("show", limit, 1, TK_PAGE_MAX, &n))))
    return rc;
  json_t *page = NULL;
  int64_t now;
  if ((rc = fetch("show", g, (wanted){id, step->value, (int)from, (int)n}, &page, &now)))
    return rc;
  if (g->json) {
    print_json(page);
  } else {
    json_t *list = json_object_get(page, "instances"), *in;
    size_t i;
    printf("task %lld  step %s: %zu of %lld instances", (long long)id, step->value,
           json_array_size(list), N(page, "total"));
    if (from >= 0) printf(", after index %lld", (long long)from);
    printf("\n");
    if (json_array_size(list))
      printf("%-6s %-20s %-18s %9s  %s\n", "INDEX", "NAME", "STATE", "ATTEMPTS",
             "LAST ERROR OR ITEM");
    json_array_foreach(list, i, in) print_instance("", in);
    print_more("", id, step->value, json_object_get(page, "next_after"));
  }
  json_decref(page);
  return 0;
}

/* Each task step's children (DESIGN §18): "children of ship: task 5
 * (complete, attempt 1), task 7 (in_progress, attempt 2)". */
static void print_children(json_t *steps) {
  size_t i, k;
  json_t *s, *c;
  json_array_foreach(steps, i, s) {
    json_t *kids = json_object_get(s, "children");
    if (!json_array_size(kids)) continue;
    printf("children of %s:", str(s, "name"));
    json_array_foreach(kids, k, c) printf("%s task %lld (%s, attempt %lld)", k ? "," : "",
                                          N(c, "id"), str(c, "state"), N(c, "attempt"));
    printf("\n");
  }
}

int cmd_show(cli_globals *g, int argc, char **argv) {
  enum { O_HISTORY, O_INSTANCES, O_AFTER, O_LIMIT, O_N };
  cli_opt o[O_N] = {{"history", NULL, NULL, 0},
                    {"instances", "STEP", NULL, 0},
                    {"after", "N", NULL, 0},
                    {"limit", "N", NULL, 0}};
  const char *pos[1];
  int npos, rc = cli_parse("show", o, O_N, argc, argv, pos, &npos, 1);
  if (rc) return rc;
  int64_t id;
  if (npos != 1) {
    cli_error("show", "expected a task id");
    return CLI_EXIT_USAGE;
  }
  if ((rc = cli_task_id("show", pos[0], &id))) return rc;
  for (int k = O_AFTER; k <= O_LIMIT; k++) {
    if (o[k].seen && !o[O_INSTANCES].seen) {
      cli_error("show", "--%s %s: only with --instances STEP (it pages a map step's instances)",
                o[k].name, o[k].value);
      return CLI_EXIT_USAGE;
    }
  }
  if (o[O_INSTANCES].seen && o[O_HISTORY].seen) {
    cli_error("show", "--history and --instances: expected one of them (a task's history, or "
                      "a page of a map step's instances)");
    return CLI_EXIT_USAGE;
  }
  if (o[O_INSTANCES].seen) return show_instances(g, id, &o[O_INSTANCES], &o[O_AFTER], &o[O_LIMIT]);
  json_t *t = NULL;
  int64_t now;
  if ((rc = fetch("show", g, (wanted){id, NULL, -1, 0}, &t, &now))) return rc;
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
  /* The default (0) goes unsaid, as a missing identity does. */
  if (N(t, "priority") != 0) printf("priority: %lld\n", N(t, "priority"));
  show_deadline(t, now);
  json_t *parent = json_object_get(t, "parent");
  if (json_is_object(parent))
    printf("parent: task %lld step %s attempt %lld\n", N(parent, "task"), str(parent, "step"),
           N(parent, "attempt"));
  printf("%-20s %-18s %9s  %-12s %s\n", "STEP", "STATE", "ATTEMPTS", "NEXT RUN", "DETAIL");
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(t, "steps"), i, s) {
    char att[32], when[64], detail[TK_ERR_MSG_MAX + 256];
    snprintf(att, sizeof att, "%lld/%lld", N(s, "attempts"), N(s, "max_attempts"));
    const char *state = str(s, "state");
    int schedulable = (!strcmp(state, "pending") || !strcmp(state, "waiting_for_retry")) &&
                      json_integer_value(json_object_get(s, "parents_remaining")) == 0;
    const char *next =
        schedulable ? cli_relative(json_object_get(s, "run_at"), now, 1, when, sizeof when) : "-";
    if (schedulable && json_integer_value(json_object_get(s, "run_at")) <= now) next = "now";
    step_detail(s, detail, sizeof detail);
    if (!strcmp(state, "waiting")) {
      /* A wait step (DESIGN §18): NEXT RUN is its timeout (a task step
       * may have none). */
      next = N(s, "run_at") == INT64_MAX
                 ? "-"
                 : cli_relative(json_object_get(s, "run_at"), now, 1, when, sizeof when);
      size_t len = strlen(detail);
      if (!strcmp(str(s, "waits_for"), "callback"))
        snprintf(detail + len, sizeof detail - len, "%swaiting for a callback",
                 len ? "; " : "");
      else if (json_is_integer(json_object_get(s, "waits_for_child")))
        snprintf(detail + len, sizeof detail - len, "%swaiting for child task %lld",
                 len ? "; " : "", N(s, "waits_for_child"));
      else
        snprintf(detail + len, sizeof detail - len,
                 "%swaiting for a signal (tasker signal %lld %s)", len ? "; " : "",
                 (long long)id, str(s, "name"));
    }
    printf("%-20s %-18s %9s  %-12s %s\n", str(s, "name"), state, att, next, detail);
  }
  print_retries(json_object_get(t, "steps"));
  print_children(json_object_get(t, "steps"));
  print_items(json_object_get(t, "steps"));
  print_instances(id, json_object_get(t, "steps"));
  if (o[O_HISTORY].seen) print_transitions(t);
  json_decref(t);
  return 0;
}

/* The instance NAME[i] of a map step of task t (its JSON), fetched as a
 * page of one: 0 and *out (to release with *page), or CLI_EXIT_USAGE
 * when `name` names no instance. */
static int find_instance(cli_globals *g, int64_t id, json_t *t, const char *name, json_t **page,
                         json_t **out, int64_t *now) {
  const char *open = strrchr(name, '[');
  char *end;
  size_t len = open ? (size_t)(open - name) : 0;
  long i = open ? strtol(open + 1, &end, 10) : -1;
  size_t k;
  json_t *s;
  *out = NULL;
  if (open == NULL || i < 0 || i >= INT32_MAX || end == open + 1 || strcmp(end, "]") != 0)
    return CLI_EXIT_USAGE;
  json_array_foreach(json_object_get(t, "steps"), k, s) {
    const char *map = str(s, "name");
    if (!json_is_object(json_object_get(s, "map")) || strlen(map) != len ||
        strncmp(map, name, len) != 0)
      continue;
    char step[256];
    snprintf(step, sizeof step, "%s", map);
    int rc = fetch("why", g, (wanted){id, step, (int)i - 1, 1}, page, now);
    if (rc) return rc;
    json_t *in = json_array_get(json_object_get(*page, "instances"), 0);
    if (in && json_integer_value(json_object_get(in, "item_index")) == i) *out = in;
    return *out ? 0 : CLI_EXIT_USAGE;
  }
  return CLI_EXIT_USAGE;
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
  json_t *t = NULL, *page = NULL;
  int64_t now;
  if ((rc = fetch("why", g, (wanted){id, NULL, -1, 0}, &t, &now))) return rc;
  size_t i;
  json_t *s, *found = NULL;
  json_array_foreach(json_object_get(t, "steps"), i, s) if (strcmp(str(s, "name"), pos[1]) == 0)
      found = s;
  /* Not a template step: maybe an instance of a map (process[3]). */
  if (found == NULL && (rc = find_instance(g, id, t, pos[1], &page, &found, &now)) != 0) {
    if (rc == CLI_EXIT_USAGE)
      cli_error("why", "task %lld has no step \"%s\"", (long long)id, pos[1]);
    json_decref(page);
    json_decref(t);
    return rc;
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
    json_t *since = json_object_get(why, "since");
    if (json_is_integer(since)) {
      char utc[40], rel[64];
      printf(" since %s, %s;", cli_utc(json_integer_value(since), utc, sizeof utc),
             cli_relative(since, now, 1, rel, sizeof rel));
    }
    if (json_is_integer(until)) {
      char utc[40], rel[64];
      printf(" until %s, %s", cli_utc(json_integer_value(until), utc, sizeof utc),
             cli_relative(until, now, 1, rel, sizeof rel));
    }
    printf("\n");
    json_array_foreach(json_object_get(why, "blocking"), i, s)
      printf("  waiting for %s (%s)\n", str(s, "step"), str(s, "state"));
  }
  json_decref(page);
  json_decref(t);
  return 0;
}
