/* The http handler's benchmarks (issue 12), printed as tables:
 *   throughput  one-step tasks whose step is a GET to a loopback server that
 *               answers at once (tests/common/http_stub, in a process of its
 *               own), 4 workers on SQLite. Rows: requests on the reactor
 *               (engine.max_async 1000, the default, and 256) against a
 *               keep-alive server and against one that closes every
 *               connection, and, for comparison, blocking on the workers
 *               (max_async = 0: a new connection per attempt). Goal:
 *               >= 10,000 steps/s on the reactor. CPU per step is this
 *               process's (engine, workers, reactor); the server's, in its
 *               own process, is beside it: on a 2-CPU machine their sum
 *               bounds the rate.
 *   slow        1,000 tasks whose request the server answers after 2 s, run
 *               by `tasker run --until-idle --workers 4`: how many were in
 *               flight at once (the server's peak connections), wall time,
 *               the most threads the orchestrator had, and its peak RSS
 *               (VmHWM, sampled). Goal: all 1,000 at once in <= 64 MiB.
 * Usage: bench_http [throughput|slow]... (default both). BENCH_QUICK=1 for
 * a tenth of the throughput run, BENCH_ROW=N for its row N only; TASKER=PATH
 * for the binary (default build/bin/tasker). On a shared VM, compare runs
 * by the yardstick column (as bench_engine). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/engine.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#include "../tests/common/http_stub.h"

static char dir[256];
static int quick;

static void die(const char *what, const tk_err *err) {
  fprintf(stderr, "bench_http: %s: %s\n", what, err ? err->msg : strerror(errno));
  exit(1);
}

static int64_t now_ms(void) {
  tk_clock c = tk_clock_system();
  return tk_clock_now(&c);
}

/* Seconds of CPU (user and system, all threads) this process used so far. */
static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Milliseconds a fixed integer loop takes: printed beside the figures,
 * because a shared VM's speed drifts (as in bench_engine). */
static double yardstick_ms(void) {
  int64_t t0 = tk_monotonic_ns();
  volatile uint64_t x = 0;
  for (uint64_t i = 0; i < 100000000u; i++) x += i;
  return (double)(tk_monotonic_ns() - t0) / 1e6;
}

/* A loopback server in a child process (so that its CPU is not counted
 * here), answering /ok with a small JSON object after delay_ms. Its port
 * goes to *port; kill the pid with SIGKILL when done. */
static pid_t serve(int delay_ms, int keep_alive, int *port) {
  int p[2];
  if (pipe(p) != 0) die("pipe", NULL);
  pid_t pid = fork();
  if (pid < 0) die("fork", NULL);
  if (pid == 0) {
    close(p[0]);
    http_stub *s = http_stub_start();
    static http_stub_answer ok[1];
    ok[0] = (http_stub_answer){HTTP_STUB_ANSWER, 200, "Content-Type: application/json\r\n",
                               "{\"ok\": true}", 1, delay_ms, 0};
    int port_no = s ? http_stub_port(s) : -1;
    if (s) http_stub_route(s, "/ok", ok, 1);
    if (s) http_stub_keep_alive(s, keep_alive);
    if (write(p[1], &port_no, sizeof port_no) != sizeof port_no) _exit(1);
    close(p[1]);
    for (;;) pause();
  }
  close(p[1]);
  if (read(p[0], port, sizeof *port) != sizeof *port || *port < 0) die("server", NULL);
  close(p[0]);
  return pid;
}

/* Stop the server; the CPU seconds it used. */
static double stop(pid_t pid) {
  kill(pid, SIGKILL);
  struct rusage ru;
  int st;
  if (wait4(pid, &st, 0, &ru) < 0) return 0;
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* The one-step template at `port` as DIR/NAME.toml; the path goes to path. */
static void write_template(const char *name, int port, char *path, size_t len) {
  snprintf(path, len, "%s/%s.toml", dir, name);
  FILE *f = fopen(path, "w");
  if (f == NULL) die(path, NULL);
  fprintf(f,
          "name = \"%s\"\nversion = \"1\"\n[[steps]]\nname = \"call\"\n"
          "handler = { kind = \"http\", url = \"http://127.0.0.1:%d/ok\", timeout = \"60s\" }\n",
          name, port);
  fclose(f);
}

/* A fresh store DIR/NAME.db with the template at tpl and `tasks` tasks of
 * it; its URL goes to url. */
static tk_store *seeded(const char *name, const char *tpl, int tasks, tk_config *cfg, char *url,
                        size_t len) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.db", dir, name);
  unlink(path);
  snprintf(url, len, "sqlite:%s", path);
  tk_store *s;
  tk_err err;
  if (tk_store_open(url, &s, &err) || tk_store_migrate(s, NULL, NULL, &err)) die("store", &err);
  if (tk_template_add_file(s, cfg, tpl, now_ms(), NULL, &err)) die("template", &err);
  tk_submit_request req = {.template_name = name};
  for (int i = 0; i < tasks; i++) {
    int64_t id;
    int existed;
    if (tk_task_submit(s, cfg, &req, now_ms(), &id, &existed, &err)) die("submit", &err);
  }
  return s;
}

static tk_config *config(int max_async) {
  char async[64];
  snprintf(async, sizeof async, "engine.max_async=%d", max_async);
  const char *sets[] = {"backoff.jitter=\"none\"", "engine.claim_batch=256",
                        "engine.lease=\"60s\"", async};
  tk_config_source src = {.sets = sets, .nsets = 4};
  tk_config *cfg;
  tk_err err;
  if (tk_config_load(&src, &cfg, &err)) die("config", &err);
  return cfg;
}

static void throughput(void) {
  int tasks = quick ? 2000 : 20000;
  printf("\n%-34s %7s %8s %10s %10s %12s %13s %10s\n", "throughput (GET, SQLite)", "steps",
         "workers", "seconds", "steps/s", "cpu µs/step", "server µs/req", "yardstick");
  struct {
    const char *name;
    int max_async, keep_alive;
  } rows[] = {{"reactor (max_async 1000)", 1000, 1},
              {"reactor (max_async 256)", 256, 1},
              {"reactor, server closes connections", 1000, 0},
              {"on the workers (max_async 0)", 0, 1}};
  /* BENCH_ROW=N runs only row N (from 1), e.g. for profiling. */
  size_t only = getenv("BENCH_ROW") ? (size_t)atoi(getenv("BENCH_ROW")) : 0;
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    if (only && only != r + 1) continue;
    int port;
    pid_t server = serve(0, rows[r].keep_alive, &port);
    tk_config *cfg = config(rows[r].max_async);
    char tpl[512], url[600];
    write_template("tp", port, tpl, sizeof tpl);
    tk_store *s = seeded("tp", tpl, tasks, cfg, url, sizeof url);
    double yard = yardstick_ms();
    tk_engine_options eo = {.store = s, .config = cfg, .workers = 4, .seed = 1};
    tk_engine *e;
    tk_err err;
    if (tk_engine_new(&eo, &e, &err)) die("engine", &err);
    double c0 = cpu_seconds();
    int64_t t0 = tk_monotonic_ns();
    if (tk_engine_run(e, 1, &err)) die("run", &err);
    double secs = (double)(tk_monotonic_ns() - t0) / 1e9;
    double cpu = cpu_seconds() - c0;
    tk_engine_stats st = tk_engine_stats_get(e);
    tk_engine_free(e);
    tk_store_close(s);
    tk_config_free(cfg);
    double server_cpu = stop(server);
    if (st.completed != tasks)
      fprintf(stderr, "bench_http: %lld of %d steps completed\n", (long long)st.completed, tasks);
    printf("%-34s %7d %8d %10.2f %10.0f %12.1f %13.1f %7.0f ms\n", rows[r].name, tasks, 4, secs,
           tasks / secs, cpu * 1e6 / tasks, server_cpu * 1e6 / tasks, yard);
  }
}

/* A number from /proc/PID/status ("Threads", "VmHWM" in kB), or -1. */
static long proc_status(pid_t pid, const char *field) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long v = -1;
  size_t n = strlen(field);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, field, n) == 0 && line[n] == ':') {
      v = strtol(line + n + 1, NULL, 10);
      break;
    }
  if (f) fclose(f);
  return v;
}

/* Whether pid is the tasker binary yet (the fork has exec'ed). */
static int is_tasker(pid_t pid) {
  char path[64], comm[32] = "";
  snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
  FILE *f = fopen(path, "r");
  if (f && fgets(comm, sizeof comm, f) == NULL) comm[0] = '\0';
  if (f) fclose(f);
  return strncmp(comm, "tasker", 6) == 0;
}

static void slow(const char *tasker) {
  enum { N = 1000, DELAY_MS = 2000 };
  printf("\n%-30s %8s %10s %10s %10s %14s\n", "slow (2 s answers, 4 workers)", "requests",
         "in flight", "seconds", "threads", "peak RSS");
  if (tasker == NULL) {
    printf("(no tasker binary: set TASKER or build build/bin/tasker)\n");
    return;
  }
  /* The server runs here, on a thread: only the orchestrator is measured. */
  http_stub *srv = http_stub_start();
  if (srv == NULL) die("server", NULL);
  static http_stub_answer ok[1];
  ok[0] = (http_stub_answer){HTTP_STUB_ANSWER, 200, "Content-Type: application/json\r\n",
                             "{\"ok\": true}", 1, DELAY_MS, 0};
  http_stub_route(srv, "/ok", ok, 1);
  tk_config *cfg = config(1000);
  char tpl[512], url[600];
  write_template("slow", http_stub_port(srv), tpl, sizeof tpl);
  tk_store_close(seeded("slow", tpl, N, cfg, url, sizeof url));
  tk_config_free(cfg);
  char db[700];
  snprintf(db, sizeof db, "--db=%s", url);
  int64_t t0 = tk_monotonic_ns();
  pid_t pid = fork();
  if (pid == 0) {
    /* Its log lines (a line per task) are not the table. */
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2);
    execl(tasker, tasker, "run", db, "--until-idle", "--workers", "4", "--set",
          "engine.max_async=1000", "--set", "engine.claim_batch=256", (char *)NULL);
    _exit(127);
  }
  /* Sample the orchestrator while it runs: its threads, and its VmHWM
   * (the peak of its own memory: wait4's ru_maxrss would also count the
   * pages the fork shared with this process before the exec). */
  long threads = 0, hwm_kb = 0;
  int st;
  while (waitpid(pid, &st, WNOHANG) == 0) {
    if (is_tasker(pid)) {
      long t = proc_status(pid, "Threads"), h = proc_status(pid, "VmHWM");
      if (t > threads) threads = t;
      if (h > hwm_kb) hwm_kb = h;
    }
    struct timespec ts = {0, 2 * 1000000};
    nanosleep(&ts, NULL);
  }
  double secs = (double)(tk_monotonic_ns() - t0) / 1e9;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fprintf(stderr, "bench_http: tasker run failed\n");
  printf("%-30s %8d %10d %10.2f %10ld %10.1f MiB\n", "tasker run", http_stub_count(srv, "/ok"),
         http_stub_peak_connections(srv), secs, threads, hwm_kb / 1024.0);
  http_stub_stop(srv);
}

int main(int argc, char **argv) {
  tk_store_process_init(); /* as the CLI does */
  signal(SIGPIPE, SIG_IGN);
  quick = getenv("BENCH_QUICK") != NULL;
  snprintf(dir, sizeof dir, "%s/tasker-bench-http-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(dir) == NULL) die("mkdtemp", NULL);
  const char *tasker = getenv("TASKER");
  if (tasker == NULL && access("build/bin/tasker", X_OK) == 0) tasker = "build/bin/tasker";
  int all = argc == 1;
  for (int i = 1; i < argc || all; i++) {
    const char *what = all ? NULL : argv[i];
    if (all || !strcmp(what, "throughput")) throughput();
    if (all || !strcmp(what, "slow")) slow(tasker);
    if (all) break;
  }
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_http: could not remove %s\n", dir);
  return 0;
}
