/* Retry budgets on PostgreSQL (store.h: retry_earlier, budget_update, budget_list). */
#include "store/postgres/postgres_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q TK__PG_Q

/* One statement, one transaction with its NOTIFY, one round trip. The
 * steps are taken FOR UPDATE SKIP LOCKED: a step locked now belongs to a
 * claim or an outcome (or an operator's action) about to change it, and is
 * left alone rather than waited for, so this never waits and never joins
 * a lock cycle. Under READ COMMITTED the lock rechecks the step's own
 * conditions on its newest version; the attempt's are fixed once the step
 * waits (a new attempt row needs a claim, which leaves waiting). */
int tk__pg_retry_earlier(tk_store *s, const tk__retry_ref *v, int n, int64_t run_at, int *moved,
                         tk_err *err) {
  for (int i = 0; i < n; i++) moved[i] = 0;
  if (n <= 0) return 0;
  tk__buf steps = {0}, claims = {0};
  tk__pg_array_open(&steps);
  tk__pg_array_open(&claims);
  for (int i = 0; i < n; i++) {
    tk__pg_array_i64(&steps, v[i].step_id);
    tk__pg_array_i64(&claims, v[i].claim_id);
  }
  char at[24];
  snprintf(at, sizeof at, "%lld", (long long)run_at);
  const char *values[] = {tk__pg_array_close(&steps), tk__pg_array_close(&claims), at};
  int rc = values[0] && values[1] ? 0 : tk__pg_oom(err, "bring retries earlier");
  tk__pg_pipe p;
  if (rc == 0 && (rc = tk__pg_pipe_begin((tk__pg *)s, &p, "bring retries earlier", err)) == 0) {
    tk__pg_begin(&p);
    int slot = tk__pg_pipe_stmt(
        &p, PG_RETRY_EARLIER,
        "WITH v AS (SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS v(step_id, claim_id)),"
        " target AS (SELECT s.id, v.claim_id FROM v"
        "  JOIN steps s ON s.id = v.step_id"
        "  JOIN attempts a ON a.id = v.claim_id AND a.step_id = s.id"
        "  WHERE s.state = " Q(TK__STEP_WAITING_FOR_RETRY) " AND s.run_at > $3::bigint"
        "  AND s.attempts = a.attempt"
        "  AND NOT EXISTS (SELECT 1 FROM attempts l WHERE l.step_id = s.id AND l.id > a.id)"
        "  FOR UPDATE OF s SKIP LOCKED),"
        " moved AS (UPDATE steps s SET run_at = $3::bigint FROM target t WHERE s.id = t.id"
        "  RETURNING s.id, t.claim_id),"
        " timed AS (UPDATE attempts a SET next_run_at = $3::bigint,"
        "  delay_ms = $3::bigint - a.finished_at FROM moved m WHERE a.id = m.claim_id)"
        " SELECT id, claim_id FROM moved",
        3, values);
    tk__pg_notify(&p);
    tk__pg_commit(&p);
    rc = tk__pg_pipe_run(&p, "bring retries earlier", err);
    PGresult *r = rc == 0 ? tk__pg_result(&p, slot) : NULL;
    for (int k = 0; r != NULL && k < PQntuples(r); k++) {
      int64_t id = tk__pg_i64(r, k, 0), claim = tk__pg_i64(r, k, 1);
      for (int i = 0; i < n; i++)
        if (v[i].step_id == id && v[i].claim_id == claim) moved[i] = 1;
    }
    tk__pg_pipe_end(&p);
  }
  tk__buf_free(&steps);
  tk__buf_free(&claims);
  return rc;
}

/* The state's bytes as hex text, and back (cap bytes at most; -1: not
 * hex of at most cap bytes). */
static void to_hex(const unsigned char *in, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[in[i] >> 4];
    out[2 * i + 1] = digits[in[i] & 15];
  }
  out[2 * n] = '\0';
}

static int nibble(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static long from_hex(const char *in, unsigned char *out, size_t cap) {
  size_t n = strlen(in);
  if (n % 2 != 0 || n / 2 > cap) return -1;
  for (size_t i = 0; i < n / 2; i++) {
    int hi = nibble(in[2 * i]), lo = nibble(in[2 * i + 1]);
    if (hi < 0 || lo < 0) return -1;
    out[i] = (unsigned char)(hi << 4 | lo);
  }
  return (long)(n / 2);
}

/* Two round trips in one transaction. The first makes sure the row exists
 * (an empty state the first time: a second connection inserting the same
 * key at once waits for this one's commit, then inserts nothing) and
 * locks it FOR UPDATE; that SELECT, a statement of its own under READ
 * COMMITTED, sees the row another connection committed meanwhile. The
 * second writes fn's state and commits. */
int tk__pg_budget_update(tk_store *s, const char *key, unsigned char *state, size_t cap,
                         tk__budget_fn fn, void *arg, int64_t now, tk_err *err) {
  int rc = tk__budget_key_check(key, err);
  if (rc) return rc;
  char at[24], *hex = malloc(2 * cap + 1);
  if (hex == NULL) return tk__pg_oom(err, "update a retry budget");
  snprintf(at, sizeof at, "%lld", (long long)now);
  const char *values[] = {key, at, hex};
  tk__pg_pipe p;
  if ((rc = tk__pg_pipe_begin((tk__pg *)s, &p, "update a retry budget", err)) != 0) {
    free(hex);
    return rc;
  }
  tk__pg_begin(&p);
  tk__pg_pipe_stmt(&p, PG_BUDGET_LOCK,
                   "INSERT INTO retry_budgets (key, state, updated_at) VALUES ($1, '', $2::bigint)"
                   " ON CONFLICT (key) DO NOTHING",
                   2, values);
  int slot = tk__pg_pipe_stmt(
      &p, PG_BUDGET_GET, "SELECT encode(state, 'hex') FROM retry_budgets WHERE key = $1 FOR UPDATE",
      1, values);
  rc = tk__pg_pipe_run(&p, "read a retry budget", err);
  PGresult *r = rc == 0 ? tk__pg_result(&p, slot) : NULL;
  if (rc == 0 && (r == NULL || PQntuples(r) != 1))
    rc = tk_err_set(err, TK_ESTORE, "postgres: read a retry budget: its row is not there");
  size_t len = 0;
  if (rc == 0) {
    long n = from_hex(tk__pg_text(r, 0, 0), state, cap);
    len = n < 0 ? 0 : (size_t)n; /* not a state this engine wrote: fn starts afresh */
    rc = fn(arg, state, &len, cap);
  }
  if (rc == 0) {
    to_hex(state, len, hex);
    tk__pg_pipe_reset(&p);
    tk__pg_pipe_stmt(&p, PG_BUDGET_PUT,
                     "UPDATE retry_budgets SET state = decode($3, 'hex'), updated_at = $2::bigint"
                     " WHERE key = $1",
                     3, values);
    tk__pg_commit(&p);
    rc = tk__pg_pipe_run(&p, "write a retry budget", err);
  }
  tk__pg_pipe_end(&p); /* rolls back what is left open */
  free(hex);
  return rc;
}

/* One statement, alone in its transaction: a plain read, which waits for
 * no budget_update's row lock (it sees the last committed states). */
int tk__pg_budget_list(tk_store *s, tk__budget_rec **out, int *n, tk_err *err) {
  *out = NULL;
  *n = 0;
  PGresult *r;
  int rc = tk__pg_query(s, -1,
                        "SELECT key, encode(state, 'hex'), updated_at FROM retry_budgets"
                        " ORDER BY key COLLATE \"C\"",
                        NULL, "list retry budgets", &r, err);
  if (rc) return rc;
  int rows = PQntuples(r);
  tk__budget_rec *v = rows > 0 ? calloc((size_t)rows, sizeof *v) : NULL;
  if (rows > 0 && v == NULL) rc = tk__pg_oom(err, "list retry budgets");
  for (int i = 0; rc == 0 && i < rows; i++) {
    tk__pg_copy(v[i].key, sizeof v[i].key, r, i, 0);
    v[i].updated_at = tk__pg_i64(r, i, 2);
    const char *hex = tk__pg_text(r, i, 1);
    size_t cap = strlen(hex) / 2;
    if (cap == 0) continue;
    if ((v[i].state = malloc(cap)) == NULL) {
      rc = tk__pg_oom(err, "list retry budgets");
      break;
    }
    long got = from_hex(hex, v[i].state, cap);
    v[i].len = got < 0 ? 0 : (size_t)got;
  }
  PQclear(r);
  if (rc) {
    tk__budget_recs_free(v, rows);
    return rc;
  }
  *out = v;
  *n = rows;
  return 0;
}
