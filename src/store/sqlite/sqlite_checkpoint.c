/* Checkpoints off the writer's path. In WAL mode SQLite normally copies
 * the log back into the database inside the COMMIT that crosses 1000
 * pages, stalling that writer for tens of milliseconds (a retry due then
 * starts late). Here the commit only notices the log's size; a thread with
 * its own connection runs a PASSIVE checkpoint, which never blocks writers
 * or readers, while the engine goes on. */
#include "store/sqlite/sqlite_internal.h"

#include <stdlib.h>

/* Frames in the log before a checkpoint is asked for. */
#define CHECKPOINT_FRAMES 8000

static void *checkpointer(void *arg) {
  tk__sqlite *q = arg;
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(q->path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
      SQLITE_OK) {
    sqlite3_close(db);
    db = NULL;
  }
  /* A connection learns that the file is in WAL mode when it first reads
   * it; until then a checkpoint does nothing (and says OK), so the log
   * grew without end while the engine ran. */
  if (db) sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
  pthread_mutex_lock(&q->ckpt_mu);
  for (;;) {
    while (!q->ckpt_wanted && !q->ckpt_stop) pthread_cond_wait(&q->ckpt_cv, &q->ckpt_mu);
    if (q->ckpt_stop) break;
    q->ckpt_wanted = 0;
    pthread_mutex_unlock(&q->ckpt_mu);
    /* Best effort: a failed or partial checkpoint is tried again after
     * the next commits; the log only grows meanwhile. */
    if (db) sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    pthread_mutex_lock(&q->ckpt_mu);
  }
  pthread_mutex_unlock(&q->ckpt_mu);
  sqlite3_close(db);
  return NULL;
}

/* The WAL hook, called after each commit with the log's size in frames. */
static int on_commit(void *arg, sqlite3 *db, const char *name, int frames) {
  (void)db;
  (void)name;
  tk__sqlite *q = arg;
  if (frames < CHECKPOINT_FRAMES) return SQLITE_OK;
  pthread_mutex_lock(&q->ckpt_mu);
  if (!q->ckpt_started && !q->ckpt_stop)
    q->ckpt_started = pthread_create(&q->ckpt_thread, NULL, checkpointer, q) == 0;
  if (!q->ckpt_started) {
    /* No thread: fall back to checkpointing here, as SQLite would. */
    pthread_mutex_unlock(&q->ckpt_mu);
    sqlite3_wal_checkpoint_v2(q->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;
  }
  q->ckpt_wanted = 1;
  pthread_cond_signal(&q->ckpt_cv);
  pthread_mutex_unlock(&q->ckpt_mu);
  return SQLITE_OK;
}

void tk__sq_checkpointer_init(tk__sqlite *q) {
  pthread_mutex_init(&q->ckpt_mu, NULL);
  pthread_cond_init(&q->ckpt_cv, NULL);
  sqlite3_wal_hook(q->db, on_commit, q); /* replaces the automatic checkpoint */
}

void tk__sq_checkpointer_stop(tk__sqlite *q) {
  pthread_mutex_lock(&q->ckpt_mu);
  q->ckpt_stop = 1;
  pthread_cond_signal(&q->ckpt_cv);
  int started = q->ckpt_started;
  pthread_mutex_unlock(&q->ckpt_mu);
  if (started) pthread_join(q->ckpt_thread, NULL);
  pthread_mutex_destroy(&q->ckpt_mu);
  pthread_cond_destroy(&q->ckpt_cv);
}
