/* tasker prune: remove finished tasks older than a cutoff (DESIGN §16). */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/query.h>
#include <tasker/retention.h>

const char cmd_prune_usage[] =
    "usage: tasker prune --finished-before DURATION|TIME [--state STATE[,STATE...]]\n"
    "                    [--batch N] [--dry-run]\n"
    "\n"
    "Remove the tasks that finished more than DURATION ago (e.g. 720h for 30 days)\n"
    "or before an RFC 3339 TIME, with their steps, attempts, transitions and batch\n"
    "items, and print how many rows of each went. STATE is complete, error or\n"
    "cancelled (default: all three). Each batch of N tasks (default 500) is one\n"
    "transaction. --dry-run prints what would be removed and changes nothing.\n"
    "A task that is not finished is never removed.\n";

/* --state's comma-separated list into the options' cutoffs. */
static int states(const cli_opt *o, int64_t before, tk_prune_options *p) {
  if (!o->seen) {
    p->complete_before = p->error_before = p->cancelled_before = before;
    return 0;
  }
  const char *s = o->value;
  while (*s) {
    size_t n = strcspn(s, ",");
    if (n == 8 && strncmp(s, "complete", n) == 0) p->complete_before = before;
    else if (n == 5 && strncmp(s, "error", n) == 0) p->error_before = before;
    else if (n == 9 && strncmp(s, "cancelled", n) == 0) p->cancelled_before = before;
    else {
      cli_error("prune", "--state: invalid value \"%.*s\": expected complete, error or "
                "cancelled (a finished state; several separated by commas)", (int)n, s);
      return CLI_EXIT_USAGE;
    }
    s += n + (s[n] == ',');
  }
  return 0;
}

int cmd_prune(cli_globals *g, int argc, char **argv) {
  enum { O_BEFORE, O_STATE, O_BATCH, O_DRY, O_N };
  cli_opt o[O_N] = {{"finished-before", "DURATION|TIME", NULL, 0},
                    {"state", "STATE", NULL, 0},
                    {"batch", "N", NULL, 0},
                    {"dry-run", NULL, NULL, 0}};
  int npos, rc = cli_parse("prune", o, O_N, argc, argv, NULL, &npos, 0);
  if (rc) return rc;
  if (!o[O_BEFORE].seen) {
    cli_error("prune", "--finished-before is required (e.g. --finished-before 720h)");
    return CLI_EXIT_USAGE;
  }
  int64_t batch = 500;
  if (o[O_BATCH].seen && (rc = cli_int("prune", &o[O_BATCH], 1, 100000, &batch))) return rc;
  tk_config *cfg;
  if ((rc = cli_load_config(g, &cfg))) return rc;
  tk_store *s;
  if ((rc = cli_open_store("prune", g, cfg, 1, &s))) {
    tk_config_free(cfg);
    return rc;
  }
  tk_clock clock = tk_store_clock(s);
  int64_t now = tk_clock_now(&clock), before;
  tk_err err;
  tk_prune_options p = {.batch = (int)batch, .dry_run = o[O_DRY].seen > 0};
  tk_prune_counts c;
  if (tk_time_arg_parse(o[O_BEFORE].value, now, &before, &err) != 0) {
    cli_error("prune", "--finished-before: %s", err.msg);
    rc = CLI_EXIT_USAGE;
  } else if ((rc = states(&o[O_STATE], before, &p)) == 0 && tk_prune(s, &p, &c, &err) != 0) {
    cli_error("prune", "%s", err.msg);
    rc = CLI_EXIT_FAILURE;
  }
  if (rc == 0 && g->json)
    printf("{\"dry_run\": %s, \"finished_before\": %lld, \"tasks\": %lld, \"steps\": %lld, "
           "\"attempts\": %lld, \"transitions\": %lld, \"items\": %lld}\n",
           p.dry_run ? "true" : "false", (long long)before, (long long)c.tasks,
           (long long)c.steps, (long long)c.attempts, (long long)c.transitions,
           (long long)c.items);
  else if (rc == 0)
    printf("%s %lld tasks, %lld steps, %lld attempts, %lld transitions, %lld items\n",
           p.dry_run ? "would remove" : "removed", (long long)c.tasks, (long long)c.steps,
           (long long)c.attempts, (long long)c.transitions, (long long)c.items);
  tk_store_close(s);
  tk_config_free(cfg);
  return rc;
}
