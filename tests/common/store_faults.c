/* Fault injection into the SQLite store, the way SQLite tests itself
 * (store_faults.h): a VFS over the default one that fails the Nth read,
 * write, sync or truncate, an allocator under SQLite that fails the Nth
 * allocation, and the scenarios the test_store_faults_* programs run. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include <tasker/workflow.h>

#include "store_faults.h"

/* ---- the fault switch, shared by the VFS and the allocator ---- */

static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static fault_kind armed_kind;
static int countdown = -1; /* calls to let through before failing; -1: off */
static int persistent;     /* once failing, keep failing */
static int fired;          /* faults injected since armed */

static void arm(fault_kind kind, int n, int keep_failing) {
  pthread_mutex_lock(&fault_mu);
  armed_kind = kind;
  countdown = n;
  persistent = keep_failing;
  fired = 0;
  pthread_mutex_unlock(&fault_mu);
}

/* Turn faults off; returns how many were injected. */
static int disarm(void) {
  pthread_mutex_lock(&fault_mu);
  countdown = -1;
  int n = fired;
  pthread_mutex_unlock(&fault_mu);
  return n;
}

static int should_fail(fault_kind kind) {
  pthread_mutex_lock(&fault_mu);
  int fail = 0;
  if (countdown >= 0 && armed_kind == kind) {
    if (countdown == 0) {
      fail = 1;
      fired++;
      if (!persistent) countdown = -1;
    } else {
      countdown--;
    }
  }
  pthread_mutex_unlock(&fault_mu);
  return fail;
}

/* ---- the VFS: every file method passes through to the real file ---- */

static sqlite3_vfs *real_vfs;

typedef struct fault_file {
  sqlite3_file base;
  sqlite3_file *real; /* right after this struct, szOsFile of the real VFS */
} fault_file;

#define REAL(f) (((fault_file *)(f))->real)

static int f_close(sqlite3_file *f) { return REAL(f)->pMethods->xClose(REAL(f)); }
static int f_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off) {
  if (should_fail(FAULT_IO)) return SQLITE_IOERR_READ;
  return REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}
static int f_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off) {
  if (should_fail(FAULT_IO)) return SQLITE_IOERR_WRITE;
  return REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}
static int f_truncate(sqlite3_file *f, sqlite3_int64 size) {
  if (should_fail(FAULT_IO)) return SQLITE_IOERR_TRUNCATE;
  return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int f_sync(sqlite3_file *f, int flags) {
  if (should_fail(FAULT_IO)) return SQLITE_IOERR_FSYNC;
  return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int f_size(sqlite3_file *f, sqlite3_int64 *size) {
  return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int f_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int f_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int f_reserved(sqlite3_file *f, int *out) {
  return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int f_control(sqlite3_file *f, int op, void *arg) {
  return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int f_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int f_device(sqlite3_file *f) {
  return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int f_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **pp) {
  return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, pp);
}
static int f_shm_lock(sqlite3_file *f, int off, int n, int flags) {
  return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void f_shm_barrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int f_shm_unmap(sqlite3_file *f, int del) {
  return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
/* No memory-mapped reads: every read goes through f_read. */
static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp) {
  (void)f, (void)off, (void)n;
  *pp = NULL;
  return SQLITE_OK;
}
static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) {
  (void)f, (void)off, (void)p;
  return SQLITE_OK;
}

static const sqlite3_io_methods fault_io = {
    .iVersion = 3,
    .xClose = f_close,
    .xRead = f_read,
    .xWrite = f_write,
    .xTruncate = f_truncate,
    .xSync = f_sync,
    .xFileSize = f_size,
    .xLock = f_lock,
    .xUnlock = f_unlock,
    .xCheckReservedLock = f_reserved,
    .xFileControl = f_control,
    .xSectorSize = f_sector,
    .xDeviceCharacteristics = f_device,
    .xShmMap = f_shm_map,
    .xShmLock = f_shm_lock,
    .xShmBarrier = f_shm_barrier,
    .xShmUnmap = f_shm_unmap,
    .xFetch = f_fetch,
    .xUnfetch = f_unfetch,
};

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags,
                  int *out_flags) {
  (void)vfs;
  fault_file *f = (fault_file *)file;
  f->real = (sqlite3_file *)(f + 1);
  int rc = real_vfs->xOpen(real_vfs, name, f->real, flags, out_flags);
  f->base.pMethods = f->real->pMethods ? &fault_io : NULL;
  return rc;
}
static int v_delete(sqlite3_vfs *vfs, const char *name, int sync) {
  (void)vfs;
  return real_vfs->xDelete(real_vfs, name, sync);
}
static int v_access(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
  (void)vfs;
  return real_vfs->xAccess(real_vfs, name, flags, out);
}
static int v_full(sqlite3_vfs *vfs, const char *name, int n, char *out) {
  (void)vfs;
  return real_vfs->xFullPathname(real_vfs, name, n, out);
}
static int v_random(sqlite3_vfs *vfs, int n, char *out) {
  (void)vfs;
  return real_vfs->xRandomness(real_vfs, n, out);
}
static int v_sleep(sqlite3_vfs *vfs, int us) {
  (void)vfs;
  return real_vfs->xSleep(real_vfs, us);
}
static int v_time(sqlite3_vfs *vfs, double *out) {
  (void)vfs;
  return real_vfs->xCurrentTime(real_vfs, out);
}
static int v_last_error(sqlite3_vfs *vfs, int n, char *out) {
  (void)vfs;
  return real_vfs->xGetLastError(real_vfs, n, out);
}
static int v_time64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
  (void)vfs;
  return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

static sqlite3_vfs fault_vfs;

/* ---- the allocator under SQLite ---- */

static sqlite3_mem_methods real_mem;

static void *m_malloc(int n) {
  return should_fail(FAULT_MALLOC) ? NULL : real_mem.xMalloc(n);
}
static void *m_realloc(void *p, int n) {
  return should_fail(FAULT_MALLOC) ? NULL : real_mem.xRealloc(p, n);
}

/* Install both before SQLite initializes; the VFS becomes the default. */
int faults_install(void **state) {
  (void)state;
  /* The stores in memory-backed files where there are some: the faults are
   * the VFS's, not the disk's, and thousands of fault points each restore
   * and sync a store (on disk: a third more time, most of it fsync). */
  if (access("/dev/shm", W_OK | X_OK) == 0) setenv("TMPDIR", "/dev/shm", 1);
  if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &real_mem) != SQLITE_OK) return -1;
  sqlite3_mem_methods mine = real_mem;
  mine.xMalloc = m_malloc;
  mine.xRealloc = m_realloc;
  if (sqlite3_config(SQLITE_CONFIG_MALLOC, &mine) != SQLITE_OK) return -1;
  if (sqlite3_initialize() != SQLITE_OK) return -1;
  real_vfs = sqlite3_vfs_find(NULL);
  if (real_vfs == NULL) return -1;
  fault_vfs = *real_vfs;
  fault_vfs.iVersion = real_vfs->iVersion < 2 ? real_vfs->iVersion : 2;
  fault_vfs.szOsFile = (int)sizeof(fault_file) + real_vfs->szOsFile;
  fault_vfs.zName = "fault";
  fault_vfs.pAppData = NULL;
  fault_vfs.xOpen = v_open;
  fault_vfs.xDelete = v_delete;
  fault_vfs.xAccess = v_access;
  fault_vfs.xFullPathname = v_full;
  fault_vfs.xRandomness = v_random;
  fault_vfs.xSleep = v_sleep;
  fault_vfs.xCurrentTime = v_time;
  fault_vfs.xGetLastError = v_last_error;
  fault_vfs.xCurrentTimeInt64 = v_time64;
  return sqlite3_vfs_register(&fault_vfs, 1) == SQLITE_OK ? 0 : -1;
}

/* ---- scenarios ---- */

/* Fault points tried in all, for the summary line. */
static int points_tried;

/* Count a scenario's points, and name them on a line of their own. */
static void count_points(const char *what, fault_kind kind, int keep_failing, int n) {
  printf("# %s under %s faults%s: %d points\n", what, kind == FAULT_IO ? "I/O" : "allocation",
         keep_failing ? " (persistent)" : "", n);
  points_tried += n;
}

/* Give up rather than loop forever if an operation never gets through. */
#define MAX_POINTS 5000

static const char *const sets[] = {"backoff.jitter=none", "backoff.base=1s", NULL};

#define DIAMOND                                                                           \
  "name = \"diamond\"\nversion = \"1\"\n[retry]\nmax_attempts = 20\n"                     \
  EFX_STEP("top") EFX_NOOP                                                                \
  EFX_STEP("left") "depends_on = [\"top\"]\n"                                             \
  "handler = { kind = \"builtin\", name = \"fail\", times = 1 }\n"                         \
  EFX_STEP("right") "depends_on = [\"top\"]\n" EFX_NOOP                                   \
  EFX_STEP("join") "depends_on = [\"left\", \"right\"]\n" EFX_NOOP

/* A store's file as it was before the faults, kept in memory: each fault
 * point starts from it. */
typedef struct baseline {
  char *bytes;
  size_t len;
} baseline;

/* Keep f's store as it is now in b (closing and reopening it, so that the
 * file is the whole store, with no log). */
static void save_baseline(efx *f, baseline *b) {
  tk_err err;
  tk_engine_free(f->engine);
  f->engine = NULL;
  tk_store_close(f->store);
  FILE *in = fopen(f->db, "rb");
  if (in == NULL || fseek(in, 0, SEEK_END) != 0) fail_msg("cannot read %s", f->db);
  long len = ftell(in);
  rewind(in);
  b->len = len > 0 ? (size_t)len : 0;
  b->bytes = malloc(b->len + 1);
  if (b->bytes == NULL || fread(b->bytes, 1, b->len, in) != b->len)
    fail_msg("cannot read %s", f->db);
  fclose(in);
  if (tk_store_open(f->url, &f->store, &err) != 0) fail_msg("open: %s", err.msg);
}

/* Close f's engine and store without the checkpoint that the last
 * connection to close makes, copying the log into the file, which
 * restore overwrites anyway: another connection, which never
 * checkpoints, holds the file open meanwhile. */
static void close_skipping_checkpoint(efx *f) {
  sqlite3 *h;
  if (sqlite3_open_v2(f->db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_db_config(h, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL) != SQLITE_OK ||
      sqlite3_exec(h, "PRAGMA user_version", NULL, NULL, NULL) != SQLITE_OK)
    fail_msg("open %s: %s", f->db, sqlite3_errmsg(h));
  tk_engine_free(f->engine);
  f->engine = NULL;
  tk_store_close(f->store);
  sqlite3_close(h);
}

/* Put f's store back to the baseline, with a new engine at clock t0. */
static void restore(efx *f, const baseline *b, int64_t t0) {
  tk_err err;
  close_skipping_checkpoint(f);
  char side[400];
  snprintf(side, sizeof side, "%s-wal", f->db);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", f->db);
  unlink(side);
  FILE *out = fopen(f->db, "wb");
  if (out == NULL || fwrite(b->bytes, 1, b->len, out) != b->len || fclose(out) != 0)
    fail_msg("cannot write %s", f->db);
  if (tk_store_open(f->url, &f->store, &err) != 0) fail_msg("open: %s", err.msg);
  f->clock.now_ms = t0;
  json_array_clear(f->events);
  json_array_clear(f->logs);
  efx_engine(f, "orch-1");
}

/* Append the rows of `sql` on h to *buf (len, cap) as efx_sql_text gives
 * them: columns joined by '|', rows by '\n', NULL as "NULL". */
static void append_rows(sqlite3 *h, const char *sql, char **buf, size_t *len, size_t *cap) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
    fail_msg("%s: %s", sql, sqlite3_errmsg(h));
  int rc, row = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    row++;
    for (int c = 0; c < sqlite3_column_count(st); c++) {
      const char *v = (const char *)sqlite3_column_text(st, c);
      size_t need = *len + (v ? strlen(v) : 4) + 3;
      if (need > *cap) *buf = realloc(*buf, *cap = need * 2);
      *len += (size_t)sprintf(*buf + *len, "%s%s", c ? "|" : (row > 1 ? "\n" : ""),
                              v ? v : "NULL");
    }
  }
  if (rc != SQLITE_DONE) fail_msg("%s: %s", sql, sqlite3_errmsg(h));
  sqlite3_finalize(st);
}

/* efx_snapshot's text (every row of every table), read on one connection:
 * efx_snapshot opens one per table, each parsing the whole schema again,
 * which was most of these programs' time (two snapshots a fault point). */
static char *snapshot(const char *db) {
  sqlite3 *h;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    fail_msg("open %s: %s", db, sqlite3_errmsg(h));
  size_t tlen = 0, tcap = 1024, len = 0, cap = 1 << 16;
  char *tables = malloc(tcap), *snap = malloc(cap);
  tables[0] = snap[0] = '\0';
  append_rows(h, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", &tables,
              &tlen, &tcap);
  for (char *name = strtok(tables, "\n"); name; name = strtok(NULL, "\n")) {
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT * FROM \"%s\" ORDER BY 1", name);
    size_t need = len + strlen(name) + 8;
    if (need > cap) snap = realloc(snap, cap = need * 2);
    len += (size_t)sprintf(snap + len, "[%s]\n", name);
    append_rows(h, sql, &snap, &len, &cap);
    if (len + 2 > cap) snap = realloc(snap, cap *= 2);
    len += (size_t)sprintf(snap + len, "\n");
  }
  free(tables);
  sqlite3_close(h);
  return snap;
}

/* Assert that the store at db is as `before` (a snapshot), as
 * efx_unchanged does. */
static void unchanged(const char *db, const char *before) {
  char *after = snapshot(db);
  if (strcmp(before, after) != 0)
    fail_msg("the store changed:\n%s\n---- became ----\n%s", before, after);
  free(after);
}

/* `op` under each fault point: it succeeds, or it fails with a message
 * and the store is byte for byte as it was, and then the same connection
 * does it once the fault is gone. */
void faults_all_or_nothing(const faults_op *op, fault_kind kind, int keep_failing) {
  efx f;
  baseline base;
  efx_open(&f, sets);
  op->prepare(&f);
  save_baseline(&f, &base);
  int64_t t0 = f.clock.now_ms;
  int faults = 1, n = 0, failures = 0;
  /* The store as each point starts, read once: every point restores the
   * same bytes, and opening the store and making an engine write nothing
   * (were they to, the failed points would differ from it: a stricter
   * check, never a weaker one). */
  char *before = NULL;
  for (n = 0; faults > 0 && n < MAX_POINTS; n++) {
    restore(&f, &base, t0);
    if (before == NULL) before = snapshot(f.db);
    tk_err err;
    tk_err_clear(&err);
    arm(kind, n, keep_failing);
    int rc = op->run(&f, &err);
    faults = disarm();
    if (rc != 0) {
      failures++;
      if (faults == 0) fail_msg("%s failed with no fault injected: %s", op->name, err.msg);
      if (err.msg[0] == '\0') fail_msg("fault point %d: %s failed without a message", n, op->name);
      unchanged(f.db, before);
      if (op->run(&f, &err) != 0) fail_msg("%s after the fault: %s", op->name, err.msg);
    }
    op->done(&f);
  }
  if (faults > 0) fail_msg("%s still meets a fault after %d points", op->name, n);
  assert_true(failures > 0); /* the faults did reach the store */
  count_points(op->name, kind, keep_failing, n);
  free(before);
  free(base.bytes);
  efx_close(&f);
}

static void with_diamond(efx *f) { efx_template(f, DIAMOND); }

static int submit_diamond(efx *f, tk_err *err) {
  tk_submit_request req = {.template_name = "diamond", .context_json = "{\"n\": 1}"};
  int64_t id;
  int existed;
  return tk_task_submit(f->store, f->cfg, &req, f->clock.now_ms, &id, &existed, err);
}

/* (One query, one connection: each reads the whole schema first.) */
static void one_task_of_four_steps(efx *f) {
  efx_sql_expect(f->db, "1|4", "SELECT (SELECT COUNT(*) FROM tasks), (SELECT COUNT(*) FROM steps)");
}

const faults_op faults_submit_op = {"submit", with_diamond, submit_diamond,
                                    one_task_of_four_steps};

/* With an identity the submit first looks for a task holding it: an error
 * there must not pass for "none" (the lookup found the bug in put_one). */
static int submit_with_identity(efx *f, tk_err *err) {
  tk_submit_request req = {.template_name = "diamond", .identity = "order-7"};
  int64_t id;
  int existed;
  return tk_task_submit(f->store, f->cfg, &req, f->clock.now_ms, &id, &existed, err);
}

const faults_op faults_identity_op = {"submit with an identity", with_diamond,
                                      submit_with_identity, one_task_of_four_steps};

static int add_template(efx *f, tk_err *err) {
  char path[512];
  efx_write(f->dir, "extra.toml",
            "name = \"extra\"\nversion = \"1\"\n" EFX_STEP("a") EFX_NOOP
            EFX_STEP("b") "depends_on = [\"a\"]\n" EFX_NOOP,
            path, sizeof path);
  return tk_template_add_file(f->store, f->cfg, path, f->clock.now_ms, NULL, err);
}

/* The templates in order, each with its count of edges. */
static void extra_template_stored(efx *f) {
  efx_sql_expect(f->db, "diamond|4\nextra|1",
                 "SELECT name, (SELECT COUNT(*) FROM template_edges e WHERE e.template_id = t.id)"
                 " FROM templates t ORDER BY id");
}

const faults_op faults_template_op = {"template add", with_diamond, add_template,
                                      extra_template_stored};

/* A task whose step "left" failed for good: the operator retries it. */
static void failed_left(efx *f) {
  efx_template(f, "name = \"broken\"\nversion = \"1\"\n[retry]\nmax_attempts = 1\n"
                  EFX_STEP("top") EFX_NOOP
                  EFX_STEP("left") "depends_on = [\"top\"]\n"
                  "handler = { kind = \"builtin\", name = \"fail\", times = 1 }\n"
                  EFX_STEP("right") "depends_on = [\"top\"]\n" EFX_NOOP);
  efx_submit(f, "broken", NULL);
  efx_engine(f, "orch-1");
  efx_drive(f, 20);
  efx_expect(f, 1, "error", "left", "error", NULL);
}

static int retry_left(efx *f, tk_err *err) {
  return tk_task_operate(f->store, TK_OP_RETRY, 1, "left", f->clock.now_ms, NULL, err);
}

static void left_waits_for_its_retry(efx *f) {
  efx_expect(f, 1, "in_progress", "left", "waiting_for_retry", NULL);
}

const faults_op faults_retry_op = {"retry", failed_left, retry_left, left_waits_for_its_retry};

static void pending_diamond(efx *f) {
  efx_template(f, DIAMOND);
  efx_submit(f, "diamond", NULL);
}

static int cancel_task(efx *f, tk_err *err) {
  return tk_task_operate(f->store, TK_OP_CANCEL, 1, NULL, f->clock.now_ms, NULL, err);
}

static void all_cancelled(efx *f) {
  efx_expect(f, 1, "cancelled", "top", "cancelled", "join", "cancelled", NULL);
}

const faults_op faults_cancel_op = {"cancel", pending_diamond, cancel_task, all_cancelled};

/* Every task and step complete, every claim with its finished attempt
 * row, every step completed exactly once, and none of the workload's
 * `unfinished` rows: the rows that break one of these, which must be
 * none. */
static void expect_consistent(efx *f, const faults_workload *w) {
  efx_sql_expect(f->db, "",
                 "%s%s"
                 "SELECT 'task not complete', id FROM tasks WHERE state <> 'complete'"
                 " UNION ALL SELECT 'step not complete', id FROM steps WHERE state <> 'complete'"
                 " UNION ALL SELECT 'attempts counted <> attempt rows', s.id FROM steps s"
                 "   WHERE s.attempts <> (SELECT COUNT(*) FROM attempts a WHERE a.step_id = s.id)"
                 " UNION ALL SELECT 'attempt never finished', id FROM attempts"
                 "   WHERE outcome IS NULL"
                 " UNION ALL SELECT 'successes <> 1', s.id FROM steps s WHERE (SELECT COUNT(*)"
                 "   FROM attempts a WHERE a.step_id = s.id AND a.outcome = 'success') <> 1"
                 " UNION ALL SELECT 'completed <> once', s.id FROM steps s WHERE (SELECT COUNT(*)"
                 "   FROM transitions t WHERE t.step_id = s.id AND t.to_state = 'complete') <> 1",
                 w->unfinished ? w->unfinished : "", w->unfinished ? " UNION ALL " : "");
}

const faults_workload faults_diamonds = {DIAMOND, "diamond", NULL, 3, 1, NULL};

/* A batch step whose service refuses every 2nd item once: its first
 * attempt records some items and fails, the retry finishes them. */
const faults_workload faults_batches = {
    "name = \"notify\"\nversion = \"1\"\n[retry]\nmax_attempts = 20\n" EFX_STEP("send")
    "handler = { kind = \"builtin\", name = \"batch\", reject_every = 2, reject_times = 1 }\n"
    "batch = { items_from = \"to\", max_in_call_retries = 0, max_item_attempts = 5 }\n"
    EFX_STEP("report") "depends_on = [\"send\"]\n" EFX_NOOP,
    "notify", "{\"to\": [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\"]}", 2, 0,
    "SELECT 'item not acked', key FROM items WHERE state <> 'acked'"};

/* Engine passes under each fault point, then a clean run to the end, which
 * must leave a consistent store: lost outcomes come back when their leases
 * expire. */
void faults_engine_under(const faults_workload *w, fault_kind kind, int keep_failing) {
  efx f;
  baseline base;
  efx_open(&f, sets);
  efx_template(&f, w->template_toml);
  for (int i = 0; i < w->tasks; i++) efx_submit(&f, w->name, w->context);
  save_baseline(&f, &base);
  int faults = 1, n, failures = 0;
  for (n = 0; faults > 0 && n < MAX_POINTS; n++) {
    restore(&f, &base, EFX_T0);
    for (int i = 0; i < w->warmup; i++) efx_tick(&f);
    arm(kind, n, keep_failing);
    int64_t due = 0;
    tk_err err;
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
      if (due > f.clock.now_ms && due != INT64_MAX) f.clock.now_ms = due;
      rc = tk_engine_tick(f.engine, &due, &err);
    }
    faults = disarm();
    if (faults > 0) failures++;
    else if (rc != 0) fail_msg("a pass failed with no fault injected: %s", err.msg);
    efx_drive(&f, 200);
    expect_consistent(&f, w);
  }
  if (faults > 0) fail_msg("the passes still meet a fault after %d points", n);
  assert_true(failures > 0);
  count_points(w->name, kind, keep_failing, n);
  free(base.bytes);
  efx_close(&f);
}

/* `tasker init` under each fault point, from an empty file: opening or
 * migrating may fail, but each migration is whole or absent (the schema
 * version says which, and every table of an applied one is there), and
 * a clean init afterwards brings the store to the latest version. */
void faults_migrate_under(fault_kind kind, int keep_failing) {
  char dir[256], db[300], url[320];
  efx_tmpdir(dir, sizeof dir);
  snprintf(db, sizeof db, "%s/tasker.db", dir);
  snprintf(url, sizeof url, "sqlite:%s", db);
  int latest = 0;
  {
    tk_store *s;
    tk_err err;
    if (tk_store_open(url, &s, &err) || tk_store_migrate(s, NULL, &latest, &err))
      fail_msg("clean init: %s", err.msg);
    tk_store_close(s);
  }
  /* Parsing every migration's SQL allocates thousands of times: past the
   * first 100 points, they are tried 6% apart. */
  int faults = 1, n, failures = 0, tried = 0;
  for (n = 0; faults > 0 && n < 20 * MAX_POINTS; n += n < 100 ? 1 : n / 16, tried++) {
    for (const char *suffix = ""; suffix; suffix = *suffix ? (suffix[1] == 'w' ? "-shm" : NULL)
                                                            : "-wal") {
      char path[320];
      snprintf(path, sizeof path, "%s%s", db, suffix);
      unlink(path);
    }
    tk_store *s = NULL;
    tk_err err;
    tk_err_clear(&err);
    int version = -1;
    arm(kind, n, keep_failing);
    int rc = tk_store_open(url, &s, &err);
    if (rc == 0) rc = tk_store_migrate(s, NULL, NULL, &err);
    faults = disarm();
    if (rc != 0) {
      failures++;
      if (faults == 0) fail_msg("init failed with no fault injected: %s", err.msg);
      if (err.msg[0] == '\0') fail_msg("fault point %d: init failed without a message", n);
    }
    if (s == NULL && tk_store_open(url, &s, &err) != 0) fail_msg("reopen: %s", err.msg);
    if (tk_store_schema_version(s, &version, &err) != 0) fail_msg("version: %s", err.msg);
    /* Whole migrations only: 0004 adds items, 0005 the claim indexes. */
    char whole[8];
    snprintf(whole, sizeof whole, "%d|%d", version >= 4, version >= 5);
    efx_sql_expect(db, whole, "SELECT (SELECT COUNT(*) FROM sqlite_master WHERE name = 'items'),"
                              " (SELECT COUNT(*) FROM sqlite_master WHERE name = 'steps_fresh')");
    if (rc == 0) assert_int_equal(version, latest);
    int after = 0;
    if (tk_store_migrate(s, NULL, &after, &err) != 0) fail_msg("init again: %s", err.msg);
    assert_int_equal(after, latest);
    tk_store_close(s);
  }
  if (faults > 0) fail_msg("init still meets a fault after %d points", tried);
  assert_true(failures > 0);
  count_points("init", kind, keep_failing, tried);
  efx_rmtree(dir);
}


int faults_summary(void **state) {
  (void)state;
  printf("# %d fault points tried\n", points_tried);
  return 0;
}

