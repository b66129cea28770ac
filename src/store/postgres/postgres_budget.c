/* Retry budgets on PostgreSQL (store.h: retry_earlier). */
#include "store/postgres/postgres_internal.h"

#include <stdlib.h>

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
        "  WHERE s.state = " Q(TK__STEP_WAITING) " AND s.run_at > $3::bigint"
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
