/* The command handler: run argv (no shell unless shell = true) with
 * posix_spawn in a process group of its own, in the spec's working
 * directory, with the step's input on stdin; read a JSON object from
 * stdout as the step's results; map the exit to an outcome; and on timeout
 * stop the whole group: SIGTERM, then SIGKILL after kill_grace.
 *
 * Everything that can go wrong is said, never guessed from an exit code:
 * a program that is missing or not executable is found before spawning
 * (with the path that was tried), and stdout that is not a JSON object
 * fails the attempt with what was wrong and how it began instead of
 * completing without results. See docs/handlers.md. */
#define _GNU_SOURCE /* GNU extensions, all Linux/glibc: posix_spawn_file_actions_addchdir_np
                       (glibc 2.29), memfd_create, pipe2, pidfd_open through syscall */
#include "handlers/handler.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tasker/duration.h>

extern char **environ;

#define DEFAULT_MAX_OUTPUT (1 << 20)
#define DEFAULT_KILL_GRACE_MS 5000
#define STDERR_TAIL 400
/* Bytes of bad stdout quoted in a message. */
#define STDOUT_QUOTE 48
/* After the program exits, how long its output may take to reach EOF
 * (a process that left the group may hold the pipe open). */
#define DRAIN_MS 1000
/* Without a pidfd, how often the program is looked at. */
#define POLL_MS 20
#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

/* ---- template time --------------------------------------------------------- */

static const tk__key keys[] = {
    TK__HANDLER_COMMON_KEYS,
    {.name = "argv", .kind = TK__K_STRINGS, .min = 1, .allowed = "a non-empty array of strings",
     .missing = "a command handler needs argv = [\"program\", \"arg\", ...]"},
    {.name = "shell", .kind = TK__K_BOOL},
    {.name = "cwd", .kind = TK__K_STRING, .allowed = "a directory path"},
    {.name = "env", .kind = TK__K_STRMAP, .allowed = "a table of strings"},
    {.name = "permanent_exit_codes", .kind = TK__K_INTS, .min = 1, .max = 255,
     .allowed = "an array of exit codes (1 to 255)"},
    {.name = "max_output", .kind = TK__K_INT, .min = 1, .max = 64 << 20,
     .allowed = "a number of bytes from 1 to 67108864"},
    {.name = "kill_grace", .kind = TK__K_DURATION, .json = "kill_grace_ms", .min = 0,
     .max = 3600000, .allowed = "a duration from 0 to 1h"},
};

static const tk__schema schema = {"command", keys, sizeof keys / sizeof keys[0]};

/* The schema, then what it cannot say: a program name is not empty, and
 * an environment variable's name is not empty and holds no '='. */
static int validate(const tk__handler_site *site, const tk_toml_value *table, json_t *spec) {
  const tk__spec_where *w = &site->where;
  int rc = tk__spec_read(w, &schema, table, spec);
  if (rc) return rc;
  const tk_toml_value *argv = tk_toml_get(table, "argv");
  if (tk_toml_string(tk_toml_array_at(argv, 0), NULL)[0] == '\0')
    return tk__spec_fail(w, tk_toml_array_at(argv, 0), "argv[1]",
                         "\"\": expected the program to run (a name on PATH or a path)");
  const tk_toml_value *env = tk_toml_get(table, "env");
  for (size_t i = 0; env && i < tk_toml_table_len(env); i++) {
    const tk_toml_entry *e = tk_toml_table_at(env, i);
    if (e->key[0] == '\0' || strchr(e->key, '=') != NULL)
      return tk__spec_fail(w, e->value, "env",
                           "\"%s\": an environment variable's name must be non-empty and "
                           "hold no '='",
                           e->key);
  }
  return 0;
}

/* ---- preparing a run ------------------------------------------------------- */

/* Free a NULL-terminated list of malloc'd strings, and the list. */
static void free_strv(char **v) {
  if (v == NULL) return;
  for (size_t i = 0; v[i]; i++) free(v[i]);
  free(v);
}

/* "NAME=VALUE", malloc'd. */
static char *env_pair(const char *name, const char *value) {
  size_t len = strlen(name) + strlen(value) + 2;
  char *kv = malloc(len);
  if (kv) snprintf(kv, len, "%s=%s", name, value);
  return kv;
}

/* Whether the environment list env[0..n-1] already sets kv's name. */
static int env_has(char *const *env, size_t n, const char *kv) {
  size_t len = strcspn(kv, "=");
  for (size_t i = 0; i < n; i++)
    if (strncmp(env[i], kv, len) == 0 && env[i][len] == '=') return 1;
  return 0;
}

/* A NULL-terminated list of strings being built; `oom` once an
 * allocation failed. */
typedef struct strv {
  char **v;
  size_t n;
  int oom;
} strv;

/* Append s (malloc'd, or NULL when its allocation failed). */
static void strv_add(strv *l, char *s) {
  if (s == NULL) l->oom = 1;
  else l->v[l->n++] = s;
}

/* The list, or NULL (everything freed) when an allocation failed. */
static char **strv_done(strv *l) {
  if (!l->oom) return l->v;
  free_strv(l->v);
  return NULL;
}

/* The child's environment: the TASKER_* variables, then the spec's env,
 * then the orchestrator's own; a name already set is not set again (shells
 * differ in which of two entries they keep). NULL when out of memory. */
static char **build_env(const tk_handler_call *call, json_t *spec) {
  size_t n = 0;
  while (environ[n]) n++;
  json_t *extra = json_object_get(spec, "env");
  strv l = {calloc(n + json_object_size(extra) + 5, sizeof(char *)), 0, 0};
  if (l.v == NULL) return NULL;
  char num[32];
  snprintf(num, sizeof num, "%lld", (long long)call->task_id);
  strv_add(&l, env_pair("TASKER_TASK_ID", num));
  strv_add(&l, env_pair("TASKER_STEP", call->step));
  snprintf(num, sizeof num, "%d", call->attempt);
  strv_add(&l, env_pair("TASKER_ATTEMPT", num));
  snprintf(num, sizeof num, "%d", call->max_attempts);
  strv_add(&l, env_pair("TASKER_MAX_ATTEMPTS", num));
  const char *key;
  json_t *val;
  json_object_foreach(extra, key, val) {
    char *kv = env_pair(key, json_string_value(val));
    if (kv && env_has(l.v, l.n, kv)) free(kv);
    else strv_add(&l, kv);
  }
  for (size_t i = 0; i < n; i++)
    if (strchr(environ[i], '=') && !env_has(l.v, l.n, environ[i])) strv_add(&l, strdup(environ[i]));
  return strv_done(&l);
}

/* argv for posix_spawn: the spec's, after "/bin/sh -c" when shell = true.
 * NULL when out of memory. */
static char **build_argv(json_t *spec, int shell) {
  json_t *a = json_object_get(spec, "argv");
  strv l = {calloc(json_array_size(a) + 3, sizeof(char *)), 0, 0};
  if (l.v == NULL) return NULL;
  if (shell) {
    strv_add(&l, strdup("/bin/sh"));
    strv_add(&l, strdup("-c"));
  }
  for (size_t i = 0; i < json_array_size(a); i++)
    strv_add(&l, strdup(json_string_value(json_array_get(a, i))));
  return strv_done(&l);
}

/* dir + "/" + name, malloc'd; dir "" is the current directory, and a
 * leading "./" of name is left out. */
static char *join_path(const char *dir, const char *name) {
  while (name[0] == '.' && name[1] == '/') name += 2;
  size_t len = strlen(dir) + strlen(name) + 3;
  char *p = malloc(len);
  if (p) snprintf(p, len, "%s%s%s", *dir ? dir : ".", "/", name);
  return p;
}

/* The directory relative paths are taken from in the child: cwd made
 * absolute, or the orchestrator's. Malloc'd; NULL when out of memory or
 * the orchestrator's directory is gone. */
static char *base_dir(const char *cwd) {
  if (cwd && cwd[0] == '/') return strdup(cwd);
  char here[PATH_MAX];
  if (getcwd(here, sizeof here) == NULL) return NULL;
  return cwd ? join_path(here, cwd) : strdup(here);
}

/* "\"NAME\"", followed by " (PATH)" when the absolute path says more. */
static const char *shown(const char *name, const char *path, char *buf, size_t len) {
  if (strcmp(name, path) == 0) snprintf(buf, len, "\"%s\"", name);
  else snprintf(buf, len, "\"%s\" (%s)", name, path);
  return buf;
}

/* Check the working directory before spawning, so that its problem is not
 * mistaken for the program's. 0, or a permanent failure in out. */
static int check_cwd(const char *cwd, const char *base, tk_handler_result *out) {
  struct stat st;
  const char *why = NULL;
  if (stat(base, &st) != 0) why = errno == ENOENT ? "does not exist" : strerror(errno);
  else if (!S_ISDIR(st.st_mode)) why = "is not a directory";
  else if (access(base, X_OK) != 0) why = "cannot be entered (permission denied)";
  if (why == NULL) return 0;
  char name[2 * PATH_MAX];
  tk__handler_fail(out, TK_HANDLER_PERMANENT, "command: working directory %s %s",
                   shown(cwd, base, name, sizeof name), why);
  return -1;
}

static const char not_found[] = "not found";

/* Why the file at `path` cannot be executed (not_found when there is
 * none), or NULL if it can (or the reason is not known before trying). */
static const char *not_runnable(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return errno == ENOENT || errno == ENOTDIR ? not_found : NULL;
  if (S_ISDIR(st.st_mode)) return "is a directory, not a program";
  if (access(path, X_OK) != 0) return "is not executable (permission denied)";
  return NULL;
}

/* The absolute path of the program to run, as the child will see it (a
 * relative path or PATH entry is taken from the working directory, as a
 * shell started there would), malloc'd in *path. A missing or
 * non-executable program is a permanent failure in out naming the path. */
static int find_program(const char *prog, const char *base, json_t *spec, char **path,
                        tk_handler_result *out) {
  if (strchr(prog, '/')) {
    *path = prog[0] == '/' ? strdup(prog) : join_path(base, prog);
    if (*path == NULL) goto oom;
    const char *why = not_runnable(*path);
    if (why == NULL) return 0;
    char name[2 * PATH_MAX];
    tk__handler_fail(out, TK_HANDLER_PERMANENT, "command: program %s %s",
                     shown(prog, *path, name, sizeof name), why);
    return -1;
  }
  /* The PATH the child gets: the spec's env may set it. */
  const char *search = json_string_value(json_object_get(json_object_get(spec, "env"), "PATH"));
  if (search == NULL) search = getenv("PATH");
  if (search == NULL) search = DEFAULT_PATH;
  char *refused = NULL; /* the first match that exists but cannot run */
  const char *refusal = NULL;
  for (const char *p = search;;) {
    size_t dlen = strcspn(p, ":");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", (int)dlen, p);
    char *rel = dlen && dir[0] == '/' ? strdup(dir) : join_path(base, dlen ? dir : ".");
    char *full = rel ? join_path(rel, prog) : NULL;
    free(rel);
    if (full == NULL) goto oom;
    const char *why = not_runnable(full);
    if (why == NULL) {
      free(refused);
      *path = full;
      return 0;
    }
    if (refused == NULL && why != not_found) {
      refused = full;
      refusal = why;
    } else {
      free(full);
    }
    if (p[dlen] == '\0') break;
    p += dlen + 1;
  }
  if (refused)
    tk__handler_fail(out, TK_HANDLER_PERMANENT, "command: program \"%s\" found on PATH as %s, "
                     "which %s", prog, refused, refusal);
  else
    tk__handler_fail(out, TK_HANDLER_PERMANENT, "command: program \"%s\" not found on PATH (%s)",
                     prog, search);
  free(refused);
  *path = NULL;
  return -1;
oom:
  tk__handler_fail(out, TK_HANDLER_RETRY, "command: out of memory resolving \"%s\"", prog);
  *path = NULL;
  return -1;
}

/* A file holding the input, positioned at its start, close-on-exec (so
 * that children other workers spawn meanwhile do not inherit it); -1 on
 * failure with errno set. */
static int input_file(const char *input) {
  int fd = memfd_create("tasker-input", MFD_CLOEXEC);
  if (fd < 0) {
    char name[] = "/tmp/tasker-input-XXXXXX";
    if ((fd = mkostemp(name, O_CLOEXEC)) < 0) return -1;
    unlink(name);
  }
  size_t len = strlen(input), done = 0;
  while (done < len) {
    ssize_t n = write(fd, input + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      close(fd);
      errno = e;
      return -1;
    }
    done += (size_t)n;
  }
  if (lseek(fd, 0, SEEK_SET) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* ---- output ---------------------------------------------------------------- */

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

/* ": LAST LINE" of the stderr tail, trimmed, for messages; "" if none. */
static const char *stderr_note(char *tail, char *buf, size_t len) {
  size_t n = strlen(tail);
  while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == '\r' || tail[n - 1] == ' '))
    tail[--n] = '\0';
  char *nl = strrchr(tail, '\n');
  const char *line = nl ? nl + 1 : tail;
  if (*line == '\0') return "";
  snprintf(buf, len, ": %s", line);
  return buf;
}

int tk__command_parse_stdout(const char *buf, size_t n, json_t **doc, char *why, size_t len) {
  *doc = NULL;
  size_t i = 0;
  /* strchr would find the terminating NUL: a NUL byte is not white space. */
  while (i < n && buf[i] != '\0' && strchr(" \t\r\n", buf[i])) i++;
  if (i == n) return 0;
  char start[STDOUT_QUOTE * 4 + 8];
  tk__quote_start(buf + i, n - i, STDOUT_QUOTE, 0, start, sizeof start);
  json_error_t e;
  json_t *d = json_loadb(buf, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
  if (d == NULL) {
    snprintf(why, len, "invalid JSON at line %d, column %d: %s; stdout began %s", e.line,
             e.column, e.text, start);
    return -1;
  }
  if (!json_is_object(d)) {
    static const char *const types[] = {"an object", "an array", "a string", "a number",
                                        "a number", "true", "false", "null"};
    snprintf(why, len, "it is %s, not an object; stdout began %s", types[json_typeof(d)],
             start);
    json_decref(d);
    return -1;
  }
  *doc = d;
  return 0;
}

/* What the captured stdout was (tk__command_parse_stdout). */
static int parse_stdout(const capture *c, json_t **doc, char *why, size_t len) {
  return tk__command_parse_stdout(c->buf ? c->buf : "", c->len, doc, why, len);
}

/* ---- running ----------------------------------------------------------------- */

/* Monotonic milliseconds, for deadlines that no clock step moves. */
static int64_t mono_ms(void) { return tk_monotonic_ns() / 1000000; }

/* Start the program: its own process group, signals as a fresh process
 * has them (workers may block some), stdin from in_fd, stdout and stderr
 * into the pipes, in cwd. 0, or posix_spawn's error number. */
static int spawn(pid_t *pid, const char *path, char **argv, char **env, const char *cwd,
                 int in_fd, int out_fd, int err_fd) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  int rc = posix_spawn_file_actions_init(&fa);
  if (rc) return rc;
  if ((rc = posix_spawnattr_init(&attr)) != 0) {
    posix_spawn_file_actions_destroy(&fa);
    return rc;
  }
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
  if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  /* A GNU extension (glibc 2.29); POSIX.1-2024 names it without _np. */
  if (!rc && cwd) rc = posix_spawn_file_actions_addchdir_np(&fa, cwd);
  if (!rc) rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                    POSIX_SPAWN_SETSIGDEF);
  if (!rc) rc = posix_spawnattr_setpgroup(&attr, 0); /* a group led by the child */
  if (!rc) rc = posix_spawnattr_setsigmask(&attr, &none);
  if (!rc) rc = posix_spawnattr_setsigdefault(&attr, &all);
  if (!rc) rc = posix_spawn(pid, path, &fa, &attr, argv, env);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  return rc;
}

/* An fd above 2 (close-on-exec), so that dup2 onto 0, 1 or 2 in the child
 * always makes a new descriptor that survives exec: an orchestrator
 * started with those closed hands out fds from 0. */
static int above_stdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return moved;
}

/* Whether the program has exited, without reaping it: its pid stays
 * reserved until we have killed the rest of its group. */
static int exited(pid_t pid) {
  siginfo_t si;
  si.si_pid = 0;
  return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
}

/* How a run ended, before it is turned into an outcome. */
typedef struct ending {
  int status;     /* waitpid's */
  int timed_out;  /* the deadline passed; SIGTERM went to the group */
  int killed;     /* the group got SIGKILL after kill_grace */
  int overflow;   /* stdout passed max_output */
} ending;

/* Read stdout and stderr until the program has exited and its output is
 * closed, enforcing the deadline (end_ms, monotonic; -1: none) and the
 * output limit; then kill what is left of the group and reap it. */
static void supervise(pid_t pid, int fds[2], int64_t end_ms, int64_t grace_ms, capture *out,
                      char *tail, size_t *tail_len, ending *how) {
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  int done = 0;            /* the program has exited */
  int64_t kill_at = -1;    /* after SIGTERM: when SIGKILL goes */
  int64_t drain_end = -1;  /* after the exit: how long output may take */
  char buf[65536];
  while (fds[0] >= 0 || fds[1] >= 0 || !done) {
    int64_t now = mono_ms();
    if (!done && kill_at < 0 && end_ms >= 0 && now >= end_ms) {
      how->timed_out = 1;
      killpg(pid, SIGTERM);
      kill_at = now + grace_ms;
    }
    if (kill_at >= 0 && now >= kill_at) {
      how->killed = 1;
      break;
    }
    if (done && kill_at < 0 && now >= drain_end) break;
    int64_t until = kill_at >= 0 ? kill_at : done ? drain_end : end_ms;
    struct pollfd p[3];
    int nf = 0;
    for (int i = 0; i < 2; i++)
      if (fds[i] >= 0) p[nf++] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    if (!done && pidfd >= 0) p[nf++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
    int timeout = until < 0 ? -1 : until - now > 60000 ? 60000 : (int)(until - now);
    if (!done && pidfd < 0 && (timeout < 0 || timeout > POLL_MS)) timeout = POLL_MS;
    if (poll(p, (nfds_t)nf, timeout) < 0 && errno != EINTR) break;
    for (int i = 0; i < nf; i++) {
      if (p[i].revents == 0 || p[i].fd == pidfd) continue;
      ssize_t n = read(p[i].fd, buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      int which = p[i].fd == fds[0] ? 0 : 1;
      if (n <= 0) {
        close(fds[which]);
        fds[which] = -1;
      } else if (which == 0) {
        capture_add(out, buf, (size_t)n);
      } else {
        tail_add(tail, tail_len, buf, (size_t)n);
      }
    }
    if (out->overflow) {
      how->overflow = 1;
      break;
    }
    if (!done && exited(pid)) {
      done = 1;
      drain_end = mono_ms() + DRAIN_MS;
      /* Whatever it left running in its group goes with it, unless a
       * timeout's grace is still running for them. */
      if (kill_at < 0) killpg(pid, SIGKILL);
    }
  }
  killpg(pid, SIGKILL); /* the pid is still ours: the program is not reaped yet */
  while (waitpid(pid, &how->status, 0) < 0 && errno == EINTR) {
  }
  if (pidfd >= 0) close(pidfd);
}

/* The attempt's result from how the run ended and what it printed. */
static void conclude(json_t *spec, const ending *how, const capture *cap, char *tail,
                     int64_t grace_ms, pid_t pid, tk_handler_result *out) {
  char note[STDERR_TAIL + 8] = "", d[32], g[32];
  stderr_note(tail, note, sizeof note);
  if (how->timed_out) {
    /* The step's timeout, from which the engine set the deadline. */
    tk_duration_format(json_integer_value(json_object_get(spec, "timeout_ms")), d, sizeof d);
    tk_duration_format(grace_ms, g, sizeof g);
    if (how->killed)
      tk__handler_fail(out, TK_HANDLER_RETRY, "timed out after %s; process group %d got SIGTERM, "
                       "and SIGKILL %s later (kill_grace)", d, (int)pid, g);
    else
      tk__handler_fail(out, TK_HANDLER_RETRY, "timed out after %s; process group %d got SIGTERM",
                       d, (int)pid);
    out->timed_out = 1;
    return;
  }
  if (how->overflow) {
    tk__handler_fail(out, TK_HANDLER_PERMANENT,
                     "stdout passed max_output (%zu bytes); the process group was killed",
                     cap->limit);
    return;
  }
  if (WIFSIGNALED(how->status)) {
    int sig = WTERMSIG(how->status);
    tk__handler_fail(out, TK_HANDLER_RETRY, "killed by signal %d (%s)%s", sig, strsignal(sig),
                     note);
    return;
  }
  int code = WEXITSTATUS(how->status);
  json_t *doc;
  char why[512];
  int bad = parse_stdout(cap, &doc, why, sizeof why);
  if (code == 0) {
    /* Results are never dropped without a word: output that is not a
     * JSON object fails the attempt, permanently, since the same program
     * on the same input would print it again. */
    if (bad)
      tk__handler_fail(out, TK_HANDLER_PERMANENT,
                       "exit status 0, but stdout is not a JSON object (the step's results): %s",
                       why);
    else if (doc && (out->results = json_dumps(doc, JSON_COMPACT)) == NULL)
      tk__handler_fail(out, TK_HANDLER_RETRY, "out of memory keeping the step's results");
    json_decref(doc);
    return;
  }
  int permanent = 0;
  size_t i;
  json_t *c;
  json_array_foreach(json_object_get(spec, "permanent_exit_codes"), i, c) permanent |=
      json_integer_value(c) == code;
  tk_handler_status status = permanent ? TK_HANDLER_PERMANENT : TK_HANDLER_RETRY;
  const char *perm = permanent ? " (permanent_exit_codes)" : "";
  json_t *hint = json_object_get(doc, "retry_after");
  int64_t ms;
  if (bad) {
    tk__handler_fail(out, status, "exit status %d%s%s; its stdout, not a JSON object, gave no "
                     "retry_after: %s", code, perm, note, why);
  } else if (hint && tk__hint_from_json(hint, &ms) != 0) {
    char *text = json_dumps(hint, JSON_ENCODE_ANY | JSON_COMPACT);
    tk__handler_fail(out, status, "exit status %d%s%s; retry_after %.60s ignored: expected a "
                     "duration such as \"30s\" or a number of seconds",
                     code, perm, note, text ? text : "");
    free(text);
  } else {
    tk__handler_fail(out, status, "exit status %d%s%s", code, perm, note);
    if (hint) out->retry_after_ms = ms;
  }
  json_decref(doc);
}

/* One attempt: check the working directory and the program, spawn it,
 * supervise it to its end, and say how it went. */
static void run(const tk__handler_step *step, const tk_handler_call *call,
                tk_handler_result *out) {
  json_t *spec = step->spec;
  int shell = json_is_true(json_object_get(spec, "shell"));
  const char *cwd = json_string_value(json_object_get(spec, "cwd"));
  json_t *lim = json_object_get(spec, "max_output");
  int64_t grace_ms = tk__spec_int(spec, "kill_grace_ms", DEFAULT_KILL_GRACE_MS);
  capture cap = {.limit = json_is_integer(lim) ? (size_t)json_integer_value(lim)
                                               : DEFAULT_MAX_OUTPUT};
  char **argv = build_argv(spec, shell);
  char **env = build_env(call, spec);
  char *base = base_dir(cwd), *path = NULL;
  int in = -1, outp[2] = {-1, -1}, errp[2] = {-1, -1};
  if (argv == NULL || env == NULL || argv[0] == NULL || base == NULL) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "command: cannot prepare to run: %s",
                     base == NULL ? "the orchestrator's working directory is gone"
                                  : "out of memory");
    goto done;
  }
  if (cwd && check_cwd(cwd, base, out) != 0) goto done;
  if (find_program(argv[0], base, spec, &path, out) != 0) goto done;
  if ((in = above_stdio(input_file(call->input ? call->input : "{}"))) < 0 ||
      pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "command: cannot make its stdin or pipes: %s",
                     strerror(errno));
    goto done;
  }
  outp[1] = above_stdio(outp[1]);
  errp[1] = above_stdio(errp[1]);
  pid_t pid;
  int rc = outp[1] < 0 || errp[1] < 0
               ? errno
               : spawn(&pid, path, argv, env, cwd ? base : NULL, in, outp[1], errp[1]);
  if (rc != 0) {
    /* The checks above make these rare (a race with a change on disk). */
    int permanent = rc == ENOENT || rc == EACCES || rc == ENOEXEC || rc == ENOTDIR ||
                    rc == ELOOP || rc == E2BIG || rc == ENAMETOOLONG || rc == EISDIR;
    tk__handler_fail(out, permanent ? TK_HANDLER_PERMANENT : TK_HANDLER_RETRY,
                     "command: cannot run \"%s\" (%s): %s", argv[0], path,
                     rc == ENOEXEC ? "not a program and no #! line (exec format error)"
                                   : strerror(rc));
    goto done;
  }
  close(outp[1]);
  close(errp[1]);
  outp[1] = errp[1] = -1;
  /* The deadline is on the engine's clock; wait on the monotonic one. */
  int64_t budget = call->deadline_ms > 0 ? call->deadline_ms - tk_clock_now(step->clock) : -1;
  if (call->deadline_ms > 0 && budget < 0) budget = 0;
  int fds[2] = {outp[0], errp[0]};
  char tail[STDERR_TAIL + 1] = "";
  size_t tail_len = 0;
  ending how = {0};
  supervise(pid, fds, budget >= 0 ? mono_ms() + budget : -1, grace_ms, &cap, tail, &tail_len,
            &how);
  outp[0] = fds[0];
  errp[0] = fds[1];
  conclude(spec, &how, &cap, tail, grace_ms, pid, out);
done:
  for (int i = 0; i < 2; i++) {
    if (outp[i] >= 0) close(outp[i]);
    if (errp[i] >= 0) close(errp[i]);
  }
  if (in >= 0) close(in);
  free(cap.buf);
  free(path);
  free(base);
  free_strv(argv);
  free_strv(env);
}

const tk__handler_kind tk__command_kind = {
    .version = TK__HANDLER_KIND_VERSION,
    .name = "command",
    .takes_input = 1,
    .validate = validate,
    .run = run,
};
