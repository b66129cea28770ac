/* Templates and their DAG edges. */
#include "store/postgres/postgres_internal.h"

#include <stdlib.h>
#include <string.h>

/* A template's row and its edges, unless the namespace/name/version is
 * taken (by this transaction, an earlier one, or one committing right now:
 * ON CONFLICT waits for it), in which case nothing is written. */
static const char INSERT_SQL[] =
    "WITH ins AS (INSERT INTO templates (namespace, name, version, description, definition,"
    " digest, created_at) VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text,"
    " $7::bigint) ON CONFLICT (namespace, name, version) DO NOTHING RETURNING id),"
    " e AS (INSERT INTO template_edges (template_id, parent_idx, child_idx)"
    " SELECT ins.id, u.p, u.c FROM ins, unnest($8::int[], $9::int[]) AS u(p, c))"
    " SELECT id FROM ins";

/* After the insert, in a statement of its own so that it sees a row a
 * concurrent transaction committed while the insert waited for it. */
static const char DIGEST_SQL[] =
    "SELECT id, digest FROM templates WHERE namespace = $1::text AND name = $2::text"
    " AND version = $3::text";

#define COLUMNS "id, namespace, name, version, description, definition, created_at"

/* Queue row's insert and digest lookup; their slots in slots[0..1]. */
static int queue_put(tk__pg_pipe *p, const tk__template_row *row, int *slots) {
  tk__buf b[2] = {{0}};
  tk__pg_array_open(&b[0]);
  tk__pg_array_open(&b[1]);
  for (int i = 0; i < row->nedges; i++) {
    tk__pg_array_i64(&b[0], row->edges[2 * i]);
    tk__pg_array_i64(&b[1], row->edges[2 * i + 1]);
  }
  const char *parents = tk__pg_array_close(&b[0]), *children = tk__pg_array_close(&b[1]);
  int rc = -1;
  if (parents && children) {
    tk__pg_args a = {0};
    tk__pg_arg_text(&a, row->namespace_);
    tk__pg_arg_text(&a, row->name);
    tk__pg_arg_text(&a, row->version);
    tk__pg_arg_text(&a, row->description ? row->description : "");
    tk__pg_arg_text(&a, row->definition);
    tk__pg_arg_text(&a, row->digest);
    tk__pg_arg_i64(&a, row->created_at);
    tk__pg_arg_text(&a, parents);
    tk__pg_arg_text(&a, children);
    slots[0] = tk__pg_pipe_stmt(p, PG_TEMPLATE_INSERT, INSERT_SQL, a.n, a.v);
    slots[1] = tk__pg_pipe_stmt(p, PG_TEMPLATE_DIGEST, DIGEST_SQL, 3, a.v);
    rc = slots[0] < 0 || slots[1] < 0 ? -1 : 0;
  }
  tk__buf_free(&b[0]);
  tk__buf_free(&b[1]);
  return rc;
}

int tk__pg_template_put(tk_store *s, tk__template_row *rows, int n, tk_err *err) {
  int *slots = calloc((size_t)n * 2 + 1, sizeof *slots);
  if (slots == NULL) return tk__pg_oom(err, "store template");
  tk__pg_pipe p;
  int rc = tk__pg_pipe_begin((tk__pg *)s, &p, "store template", err);
  if (rc == 0) {
    tk__pg_begin(&p);
    for (int i = 0; i < n; i++)
      if (queue_put(&p, &rows[i], &slots[2 * i]) != 0) {
        rc = tk__pg_oom(err, "store template");
        break;
      }
    int ran = tk__pg_pipe_run(&p, "store template", rc ? NULL : err);
    if (rc == 0) rc = ran;
  }
  for (int i = 0; i < n && rc == 0; i++) {
    tk__template_row *row = &rows[i];
    PGresult *ins = tk__pg_result(&p, slots[2 * i]), *dig = tk__pg_result(&p, slots[2 * i + 1]);
    row->existed = 0;
    if (PQntuples(ins) == 1) {
      row->id = tk__pg_i64(ins, 0, 0);
    } else if (PQntuples(dig) == 1 && strcmp(tk__pg_text(dig, 0, 1), row->digest) == 0) {
      row->id = tk__pg_i64(dig, 0, 0);
      row->existed = 1;
    } else {
      rc = tk_err_set(err, TK_EEXIST,
                      "template %s/%s version %s already exists with a different definition; "
                      "give the changed template a new version",
                      row->namespace_, row->name, row->version);
    }
  }
  if (p.active) {
    /* All or none: a template refused undoes the others. */
    tk__pg_pipe_reset(&p);
    int added = 0;
    for (int i = 0; i < n; i++) added |= !rows[i].existed;
    /* Fresh statistics of the edges: every outcome looks up a step's
     * children by (template_id, parent_idx), and a table this small is
     * never analyzed by autovacuum, whose first look would otherwise leave
     * that lookup no better a plan than a walk over the template. */
    if (rc == 0 && added)
      tk__pg_pipe_stmt(&p, PG_ANALYZE_EDGES, "ANALYZE template_edges", 0, NULL);
    if (rc == 0) tk__pg_commit(&p);
    else tk__pg_rollback(&p);
    int ended = tk__pg_pipe_run(&p, "store template", rc ? NULL : err);
    if (rc == 0) rc = ended;
  }
  tk__pg_pipe_end(&p);
  free(slots);
  return rc;
}

/* Fill rec from row i of r (COLUMNS); 0 or TK_ENOMEM. */
static int fill(tk__template_rec *rec, const PGresult *r, int i, tk_err *err) {
  int oom = 0;
  rec->id = tk__pg_i64(r, i, 0);
  rec->namespace_ = tk__dup(tk__pg_text(r, i, 1), &oom);
  rec->name = tk__dup(tk__pg_text(r, i, 2), &oom);
  rec->version = tk__dup(tk__pg_text(r, i, 3), &oom);
  rec->description = tk__dup(tk__pg_text(r, i, 4), &oom);
  rec->definition = tk__dup(tk__pg_text(r, i, 5), &oom);
  rec->created_at = tk__pg_i64(r, i, 6);
  if (!oom) return 0;
  tk__template_rec_free(rec);
  return tk__pg_oom(err, "template");
}

int tk__pg_template_find(tk_store *s, const char *ns, const char *name, const char *version,
                         tk__template_rec *out, int max, int *n, tk_err *err) {
  *n = 0;
  tk__pg_args a = {0};
  tk__pg_arg_text(&a, name);
  tk__pg_arg_text(&a, ns);
  tk__pg_arg_text(&a, version);
  tk__pg_arg_i64(&a, max);
  PGresult *r;
  /* Most recently added first: ids grow with every insert. */
  int rc = tk__pg_query(s, PG_TEMPLATE_FIND,
                        "SELECT " COLUMNS " FROM templates WHERE name = $1::text"
                        " AND ($2::text IS NULL OR namespace = $2)"
                        " AND ($3::text IS NULL OR version = $3) ORDER BY id DESC LIMIT $4::int",
                        &a, "find template", &r, err);
  for (int i = 0; rc == 0 && i < PQntuples(r) && i < max; i++) {
    memset(&out[i], 0, sizeof out[i]);
    if ((rc = fill(&out[i], r, i, err)) == 0) *n = i + 1;
  }
  if (rc) {
    for (int i = 0; i < *n; i++) tk__template_rec_free(&out[i]);
    *n = 0;
  }
  PQclear(r);
  return rc;
}

int tk__pg_template_get_by_id(tk_store *s, int64_t id, tk__template_rec *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  tk__pg_args a = {0};
  tk__pg_arg_i64(&a, id);
  PGresult *r;
  int rc = tk__pg_query(s, PG_TEMPLATE_BY_ID,
                        "SELECT " COLUMNS " FROM templates WHERE id = $1::bigint", &a, "template",
                        &r, err);
  if (rc == 0 && PQntuples(r) == 0)
    rc = tk_err_set(err, TK_ENOENT, "no template with id %lld", (long long)id);
  if (rc == 0) rc = fill(out, r, 0, err);
  PQclear(r);
  return rc;
}

int tk__pg_template_list(tk_store *s, tk__template_rec **out, int *n, tk_err *err) {
  *out = NULL;
  *n = 0;
  tk__pg_args a = {0};
  PGresult *r;
  int rc = tk__pg_query(s, PG_TEMPLATE_LIST,
                        "SELECT " COLUMNS " FROM templates ORDER BY namespace, name, id", &a,
                        "list templates", &r, err);
  int rows = rc == 0 ? PQntuples(r) : 0;
  if (rc == 0 && rows > 0 && (*out = calloc((size_t)rows, sizeof **out)) == NULL)
    rc = tk__pg_oom(err, "list templates");
  for (int i = 0; rc == 0 && i < rows; i++)
    if ((rc = fill(&(*out)[i], r, i, err)) == 0) *n = i + 1;
  if (rc) {
    tk__template_recs_free(*out, *n);
    *out = NULL;
    *n = 0;
  }
  PQclear(r);
  return rc;
}
