/* Small helpers of the PostgreSQL backend: parameters, array literals,
 * column values, text encoding, and the transaction commands. */
#include "store/postgres/postgres_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tk__pg_begin(tk__pg_pipe *p) { return tk__pg_pipe_stmt(p, PG_BEGIN, "BEGIN", 0, NULL); }
int tk__pg_commit(tk__pg_pipe *p) { return tk__pg_pipe_stmt(p, PG_COMMIT, "COMMIT", 0, NULL); }
int tk__pg_rollback(tk__pg_pipe *p) {
  return tk__pg_pipe_stmt(p, PG_ROLLBACK, "ROLLBACK", 0, NULL);
}
/* NOTIFY is transactional: delivered when (and if) the transaction commits,
 * and sent once however often one transaction asks. */
int tk__pg_notify(tk__pg_pipe *p) {
  return tk__pg_pipe_stmt(p, PG_NOTIFY, "NOTIFY " TK__PG_CHANNEL, 0, NULL);
}

int tk__pg_begin_snapshot(tk__pg_pipe *p) {
  return tk__pg_pipe_stmt(p, PG_BEGIN_SNAPSHOT, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
                          0, NULL);
}

/* The orchestrator's statements reach every row by key, so their generic
 * plans are as good as any, and planning one of them costs more than
 * running it (about 1 ms for a map instance's outcome statement, against
 * 0.2 ms to run). The server plans a prepared statement again for its
 * parameters whenever it estimates a custom plan cheaper, which it did for
 * 4 in 10 instance outcomes of a 1,000-wide map: a third of the run's
 * time. Forcing the generic plan for the transaction keeps it to one plan
 * per connection. Bitmap scans are off too: with statistics older than
 * the steps (a burst of submits before the next ANALYZE) the claim's
 * generic plan read every ready step through one and sorted them all
 * (100,000 ready: 60 ms a claim instead of 10), where an ordered range of
 * the ready index stops at the limit. */
int tk__pg_begin_generic(tk__pg_pipe *p) {
  if (tk__pg_begin(p) < 0) return -1;
  return tk__pg_pipe_stmt(p, PG_GENERIC_PLANS,
                          "SELECT set_config('plan_cache_mode', 'force_generic_plan', true),"
                          " set_config('enable_bitmapscan', 'off', true)",
                          0, NULL);
}

int tk__pg_oom(tk_err *err, const char *what) {
  return tk_err_set(err, TK_ENOMEM, "postgres: %s: out of memory", what);
}

/* ---- One statement ---- */

int tk__pg_query(tk_store *s, int id, const char *sql, const tk__pg_args *a, const char *what,
                 PGresult **out, tk_err *err) {
  tk__pg_pipe p;
  *out = NULL;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, what, err);
  if (rc == 0) {
    int slot = tk__pg_pipe_stmt(&p, id, sql, a ? a->n : 0, a ? a->v : NULL);
    if ((rc = tk__pg_pipe_run(&p, what, err)) == 0) {
      /* Taken out of the pipe, which frees what it still holds. */
      for (int c = 0; c < p.n; c++)
        if (p.slot_of[c] == slot) {
          *out = p.res[c];
          p.res[c] = NULL;
        }
    }
  }
  tk__pg_pipe_end(&p);
  return rc;
}

/* ---- Parameters ---- */

static const char **next_arg(tk__pg_args *a) {
  /* Statements have fixed parameter counts below the limit. */
  return a->n < TK__PG_MAX_PARAMS ? &a->v[a->n++] : &a->v[TK__PG_MAX_PARAMS - 1];
}

void tk__pg_arg_i64(tk__pg_args *a, int64_t v) {
  int i = a->n < TK__PG_MAX_PARAMS ? a->n : TK__PG_MAX_PARAMS - 1;
  snprintf(a->num[i], sizeof a->num[i], "%" PRId64, v);
  *next_arg(a) = a->num[i];
}

void tk__pg_arg_text(tk__pg_args *a, const char *v) { *next_arg(a) = v; }
void tk__pg_arg_bool(tk__pg_args *a, int v) { *next_arg(a) = v ? "t" : "f"; }
void tk__pg_arg_null(tk__pg_args *a) { *next_arg(a) = NULL; }

/* ---- Array literals ---- */

void tk__pg_array_open(tk__buf *b) {
  b->len = 0;
  tk__buf_add(b, "{", 1);
}

static void element_separator(tk__buf *b) {
  if (b->len > 1) tk__buf_add(b, ",", 1);
}

void tk__pg_array_text(tk__buf *b, const char *v) {
  element_separator(b);
  if (v == NULL) {
    tk__buf_add(b, "NULL", 4);
    return;
  }
  /* Quoted, with backslash and double quote escaped: every other byte
   * (commas, braces, spaces, the word NULL) stands for itself inside. */
  tk__buf_add(b, "\"", 1);
  const char *run = v;
  for (const char *c = v; *c; c++) {
    if (*c == '"' || *c == '\\') {
      tk__buf_add(b, run, (size_t)(c - run));
      tk__buf_add(b, "\\", 1);
      run = c;
    }
  }
  tk__buf_add(b, run, strlen(run));
  tk__buf_add(b, "\"", 1);
}

void tk__pg_array_i64(tk__buf *b, int64_t v) {
  char num[24];
  int n = snprintf(num, sizeof num, "%" PRId64, v);
  element_separator(b);
  tk__buf_add(b, num, (size_t)n);
}

void tk__pg_array_bool(tk__buf *b, int v) {
  element_separator(b);
  tk__buf_add(b, v ? "t" : "f", 1);
}

const char *tk__pg_array_close(tk__buf *b) {
  tk__buf_add(b, "}", 1);
  return b->oom ? NULL : b->p;
}

/* ---- Columns ---- */

const char *tk__pg_text(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? NULL : PQgetvalue(r, row, col);
}

int64_t tk__pg_i64(const PGresult *r, int row, int col) {
  if (PQgetisnull(r, row, col)) return TK__NONE;
  return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

int tk__pg_bool(const PGresult *r, int row, int col) {
  return !PQgetisnull(r, row, col) && PQgetvalue(r, row, col)[0] == 't';
}

void tk__pg_copy(char *dst, size_t cap, const PGresult *r, int row, int col) {
  const char *v = PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col);
  size_t n = (size_t)PQgetlength(r, row, col);
  if (n >= cap) n = cap - 1;
  memcpy(dst, v, n);
  dst[n] = '\0';
}

/* ---- Text encoding ---- */

/* The length of the valid UTF-8 sequence at s, or 0 when it is not one
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_sequence(const unsigned char *s) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07;
  else return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

const char *tk__pg_utf8(const char *s, char **tmp) {
  *tmp = NULL;
  if (s == NULL) return NULL;
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, len;
  while (u[i] && (len = utf8_sequence(u + i)) > 0) i += len;
  if (u[i] == '\0') return s; /* the usual case: valid, used as it is */
  size_t total = strlen(s);
  char *out = malloc(3 * total + 1); /* each bad byte becomes 3 */
  if (out == NULL) return "(text lost: out of memory)";
  size_t o = 0;
  for (i = 0; u[i];) {
    len = utf8_sequence(u + i);
    if (len == 0) {
      memcpy(out + o, "\xEF\xBF\xBD", 3);
      o += 3;
      i++;
    } else {
      memcpy(out + o, s + i, len);
      o += len;
      i += len;
    }
  }
  out[o] = '\0';
  *tmp = out;
  return out;
}
