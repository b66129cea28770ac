/* The SQLite backend: templates and their DAG edges. */
#include "store/sqlite/sqlite_internal.h"

#include <stdlib.h>
#include <string.h>

/* Bind a template's namespace, name and version to parameters 1-3. */
static void bind_identity(sqlite3_stmt *st, const tk__template_row *row) {
  sqlite3_bind_text(st, 1, row->namespace_, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, row->name, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, row->version, -1, SQLITE_STATIC);
}

/* Store one template inside the caller's transaction. */
static int put_one(tk__sqlite *q, tk__template_row *row, tk_err *err) {
  row->existed = 0;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(q->db,
                         "SELECT id, digest FROM templates WHERE namespace = ? AND name = ?"
                         " AND version = ?",
                         -1, &st, NULL))
    goto sqlfail;
  bind_identity(st, row);
  int found, rc = tk__sq_row(q, st, "store template", &found, err);
  if (rc) {
    sqlite3_finalize(st);
    return rc;
  }
  if (found) {
    int same = strcmp(tk__sq_text(st, 1), row->digest) == 0;
    row->id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (same) {
      row->existed = 1;
      return 0;
    }
    return tk_err_set(err, TK_EEXIST,
                      "template %s/%s version %s already exists with a different definition; "
                      "give the changed template a new version",
                      row->namespace_, row->name, row->version);
  }
  sqlite3_finalize(st);
  if (sqlite3_prepare_v2(q->db,
                         "INSERT INTO templates (namespace, name, version, description,"
                         " definition, digest, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         -1, &st, NULL))
    goto sqlfail;
  bind_identity(st, row);
  sqlite3_bind_text(st, 4, row->description ? row->description : "", -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 5, row->definition, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 6, row->digest, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 7, row->created_at);
  if (sqlite3_step(st) != SQLITE_DONE) goto sqlfail;
  sqlite3_finalize(st);
  row->id = sqlite3_last_insert_rowid(q->db);
  if (sqlite3_prepare_v2(q->db,
                         "INSERT INTO template_edges (template_id, parent_idx, child_idx)"
                         " VALUES (?, ?, ?)",
                         -1, &st, NULL))
    goto sqlfail;
  for (int i = 0; i < row->nedges; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, row->id);
    sqlite3_bind_int(st, 2, row->edges[2 * i]);
    sqlite3_bind_int(st, 3, row->edges[2 * i + 1]);
    if (sqlite3_step(st) != SQLITE_DONE) goto sqlfail;
  }
  sqlite3_finalize(st);
  return 0;
sqlfail:
  rc = tk__sq_fail(q, "store template", err);
  sqlite3_finalize(st);
  return rc;
}

int tk__sq_template_put(tk_store *s, tk__template_row *rows, int n, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int rc = tk__sq_begin(q, err);
  for (int i = 0; i < n && rc == 0; i++) rc = put_one(q, &rows[i], err);
  if (rc == 0) rc = tk__sq_commit(q, err);
  if (rc) tk__sq_rollback(q);
  return rc;
}


int tk__sq_template_rec(sqlite3_stmt *st, int col, tk__template_rec *r) {
  int oom = 0;
  r->id = sqlite3_column_int64(st, col);
  r->namespace_ = tk__dup(tk__sq_text(st, col + 1), &oom);
  r->name = tk__dup(tk__sq_text(st, col + 2), &oom);
  r->version = tk__dup(tk__sq_text(st, col + 3), &oom);
  r->description = tk__dup(tk__sq_text(st, col + 4), &oom);
  r->definition = tk__dup(tk__sq_text(st, col + 5), &oom);
  r->created_at = sqlite3_column_int64(st, col + 6);
  if (oom) tk__template_rec_free(r);
  return oom ? TK_ENOMEM : 0;
}

int tk__sq_template_find(tk_store *s, const char *ns, const char *name, const char *version,
                         tk__template_rec *out, int max, int *n, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  sqlite3_stmt *st;
  *n = 0;
  /* Newest = most recently added among matching versions. */
  if (sqlite3_prepare_v2(q->db,
                         "SELECT " TK__SQ_TEMPLATE_COLUMNS(" ") " FROM templates WHERE name = ?1"
                         " AND (?2 IS NULL OR namespace = ?2) AND (?3 IS NULL OR version = ?3)"
                         " ORDER BY id DESC LIMIT ?4",
                         -1, &st, NULL))
    return tk__sq_fail(q, "template lookup", err);
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  if (ns) sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
  if (version) sqlite3_bind_text(st, 3, version, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 4, max);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW && *n < max) {
    if (tk__sq_template_rec(st, 0, &out[*n]) != 0) {
      rc = SQLITE_NOMEM;
      break;
    }
    (*n)++;
  }
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
    tk__template_recs_free(out, *n);
    *n = 0;
    rc = rc == SQLITE_NOMEM ? tk_err_set(err, TK_ENOMEM, "out of memory")
                            : tk__sq_fail(q, "template lookup", err);
    sqlite3_finalize(st);
    return rc;
  }
  sqlite3_finalize(st);
  return 0;
}

int tk__sq_template_get_by_id(tk_store *s, int64_t id, tk__template_rec *out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_TEMPLATE_BY_ID,
                                 "SELECT " TK__SQ_TEMPLATE_COLUMNS(" ")
                                 " FROM templates WHERE id = ?",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  int found, rc = tk__sq_row(q, st, "template lookup", &found, err);
  if (rc == 0 && found && tk__sq_template_rec(st, 0, out) != 0)
    rc = tk_err_set(err, TK_ENOMEM, "out of memory");
  sqlite3_reset(st);
  if (rc) return rc;
  if (!found) return tk_err_set(err, TK_ENOENT, "no template with id %lld", (long long)id);
  return 0;
}

int tk__sq_template_list(tk_store *s, tk__template_rec **out, int *n, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  sqlite3_stmt *st;
  *out = NULL;
  *n = 0;
  if (sqlite3_prepare_v2(q->db,
                         "SELECT " TK__SQ_TEMPLATE_COLUMNS(" ")
                         " FROM templates ORDER BY namespace, name, id",
                         -1, &st, NULL))
    return tk__sq_fail(q, "template list", err);
  int rc, cap = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (tk__grow((void **)out, &cap, *n + 1, sizeof **out) != 0 ||
        tk__sq_template_rec(st, 0, &(*out)[*n]) != 0) {
      rc = SQLITE_NOMEM;
      break;
    }
    (*n)++;
  }
  rc = rc == SQLITE_NOMEM ? tk_err_set(err, TK_ENOMEM, "out of memory listing templates")
                          : tk__sq_rows_end(q, rc, "template list", err);
  sqlite3_finalize(st);
  if (rc) {
    tk__template_recs_free(*out, *n);
    free(*out);
    *out = NULL;
    *n = 0;
  }
  return rc;
}
