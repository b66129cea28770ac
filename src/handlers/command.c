/* The command handler: run argv as a child process in its own process
 * group, feed it the step's input on stdin, read a JSON object from stdout,
 * map its exit to an outcome, and kill the whole group on timeout. */
#define _GNU_SOURCE /* pidfd_open via syscall, pipe2 */
#include "handlers/handler.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tasker/duration.h>

extern char **environ;

#define DEFAULT_MAX_OUTPUT (1 << 20)
#define STDERR_TAIL 400

/* Find `prog` on PATH (in the parent: malloc is not safe after fork). */
static char *resolve(const char *prog) {
  if (strchr(prog, '/')) return strdup(prog);
  const char *path = getenv("PATH");
  if (path == NULL) path = "/usr/local/bin:/usr/bin:/bin";
  size_t plen = strlen(prog);
  for (const char *p = path; *p;) {
    const char *colon = strchr(p, ':');
    size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
    char *full = malloc(dlen + plen + 2);
    if (full == NULL) return NULL;
    snprintf(full, dlen + plen + 2, "%.*s/%s", (int)dlen, dlen ? p : ".", prog);
    if (access(full, X_OK) == 0) return full;
    free(full);
    p += dlen + (colon ? 1 : 0);
    if (!colon) break;
  }
  return NULL;
}

/* environ plus the spec's env and the TASKER_* variables. */
static char **build_env(const tk_handler_call *call, json_t *spec) {
  size_t n = 0;
  while (environ[n]) n++;
  json_t *extra = json_object_get(spec, "env");
  size_t total = n + json_object_size(extra) + 5;
  char **env = calloc(total, sizeof *env);
  if (env == NULL) return NULL;
  size_t k = 0;
  char buf[1024];
  const char *key;
  json_t *val;
  /* Ours first, so they win over inherited ones of the same name: getenv
   * returns the first match. */
  snprintf(buf, sizeof buf, "TASKER_TASK_ID=%lld", (long long)call->task_id);
  env[k++] = strdup(buf);
  snprintf(buf, sizeof buf, "TASKER_STEP=%s", call->step);
  env[k++] = strdup(buf);
  snprintf(buf, sizeof buf, "TASKER_ATTEMPT=%d", call->attempt);
  env[k++] = strdup(buf);
  snprintf(buf, sizeof buf, "TASKER_MAX_ATTEMPTS=%d", call->max_attempts);
  env[k++] = strdup(buf);
  json_object_foreach(extra, key, val) {
    size_t len = strlen(key) + strlen(json_string_value(val)) + 2;
    char *kv = malloc(len);
    if (kv) snprintf(kv, len, "%s=%s", key, json_string_value(val));
    env[k++] = kv;
  }
  for (size_t i = 0; i < n; i++) env[k++] = strdup(environ[i]);
  env[k] = NULL;
  return env;
}

static void free_strv(char **v) {
  if (v == NULL) return;
  for (size_t i = 0; v[i]; i++) free(v[i]);
  free(v);
}

typedef struct capture {
  char *buf;
  size_t len, cap, limit;
  int overflow;
} capture;

/* Append up to the limit; past it, remember the overflow. */
static void capture_add(capture *c, const char *data, size_t n) {
  if (c->len + n > c->limit) {
    c->overflow = 1;
    n = c->limit > c->len ? c->limit - c->len : 0;
  }
  if (c->len + n + 1 > c->cap) {
    size_t cap = c->cap ? c->cap : 4096;
    while (cap < c->len + n + 1) cap *= 2;
    char *b = realloc(c->buf, cap);
    if (b == NULL) {
      c->overflow = 1;
      return;
    }
    c->buf = b;
    c->cap = cap;
  }
  memcpy(c->buf + c->len, data, n);
  c->len += n;
  c->buf[c->len] = '\0';
}

/* Keep only the tail of stderr: the last lines say what went wrong. */
static void tail_add(char *tail, size_t *len, const char *data, size_t n) {
  if (n >= STDERR_TAIL) {
    memcpy(tail, data + n - STDERR_TAIL, STDERR_TAIL);
    *len = STDERR_TAIL;
  } else {
    if (*len + n > STDERR_TAIL) {
      size_t drop = *len + n - STDERR_TAIL;
      memmove(tail, tail + drop, *len - drop);
      *len -= drop;
    }
    memcpy(tail + *len, data, n);
    *len += n;
  }
  tail[*len] = '\0';
}

/* The last non-empty line of the stderr tail, trimmed, for messages. */
static const char *last_line(char *tail) {
  size_t n = strlen(tail);
  while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == '\r' || tail[n - 1] == ' ')) tail[--n] = '\0';
  char *nl = strrchr(tail, '\n');
  return nl ? nl + 1 : tail;
}

static int64_t mono_ms(void) { return tk_monotonic_ns() / 1000000; }

void tk__command_run(const tk_handler_call *call, json_t *spec, const tk_clock *clock,
                     tk_handler_result *out) {
  json_t *argv_j = json_object_get(spec, "argv");
  size_t argc = json_array_size(argv_j);
  int shell = json_is_true(json_object_get(spec, "shell"));
  const char *cwd = json_string_value(json_object_get(spec, "cwd"));
  json_t *lim = json_object_get(spec, "max_output");
  capture cap = {.limit = json_is_integer(lim) ? (size_t)json_integer_value(lim) : DEFAULT_MAX_OUTPUT};
  char **argv = calloc(argc + 4, sizeof *argv);
  char **env = build_env(call, spec);
  char *path = NULL;
  FILE *in = tmpfile();
  int outp[2] = {-1, -1}, errp[2] = {-1, -1};
  if (argv == NULL || env == NULL || in == NULL || argc == 0) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "command: cannot prepare to run (out of memory or no temp file)");
    goto done;
  }
  if (shell) {
    argv[0] = strdup("/bin/sh");
    argv[1] = strdup("-c");
    for (size_t i = 0; i < argc; i++) argv[i + 2] = strdup(json_string_value(json_array_get(argv_j, i)));
    path = strdup("/bin/sh");
  } else {
    for (size_t i = 0; i < argc; i++) argv[i] = strdup(json_string_value(json_array_get(argv_j, i)));
    path = resolve(argv[0]);
    if (path == NULL) {
      tk__handler_fail(out, TK_HANDLER_PERMANENT, "command: \"%s\" not found on PATH", argv[0]);
      goto done;
    }
  }
  fputs(call->input ? call->input : "{}", in);
  fflush(in);
  rewind(in);
  if (pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "command: pipe: %s", strerror(errno));
    goto done;
  }
  pid_t pid = fork();
  if (pid < 0) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "command: fork: %s", strerror(errno));
    goto done;
  }
  if (pid == 0) {
    /* Only async-signal-safe calls from here to exec. */
    setpgid(0, 0);
    dup2(fileno(in), 0);
    dup2(outp[1], 1);
    dup2(errp[1], 2);
    if (cwd && chdir(cwd) != 0) {
      static const char msg[] = "tasker: cannot change to the handler's cwd\n";
      ssize_t w = write(2, msg, sizeof msg - 1);
      (void)w;
      _exit(126);
    }
    execve(path, argv, env);
    static const char msg[] = "tasker: exec failed\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
  }
  setpgid(pid, pid); /* also in the parent, so killpg works at once */
  close(outp[1]);
  close(errp[1]);
  outp[1] = errp[1] = -1;
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

  /* The deadline is on the engine's clock; wait on the monotonic one. */
  int64_t budget = call->deadline_ms > 0 ? call->deadline_ms - tk_clock_now(clock) : -1;
  int64_t end = budget >= 0 ? mono_ms() + budget : -1;
  char tail[STDERR_TAIL + 1] = "";
  size_t tail_len = 0;
  int open_fds = 2, exited = 0, timed_out = 0, status = 0;
  char buf[65536];
  while (open_fds > 0 || !exited) {
    struct pollfd fds[3];
    int nf = 0;
    if (outp[0] >= 0) fds[nf++] = (struct pollfd){.fd = outp[0], .events = POLLIN};
    if (errp[0] >= 0) fds[nf++] = (struct pollfd){.fd = errp[0], .events = POLLIN};
    if (!exited && pidfd >= 0) fds[nf++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
    int timeout = -1;
    if (end >= 0) {
      int64_t left = end - mono_ms();
      if (left <= 0) {
        timed_out = 1;
        break;
      }
      timeout = left > 60000 ? 60000 : (int)left;
    }
    if (nf == 0) { /* no pidfd: fall back to a blocking wait */
      if (waitpid(pid, &status, 0) == pid) exited = 1;
      break;
    }
    int r = poll(fds, (nfds_t)nf, timeout);
    if (r < 0 && errno != EINTR) break;
    for (int i = 0; i < nf && r > 0; i++) {
      if (!fds[i].revents) continue;
      if (fds[i].fd == pidfd) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
          exited = 1;
          /* Whatever it left running in its group goes with it. */
          killpg(pid, SIGKILL);
        }
        continue;
      }
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        close(fds[i].fd);
        if (fds[i].fd == outp[0]) outp[0] = -1;
        else errp[0] = -1;
        open_fds--;
      } else if (fds[i].fd == outp[0]) {
        capture_add(&cap, buf, (size_t)n);
      } else {
        tail_add(tail, &tail_len, buf, (size_t)n);
      }
    }
    if (cap.overflow) break;
  }
  if (!exited) {
    killpg(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (pidfd >= 0) close(pidfd);

  json_t *doc = cap.len ? json_loadb(cap.buf, cap.len, 0, NULL) : NULL;
  if (timed_out) {
    char d[32];
    tk_duration_format(budget, d, sizeof d);
    tk__handler_fail(out, TK_HANDLER_RETRY, "timed out after %s; killed process group %d", d, (int)pid);
    out->timed_out = 1;
  } else if (cap.overflow) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "stdout exceeded the %zu-byte limit (max_output)", cap.limit);
  } else if (WIFSIGNALED(status)) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "killed by signal %d%s%s", WTERMSIG(status),
                     tail_len ? ": " : "", last_line(tail));
  } else if (WEXITSTATUS(status) != 0) {
    int code = WEXITSTATUS(status);
    int permanent = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(spec, "permanent_exit_codes"), i, c) permanent |=
        json_integer_value(c) == code;
    tk__handler_fail(out, permanent ? TK_HANDLER_PERMANENT : TK_HANDLER_RETRY,
                     "exit status %d%s%s%s", code, permanent ? " (permanent)" : "",
                     tail_len ? ": " : "", last_line(tail));
    json_t *hint = json_object_get(doc, "retry_after");
    int64_t ms;
    if (hint && tk__hint_from_json(hint, &ms) == 0) out->retry_after_ms = ms;
  } else if (json_is_object(doc)) {
    out->results = json_dumps(doc, JSON_COMPACT);
  }
  json_decref(doc);
done:
  if (outp[0] >= 0) close(outp[0]);
  if (errp[0] >= 0) close(errp[0]);
  if (outp[1] >= 0) close(outp[1]);
  if (errp[1] >= 0) close(errp[1]);
  if (in) fclose(in);
  free(cap.buf);
  free(path);
  free_strv(argv);
  free_strv(env);
}
