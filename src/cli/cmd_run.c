/* tasker run: be an orchestrator until stopped or, with --until-idle, until
 * nothing an orchestrator runs is left. */
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include <tasker/config.h>
#include <tasker/engine.h>
#include <tasker/metrics.h>
#include <tasker/queue.h>
#include <tasker/server.h>

const char cmd_run_usage[] =
    "usage: tasker run [--workers N] [--until-idle] [--id NAME] [--events FILE] [--seed S]\n"
    "                  [--metrics ADDR:PORT [--token-file PATH]]\n"
    "\n"
    "Claim ready steps, run their handlers on N workers (default: engine.workers),\n"
    "and record every outcome, retrying failures under their backoff profile.\n"
    "  --until-idle   exit once nothing an orchestrator runs is ready, running or waiting\n"
    "                 for a retry (steps left to outside workers are counted on stderr)\n"
    "  --id NAME      this orchestrator's id (default HOST-PID-RANDOM)\n"
    "  --events FILE  append one JSON line per state change to FILE ('-' = stdout)\n"
    "  --metrics ADDR:PORT  serve this orchestrator's Prometheus metrics at\n"
    "                 http://ADDR:PORT/metrics while it runs (port 0 picks one; an address\n"
    "                 other than loopback requires a token)\n"
    "  --token-file PATH  the token every /metrics request must send as Authorization:\n"
    "                 Bearer TOKEN (else $TASKER_TOKEN), as for tasker serve\n"
    "On a terminal a live one-line summary is shown; otherwise log lines.\n";

static tk_engine *running_engine; /* for the signal handler only */
/* SIGINT or SIGTERM came before the engine ran: it stops as it starts. */
static volatile sig_atomic_t stop_asked;

static void on_signal(int sig) {
  (void)sig;
  stop_asked = 1;
  if (running_engine) tk_engine_stop(running_engine);
}

/* From the start, so that a stop asked while the store is being opened
 * (a service manager's stop right after its start) ends the run cleanly,
 * exit 0, instead of killing the process by the signal's default. */
static void catch_stop_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART; /* the store's open is not cut short by it */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

typedef struct run_view {
  FILE *events;
  int tty;
  tk_engine *engine;
  int64_t last_draw_ns;
} run_view;

static void draw(run_view *v, int force) {
  int64_t now = tk_monotonic_ns();
  if (!force && now - v->last_draw_ns < 100000000) return;
  v->last_draw_ns = now;
  tk_engine_stats s = tk_engine_stats_get(v->engine);
  fprintf(stderr,
          "\r\033[K%lld claimed  %lld done  %lld retrying  %lld failed  %lld exhausted  "
          "%lld running  tasks: %lld complete, %lld failed",
          (long long)s.claimed, (long long)s.completed, (long long)s.retried, (long long)s.failed,
          (long long)s.exhausted, (long long)s.in_flight, (long long)s.tasks_completed,
          (long long)s.tasks_failed);
  fflush(stderr);
}

static void on_event(const char *line, void *ud) {
  run_view *v = ud;
  if (v->events) {
    fputs(line, v->events);
    fputc('\n', v->events);
  }
  if (v->tty) draw(v, 0);
}

static void on_log(tk_log_level level, const char *msg, void *ud) {
  run_view *v = ud;
  static const char *const names[] = {"debug", "info", "warn", "error"};
  if (v->tty) {
    if (level < TK_LOG_WARN) return; /* the summary line says it */
    fprintf(stderr, "\r\033[K");
  }
  char ts[40];
  cli_utc((int64_t)time(NULL) * 1000, ts, sizeof ts);
  fprintf(stderr, "%s %-5s %s\n", ts, names[level], msg);
  if (v->tty) draw(v, 1);
}

/* Attach metrics to e and serve them at listen; prints and returns nonzero
 * on failure (*m freed by the caller either way). */
static int start_metrics(const char *listen, const char *token, tk_engine *e, run_view *v,
                         tk_metrics **m, tk_server **srv) {
  tk_err err;
  tk_server_options so = {.listen = listen, .token = token, .on_log = on_log, .log_ud = v};
  if (tk_metrics_new(m, &err) != 0 || tk_metrics_attach(*m, e, &err) != 0 ||
      (so.metrics = *m, tk_server_start(&so, srv, &err)) != 0) {
    cli_error("run", "--metrics: %s", err.msg);
    return 1;
  }
  fprintf(stderr, "tasker run: metrics on http://%s/metrics\n", tk_server_address(*srv));
  return 0;
}

/* After `run --until-idle` went idle: a note on stderr of the steps left
 * to outside workers (the worker queues' ready, scheduled and in progress),
 * by queue, which no orchestrator runs and which it did not wait for. */
static void note_worker_steps(tk_store *s) {
  tk_clock clock = tk_store_clock(s);
  char *text = NULL;
  tk_err err;
  if (tk_queues_json(s, tk_clock_now(&clock), &text, &err) != 0) {
    fprintf(stderr, "tasker run: idle; the steps left to workers could not be read: %s\n",
            err.msg);
    return;
  }
  json_t *queues = json_loads(text, 0, NULL);
  free(text);
  char by_queue[1024] = "";
  size_t used = 0, i;
  long long total = 0;
  json_t *q;
  json_array_foreach(queues, i, q) {
    if (!json_is_true(json_object_get(q, "worker"))) continue;
    long long n = json_integer_value(json_object_get(q, "ready")) +
                  json_integer_value(json_object_get(q, "scheduled")) +
                  json_integer_value(json_object_get(q, "in_progress"));
    if (n == 0) continue;
    total += n;
    if (used < sizeof by_queue) {
      int w = snprintf(by_queue + used, sizeof by_queue - used, "%squeue %s: %lld",
                       used ? ", " : "", json_string_value(json_object_get(q, "name")), n);
      used += w > 0 ? (size_t)w : 0;
    }
  }
  json_decref(queues);
  if (total > 0)
    fprintf(stderr, "tasker run: idle; %lld step%s for workers (%s)\n", total,
            total == 1 ? " waits" : "s wait", by_queue);
}

int cmd_run(cli_globals *g, int argc, char **argv) {
  enum { O_WORKERS, O_IDLE, O_ID, O_EVENTS, O_SEED, O_METRICS, O_TOKEN_FILE, O_N };
  cli_opt o[O_N] = {{"workers", "N", NULL, 0}, {"until-idle", NULL, NULL, 0},
                    {"id", "NAME", NULL, 0}, {"events", "FILE", NULL, 0}, {"seed", "S", NULL, 0},
                    {"metrics", "ADDR:PORT", NULL, 0}, {"token-file", "PATH", NULL, 0}};
  const char *pos[1];
  int npos, rc = cli_parse("run", o, O_N, argc, argv, pos, &npos, 0);
  if (rc) return rc;
  int64_t workers = -1;
  uint64_t seed = 0;
  if (o[O_WORKERS].seen && (rc = cli_int("run", &o[O_WORKERS], 0, 1024, &workers))) return rc;
  if (o[O_SEED].seen && (rc = cli_u64("run", &o[O_SEED], &seed))) return rc;
  if (o[O_TOKEN_FILE].seen && !o[O_METRICS].seen) {
    cli_error("run", "--token-file: only with --metrics (the token its /metrics asks for)");
    return CLI_EXIT_USAGE;
  }
  char *token = NULL;
  if (o[O_METRICS].seen &&
      (rc = cli_listen_token("run", "metrics", o[O_METRICS].value, &o[O_TOKEN_FILE], &token)))
    return rc;
  catch_stop_signals();
  tk_config *cfg;
  if ((rc = cli_load_config(g, &cfg))) {
    free(token);
    return rc;
  }
  tk_store *s;
  if ((rc = cli_open_synced_store("run", g, cfg, &s))) {
    tk_config_free(cfg);
    free(token);
    return rc;
  }
  run_view view = {.tty = isatty(2)};
  if (o[O_EVENTS].seen) {
    view.events = strcmp(o[O_EVENTS].value, "-") == 0 ? stdout : fopen(o[O_EVENTS].value, "a");
    if (view.events == NULL) {
      cli_error("run", "--events: cannot open \"%s\" for appending", o[O_EVENTS].value);
      tk_store_close(s);
      tk_config_free(cfg);
      free(token);
      return CLI_EXIT_USAGE;
    }
    setvbuf(view.events, NULL, _IOLBF, 0);
  }
  tk_engine_options eo = {
      .store = s, .config = cfg, .seed = seed, .id = o[O_ID].value, .workers = (int)workers,
      .on_event = on_event, .event_ud = &view, .on_log = on_log, .log_ud = &view,
  };
  tk_engine *e;
  tk_err err;
  tk_metrics *metrics = NULL;
  tk_server *srv = NULL;
  if (tk_engine_new(&eo, &e, &err) != 0) {
    cli_error("run", "%s", err.msg);
    rc = CLI_EXIT_FAILURE;
  } else if (o[O_METRICS].seen && start_metrics(o[O_METRICS].value, token, e, &view, &metrics, &srv)) {
    rc = CLI_EXIT_FAILURE;
    tk_engine_free(e);
  } else {
    view.engine = e;
    running_engine = e; /* then the flag: a signal between the two stops it twice */
    if (stop_asked) tk_engine_stop(e);
    if (tk_engine_run(e, o[O_IDLE].seen, &err) != 0) {
      if (view.tty) fputc('\n', stderr);
      cli_error("run", "%s", err.msg);
      rc = CLI_EXIT_FAILURE;
    } else if (view.tty) {
      draw(&view, 1);
      fputc('\n', stderr);
    } else {
      tk_engine_stats st = tk_engine_stats_get(e);
      fprintf(stderr,
              "run finished: %lld claimed, %lld completed, %lld retries scheduled "
              "(%lld deferred by retry budgets), %lld failed, %lld exhausted, %lld fenced, "
              "%lld leases expired; tasks: %lld complete, %lld failed\n",
              (long long)st.claimed, (long long)st.completed, (long long)st.retried,
              (long long)st.retries_deferred, (long long)st.failed, (long long)st.exhausted, (long long)st.fenced,
              (long long)st.lease_expired, (long long)st.tasks_completed,
              (long long)st.tasks_failed);
    }
    /* Idle, not stopped by a signal: what it left to outside workers. */
    if (rc == 0 && o[O_IDLE].seen && !stop_asked) note_worker_steps(s);
    running_engine = NULL;
    tk_server_stop(srv); /* before the engine its metrics read */
    tk_engine_free(e);
  }
  tk_metrics_free(metrics);
  if (view.events && view.events != stdout) fclose(view.events);
  tk_store_close(s);
  tk_config_free(cfg);
  free(token);
  return rc;
}
