/* The SQLite backend's batch steps (DESIGN §9): items stored with their
 * task, loaded at claim time, and item results written either with the
 * step's fenced outcome or, between two handler calls of one claim, in a
 * fenced transaction of their own. */
#include "store/sqlite/sqlite_internal.h"

#include <stdlib.h>
#include <string.h>

int tk__sq_items_insert(tk__sqlite *q, int64_t step_id, const tk__new_step *ns, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_BATCH_INSERT,
                                 "INSERT INTO batch_steps (step_id, max_in_call_retries,"
                                 " max_item_attempts, fail_if_any_gave_up) VALUES (?, ?, ?, ?)",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, step_id);
  sqlite3_bind_int(st, 2, ns->max_in_call_retries);
  sqlite3_bind_int(st, 3, ns->max_item_attempts);
  sqlite3_bind_int(st, 4, ns->fail_if_any_gave_up);
  int rc = tk__sq_done(q, st, err);
  for (int i = 0; i < ns->nitems && rc == 0; i++) {
    st = tk__sq_stmt(q, SQ_ITEM_INSERT,
                     "INSERT INTO items (step_id, seq, key, data) VALUES (?, ?, ?, ?)", err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_int64(st, 1, step_id);
    sqlite3_bind_int(st, 2, i);
    sqlite3_bind_text(st, 3, ns->items[i].key, -1, SQLITE_STATIC);
    if (ns->items[i].data) sqlite3_bind_text(st, 4, ns->items[i].data, -1, SQLITE_STATIC);
    rc = tk__sq_done(q, st, err);
  }
  return rc;
}

/* Whether results r[i] and r[j] can share one ranged update: neighbours in
 * the step, with the same change and no reason to store. */
static int same_run(const tk__item_result *a, const tk__item_result *b) {
  return a->error == NULL && b->error == NULL && b->seq == a->seq + 1 && b->delta == a->delta &&
         strcmp(a->state, b->state) == 0;
}

int tk__sq_items_apply(tk__sqlite *q, int64_t step_id, const tk__item_result *r, int n,
                       tk_err *err) {
  /* Acks come in long runs of neighbours (every item of a call but the
   * rejected ones), so one statement per run instead of per item. The
   * state guard keeps an acked or given-up item as it is. */
  for (int i = 0; i < n;) {
    int j = i + 1;
    while (j < n && same_run(&r[j - 1], &r[j])) j++;
    sqlite3_stmt *st = tk__sq_stmt(q, SQ_ITEM_UPDATE,
                                   "UPDATE items SET state = ?1, attempts = attempts + ?2,"
                                   " last_error = COALESCE(?3, last_error)"
                                   " WHERE step_id = ?4 AND seq BETWEEN ?5 AND ?6"
                                   " AND state = 'pending'",
                                   err);
    if (st == NULL) return TK_ESTORE;
    sqlite3_bind_text(st, 1, r[i].state, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, r[i].delta);
    if (r[i].error) sqlite3_bind_text(st, 3, r[i].error, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, step_id);
    sqlite3_bind_int64(st, 5, r[i].seq);
    sqlite3_bind_int64(st, 6, r[j - 1].seq);
    int rc = tk__sq_done(q, st, err);
    if (rc) return rc;
    i = j;
  }
  return 0;
}

/* A pending item while loading: string offsets into the growing text. */
typedef struct loaded {
  int64_t seq;
  size_t key, data; /* offsets; data == SIZE_MAX for none */
  int32_t attempts;
} loaded;

/* Append a NUL-terminated copy of s (len bytes) to the growing text. */
static int append_text(char **text, size_t *len, size_t *cap, const char *s, size_t n,
                       size_t *off) {
  if (*len + n + 1 > *cap) {
    size_t c = (*cap ? *cap : 4096);
    while (*len + n + 1 > c) c *= 2;
    char *t = realloc(*text, c);
    if (t == NULL) return TK_ENOMEM;
    *text = t;
    *cap = c;
  }
  memcpy(*text + *len, s, n);
  (*text)[*len + n] = '\0';
  *off = *len;
  *len += n + 1;
  return 0;
}

/* Read every item of the step: count the finished ones, keep the pending. */
static int read_items(tk__sqlite *q, int64_t step_id, tk__batch_load *out, loaded **rows,
                      size_t *text_len, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_ITEMS_GET,
                                 "SELECT seq, key, data, state, attempts FROM items"
                                 " WHERE step_id = ? ORDER BY seq",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, step_id);
  size_t n = 0, cap = 0, len = 0, tcap = 0;
  int rc = 0, step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    out->total++;
    const char *state = tk__sq_text(st, 3);
    if (strcmp(state, TK__ITEM_PENDING) != 0) {
      if (strcmp(state, TK__ITEM_ACKED) == 0) out->acked++;
      else out->gave_up++;
      continue;
    }
    if (n == cap) {
      loaded *r = realloc(*rows, (cap = cap ? cap * 2 : 256) * sizeof *r);
      if (r == NULL) { rc = TK_ENOMEM; break; }
      *rows = r;
    }
    loaded *l = &(*rows)[n];
    l->seq = sqlite3_column_int64(st, 0);
    l->attempts = sqlite3_column_int(st, 4);
    l->data = SIZE_MAX;
    rc = append_text(&out->text, &len, &tcap, tk__sq_text(st, 1),
                     (size_t)sqlite3_column_bytes(st, 1), &l->key);
    if (rc == 0 && sqlite3_column_type(st, 2) != SQLITE_NULL)
      rc = append_text(&out->text, &len, &tcap, tk__sq_text(st, 2),
                       (size_t)sqlite3_column_bytes(st, 2), &l->data);
    if (rc) break;
    n++;
  }
  sqlite3_reset(st);
  out->npending = (int64_t)n;
  *text_len = len;
  if (rc == TK_ENOMEM)
    return tk_err_set(err, TK_ENOMEM, "out of memory loading the items of step %lld",
                      (long long)step_id);
  return step == SQLITE_DONE ? 0 : tk__sq_fail(q, "load items", err);
}

int tk__sq_items_load(tk_store *s, int64_t step_id, tk__batch_load *out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_BATCH_GET,
                                 "SELECT max_in_call_retries, max_item_attempts,"
                                 " fail_if_any_gave_up FROM batch_steps WHERE step_id = ?",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, step_id);
  int found, rc = tk__sq_row(q, st, "batch settings", &found, err);
  if (rc) return rc;
  if (found) {
    out->max_in_call_retries = sqlite3_column_int(st, 0);
    out->max_item_attempts = sqlite3_column_int(st, 1);
    out->fail_if_any_gave_up = sqlite3_column_int(st, 2);
  }
  sqlite3_reset(st);
  if (!found)
    return tk_err_set(err, TK_ENOENT, "step %lld has no batch settings: it was submitted before "
                      "its template made it a batch step", (long long)step_id);
  loaded *rows = NULL;
  size_t len = 0;
  rc = read_items(q, step_id, out, &rows, &len, err);
  if (rc == 0 && out->npending > 0) {
    out->items = malloc((size_t)out->npending * sizeof *out->items);
    if (out->items == NULL)
      rc = tk_err_set(err, TK_ENOMEM, "out of memory loading the items of step %lld",
                      (long long)step_id);
  }
  /* The text is final now, so offsets can become pointers. */
  for (int64_t i = 0; rc == 0 && i < out->npending; i++) {
    out->items[i] = (tk__pending_item){
        rows[i].seq, out->text + rows[i].key,
        rows[i].data == SIZE_MAX ? NULL : out->text + rows[i].data, rows[i].attempts};
  }
  free(rows);
  if (rc) tk__batch_load_free(out);
  return rc;
}

int tk__sq_items_checkpoint(tk_store *s, int64_t step_id, int64_t claim_id,
                            const tk__item_result *r, int n, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int rc = tk__sq_begin(q, err);
  if (rc) return rc;
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_STEP_HELD,
                                 "SELECT 1 FROM steps WHERE id = ? AND state = 'in_progress'"
                                 " AND claim_id = ?",
                                 err);
  if (st == NULL) {
    rc = TK_ESTORE;
    goto fail;
  }
  sqlite3_bind_int64(st, 1, step_id);
  sqlite3_bind_int64(st, 2, claim_id);
  int held;
  if ((rc = tk__sq_row(q, st, "item checkpoint", &held, err))) goto fail;
  sqlite3_reset(st);
  if (!held) {
    rc = tk_err_set(err, TK_EFENCED,
                    "item results of step %lld refused: claim %lld no longer holds the step",
                    (long long)step_id, (long long)claim_id);
    goto fail;
  }
  if ((rc = tk__sq_items_apply(q, step_id, r, n, err))) goto fail;
  return tk__sq_commit(q, err);
fail:
  tk__sq_rollback(q);
  return rc;
}
