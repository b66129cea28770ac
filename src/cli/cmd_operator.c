/* tasker retry|resolve TASK STEP, tasker cancel TASK: operator actions,
 * each one transaction. With filter flags instead of arguments, the same
 * action on every task that matches (tk_tasks_operate), shown first and
 * done only with --yes. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/query.h>
#include <tasker/workflow.h>

#define BULK_USAGE "FILTERS [--all] [--max N] [--yes] [--json]\n\n"
#define BULK_HELP                                                                            \
  "With FILTERS instead of arguments (--state STATE, --template NAME, --since WHEN,\n"      \
  "--error TEXT: as in tasker tasks), every task that matches. Without --yes it prints\n"   \
  "how many match, changes nothing and exits with status 3; with --yes it acts and says\n" \
  "what it did. No filter is refused unless --all is given; --max N refuses (changing\n"   \
  "nothing) when more than N tasks match.\n"

const char cmd_retry_usage[] =
    "usage: tasker retry TASK STEP\n"
    "       tasker retry " BULK_USAGE
    "Give a step in error a fresh set of attempts; it runs again now.\n" BULK_HELP
    "A matching task's steps in error are retried.\n";
const char cmd_resolve_usage[] =
    "usage: tasker resolve TASK STEP\n"
    "       tasker resolve " BULK_USAGE
    "Mark a pending, waiting or failed step as resolved by hand; its children run.\n" BULK_HELP
    "A matching task's steps in error are resolved.\n";
const char cmd_cancel_usage[] =
    "usage: tasker cancel TASK\n"
    "       tasker cancel " BULK_USAGE
    "Cancel a task that is not complete or cancelled (pending, in progress or in error):\n"
    "its unfinished steps are cancelled, its steps in error stay so.\n" BULK_HELP
    "A matching task that is not complete or cancelled is cancelled.\n";

enum { O_MAX = CLI_F_N, O_YES, O_ALL, O_N };

/* What each action does, as the counts print it. */
static const struct {
  const char *would; /* "N tasks match; CMD would WOULD their M failed steps" */
  const char *unit;  /* "N tasks matched; M UNITs DID" */
  const char *did;
} words[] = {
    [TK_OP_RETRY] = {"give fresh attempts to", "failed step", "will be retried now"},
    [TK_OP_RESOLVE] = {"mark resolved by hand", "failed step", "resolved manually"},
    [TK_OP_CANCEL] = {NULL, "task", "cancelled"},
};

static const char *plural(int64_t n) { return n == 1 ? "" : "s"; }

/* --json: {"action", "confirmed"} and the result's JSON (docs/cli.md). */
static int print_bulk_json(const char *cmd, int confirmed, const tk_bulk_result *r) {
  char *text;
  tk_err err;
  if (tk_bulk_result_json(r, &text, &err) != 0) {
    cli_error(cmd, "%s", err.msg);
    return CLI_EXIT_FAILURE;
  }
  json_t *v = json_pack("{s:s, s:b}", "action", cmd, "confirmed", confirmed);
  json_t *res = json_loads(text, 0, NULL);
  free(text);
  if (v && res) json_object_update(v, res);
  text = v && res ? json_dumps(v, JSON_PRESERVE_ORDER) : NULL;
  json_decref(res);
  json_decref(v);
  if (text == NULL) {
    cli_error(cmd, "out of memory");
    return CLI_EXIT_FAILURE;
  }
  puts(text);
  free(text);
  return 0;
}

/* The refusals: counts by reason on the summary line, then the kept ones
 * with their task and step, one a line. */
static void print_refusals(const tk_bulk_result *r) {
  fprintf(stderr, "; %lld refused (", (long long)r->failed);
  for (int k = 0, n = 0; k < TK_BULK_REASONS; k++)
    if (r->refused[k])
      fprintf(stderr, "%s%s: %lld", n++ ? ", " : "", tk_bulk_reason_name((tk_bulk_reason)k),
              (long long)r->refused[k]);
  fputs(")\n", stderr);
  for (int i = 0; i < r->kept; i++) {
    const tk_bulk_refusal *f = &r->first[i];
    fprintf(stderr, "  task %lld%s%s: %s\n", (long long)f->task, f->step ? ", step " : "",
            f->step ? f->step : "", f->message);
  }
  if (r->failed > r->kept)
    fprintf(stderr, "  (and %lld more)\n", (long long)(r->failed - r->kept));
}

/* The bulk form on an open store: count, then act when confirmed. */
static int bulk_on(const char *cmd, cli_globals *g, const cli_opt *o, tk_store *s,
                   tk_operator_action a) {
  tk_clock clock = tk_store_clock(s);
  int64_t now = tk_clock_now(&clock), max = 0;
  tk_task_filter f;
  int any, rc;
  if ((rc = cli_task_filter(cmd, o, now, &f, &any))) return rc;
  f.all = o[O_ALL].seen;
  tk_err err;
  /* The library's rule, in the flags' words (the filter itself was
   * checked flag by flag above). */
  if (tk_bulk_filter_check(&f, &err) != 0) {
    cli_error(cmd, "no filter: that would act on every task; choose tasks with --state, "
                   "--template, --since or --error, or give --all");
    return CLI_EXIT_USAGE;
  }
  if (o[O_MAX].seen && (rc = cli_int(cmd, &o[O_MAX], 1, INT64_MAX, &max))) return rc;
  tk_bulk_result r;
  memset(&r, 0, sizeof r);
  int64_t actions;
  if (tk_tasks_preview(s, a, &f, &r.tasks, &actions, &err) != 0) {
    cli_error(cmd, "%s", err.msg);
    return CLI_EXIT_FAILURE;
  }
  if (max > 0 && r.tasks > max) {
    cli_error(cmd, "%lld tasks match, more than --max %lld: nothing done", (long long)r.tasks,
              (long long)max);
    return CLI_EXIT_USAGE;
  }
  if (!o[O_YES].seen) {
    if (g->json) return print_bulk_json(cmd, 0, &r) ? CLI_EXIT_FAILURE : CLI_EXIT_UNCONFIRMED;
    if (r.tasks == 0) fprintf(stderr, "no tasks match; nothing to do\n");
    else if (a == TK_OP_CANCEL)
      fprintf(stderr, "%lld task%s match%s; cancel would cancel %s. Run again with --yes to do "
              "it.\n", (long long)r.tasks, plural(r.tasks), r.tasks == 1 ? "es" : "",
              r.tasks == 1 ? "it" : "them");
    else
      fprintf(stderr, "%lld task%s match%s; %s would %s their %lld failed step%s. Run again with "
              "--yes to do it.\n", (long long)r.tasks, plural(r.tasks), r.tasks == 1 ? "es" : "",
              cmd, words[a].would, (long long)actions, plural(actions));
    return CLI_EXIT_UNCONFIRMED;
  }
  rc = tk_tasks_operate(s, a, &f, max, now, &r, &err);
  if (rc != 0) {
    cli_error(cmd, "%s", err.msg);
    tk_bulk_result_free(&r);
    return rc == TK_ERANGE ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
  }
  if (g->json) {
    rc = print_bulk_json(cmd, 1, &r);
  } else {
    fprintf(stderr, "%lld task%s matched; %lld %s%s %s", (long long)r.tasks, plural(r.tasks),
            (long long)r.done, words[a].unit, plural(r.done), words[a].did);
    if (r.failed) print_refusals(&r);
    else fputc('\n', stderr);
  }
  int failed = r.failed > 0;
  tk_bulk_result_free(&r);
  return rc ? rc : failed ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

/* The one-task form on an open store. */
static int one_on(const char *cmd, tk_store *s, int64_t id, const char *step,
                  tk_operator_action a) {
  tk_clock clock = tk_store_clock(s);
  const char *task_state = NULL;
  tk_err err;
  if (tk_task_operate(s, a, id, step, tk_clock_now(&clock), &task_state, &err) != 0) {
    cli_error(cmd, "%s", err.msg);
    return err.code == TK_ENOENT || err.code == TK_ESTATE ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
  }
  fprintf(stderr, "task %lld: %s%s%s\n", (long long)id,
          a == TK_OP_RETRY     ? "step will be retried now"
          : a == TK_OP_RESOLVE ? "step resolved manually"
                               : "cancelled",
          task_state ? "; task is now " : "", task_state ? task_state : "");
  return 0;
}

static int act(const char *cmd, cli_globals *g, int argc, char **argv, tk_operator_action a) {
  cli_opt o[O_N] = {CLI_FILTER_OPTS, {"max", "N", NULL, 0}, {"yes", NULL, NULL, 0},
                    {"all", NULL, NULL, 0}};
  const char *pos[2];
  int want = a == TK_OP_CANCEL ? 1 : 2;
  int npos, rc = cli_parse(cmd, o, O_N, argc, argv, pos, &npos, 2);
  if (rc) return rc;
  int bulk = 0;
  for (int k = 0; k < O_N; k++) bulk |= o[k].seen;
  if (bulk && npos > 0) {
    cli_error(cmd, "either %s or filter flags, not both (see tasker %s --help)",
              want == 1 ? "a task id" : "a task id and a step name", cmd);
    return CLI_EXIT_USAGE;
  }
  if (!bulk && npos != want) {
    cli_error(cmd, "expected %s, or filter flags such as --state error (see tasker %s --help)",
              want == 1 ? "a task id" : "a task id and a step name", cmd);
    return CLI_EXIT_USAGE;
  }
  int64_t id = 0;
  if (!bulk && (rc = cli_task_id(cmd, pos[0], &id))) return rc;
  tk_config *cfg;
  if ((rc = cli_load_config(g, &cfg))) return rc;
  tk_store *s;
  if ((rc = cli_open_store(cmd, g, cfg, 1, &s))) {
    tk_config_free(cfg);
    return rc;
  }
  rc = bulk ? bulk_on(cmd, g, o, s, a) : one_on(cmd, s, id, want == 2 ? pos[1] : NULL, a);
  tk_store_close(s);
  tk_config_free(cfg);
  return rc;
}

int cmd_retry(cli_globals *g, int argc, char **argv) {
  return act("retry", g, argc, argv, TK_OP_RETRY);
}
int cmd_resolve(cli_globals *g, int argc, char **argv) {
  return act("resolve", g, argc, argv, TK_OP_RESOLVE);
}
int cmd_cancel(cli_globals *g, int argc, char **argv) {
  return act("cancel", g, argc, argv, TK_OP_CANCEL);
}
