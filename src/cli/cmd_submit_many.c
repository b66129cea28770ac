/* tasker submit NAME --contexts FILE: many tasks in one transaction, one
 * per JSON line of FILE ("-": stdin), each {"context": {...}, "identity":
 * "KEY", "priority": N} with every member optional. Every line is read and checked
 * before anything is stored: a bad one is named by its line number and
 * nothing is submitted. */
#include "cli.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/workflow.h>

/* The submissions read so far: each line's context text and identity
 * (malloc'd) and its line number. */
typedef struct lines {
  tk_submit_request *reqs;
  long *lineno;
  char **owned; /* 2 per submission: context, identity */
  int n, cap;
} lines;

static void lines_free(lines *l) {
  for (int i = 0; i < 2 * l->n; i++) free(l->owned[i]);
  free(l->reqs);
  free(l->lineno);
  free(l->owned);
}

static int lines_grow(lines *l) {
  if (l->n < l->cap) return 0;
  int cap = l->cap ? 2 * l->cap : 1024;
  tk_submit_request *r = realloc(l->reqs, (size_t)cap * sizeof *r);
  if (r) l->reqs = r;
  long *ln = realloc(l->lineno, (size_t)cap * sizeof *ln);
  if (ln) l->lineno = ln;
  char **o = realloc(l->owned, (size_t)cap * 2 * sizeof *o);
  if (o) l->owned = o;
  if (!r || !ln || !o) return -1;
  l->cap = cap;
  return 0;
}

/* One line's JSON into *ctx (its context as compact text, NULL when
 * absent; the library checks what it holds), *identity (or NULL) and
 * *priority (left alone when absent); else a message in why (the line's
 * fault). */
static int line_parse(const char *text, size_t len, char **ctx, char **identity, int *priority,
                      char *why, size_t cap) {
  json_error_t je;
  *ctx = *identity = NULL;
  json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (j == NULL) {
    snprintf(why, cap, "invalid JSON at column %d: %s", je.column, je.text);
    return -1;
  }
  int rc = -1;
  const char *key;
  json_t *v;
  if (!json_is_object(j)) {
    snprintf(why, cap, "expected an object {\"context\": {...}, \"identity\": \"KEY\", "
             "\"priority\": N}");
    goto done;
  }
  json_object_foreach(j, key, v) {
    if (strcmp(key, "context") != 0 && strcmp(key, "identity") != 0 &&
        strcmp(key, "priority") != 0) {
      snprintf(why, cap, "unknown member \"%.100s\": expected \"context\" (the task's context, "
               "an object), \"identity\" or \"priority\"", key);
      goto done;
    }
  }
  json_t *c = json_object_get(j, "context"), *id = json_object_get(j, "identity");
  json_t *p = json_object_get(j, "priority");
  tk_err perr;
  if (p && !json_is_integer(p)) {
    snprintf(why, cap, "priority: expected an integer from %d to %d", TK_PRIORITY_MIN,
             TK_PRIORITY_MAX);
    goto done;
  }
  if (p && tk_priority_check(json_integer_value(p), &perr) != 0) {
    snprintf(why, cap, "%.200s", perr.msg);
    goto done;
  }
  if (p) *priority = (int)json_integer_value(p);
  if (id && (!json_is_string(id) || json_string_length(id) == 0 ||
             strlen(json_string_value(id)) != json_string_length(id))) {
    snprintf(why, cap, "identity: expected a non-empty string (with no NUL)");
    goto done;
  }
  if ((c && (*ctx = json_dumps(c, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY)) == NULL) ||
      (id && (*identity = strdup(json_string_value(id))) == NULL)) {
    free(*ctx);
    *ctx = NULL;
    snprintf(why, cap, "out of memory");
    goto done;
  }
  rc = 0;
done:
  json_decref(j);
  return rc;
}

/* Every non-blank line of f as a submission like `like`. */
static int lines_read(FILE *f, const char *path, const tk_submit_request *like, int tty,
                      lines *l) {
  char *buf = NULL;
  size_t bufcap = 0;
  ssize_t len;
  long lineno = 0;
  int rc = 0;
  while (rc == 0 && (len = getline(&buf, &bufcap, f)) >= 0) {
    lineno++;
    size_t k = (size_t)len;
    while (k > 0 && (buf[k - 1] == '\n' || buf[k - 1] == '\r' || buf[k - 1] == ' ' ||
                     buf[k - 1] == '\t'))
      k--;
    if (strspn(buf, " \t") == k) continue; /* blank */
    char why[300], *ctx, *identity;
    int priority = like->priority;
    if (line_parse(buf, k, &ctx, &identity, &priority, why, sizeof why) != 0) {
      cli_error("submit", "%s:%ld: %s; nothing submitted", path, lineno, why);
      rc = CLI_EXIT_USAGE;
    } else if (lines_grow(l) != 0) {
      free(ctx);
      free(identity);
      cli_error("submit", "%s:%ld: out of memory; nothing submitted", path, lineno);
      rc = CLI_EXIT_FAILURE;
    } else {
      tk_submit_request *r = &l->reqs[l->n];
      *r = *like;
      r->context_json = ctx;
      r->identity = identity;
      r->priority = priority;
      l->owned[2 * l->n] = ctx;
      l->owned[2 * l->n + 1] = identity;
      l->lineno[l->n++] = lineno;
      if (tty && l->n % 10000 == 0) fprintf(stderr, "\rread %d tasks", l->n);
    }
  }
  if (rc == 0 && ferror(f)) {
    cli_error("submit", "%s: cannot read after line %ld", path, lineno);
    rc = CLI_EXIT_FAILURE;
  }
  free(buf);
  return rc;
}

int cli_submit_contexts(tk_store *s, const tk_config *cfg, const tk_submit_request *like,
                        const char *path) {
  int tty = isatty(2);
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
  const char *name = f == stdin ? "stdin" : path;
  if (f == NULL) {
    cli_error("submit", "--contexts: cannot read \"%s\"", path);
    return CLI_EXIT_USAGE;
  }
  lines l = {0};
  int rc = lines_read(f, name, like, tty, &l);
  if (f != stdin) fclose(f);
  if (rc == 0 && l.n == 0) {
    cli_error("submit", "%s: no tasks: expected one JSON object per line, "
              "{\"context\": {...}, \"identity\": \"KEY\"}", name);
    rc = CLI_EXIT_USAGE;
  }
  int64_t *ids = rc == 0 ? calloc((size_t)l.n, sizeof *ids) : NULL;
  int *existed = rc == 0 ? calloc((size_t)l.n, sizeof *existed) : NULL;
  if (rc == 0 && (!ids || !existed)) {
    cli_error("submit", "out of memory for %d tasks; nothing submitted", l.n);
    rc = CLI_EXIT_FAILURE;
  }
  if (rc == 0) {
    if (tty) fprintf(stderr, "\rsubmitting %d tasks...", l.n);
    tk_clock clock = tk_store_clock(s);
    tk_err err;
    int failed;
    int lib = tk_task_submit_many(s, cfg, l.reqs, l.n, tk_clock_now(&clock), ids, existed,
                                  &failed, &err);
    if (tty) fprintf(stderr, "\r\033[K");
    if (lib != 0) {
      /* A missing template or version is every line's fault: no line. */
      if (failed >= 0 && err.code != TK_ENOENT)
        cli_error("submit", "%s:%ld: %s; nothing submitted", name, l.lineno[failed], err.msg);
      else
        cli_error("submit", "%s; nothing submitted", err.msg);
      rc = err.code == TK_EINVAL || err.code == TK_ENOENT ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
    }
  }
  int created = 0;
  for (int i = 0; rc == 0 && i < l.n; i++) {
    printf("%lld\n", (long long)ids[i]);
    if (existed[i])
      fprintf(stderr, "%s:%ld: task %lld already exists with identity \"%s\"; nothing submitted\n",
              name, l.lineno[i], (long long)ids[i], l.reqs[i].identity);
    else
      created++;
  }
  if (rc == 0 && tty) fprintf(stderr, "submitted %d tasks (%d existed)\n", created, l.n - created);
  free(ids);
  free(existed);
  lines_free(&l);
  return rc;
}
