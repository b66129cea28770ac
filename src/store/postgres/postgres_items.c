/* Batch steps (DESIGN §9): a claimed step's settings and pending items,
 * and item results written between two handler calls of one claim. */
#include "store/postgres/postgres_internal.h"

#include <stdlib.h>
#include <string.h>

#define Q TK__PG_Q

/* The settings and the counts of the step's items by state; the pending
 * items themselves come from the next statement, in submission order. */
static const char BATCH_SQL[] =
    "SELECT b.max_in_call_retries, b.max_item_attempts, b.fail_if_any_gave_up,"
    " (SELECT count(*) FROM items i WHERE i.step_id = b.step_id),"
    " (SELECT count(*) FROM items i WHERE i.step_id = b.step_id"
    " AND i.state = " Q(TK__ITEM_ACKED) "),"
    " (SELECT count(*) FROM items i WHERE i.step_id = b.step_id"
    " AND i.state = " Q(TK__ITEM_GAVE_UP) ")"
    " FROM batch_steps b WHERE b.step_id = $1::bigint";

static const char PENDING_SQL[] =
    "SELECT seq, key, data, attempts FROM items WHERE step_id = $1::bigint"
    " AND state = " Q(TK__ITEM_PENDING) " ORDER BY seq";

/* The pending items of r into out: one block of text holds every key and
 * datum, NUL-terminated, and the items point into it. */
static int take_pending(tk__batch_load *out, const PGresult *r) {
  int rows = PQntuples(r);
  size_t size = 1;
  for (int i = 0; i < rows; i++)
    size += (size_t)PQgetlength(r, i, 1) + (size_t)PQgetlength(r, i, 2) + 2;
  out->text = malloc(size);
  out->items = rows > 0 ? malloc((size_t)(unsigned)rows * sizeof *out->items) : NULL;
  if (out->text == NULL || (rows > 0 && out->items == NULL)) return TK_ENOMEM;
  char *at = out->text;
  for (int i = 0; i < rows; i++) {
    tk__pending_item *it = &out->items[i];
    it->seq = tk__pg_i64(r, i, 0);
    it->attempts = (int32_t)tk__pg_i64(r, i, 3);
    size_t n = (size_t)PQgetlength(r, i, 1);
    memcpy(at, PQgetvalue(r, i, 1), n + 1);
    it->key = at;
    at += n + 1;
    it->data = NULL;
    if (!PQgetisnull(r, i, 2)) {
      n = (size_t)PQgetlength(r, i, 2);
      memcpy(at, PQgetvalue(r, i, 2), n + 1);
      it->data = at;
      at += n + 1;
    }
  }
  *at = '\0';
  out->npending = rows;
  return 0;
}

int tk__pg_items_load(tk_store *s, int64_t step_id, tk__batch_load *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "load items", err);
  if (rc) return rc;
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, step_id);
  tk__pg_begin_snapshot(&p); /* one snapshot for the counts and the items */
  int batch = tk__pg_pipe_stmt(&p, PG_BATCH_GET, BATCH_SQL, a.n, a.v);
  int items = tk__pg_pipe_stmt(&p, PG_ITEMS_GET, PENDING_SQL, a.n, a.v);
  tk__pg_commit(&p);
  if ((rc = tk__pg_pipe_run(&p, "load items", err)) == 0) {
    PGresult *r = tk__pg_result(&p, batch);
    if (PQntuples(r) == 0) {
      rc = tk_err_set(err, TK_ENOENT,
                      "step %lld has no batch settings: it was submitted before its template "
                      "made it a batch step",
                      (long long)step_id);
    } else {
      out->max_in_call_retries = (int)tk__pg_i64(r, 0, 0);
      out->max_item_attempts = (int)tk__pg_i64(r, 0, 1);
      out->fail_if_any_gave_up = tk__pg_bool(r, 0, 2);
      out->total = tk__pg_i64(r, 0, 3);
      out->acked = tk__pg_i64(r, 0, 4);
      out->gave_up = tk__pg_i64(r, 0, 5);
      if (take_pending(out, tk__pg_result(&p, items)) != 0)
        rc = tk_err_set(err, TK_ENOMEM, "out of memory loading the items of step %lld",
                        (long long)step_id);
    }
  }
  tk__pg_pipe_end(&p);
  if (rc) tk__batch_load_free(out);
  return rc;
}

/* The share lock keeps the step as it is (held by this claim) until the
 * commit: an outcome or an operator action that would move it waits, so
 * no item is written for a step that another claim holds. */
int tk__pg_items_checkpoint(tk_store *s, int64_t step_id, int64_t claim_id,
                            const tk__item_result *r, int n, tk_err *err) {
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "item checkpoint", err);
  if (rc) return rc;
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, step_id);
  tk__pg_arg_i64(&a, claim_id);
  tk__pg_begin(&p);
  int held = tk__pg_pipe_stmt(&p, PG_ITEMS_CHECKPOINT,
                              "SELECT 1 FROM steps WHERE id = $1::bigint"
                              " AND state = " Q(TK__STEP_IN_PROGRESS) " AND claim_id = $2::bigint"
                              " FOR SHARE",
                              a.n, a.v);
  if (n > 0 && tk__pg_items_queue(&p, step_id, claim_id, r, n) < 0)
    rc = tk__pg_oom(err, "item checkpoint");
  tk__pg_commit(&p);
  int ran = tk__pg_pipe_run(&p, "item checkpoint", rc ? NULL : err);
  if (rc == 0) rc = ran;
  if (rc == 0 && PQntuples(tk__pg_result(&p, held)) == 0)
    rc = tk_err_set(err, TK_EFENCED,
                    "item results of step %lld refused: claim %lld no longer holds the step",
                    (long long)step_id, (long long)claim_id);
  tk__pg_pipe_end(&p);
  return rc;
}
