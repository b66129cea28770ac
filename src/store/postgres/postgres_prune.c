/* The PostgreSQL backend's retention (DESIGN §16): removing finished tasks
 * with everything they own, and the store's size on disk. */
#include "store/postgres/postgres_internal.h"

#include <string.h>

#define Q TK__PG_Q

/* The tasks a request selects, oldest finished first, through the
 * tasks_finished index (0005): $1 $2 $3 the cutoffs of complete, error and
 * cancelled (the smallest bigint: none of that state), $4 the latest. */
#define SELECTED                                                                               \
  "SELECT id FROM tasks WHERE finished_at IS NOT NULL AND finished_at < $4::bigint"           \
  " AND ((state = " Q(TK__TASK_COMPLETE) " AND finished_at < $1::bigint)"                     \
  " OR (state = " Q(TK__TASK_ERROR) " AND finished_at < $2::bigint)"                          \
  " OR (state = " Q(TK__TASK_CANCELLED) " AND finished_at < $3::bigint))"

/* The selected tasks' moves, whether a transitions row, an attempt row
 * or a tasks row records each (the moves view, 0012_moves_view.sql): the
 * transitions a prune counts. Given as = ANY of an array, the tasks reach
 * each of the view's parts by key; as IN (SELECT ...), a join, they would
 * not, and every part would be read whole. */
#define OF_T "= ANY (ARRAY(SELECT id FROM t))"

/* One statement, so one transaction, that counts what it removes. The
 * tasks' locks taken only when free, and FOR UPDATE SKIP LOCKED:
 * orchestrators pruning at once each take tasks the others have not locked (no waiting, no deadlock, nothing counted twice),
 * and a task an operator holds (reopening it) is left for later; a locked
 * row is checked against the condition again as it is after any change
 * committed meanwhile. Every part of the statement reads the snapshot of
 * its start, so the moves are counted as they were before the deletes.
 * Foreign keys are checked at the statement's end, when steps and their
 * batch settings are gone together. */
static const char PRUNE_SQL[] =
    "WITH t AS (" SELECTED " AND pg_try_advisory_xact_lock(" TK__PG_TASK_LOCK_KEY("id") ")"
    " ORDER BY finished_at, id LIMIT $5::int FOR UPDATE SKIP LOCKED),"
    " s AS (SELECT id FROM steps WHERE task_id IN (SELECT id FROM t)),"
    " da AS (DELETE FROM attempts WHERE step_id IN (SELECT id FROM s) RETURNING 1),"
    " di AS (DELETE FROM items WHERE step_id IN (SELECT id FROM s) RETURNING 1),"
    " db AS (DELETE FROM batch_steps WHERE step_id IN (SELECT id FROM s) RETURNING 1),"
    /* Signals to wait steps (0018): not counted, as batch settings. */
    " dg AS (DELETE FROM signals WHERE step_id IN (SELECT id FROM s)),"
    " dk AS (DELETE FROM callbacks WHERE step_id IN (SELECT id FROM s)),"
    " dr AS (DELETE FROM transitions WHERE task_id IN (SELECT id FROM t)),"
    " ds AS (DELETE FROM steps WHERE id IN (SELECT id FROM s) RETURNING 1),"
    " dt AS (DELETE FROM tasks WHERE id IN (SELECT id FROM t) RETURNING 1),"
    " dc AS (DELETE FROM map_countdowns WHERE task_id IN (SELECT id FROM t)),"
    /* The per-minute counts of the minutes before the earliest cutoff. */
    " dm AS (DELETE FROM activity_minutes WHERE minute < $6::bigint)"
    " SELECT (SELECT count(*) FROM dt), (SELECT count(*) FROM ds), (SELECT count(*) FROM da),"
    " (SELECT count(*) FROM moves WHERE task_id " OF_T "),"
    " (SELECT count(*) FROM di), (SELECT count(*) FROM db)";

/* A dry run: every selected task, counted, nothing locked. */
static const char COUNT_SQL[] = TK__PRUNE_COUNT_SQL(SELECTED, OF_T);

int tk__pg_prune(tk_store *s, const tk__prune_request *r, tk__prune_counts *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  if (!r->dry_run && r->limit <= 0)
    return tk_err_set(err, TK_EINVAL, "prune: batch limit %d: expected > 0", r->limit);
  tk__pg_args a = {0};
  int64_t cut[TK__PRUNE_STATES + 1];
  tk__prune_cutoffs(r, cut);
  for (int i = 0; i <= TK__PRUNE_STATES; i++) tk__pg_arg_i64(&a, cut[i]);
  if (!r->dry_run) {
    tk__pg_arg_i64(&a, r->limit);
    tk__pg_arg_i64(&a, tk__prune_minutes_before(r));
  }
  PGresult *res;
  int rc = r->dry_run ? tk__pg_query(s, PG_PRUNE_COUNT, COUNT_SQL, &a, "prune (dry run)", &res, err)
                      : tk__pg_query(s, PG_PRUNE, PRUNE_SQL, &a, "prune", &res, err);
  if (rc == 0) {
    out->tasks = tk__pg_i64(res, 0, 0);
    out->steps = tk__pg_i64(res, 0, 1);
    out->attempts = tk__pg_i64(res, 0, 2);
    out->transitions = tk__pg_i64(res, 0, 3);
    out->items = tk__pg_i64(res, 0, 4);
  }
  PQclear(res);
  return rc;
}

int tk__pg_size(tk_store *s, int64_t *bytes, tk_err *err) {
  PGresult *res;
  *bytes = 0;
  /* Tables of tasker's schema; pg_total_relation_size adds their indexes
   * and TOAST. */
  int rc = tk__pg_query(s, PG_SIZE,
                        "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint"
                        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                        " WHERE n.nspname = current_schema() AND c.relkind = 'r'",
                        NULL, "store size", &res, err);
  if (rc == 0) *bytes = tk__pg_i64(res, 0, 0);
  PQclear(res);
  return rc;
}

int tk__pg_durability_apply(tk__pg *pg, tk_err *err) {
  /* fast: commits return before their WAL is flushed; a server crash may
   * lose the last of them (about 3 x wal_writer_delay), never corrupts.
   * full: what the server is set to, unless that is off: then on (a
   * stronger setting such as remote_apply is kept). */
  const char *sql = pg->sync_off ? "SET synchronous_commit = off"
                                 : "RESET synchronous_commit; SELECT set_config("
                                   "'synchronous_commit', CASE current_setting("
                                   "'synchronous_commit') WHEN 'off' THEN 'on' ELSE "
                                   "current_setting('synchronous_commit') END, false)";
  PGresult *r = PQexec(pg->conn, sql);
  int ok = r && (PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK);
  PQclear(r);
  if (ok) return 0;
  return tk_err_set(err, PQstatus(pg->conn) == CONNECTION_OK ? TK_ESTORE : TK_EDISCONNECTED,
                    "postgres: durability: %s", PQerrorMessage(pg->conn));
}

int tk__pg_durability(tk_store *s, tk_durability d, tk_err *err) {
  tk__pg *pg = (tk__pg *)s;
  pg->sync_off = d == TK_DURABILITY_FAST;
  return tk__pg_durability_apply(pg, err);
}
