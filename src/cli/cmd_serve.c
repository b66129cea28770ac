/* tasker serve: the HTTP API, /metrics and the dashboard (docs/api.md)
 * until SIGINT or SIGTERM. */
#include "cli.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tasker/config.h>
#include <tasker/server.h>
#include <tasker/store.h>

const char cmd_serve_usage[] =
    "usage: tasker serve [--listen ADDR:PORT] [--token-file PATH] [--worker-token-file PATH]\n"
    "\n"
    "Serve the JSON API (/api/v1), Prometheus metrics (/metrics) and the dashboard (/)\n"
    "for the store, until interrupted.\n"
    "  --listen ADDR:PORT  where to listen (default " TK_SERVER_DEFAULT_LISTEN "; [::1]:PORT for\n"
    "                      IPv6; port 0 picks a free one). An address other than loopback\n"
    "                      requires a token.\n"
    "  --token-file PATH   the token every API request but a worker's, and /metrics, must\n"
    "                      send as Authorization: Bearer TOKEN (else $TASKER_TOKEN; never a\n"
    "                      flag's value, which ps would show)\n"
    "  --worker-token-file PATH  the token outside workers send to claim steps and report\n"
    "                      on them (/api/v1/queues/..., /api/v1/claims/...; else\n"
    "                      $TASKER_WORKER_TOKEN). Those endpoints take it and no other, and\n"
    "                      refuse workers without it, but on loopback with no token at all.\n"
    "Prints \"tasker serve: listening on http://ADDR:PORT/\" on stderr once bound.\n";

/* The server's warnings and errors as timestamped lines on stderr. */
static void on_log(tk_log_level level, const char *msg, void *ud) {
  (void)ud;
  if (level < TK_LOG_WARN) return;
  char ts[40];
  cli_utc((int64_t)time(NULL) * 1000, ts, sizeof ts);
  fprintf(stderr, "%s %s %s\n", ts, level == TK_LOG_WARN ? "warn " : "error", msg);
}

int cmd_serve(cli_globals *g, int argc, char **argv) {
  enum { O_LISTEN, O_TOKEN_FILE, O_WORKER_TOKEN_FILE, O_N };
  cli_opt o[O_N] = {{"listen", "ADDR:PORT", NULL, 0},
                    {"token-file", "PATH", NULL, 0},
                    {"worker-token-file", "PATH", NULL, 0}};
  const char *pos[1];
  int npos, rc = cli_parse("serve", o, O_N, argc, argv, pos, &npos, 0);
  if (rc) return rc;
  const char *listen = o[O_LISTEN].seen ? o[O_LISTEN].value : TK_SERVER_DEFAULT_LISTEN;
  char *token, *worker_token = NULL;
  if ((rc = cli_listen_token("serve", "listen", listen, &o[O_TOKEN_FILE], &token))) return rc;
  if ((rc = cli_worker_token("serve", &o[O_WORKER_TOKEN_FILE], &worker_token))) {
    free(token);
    return rc;
  }
  if (token && worker_token && strcmp(token, worker_token) == 0) {
    cli_error("serve", "--worker-token-file: the workers' token is the operator's: give them "
                       "different tokens (a worker must not be able to act as an operator)");
    free(token);
    free(worker_token);
    return CLI_EXIT_USAGE;
  }
  tk_err err;
  tk_config *cfg = NULL;
  tk_store *s;
  if ((rc = cli_load_config(g, &cfg)) || (rc = cli_open_synced_store("serve", g, cfg, &s))) {
    tk_config_free(cfg);
    free(token);
    free(worker_token);
    return rc;
  }
  /* SIGINT and SIGTERM are blocked before the server's threads start (they
   * inherit the mask), so only sigwait below receives them. */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  tk_server_options so = {.listen = listen, .token = token, .worker_token = worker_token,
                          .store = s,
                          .store_url = cli_store_url(g, cfg), .config = cfg, .on_log = on_log};
  tk_server *srv;
  if (tk_server_start(&so, &srv, &err) != 0) {
    cli_error("serve", "%s", err.msg);
    rc = err.code == TK_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
  } else {
    fprintf(stderr, "tasker serve: listening on http://%s/\n", tk_server_address(srv));
    int sig;
    sigwait(&stop, &sig);
    tk_server_stop(srv);
    rc = CLI_EXIT_OK;
  }
  tk_store_close(s);
  tk_config_free(cfg);
  free(token);
  free(worker_token);
  return rc;
}
