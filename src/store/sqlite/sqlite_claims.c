/* The SQLite backend's look-up of a worker's claim (DESIGN §19): the
 * attempt row a token names, with its step as it is now. */
#include "store/sqlite/sqlite_internal.h"

#include <stdio.h>
#include <string.h>

int tk__sq_claim_get(tk_store *s, int64_t claim_id, tk__claim_rec *out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(out, 0, sizeof *out);
  /* The reaper's columns (tk__sq_claim_columns), as the claim saw them:
   * its attempt number, owner and due time are the attempt row's. */
  sqlite3_stmt *st = tk__sq_stmt(
      q, SQ_CLAIM_GET,
      "SELECT a.step_id, s.task_id, t.template_id, COALESCE(s.map_idx, s.idx), a.attempt,"
      " s.max_attempts, s.retryable, a.due_at, s.last_delay_ms, s.backoff, a.owner,"
      " s.lease_expires_at, a.id, COALESCE(s.item_index, -1), s.state, a.started_at,"
      " s.state = 'in_progress' AND s.claim_id = a.id, a.token_hash"
      " FROM attempts a JOIN steps s ON s.id = a.step_id JOIN tasks t ON t.id = s.task_id"
      " WHERE a.id = ?1",
      err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, claim_id);
  int found, rc = tk__sq_row(q, st, "claim", &found, err);
  if (rc == 0 && !found) rc = tk_err_set(err, TK_ENOENT, "no claim %lld", (long long)claim_id);
  if (rc == 0) {
    tk__sq_claim_columns(st, &out->step, out->owner, sizeof out->owner);
    out->lease_expires_at = out->step.lease_expires_at =
        sqlite3_column_type(st, 11) == SQLITE_NULL ? TK__NONE : sqlite3_column_int64(st, 11);
    snprintf(out->state, sizeof out->state, "%s", tk__sq_text(st, 14));
    out->started_at = sqlite3_column_int64(st, 15);
    out->held = sqlite3_column_int(st, 16);
    out->has_token = sqlite3_column_bytes(st, 17) == TK__TOKEN_HASH_LEN;
    if (out->has_token) memcpy(out->token_hash, sqlite3_column_blob(st, 17), TK__TOKEN_HASH_LEN);
  }
  sqlite3_reset(st);
  return rc;
}
