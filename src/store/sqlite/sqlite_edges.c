/* The children of a template's steps, read once per connection. Finding a
 * finished step's children is on the hot path of every outcome, and a
 * stored template never changes (a new version is a new template), so the
 * edges are kept in memory after the first look instead of being queried
 * for every completed step. */
#include "store/sqlite/sqlite_internal.h"

#include <stdlib.h>

#include "store/flow.h"

/* One template's edges as adjacency lists: the children of step i are
 * children[first[i] .. first[i + 1]). Steps past nparents have none. */
struct tk__sq_dag {
  int64_t template_id;
  int nparents;
  int *first;
  int *children;
  tk__flow *flow; /* its decisions and maps (flow.h) */
};

static void dag_free(tk__sq_dag *d) {
  free(d->first);
  free(d->children);
  tk__flow_free(d->flow);
}

/* The flow of template_id from its stored definition and its n edges. */
static int flow_load(tk__sqlite *q, int64_t template_id, const int (*edge)[2], int n,
                     tk__flow **out, tk_err *err) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(q->db, "SELECT definition FROM templates WHERE id = ?", -1, &st, NULL))
    return tk__sq_fail(q, "template flow", err);
  sqlite3_bind_int64(st, 1, template_id);
  int found, rc = tk__sq_row(q, st, "template flow", &found, err);
  if (rc == 0 && !found)
    rc = tk_err_set(err, TK_ESTORE, "no template %lld", (long long)template_id);
  if (rc == 0)
    rc = tk__flow_read(template_id, tk__sq_text(st, 0), n ? edge[0] : NULL, n, out, err);
  sqlite3_finalize(st);
  return rc;
}

static int no_memory(int64_t template_id, tk_err *err) {
  return tk_err_set(err, TK_ENOMEM, "out of memory reading the steps of template %lld",
                    (long long)template_id);
}

/* Read the edges of template_id into *d. */
static int dag_load(tk__sqlite *q, int64_t template_id, tk__sq_dag *d, tk_err *err) {
  *d = (tk__sq_dag){.template_id = template_id};
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_CHILDREN,
                                 "SELECT parent_idx, child_idx FROM template_edges"
                                 " WHERE template_id = ? ORDER BY parent_idx, child_idx",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_int64(st, 1, template_id);
  int cap = 0, n = 0, rc;
  int(*edge)[2] = NULL; /* (parent, child), sorted by parent */
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      void *grown = realloc(edge, (size_t)cap * sizeof *edge);
      if (grown == NULL) break;
      edge = grown;
    }
    edge[n][0] = sqlite3_column_int(st, 0);
    edge[n][1] = sqlite3_column_int(st, 1);
    n++;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) {
    free(edge);
    return rc == SQLITE_ROW ? no_memory(template_id, err) : tk__sq_fail(q, "children", err);
  }
  int rc_flow = flow_load(q, template_id, (const int(*)[2])edge, n, &d->flow, err);
  if (rc_flow) {
    free(edge);
    return rc_flow;
  }
  d->nparents = n > 0 ? edge[n - 1][0] + 1 : 0;
  d->first = calloc((size_t)d->nparents + 1, sizeof *d->first);
  d->children = malloc(((size_t)n + 1) * sizeof *d->children);
  if (d->first == NULL || d->children == NULL) {
    free(edge);
    dag_free(d);
    return no_memory(template_id, err);
  }
  /* Count each parent's children, then turn the counts into offsets. */
  for (int i = 0; i < n; i++) {
    d->first[edge[i][0] + 1]++;
    d->children[i] = edge[i][1];
  }
  for (int i = 0; i < d->nparents; i++) d->first[i + 1] += d->first[i];
  free(edge);
  return 0;
}

/* The cached DAG of template_id, read on first use. */
static int dag_of(tk__sqlite *q, int64_t template_id, tk__sq_dag **out, tk_err *err) {
  for (int i = 0; i < q->ndags; i++)
    if (q->dags[i].template_id == template_id) {
      *out = &q->dags[i];
      return 0;
    }
  tk__sq_dag *grown = realloc(q->dags, ((size_t)q->ndags + 1) * sizeof *grown);
  if (grown == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory");
  q->dags = grown;
  int rc = dag_load(q, template_id, &grown[q->ndags], err);
  if (rc) return rc;
  *out = &grown[q->ndags++];
  return 0;
}

int tk__sq_flow(tk__sqlite *q, int64_t template_id, const tk__flow **flow, tk_err *err) {
  tk__sq_dag *d;
  int rc = dag_of(q, template_id, &d, err);
  *flow = rc ? NULL : d->flow;
  return rc;
}

int tk__sq_children(tk__sqlite *q, int64_t template_id, int idx, const int **children, int *n,
                    const struct tk__flow **flow, tk_err *err) {
  *children = NULL;
  *n = 0;
  tk__sq_dag *d;
  int rc = dag_of(q, template_id, &d, err);
  if (rc) return rc;
  if (flow) *flow = d->flow;
  if (idx < 0 || idx >= d->nparents) return 0;
  *children = d->children + d->first[idx];
  *n = d->first[idx + 1] - d->first[idx];
  return 0;
}

void tk__sq_edges_free(tk__sqlite *q) {
  for (int i = 0; i < q->ndags; i++) dag_free(&q->dags[i]);
  free(q->dags);
  q->dags = NULL;
  q->ndags = 0;
}
