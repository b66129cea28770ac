/* tasker: the store, where all durable state lives (DESIGN §2, §12).
 *
 * A store is opened from a URL: "sqlite:PATH" (or a bare path) for the
 * embedded default; "postgres://...", "postgresql://..." or a libpq
 * "key=value ..." string for PostgreSQL (libpq's PG* environment variables
 * fill in what the URL leaves out). Every state change the engine makes is
 * one transaction in the store. A tk_store is used by one thread at a time.
 *
 * Time belongs to the store: every stored time is read from the store's
 * clock. On SQLite that is this machine's clock; on PostgreSQL it is the
 * database server's, kept here as a monotonic clock plus the offset to the
 * server measured when the store opened (and again by tk_store_clock_sync),
 * so orchestrators whose machine clocks disagree agree on when a retry is
 * due and when a lease has run out.
 */
#ifndef TASKER_STORE_H
#define TASKER_STORE_H

#include <stdint.h>

#include <tasker/clock.h>
#include <tasker/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_store tk_store;

/* Optional process-wide tuning of the embedded backends, for programs that
 * own their process (the tasker CLI calls it): SQLite stops keeping memory
 * statistics, which cost a global mutex per allocation (about a tenth of
 * the engine's instructions). Call once, before any store is opened and
 * before other threads use SQLite; later calls do nothing. */
void tk_store_process_init(void);

/* How tk_store_open_with opens a store; zeroed: an existing store only. */
typedef struct tk_store_open_options {
  /* Create the store when it does not exist: the SQLite file (its
   * directory must exist). 0: a missing SQLite file, or an empty one, is
   * TK_ENOENT naming the path, and nothing is written. A PostgreSQL database is never created
   * (that is CREATE DATABASE, its administrator's): a missing one is the
   * server's error either way. */
  int create;
} tk_store_open_options;

/* Open the store at `url` as `opts` (NULL: zeroed) says. It must have been
 * initialized (tk_store_migrate) before tasks are stored; opening changes
 * nothing in it. */
int tk_store_open_with(const char *url, const tk_store_open_options *opts, tk_store **out,
                       tk_err *err);

/* tk_store_open_with with `create` set: a missing SQLite file is made
 * (empty, for tk_store_migrate to set up). */
int tk_store_open(const char *url, tk_store **out, tk_err *err);

/* The store's clock (see above). */
tk_clock tk_store_clock(const tk_store *s);

/* Replace the store's clock, for tests that drive time by hand (a
 * tk_manual_clock): every time the store writes is then read from it. */
void tk_store_set_clock(tk_store *s, tk_clock clock);

/* Measure the offset to the store's server again (a no-op for a store
 * whose clock is this machine's). Cheap enough to call every few seconds;
 * the engine does, so a drifting machine clock stays corrected. */
int tk_store_clock_sync(tk_store *s, tk_err *err);

/* Close the store; NULL is allowed. */
void tk_store_close(tk_store *s);

/* Apply every migration the store lacks, each in its own transaction.
 * Idempotent. *applied (may be NULL) gets how many were applied and
 * *version (may be NULL) the schema version afterwards. */
int tk_store_migrate(tk_store *s, int *applied, int *version, tk_err *err);

/* Apply the migrations up to schema version `target` only (for tests of
 * upgrades); tk_store_migrate is tk_store_migrate_to with target 0. */
int tk_store_migrate_to(tk_store *s, int target, int *applied, int *version, tk_err *err);

/* The store's schema version (0 for an empty store). */
int tk_store_schema_version(tk_store *s, int *version, tk_err *err);

/* What a commit survives (docs/durability.md). Either level survives a
 * crash of the process and never corrupts the store; they differ on a
 * power cut or an operating-system crash:
 *   TK_DURABILITY_FULL (the default): a commit is on disk before it is
 *     reported, so a step recorded complete stays complete and its side
 *     effects never run twice. SQLite: synchronous = FULL (WAL synced at
 *     every commit); PostgreSQL: synchronous_commit as the server has it
 *     (on unless its administrator changed it).
 *   TK_DURABILITY_FAST: the last commits before the cut may be lost (those
 *     steps run again). SQLite: synchronous = NORMAL (the WAL is synced at
 *     checkpoints); PostgreSQL: synchronous_commit = off for tasker's
 *     sessions (up to about three times wal_writer_delay, 600 ms by
 *     default, of commits lost if the server crashes). */
typedef enum tk_durability { TK_DURABILITY_FULL = 0, TK_DURABILITY_FAST } tk_durability;

/* Set the level for this store's connection (and any it makes again
 * after a lost connection). */
int tk_store_set_durability(tk_store *s, tk_durability d, tk_err *err);

/* "full" or "fast" and back; parse returns TK_EINVAL for another name. */
const char *tk_durability_name(tk_durability d);
int tk_durability_parse(const char *name, tk_durability *out);

#ifdef __cplusplus
}
#endif
#endif
