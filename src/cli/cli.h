/* The tasker command line: shared declarations for the subcommands.
 * The CLI is a thin layer over libtasker; it alone prints and exits. */
#ifndef TASKER_CLI_H
#define TASKER_CLI_H

#include <stdint.h>

#include <stddef.h>

struct tk_config; /* <tasker/config.h> */
struct json_t;    /* <jansson.h> */
struct tk_err;    /* <tasker/error.h> */

/* Exit statuses (sysexits-like where one fits). */
enum {
  CLI_EXIT_OK = 0,
  CLI_EXIT_FAILURE = 1, /* the operation failed */
  CLI_EXIT_USAGE = 2,   /* bad flag or value */
  CLI_EXIT_UNCONFIRMED = 3, /* a bulk action shown, not done: --yes was not given */
  CLI_EXIT_CONFIG = 78  /* bad configuration (EX_CONFIG) */
};

#define CLI_MAX_SETS 64

/* Global options, accepted before or after the subcommand. */
typedef struct cli_globals {
  const char *db;     /* --db URL */
  const char *config; /* --config FILE */
  const char *env;    /* --env NAME */
  const char *sets[CLI_MAX_SETS]; /* --set key=value, in order */
  int nsets;
  int json;           /* --json */
} cli_globals;

/* A subcommand flag. `metavar` NULL means a boolean flag. After parsing,
 * `value` holds the last value given (or "1" for a boolean) and `seen` how
 * many times it appeared. */
typedef struct cli_opt {
  const char *name;    /* without the leading "--" */
  const char *metavar; /* shown in errors; NULL for booleans */
  const char *value;
  int seen;
} cli_opt;

/* Parse argv (the subcommand's own arguments, globals already removed)
 * against opts; positionals are collected into pos (at most maxpos).
 * Returns 0, or CLI_EXIT_USAGE after printing one line naming the flag. */
int cli_parse(const char *cmd, cli_opt *opts, int nopts, int argc, char **argv,
              const char **pos, int *npos, int maxpos);

/* Typed values of a seen flag; each prints one line naming the flag and
 * the value and returns CLI_EXIT_USAGE when the value is bad, else 0. */
int cli_int(const char *cmd, const cli_opt *o, int64_t min, int64_t max, int64_t *out);
int cli_u64(const char *cmd, const cli_opt *o, uint64_t *out);
int cli_double(const char *cmd, const cli_opt *o, double min, double max, double *out);
int cli_duration(const char *cmd, const cli_opt *o, int64_t *out_ms);

struct tk_store;
struct tk_config;
/* The store URL: --db, else $TASKER_DB, else the configuration's engine.db. */
const char *cli_store_url(const cli_globals *g, const struct tk_config *cfg);
/* Open the store. initialized (every command but init): a missing store
 * is refused, naming it, and nothing is created; so is one that `tasker
 * init` has not set up. 0 (`tasker init` alone): create it when missing.
 * Prints the error and returns an exit status on failure. */
int cli_open_store(const char *cmd, const cli_globals *g, const struct tk_config *cfg,
                   int initialized, struct tk_store **out);
/* cli_open_store (initialized) for a command that runs the engine or the
 * server (run, serve): then the configuration's queue limits are given
 * to the store (tk_queue_sync), as their source is the configuration. */
int cli_open_synced_store(const char *cmd, const cli_globals *g, const struct tk_config *cfg,
                          struct tk_store **out);
/* A task id argument; prints and returns CLI_EXIT_USAGE when invalid. */
int cli_task_id(const char *cmd, const char *text, int64_t *id);

/* A time (a JSON integer, ms since the epoch) relative to `now` into buf:
 * "in 1.5s", "3m ago"; "-" when it is not an integer. The one formatter of
 * every relative time the commands print, so a wait reads the same in
 * `show`, `why` and `status`. precise (those): the exact duration below a
 * minute ("in 1.5s"), whole seconds below a day ("in 58m51s"), days and
 * hours beyond ("in 33d16h"). Otherwise (list columns) its largest whole
 * unit ("in 12s", "2d ago", "now"). */
const char *cli_relative(const struct json_t *at, int64_t now, int precise, char *buf,
                         size_t len);
/* ms since the epoch as RFC 3339 in UTC ("2026-11-25T09:00:00Z"). */
const char *cli_utc(int64_t ms, char *buf, size_t len);

/* The task filter flags of `tasks` and the bulk operator forms: the first
 * CLI_F_N entries of a command's cli_opt array, in this order. */
enum { CLI_F_STATE, CLI_F_TEMPLATE, CLI_F_SINCE, CLI_F_ERROR, CLI_F_N };
#define CLI_FILTER_OPTS                                                                   \
  {"state", "STATE", NULL, 0}, {"template", "NAME", NULL, 0},                             \
      {"since", "DURATION|RFC3339", NULL, 0}, {"error", "TEXT", NULL, 0}
struct tk_task_filter;
/* Fill *f from the filter flags o[0..CLI_F_N) (--since relative to `now`,
 * the store's clock); *any gets whether any filter was given. Values point
 * into argv. Prints one line naming the flag, the value and what was
 * expected, and returns CLI_EXIT_USAGE, when one is bad. */
int cli_task_filter(const char *cmd, const cli_opt *o, int64_t now, struct tk_task_filter *f,
                    int *any);

/* The bearer token: the first line of --token-file (`file`), else
 * $TASKER_TOKEN, else none. 0 with *out malloc'd or NULL; or prints one
 * line naming the file and returns CLI_EXIT_USAGE. */
int cli_token(const char *cmd, const cli_opt *file, char **out);
/* The workers' token of `serve`, as cli_token: --worker-token-file, else
 * $TASKER_WORKER_TOKEN, else none. */
int cli_worker_token(const char *cmd, const cli_opt *file, char **out);
/* cli_token, then the library's listen rule (tk_server_listen_allowed:
 * well formed, loopback unless a token) for `listen`, the value of
 * --`flag`: 0 with *token as cli_token gives it, or prints one line and
 * returns CLI_EXIT_USAGE (*token NULL). */
int cli_listen_token(const char *cmd, const char *flag, const char *listen, const cli_opt *file,
                     char **token);

/* Print "tasker CMD: message" on stderr. */
void cli_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Load the layered configuration for g (--config, else config/tasker.toml
 * if present; --env, else $TASKER_ENV; --set). Returns 0 with *out owned by
 * the caller (tk_config_free), or prints the error and returns
 * CLI_EXIT_CONFIG. */
int cli_load_config(cli_globals *g, struct tk_config **out);

/* A report of the store as a command prints it (cli_report.c): report
 * writes the JSON array of its rows (malloc'd) at now. */
typedef int (*cli_report_fn)(struct tk_store *s, const struct tk_config *cfg, int64_t now,
                             char **json, struct tk_err *err);
/* Command `cmd` (no arguments but the globals): the configuration and the
 * store opened, report's JSON printed as it is with --json, else as
 * print(rows, now) does, or `empty` (a line) with no row. Returns the
 * command's exit status. */
int cli_report(cli_globals *g, const char *cmd, int argc, char **argv, cli_report_fn report,
               void (*print)(struct json_t *rows, int64_t now), const char *empty);

/* The profile `name` of cfg, or print "tasker CMD: unknown profile ..."
 * listing the known ones and return CLI_EXIT_USAGE. */
struct tk_backoff_policy;
int cli_config_profile(const char *cmd, const struct tk_config *cfg, const char *name,
                       const struct tk_backoff_policy **out);

/* tasker submit --contexts PATH ("-": stdin): a task per line, each a
 * submission like `like` with the line's context and identity, in one
 * transaction (cmd_submit_many.c). Prints the ids or the error; returns
 * the exit status. */
struct tk_store;
struct tk_submit_request;
int cli_submit_contexts(struct tk_store *s, const struct tk_config *cfg,
                        const struct tk_submit_request *like, const char *path);

/* Subcommands: each returns the process exit status; each has a usage
 * text that `tasker CMD --help` prints. */
int cmd_backoff(cli_globals *g, int argc, char **argv);
extern const char cmd_backoff_usage[];
int cmd_config(cli_globals *g, int argc, char **argv);
extern const char cmd_config_usage[];
int cmd_init(cli_globals *g, int argc, char **argv);
extern const char cmd_init_usage[];
int cmd_template(cli_globals *g, int argc, char **argv);
extern const char cmd_template_usage[];
int cmd_submit(cli_globals *g, int argc, char **argv);
extern const char cmd_submit_usage[];
int cmd_schedule(cli_globals *g, int argc, char **argv);
extern const char cmd_schedule_usage[];
int cmd_prune(cli_globals *g, int argc, char **argv);
extern const char cmd_prune_usage[];
int cmd_run(cli_globals *g, int argc, char **argv);
extern const char cmd_run_usage[];
int cmd_queues(cli_globals *g, int argc, char **argv);
extern const char cmd_queues_usage[];
int cmd_budgets(cli_globals *g, int argc, char **argv);
extern const char cmd_budgets_usage[];
int cmd_status(cli_globals *g, int argc, char **argv);
extern const char cmd_status_usage[];
int cmd_show(cli_globals *g, int argc, char **argv);
extern const char cmd_show_usage[];
int cmd_why(cli_globals *g, int argc, char **argv);
extern const char cmd_why_usage[];
int cmd_retry(cli_globals *g, int argc, char **argv);
extern const char cmd_retry_usage[];
int cmd_resolve(cli_globals *g, int argc, char **argv);
extern const char cmd_resolve_usage[];
int cmd_cancel(cli_globals *g, int argc, char **argv);
extern const char cmd_cancel_usage[];
int cmd_signal(cli_globals *g, int argc, char **argv);
extern const char cmd_signal_usage[];
int cmd_tasks(cli_globals *g, int argc, char **argv);
extern const char cmd_tasks_usage[];
int cmd_serve(cli_globals *g, int argc, char **argv);
extern const char cmd_serve_usage[];
int cmd_simulate(cli_globals *g, int argc, char **argv);
extern const char cmd_simulate_usage[];
int cmd_toml_decode(cli_globals *g, int argc, char **argv);
extern const char cmd_toml_decode_usage[];

#endif
