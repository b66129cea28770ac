/* Test helper: run the real tasker binary ($TASKER) as a subprocess and
 * capture its exit status, stdout and stderr. */
#ifndef TESTS_RUN_CLI_H
#define TESTS_RUN_CLI_H

typedef struct run_result {
  int status; /* exit status, or 128 + signal */
  char *out;  /* stdout, NUL-terminated, owned */
  char *err;  /* stderr, NUL-terminated, owned */
} run_result;

/* Run $TASKER with the NULL-terminated args (not including argv[0]),
 * feeding `input` (may be NULL) on stdin. Returns 0, or -1 if the process
 * could not be started. Free with run_result_free. */
int run_cli(run_result *r, const char *input, const char *const *args);

void run_result_free(run_result *r);

/* Path of the binary under test: $TASKER, else build/bin/tasker. */
const char *tasker_path(void);

#endif
