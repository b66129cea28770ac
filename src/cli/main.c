/* tasker: entry point, global options and subcommand dispatch. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include <tasker/store.h>
#include <tasker/version.h>

typedef struct cli_command {
  const char *name;
  int (*run)(cli_globals *g, int argc, char **argv);
  const char *summary;
  const char *usage;
} cli_command;

static const cli_command commands[] = {
    {"init", cmd_init, "create the store or apply its missing migrations", cmd_init_usage},
    {"template", cmd_template, "add or list workflow templates", cmd_template_usage},
    {"submit", cmd_submit, "create a task from a template; prints its id", cmd_submit_usage},
    {"schedule", cmd_schedule, "add, list or remove cron schedules that submit a template",
     cmd_schedule_usage},
    {"run", cmd_run, "run as an orchestrator: claim, execute, record, retry", cmd_run_usage},
    {"status", cmd_status, "tasks and steps by state", cmd_status_usage},
    {"queues", cmd_queues, "each queue: ready, in progress, limits, oldest wait, workers",
     cmd_queues_usage},
    {"budgets", cmd_budgets, "each retry budget: its figures, what it allows now, deferred retries",
     cmd_budgets_usage},
    {"tasks", cmd_tasks, "list tasks by state, template, age or error text", cmd_tasks_usage},
    {"show", cmd_show, "a task and each of its steps", cmd_show_usage},
    {"why", cmd_why, "why a step is not running, and until when", cmd_why_usage},
    {"retry", cmd_retry, "retry a failed step with fresh attempts", cmd_retry_usage},
    {"resolve", cmd_resolve, "mark a step as resolved by hand", cmd_resolve_usage},
    {"cancel", cmd_cancel, "cancel a task", cmd_cancel_usage},
    {"signal", cmd_signal, "send a signal to a wait step: its results, or a failure",
     cmd_signal_usage},
    {"prune", cmd_prune, "remove finished tasks older than a cutoff", cmd_prune_usage},
    {"serve", cmd_serve, "serve the HTTP API, /metrics and the dashboard", cmd_serve_usage},
    {"backoff", cmd_backoff, "print the retry delays a backoff policy produces", cmd_backoff_usage},
    {"config", cmd_config, "check a configuration file or show the effective settings",
     cmd_config_usage},
    {"simulate", cmd_simulate, "compare retry policies on one contended slot (simulated time)",
     cmd_simulate_usage},
    {"toml-decode", cmd_toml_decode, "decode TOML on stdin to tagged JSON (toml-test format)",
     cmd_toml_decode_usage},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

/* Usage texts live beside each command. */
static void usage(FILE *f) {
  fprintf(f,
          "usage: tasker [global options] COMMAND [options]\n"
          "\n"
          "Durable workflows with step-level retry.\n"
          "\n"
          "Commands:\n");
  for (size_t i = 0; i < NCOMMANDS; i++)
    fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].summary);
  fprintf(f,
          "\n"
          "Global options (before or after the command):\n"
          "  --db URL          store: sqlite:PATH or postgresql://... (default $TASKER_DB)\n"
          "  --config FILE     configuration file (default config/tasker.toml)\n"
          "  --env NAME        environment overlay (default $TASKER_ENV)\n"
          "  --set KEY=VALUE   override one setting (repeatable)\n"
          "  --json            machine-readable output\n"
          "  --help            this help; `tasker COMMAND --help` for a command\n"
          "  --version         print the version\n");
}

/* If argv[*i] is a global option, consume it (and its value) into g.
 * Returns 1 if consumed, 0 if not a global, -1 after printing an error. */
static int take_global(cli_globals *g, int argc, char **argv, int *i) {
  static const char *const valued[] = {"db", "config", "env", "set"};
  const char *a = argv[*i];
  if (strncmp(a, "--", 2) != 0) return 0;
  const char *name = a + 2;
  if (strcmp(name, "json") == 0) {
    g->json = 1;
    return 1;
  }
  for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) {
    size_t len = strlen(valued[k]);
    if (strncmp(name, valued[k], len) != 0 || (name[len] != '\0' && name[len] != '=')) continue;
    const char *value;
    if (name[len] == '=') value = name + len + 1;
    else if (*i + 1 < argc) value = argv[++*i];
    else {
      cli_error(NULL, "flag --%s needs a value", valued[k]);
      return -1;
    }
    switch (k) {
    case 0:
      /* Empty is a mistake (an unset variable), not "the default store". */
      if (*value == '\0') {
        cli_error(NULL, "--db: empty value: expected a store URL (sqlite:PATH or "
                        "postgresql://...)");
        return -1;
      }
      g->db = value;
      break;
    case 1: g->config = value; break;
    case 2: g->env = value; break;
    case 3:
      if (strchr(value, '=') == NULL) {
        cli_error(NULL, "--set: invalid value \"%s\": expected KEY=VALUE", value);
        return -1;
      }
      if (g->nsets == CLI_MAX_SETS) {
        cli_error(NULL, "--set: at most %d overrides are allowed", CLI_MAX_SETS);
        return -1;
      }
      g->sets[g->nsets++] = value;
      break;
    }
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  tk_store_process_init();
  cli_globals g;
  memset(&g, 0, sizeof g);
  const cli_command *cmd = NULL;
  int want_help = 0;
  /* Subcommand arguments with the globals removed; argv order kept. */
  char *rest[argc > 0 ? argc : 1];
  int nrest = 0;
  int passthrough = 0;
  for (int i = 1; i < argc; i++) {
    if (!passthrough) {
      if (strcmp(argv[i], "--") == 0) {
        passthrough = 1;
        if (cmd != NULL) rest[nrest++] = argv[i];
        continue;
      }
      int r = take_global(&g, argc, argv, &i);
      if (r < 0) return CLI_EXIT_USAGE;
      if (r > 0) continue;
      if (cmd == NULL && (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0)) {
        printf("tasker %s\n", tk_version());
        return CLI_EXIT_OK;
      }
      if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
        want_help = 1;
        continue;
      }
    }
    if (cmd == NULL) {
      for (size_t k = 0; k < NCOMMANDS; k++)
        if (strcmp(argv[i], commands[k].name) == 0) cmd = &commands[k];
      if (cmd == NULL) {
        if (argv[i][0] == '-') cli_error(NULL, "unknown flag \"%s\" (see tasker --help)", argv[i]);
        else cli_error(NULL, "unknown command \"%s\" (see tasker --help)", argv[i]);
        return CLI_EXIT_USAGE;
      }
      continue;
    }
    rest[nrest++] = argv[i];
  }
  if (cmd == NULL) {
    usage(want_help ? stdout : stderr);
    return want_help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
  }
  if (want_help) {
    fputs(cmd->usage, stdout);
    return CLI_EXIT_OK;
  }
  return cmd->run(&g, nrest, rest);
}
