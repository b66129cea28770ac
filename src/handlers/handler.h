/* Handlers (DESIGN §8): what runs a step's attempt, behind one interface.
 *
 * Each kind of handler is a tk__handler_kind, a struct of functions in a
 * file of its own under src/handlers/, listed once in registry.c. Its
 * life with a step:
 *   validate  template time: read the step's handler table (TOML) into the
 *             normalized spec (JSON) stored with the template, placing
 *             every problem at FILE:LINE:COLUMN (a key schema, config/spec.h);
 *   prepare   when an engine first loads the template: bind the spec to
 *             that engine (a registered function, say);
 *   run       on a worker, per attempt: fill a zeroed tk_handler_result;
 *   start     instead of run when the engine has workers and the kind has
 *             it: begin the attempt and return at once, calling the
 *             engine back when it ends (the http kind: no thread waits on
 *             a request in flight);
 *   run_batch on a worker, per call of a batch step (DESIGN §9);
 *   close     when the engine is freed: what the kind kept for the engine
 *             (host->shared) goes.
 * Runs never touch the store and never print. Adding a kind is one new
 * file and one line in registry.c; nothing outside src/handlers/ knows
 * the kinds. */
#ifndef TASKER_HANDLERS_HANDLER_H
#define TASKER_HANDLERS_HANDLER_H

#include <jansson.h>

#include <tasker/clock.h>
#include <tasker/engine.h>
#include <tasker/toml.h>

#include "config/spec.h"

/* The layout of tk__handler_kind that this build's kinds are written for;
 * a kind of another version is refused by tk__handler_kind_find. */
#define TK__HANDLER_KIND_VERSION 2

/* Where a step's handler table is read (template time). */
typedef struct tk__handler_site {
  tk__spec_where where;       /* file, "steps[N].handler", the error to fill */
  const char *step;           /* "steps[N]", the step's key path */
  const tk_toml_value *batch; /* the step's batch table, or NULL: not a batch step */
} tk__handler_site;

/* In-process functions registered by the embedding program
 * (tk_engine_register, tk_engine_register_batch); function.c. */
typedef struct tk__fn {
  char *name;
  tk_handler_fn fn;  /* a plain handler, or NULL */
  tk_batch_fn batch; /* a batch handler, or NULL */
  void *ud;
} tk__fn;

/* Entries are allocated one by one, so a pointer to one stays valid while
 * more are registered. */
typedef struct tk__fn_table {
  tk__fn **fns;
  int n;
} tk__fn_table;

/* What an engine lends its handler kinds when preparing a step. */
typedef struct tk__handler_host {
  const tk__fn_table *fns;
  /* This engine's slot for the kind being prepared, the same for all its
   * steps: NULL until the kind keeps something engine-wide there (http:
   * its reactor thread), which the kind's close frees with the engine. */
  void **shared;
} tk__handler_host;

/* How an asynchronous attempt tells the engine it has ended
 * (tk__handler_kind.start): thread-safe, called once. */
typedef void (*tk__handler_done)(void *ud);

/* A prepared step's handler, as a run receives it. */
typedef struct tk__handler_step {
  json_t *spec;          /* the normalized spec; read-only */
  void *prepared;        /* what the kind's prepare returned */
  const tk_clock *clock; /* the engine's: call->deadline_ms is on it */
  /* An http step that waits for a callback (docs/callbacks.md): this
   * attempt's callback URL and token, secrets; NULL otherwise. */
  const char *callback_url, *callback_token;
} tk__handler_step;

typedef struct tk__handler_kind {
  int version;      /* TK__HANDLER_KIND_VERSION */
  const char *name; /* the spec's kind = "..." */
  int takes_input;  /* 0: the engine need not read the step's input for it */
  /* Read the handler table `table` into the JSON object `spec` (its "kind"
   * and "timeout_ms" included). 0, or TK_ECONFIG with "FILE:L:C: ..." in
   * site->where.err. Required. */
  int (*validate)(const tk__handler_site *site, const tk_toml_value *table, json_t *spec);
  /* Bind a stored spec to an engine; what it returns is handed to every
   * run and to release. Never fails: what it cannot bind, run reports as
   * the attempt's failure. Optional (prepared is then NULL). */
  void *(*prepare)(const tk__handler_host *host, json_t *spec);
  /* Free what prepare returned. Optional. */
  void (*release)(void *prepared);
  /* Run one attempt. Thread-safe. Required. */
  void (*run)(const tk__handler_step *step, const tk_handler_call *call, tk_handler_result *out);
  /* Run one call of a batch step (tk_batch_fn's contract). Optional: a
   * kind without it is refused in batch steps at template time. */
  void (*run_batch)(const tk__handler_step *step, const tk_batch_call *call,
                    tk_item_report *reports, tk_handler_result *out);
  /* Begin one attempt and return without waiting for it; fill *out (as
   * run does) and then call done(done_ud) exactly once, from any thread,
   * perhaps before start returns. step, call and what they point to stay
   * valid until done is called; out is not touched after it. Used instead
   * of run when the engine has workers (not for batch steps), so that an
   * attempt waiting on I/O holds no thread. Optional. */
  void (*start)(const tk__handler_step *step, const tk_handler_call *call,
                tk_handler_result *out, tk__handler_done done, void *done_ud);
  /* Free what the kind left in an engine's slot (host->shared), when the
   * engine is freed. Attempts it started and has not ended are abandoned:
   * their done is never called once close returns (their leases expire,
   * and the reaper retries them). Optional. */
  void (*close)(void *shared);
} tk__handler_kind;

/* Kinds an engine keeps a slot for (host->shared): at least as many as
 * registry.c lists. */
#define TK__HANDLER_KINDS_MAX 16

/* The kind named `name`, or NULL if this build has none by that name. */
const tk__handler_kind *tk__handler_kind_find(const char *name);

/* The kind of a stored spec. A kind this build does not know (a template
 * stored by a newer tasker) gets a stand-in whose runs fail permanently,
 * saying so. Never NULL. */
const tk__handler_kind *tk__handler_kind_of(json_t *spec);

/* Template time: read the step's handler table h into a new spec in *out,
 * by its kind's validate; also refuses a batch step whose kind has no
 * run_batch. 0, or TK_ECONFIG with "FILE:L:C: ..." in site->where.err. */
int tk__handler_spec_read(const tk__handler_site *site, const tk_toml_value *h, json_t **out);

/* The keys every kind's schema lists first: kind, and timeout (stored as
 * timeout_ms). */
#define TK__HANDLER_COMMON_KEYS                                                            \
  {.name = "kind", .kind = TK__K_STRING, .allowed = "a handler kind"},                     \
  {.name = "timeout", .kind = TK__K_DURATION, .json = "timeout_ms", .min = 0,             \
   .max = INT64_MAX, .allowed = "a duration >= 0"}

/* The kinds, for registry.c. */
extern const tk__handler_kind tk__builtin_kind;
extern const tk__handler_kind tk__command_kind;
extern const tk__handler_kind tk__function_kind;
extern const tk__handler_kind tk__http_kind;
extern const tk__handler_kind tk__worker_kind;
extern const tk__handler_kind tk__wait_kind;
extern const tk__handler_kind tk__task_kind;

/* A task step's child context (task.c): the spec's context with its
 * placeholders filled from the step's input (JSON text, may be NULL) and
 * the attempt, as compact JSON text in *out (malloc'd); {} without one.
 * 0; TK_ENOENT or TK_EINVAL with why (a value not there, an {{env.*}});
 * TK_ENOMEM. */
int tk__task_child_context(json_t *spec, const char *input, int64_t task_id, const char *step,
                           int attempt, char **out, char *why, size_t whylen);

/* The rule for a worker queue's name, which the worker handler's table and
 * the server's /api/v1/queues/NAME/claim both apply (worker.c): 1 to
 * TK__QUEUE_NAME_MAX of [a-z0-9_.-], since it appears in URLs unescaped.
 * s is len bytes, not necessarily NUL-terminated. */
#define TK__QUEUE_NAME_MAX 64
int tk__queue_name_ok(const char *s, size_t len);
/* What runs a builtin spec named "choose": tk__handler_kind_of gives it
 * instead of tk__builtin_kind, whose validate reads the spec. */
extern const tk__handler_kind tk__choose_kind;

/* Register an in-process function under `name`: a plain handler (fn) or a
 * batch handler (batch), at most one of them. TK_EEXIST when the name is
 * taken, TK_ENOMEM. */
int tk__fn_register(tk__fn_table *t, const char *name, tk_handler_fn fn, tk_batch_fn batch,
                    void *ud, tk_err *err);

/* Free the table's entries. */
void tk__fn_table_free(tk__fn_table *t);

/* A handler's retry_after value (a duration string or a number of seconds)
 * in ms; TK_EINVAL when it is neither. */
int tk__hint_from_json(json_t *v, int64_t *ms);

/* The command handler's reading of a program's stdout (command.c; the
 * fuzz target fuzz/fuzz_command_stdout.c drives it). buf[0..n) is any
 * bytes, NUL included. 0 with *doc NULL: empty or only white space (no
 * results); 0 with *doc a new JSON object: the results; -1 with why (a
 * NUL-terminated message of at most len bytes) saying what stdout is
 * instead (invalid JSON with its line and column, or another JSON type)
 * and quoting how it began. */
int tk__command_parse_stdout(const char *buf, size_t n, json_t **doc, char *why, size_t len);

/* The first bytes of s (at most max of its len), quoted and escaped for a
 * one-line message into buf ("..." after the quote when cut); returns buf.
 * Quotes, backslashes, newlines and other control bytes are escaped, and
 * bytes from 0x80 too unless keep_utf8. buf holds the worst case with
 * size >= max * 4 + 8. */
const char *tk__quote_start(const char *s, size_t len, size_t max, int keep_utf8, char *buf,
                            size_t size);

/* The spec's integer `key`, or dflt when it has none (an optional key the
 * template left out). */
json_int_t tk__spec_int(json_t *spec, const char *key, json_int_t dflt);

/* Set out to a failure with a printf-style message. */
void tk__handler_fail(tk_handler_result *out, tk_handler_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
