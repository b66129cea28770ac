/* The SQLite backend: templates and their DAG edges. */
#include "store/sqlite/sqlite_internal.h"

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

/* A template row as JSON, its definition parsed. */
static json_t *template_json(sqlite3_stmt *st) {
  json_t *def = json_loads(tk__sq_text(st, 4), 0, NULL);
  return json_pack("{s:I, s:s, s:s, s:s, s:o, s:I}", "id", (json_int_t)sqlite3_column_int64(st, 0),
                   "namespace", tk__sq_text(st, 1), "name", tk__sq_text(st, 2), "version",
                   tk__sq_text(st, 3), "definition", def ? def : json_null(), "created_at",
                   (json_int_t)sqlite3_column_int64(st, 5));
}

#define TEMPLATE_COLUMNS "id, namespace, name, version, definition, created_at"

int tk__sq_template_get(tk_store *s, const char *name, const char *version, json_t **out,
                        tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  const char *slash = strchr(name, '/');
  char ns[256] = "";
  const char *bare = name;
  if (slash) {
    snprintf(ns, sizeof ns, "%.*s", (int)(slash - name), name);
    bare = slash + 1;
  }
  sqlite3_stmt *st;
  /* Newest = most recently added among matching versions. */
  if (sqlite3_prepare_v2(q->db,
                         "SELECT " TEMPLATE_COLUMNS " FROM templates WHERE name = ?1"
                         " AND (?2 IS NULL OR namespace = ?2) AND (?3 IS NULL OR version = ?3)"
                         " ORDER BY id DESC",
                         -1, &st, NULL))
    return tk__sq_fail(q, "template lookup", err);
  sqlite3_bind_text(st, 1, bare, -1, SQLITE_STATIC);
  if (slash) sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
  if (version) sqlite3_bind_text(st, 3, version, -1, SQLITE_STATIC);
  *out = NULL;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    char first_ns[256];
    snprintf(first_ns, sizeof first_ns, "%s", tk__sq_text(st, 1));
    *out = template_json(st);
    /* A bare name must not be ambiguous across namespaces. */
    while (!slash && (rc = sqlite3_step(st)) == SQLITE_ROW) {
      if (strcmp(first_ns, tk__sq_text(st, 1)) != 0) {
        json_decref(*out);
        *out = NULL;
        sqlite3_finalize(st);
        return tk_err_set(err, TK_EINVAL,
                          "template name \"%s\" exists in namespaces \"%s\" and \"%s\": write "
                          "NAMESPACE/%s",
                          name, first_ns, (const char *)sqlite3_column_text(st, 1), name);
      }
    }
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    json_decref(*out);
    *out = NULL;
    rc = tk__sq_fail(q, "template lookup", err);
    sqlite3_finalize(st);
    return rc;
  }
  sqlite3_finalize(st);
  if (*out == NULL) {
    if (version)
      return tk_err_set(err, TK_ENOENT, "no template \"%s\" version \"%s\" (see tasker template list)",
                        name, version);
    return tk_err_set(err, TK_ENOENT, "no template \"%s\" (see tasker template list)", name);
  }
  return 0;
}

int tk__sq_template_get_by_id(tk_store *s, int64_t id, json_t **out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(q->db, "SELECT " TEMPLATE_COLUMNS " FROM templates WHERE id = ?", -1,
                         &st, NULL))
    return tk__sq_fail(q, "template lookup", err);
  sqlite3_bind_int64(st, 1, id);
  int found, rc = tk__sq_row(q, st, "template lookup", &found, err);
  *out = found ? template_json(st) : NULL;
  sqlite3_finalize(st);
  if (rc) return rc;
  if (*out == NULL) return tk_err_set(err, TK_ENOENT, "no template with id %lld", (long long)id);
  return 0;
}

int tk__sq_template_list(tk_store *s, json_t **out, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(q->db,
                         "SELECT " TEMPLATE_COLUMNS " FROM templates ORDER BY namespace, name, id",
                         -1, &st, NULL))
    return tk__sq_fail(q, "template list", err);
  *out = json_array();
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    json_t *t = template_json(st);
    json_t *def = json_object_get(t, "definition");
    json_t *steps = json_object_get(def, "steps");
    json_object_set_new(t, "steps", json_integer((json_int_t)json_array_size(steps)));
    json_t *desc = json_object_get(def, "description");
    json_object_set_new(t, "description", desc ? json_incref(desc) : json_string(""));
    json_object_del(t, "definition");
    json_array_append_new(*out, t);
  }
  rc = tk__sq_rows_end(q, rc, "template list", err);
  sqlite3_finalize(st);
  if (rc) {
    json_decref(*out);
    *out = NULL;
  }
  return rc;
}
