/* submit_paced URL TEMPLATE N INTERVAL_MS: submit N tasks of TEMPLATE from
 * one connection, INTERVAL_MS apart, as an application that embeds tasker
 * does. bench_pg.sh measures submit-to-complete latency with it: a `tasker
 * submit` process per task would add a process start and a server
 * connection (a backend forked) to every figure. */
#include <stdio.h>
#include <stdlib.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: submit_paced URL TEMPLATE N INTERVAL_MS\n");
    return 2;
  }
  int n = atoi(argv[3]);
  int64_t interval = atoll(argv[4]);
  tk_err err;
  tk_config *cfg;
  tk_store *s;
  if (tk_config_load(NULL, &cfg, &err) != 0 || tk_store_open(argv[1], &s, &err) != 0) {
    fprintf(stderr, "submit_paced: %s\n", err.msg);
    return 1;
  }
  tk_clock clock = tk_store_clock(s);
  tk_clock sys = tk_clock_system();
  tk_submit_request req = {.template_name = argv[2]};
  int rc = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    int64_t id;
    int existed;
    if ((rc = tk_task_submit(s, cfg, &req, tk_clock_now(&clock), &id, &existed, &err)) != 0)
      fprintf(stderr, "submit_paced: %s\n", err.msg);
    tk_clock_sleep(&sys, interval);
  }
  tk_store_close(s);
  tk_config_free(cfg);
  return rc ? 1 : 0;
}
