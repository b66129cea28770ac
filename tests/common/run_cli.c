/* Running the tasker binary from tests, output captured through temp files
 * (no pipes, so a chatty child can never deadlock the test). */
#define _GNU_SOURCE
#include "run_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *tasker_path(void) {
  const char *t = getenv("TASKER");
  return t && *t ? t : "build/bin/tasker";
}

static char *slurp(FILE *f) {
  fflush(f);
  long n = ftell(f);
  rewind(f);
  char *buf = malloc((size_t)n + 1);
  if (buf == NULL) abort();
  size_t got = fread(buf, 1, (size_t)n, f);
  buf[got] = '\0';
  fclose(f);
  return buf;
}

int run_cli(run_result *r, const char *input, const char *const *args) {
  FILE *in = tmpfile(), *out = tmpfile(), *err = tmpfile();
  if (!in || !out || !err) return -1;
  if (input) fputs(input, in);
  fflush(in);
  rewind(in);
  int nargs = 0;
  while (args[nargs]) nargs++;
  char **argv = calloc((size_t)nargs + 2, sizeof *argv);
  argv[0] = (char *)tasker_path();
  for (int i = 0; i < nargs; i++) argv[i + 1] = (char *)args[i];
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(fileno(in), 0);
    dup2(fileno(out), 1);
    dup2(fileno(err), 2);
    execv(argv[0], argv);
    _exit(127);
  }
  free(argv);
  int st;
  while (waitpid(pid, &st, 0) < 0) {
  }
  fclose(in);
  fseek(out, 0, SEEK_END);
  fseek(err, 0, SEEK_END);
  r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r->out = slurp(out);
  r->err = slurp(err);
  return 0;
}

void run_result_free(run_result *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}
