/* Test fixture for the engine on a real SQLite file: a temporary
 * directory, a migrated store, a configuration built from --set style
 * overrides, a manual clock, and an inline engine (workers = 0) whose
 * events are collected. Also plain helpers for tests that drive the tasker
 * binary: temporary directories, files, direct SQL on the store, a
 * snapshot of every table, and starting a subprocess without waiting.
 *
 * Every helper fails the running cmocka test on an unexpected error. */
#ifndef TESTS_ENGINE_FIXTURE_H
#define TESTS_ENGINE_FIXTURE_H

#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/config.h>
#include <tasker/engine.h>

#include "store/store.h"
#include <tasker/store.h>

/* Pieces of template TOML. */
#define EFX_STEP(name) "[[steps]]\nname = \"" name "\"\n"
#define EFX_NOOP "handler = { kind = \"builtin\", name = \"noop\" }\n"

/* The manual clock's start: a fixed, realistic epoch time in ms. */
#define EFX_T0 INT64_C(1767225600000)

typedef struct efx {
  char dir[256];     /* temporary directory, removed by efx_close */
  char db[320];      /* DIR/tasker.db */
  char url[340];     /* sqlite:DIR/tasker.db */
  tk_store *store;
  tk_config *cfg;
  tk_manual_clock clock;
  tk_engine *engine; /* NULL until efx_engine */
  json_t *events;    /* every event the engine emitted, parsed, in order */
  json_t *logs;      /* every log line, as strings */
  int files;         /* templates written so far, for unique names */
  uint64_t seed;     /* the engine's random seed; 0 means 42 */
  char pg_db[64];    /* efx_use_postgres's database, dropped by efx_close; "" none */
  char pg_server[512]; /* the server pg_db is on */
} efx;

/* Point f (after efx_open, before efx_engine) at a fresh database on
 * `server` (the caller passes getenv("TK_TEST_PG_URL"), see efx_pg_server)
 * instead of its SQLite file: f->url and f->store change, f->db does not
 * (SQL helpers on it read the unused file). Skips the test without a
 * server. efx_close drops the database. */
void efx_use_postgres(efx *f, const char *server, const char *prefix);

/* Make a temporary directory (an absolute path) into dir[len]. */
void efx_tmpdir(char *dir, size_t len);
/* Remove a directory tree; missing is fine. */
void efx_rmtree(const char *dir);
/* Write `text` to DIR/NAME; the path goes to path[len]. */
void efx_write(const char *dir, const char *name, const char *text, char *path, size_t len);

/* Set up: temporary directory, store created and migrated, configuration
 * from the built-in defaults plus `sets` ("key=value", NULL-terminated,
 * may be NULL), clock at EFX_T0. No engine yet. */
void efx_open(efx *f, const char *const *sets);
/* Free the engine, the store and the configuration; remove the directory. */
void efx_close(efx *f);
/* A heap fixture opened with `sets` and an engine named `id`; and a cmocka
 * teardown that closes and frees the one in *state. */
efx *efx_new(const char *const *sets, const char *id);
int efx_teardown(void **state);
/* A heap fixture on a fresh database named from `prefix` on the run's
 * cluster (TK_TEST_PG_URL; skips without one), with no engine. */
efx *efx_new_pg(const char *prefix);
/* Fail the running test with `what`, the error and its name unless rc is 0. */
void efx_must(int rc, const tk_err *err, const char *what);

/* The event sink of fixture engines (ud: the efx): each line parsed into
 * f->events, failing the test on a line that is not JSON. For an engine a
 * test builds itself; events come from the engine thread only. */
void efx_on_event(const char *line, void *ud);

/* Create the engine under orchestrator id `id`: manual clock, f->seed,
 * workers 0 (handlers run inline on the ticking thread), sinks into
 * f->events and f->logs. Replaces an earlier engine. */
void efx_engine(efx *f, const char *id);

/* Run an engine with `workers` worker threads on the system clock (worker
 * threads and the manual clock do not mix) until no task has work left,
 * as orchestrator `id`, events into f->events; fails the test on an
 * error. */
void efx_run_workers(efx *f, const char *id, int workers);
/* The same with another event sink (which may pass the events on to
 * efx_on_event with f). */
void efx_run_workers_sink(efx *f, const char *id, int workers, tk_event_sink sink, void *ud);

/* The engine efx_run_workers_sink runs, for a test that runs it itself
 * (e.g. beside a thread reading it): `workers` worker threads, orchestrator
 * `id`, events to `sink` (may be NULL). The store's clock is the system's
 * until efx_workers_end frees the engine and puts the manual clock back. */
tk_engine *efx_workers_engine(efx *f, const char *id, int workers, tk_event_sink sink,
                              void *ud);
void efx_workers_end(efx *f, tk_engine *e);

/* Another engine (another orchestrator) on store `s` (e.g. a second
 * connection to f->db), with f's clock, seed and sinks. */
tk_engine *efx_engine_on(efx *f, tk_store *s, const char *id);

/* Store a template given as TOML text; returns its id. */
int64_t efx_template(efx *f, const char *toml);
/* Store template NAME with one step "s" running `handler` under `retry`
 * (both TOML inline tables). */
void efx_one_step(efx *f, const char *name, const char *handler, const char *retry);
/* Submit a task of template `name` with context JSON (NULL: {}). */
int64_t efx_submit(efx *f, const char *name, const char *context);

/* One engine pass at the clock's current time; returns next_due. */
int64_t efx_tick(efx *f);
/* Tick, jumping the clock to each next due time, until nothing is
 * scheduled. Fails the test after max_ticks passes (a loop that makes no
 * progress is a bug). Returns the number of passes. */
int efx_drive(efx *f, int max_ticks);

/* The task as tk_engine_task_json reports it at the clock's time
 * (decref when done). */
json_t *efx_task(efx *f, int64_t task_id);
/* The step named `name` in a task report (borrowed), failing if absent. */
json_t *efx_step(json_t *task, const char *name);
/* Assert the task's state and each listed step's state: pairs of
 * (step name, state), NULL-terminated. */
void efx_expect(efx *f, int64_t task_id, const char *task_state, ...);

/* Events of `type` (and of step `step` unless NULL) emitted so far. */
int efx_events(efx *f, const char *type, const char *step);
/* Log lines emitted so far that contain `text`. */
int efx_logs(efx *f, const char *text);

/* A scalar from a query on the SQLite file at db (printf-style SQL):
 * the first column of the first row as an integer (NULL and no row: -1). */
int64_t efx_sql_int(const char *db, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The same as text, every row's columns joined by '|' and rows by '\n';
 * NULL prints as "NULL". Malloc'd. */
char *efx_sql_text(const char *db, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Assert that the text of a query (as efx_sql_text) is `want`. */
void efx_sql_expect(const char *db, const char *want, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Run `sql` (statements, no rows) on the SQLite file at db, as another
 * process would: a test's trigger, say. */
void efx_exec(const char *db, const char *sql);
/* Every row of every table of the store at db, as text: equal snapshots
 * mean an unchanged store. Malloc'd. */
char *efx_snapshot(const char *db);

/* A task context {"items": ["PREFIX-0", ..., "PREFIX-(n-1)"]} for batch
 * steps; malloc'd. */
char *efx_items_context(const char *prefix, int n);
/* Assert that the store is as `before` (a snapshot, which is freed). */
void efx_unchanged(const char *db, char *before);

/* Start the tasker binary with NULL-terminated args, stdin from /dev/null,
 * stdout and stderr to the given files (NULL: /dev/null); returns its pid
 * without waiting. */
pid_t efx_spawn(const char *const *args, const char *out_path, const char *err_path);
/* Wait for pid; returns its exit status, or 128 + signal. */
int efx_wait(pid_t pid);
/* The same with a limit: after timeout_ms (real time) the process is
 * killed and the test fails. */
int efx_wait_limit(pid_t pid, int64_t timeout_ms);

/* Poll until cond(ud) is true or timeout_ms pass (real time); returns 1 if
 * it became true. For waiting on another process's observable state. */
int efx_wait_for(int (*cond)(void *ud), void *ud, int64_t timeout_ms);

/* A whole file, malloc'd ("" if it does not exist). */
char *efx_read(const char *path);

/* PostgreSQL for tests that run on it too, on the server of
 * TK_TEST_PG_URL (the harness's private cluster). efx_pg_server(url) is
 * that URL (the caller passes getenv("TK_TEST_PG_URL"): scripts/run-tests
 * starts the cluster for the programs that name the variable, so the
 * fixture, linked into all of them, must not); without one the running
 * test is skipped as requiring "pg" (skip_missing.h: scripts/run-tests
 * fails it when TK_REQUIRE_PG=1). efx_pg_database creates
 * a fresh database PREFIX_PID_N on the server (its name to name[nlen]) and
 * gives a libpq connection string for it in url[ulen]; efx_pg_drop drops
 * it. */
const char *efx_pg_server(const char *url);
void efx_pg_database(const char *server, const char *prefix, char *name, size_t nlen, char *url,
                     size_t ulen);
void efx_pg_drop(const char *server, const char *name);
/* The text of a query on the database at url, as efx_sql_text gives it
 * (columns joined by '|', rows by '\n', NULL as "NULL"). Malloc'd. */
char *efx_pg_text(const char *url, const char *sql);
/* Assert that the text of a query on the database at url (efx_pg_text's)
 * is `want`; a failure shows the query, what it gave and what was wanted. */
void efx_pg_expect(const char *url, const char *want, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Claim for `owner` as tk__store_claim does, with the store's clock
 * reading `now` for that claim only. */
int efx_claim_at(tk_store *s, const char *owner, int64_t now, int64_t lease_ms, int limit,
                 tk__claimed *out, int *n, tk_err *err);

#endif
