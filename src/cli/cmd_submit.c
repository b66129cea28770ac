/* tasker submit NAME: create a task; its id alone goes to stdout. */
#include "cli.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/duration.h>
#include <tasker/query.h>
#include <tasker/workflow.h>

const char cmd_submit_usage[] =
    "usage: tasker submit NAME [--version V] [--context JSON|@FILE] [--identity KEY]\n"
    "                          [--count N] [--events FILE] [--at TIME | --in DURATION]\n"
    "                          [--priority N] [--deadline DURATION]\n"
    "       tasker submit NAME --contexts FILE [--version V] [--events FILE]\n"
    "                          [--at TIME | --in DURATION] [--priority N]\n"
    "                          [--deadline DURATION]\n"
    "\n"
    "Create a task from template NAME (or NAMESPACE/NAME), newest version unless\n"
    "--version is given, and print its id on stdout. With --identity, submitting\n"
    "the same key again prints the existing task's id instead (and says so on\n"
    "stderr). --count N submits N tasks with that context (one transaction\n"
    "each; their ids one per line). --events FILE appends a task.created event\n"
    "(JSON line) per task to FILE. --at TIME (RFC 3339, e.g. 2026-11-25T09:00:00Z)\n"
    "or --in DURATION (e.g. 3h) delays the task's start: its first steps run then.\n"
    "--priority N (-1000 to 1000, default 0): among ready steps, those of tasks\n"
    "of higher priority are claimed first. --deadline DURATION (e.g. 2h; over the\n"
    "template's deadline): that long after the submit, the task's unfinished\n"
    "steps are cancelled and it ends in error, reason \"deadline\".\n"
    "\n"
    "--contexts FILE (- for stdin) submits one task per line of FILE, all in one\n"
    "transaction: each line a JSON object {\"context\": {...}, \"identity\": \"KEY\",\n"
    "\"priority\": N} (each optional; priority: --priority's, else 0). A bad\n"
    "line is named with its number and nothing is submitted. The ids go to\n"
    "stdout one per line, in the lines' order; an identity that exists (or an\n"
    "earlier line's) prints its task's id, as --identity does. On a terminal,\n"
    "progress goes to stderr.\n";

/* The start time of --at TIME (RFC 3339 only: tk_time_arg_parse would take
 * a bare duration as "that long ago") or --in DURATION (from now); 0 for
 * neither. Exit code, with the message printed. */
static int start_time(const cli_opt *at, const cli_opt *in, int64_t now, int64_t *start) {
  tk_err err;
  *start = 0;
  if (at->seen && in->seen) {
    cli_error("submit", "--at and --in: give one start time");
    return CLI_EXIT_USAGE;
  }
  if (at->seen) {
    const char *t = at->value;
    /* A date starts with a four-digit year and a dash; no duration does. */
    if (strlen(t) <= 4 || t[4] != '-' || tk_time_arg_parse(t, now, start, &err) != 0) {
      cli_error("submit", "--at: invalid value \"%s\": expected an RFC 3339 time such as "
                "2026-11-25T09:00:00Z or 2026-11-25T10:00:00+01:00 (for a delay use --in)", t);
      return CLI_EXIT_USAGE;
    }
  } else if (in->seen) {
    int64_t d;
    int rc = cli_duration("submit", in, &d);
    if (rc) return rc;
    if (d > INT64_MAX - now) {
      cli_error("submit", "--in: invalid duration \"%s\": too large", in->value);
      return CLI_EXIT_USAGE;
    }
    *start = now + d;
  }
  return 0;
}

/* Read a whole file for --context @FILE. */
static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (len + 1 == cap) {
      char *b = realloc(buf, cap *= 2);
      if (b == NULL) free(buf);
      buf = b;
    }
  }
  fclose(f);
  if (buf) buf[len] = '\0';
  return buf;
}

/* --events FILE: the library's task.created event (DESIGN §11), through
 * the JSON-lines observer, appended as one line. */
typedef struct created_sink {
  const char *path;
  int failed;
} created_sink;

static void append_line(const char *line, void *ud) {
  created_sink *c = ud;
  FILE *f = fopen(c->path, "a");
  int ok = f && fprintf(f, "%s\n", line) > 0;
  if (f && fclose(f) != 0) ok = 0;
  if (!ok) c->failed = 1;
}

/* --deadline DURATION in ms (tk_deadline_check's range). Exit code, with
 * the message printed. */
static int deadline_arg(const char *text, int64_t *ms) {
  tk_err err;
  if (tk_duration_parse(text, ms, &err) != 0 || tk_deadline_check(*ms, text, &err) != 0) {
    cli_error("submit", "--deadline: %s", err.msg);
    return CLI_EXIT_USAGE;
  }
  return 0;
}

int cmd_submit(cli_globals *g, int argc, char **argv) {
  enum { O_VERSION, O_CONTEXT, O_IDENTITY, O_COUNT, O_EVENTS, O_AT, O_IN, O_CONTEXTS,
         O_PRIORITY, O_DEADLINE, O_N };
  cli_opt o[O_N] = {{"version", "V", NULL, 0},     {"context", "JSON", NULL, 0},
                    {"identity", "KEY", NULL, 0},  {"count", "N", NULL, 0},
                    {"events", "FILE", NULL, 0},   {"at", "TIME", NULL, 0},
                    {"in", "DURATION", NULL, 0},   {"contexts", "FILE", NULL, 0},
                    {"priority", "N", NULL, 0},    {"deadline", "DURATION", NULL, 0}};
  const char *pos[1];
  int npos, rc = cli_parse("submit", o, O_N, argc, argv, pos, &npos, 1);
  if (rc) return rc;
  if (npos != 1) {
    cli_error("submit", "expected the template's name (see tasker template list)");
    return CLI_EXIT_USAGE;
  }
  int64_t count = 1;
  if (o[O_COUNT].seen && (rc = cli_int("submit", &o[O_COUNT], 1, 10000000, &count))) return rc;
  if (count > 1 && o[O_IDENTITY].seen) {
    cli_error("submit", "--count %lld with --identity: one identity names one task",
              (long long)count);
    return CLI_EXIT_USAGE;
  }
  for (int k = O_CONTEXT; k <= O_COUNT && o[O_CONTEXTS].seen; k++)
    if (o[k].seen) {
      cli_error("submit", "--contexts with --%s: each line gives its task's context and "
                "identity", o[k].name);
      return CLI_EXIT_USAGE;
    }
  int64_t priority = 0;
  if (o[O_PRIORITY].seen &&
      (rc = cli_int("submit", &o[O_PRIORITY], TK_PRIORITY_MIN, TK_PRIORITY_MAX, &priority)))
    return rc;
  int64_t deadline_ms = 0;
  if (o[O_DEADLINE].seen && (rc = deadline_arg(o[O_DEADLINE].value, &deadline_ms))) return rc;
  char *context = NULL;
  if (o[O_CONTEXT].seen && o[O_CONTEXT].value[0] == '@') {
    context = read_file(o[O_CONTEXT].value + 1);
    if (context == NULL) {
      cli_error("submit", "--context: cannot read \"%s\"", o[O_CONTEXT].value + 1);
      return CLI_EXIT_USAGE;
    }
  }
  tk_config *cfg;
  if ((rc = cli_load_config(g, &cfg))) {
    free(context);
    return rc;
  }
  tk_store *s;
  if ((rc = cli_open_store("submit", g, cfg, 1, &s))) {
    tk_config_free(cfg);
    free(context);
    return rc;
  }
  tk_submit_request req = {
      .template_name = pos[0],
      .version = o[O_VERSION].value,
      .context_json = context ? context : o[O_CONTEXT].value,
      .identity = o[O_IDENTITY].value,
      .priority = (int)priority,
      .deadline_ms = deadline_ms,
  };
  created_sink created = {o[O_EVENTS].value, 0};
  tk_jsonl_sink sink = {append_line, &created};
  if (o[O_EVENTS].seen) {
    req.observer = &tk_observer_jsonl;
    req.observer_ud = &sink;
  }
  tk_clock clock = tk_store_clock(s);
  /* The start is fixed once, from the store's clock: --count N tasks start
   * together. */
  if ((rc = start_time(&o[O_AT], &o[O_IN], tk_clock_now(&clock), &req.start_at))) count = 0;
  if (rc == 0 && o[O_CONTEXTS].seen) {
    count = 0;
    rc = cli_submit_contexts(s, cfg, &req, o[O_CONTEXTS].value);
    if (rc == 0 && created.failed)
      fprintf(stderr, "tasker submit: --events: cannot append to \"%s\" (the tasks were "
              "created)\n", o[O_EVENTS].value);
  }
  for (int64_t k = 0; k < count && rc == 0; k++) {
    int64_t id = 0, now = tk_clock_now(&clock);
    int existed = 0;
    tk_err err;
    created.failed = 0;
    if (tk_task_submit(s, cfg, &req, now, &id, &existed, &err) != 0) {
      cli_error("submit", "%s", err.msg);
      if (k > 0) fprintf(stderr, "tasker submit: %lld of %lld tasks were submitted\n",
                         (long long)k, (long long)count);
      /* An unknown template or version is a usage error, as an unknown
       * task is for show, why, retry, resolve and cancel. */
      rc = err.code == TK_EINVAL || err.code == TK_ENOENT ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
      break;
    }
    printf("%lld\n", (long long)id);
    if (existed)
      fprintf(stderr, "task %lld already exists with identity \"%s\"; nothing submitted\n",
              (long long)id, req.identity);
    else if (created.failed)
      fprintf(stderr, "tasker submit: --events: cannot append to \"%s\" (task %lld was created)\n",
              o[O_EVENTS].value, (long long)id);
  }
  tk_store_close(s);
  tk_config_free(cfg);
  free(context);
  return rc;
}
