/* The SQLite backend: connection, statement cache, transactions and
 * migrations. WAL mode, so readers never block the writer. */
#include "store/sqlite/sqlite_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include <tasker/clock.h>

#include "store/migration.h"

int tk__sq_fail(tk__sqlite *q, const char *what, tk_err *err) {
  return tk_err_set(err, TK_ESTORE, "sqlite %s: %s: %s", q->path, what, sqlite3_errmsg(q->db));
}

sqlite3_stmt *tk__sq_stmt(tk__sqlite *q, int id, const char *sql, tk_err *err) {
  sqlite3_stmt *st = q->stmts[id];
  if (st != NULL) {
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
  }
  if (sqlite3_prepare_v3(q->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
    tk__sq_fail(q, "prepare", err);
    return NULL;
  }
  q->stmts[id] = st;
  return st;
}

sqlite3_stmt *tk__sq_insert_rows(tk__sqlite *q, int one_id, int many_id, const char *head,
                                 int columns, int rows, tk_err *err) {
  assert(rows == 1 || rows == TK__SQ_ROWS_PER_INSERT);
  assert(columns > 0 && columns <= 10);
  int id = rows == 1 ? one_id : many_id;
  if (q->stmts[id] != NULL) return tk__sq_stmt(q, id, NULL, err);
  char sql[256 + TK__SQ_ROWS_PER_INSERT * 24];
  size_t len = (size_t)snprintf(sql, sizeof sql, "%s VALUES ", head);
  assert(len < 256);
  for (int i = 0; i < rows; i++) {
    len += (size_t)snprintf(sql + len, sizeof sql - len, "%s(?", i ? "," : "");
    for (int c = 1; c < columns; c++) len += (size_t)snprintf(sql + len, sizeof sql - len, ",?");
    len += (size_t)snprintf(sql + len, sizeof sql - len, ")");
  }
  return tk__sq_stmt(q, id, sql, err);
}

int tk__sq_exec(tk__sqlite *q, const char *sql, tk_err *err) {
  char *msg = NULL;
  if (sqlite3_exec(q->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    tk_err_set(err, TK_ESTORE, "sqlite %s: %s", q->path, msg ? msg : "error");
    sqlite3_free(msg);
    return TK_ESTORE;
  }
  return 0;
}

int tk__sq_done(tk__sqlite *q, sqlite3_stmt *st, tk_err *err) {
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) {
    sqlite3_reset(st);
    return 0;
  }
  int r = tk__sq_fail(q, "step", err);
  sqlite3_reset(st);
  return r;
}

int tk__sq_row(tk__sqlite *q, sqlite3_stmt *st, const char *what, int *found, tk_err *err) {
  int rc = sqlite3_step(st);
  *found = rc == SQLITE_ROW;
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : tk__sq_fail(q, what, err);
}

int tk__sq_rows_end(tk__sqlite *q, int rc, const char *what, tk_err *err) {
  return rc == SQLITE_DONE ? 0 : tk__sq_fail(q, what, err);
}

int tk__sq_run(tk__sqlite *q, int id, const char *sql, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, id, sql, err);
  if (st == NULL) return TK_ESTORE;
  return tk__sq_done(q, st, err);
}

int tk__sq_begin(tk__sqlite *q, tk_err *err) {
  /* A transaction still open here is one whose ROLLBACK failed (out of
   * memory, say): end it now rather than refuse every later one. */
  if (!sqlite3_get_autocommit(q->db)) tk__sq_rollback(q);
  return tk__sq_run(q, SQ_BEGIN, "BEGIN IMMEDIATE", err);
}

int tk__sq_commit(tk__sqlite *q, tk_err *err) {
  int rc = tk__sq_transitions_flush(q, err);
  if (rc == 0) rc = tk__sq_run(q, SQ_COMMIT, "COMMIT", err);
  /* A failed commit leaves nothing half done for the caller to clean up. */
  if (rc != 0) tk__sq_rollback(q);
  return rc;
}

void tk__sq_rollback(tk__sqlite *q) {
  tk__sq_transitions_drop(q);
  if (!sqlite3_get_autocommit(q->db)) tk__sq_run(q, SQ_ROLLBACK, "ROLLBACK", NULL);
}

const char *tk__sq_text(sqlite3_stmt *st, int col) {
  return (const char *)sqlite3_column_text(st, col);
}

char *tk__sq_col_dup(sqlite3_stmt *st, int col, int *oom) {
  return tk__dup(tk__sq_text(st, col), oom);
}

int64_t tk__sq_col_i64(sqlite3_stmt *st, int col) {
  return sqlite3_column_type(st, col) == SQLITE_NULL ? TK__NONE : sqlite3_column_int64(st, col);
}

int tk__sq_count(tk__sqlite *q, const char *name, int64_t delta, tk_err *err) {
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_COUNT,
                                 "INSERT INTO counters (name, value) VALUES (?1, ?2)"
                                 " ON CONFLICT (name) DO UPDATE SET value = value + ?2",
                                 err);
  if (st == NULL) return TK_ESTORE;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, delta);
  return tk__sq_done(q, st, err);
}

/* Waiting for another connection's write lock. SQLite's own busy timeout
 * sleeps 1, 2, 5, 10 ... ms between tries, which alone makes a claim that
 * meets a `tasker submit` several milliseconds late; transactions here last
 * tens of microseconds, so try again after 50 us, backing off to 1 ms, and
 * give up (SQLITE_BUSY) after 10 s. */
static int wait_for_writer(void *ud, int tries) {
  tk__sqlite *q = ud;
  int64_t now = tk_monotonic_ns();
  if (tries == 0) q->busy_since_ns = now;
  if (now - q->busy_since_ns > (int64_t)10 * 1000000000) return 0;
  long ns = tries < 20 ? 50000L : tries < 200 ? 200000L : 1000000L;
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
  return 1;
}

/* SQLite has no LISTEN/NOTIFY; every commit in WAL mode appends to the
 * -wal file, so watching it tells a sleeping engine that another process
 * (tasker submit, tasker retry, another orchestrator) changed something. */
static int sq_change_fd(tk_store *s) {
  tk__sqlite *q = (tk__sqlite *)s;
  if (q->inotify_fd >= 0) return q->inotify_fd;
  char wal[4096];
  snprintf(wal, sizeof wal, "%s-wal", q->path);
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return -1;
  if (inotify_add_watch(fd, wal, IN_MODIFY) < 0) {
    close(fd);
    return -1;
  }
  q->inotify_fd = fd;
  return fd;
}

/* Drains after a change that found no new signal: the commit the watch
 * saw may not have ended (the watch fires at the log's first write, and
 * the commit is published after its flush, with no write to watch). Each
 * asks to be drained again, TK__CHANGED_RECHECK_MS later; a signal
 * committed in that time is news then, not at the next look at the
 * waits (TK__WAIT_LOOK_MS). */
#define UNSURE_DRAINS 4

/* A commit came: whether it stored a signal, by the newest signal's id
 * (one step down the table's b-tree). */
static int sq_drain_changes(tk_store *s) {
  tk__sqlite *q = (tk__sqlite *)s;
  char buf[4096];
  if (q->inotify_fd < 0) return 0;
  int changed = 0;
  while (read(q->inotify_fd, buf, sizeof buf) > 0) changed = 1;
  if (changed) q->unsure_drains = UNSURE_DRAINS;
  else if (q->unsure_drains > 0) q->unsure_drains--;
  else return 0;
  tk_err err;
  sqlite3_stmt *st = tk__sq_stmt(q, SQ_SIGNALS_LAST, "SELECT max(id) FROM signals", &err);
  if (st == NULL) return 0;
  int64_t last = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_reset(st);
  int news = last > q->signals_seen;
  if (news) q->signals_seen = last;
  if (news) q->unsure_drains = 0;
  return news ? TK__CHANGED_WAITS : q->unsure_drains > 0 ? TK__CHANGED_UNSURE : 0;
}

/* Process-wide: SQLite stops keeping memory statistics, which cost a
 * global mutex per allocation (about a tenth of the engine's instructions). */
static void sq_process_init(void) {
  /* SQLITE_MISUSE once SQLite is initialized: then the call changes nothing. */
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

static void sq_close(tk_store *s) {
  tk__sqlite *q = (tk__sqlite *)s;
  if (q == NULL) return;
  if (q->inotify_fd >= 0) close(q->inotify_fd);
  if (q->ckpt_ready) tk__sq_checkpointer_stop(q);
  for (int i = 0; i < SQ__COUNT; i++) sqlite3_finalize(q->stmts[i]);
  tk__sq_edges_free(q);
  tk__sq_transitions_free(q);
  tk__sq_lanes_free(q);
  sqlite3_close(q->db);
  free(q->path);
  free(q);
}

/* Whether the file holds no database yet (no page: what SQLite makes of
 * an empty file, which nothing has written to). */
static int is_empty(tk__sqlite *q) {
  sqlite3_stmt *st;
  int empty = 0;
  if (sqlite3_prepare_v2(q->db, "PRAGMA page_count", -1, &st, NULL) != SQLITE_OK) return 0;
  if (sqlite3_step(st) == SQLITE_ROW) empty = sqlite3_column_int64(st, 0) == 0;
  sqlite3_finalize(st);
  return empty;
}

static int sq_open(const char *location, const tk_store_open_options *opts, tk_store **out,
                   tk_err *err) {
  *out = NULL;
  if (strncmp(location, "sqlite:", 7) == 0) location += 7; /* else a bare path */
  if (location == NULL || *location == '\0')
    return tk_err_set(err, TK_EINVAL, "sqlite store: empty path (use sqlite:PATH)");
  tk__sqlite *q = calloc(1, sizeof *q);
  if (q == NULL) return tk_err_set(err, TK_ENOMEM, "sqlite store: out of memory");
  q->base.ops = &tk__sqlite_store_ops;
  q->inotify_fd = -1;
  q->path = strdup(location);
  if (q->path == NULL) {
    free(q);
    return tk_err_set(err, TK_ENOMEM, "sqlite store: out of memory");
  }
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (opts->create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(location, &q->db, flags, NULL) != SQLITE_OK) {
    /* Without CREATE a missing file is SQLITE_CANTOPEN with errno ENOENT. */
    int rc = !opts->create && q->db && sqlite3_system_errno(q->db) == ENOENT
                 ? tk_err_set(err, TK_ENOENT, "sqlite store %s does not exist", location)
                 : tk_err_set(err, TK_ESTORE, "cannot open sqlite store %s: %s", location,
                              q->db ? sqlite3_errmsg(q->db) : "out of memory");
    sq_close(&q->base);
    return rc;
  }
  /* Several processes may share the file: wait for the writer rather than
   * fail, and let WAL keep readers off the writer's back. FULL sync: a
   * commit survives a power cut too (TK_DURABILITY_FULL, the default;
   * tk_store_set_durability chooses NORMAL, docs/durability.md). An 8 MiB page
   * cache keeps `tasker run` small with a million steps stored.
   * Checkpoints run on a thread of their own (sqlite_checkpoint.c). A new
   * file gets 8 KiB pages: a pass dirties pages all over the steps table
   * and the log pays per page written, so fewer, larger pages cost less
   * (about 5% of the CPU per step against 4 KiB; an existing file keeps
   * its page size). journal_size_limit: when the log starts over after a
   * checkpoint, its file is cut back to 64 MiB (the checkpoint threshold,
   * 8,000 frames of 8 KiB, sqlite_checkpoint.c) instead of keeping the
   * high-water mark of its largest transaction (a prune, a bulk submit). */
  sqlite3_busy_handler(q->db, wait_for_writer, q);
  if (!opts->create && is_empty(q)) {
    /* Setting WAL below would write a header into it: not without create. */
    sq_close(&q->base);
    return tk_err_set(err, TK_ENOENT, "sqlite store %s is an empty file", location);
  }
  int rc = tk__sq_exec(q,
                       "PRAGMA page_size = 8192;"
                       "PRAGMA journal_mode = WAL;"
                       "PRAGMA synchronous = FULL;"
                       "PRAGMA foreign_keys = ON;"
                       "PRAGMA temp_store = MEMORY;"
                       "PRAGMA cache_size = -8192;"
                       "PRAGMA journal_size_limit = 67108864;",
                       err);
  /* Prepared now, so that a rollback never waits on memory for it. */
  if (rc == 0 && tk__sq_stmt(q, SQ_ROLLBACK, "ROLLBACK", err) == NULL) rc = TK_ESTORE;
  if (rc != 0) {
    sq_close(&q->base);
    return rc;
  }
  tk__sq_checkpointer_init(q);
  q->ckpt_ready = 1;
  *out = &q->base;
  return 0;
}

static int sq_schema_version(tk_store *s, int *version, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  sqlite3_stmt *st;
  *version = 0;
  if (sqlite3_prepare_v2(q->db,
                         "SELECT name FROM sqlite_master WHERE type = 'table'"
                         " AND name = 'schema_migrations'",
                         -1, &st, NULL) != SQLITE_OK)
    return tk__sq_fail(q, "schema version", err);
  int exists, rc = tk__sq_row(q, st, "schema version", &exists, err);
  sqlite3_finalize(st);
  if (rc || !exists) return rc;
  if (sqlite3_prepare_v2(q->db, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations", -1,
                         &st, NULL) != SQLITE_OK)
    return tk__sq_fail(q, "schema version", err);
  int found;
  rc = tk__sq_row(q, st, "schema version", &found, err);
  if (found) *version = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  return rc;
}

static int sq_migrate(tk_store *s, int target, int *applied, int *version, tk_err *err) {
  tk__sqlite *q = (tk__sqlite *)s;
  int n = 0, v = 0, rc;
  if (applied) *applied = 0;
  if ((rc = tk__sq_exec(q,
                        "CREATE TABLE IF NOT EXISTS schema_migrations ("
                        " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                        " applied_at INTEGER NOT NULL)",
                        err)))
    return rc;
  for (const tk__migration *m = tk__sqlite_migrations;
       m->number != 0 && (target <= 0 || m->number <= target); m++) {
    if ((rc = tk__sq_begin(q, err))) return rc;
    if ((rc = sq_schema_version(s, &v, err))) goto fail;
    if (m->number <= v) {
      tk__sq_rollback(q);
      continue;
    }
    if ((rc = tk__sq_exec(q, m->sql, err))) goto fail;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(q->db,
                           "INSERT INTO schema_migrations (version, name, applied_at)"
                           " VALUES (?, ?, CAST(strftime('%s','now') AS INTEGER) * 1000)",
                           -1, &st, NULL) != SQLITE_OK) {
      rc = tk__sq_fail(q, "migrate", err);
      goto fail;
    }
    sqlite3_bind_int(st, 1, m->number);
    sqlite3_bind_text(st, 2, m->name, -1, SQLITE_STATIC);
    rc = sqlite3_step(st) == SQLITE_DONE ? 0 : tk__sq_fail(q, "migrate", err);
    sqlite3_finalize(st);
    if (rc) goto fail;
    if ((rc = tk__sq_commit(q, err))) goto fail;
    n++;
  }
  if (applied) *applied = n;
  if (version) return sq_schema_version(s, version, err);
  return 0;
fail:
  tk__sq_rollback(q);
  return rc;
}

const tk__store_ops tk__sqlite_store_ops = {
    .version = TK__STORE_OPS_VERSION,
    .scheme = "sqlite",
    .process_init = sq_process_init,
    .open = sq_open,
    .close = sq_close,
    .migrate = sq_migrate,
    .schema_version = sq_schema_version,
    .template_put = tk__sq_template_put,
    .template_find = tk__sq_template_find,
    .template_get_by_id = tk__sq_template_get_by_id,
    .template_list = tk__sq_template_list,
    .task_create = tk__sq_task_create,
    .record = tk__sq_record,
    .heartbeat = tk__sq_heartbeat,
    .expired = tk__sq_expired,
    .next_due = tk__sq_next_due,
    .has_work = tk__sq_has_work,
    .inputs = tk__sq_inputs,
    .operator = tk__sq_operator,
    .task_report = tk__sq_task_report,
    .status = tk__sq_status,
    .schedule_put = tk__sq_schedule_put,
    .schedule_list = tk__sq_schedule_list,
    .schedule_remove = tk__sq_schedule_remove,
    .schedule_fire = tk__sq_schedule_fire,
    .change_fd = sq_change_fd,
    .drain_changes = sq_drain_changes,
    .items_load = tk__sq_items_load,
    .items_checkpoint = tk__sq_items_checkpoint,
    .task_list = tk__sq_task_list,
    .task_count = tk__sq_task_count,
    .step_list = tk__sq_step_list,
    .activity = tk__sq_activity,
    .prune = tk__sq_prune,
    .size = tk__sq_size,
    .durability = tk__sq_durability,
    .retry_earlier = tk__sq_retry_earlier,
    .instance_list = tk__sq_instance_list,
    .submit_many = tk__sq_submit_many,
    .claim_get = tk__sq_claim_get,
    .queue_put = tk__sq_queue_put,
    .queue_list = tk__sq_queue_list,
    .worker_seen = tk__sq_worker_seen,
    .budget_update = tk__sq_budget_update,
    .budget_list = tk__sq_budget_list,
    .signal_put = tk__sq_signal_put,
    .step_wait = tk__sq_step_wait,
    .wait_take = tk__sq_wait_take,
    .deadline_apply = tk__sq_deadline_apply,
    .callback_arm = tk__sq_callback_arm,
    .callback_put = tk__sq_callback_put,
    .callback_extend = tk__sq_callback_extend,
    .child_start = tk__sq_child_start,
    .task_family = tk__sq_task_family,
};
