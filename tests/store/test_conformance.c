/* The store conformance suite (DESIGN §4, §5, §12): one table of cases, run
 * against every backend: SQLite on a fresh file per case, PostgreSQL on a
 * fresh database per case, created from TK_TEST_PG_URL (scripts/run-tests
 * points it at a private cluster). Each case drives a store through the
 * public API (tk_store_*, tk_template_add_file, tk_task_submit,
 * tk_task_operate) and the store ops (claims, outcomes, heartbeats, the
 * reaper's query, batch items) under a manual clock, and observes results
 * only through them: task reports, the status report, claims. Never through
 * a backend's SQL, so that what passes on one backend must pass on all.
 *
 * Each half is a program of its own, so that the suite runs them side by
 * side: this one the SQLite half, test_conformance_pg.c (which includes this
 * file with CONFORMANCE_BACKEND set) the PostgreSQL half. Without
 * TK_TEST_PG_URL, or in a build without the PostgreSQL backend, the
 * PostgreSQL half does not run: its program says why on a "# SKIP requires
 * pg:" line and exits 77 (scripts/run-tests counts it as skipped, never as
 * passed, and as a failure when TK_REQUIRE_PG=1, as in CI). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include <tasker/config.h>
#include <tasker/engine.h>
#include <tasker/schedule.h>
#include <tasker/store.h>
#include <tasker/workflow.h>

#include "common/engine_fixture.h"
#include "common/outcomes.h"
#include "common/skip_missing.h"
#include "store/flow.h"
#include "store/migration.h"
#include "store/rules.h"
#include "store/store.h"

/* Times relative to the manual clock's start. */
#define T(ms) (EFX_T0 + (ms))
#define LEASE_MS 10000
#define MAX_STORES 8
#define MAX_DATABASES 24

/* ------------------------------------------------------------------ */
/* The world of one case                                               */
/* ------------------------------------------------------------------ */

typedef struct world world;

/* A kind of store the suite runs against. */
typedef struct backend {
  const char *name;
  /* Make a new, empty store for w and write its URL to url; 0, or -1 with
   * the reason in why. */
  int (*create)(world *w, char *url, size_t cap, char *why, size_t why_cap);
  /* Remove every store create made for w (its connections are closed). */
  void (*destroy)(world *w);
  const char *unavailable; /* why it cannot run here; NULL: it can */
  const tk__migration *migrations; /* the backend's own, for upgrade cases */
} backend;

typedef struct conformance_case {
  const char *name;
  void (*run)(world *w);
  int unmigrated; /* the case gets an empty store and migrates it itself */
} conformance_case;

struct world {
  const backend *be;
  const conformance_case *kase;
  char dir[256];  /* temporary: template files, SQLite files */
  char url[1024]; /* the case's store */
  tk_store *s;    /* the first connection to it */
  tk_store *open[MAX_STORES]; /* every connection still open */
  int nopen;
  tk_config *cfg;
  tk_manual_clock clock; /* the clock of every connection of the case */
  int files;             /* template files written */
  int stores;            /* SQLite files made */
  char databases[MAX_DATABASES][64]; /* PostgreSQL databases made */
  int ndatabases;
};

/* What a cmocka test of the table starts from: one case on one backend. */
typedef struct test_param {
  const backend *be;
  const conformance_case *kase;
} test_param;

/* Fail the case with err's message when rc is not 0. */
static void must(int rc, const tk_err *err, const char *what) {
  if (rc != 0) fail_msg("%s: %s (%s)", what, err->msg, tk_err_name(rc));
}

/* Open a connection to url on the world's manual clock; it is closed at
 * the end of the case unless close_store closes it first. */
static tk_store *open_store(world *w, const char *url) {
  if (w->nopen == MAX_STORES) fail_msg("more than %d connections in one case", MAX_STORES);
  tk_store *s;
  tk_err err;
  must(tk_store_open(url, &s, &err), &err, "open store");
  tk_store_set_clock(s, tk_clock_manual(&w->clock));
  w->open[w->nopen++] = s;
  return s;
}

/* Close a connection open_store opened, before the end of the case. */
static void close_store(world *w, tk_store *s) {
  for (int i = 0; i < w->nopen; i++)
    if (w->open[i] == s) {
      w->open[i] = w->open[--w->nopen];
      tk_store_close(s);
      return;
    }
  fail_msg("closing a store the case did not open");
}

/* A new empty store of the case's backend: its URL into url. */
static void new_store(world *w, char *url, size_t cap) {
  char why[512];
  if (w->be->create(w, url, cap, why, sizeof why) != 0)
    fail_msg("%s: a new store: %s", w->be->name, why);
}

/* The backoff settings do not matter here (outcomes carry their delays);
 * five attempts is what templates that set none get. */
static const char *const config_sets[] = {"engine.max_attempts=5", "backoff.jitter=none"};

/* Free what the world holds; safe on a partly built one. */
static void world_free(world *w) {
  while (w->nopen > 0) tk_store_close(w->open[--w->nopen]);
  if (w->be) w->be->destroy(w);
  tk_config_free(w->cfg);
  efx_rmtree(w->dir);
  free(w);
}

/* cmocka setup: the world of the test's case on its backend, with a
 * configuration and the clock at T(0); its store is made by run_case,
 * where a failure is the case's (and teardown still removes it). */
static int world_setup(void **state) {
  const test_param *p = *state;
  world *w = calloc(1, sizeof *w);
  if (w == NULL) return -1;
  w->be = p->be;
  w->kase = p->kase;
  w->clock.now_ms = T(0);
  efx_tmpdir(w->dir, sizeof w->dir);
  *state = w;
  return 0;
}

/* cmocka teardown: close every connection and remove every store. */
static int world_teardown(void **state) {
  world_free(*state);
  return 0;
}

/* The cmocka test of every row: a fresh store of the backend, migrated
 * unless the case migrates itself; then the case. */
static void run_case(void **state) {
  world *w = *state;
  tk_config_source src = {NULL, NULL, NULL, config_sets,
                          (int)(sizeof config_sets / sizeof config_sets[0])};
  tk_err err;
  must(tk_config_load(&src, &w->cfg, &err), &err, "configuration");
  new_store(w, w->url, sizeof w->url);
  w->s = open_store(w, w->url);
  if (!w->kase->unmigrated) must(tk_store_migrate(w->s, NULL, NULL, &err), &err, "migrate");
  w->kase->run(w);
}

/* ------------------------------------------------------------------ */
/* Backends                                                            */
/* ------------------------------------------------------------------ */

/* A new file in the world's directory (SQLite creates it on open). */
static int sqlite_create(world *w, char *url, size_t cap, char *why, size_t why_cap) {
  (void)why, (void)why_cap;
  snprintf(url, cap, "sqlite:%s/store%d.db", w->dir, ++w->stores);
  return 0;
}

/* The files go with the world's directory. */
static void sqlite_destroy(world *w) { (void)w; }

static backend sqlite_backend = {"sqlite", sqlite_create, sqlite_destroy, NULL,
                                 tk__sqlite_migrations};

/* The run's PostgreSQL server (TK_TEST_PG_URL); a database per store. */
static const char *pg_url;
static int pg_databases_made;

/* A connection to pg_url for creating and dropping databases, or NULL
 * with the reason in why. */
static PGconn *pg_admin(char *why, size_t cap) {
  PGconn *c = PQconnectdb(pg_url);
  if (PQstatus(c) == CONNECTION_OK) return c;
  snprintf(why, cap, "cannot connect to TK_TEST_PG_URL %s: %s", pg_url, PQerrorMessage(c));
  PQfinish(c);
  return NULL;
}

/* Run one statement; 0, or -1 with the server's message in why. */
static int pg_exec(PGconn *c, const char *sql, char *why, size_t cap) {
  PGresult *r = PQexec(c, sql);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) snprintf(why, cap, "%s: %s", sql, PQerrorMessage(c));
  PQclear(r);
  return ok ? 0 : -1;
}

/* Append keyword='value' to a libpq connection string (quotes and
 * backslashes escaped); -1 when it does not fit. */
static int conninfo_add(char *out, size_t cap, size_t *len, const char *key, const char *val) {
  int n = snprintf(out + *len, cap - *len, "%s%s='", *len ? " " : "", key);
  if (n < 0 || (size_t)n >= cap - *len) return -1;
  *len += (size_t)n;
  for (const char *p = val; *p; p++) {
    if (*len + 3 >= cap) return -1;
    if (*p == '\'' || *p == '\\') out[(*len)++] = '\\';
    out[(*len)++] = *p;
  }
  out[(*len)++] = '\'';
  out[*len] = '\0';
  return 0;
}

/* pg_url with its database replaced by dbname, as a connection string
 * (which tk_store_open takes as readily as a URL). */
static int pg_url_of(const char *dbname, char *out, size_t cap, char *why, size_t why_cap) {
  char *msg = NULL;
  PQconninfoOption *opts = PQconninfoParse(pg_url, &msg);
  if (opts == NULL) {
    snprintf(why, why_cap, "TK_TEST_PG_URL %s: %s", pg_url, msg ? msg : "out of memory");
    PQfreemem(msg);
    return -1;
  }
  size_t len = 0;
  int rc = 0;
  out[0] = '\0';
  for (PQconninfoOption *o = opts; o->keyword != NULL && rc == 0; o++)
    if (o->val != NULL && strcmp(o->keyword, "dbname") != 0)
      rc = conninfo_add(out, cap, &len, o->keyword, o->val);
  if (rc == 0) rc = conninfo_add(out, cap, &len, "dbname", dbname);
  PQconninfoFree(opts);
  if (rc) snprintf(why, why_cap, "TK_TEST_PG_URL %s is too long", pg_url);
  return rc;
}

/* A new database tk_<pid>_<n> on the run's server, remembered for
 * pg_destroy. */
static int pg_create(world *w, char *url, size_t cap, char *why, size_t why_cap) {
  if (w->ndatabases == MAX_DATABASES) {
    snprintf(why, why_cap, "more than %d databases in one case", MAX_DATABASES);
    return -1;
  }
  char *name = w->databases[w->ndatabases];
  snprintf(name, sizeof w->databases[0], "tk_%ld_%d", (long)getpid(), ++pg_databases_made);
  PGconn *c = pg_admin(why, why_cap);
  if (c == NULL) return -1;
  char sql[128];
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
  int rc = pg_exec(c, sql, why, why_cap);
  PQfinish(c);
  if (rc) return rc;
  w->ndatabases++;
  return pg_url_of(name, url, cap, why, why_cap);
}

/* Drop every database pg_create made for w; failures are printed, not
 * fatal (the run's cluster goes away with everything on it). */
static void pg_destroy(world *w) {
  char why[512];
  PGconn *c = w->ndatabases ? pg_admin(why, sizeof why) : NULL;
  if (w->ndatabases && c == NULL) print_error("dropping the case's databases: %s\n", why);
  for (int i = 0; c && i < w->ndatabases; i++) {
    char sql[160];
    /* FORCE (13 and later): a connection a failed case left behind must
     * not keep its database. */
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s%s", w->databases[i],
             PQserverVersion(c) >= 130000 ? " WITH (FORCE)" : "");
    if (pg_exec(c, sql, why, sizeof why) != 0) print_error("%s\n", why);
  }
  PQfinish(c);
  w->ndatabases = 0;
}

#ifdef TK_NO_POSTGRES
static backend pg_backend = {"postgres", pg_create, pg_destroy, NULL, NULL};
#else
static backend pg_backend = {"postgres", pg_create, pg_destroy, NULL, tk__postgres_migrations};
#endif

/* Decide whether the PostgreSQL half can run here; if not, say why in
 * pg_backend.unavailable. A server that TK_TEST_PG_URL names but that
 * refuses connections is not "unavailable": its cases fail. */
static void pg_probe(void) {
  static char why[TK_ERR_MSG_MAX + 64];
  /* A libpq keyword string always goes to the PostgreSQL backend: a build
   * without one refuses it as unsupported, a build with one fails to
   * connect to a socket directory that does not exist. */
  tk_store *s;
  tk_err err;
  int rc = tk_store_open("host=/nonexistent/tk-probe dbname=tk_probe connect_timeout=1", &s, &err);
  if (rc == 0) tk_store_close(s);
  if (rc == TK_EUNSUPPORTED) {
    snprintf(why, sizeof why, "this build has no PostgreSQL backend (build with make PG_BACKEND=1)");
    pg_backend.unavailable = why;
    return;
  }
  pg_url = getenv("TK_TEST_PG_URL");
  if (pg_url == NULL || *pg_url == '\0') {
    const char *reason = getenv("TK_TEST_PG_UNAVAILABLE");
    snprintf(why, sizeof why, "%s",
             reason && *reason ? reason
                               : "TK_TEST_PG_URL is not set (scripts/run-tests starts a private "
                                 "cluster and sets it)");
    pg_backend.unavailable = why;
  }
}

/* ------------------------------------------------------------------ */
/* Templates, tasks, claims and outcomes                               */
/* ------------------------------------------------------------------ */

#define NOOP "handler = { kind = \"builtin\", name = \"noop\" }\n"
#define STEP(name) "[[steps]]\nname = \"" name "\"\n" NOOP
#define AFTER(name, parent) STEP(name) "depends_on = [\"" parent "\"]\n"

/* One step "s". */
static const char one_toml[] = "name = \"one\"\nversion = \"1\"\n" STEP("s");
/* a -> b */
static const char chain_toml[] = "name = \"chain\"\nversion = \"1\"\n" STEP("a") AFTER("b", "a");
/* a, b, c independent; d after a */
static const char four_toml[] =
    "name = \"four\"\nversion = \"1\"\n" STEP("a") STEP("b") STEP("c") AFTER("d", "a");
/* One batch step over context.items. */
static const char bulk_toml[] =
    "name = \"bulk\"\nversion = \"1\"\n"
    "[[steps]]\nname = \"send\"\nhandler = { kind = \"builtin\", name = \"batch\" }\n"
    "batch = { items_from = \"items\", max_item_attempts = 2, max_in_call_retries = 1 }\n";

/* Store a template given as TOML, through the public API; its id. */
static int64_t add_template(world *w, const char *toml) {
  char name[32], path[512];
  snprintf(name, sizeof name, "template%d.toml", ++w->files);
  efx_write(w->dir, name, toml, path, sizeof path);
  tk_template_info info;
  tk_err err;
  must(tk_template_add_file(w->s, w->cfg, path, w->clock.now_ms, &info, &err), &err,
       "add template");
  return info.id;
}

/* Submit a task of template `name` on connection s at `now`; its id, and
 * whether the identity existed. */
static int64_t submit_on(world *w, tk_store *s, const char *name, const char *context,
                         const char *identity, int64_t now, int *existed) {
  tk_submit_request req = {.template_name = name, .context_json = context,
                           .identity = identity};
  int64_t id = 0;
  tk_err err;
  must(tk_task_submit(s, w->cfg, &req, now, &id, existed, &err), &err, "submit");
  return id;
}

/* Submit a new task of `name` now. */
static int64_t submit(world *w, const char *name) {
  int existed = 0;
  int64_t id = submit_on(w, w->s, name, NULL, NULL, w->clock.now_ms, &existed);
  assert_int_equal(existed, 0);
  return id;
}

/* A claim alone on connection s, as `owner`, leased for LEASE_MS. */
static tk__claim_request claim_ahead(tk_store *s, const char *owner, int limit, int fresh_limit,
                                     int64_t ahead_ms, tk__claimed *out) {
  tk__claim_request r = {.owner = owner, .lease_ms = LEASE_MS, .limit = limit,
                         .fresh_limit = fresh_limit, .retry_ahead_ms = ahead_ms, .out = out};
  tk_err err;
  must(s->ops->record(s, NULL, 0, NULL, NULL, &r, &err), &err, "claim");
  return r;
}

/* Claim up to limit steps; how many. */
static int claim(tk_store *s, const char *owner, int limit, tk__claimed *out) {
  return claim_ahead(s, owner, limit, limit, 0, out).n;
}

/* Claim exactly one step. */
static tk__claimed claim_one(tk_store *s, const char *owner) {
  tk__claimed c;
  assert_int_equal(claim(s, owner, 1, &c), 1);
  return c;
}

/* The reaper's outcome for expired lease x (common/outcomes.h). */
static tk__outcome expired_of(const tk__expired *x, int64_t now, int64_t run_at) {
  return reaped_of(&x->step, x->owner, now, run_at);
}

/* Record one outcome on s: the outcome's own code (0, TK_EFENCED, ...). */
static int record1(tk_store *s, const tk__outcome *o, tk__effects *fx, tk_err *err) {
  tk_err whole;
  tk_err_clear(err);
  int rc = s->ops->record(s, o, 1, fx, err, NULL, &whole);
  if (rc != 0) {
    *err = whole;
    return rc;
  }
  return err->code;
}

/* Record an outcome that must be accepted. */
static tk__effects record_ok(tk_store *s, const tk__outcome *o) {
  tk__effects fx;
  tk_err err;
  must(record1(s, o, &fx, &err), &err, "record");
  return fx;
}

/* The leases expired on s at `now` (up to max). */
static int expired_at(tk_store *s, int64_t now, tk__expired *out, int max) {
  int n = 0;
  tk_err err;
  must(s->ops->expired(s, now, max, out, &n, &err), &err, "expired leases");
  return n;
}

/* ------------------------------------------------------------------ */
/* Observing: reports and status                                       */
/* ------------------------------------------------------------------ */

/* The task report of task_id on s (free with tk__task_report_free). */
static void report_on(tk_store *s, int64_t task_id, tk__task_report *r) {
  tk_err err;
  must(s->ops->task_report(s, task_id, r, &err), &err, "task report");
}

/* The step called name in r; fails the case when there is none. */
static const tk__step_rec *step_named(const tk__task_report *r, const char *name) {
  for (int i = 0; i < r->nsteps; i++)
    if (strcmp(r->steps[i].name, name) == 0) return &r->steps[i];
  fail_msg("task %lld has no step %s", (long long)r->id, name);
  return NULL;
}

/* The name of step step_id in r, for messages. */
static const char *step_name_of(const tk__task_report *r, int64_t step_id) {
  for (int i = 0; i < r->nsteps; i++)
    if (r->steps[i].id == step_id) return r->steps[i].name;
  return step_id == TK__NONE ? "(task)" : "?";
}

/* The newest attempt row of step `step` numbered `attempt`. */
static const tk__attempt_rec *attempt_of(const tk__task_report *r, const char *step,
                                         int attempt) {
  int64_t id = step_named(r, step)->id;
  for (int i = r->nattempts - 1; i >= 0; i--)
    if (r->attempts[i].step_id == id && r->attempts[i].attempt == attempt)
      return &r->attempts[i];
  fail_msg("task %lld: step %s has no attempt %d", (long long)r->id, step, attempt);
  return NULL;
}

/* Whether two strings, either of which may be NULL, are equal. */
static int same_str(const char *a, const char *b) {
  return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Attempt rows of step `step` with outcome `outcome` (NULL: still open). */
static int attempts_with(const tk__task_report *r, const char *step, const char *outcome) {
  int64_t id = step_named(r, step)->id;
  int n = 0;
  for (int i = 0; i < r->nattempts; i++)
    n += r->attempts[i].step_id == id && same_str(r->attempts[i].outcome, outcome);
  return n;
}

/* Transitions of step `step` (NULL: the task's own) from `from` to `to`
 * with `reason` (NULL: any). */
static int transitions(const tk__task_report *r, const char *step, const char *from,
                       const char *to, const char *reason) {
  int64_t id = step ? step_named(r, step)->id : TK__NONE;
  int n = 0;
  for (int i = 0; i < r->ntransitions; i++) {
    const tk__transition_rec *t = &r->transitions[i];
    n += t->step_id == id && same_str(t->from, from) && same_str(t->to, to) &&
         (reason == NULL || same_str(t->reason, reason));
  }
  return n;
}

/* A growing string. */
typedef struct text {
  char *s;
  size_t len, cap;
} text;

/* Append printf-style text to t. */
static void add(text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void add(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (t->len + (size_t)n + 1 > t->cap) {
    t->cap = (t->len + (size_t)n + 1) * 2;
    t->s = realloc(t->s, t->cap);
    assert_non_null(t->s);
  }
  va_start(ap, fmt);
  vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
}

/* A time as "T+ms" from the clock's start, or "null". */
static const char *at_text(char buf[32], int64_t v) {
  if (v == TK__NONE) return "null";
  snprintf(buf, 32, "T%+lld", (long long)(v - T(0)));
  return buf;
}

/* A number that may be NULL (TK__NONE) as text. */
static const char *num_text(char buf[32], int64_t v) {
  if (v == TK__NONE) return "null";
  snprintf(buf, 32, "%lld", (long long)v);
  return buf;
}

#define STR(p) ((p) ? (p) : "null")

/* Everything a task report says, one line per row, except the attempt row
 * of step skip_step numbered skip_attempt (0: none skipped): equal texts
 * mean the store holds the same task. */
static char *report_text(const tk__task_report *r, int64_t skip_step, int skip_attempt) {
  text t = {0};
  char a[32], b[32], c[32];
  add(&t, "task %lld %s identity=%s created=%s updated=%s finished=%s steps=%d/%d/%d context=%s"
          " template=%lld %s/%s@%s\n",
      (long long)r->id, r->state, STR(r->identity), at_text(a, r->created_at),
      at_text(b, r->updated_at), at_text(c, r->finished_at), r->steps_total, r->steps_done,
      r->steps_error, STR(r->context), (long long)r->template_.id, STR(r->template_.namespace_),
      STR(r->template_.name), STR(r->template_.version));
  for (int i = 0; i < r->nsteps; i++) {
    const tk__step_rec *s = &r->steps[i];
    add(&t, "step %d %s %s attempts=%d/%d retryable=%d parents=%d backoff=%s run_at=%s"
            " lease=%s@%s delay=%lld error=%s results=%s",
        s->idx, s->name, s->state, s->attempts, s->max_attempts, s->retryable,
        s->parents_remaining, STR(s->backoff), at_text(a, s->run_at), STR(s->lease_owner),
        at_text(b, s->lease_expires_at), (long long)s->last_delay_ms, STR(s->last_error),
        STR(s->results));
    if (s->batch)
      add(&t, " items=%lld/%lld/%lld", (long long)s->items_pending, (long long)s->items_acked,
          (long long)s->items_gave_up);
    add(&t, "\n");
  }
  for (int i = 0; i < r->nattempts; i++) {
    const tk__attempt_rec *x = &r->attempts[i];
    if (x->step_id == skip_step && x->attempt == skip_attempt) continue;
    char d[32];
    add(&t, "attempt %s#%d by %s started=%s finished=%s outcome=%s error=%s delay=%s(%s)"
            " next=%s\n",
        step_name_of(r, x->step_id), x->attempt, STR(x->owner), at_text(a, x->started_at),
        at_text(b, x->finished_at), STR(x->outcome), STR(x->error), num_text(d, x->delay_ms),
        STR(x->delay_source), at_text(c, x->next_run_at));
  }
  for (int i = 0; i < r->ntransitions; i++) {
    const tk__transition_rec *x = &r->transitions[i];
    add(&t, "transition %s %s %s -> %s (%s) attempt=%s\n", at_text(a, x->at),
        step_name_of(r, x->step_id), STR(x->from), STR(x->to), STR(x->reason),
        num_text(b, x->attempt));
  }
  for (int i = 0; i < r->ngave_up; i++)
    add(&t, "gave up %s %s after %d: %s\n", step_name_of(r, r->gave_up[i].step_id),
        r->gave_up[i].key, r->gave_up[i].attempts, STR(r->gave_up[i].last_error));
  return t.s;
}

/* The whole task as text (see report_text). Malloc'd. */
static char *task_text(world *w, int64_t task_id) {
  tk__task_report r;
  report_on(w->s, task_id, &r);
  char *s = report_text(&r, 0, 0);
  tk__task_report_free(&r);
  return s;
}

/* Assert that the task reads as `before` did (which is freed). */
static void expect_unchanged(world *w, int64_t task_id, char *before) {
  char *after = task_text(w, task_id);
  if (strcmp(before, after) != 0) {
    print_error("before:\n%s\nafter:\n%s\n", before, after);
    free(before);
    free(after);
    fail_msg("task %lld changed", (long long)task_id);
  }
  free(before);
  free(after);
}

/* The status report's counter `name` (0 when the store has none yet). */
static int64_t counter(world *w, const char *name) {
  tk__status_report st;
  tk_err err;
  must(w->s->ops->status(w->s, w->clock.now_ms, &st, &err), &err, "status");
  for (int i = 0; i < st.ncounters; i++)
    if (strcmp(st.counters[i].name, name) == 0) return st.counters[i].value;
  return 0;
}

/* Tasks in `state`, from the status report. */
static int64_t tasks_in(world *w, const char *state) {
  tk__status_report st;
  tk_err err;
  must(w->s->ops->status(w->s, w->clock.now_ms, &st, &err), &err, "status");
  for (int i = 0; i < st.ntasks; i++)
    if (strcmp(st.tasks[i].state, state) == 0) return st.tasks[i].n;
  return 0;
}

/* Assert the task's state and the states of named steps: pairs of (step,
 * state), NULL-terminated. */
static void expect_states(world *w, int64_t task_id, const char *task_state, ...) {
  tk__task_report r;
  report_on(w->s, task_id, &r);
  char *all = report_text(&r, 0, 0);
  va_list ap;
  va_start(ap, task_state);
  int bad = strcmp(r.state, task_state) != 0;
  const char *step;
  while (!bad && (step = va_arg(ap, const char *)) != NULL)
    bad = strcmp(step_named(&r, step)->state, va_arg(ap, const char *)) != 0;
  va_end(ap);
  tk__task_report_free(&r);
  if (bad) {
    print_error("%s", all);
    free(all);
    fail_msg("task %lld is not as expected (its report is above)", (long long)task_id);
  }
  free(all);
}

/* Assert that JSON text got means the same as want (backends may store
 * JSON in another spelling). */
static void expect_json(const char *got, const char *want) {
  json_t *g = got ? json_loads(got, JSON_DECODE_ANY, NULL) : NULL;
  json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
  int same = g != NULL && json_equal(g, w);
  json_decref(g);
  json_decref(w);
  if (!same) fail_msg("JSON %s, expected %s", got ? got : "(null)", want);
}

/* Assert that needle occurs in haystack. */
static void expect_contains(const char *haystack, const char *needle) {
  if (strstr(haystack, needle) == NULL) fail_msg("\"%s\" does not contain \"%s\"", haystack, needle);
}

/* ------------------------------------------------------------------ */
/* Claim order                                                         */
/* ------------------------------------------------------------------ */

/* Due retries go first, earliest run_at first, then ready pending steps,
 * oldest task first; neither a retry nor a task whose time has not come is
 * claimed, and the claim reports when the next retry is due. */
static void due_retries_first_then_pending(world *w) {
  add_template(w, one_toml);
  int64_t t[6];
  for (int i = 0; i < 3; i++) {
    w->clock.now_ms = T(i);
    t[i] = submit(w, "one");
  }
  w->clock.now_ms = T(10);
  tk__claimed c[8];
  assert_int_equal(claim(w->s, "A", 8, c), 3);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(c[i].task_id, t[i]);
    assert_string_equal(c[i].prev_state, TK__STEP_PENDING);
    assert_int_equal(c[i].attempt, 1);
  }
  /* Due again in the reverse of their tasks' order: t2, t1, then t0. */
  static const int64_t due[3] = {3000, 2000, 1000};
  for (int i = 0; i < 3; i++) {
    tk__outcome o = retry_of(&c[i], "A", T(10), T(due[i]));
    record_ok(w->s, &o);
  }
  /* Fresh work that became ready before any retry came due; and a task
   * whose start is still to come. */
  w->clock.now_ms = T(500);
  t[3] = submit(w, "one");
  t[4] = submit(w, "one");
  int existed;
  t[5] = submit_on(w, w->s, "one", NULL, NULL, T(4000), &existed);

  /* One at a time, so that a claim must pick the right one, not merely
   * sort what it picked. */
  w->clock.now_ms = T(2500);
  tk__claim_request r = claim_ahead(w->s, "B", 1, 1, 0, c);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.now, T(2500)); /* the store's clock: the manual one */
  assert_int_equal(c[0].task_id, t[2]);
  assert_int_equal(c[0].run_at, T(1000));
  assert_string_equal(c[0].prev_state, TK__STEP_WAITING_FOR_RETRY);
  assert_int_equal(c[0].attempt, 2);
  assert_int_equal(r.next_retry_at, T(2000));
  r = claim_ahead(w->s, "B", 8, 8, 0, c);
  assert_int_equal(r.n, 3);
  assert_int_equal(c[0].task_id, t[1]);
  assert_int_equal(c[0].run_at, T(2000));
  assert_string_equal(c[0].prev_state, TK__STEP_WAITING_FOR_RETRY);
  assert_int_equal(c[0].attempt, 2);
  assert_int_equal(c[1].task_id, t[3]);
  assert_int_equal(c[2].task_id, t[4]);
  for (int i = 1; i < 3; i++) {
    assert_string_equal(c[i].prev_state, TK__STEP_PENDING);
    assert_int_equal(c[i].attempt, 1);
  }
  assert_int_equal(r.next_retry_at, T(3000));

  w->clock.now_ms = T(2999);
  r = claim_ahead(w->s, "B", 8, 8, 0, c);
  assert_int_equal(r.n, 0);
  assert_int_equal(r.next_retry_at, T(3000));
  w->clock.now_ms = T(3000); /* due at run_at itself */
  r = claim_ahead(w->s, "B", 8, 8, 0, c);
  assert_int_equal(r.n, 1);
  assert_int_equal(c[0].task_id, t[0]);
  assert_int_equal(r.next_retry_at, INT64_MAX);
  w->clock.now_ms = T(3999);
  assert_int_equal(claim(w->s, "B", 8, c), 0);
  w->clock.now_ms = T(4000);
  assert_int_equal(claim(w->s, "B", 8, c), 1);
  assert_int_equal(c[0].task_id, t[5]);
}

/* Ready pending steps go oldest task first, not first ready first: a
 * started task goes on before a newer one starts. */
static void oldest_task_first(world *w) {
  add_template(w, chain_toml);
  int64_t x = submit(w, "chain");
  w->clock.now_ms = T(1);
  int64_t y = submit(w, "chain");
  w->clock.now_ms = T(2);
  tk__claimed c[4];
  c[0] = claim_one(w->s, "A");
  assert_int_equal(c[0].task_id, x);
  /* x's step b becomes ready at T(3), after y's step a (T(1)). */
  w->clock.now_ms = T(3);
  tk__outcome o = success_of(&c[0], "A", T(3));
  assert_int_equal(record_ok(w->s, &o).children_released, 1);
  c[0] = claim_one(w->s, "A");
  assert_int_equal(c[0].task_id, x);
  assert_int_equal(c[0].idx, 1);
  c[0] = claim_one(w->s, "A");
  assert_int_equal(c[0].task_id, y);
  assert_int_equal(c[0].idx, 0);
  /* Within one claim the same order. */
  w->clock.now_ms = T(4);
  int64_t z = submit(w, "chain");
  o = success_of(&c[0], "A", T(5));
  w->clock.now_ms = T(5);
  record_ok(w->s, &o); /* y's step b is ready at T(5), after z's step a */
  assert_int_equal(claim(w->s, "A", 4, c), 2);
  assert_int_equal(c[0].task_id, y);
  assert_int_equal(c[1].task_id, z);
}

/* fresh_limit bounds the pending steps a claim takes, never the retries. */
static void fresh_limit_bounds_only_fresh_work(world *w) {
  add_template(w, one_toml);
  int64_t r1 = submit(w, "one"), r2 = submit(w, "one");
  tk__claimed c[8];
  assert_int_equal(claim(w->s, "A", 2, c), 2);
  for (int i = 0; i < 2; i++) {
    tk__outcome o = retry_of(&c[i], "A", T(0), T(1000));
    record_ok(w->s, &o);
  }
  w->clock.now_ms = T(500);
  int64_t f[3];
  for (int i = 0; i < 3; i++) f[i] = submit(w, "one");
  w->clock.now_ms = T(1000);
  assert_int_equal(claim_ahead(w->s, "A", 8, 1, 0, c).n, 3);
  /* The two retries (equal run_at: either order), then one fresh step. */
  assert_true((c[0].task_id == r1 && c[1].task_id == r2) ||
              (c[0].task_id == r2 && c[1].task_id == r1));
  assert_int_equal(c[2].task_id, f[0]);
  assert_int_equal(claim_ahead(w->s, "A", 8, 0, 0, c).n, 0);
  /* The smaller of limit and fresh_limit wins. */
  assert_int_equal(claim_ahead(w->s, "A", 1, 5, 0, c).n, 1);
  assert_int_equal(c[0].task_id, f[1]);
  assert_int_equal(claim_ahead(w->s, "A", 8, 8, 0, c).n, 1);
  assert_int_equal(c[0].task_id, f[2]);
}

/* retry_ahead_ms claims a retry up to that long before its run_at, and
 * no earlier; it does not bring fresh work forward. The attempt is
 * stamped with the retry's run_at, when its claimer starts it (it holds
 * the retry until then), not with the claim's earlier time: a history
 * never shows a retry that started before it was due. */
static void retry_ahead_claims_early_and_no_earlier(world *w) {
  add_template(w, one_toml);
  int64_t t = submit(w, "one");
  tk__claimed c[2];
  c[0] = claim_one(w->s, "A");
  tk__outcome o = retry_of(&c[0], "A", T(0), T(1000));
  record_ok(w->s, &o);
  int existed;
  int64_t later = submit_on(w, w->s, "one", NULL, NULL, T(950), &existed);

  w->clock.now_ms = T(899);
  tk__claim_request r = claim_ahead(w->s, "A", 2, 2, 100, c);
  assert_int_equal(r.n, 0);
  assert_int_equal(r.next_retry_at, T(1000));
  w->clock.now_ms = T(900);
  r = claim_ahead(w->s, "A", 2, 2, 100, c);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.now, T(900));
  assert_int_equal(c[0].task_id, t);
  assert_int_equal(c[0].attempt, 2);
  assert_int_equal(c[0].run_at, T(1000));
  assert_int_equal(c[0].lease_expires_at, T(900) + LEASE_MS);
  tk__task_report rep;
  report_on(w->s, t, &rep);
  assert_int_equal(attempt_of(&rep, "s", 2)->started_at, T(1000));
  tk__task_report_free(&rep);
  w->clock.now_ms = T(950);
  assert_int_equal(claim(w->s, "A", 2, c), 1);
  assert_int_equal(c[0].task_id, later);
}

/* A claim is an attempt: attempts go up by one per claim, the lease runs
 * from the claim's time, the claim opens an attempt row, and every claim
 * id is new. */
static void claims_count_attempts_with_unique_ids(world *w) {
  int64_t tmpl = add_template(w, one_toml);
  int64_t t[3];
  for (int i = 0; i < 3; i++) t[i] = submit(w, "one");
  w->clock.now_ms = T(5);
  tk__claimed c[4];
  assert_int_equal(claim(w->s, "A", 3, c), 3);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(c[i].task_id, t[i]);
    assert_int_equal(c[i].template_id, tmpl);
    assert_int_equal(c[i].idx, 0);
    assert_int_equal(c[i].attempt, 1);
    assert_int_equal(c[i].max_attempts, 5);
    assert_int_equal(c[i].retryable, 1);
    assert_string_equal(c[i].backoff, "default");
    assert_int_equal(c[i].lease_expires_at, T(5) + LEASE_MS);
    assert_int_equal(c[i].task_was_pending, 1);
    for (int j = 0; j < i; j++) assert_true(c[i].claim_id != c[j].claim_id);
  }
  tk__task_report r;
  report_on(w->s, t[0], &r);
  assert_string_equal(r.state, TK__TASK_IN_PROGRESS);
  assert_int_equal(transitions(&r, NULL, TK__TASK_PENDING, TK__TASK_IN_PROGRESS,
                               TK__REASON_FIRST_CLAIM), 1);
  const tk__step_rec *s = step_named(&r, "s");
  assert_string_equal(s->state, TK__STEP_IN_PROGRESS);
  assert_int_equal(s->attempts, 1);
  assert_string_equal(s->lease_owner, "A");
  assert_int_equal(s->lease_expires_at, T(5) + LEASE_MS);
  assert_int_equal(transitions(&r, "s", TK__STEP_PENDING, TK__STEP_IN_PROGRESS,
                               TK__REASON_CLAIMED), 1);
  assert_int_equal(r.nattempts, 1);
  const tk__attempt_rec *a = attempt_of(&r, "s", 1);
  assert_string_equal(a->owner, "A");
  assert_int_equal(a->started_at, T(5));
  assert_int_equal(a->finished_at, TK__NONE);
  assert_null(a->outcome);
  tk__task_report_free(&r);

  w->clock.now_ms = T(10);
  tk__outcome o = retry_of(&c[0], "A", T(10), T(100));
  record_ok(w->s, &o);
  report_on(w->s, t[0], &r);
  s = step_named(&r, "s");
  assert_string_equal(s->state, TK__STEP_WAITING_FOR_RETRY);
  assert_int_equal(s->run_at, T(100));
  assert_int_equal(s->last_delay_ms, 90);
  assert_string_equal(s->last_error, "it broke");
  assert_null(s->lease_owner);
  a = attempt_of(&r, "s", 1);
  assert_string_equal(a->outcome, "failure");
  assert_string_equal(a->error, "it broke");
  assert_int_equal(a->finished_at, T(10));
  assert_int_equal(a->delay_ms, 90);
  assert_string_equal(a->delay_source, "computed");
  assert_int_equal(a->next_run_at, T(100));
  tk__task_report_free(&r);

  w->clock.now_ms = T(100);
  c[3] = claim_one(w->s, "B");
  assert_int_equal(c[3].task_id, t[0]);
  assert_int_equal(c[3].attempt, 2);
  assert_int_equal(c[3].task_was_pending, 0);
  assert_string_equal(c[3].prev_state, TK__STEP_WAITING_FOR_RETRY);
  for (int j = 0; j < 3; j++) assert_true(c[3].claim_id != c[j].claim_id);
  report_on(w->s, t[0], &r);
  assert_int_equal(step_named(&r, "s")->attempts, 2);
  assert_int_equal(r.nattempts, 2);
  assert_string_equal(attempt_of(&r, "s", 2)->owner, "B");
  tk__task_report_free(&r);
}

#define SHARED_TASKS 24

/* Two threads racing round by round: each round both start together
 * (so their store calls overlap) and both see what the other found, so
 * neither stops while the other still finds work, and each takes part. */
typedef struct lockstep {
  pthread_barrier_t go;
  int found[2];
} lockstep;

/* Wait for the other thread at the start of a round. */
static void lockstep_begin(lockstep *l) { pthread_barrier_wait(&l->go); }

/* Thread `me` found `found` things this round: 1 when neither found any
 * (both threads stop at the same round). */
static int lockstep_end(lockstep *l, int me, int found) {
  l->found[me] = found;
  pthread_barrier_wait(&l->go);
  return l->found[0] == 0 && l->found[1] == 0;
}

/* A thread claiming on its own connection until nothing is left. */
typedef struct claimer {
  tk_store *s;
  const char *owner;
  lockstep *race;
  int me;
  int64_t steps[SHARED_TASKS];
  int n;
  char error[TK_ERR_MSG_MAX + 64];
} claimer;

/* The claimer thread: claim three at a time, in step with the other,
 * until neither finds any (an error ends its rounds as "none found"). */
static void *claim_until_none(void *arg) {
  claimer *k = arg;
  for (int round = 0; round < 1000; round++) {
    tk__claimed c[3];
    tk__claim_request r = {.owner = k->owner, .lease_ms = LEASE_MS, .limit = 3,
                           .fresh_limit = 3, .out = c};
    tk_err err;
    lockstep_begin(k->race);
    if (!k->error[0] && k->s->ops->record(k->s, NULL, 0, NULL, NULL, &r, &err) != 0)
      snprintf(k->error, sizeof k->error, "claim by %s: %s", k->owner, err.msg);
    if (k->error[0]) r.n = 0;
    for (int i = 0; i < r.n; i++) {
      if (k->n == SHARED_TASKS) {
        snprintf(k->error, sizeof k->error, "%s claimed more steps than there are", k->owner);
        break;
      }
      k->steps[k->n++] = c[i].step_id;
    }
    if (lockstep_end(k->race, k->me, k->error[0] ? 0 : r.n)) return NULL;
  }
  snprintf(k->error, sizeof k->error, "%s was still claiming after 1000 claims", k->owner);
  return NULL;
}

/* Two connections claiming at once take every step exactly once. */
static void two_connections_never_share_a_step(world *w) {
  add_template(w, one_toml);
  int64_t t[SHARED_TASKS];
  for (int i = 0; i < SHARED_TASKS; i++) t[i] = submit(w, "one");
  lockstep race;
  pthread_barrier_init(&race.go, NULL, 2);
  claimer k[2] = {{.s = w->s, .owner = "A", .race = &race, .me = 0},
                  {.s = open_store(w, w->url), .owner = "B", .race = &race, .me = 1}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, claim_until_none, &k[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&race.go);
  for (int i = 0; i < 2; i++)
    if (k[i].error[0]) fail_msg("%s", k[i].error);
  /* Both raced: a claim that shut the other out would pass the rest. */
  if (k[0].n == 0 || k[1].n == 0)
    fail_msg("A claimed %d steps and B %d: both claim in every round, so each must get some",
             k[0].n, k[1].n);
  assert_int_equal(k[0].n + k[1].n, SHARED_TASKS);
  int64_t all[SHARED_TASKS];
  memcpy(all, k[0].steps, (size_t)k[0].n * sizeof all[0]);
  memcpy(all + k[0].n, k[1].steps, (size_t)k[1].n * sizeof all[0]);
  for (int i = 0; i < SHARED_TASKS; i++)
    for (int j = 0; j < i; j++)
      if (all[i] == all[j]) fail_msg("step %lld was claimed twice", (long long)all[i]);
  for (int i = 0; i < SHARED_TASKS; i++) {
    tk__task_report r;
    report_on(w->s, t[i], &r);
    assert_int_equal(step_named(&r, "s")->attempts, 1);
    assert_int_equal(r.nattempts, 1);
    tk__task_report_free(&r);
  }
}

/* A step's handler input is its task's context and its parents'
 * results, read for several steps at once. */
static void handler_inputs(world *w) {
  add_template(w, chain_toml);
  int existed;
  submit_on(w, w->s, "chain", "{\"order\": 42}", NULL, T(0), &existed);
  tk__claimed a = claim_one(w->s, "A");
  w->clock.now_ms = T(1);
  tk__outcome o = success_of(&a, "A", T(1));
  record_ok(w->s, &o);
  tk__claimed b = claim_one(w->s, "A");
  int64_t ids[2] = {b.step_id, a.step_id};
  json_t *in[2];
  tk_err err;
  must(w->s->ops->inputs(w->s, ids, 2, in, &err), &err, "inputs");
  char *got[2] = {json_dumps(in[0], JSON_SORT_KEYS), json_dumps(in[1], JSON_SORT_KEYS)};
  json_decref(in[0]);
  json_decref(in[1]);
  expect_json(got[0], "{\"context\": {\"order\": 42}, \"parents\": {\"a\": {\"ok\": true}}}");
  expect_json(got[1], "{\"context\": {\"order\": 42}, \"parents\": {}}");
  free(got[0]);
  free(got[1]);
  ids[1] = INT64_C(1) << 50;
  in[0] = in[1] = json_true(); /* to see them cleared */
  assert_int_equal(w->s->ops->inputs(w->s, ids, 2, in, &err), TK_ENOENT);
  assert_null(in[0]);
  assert_null(in[1]);
}

/* ------------------------------------------------------------------ */
/* Fencing                                                             */
/* ------------------------------------------------------------------ */

/* The refusal message of outcome o: the shared rules' text. */
static void expect_fenced(const tk_err *err, const tk__outcome *o) {
  tk_err want;
  tk__fenced_error(&want, o);
  assert_int_equal(err->code, TK_EFENCED);
  assert_string_equal(err->msg, want.msg);
}

/* An outcome or heartbeat of a claim that no longer holds its step is
 * refused (TK_EFENCED) and changes nothing but the fenced-writes counter;
 * nothing completes twice. */
static void stale_claim_changes_only_the_counter(world *w) {
  add_template(w, one_toml);
  int64_t t = submit(w, "one");
  tk__claimed c1 = claim_one(w->s, "A");
  w->clock.now_ms = T(100);
  tk__outcome o = retry_of(&c1, "A", T(100), T(200));
  record_ok(w->s, &o);
  w->clock.now_ms = T(200);
  tk__claimed c2 = claim_one(w->s, "B");
  assert_int_equal(c2.attempt, 2);

  char *before = task_text(w, t);
  int64_t fenced = counter(w, "fenced_writes");
  w->clock.now_ms = T(300);
  tk__effects fx;
  tk_err err;
  o = success_of(&c1, "A", T(300));
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);
  expect_fenced(&err, &o);
  tk__claimed forged = c2;
  forged.claim_id = INT64_C(1) << 50;
  o = success_of(&forged, "B", T(300));
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);
  expect_fenced(&err, &o);
  assert_int_equal(counter(w, "fenced_writes"), fenced + 2);
  assert_int_equal(w->s->ops->heartbeat(w->s, c1.step_id, c1.claim_id, T(99000), &err),
                   TK_EFENCED);
  assert_int_equal(w->s->ops->heartbeat(w->s, c2.step_id, forged.claim_id, T(99000), &err),
                   TK_EFENCED);
  expect_unchanged(w, t, before);

  /* The holder's heartbeat and outcome go through, once. */
  must(w->s->ops->heartbeat(w->s, c2.step_id, c2.claim_id, T(300) + 2 * LEASE_MS, &err), &err,
       "heartbeat");
  tk__task_report r;
  report_on(w->s, t, &r);
  assert_int_equal(step_named(&r, "s")->lease_expires_at, T(300) + 2 * LEASE_MS);
  tk__task_report_free(&r);
  w->clock.now_ms = T(400);
  o = success_of(&c2, "B", T(400));
  fx = record_ok(w->s, &o);
  assert_string_equal(fx.task_state, TK__TASK_COMPLETE);
  before = task_text(w, t);
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);
  expect_unchanged(w, t, before);
  report_on(w->s, t, &r);
  assert_int_equal(r.steps_done, 1);
  expect_json(step_named(&r, "s")->results, "{\"ok\": true}");
  assert_string_equal(attempt_of(&r, "s", 1)->outcome, "failure");
  assert_string_equal(attempt_of(&r, "s", 2)->outcome, "success");
  tk__task_report_free(&r);
}

/* A claim whose task was cancelled under it has an open attempt row: its
 * refused outcome closes that row as fenced_out and changes nothing else. */
static void outcome_after_cancel_is_fenced_out(world *w) {
  add_template(w, one_toml);
  int64_t t = submit(w, "one");
  tk__claimed c = claim_one(w->s, "A");
  w->clock.now_ms = T(50);
  const char *ts = NULL;
  tk_err err;
  must(tk_task_operate(w->s, TK_OP_CANCEL, t, NULL, T(50), &ts, &err), &err, "cancel");
  assert_string_equal(ts, TK__TASK_CANCELLED);
  tk__task_report r;
  report_on(w->s, t, &r);
  assert_null(attempt_of(&r, "s", 1)->outcome); /* still open */
  char *before = report_text(&r, c.step_id, 1);
  tk__task_report_free(&r);
  int64_t fenced = counter(w, "fenced_writes");

  w->clock.now_ms = T(100);
  tk__outcome o = success_of(&c, "A", T(100));
  tk__effects fx;
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);
  expect_fenced(&err, &o);
  assert_int_equal(counter(w, "fenced_writes"), fenced + 1);
  report_on(w->s, t, &r);
  char *after = report_text(&r, c.step_id, 1);
  assert_string_equal(before, after);
  free(before);
  free(after);
  const tk__attempt_rec *a = attempt_of(&r, "s", 1);
  assert_string_equal(a->outcome, "fenced_out");
  assert_int_equal(a->finished_at, T(100));
  tk__task_report_free(&r);

  /* Refused again: counted again, and the row keeps what it says. */
  before = task_text(w, t);
  w->clock.now_ms = T(200);
  o = success_of(&c, "A", T(200));
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);
  assert_int_equal(counter(w, "fenced_writes"), fenced + 2);
  expect_unchanged(w, t, before);
}

/* A group of outcomes in which one is fenced commits the others, and the
 * claim made in the same call takes the children they released. */
static void group_commits_around_a_fenced_outcome(world *w) {
  add_template(w, chain_toml);
  add_template(w, one_toml);
  int64_t x = submit(w, "chain"), y = submit(w, "chain"), z = submit(w, "one");
  w->clock.now_ms = T(1);
  tk__claimed c[3];
  assert_int_equal(claim(w->s, "A", 3, c), 3);
  assert_int_equal(c[0].task_id, x);
  assert_int_equal(c[1].task_id, y);
  assert_int_equal(c[2].task_id, z);
  w->clock.now_ms = T(2);
  tk_err err;
  must(tk_task_operate(w->s, TK_OP_CANCEL, z, NULL, T(2), NULL, &err), &err, "cancel");
  int64_t fenced = counter(w, "fenced_writes");

  w->clock.now_ms = T(3);
  tk__outcome o[3] = {success_of(&c[0], "A", T(3)), success_of(&c[2], "A", T(3)),
                      success_of(&c[1], "A", T(3))};
  tk__effects fx[3];
  tk_err errs[3];
  tk__claimed next_out[4];
  tk__claim_request next = {.owner = "A", .lease_ms = LEASE_MS, .limit = 4, .fresh_limit = 4,
                            .out = next_out};
  must(w->s->ops->record(w->s, o, 3, fx, errs, &next, &err), &err, "record a group");
  assert_int_equal(errs[0].code, 0);
  expect_fenced(&errs[1], &o[1]);
  assert_int_equal(errs[2].code, 0);
  assert_int_equal(fx[0].children_released, 1);
  assert_int_equal(fx[2].children_released, 1);
  assert_int_equal(next.n, 2);
  assert_int_equal(next_out[0].task_id, x);
  assert_int_equal(next_out[0].idx, 1);
  assert_int_equal(next_out[1].task_id, y);
  assert_int_equal(next_out[1].idx, 1);
  assert_int_equal(counter(w, "fenced_writes"), fenced + 1);
  expect_states(w, x, TK__TASK_IN_PROGRESS, "a", TK__STEP_COMPLETE, "b", TK__STEP_IN_PROGRESS,
                NULL);
  expect_states(w, y, TK__TASK_IN_PROGRESS, "a", TK__STEP_COMPLETE, "b", TK__STEP_IN_PROGRESS,
                NULL);
  expect_states(w, z, TK__TASK_CANCELLED, "s", TK__STEP_CANCELLED, NULL);
}

/* ------------------------------------------------------------------ */
/* The reaper                                                          */
/* ------------------------------------------------------------------ */

/* A lease expires at its expiry, not before; the reaper's lease_expired
 * outcome takes the step, and the owner's late outcome is fenced. */
static void reaper_wins_an_expired_lease(world *w) {
  add_template(w, one_toml);
  int64_t t = submit(w, "one");
  tk__claimed c = claim_one(w->s, "A");
  tk__expired x[4];
  assert_int_equal(expired_at(w->s, T(LEASE_MS - 1), x, 4), 0);
  assert_int_equal(expired_at(w->s, T(LEASE_MS), x, 4), 1);
  assert_int_equal(x[0].step.step_id, c.step_id);
  assert_int_equal(x[0].step.claim_id, c.claim_id);
  assert_int_equal(x[0].step.task_id, t);
  assert_int_equal(x[0].step.attempt, 1);
  assert_int_equal(x[0].step.lease_expires_at, T(LEASE_MS));
  assert_string_equal(x[0].owner, "A");

  w->clock.now_ms = T(LEASE_MS);
  tk__outcome o = expired_of(&x[0], T(LEASE_MS), T(LEASE_MS + 3000));
  assert_int_equal(counter(w, "lease_expired"), 0);
  record_ok(w->s, &o);
  /* Counted store-wide in the reaper's transaction. */
  assert_int_equal(counter(w, "lease_expired"), 1);
  tk__task_report r;
  report_on(w->s, t, &r);
  const tk__step_rec *s = step_named(&r, "s");
  assert_string_equal(s->state, TK__STEP_WAITING_FOR_RETRY);
  assert_int_equal(s->run_at, T(LEASE_MS + 3000));
  assert_null(s->lease_owner);
  const tk__attempt_rec *a = attempt_of(&r, "s", 1);
  assert_string_equal(a->outcome, "lease_expired");
  assert_int_equal(a->delay_ms, 3000);
  assert_int_equal(a->next_run_at, T(LEASE_MS + 3000));
  tk__task_report_free(&r);

  char *before = task_text(w, t);
  int64_t fenced = counter(w, "fenced_writes");
  w->clock.now_ms = T(LEASE_MS + 500);
  o = success_of(&c, "A", T(LEASE_MS + 500));
  tk__effects fx;
  tk_err err;
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);
  expect_fenced(&err, &o);
  assert_int_equal(counter(w, "fenced_writes"), fenced + 1);
  /* Also the attempt row: it stays lease_expired. */
  expect_unchanged(w, t, before);
  assert_int_equal(expired_at(w->s, T(10 * LEASE_MS), x, 4), 0);
}

/* The reaper reads an expired lease and writes later: an owner whose
 * heartbeat renewed the lease in between keeps its claim, and the reaper's
 * outcome is refused. */
static void heartbeat_before_the_reaper_keeps_the_claim(world *w) {
  add_template(w, one_toml);
  int64_t t = submit(w, "one");
  tk__claimed c = claim_one(w->s, "A");
  tk__expired x[4];
  assert_int_equal(expired_at(w->s, T(LEASE_MS), x, 4), 1);
  w->clock.now_ms = T(LEASE_MS);
  tk_err err;
  must(w->s->ops->heartbeat(w->s, c.step_id, c.claim_id, T(2 * LEASE_MS), &err), &err,
       "heartbeat");
  int64_t fenced = counter(w, "fenced_writes");
  tk__outcome o = expired_of(&x[0], T(LEASE_MS), T(LEASE_MS + 3000));
  tk__effects fx;
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);
  assert_int_equal(counter(w, "fenced_writes"), fenced + 1);
  assert_int_equal(counter(w, "lease_expired"), 0); /* refused: no lease expired */
  tk__task_report r;
  report_on(w->s, t, &r);
  const tk__step_rec *s = step_named(&r, "s");
  assert_string_equal(s->state, TK__STEP_IN_PROGRESS);
  assert_string_equal(s->lease_owner, "A");
  assert_int_equal(s->lease_expires_at, T(2 * LEASE_MS));
  assert_int_equal(r.nattempts, 1);
  assert_null(attempt_of(&r, "s", 1)->outcome); /* the claim is alive */
  tk__task_report_free(&r);
  assert_int_equal(expired_at(w->s, T(2 * LEASE_MS - 1), x, 4), 0);

  w->clock.now_ms = T(LEASE_MS + 2000);
  o = success_of(&c, "A", T(LEASE_MS + 2000));
  assert_string_equal(record_ok(w->s, &o).task_state, TK__TASK_COMPLETE);
  expect_states(w, t, TK__TASK_COMPLETE, "s", TK__STEP_COMPLETE, NULL);
}

/* Two reapers on two connections find the same expired lease: exactly one
 * lease_expired is recorded. */
static void reaper_against_reaper(world *w) {
  add_template(w, one_toml);
  int64_t t = submit(w, "one");
  tk_store *s2 = open_store(w, w->url);
  tk__claimed c = claim_one(w->s, "ghost");
  tk__expired x1[2], x2[2];
  assert_int_equal(expired_at(w->s, T(LEASE_MS), x1, 2), 1);
  /* The second may skip a row the first is taking; none is being taken. */
  assert_int_equal(expired_at(s2, T(LEASE_MS), x2, 2), 1);
  assert_int_equal(x1[0].step.claim_id, c.claim_id);
  assert_int_equal(x2[0].step.claim_id, c.claim_id);
  w->clock.now_ms = T(LEASE_MS);
  tk__outcome o2 = expired_of(&x2[0], T(LEASE_MS), T(LEASE_MS + 1000));
  tk__outcome o1 = expired_of(&x1[0], T(LEASE_MS), T(LEASE_MS + 2000));
  record_ok(s2, &o2);
  tk__effects fx;
  tk_err err;
  assert_int_equal(record1(w->s, &o1, &fx, &err), TK_EFENCED);
  tk__task_report r;
  report_on(w->s, t, &r);
  assert_int_equal(r.nattempts, 1);
  assert_int_equal(attempts_with(&r, "s", "lease_expired"), 1);
  const tk__step_rec *s = step_named(&r, "s");
  assert_string_equal(s->state, TK__STEP_WAITING_FOR_RETRY);
  assert_int_equal(s->run_at, T(LEASE_MS + 1000)); /* the winner's */
  assert_int_equal(s->attempts, 1);
  assert_int_equal(transitions(&r, "s", TK__STEP_IN_PROGRESS, TK__STEP_WAITING_FOR_RETRY, NULL), 1);
  tk__task_report_free(&r);
}

#define REAPED_TASKS 12

/* A reaper on its own connection: reap until no lease is left expired. */
typedef struct reaper {
  tk_store *s;
  lockstep *race;
  int me;
  int64_t now;
  int won, refused;
  char error[TK_ERR_MSG_MAX + 64];
} reaper;

/* The reaper thread: expire four at a time, in step with the other,
 * until neither finds any left (an error ends its rounds as "none"). */
static void *reap_until_none(void *arg) {
  reaper *k = arg;
  for (int round = 0; round < 100; round++) {
    tk__expired x[4];
    int n = 0;
    tk_err err;
    lockstep_begin(k->race);
    if (!k->error[0] && k->s->ops->expired(k->s, k->now, 4, x, &n, &err) != 0)
      snprintf(k->error, sizeof k->error, "expired: %s", err.msg);
    for (int i = 0; i < n && !k->error[0]; i++) {
      tk__outcome o = expired_of(&x[i], k->now, k->now + 5000);
      tk__effects fx;
      int rc = record1(k->s, &o, &fx, &err);
      if (rc == 0) {
        k->won++;
      } else if (rc == TK_EFENCED) {
        k->refused++;
      } else {
        snprintf(k->error, sizeof k->error, "record: %s", err.msg);
      }
    }
    if (lockstep_end(k->race, k->me, k->error[0] ? 0 : n)) return NULL;
  }
  snprintf(k->error, sizeof k->error, "still reaping after 100 rounds");
  return NULL;
}

/* Two reapers at once over many expired leases: each lease is expired
 * exactly once. */
static void reapers_at_once(world *w) {
  add_template(w, one_toml);
  int64_t t[REAPED_TASKS];
  for (int i = 0; i < REAPED_TASKS; i++) t[i] = submit(w, "one");
  tk__claimed c[REAPED_TASKS];
  assert_int_equal(claim(w->s, "ghost", REAPED_TASKS, c), REAPED_TASKS);
  w->clock.now_ms = T(LEASE_MS);
  lockstep race;
  pthread_barrier_init(&race.go, NULL, 2);
  reaper k[2] = {{.s = w->s, .race = &race, .me = 0, .now = T(LEASE_MS)},
                 {.s = open_store(w, w->url), .race = &race, .me = 1, .now = T(LEASE_MS)}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, reap_until_none, &k[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&race.go);
  for (int i = 0; i < 2; i++)
    if (k[i].error[0]) fail_msg("reaper %d: %s", i + 1, k[i].error);
  /* Both raced: each found expired leases and recorded or was refused. */
  for (int i = 0; i < 2; i++)
    if (k[i].won + k[i].refused == 0)
      fail_msg("reaper %d found no expired lease: it reaped in every round beside the other", i + 1);
  assert_int_equal(k[0].won + k[1].won, REAPED_TASKS);
  for (int i = 0; i < REAPED_TASKS; i++) {
    tk__task_report r;
    report_on(w->s, t[i], &r);
    assert_int_equal(attempts_with(&r, "s", "lease_expired"), 1);
    assert_int_equal(r.nattempts, 1);
    assert_string_equal(step_named(&r, "s")->state, TK__STEP_WAITING_FOR_RETRY);
    tk__task_report_free(&r);
  }
}

/* ------------------------------------------------------------------ */
/* Identity                                                            */
/* ------------------------------------------------------------------ */

#define IDENTITY_ROUNDS 16

/* A thread submitting identities race-0, race-1, ... on its connection,
 * each round starting with the other thread's. */
typedef struct submitter {
  world *w;
  tk_store *s;
  pthread_barrier_t *go;
  int64_t ids[IDENTITY_ROUNDS];
  int existed[IDENTITY_ROUNDS];
  char error[TK_ERR_MSG_MAX + 64];
} submitter;

/* The submitter thread: one submission per round, both threads
 * starting each round together. */
static void *submit_identities(void *arg) {
  submitter *k = arg;
  for (int i = 0; i < IDENTITY_ROUNDS; i++) {
    char identity[32];
    snprintf(identity, sizeof identity, "race-%d", i);
    tk_submit_request req = {.template_name = "one", .identity = identity};
    tk_err err;
    pthread_barrier_wait(k->go);
    if (!k->error[0] && tk_task_submit(k->s, k->w->cfg, &req, k->w->clock.now_ms, &k->ids[i],
                                       &k->existed[i], &err) != 0)
      snprintf(k->error, sizeof k->error, "submit %s: %s", identity, err.msg);
  }
  return NULL;
}

/* Two connections submitting one identity make one task; the other
 * submission gets it back with existed = 1. */
static void identity_races(world *w) {
  add_template(w, one_toml);
  tk_store *s2 = open_store(w, w->url);
  int e1 = -1, e2 = -1;
  int64_t first = submit_on(w, w->s, "one", "{\"n\":1}", "order-42", T(0), &e1);
  int64_t again = submit_on(w, s2, "one", "{\"n\":2}", "order-42", T(0), &e2);
  assert_int_equal(e1, 0);
  assert_int_equal(e2, 1);
  assert_int_equal(again, first);
  tk__task_report r;
  report_on(w->s, first, &r);
  assert_string_equal(r.identity, "order-42");
  expect_contains(r.context, "\"n\":1"); /* the first submission's */
  tk__task_report_free(&r);

  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, 2);
  submitter k[2] = {{.w = w, .s = w->s, .go = &go}, {.w = w, .s = s2, .go = &go}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, submit_identities, &k[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&go);
  for (int i = 0; i < 2; i++)
    if (k[i].error[0]) fail_msg("connection %d: %s", i + 1, k[i].error);
  for (int i = 0; i < IDENTITY_ROUNDS; i++) {
    if (k[0].existed[i] + k[1].existed[i] != 1 || k[0].ids[i] != k[1].ids[i])
      fail_msg("race-%d: tasks %lld (existed %d) and %lld (existed %d)", i,
               (long long)k[0].ids[i], k[0].existed[i], (long long)k[1].ids[i], k[1].existed[i]);
  }
  assert_int_equal(tasks_in(w, TK__TASK_PENDING), 1 + IDENTITY_ROUNDS);
}

/* ------------------------------------------------------------------ */
/* Operator actions                                                    */
/* ------------------------------------------------------------------ */

/* Expect `action` on task/step refused with code and, unless NULL, the
 * exact message want; the task must not change. */
static void expect_refused(world *w, tk_operator_action action, int64_t task, const char *step,
                           int code, const char *want) {
  char *before = code == TK_ENOENT ? NULL : task_text(w, task);
  const char *ts = "unset";
  tk_err err;
  tk_err_clear(&err);
  int rc = tk_task_operate(w->s, action, task, step, w->clock.now_ms, &ts, &err);
  if (rc != code)
    fail_msg("action %d on task %lld step %s: %s (%s), expected %s", (int)action, (long long)task,
             STR(step), err.msg, tk_err_name(rc), tk_err_name(code));
  assert_null(ts);
  if (want) assert_string_equal(err.msg, want);
  assert_true(err.msg[0] != '\0');
  if (before) expect_unchanged(w, task, before);
}

/* The rules' message refusing `action` on step of task in state. */
static const char *refusal(char *buf, size_t cap, tk_operator_action action, const char *step,
                           int64_t task, const char *state) {
  if (action == TK_OP_RETRY)
    snprintf(buf, cap, "step \"%s\" of task %lld is %s: only a step in error can be retried",
             step, (long long)task, state);
  else
    snprintf(buf, cap,
             "step \"%s\" of task %lld is %s: only a step that is pending, waiting for a retry "
             "or in error can be resolved",
             step, (long long)task, state);
  return buf;
}

/* Retry: only a step in error; its attempts start again and it is due at
 * once; a task in error goes back to in_progress. */
static void operator_retry(world *w) {
  add_template(w, one_toml);
  int64_t t = submit(w, "one");
  tk__claimed c = claim_one(w->s, "A");
  w->clock.now_ms = T(10);
  tk__outcome o = error_of(&c, "A", T(10));
  assert_string_equal(record_ok(w->s, &o).task_state, TK__TASK_ERROR);
  expect_states(w, t, TK__TASK_ERROR, "s", TK__STEP_ERROR, NULL);
  expect_refused(w, TK_OP_RETRY, t, "nope", TK_ENOENT, NULL);
  expect_refused(w, TK_OP_RETRY, t + 1000, "s", TK_ENOENT, NULL);

  w->clock.now_ms = T(20);
  const char *ts = NULL;
  tk_err err;
  must(tk_task_operate(w->s, TK_OP_RETRY, t, "s", T(20), &ts, &err), &err, "retry");
  assert_string_equal(ts, TK__TASK_IN_PROGRESS);
  tk__task_report r;
  report_on(w->s, t, &r);
  const tk__step_rec *s = step_named(&r, "s");
  assert_string_equal(s->state, TK__STEP_WAITING_FOR_RETRY);
  assert_int_equal(s->attempts, 0);
  assert_int_equal(s->run_at, T(20));
  assert_int_equal(s->last_delay_ms, 0);
  assert_string_equal(r.state, TK__TASK_IN_PROGRESS);
  assert_int_equal(r.steps_error, 0);
  assert_int_equal(
      transitions(&r, "s", TK__STEP_ERROR, TK__STEP_WAITING_FOR_RETRY, "operator retry"), 1);
  assert_int_equal(transitions(&r, NULL, TK__TASK_ERROR, TK__TASK_IN_PROGRESS,
                               TK__REASON_TASK_RESUMED), 1);
  tk__task_report_free(&r);

  char want[256];
  expect_refused(w, TK_OP_RETRY, t, "s", TK_ESTATE,
                 refusal(want, sizeof want, TK_OP_RETRY, "s", t, TK__STEP_WAITING_FOR_RETRY));
  c = claim_one(w->s, "A");
  assert_int_equal(c.task_id, t);
  assert_int_equal(c.attempt, 1); /* the attempts started again */
  expect_refused(w, TK_OP_RETRY, t, "s", TK_ESTATE,
                 refusal(want, sizeof want, TK_OP_RETRY, "s", t, TK__STEP_IN_PROGRESS));
  w->clock.now_ms = T(30);
  o = success_of(&c, "A", T(30));
  assert_string_equal(record_ok(w->s, &o).task_state, TK__TASK_COMPLETE);
  expect_refused(w, TK_OP_RETRY, t, "s", TK_ESTATE,
                 refusal(want, sizeof want, TK_OP_RETRY, "s", t, TK__STEP_COMPLETE));
  int64_t p = submit(w, "one");
  expect_refused(w, TK_OP_RETRY, p, "s", TK_ESTATE,
                 refusal(want, sizeof want, TK_OP_RETRY, "s", p, TK__STEP_PENDING));
}

/* Resolve: a step pending, waiting or in error becomes resolved_manually,
 * which counts as complete: its children are released, the task may
 * complete, and a task in error goes back to in_progress. */
static void operator_resolve(world *w) {
  add_template(w, chain_toml);
  add_template(w, one_toml);
  char want[256];
  const char *ts = "unset";
  tk_err err;

  /* Pending. */
  int64_t p = submit(w, "chain");
  must(tk_task_operate(w->s, TK_OP_RESOLVE, p, "a", T(0), &ts, &err), &err, "resolve pending");
  assert_null(ts);
  tk__task_report r;
  report_on(w->s, p, &r);
  assert_string_equal(step_named(&r, "a")->state, TK__STEP_RESOLVED);
  assert_int_equal(step_named(&r, "b")->parents_remaining, 0);
  assert_int_equal(r.steps_done, 1);
  assert_int_equal(transitions(&r, "a", TK__STEP_PENDING, TK__STEP_RESOLVED, "operator resolve"),
                   1);
  tk__task_report_free(&r);
  expect_refused(w, TK_OP_RESOLVE, p, "a", TK_ESTATE,
                 refusal(want, sizeof want, TK_OP_RESOLVE, "a", p, TK__STEP_RESOLVED));
  tk__claimed c = claim_one(w->s, "A");
  assert_int_equal(c.task_id, p);
  assert_int_equal(c.idx, 1);
  expect_refused(w, TK_OP_RESOLVE, p, "b", TK_ESTATE,
                 refusal(want, sizeof want, TK_OP_RESOLVE, "b", p, TK__STEP_IN_PROGRESS));
  tk__outcome o = success_of(&c, "A", T(0));
  assert_string_equal(record_ok(w->s, &o).task_state, TK__TASK_COMPLETE);
  expect_refused(w, TK_OP_RESOLVE, p, "b", TK_ESTATE,
                 refusal(want, sizeof want, TK_OP_RESOLVE, "b", p, TK__STEP_COMPLETE));

  /* Waiting for a retry far away: resolved now, and b is due now. */
  w->clock.now_ms = T(100);
  int64_t q = submit(w, "chain");
  c = claim_one(w->s, "A");
  o = retry_of(&c, "A", T(100), T(3600000));
  record_ok(w->s, &o);
  w->clock.now_ms = T(200);
  must(tk_task_operate(w->s, TK_OP_RESOLVE, q, "a", T(200), &ts, &err), &err, "resolve waiting");
  expect_states(w, q, TK__TASK_IN_PROGRESS, "a", TK__STEP_RESOLVED, "b", TK__STEP_PENDING, NULL);
  c = claim_one(w->s, "A");
  assert_int_equal(c.task_id, q);
  assert_int_equal(c.idx, 1);

  /* In error: the task resumes, and completes with its last step. */
  w->clock.now_ms = T(300);
  int64_t e = submit(w, "chain");
  c = claim_one(w->s, "A");
  assert_int_equal(c.task_id, e);
  o = error_of(&c, "A", T(300));
  assert_string_equal(record_ok(w->s, &o).task_state, TK__TASK_ERROR);
  w->clock.now_ms = T(400);
  must(tk_task_operate(w->s, TK_OP_RESOLVE, e, "a", T(400), &ts, &err), &err, "resolve error");
  assert_string_equal(ts, TK__TASK_IN_PROGRESS);
  report_on(w->s, e, &r);
  assert_int_equal(r.steps_error, 0);
  assert_int_equal(r.steps_done, 1);
  assert_int_equal(transitions(&r, NULL, TK__TASK_ERROR, TK__TASK_IN_PROGRESS,
                               TK__REASON_TASK_RESUMED), 1);
  tk__task_report_free(&r);
  c = claim_one(w->s, "A");
  assert_int_equal(c.task_id, e);
  o = success_of(&c, "A", T(400));
  assert_string_equal(record_ok(w->s, &o).task_state, TK__TASK_COMPLETE);

  /* Resolving the last step completes the task. */
  int64_t one = submit(w, "one");
  must(tk_task_operate(w->s, TK_OP_RESOLVE, one, "s", T(400), &ts, &err), &err, "resolve last");
  assert_string_equal(ts, TK__TASK_COMPLETE);
  report_on(w->s, one, &r);
  assert_string_equal(r.state, TK__TASK_COMPLETE);
  assert_int_equal(r.finished_at, T(400));
  tk__task_report_free(&r);
  expect_refused(w, TK_OP_RESOLVE, one, "nope", TK_ENOENT, NULL);
}

/* Cancel: any task not complete or cancelled; its pending, running and
 * waiting steps are cancelled, finished ones stay; nothing of it is
 * claimed again. */
static void operator_cancel(world *w) {
  add_template(w, four_toml);
  add_template(w, one_toml);
  char want[256];
  const char *ts = "unset";
  tk_err err;
  int64_t t = submit(w, "four");
  tk__claimed c[4];
  assert_int_equal(claim(w->s, "A", 4, c), 3); /* a, b, c; d waits for a */
  w->clock.now_ms = T(10);
  tk__outcome o = success_of(&c[0], "A", T(10));
  record_ok(w->s, &o); /* d is pending and ready */
  o = retry_of(&c[1], "A", T(10), T(5000));
  record_ok(w->s, &o); /* b waits; c runs */
  w->clock.now_ms = T(20);
  must(tk_task_operate(w->s, TK_OP_CANCEL, t, NULL, T(20), &ts, &err), &err, "cancel");
  assert_string_equal(ts, TK__TASK_CANCELLED);
  tk__task_report r;
  report_on(w->s, t, &r);
  assert_string_equal(r.state, TK__TASK_CANCELLED);
  assert_int_equal(r.finished_at, T(20));
  assert_string_equal(step_named(&r, "a")->state, TK__STEP_COMPLETE);
  static const char *const cancelled[][2] = {
      {"b", TK__STEP_WAITING_FOR_RETRY}, {"c", TK__STEP_IN_PROGRESS}, {"d", TK__STEP_PENDING}};
  for (int i = 0; i < 3; i++) {
    assert_string_equal(step_named(&r, cancelled[i][0])->state, TK__STEP_CANCELLED);
    assert_int_equal(transitions(&r, cancelled[i][0], cancelled[i][1], TK__STEP_CANCELLED,
                                 TK__REASON_TASK_CANCELLED), 1);
  }
  assert_int_equal(transitions(&r, NULL, TK__TASK_IN_PROGRESS, TK__TASK_CANCELLED, NULL), 1);
  tk__task_report_free(&r);
  w->clock.now_ms = T(6000);
  assert_int_equal(claim(w->s, "A", 4, c), 0);

  snprintf(want, sizeof want, "task %lld is already cancelled", (long long)t);
  expect_refused(w, TK_OP_CANCEL, t, NULL, TK_ESTATE, want);
  snprintf(want, sizeof want, "task %lld is cancelled", (long long)t);
  expect_refused(w, TK_OP_RETRY, t, "b", TK_ESTATE, want);
  expect_refused(w, TK_OP_RESOLVE, t, "b", TK_ESTATE, want);

  int64_t done = submit(w, "one");
  c[0] = claim_one(w->s, "A");
  o = success_of(&c[0], "A", T(6000));
  record_ok(w->s, &o);
  snprintf(want, sizeof want, "task %lld is already complete", (long long)done);
  expect_refused(w, TK_OP_CANCEL, done, NULL, TK_ESTATE, want);

  /* A task in error can be cancelled; its failed step keeps its error. */
  int64_t failed = submit(w, "one");
  c[0] = claim_one(w->s, "A");
  o = error_of(&c[0], "A", T(6000));
  record_ok(w->s, &o);
  must(tk_task_operate(w->s, TK_OP_CANCEL, failed, NULL, T(6000), &ts, &err), &err,
       "cancel a failed task");
  assert_string_equal(ts, TK__TASK_CANCELLED);
  expect_states(w, failed, TK__TASK_CANCELLED, "s", TK__STEP_ERROR, NULL);
  expect_refused(w, TK_OP_CANCEL, failed + 1000, NULL, TK_ENOENT, NULL);
}

/* ------------------------------------------------------------------ */
/* Batch items                                                         */
/* ------------------------------------------------------------------ */

/* The batch step's items as items_load gives them (free_items after). */
static void load_items(tk_store *s, int64_t step_id, tk__batch_load *b) {
  tk_err err;
  must(s->ops->items_load(s, step_id, b, &err), &err, "items_load");
}

/* Free what load_items loaded. */
static void free_items(tk__batch_load *b) {
  free(b->items);
  free(b->text);
}

/* Assert a batch step's counts and its pending items as "key/attempts"
 * joined by spaces, in submission order. */
static void expect_items(tk_store *s, int64_t step_id, int64_t acked, int64_t gave_up,
                         const char *pending) {
  tk__batch_load b;
  load_items(s, step_id, &b);
  text t = {0};
  add(&t, "%s", "");
  for (int64_t i = 0; i < b.npending; i++)
    add(&t, "%s%s/%d", i ? " " : "", b.items[i].key, (int)b.items[i].attempts);
  char got[512];
  snprintf(got, sizeof got, "acked %lld, gave up %lld, total %lld, pending: %s",
           (long long)b.acked, (long long)b.gave_up, (long long)b.total, t.s);
  char want[512];
  snprintf(want, sizeof want, "acked %lld, gave up %lld, total %lld, pending: %s",
           (long long)acked, (long long)gave_up, (long long)(acked + gave_up + b.npending),
           pending);
  free(t.s);
  free_items(&b);
  assert_string_equal(got, want);
}

/* Items are loaded in submission order with their settings; a checkpoint
 * and an outcome write item results only under the claim that holds the
 * step, and only to items still pending. */
static void batch_items(world *w) {
  add_template(w, bulk_toml);
  add_template(w, one_toml);
  int existed;
  int64_t t = submit_on(w, w->s, "bulk", "{\"items\": [\"a\", {\"key\": \"b\", \"n\": 2}, \"c\", \"d\"]}",
                        NULL, T(0), &existed);
  tk__claimed c = claim_one(w->s, "A");
  assert_int_equal(c.task_id, t);
  tk__batch_load b;
  load_items(w->s, c.step_id, &b);
  assert_int_equal(b.max_in_call_retries, 1);
  assert_int_equal(b.max_item_attempts, 2);
  assert_int_equal(b.fail_if_any_gave_up, 0);
  assert_int_equal(b.total, 4);
  assert_int_equal(b.npending, 4);
  for (int i = 0; i < 4; i++) assert_int_equal(b.items[i].seq, i);
  assert_null(b.items[0].data);
  json_t *data = json_loads(b.items[1].data, 0, NULL);
  assert_non_null(data);
  assert_string_equal(json_string_value(json_object_get(data, "key")), "b");
  assert_int_equal(json_integer_value(json_object_get(data, "n")), 2);
  json_decref(data);
  free_items(&b);
  expect_items(w->s, c.step_id, 0, 0, "a/0 b/0 c/0 d/0");

  /* A step that is not a batch step has no items. */
  int64_t plain = submit(w, "one");
  tk__task_report r;
  report_on(w->s, plain, &r);
  tk_err err;
  assert_int_equal(w->s->ops->items_load(w->s, step_named(&r, "s")->id, &b, &err), TK_ENOENT);
  tk__task_report_free(&r);

  /* Between two calls of one claim. */
  const tk__item_result first[] = {{0, TK__ITEM_ACKED, 1, NULL, "a", 1},
                                   {1, TK__ITEM_PENDING, 1, "busy", "b", 1}};
  must(w->s->ops->items_checkpoint(w->s, c.step_id, c.claim_id, first, 2, &err), &err,
       "checkpoint");
  expect_items(w->s, c.step_id, 1, 0, "b/1 c/0 d/0");
  const tk__item_result stale[] = {{2, TK__ITEM_ACKED, 1, NULL, "c", 1}};
  assert_int_equal(w->s->ops->items_checkpoint(w->s, c.step_id, INT64_C(1) << 50, stale, 1, &err),
                   TK_EFENCED);
  expect_items(w->s, c.step_id, 1, 0, "b/1 c/0 d/0");

  /* With the attempt's outcome: b gives up, c is acked; d is left. */
  w->clock.now_ms = T(100);
  const tk__item_result second[] = {{1, TK__ITEM_GAVE_UP, 1, "gone", "b", 2},
                                    {2, TK__ITEM_ACKED, 1, NULL, "c", 1}};
  tk__outcome o = retry_of(&c, "A", T(100), T(200));
  o.items = second;
  o.nitems = 2;
  record_ok(w->s, &o);
  expect_items(w->s, c.step_id, 2, 1, "d/0");
  report_on(w->s, t, &r);
  const tk__step_rec *s = step_named(&r, "send");
  assert_int_equal(s->batch, 1);
  assert_int_equal(s->items_pending, 1);
  assert_int_equal(s->items_acked, 2);
  assert_int_equal(s->items_gave_up, 1);
  assert_int_equal(r.ngave_up, 1);
  assert_string_equal(r.gave_up[0].key, "b");
  assert_int_equal(r.gave_up[0].attempts, 2);
  assert_string_equal(r.gave_up[0].last_error, "gone");
  tk__task_report_free(&r);

  /* A fenced outcome writes none of its items. */
  const tk__item_result late[] = {{3, TK__ITEM_ACKED, 1, NULL, "d", 1}};
  o = success_of(&c, "A", T(150));
  o.items = late;
  o.nitems = 1;
  tk__effects fx;
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);
  expect_items(w->s, c.step_id, 2, 1, "d/0");

  /* The next attempt: an acked item never changes again. */
  w->clock.now_ms = T(200);
  tk__claimed c2 = claim_one(w->s, "A");
  assert_int_equal(c2.step_id, c.step_id);
  const tk__item_result again[] = {{0, TK__ITEM_GAVE_UP, 1, "late", "a", 2}};
  must(w->s->ops->items_checkpoint(w->s, c2.step_id, c2.claim_id, again, 1, &err), &err,
       "checkpoint on an acked item");
  expect_items(w->s, c.step_id, 2, 1, "d/0");
  o = success_of(&c2, "A", T(200));
  o.items = late;
  o.nitems = 1;
  assert_string_equal(record_ok(w->s, &o).task_state, TK__TASK_COMPLETE);
  expect_items(w->s, c.step_id, 3, 1, "");
}

/* ------------------------------------------------------------------ */
/* Lists over the whole store (store ops v6)                           */
/* ------------------------------------------------------------------ */

/* The rows of task_list for q on s (free with tk__task_rows_free). */
static tk__task_row *task_rows(tk_store *s, const tk__task_query *q, int *n) {
  tk__task_row *rows;
  tk_err err;
  must(s->ops->task_list(s, q, &rows, n, &err), &err, "task list");
  return rows;
}

/* The ids of rows as text (" 5 4 3") into buf. */
static const char *ids_text(char *buf, size_t cap, const int64_t *ids, int n) {
  buf[0] = '\0';
  for (int i = 0; i < n; i++)
    snprintf(buf + strlen(buf), cap - strlen(buf), " %lld", (long long)ids[i]);
  return buf;
}

/* Assert that q lists exactly the n task ids that follow, in that order,
 * and (without a cursor) that task_count counts as many. */
static void expect_tasks(world *w, tk__task_query q, int n, ...) {
  if (q.limit == 0) q.limit = 100;
  int got;
  tk__task_row *rows = task_rows(w->s, &q, &got);
  int64_t want[32], have[100];
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) want[i] = va_arg(ap, int64_t);
  va_end(ap);
  for (int i = 0; i < got && i < 100; i++) have[i] = rows[i].id;
  tk__task_rows_free(rows, got);
  char a[512], b[512];
  ids_text(a, sizeof a, have, got);
  ids_text(b, sizeof b, want, n);
  if (strcmp(a, b) != 0) fail_msg("tasks listed:%s; expected:%s", a, b);
  if (q.before == 0) {
    int64_t count = -1;
    tk_err err;
    must(w->s->ops->task_count(w->s, &q, &count, &err), &err, "task count");
    if (count != n) fail_msg("task_count %lld; listed:%s", (long long)count, a);
  }
}

/* The step rows of step_list (free with tk__step_rows_free). */
static tk__step_row *step_rows(tk_store *s, const char *state, const tk__task_query *q, int *n) {
  tk__step_row *rows;
  tk_err err;
  must(s->ops->step_list(s, state, q, &rows, n, &err), &err, "step list");
  return rows;
}

/* Claim the next ready step, which must be of task t, and end it with
 * `error`: waiting for a retry at run_at (next TK__NEXT_RETRY) or in error. */
static tk__claimed fail_step(world *w, int64_t t, tk__next_state next, const char *error,
                             int64_t run_at) {
  tk__claimed c = claim_one(w->s, "A");
  assert_int_equal(c.task_id, t);
  tk__outcome o = next == TK__NEXT_RETRY ? retry_of(&c, "A", w->clock.now_ms, run_at)
                                         : error_of(&c, "A", w->clock.now_ms);
  o.error = error;
  record_ok(w->s, &o);
  return c;
}

static const char ops_one_toml[] =
    "name = \"one\"\nnamespace = \"ops\"\nversion = \"1\"\n" STEP("s");
static const char one_v2_toml[] = "name = \"one\"\nversion = \"2\"\n" STEP("s");

/* Tasks by state, template (any version; a bare name in any namespace),
 * creation time and text in a step's last error, each alone and combined,
 * newest first; and what each row holds. Error text is literal and
 * case-sensitive: % and _ match only themselves. */
static void lists_filter_tasks(world *w) {
  add_template(w, one_toml);
  add_template(w, chain_toml);
  add_template(w, one_v2_toml);
  int existed;
  int64_t t1 = submit_on(w, w->s, "one", NULL, NULL, T(0), &existed); /* v2: the newest */
  int64_t t2 = submit_on(w, w->s, "chain", NULL, NULL, T(100), &existed);
  tk_submit_request v1 = {.template_name = "one", .version = "1"};
  int64_t t3 = 0;
  tk_err err;
  must(tk_task_submit(w->s, w->cfg, &v1, T(200), &t3, &existed, &err), &err, "submit v1");
  add_template(w, ops_one_toml); /* "one" is in two namespaces from here */
  int64_t t4 = submit_on(w, w->s, "ops/one", NULL, "ops-4", T(300), &existed);
  int64_t t5 = submit_on(w, w->s, "default/one", NULL, NULL, T(400), &existed);

  /* Claims take the oldest task first: t1 fails for good, t2 runs, t3
   * fails with wildcards in its error, t4 completes, t5 waits for a retry. */
  w->clock.now_ms = T(1000);
  fail_step(w, t1, TK__NEXT_ERROR, "it broke for good", 0);
  tk__claimed c2 = claim_one(w->s, "A");
  assert_int_equal(c2.task_id, t2);
  fail_step(w, t3, TK__NEXT_ERROR, "50% off_x", 0);
  tk__claimed c4 = claim_one(w->s, "A");
  assert_int_equal(c4.task_id, t4);
  tk__outcome ok = success_of(&c4, "A", T(1000));
  record_ok(w->s, &ok);
  fail_step(w, t5, TK__NEXT_RETRY, "timeout_x", T(5000));

  tk__task_query q = {0};
  expect_tasks(w, q, 5, t5, t4, t3, t2, t1);
  q.state = TK__TASK_ERROR;
  expect_tasks(w, q, 2, t3, t1);
  q.state = TK__TASK_IN_PROGRESS;
  expect_tasks(w, q, 2, t5, t2);
  q.state = TK__TASK_COMPLETE;
  expect_tasks(w, q, 1, t4);
  q.state = TK__TASK_PENDING;
  expect_tasks(w, q, 0);
  q = (tk__task_query){.name = "one"};
  expect_tasks(w, q, 4, t5, t4, t3, t1);
  q.ns = "default";
  expect_tasks(w, q, 3, t5, t3, t1);
  q.ns = "ops";
  expect_tasks(w, q, 1, t4);
  q = (tk__task_query){.name = "chain"};
  expect_tasks(w, q, 1, t2);
  q.name = "nothing";
  expect_tasks(w, q, 0);
  q = (tk__task_query){.created_since = T(200)};
  expect_tasks(w, q, 3, t5, t4, t3);
  q.created_since = T(401);
  expect_tasks(w, q, 0);
  q = (tk__task_query){.error_text = "50%"};
  expect_tasks(w, q, 1, t3);
  q.error_text = "%";
  expect_tasks(w, q, 1, t3);
  q.error_text = "_";
  expect_tasks(w, q, 2, t5, t3);
  q.error_text = "5_%"; /* as a LIKE pattern it would match "50% off_x" */
  expect_tasks(w, q, 0);
  q.error_text = "IT BROKE";
  expect_tasks(w, q, 0);
  q.error_text = "it broke";
  expect_tasks(w, q, 1, t1);
  q = (tk__task_query){.state = TK__TASK_ERROR, .name = "one", .created_since = T(100),
                       .error_text = "%"};
  expect_tasks(w, q, 1, t3);
  q = (tk__task_query){.state = TK__TASK_IN_PROGRESS, .name = "one"};
  expect_tasks(w, q, 1, t5);
  q = (tk__task_query){.state = TK__TASK_ERROR, .ns = "ops", .name = "one"};
  expect_tasks(w, q, 0);
  q = (tk__task_query){.task_id = t3};
  expect_tasks(w, q, 1, t3);
  q = (tk__task_query){.before = t4};
  expect_tasks(w, q, 3, t3, t2, t1);
  q.limit = 2;
  expect_tasks(w, q, 2, t3, t2);
  q = (tk__task_query){.before = t4, .name = "one", .limit = 1};
  expect_tasks(w, q, 1, t3);

  /* What a row holds. */
  q = (tk__task_query){.limit = 10};
  int n;
  tk__task_row *rows = task_rows(w->s, &q, &n);
  assert_int_equal(n, 5);
  const tk__task_row *r5 = &rows[0], *r4 = &rows[1], *r3 = &rows[2], *r2 = &rows[3];
  assert_string_equal(r5->state, TK__TASK_IN_PROGRESS);
  assert_string_equal(r5->namespace_, "default");
  assert_string_equal(r5->name, "one");
  assert_string_equal(r5->version, "2");
  assert_null(r5->identity);
  assert_int_equal(r5->created_at, T(400));
  assert_int_equal(r5->finished_at, TK__NONE);
  assert_int_equal(r5->steps_total, 1);
  assert_string_equal(r5->last_error, "timeout_x");
  assert_int_equal(r5->next_run_at, T(5000));
  assert_string_equal(r4->namespace_, "ops");
  assert_string_equal(r4->identity, "ops-4");
  assert_int_equal(r4->finished_at, T(1000));
  assert_int_equal(r4->steps_done, 1);
  assert_null(r4->last_error);
  assert_int_equal(r4->next_run_at, TK__NONE);
  assert_string_equal(r3->version, "1");
  assert_string_equal(r3->last_error, "50% off_x");
  assert_int_equal(r3->steps_error, 1);
  assert_string_equal(r2->name, "chain");
  assert_int_equal(r2->steps_total, 2);
  assert_null(r2->last_error);
  tk__task_rows_free(rows, n);
}

/* A task's last_error is its most recent one, whichever step it was. */
static void lists_most_recent_error(world *w) {
  add_template(w, four_toml);
  int64_t t = submit(w, "four");
  tk__claimed c[3];
  assert_int_equal(claim(w->s, "A", 3, c), 3); /* a, b, c */
  w->clock.now_ms = T(10);
  tk__outcome o = retry_of(&c[0], "A", T(10), T(20));
  o.error = "a first";
  record_ok(w->s, &o);
  tk__task_query q = {.limit = 1};
  int n;
  tk__task_row *rows = task_rows(w->s, &q, &n);
  assert_string_equal(rows[0].last_error, "a first");
  assert_int_equal(rows[0].next_run_at, T(20));
  tk__task_rows_free(rows, n);
  o = retry_of(&c[1], "A", T(10), T(30));
  o.error = "b second";
  record_ok(w->s, &o);
  rows = task_rows(w->s, &q, &n);
  /* b's claim came after a's in the same claim: its error is the newer. */
  assert_string_equal(rows[0].last_error, "b second");
  tk__task_rows_free(rows, n);
  w->clock.now_ms = T(20);
  tk__claimed again = claim_one(w->s, "A"); /* a's retry: the newest claim */
  assert_int_equal(again.step_id, c[0].step_id);
  o = retry_of(&again, "A", T(20), T(40));
  o.error = "a third";
  record_ok(w->s, &o);
  w->clock.now_ms = T(30);
  tk__claimed b2 = claim_one(w->s, "A");
  assert_int_equal(b2.step_id, c[1].step_id);
  o = error_of(&b2, "A", T(30));
  o.error = "b fourth";
  record_ok(w->s, &o);
  rows = task_rows(w->s, &q, &n);
  assert_int_equal(rows[0].id, t);
  assert_string_equal(rows[0].last_error, "b fourth");
  assert_int_equal(rows[0].next_run_at, T(40));
  tk__task_rows_free(rows, n);
}

/* Page through q (limit per page) calling between(w, page) after each
 * page; the ids seen, in order, into ids (*n). */
static void page_all(world *w, tk__task_query q, int limit, void (*between)(world *, int),
                     int64_t *ids, int *n) {
  *n = 0;
  q.limit = limit;
  for (int page = 0; page < 20; page++) {
    int got;
    tk__task_row *rows = task_rows(w->s, &q, &got);
    for (int i = 0; i < got; i++) ids[(*n)++] = rows[i].id;
    if (got > 0) q.before = rows[got - 1].id;
    tk__task_rows_free(rows, got);
    if (got < limit) return;
    if (between) between(w, page);
  }
  fail_msg("more than 20 pages");
}

/* Between pages: complete the oldest ready step, cancel a task, submit a
 * new one (newer than every cursor: it is on no later page). */
static void change_states(world *w, int page) {
  w->clock.now_ms += 10;
  tk__claimed c = claim_one(w->s, "A");
  tk__outcome o = page % 2 ? error_of(&c, "A", w->clock.now_ms)
                           : success_of(&c, "A", w->clock.now_ms);
  record_ok(w->s, &o);
  tk_err err;
  /* Refused when that task is finished already. */
  int rc = tk_task_operate(w->s, TK_OP_CANCEL, c.task_id + 1, NULL, w->clock.now_ms, NULL, &err);
  if (rc != 0 && rc != TK_ESTATE) must(rc, &err, "cancel");
  submit(w, page % 2 ? "one" : "four");
}

/* A cursor stays valid while tasks change state: the pages of a list never
 * repeat or skip a task that matched throughout (the whole list, by
 * template over two versions, and the steps in error). */
static void lists_pages_while_states_change(world *w) {
  add_template(w, one_toml);
  add_template(w, four_toml);
  int64_t t[12];
  for (int i = 0; i < 12; i++) {
    w->clock.now_ms = T(i);
    t[i] = submit(w, i % 3 ? "one" : "four");
  }
  int64_t ids[64];
  int n;
  page_all(w, (tk__task_query){0}, 5, change_states, ids, &n);
  char a[512], b[512];
  int64_t want[12];
  for (int i = 0; i < 12; i++) want[i] = t[11 - i];
  assert_string_equal(ids_text(a, sizeof a, ids, n), ids_text(b, sizeof b, want, 12));

  /* "one" names one template here; a second version makes it two ranges
   * merged: the tasks of both, in one order. */
  add_template(w, one_v2_toml);
  int64_t newer[4];
  for (int i = 0; i < 4; i++) newer[i] = submit(w, "one");
  int64_t ones[32];
  int nones = 0;
  for (int i = 3; i >= 0; i--) ones[nones++] = newer[i];
  tk__task_query all = {.limit = 64};
  int got;
  tk__task_row *rows = task_rows(w->s, &all, &got);
  for (int i = 0; i < got; i++)
    if (strcmp(rows[i].name, "one") == 0 && rows[i].id < newer[0]) ones[nones++] = rows[i].id;
  tk__task_rows_free(rows, got);
  page_all(w, (tk__task_query){.name = "one"}, 3, change_states, ids, &n);
  assert_string_equal(ids_text(a, sizeof a, ids, n), ids_text(b, sizeof b, ones, nones));

  /* Steps in error, two a page, while others fail and one seen is retried. */
  tk__task_query q = {.limit = 100};
  tk__step_row *steps = step_rows(w->s, TK__STEP_ERROR, &q, &got);
  assert_true(got >= 2);
  int64_t step_ids[64], seen[64];
  int nsteps = got, nseen = 0;
  for (int i = 0; i < got; i++) {
    step_ids[i] = steps[i].id;
    assert_true(i == 0 || steps[i].task_id <= steps[i - 1].task_id);
  }
  int64_t first_task = steps[0].task_id;
  char first_name[32];
  snprintf(first_name, sizeof first_name, "%s", steps[0].name);
  tk__step_rows_free(steps, got);
  q.limit = 2;
  for (int page = 0; page < 40; page++) {
    steps = step_rows(w->s, TK__STEP_ERROR, &q, &got);
    for (int i = 0; i < got; i++) seen[nseen++] = steps[i].id;
    if (got > 0) q.before = steps[got - 1].id;
    tk__step_rows_free(steps, got);
    if (got < 2) break;
    if (page == 0) {
      tk_err err;
      must(tk_task_operate(w->s, TK_OP_RETRY, first_task, first_name, w->clock.now_ms, NULL,
                           &err),
           &err, "retry");
    }
    change_states(w, 1); /* a newer step fails */
  }
  assert_string_equal(ids_text(a, sizeof a, seen, nseen), ids_text(b, sizeof b, step_ids, nsteps));
}

/* Steps in a state, with the task filters; what a step row holds. */
static void lists_steps(world *w) {
  add_template(w, one_toml);
  add_template(w, chain_toml);
  int64_t t1 = submit(w, "one");
  int64_t t2 = submit(w, "chain");
  int64_t t3 = submit(w, "one");
  w->clock.now_ms = T(100);
  fail_step(w, t1, TK__NEXT_ERROR, "boom", 0); /* max_attempts 5: a permanent failure */
  tk__claimed a = claim_one(w->s, "A");
  assert_int_equal(a.task_id, t2);
  tk__claimed s3 = claim_one(w->s, "A");
  assert_int_equal(s3.task_id, t3);
  w->clock.now_ms = T(200);
  tk__outcome o = retry_of(&s3, "A", T(200), T(300));
  record_ok(w->s, &o);

  tk__task_query q = {.limit = 10};
  int n;
  tk__step_row *rows = step_rows(w->s, TK__STEP_ERROR, &q, &n);
  assert_int_equal(n, 1);
  assert_int_equal(rows[0].task_id, t1);
  assert_string_equal(rows[0].name, "s");
  assert_string_equal(rows[0].state, TK__STEP_ERROR);
  assert_int_equal(rows[0].attempts, 1);
  assert_int_equal(rows[0].max_attempts, 5);
  assert_int_equal(rows[0].retryable, 1);
  assert_string_equal(rows[0].last_error, "boom");
  assert_string_equal(rows[0].namespace_, "default");
  assert_string_equal(rows[0].template_name, "one");
  assert_string_equal(rows[0].version, "1");
  assert_int_equal(rows[0].updated_at, T(100));
  tk__step_rows_free(rows, n);
  rows = step_rows(w->s, TK__STEP_WAITING_FOR_RETRY, &q, &n);
  assert_int_equal(n, 1);
  assert_int_equal(rows[0].task_id, t3);
  assert_int_equal(rows[0].updated_at, T(200));
  assert_string_equal(rows[0].last_error, "it broke");
  tk__step_rows_free(rows, n);
  rows = step_rows(w->s, TK__STEP_PENDING, &q, &n); /* chain's b */
  assert_int_equal(n, 1);
  assert_int_equal(rows[0].task_id, t2);
  assert_string_equal(rows[0].name, "b");
  assert_int_equal(rows[0].updated_at, T(0)); /* created */
  tk__step_rows_free(rows, n);
  rows = step_rows(w->s, TK__STEP_IN_PROGRESS, &q, &n);
  assert_int_equal(n, 1);
  assert_string_equal(rows[0].name, "a");
  tk__step_rows_free(rows, n);
  q.name = "chain";
  rows = step_rows(w->s, TK__STEP_ERROR, &q, &n);
  assert_int_equal(n, 0);
  tk__step_rows_free(rows, n);
  q = (tk__task_query){.limit = 10, .error_text = "boo", .state = TK__TASK_ERROR};
  rows = step_rows(w->s, TK__STEP_ERROR, &q, &n);
  assert_int_equal(n, 1);
  tk__step_rows_free(rows, n);
}

/* Each claim writes the run_at it took the step at as the attempt's
 * due_at: a fresh step's, a due retry's, and a retry claimed ahead of its
 * time (whose claimer holds it until then: it starts when it is due). */
static void claims_write_due_at(world *w) {
  add_template(w, one_toml);
  int64_t t = submit(w, "one");
  w->clock.now_ms = T(50);
  tk__claimed c = claim_one(w->s, "A");
  assert_int_equal(c.run_at, T(0));
  tk__outcome o = retry_of(&c, "A", T(60), T(1000));
  record_ok(w->s, &o);
  w->clock.now_ms = T(1200);
  c = claim_one(w->s, "A");
  o = retry_of(&c, "A", T(1210), T(2000));
  record_ok(w->s, &o);
  w->clock.now_ms = T(1600);
  tk__claim_request r = claim_ahead(w->s, "A", 1, 1, 500, &c);
  assert_int_equal(r.n, 1);
  tk__task_report rep;
  report_on(w->s, t, &rep);
  const tk__attempt_rec *a1 = attempt_of(&rep, "s", 1), *a2 = attempt_of(&rep, "s", 2),
                        *a3 = attempt_of(&rep, "s", 3);
  assert_int_equal(a1->started_at, T(50));
  assert_int_equal(a1->due_at, T(0));
  assert_int_equal(a2->started_at, T(1200));
  assert_int_equal(a2->due_at, T(1000));
  assert_int_equal(a3->started_at, T(2000));
  assert_int_equal(a3->due_at, T(2000));
  tk__task_report_free(&rep);
}

/* Attempts by the bucket they started in: finished ones by outcome,
 * retries (a later attempt, or a first one after an operator's retry),
 * and how late retries started after their run_at. */
static void activity_buckets(world *w) {
  add_template(w, one_toml);
  int64_t a = submit(w, "one"), b = submit(w, "one");
  submit(w, "one");
  w->clock.now_ms = T(1000);
  tk__claimed ca = claim_one(w->s, "A"), cb = claim_one(w->s, "A");
  assert_int_equal(ca.task_id, a);
  assert_int_equal(cb.task_id, b);
  tk__outcome o = success_of(&ca, "A", T(1500));
  record_ok(w->s, &o);
  o = retry_of(&cb, "A", T(1200), T(2000));
  record_ok(w->s, &o);
  w->clock.now_ms = T(2500); /* b's retry, 500 ms late */
  cb = claim_one(w->s, "A");
  assert_int_equal(cb.task_id, b);
  o = error_of(&cb, "A", T(2600));
  record_ok(w->s, &o);
  tk_err err;
  must(tk_task_operate(w->s, TK_OP_RETRY, b, "s", T(2700), NULL, &err), &err, "retry");
  w->clock.now_ms = T(2900); /* attempt 1 again, 200 ms late */
  cb = claim_one(w->s, "A");
  assert_int_equal(cb.task_id, b);
  assert_int_equal(cb.attempt, 1);
  o = success_of(&cb, "A", T(2950));
  record_ok(w->s, &o);
  w->clock.now_ms = T(3500); /* the third task starts; unfinished */
  claim_one(w->s, "A");

  tk__activity_bucket bk[5];
  must(w->s->ops->activity(w->s, T(0), 1000, 5, bk, &err), &err, "activity");
  const int64_t want[5][7] = {
      /* start, succeeded, failed, retries, lateness n, sum, max */
      {T(0), 0, 0, 0, 0, 0, 0},
      {T(1000), 1, 1, 0, 0, 0, 0},
      {T(2000), 1, 1, 2, 2, 700, 500},
      {T(3000), 0, 0, 0, 0, 0, 0},
      {T(4000), 0, 0, 0, 0, 0, 0},
  };
  for (int i = 0; i < 5; i++) {
    const int64_t got[7] = {bk[i].start,      bk[i].succeeded,       bk[i].failed,
                            bk[i].retries,    bk[i].lateness_n,      bk[i].lateness_sum_ms,
                            bk[i].lateness_max_ms};
    for (int k = 0; k < 7; k++)
      if (got[k] != want[i][k])
        fail_msg("bucket %d, member %d: %lld, expected %lld", i, k, (long long)got[k],
                 (long long)want[i][k]);
  }
  /* A window that starts mid-way finds its first attempt by binary search. */
  must(w->s->ops->activity(w->s, T(2400), 500, 2, bk, &err), &err, "activity");
  assert_int_equal(bk[0].start, T(2400));
  assert_int_equal(bk[0].retries, 1);
  assert_int_equal(bk[0].failed, 1);
  assert_int_equal(bk[0].lateness_max_ms, 500);
  assert_int_equal(bk[1].start, T(2900));
  assert_int_equal(bk[1].retries, 1);
  assert_int_equal(bk[1].lateness_sum_ms, 200);
  assert_int_equal(bk[1].succeeded, 1);
}

/* Text of 3 characters or more is searched through each backend's
 * trigram index (issue 19), still literal and case-sensitive: % and _,
 * a double quote (FTS5's phrase quote) and a backslash (LIKE's escape)
 * are only themselves; text of fewer characters (here two of 3 bytes
 * each) falls back to a scan and finds the same; and the index follows a
 * step whose error changes, and tasks pruned with their steps. */
static void lists_error_text_indexed(world *w) {
  add_template(w, one_toml);
  int64_t t1 = submit(w, "one"), t2 = submit(w, "one"), t3 = submit(w, "one"),
          t4 = submit(w, "one");
  w->clock.now_ms = T(1000);
  fail_step(w, t1, TK__NEXT_ERROR, "quota 100%_used \"x\" \\ path", 0);
  fail_step(w, t2, TK__NEXT_ERROR, "quota 100x used", 0);
  fail_step(w, t3, TK__NEXT_ERROR, "\xc3\x9c" "n" "\xc3\xaf" "c" "\xc3\xb6" "d" "\xc3\xa9" " \xe2\x82\xac\xe2\x82\xac fail",
            0);
  fail_step(w, t4, TK__NEXT_RETRY, "alpha_old", T(2000));
  tk__task_query q = {.error_text = "100%_used"}; /* as a LIKE pattern: t2 too */
  expect_tasks(w, q, 1, t1);
  q.error_text = "0%_u";
  expect_tasks(w, q, 1, t1);
  q.error_text = "\"x\" \\";
  expect_tasks(w, q, 1, t1);
  q.error_text = "\\ p";
  expect_tasks(w, q, 1, t1);
  q.error_text = "quota 100";
  expect_tasks(w, q, 2, t2, t1);
  q.error_text = "x used";
  expect_tasks(w, q, 1, t2);
  q.error_text = "\xe2\x82\xac\xe2\x82\xac"; /* two characters: scanned */
  expect_tasks(w, q, 1, t3);
  q.error_text = "\xc3\x9cn\xc3\xaf";
  expect_tasks(w, q, 1, t3);
  q.error_text = "\xc3\xbcn\xc3\xaf"; /* lower case */
  expect_tasks(w, q, 0);
  q.error_text = "alpha_old";
  expect_tasks(w, q, 1, t4);
  q.error_text = "used\"";
  expect_tasks(w, q, 0);
  /* t4's retry fails for good with another error: only that one is found. */
  w->clock.now_ms = T(2000);
  fail_step(w, t4, TK__NEXT_ERROR, "beta_new", 0);
  q.error_text = "alpha_old";
  expect_tasks(w, q, 0);
  q.error_text = "beta_new";
  expect_tasks(w, q, 1, t4);
  q = (tk__task_query){.error_text = "quota", .state = TK__TASK_ERROR};
  expect_tasks(w, q, 2, t2, t1);
  /* Pruned: gone from the index with its step. */
  tk__prune_request r = {.before = {TK__NONE, T(100000), TK__NONE}, .limit = 10};
  tk__prune_counts pc;
  tk_err err;
  must(w->s->ops->prune(w->s, &r, &pc, &err), &err, "prune");
  assert_int_equal(pc.tasks, 4);
  q = (tk__task_query){.error_text = "quota"};
  expect_tasks(w, q, 0);
  /* Two steps of one task match: the task is listed once. */
  add_template(w, four_toml);
  int64_t t5 = submit(w, "four"), t6 = submit(w, "one");
  w->clock.now_ms = T(3000);
  fail_step(w, t5, TK__NEXT_RETRY, "disk full_1", T(90000));
  fail_step(w, t5, TK__NEXT_RETRY, "disk full_2", T(90000));
  claim_one(w->s, "A"); /* t5's c */
  fail_step(w, t6, TK__NEXT_RETRY, "disk full_3", T(90000));
  q.error_text = "disk full_";
  expect_tasks(w, q, 2, t6, t5);
  q.limit = 1; /* the page after t6: t5, once */
  q.before = t6;
  expect_tasks(w, q, 1, t5);
  q = (tk__task_query){.error_text = "full_2"};
  expect_tasks(w, q, 1, t5);
}

/* The activity of n buckets of bucket_ms from since, as 7 numbers each
 * (start, succeeded, failed, retries, lateness n, sum, max). */
static void activity_rows(world *w, int64_t since, int64_t bucket_ms, int n, int64_t (*out)[7]) {
  tk__activity_bucket bk[16];
  tk_err err;
  assert_true(n <= 16);
  must(w->s->ops->activity(w->s, since, bucket_ms, n, bk, &err), &err, "activity");
  for (int i = 0; i < n; i++) {
    const int64_t row[7] = {bk[i].start,   bk[i].succeeded,  bk[i].failed,
                            bk[i].retries, bk[i].lateness_n, bk[i].lateness_sum_ms,
                            bk[i].lateness_max_ms};
    memcpy(out[i], row, sizeof row);
  }
}

#define M 60000

/* Buckets of whole minutes come from the per-minute counts the claims and
 * outcomes write (issue 19): the same numbers as the attempts give, read
 * as two half-minute buckets each (not whole minutes: counted from the
 * attempts), for every way an attempt ends: success, a retry, an error,
 * a first attempt after an operator's retry, a lease the reaper expired
 * (another owner's row), an outcome fenced out after a cancel, and one
 * still running. A prune removes the counts of the minutes before its
 * earliest cutoff. */
static void activity_minutes_match_attempts(world *w) {
  add_template(w, one_toml);
  int64_t a = submit(w, "one"), b = submit(w, "one"), c = submit(w, "one"),
          d = submit(w, "one"), e = submit(w, "one");
  w->clock.now_ms = T(10000); /* minute 0: a succeeds, b fails once */
  tk__claimed ca = claim_one(w->s, "A"), cb = claim_one(w->s, "A");
  assert_int_equal(ca.task_id, a);
  assert_int_equal(cb.task_id, b);
  tk__outcome o = success_of(&ca, "A", T(20000));
  record_ok(w->s, &o);
  o = retry_of(&cb, "A", T(15000), T(50000));
  record_ok(w->s, &o);
  w->clock.now_ms = T(M + 10000); /* minute 1: b's retry, 20 s late, fails for good */
  cb = claim_one(w->s, "A");
  assert_int_equal(cb.task_id, b);
  o = error_of(&cb, "A", T(M + 15000));
  record_ok(w->s, &o);
  tk_err err;
  must(tk_task_operate(w->s, TK_OP_RETRY, b, "s", T(M + 20000), NULL, &err), &err, "retry");
  w->clock.now_ms = T(2 * M + 10000); /* minute 2: b again at attempt 1; c by B, reaped */
  cb = claim_one(w->s, "A");
  assert_int_equal(cb.task_id, b);
  assert_int_equal(cb.attempt, 1);
  o = success_of(&cb, "A", T(2 * M + 12000));
  record_ok(w->s, &o);
  tk__claimed cc = claim_one(w->s, "B");
  assert_int_equal(cc.task_id, c);
  tk__expired x[2];
  w->clock.now_ms = T(2 * M + 10000 + LEASE_MS);
  assert_int_equal(expired_at(w->s, w->clock.now_ms, x, 2), 1);
  o = expired_of(&x[0], w->clock.now_ms, T(9 * M));
  record_ok(w->s, &o);
  w->clock.now_ms = T(3 * M + 5000); /* minute 3: d, cancelled while it runs: fenced out */
  tk__claimed cd = claim_one(w->s, "A");
  assert_int_equal(cd.task_id, d);
  must(tk_task_operate(w->s, TK_OP_CANCEL, d, NULL, T(3 * M + 6000), NULL, &err), &err,
       "cancel");
  o = success_of(&cd, "A", T(3 * M + 7000));
  tk__effects fx;
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);
  w->clock.now_ms = T(4 * M + 30000); /* minute 4: e starts and is still running */
  assert_int_equal(claim_one(w->s, "A").task_id, e);

  int64_t minutes[6][7], halves[12][7];
  activity_rows(w, T(0), M, 6, minutes);
  activity_rows(w, T(0), M / 2, 12, halves);
  for (int i = 0; i < 6; i++) {
    const int64_t *h0 = halves[2 * i], *h1 = halves[2 * i + 1];
    const int64_t want[7] = {h0[0],         h0[1] + h1[1], h0[2] + h1[2], h0[3] + h1[3],
                             h0[4] + h1[4], h0[5] + h1[5], h0[6] > h1[6] ? h0[6] : h1[6]};
    for (int k = 0; k < 7; k++)
      if (minutes[i][k] != want[k])
        fail_msg("minute %d, member %d: %lld from the counts, %lld from the attempts", i, k,
                 (long long)minutes[i][k], (long long)want[k]);
  }
  const int64_t want[6][7] = {
      /* start, succeeded, failed, retries, lateness n, sum, max */
      {T(0), 1, 1, 0, 0, 0, 0},
      {T(M), 0, 1, 1, 1, 20000, 20000},
      /* b's run_at after the operator's retry is when it was retried */
      {T(2 * M), 1, 1, 1, 1, 2 * M + 10000 - (M + 20000), M - 10000},
      {T(3 * M), 0, 1, 0, 0, 0, 0},
      {T(4 * M), 0, 0, 0, 0, 0, 0},
      {T(5 * M), 0, 0, 0, 0, 0, 0},
  };
  for (int i = 0; i < 6; i++)
    for (int k = 0; k < 7; k++)
      if (minutes[i][k] != want[i][k])
        fail_msg("minute %d, member %d: %lld, expected %lld", i, k, (long long)minutes[i][k],
                 (long long)want[i][k]);
  /* Two minutes a bucket: summed on read. */
  int64_t pairs[3][7];
  activity_rows(w, T(0), 2 * M, 3, pairs);
  assert_int_equal(pairs[0][2], 2);
  assert_int_equal(pairs[1][1], 1);
  assert_int_equal(pairs[1][2], 2);
  assert_int_equal(pairs[1][6], M - 10000);

  /* A prune with its earliest cutoff in minute 2 removes minutes 0 and 1. */
  tk__prune_request r = {.before = {T(2 * M + 30000), TK__NONE, TK__NONE}, .limit = 10};
  tk__prune_counts pc;
  must(w->s->ops->prune(w->s, &r, &pc, &err), &err, "prune");
  activity_rows(w, T(0), M, 6, minutes);
  for (int i = 0; i < 6; i++)
    for (int k = 1; k < 7; k++)
      if (minutes[i][k] != (i < 2 ? 0 : want[i][k]))
        fail_msg("after the prune, minute %d, member %d: %lld", i, k, (long long)minutes[i][k]);
}
#undef M

/* ------------------------------------------------------------------ */
/* Upgrades                                                            */
/* ------------------------------------------------------------------ */

/* Fail naming the schema version the store was populated at. */
#define AT_VERSION(v, rc, what, err)                                                        \
  do {                                                                                      \
    int rc_ = (rc);                                                                         \
    if (rc_ != 0) fail_msg("from schema version %d: %s: %s (%s)", (v), (what), (err).msg,  \
                           tk_err_name(rc_));                                               \
  } while (0)

/* The number of the backend's migration called `name`; 0 if none. */
static int migration_number(const world *w, const char *name) {
  for (const tk__migration *m = w->be->migrations; m && m->number != 0; m++)
    if (strcmp(m->name, name) == 0) return m->number;
  return 0;
}

/* How many of the backend's migrations are numbered from..to: their
 * numbers may skip one (a branch that has not merged it yet). */
static int migrations_between(const world *w, int from, int to) {
  int n = 0;
  for (const tk__migration *m = w->be->migrations; m && m->number != 0; m++)
    n += m->number >= from && m->number <= to;
  return n;
}

/* A store migrated to version v only, populated through the public API and
 * the ops that work at that version (a template, a task, and a claimed
 * step that failed once and then completed, where claims work there), then
 * migrated to `latest`: what it held is still there, and it works. The
 * failed attempt's delay source was written as "budget", which before the
 * migration delay_source_in_call meant a batch step's in-call retries ran
 * out: upgrading through it renames it "in_call"; from a version after it
 * "budget" is a retry budget's and stays. */
static void upgrade_from(world *w, int v, int latest) {
  char url[1024];
  new_store(w, url, sizeof url);
  tk_store *s = open_store(w, url);
  tk_err err;
  int applied = -1, version = -1;
  AT_VERSION(v, tk_store_migrate_to(s, v, &applied, &version, &err), "migrate", err);
  assert_int_equal(applied, migrations_between(w, 1, v));
  assert_int_equal(version, v);
  AT_VERSION(v, tk_store_schema_version(s, &version, &err), "schema version", err);
  assert_int_equal(version, v);

  char path[512], name[32];
  snprintf(name, sizeof name, "upgrade%d.toml", v);
  efx_write(w->dir, name, chain_toml, path, sizeof path);
  tk_template_info info;
  AT_VERSION(v, tk_template_add_file(s, w->cfg, path, T(0), &info, &err), "add a template", err);
  tk_submit_request req = {.template_name = "chain", .context_json = "{\"kept\":true}",
                           .identity = "kept"};
  int64_t task = 0;
  int existed = -1;
  AT_VERSION(v, tk_task_submit(s, w->cfg, &req, T(0), &task, &existed, &err), "submit", err);
  /* A claim needs what the newest schema gives it (an index, a column):
   * where it cannot claim, this version is populated without one, and
   * says so. A claim that fails must leave the store as it was. */
  tk__claimed c;
  tk__claim_request r = {.owner = "old", .lease_ms = LEASE_MS, .limit = 1, .fresh_limit = 1,
                         .out = &c};
  int claimed = s->ops->record(s, NULL, 0, NULL, NULL, &r, &err) == 0;
  tk__effects fx;
  if (claimed) {
    if (r.n != 1) fail_msg("from schema version %d: the claim took %d steps, not 1", v, r.n);
    tk__outcome o = retry_of(&c, "old", T(0), T(0));
    o.source = TK_DELAY_BUDGET;
    AT_VERSION(v, record1(s, &o, &fx, &err), "record a retry", err);
    r.n = 0;
    AT_VERSION(v, s->ops->record(s, NULL, 0, NULL, NULL, &r, &err), "claim the retry", err);
    if (r.n != 1) fail_msg("from schema version %d: the retry's claim took %d steps", v, r.n);
    o = success_of(&c, "old", T(10));
    AT_VERSION(v, record1(s, &o, &fx, &err), "record", err);
  } else {
    print_message("# %s: at schema version %d a claim fails (%s): populated with a template "
                  "and a task only\n", w->be->name, v, err.msg);
  }

  AT_VERSION(v, tk_store_migrate(s, &applied, &version, &err), "migrate to the newest", err);
  assert_int_equal(applied, migrations_between(w, v + 1, latest));
  assert_int_equal(version, latest);

  tk__template_rec tmpl;
  AT_VERSION(v, tk__template_lookup(s, "chain", NULL, &tmpl, &err), "template lookup", err);
  assert_int_equal(tmpl.id, info.id);
  tk__template_rec_free(&tmpl);
  tk__task_report rep;
  AT_VERSION(v, s->ops->task_report(s, task, &rep, &err), "task report", err);
  assert_string_equal(rep.identity, "kept");
  expect_contains(rep.context, "\"kept\"");
  if (claimed) {
    assert_string_equal(step_named(&rep, "a")->state, TK__STEP_COMPLETE);
    assert_string_equal(attempt_of(&rep, "a", 1)->outcome, "failure");
    int renamed = migration_number(w, "delay_source_in_call");
    assert_true(renamed > 0);
    assert_string_equal(attempt_of(&rep, "a", 1)->delay_source,
                        v < renamed ? "in_call" : "budget");
    assert_string_equal(attempt_of(&rep, "a", 2)->outcome, "success");
    assert_string_equal(attempt_of(&rep, "a", 2)->owner, "old");
    assert_string_equal(step_named(&rep, "b")->state, TK__STEP_PENDING);
    assert_int_equal(step_named(&rep, "b")->parents_remaining, 0);
  } else {
    assert_string_equal(rep.state, TK__TASK_PENDING);
    assert_string_equal(step_named(&rep, "a")->state, TK__STEP_PENDING);
    assert_int_equal(rep.nattempts, 0);
  }
  tk__task_report_free(&rep);

  /* It works: the task's steps left to run run, the identity holds, new
   * tasks go in and are claimed. */
  w->clock.now_ms = T(20);
  for (int idx = claimed ? 1 : 0; idx < 2; idx++) {
    r = (tk__claim_request){.owner = "new", .lease_ms = LEASE_MS, .limit = 1, .fresh_limit = 1,
                            .out = &c};
    AT_VERSION(v, s->ops->record(s, NULL, 0, NULL, NULL, &r, &err), "claim after upgrading",
               err);
    assert_int_equal(r.n, 1);
    assert_int_equal(c.task_id, task);
    assert_int_equal(c.idx, idx);
    tk__outcome o = success_of(&c, "new", T(20));
    AT_VERSION(v, record1(s, &o, &fx, &err), "record after upgrading", err);
  }
  assert_string_equal(fx.task_state, TK__TASK_COMPLETE);
  int64_t same = 0;
  AT_VERSION(v, tk_task_submit(s, w->cfg, &req, T(20), &same, &existed, &err), "submit again",
             err);
  assert_int_equal(existed, 1);
  assert_int_equal(same, task);
  req.identity = NULL;
  AT_VERSION(v, tk_task_submit(s, w->cfg, &req, T(20), &same, &existed, &err), "submit", err);
  assert_int_equal(claim(s, "new", 4, &c), 1);
  assert_int_equal(c.task_id, same);

  /* The lists read the upgraded store; claims made since write due_at,
   * earlier ones have none. */
  tk__task_query all = {.limit = 10};
  int n;
  tk__task_row *rows = task_rows(s, &all, &n);
  assert_int_equal(n, 2);
  assert_int_equal(rows[0].id, same);
  assert_int_equal(rows[1].id, task);
  assert_string_equal(rows[1].name, "chain");
  assert_string_equal(rows[1].state, TK__TASK_COMPLETE);
  tk__task_rows_free(rows, n);
  AT_VERSION(v, s->ops->task_report(s, task, &rep, &err), "task report", err);
  /* b became ready when a completed: at T(10) before the upgrade, else T(20). */
  assert_int_equal(attempt_of(&rep, "b", 1)->due_at, claimed ? T(10) : T(20));
  /* (the column came with the lists' migration; claims since write it) */
  if (claimed && v < migration_number(w, "lists"))
    assert_int_equal(attempt_of(&rep, "a", 1)->due_at, TK__NONE);
  tk__task_report_free(&rep);
  close_store(w, s);
}

/* Every older schema version of the backend upgrades with its data. */
static void upgrade_from_every_older_version(world *w) {
  tk_err err;
  int applied = -1, latest = 0, version = 0;
  must(tk_store_schema_version(w->s, &version, &err), &err, "schema version");
  assert_int_equal(version, 0); /* the case's store starts empty */
  must(tk_store_migrate(w->s, &applied, &latest, &err), &err, "migrate");
  assert_true(latest >= 1);
  assert_int_equal(applied, migrations_between(w, 1, latest));
  must(tk_store_migrate(w->s, &applied, &version, &err), &err, "migrate again");
  assert_int_equal(applied, 0);
  assert_int_equal(version, latest);
  for (const tk__migration *m = w->be->migrations; m && m->number != 0; m++)
    if (m->number < latest) upgrade_from(w, m->number, latest);
}

/* ------------------------------------------------------------------ */
/* Schedules (DESIGN §16, include/tasker/schedule.h)                   */
/* ------------------------------------------------------------------ */

/* The identities of every task whose identity starts with prefix, oldest
 * task first, one per line (read through task_list). Malloc'd. */
static char *identities(world *w, const char *prefix) {
  tk__task_query q = {.limit = 10000};
  tk__task_row *rows = NULL;
  int n = 0;
  tk_err err;
  must(w->s->ops->task_list(w->s, &q, &rows, &n, &err), &err, "task list");
  size_t cap = 64 * (size_t)n + 1, len = 0;
  char *out = calloc(1, cap);
  for (int i = n - 1; i >= 0; i--)
    if (rows[i].identity && strncmp(rows[i].identity, prefix, strlen(prefix)) == 0)
      len += (size_t)snprintf(out + len, cap - len, "%s\n", rows[i].identity);
  tk__task_rows_free(rows, n);
  return out;
}

/* How many lines text has. */
static int lines_in(const char *text) {
  int n = 0;
  for (const char *p = text; *p; p++) n += *p == '\n';
  return n;
}

/* Add schedule name (cron, missed) of template "one" at now. */
static void add_schedule(world *w, const char *name, const char *cron, const char *zone,
                         tk_schedule_missed missed) {
  tk_schedule_def d = {.name = name, .cron = cron, .zone = zone, .template_name = "one",
                       .context_json = "{\"from\":\"schedule\"}", .missed = missed};
  tk_err err;
  must(tk_schedule_add(w->s, w->cfg, &d, w->clock.now_ms, &err), &err, "add schedule");
}

/* The store's schedules as one line each: name|cron|zone|template|missed|source. */
static char *schedules_text(world *w) {
  tk__schedule_rec *r = NULL;
  int n = 0;
  tk_err err;
  must(w->s->ops->schedule_list(w->s, NULL, &r, &n, &err), &err, "list schedules");
  char *out = calloc(1, 4096);
  size_t len = 0;
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(out + len, 4096 - len, "%s|%s|%s|%s|%s|%s\n", r[i].name, r[i].cron,
                            r[i].zone ? r[i].zone : "-", r[i].template_name, r[i].missed,
                            r[i].source);
  tk__schedule_recs_free(r, n);
  return out;
}

/* Stored and configured schedules share one namespace: a taken name is
 * refused (nothing stored), a configured one cannot be removed by name,
 * and a sync that meets a stored name changes nothing. */
static void schedules_put_list_remove(world *w) {
  add_template(w, one_toml);
  tk_err err;
  add_schedule(w, "nightly", "0 2 * * *", "Europe/Berlin", TK_MISSED_SKIP);
  add_schedule(w, "hourly", "@hourly", NULL, TK_MISSED_CATCH_UP);
  char *before = schedules_text(w);
  assert_string_equal(before, "hourly|@hourly|-|one|catch_up|cli\n"
                              "nightly|0 2 * * *|Europe/Berlin|one|skip|cli\n");
  tk_schedule_def dup = {.name = "nightly", .cron = "* * * * *", .template_name = "one"};
  assert_int_equal(tk_schedule_add(w->s, w->cfg, &dup, T(0), &err), TK_EEXIST);
  tk_schedule_def bad = {.name = "other", .cron = "* * * * *", .template_name = "missing"};
  assert_int_equal(tk_schedule_add(w->s, w->cfg, &bad, T(0), &err), TK_ENOENT);
  char *after = schedules_text(w);
  assert_string_equal(after, before);
  free(after);

  /* A configuration that defines "nightly" too: the sync is refused whole. */
  tk_config *cfg;
  const char *sets[] = {"schedules.nightly.cron=\"5 * * * *\"",
                        "schedules.nightly.template=\"one\"", "schedules.extra.cron=\"@daily\"",
                        "schedules.extra.template=\"one\""};
  tk_config_source src = {NULL, NULL, NULL, sets, 4};
  must(tk_config_load(&src, &cfg, &err), &err, "configuration");
  assert_int_equal(tk_schedule_sync(w->s, cfg, T(0), &err), TK_EEXIST);
  after = schedules_text(w);
  assert_string_equal(after, before);
  free(after);

  /* Without the conflict the configured ones are synced; a second sync
   * with fewer removes what is no longer configured. */
  must(tk_schedule_remove(w->s, "nightly", &err), &err, "remove");
  must(tk_schedule_sync(w->s, cfg, T(0), &err), &err, "sync");
  after = schedules_text(w);
  assert_string_equal(after, "extra|@daily|-|one|skip|config\n"
                             "hourly|@hourly|-|one|catch_up|cli\n"
                             "nightly|5 * * * *|-|one|skip|config\n");
  free(after);
  assert_int_equal(tk_schedule_remove(w->s, "extra", &err), TK_ESTATE);
  assert_int_equal(tk_schedule_remove(w->s, "gone", &err), TK_ENOENT);
  tk_config_free(cfg);
  tk_config *none;
  tk_config_source empty = {NULL, NULL, NULL, NULL, 0};
  must(tk_config_load(&empty, &none, &err), &err, "configuration");
  must(tk_schedule_sync(w->s, none, T(0), &err), &err, "sync");
  after = schedules_text(w);
  assert_string_equal(after, "hourly|@hourly|-|one|catch_up|cli\n");
  free(after);
  tk_config_free(none);
  free(before);
}

/* A progress step whose cursor is stale (another orchestrator moved it
 * on) is refused whole: no task, however its identity is spelled. */
static void schedules_stale_cursor_fires_nothing(world *w) {
  add_template(w, one_toml);
  add_schedule(w, "q", "*/15 * * * *", NULL, TK_MISSED_SKIP);
  tk__schedule_rec *r = NULL;
  int n = 0;
  tk_err err;
  must(w->s->ops->schedule_list(w->s, "q", &r, &n, &err), &err, "list");
  int64_t read = r[0].cursor;
  tk__schedule_recs_free(r, n);
  w->clock.now_ms = T(15 * 60000);
  tk_schedule_pass p;
  must(tk_schedule_fire_due(w->s, w->cfg, w->clock.now_ms, NULL, NULL, &p, &err), &err, "fire");
  assert_int_equal(p.fired, 1);
  /* What an orchestrator that read the schedule before would write. */
  tk__new_task t = {.template_id = 1, .context = "{}", .identity = "schedule:q:stale",
                    .now = w->clock.now_ms};
  tk__schedule_step st = {.name = "q", .expected = read, .cursor = T(15 * 60000), .task = &t,
                          .slot = T(15 * 60000)};
  assert_int_equal(w->s->ops->schedule_fire(w->s, &st, &err), TK_ESTATE);
  char *ids = identities(w, "schedule:");
  assert_string_equal(ids, "schedule:q:2026-01-01T00:15:00Z\n");
  free(ids);
}

#define ORCHESTRATORS 3

typedef struct ticker {
  tk_engine *e;
  pthread_barrier_t *go;
  char error[512];
} ticker;

/* One engine pass, started with the others at once. */
static void *tick_at_once(void *arg) {
  ticker *k = arg;
  tk_err err;
  int64_t due;
  pthread_barrier_wait(k->go);
  if (tk_engine_tick(k->e, &due, &err) != 0) snprintf(k->error, sizeof k->error, "%s", err.msg);
  return NULL;
}

/* Three orchestrators (engines on their own connections) step through six
 * hours of a quarter-hour schedule, each pass of all three started at
 * once at every slot and between slots: each slot's task exists once. */
static void schedules_fire_once_per_slot(world *w) {
  add_template(w, one_toml);
  add_schedule(w, "q", "*/15 * * * *", NULL, TK_MISSED_SKIP);
  tk_engine *e[ORCHESTRATORS];
  ticker k[ORCHESTRATORS];
  for (int i = 0; i < ORCHESTRATORS; i++) {
    char id[24];
    snprintf(id, sizeof id, "orch-%d", i + 1);
    tk_engine_options o = {.store = open_store(w, w->url), .config = w->cfg,
                           .clock = tk_clock_manual(&w->clock), .seed = 7, .id = id};
    tk_err err;
    must(tk_engine_new(&o, &e[i], &err), &err, "engine");
    k[i] = (ticker){.e = e[i]};
  }
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, ORCHESTRATORS);
  for (int64_t m = 0; m <= 6 * 60; m += 5) {
    w->clock.now_ms = T(m * 60000);
    pthread_t th[ORCHESTRATORS];
    for (int i = 0; i < ORCHESTRATORS; i++) {
      k[i].go = &go;
      pthread_create(&th[i], NULL, tick_at_once, &k[i]);
    }
    for (int i = 0; i < ORCHESTRATORS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < ORCHESTRATORS; i++)
      if (k[i].error[0]) fail_msg("orch-%d at minute %lld: %s", i + 1, (long long)m, k[i].error);
  }
  pthread_barrier_destroy(&go);
  for (int i = 0; i < ORCHESTRATORS; i++) tk_engine_free(e[i]);
  char *ids = identities(w, "schedule:q:");
  assert_int_equal(lines_in(ids), 24); /* 00:15 ... 06:00 */
  char want[4096] = "";
  for (int s = 1; s <= 24; s++) {
    char line[64];
    snprintf(line, sizeof line, "schedule:q:2026-01-01T%02d:%02d:00Z\n", s * 15 / 60,
             s * 15 % 60);
    strcat(want, line);
  }
  assert_string_equal(ids, want);
  free(ids);
  assert_int_equal(tasks_in(w, TK__TASK_COMPLETE), 24);
}

/* ------------------------------------------------------------------ */
/* Delayed starts and retention (DESIGN §16)                           */
/* ------------------------------------------------------------------ */

/* Submit a task of `name` now whose root steps start at start_at. */
static int64_t submit_at(world *w, const char *name, const char *context, int64_t start_at) {
  tk_submit_request req = {.template_name = name, .context_json = context,
                           .start_at = start_at};
  int64_t id = 0;
  int existed = 0;
  tk_err err;
  must(tk_task_submit(w->s, w->cfg, &req, w->clock.now_ms, &id, &existed, &err), &err,
       "submit with a start time");
  return id;
}

/* The store's next ready time (next_due's ready_at). */
static int64_t next_ready(world *w) {
  int64_t ready = 0;
  tk_err err;
  must(w->s->ops->next_due(w->s, &ready, NULL, &err), &err, "next due");
  return ready;
}

/* A delayed task's root steps are claimed at their start and not before,
 * after the work already ready, and next_due says when. */
static void delayed_start_claimed_at_its_time(world *w) {
  add_template(w, chain_toml);
  int64_t later = submit_at(w, "chain", NULL, T(1000));
  int64_t now_task = submit(w, "chain");
  assert_int_equal(next_ready(w), T(0)); /* now_task's a is due */
  tk__claimed c[4];
  assert_int_equal(claim(w->s, "A", 4, c), 1);
  assert_int_equal(c[0].task_id, now_task);
  assert_int_equal(next_ready(w), T(1000));
  tk__task_report r;
  report_on(w->s, later, &r);
  assert_string_equal(r.state, TK__TASK_PENDING);
  assert_string_equal(step_named(&r, "a")->state, TK__STEP_PENDING);
  assert_int_equal(step_named(&r, "a")->run_at, T(1000));
  tk__task_report_free(&r);
  w->clock.now_ms = T(999);
  assert_int_equal(claim(w->s, "A", 4, c), 0);
  w->clock.now_ms = T(1000);
  assert_int_equal(claim(w->s, "A", 4, c), 1);
  assert_int_equal(c[0].task_id, later);
  assert_int_equal(c[0].idx, 0);
  assert_int_equal(c[0].run_at, T(1000)); /* due at its start: no lateness */
  assert_string_equal(c[0].prev_state, TK__STEP_PENDING);
  assert_true(c[0].task_was_pending);
  assert_int_equal(next_ready(w), INT64_MAX);
  /* From then on it is an ordinary task: its child follows. */
  w->clock.now_ms = T(1001);
  tk__outcome o = success_of(&c[0], "A", T(1001));
  assert_int_equal(record_ok(w->s, &o).children_released, 1);
  assert_int_equal(claim(w->s, "A", 4, c), 1);
  assert_int_equal(c[0].task_id, later);
  assert_int_equal(c[0].idx, 1);
  expect_states(w, later, TK__TASK_IN_PROGRESS, "a", TK__STEP_COMPLETE, "b",
                TK__STEP_IN_PROGRESS, NULL);
  /* A start in the past (or now) is no delay. */
  int64_t past = submit_at(w, "chain", NULL, T(5));
  assert_int_equal(claim(w->s, "A", 4, c), 1);
  assert_int_equal(c[0].task_id, past);
}

/* Tasks delayed to later do not stand in front of ready work, come due
 * earliest start first, and a cancelled one never starts. */
static void delayed_backlog_and_cancel(world *w) {
  add_template(w, four_toml); /* a, b, c roots; d after a */
  int64_t late[20];
  for (int i = 0; i < 20; i++) late[i] = submit_at(w, "four", NULL, T(5000 - i));
  int64_t ready = submit(w, "four");
  tk__claimed c[8];
  assert_int_equal(claim(w->s, "A", 8, c), 3);
  for (int i = 0; i < 3; i++) assert_int_equal(c[i].task_id, ready);
  const char *state;
  tk_err err;
  must(tk_task_operate(w->s, TK_OP_CANCEL, late[19], NULL, T(1), &state, &err), &err, "cancel");
  assert_int_equal(next_ready(w) >= T(4981), 1);
  w->clock.now_ms = T(4982); /* late[19] (T(4981), cancelled) and late[18] are due */
  int n = claim(w->s, "A", 8, c);
  assert_int_equal(n, 3); /* the three roots of late[18] */
  for (int i = 0; i < n; i++) assert_int_equal(c[i].task_id, late[18]);
  expect_states(w, late[19], TK__TASK_CANCELLED, "a", TK__STEP_CANCELLED, NULL);
  /* Once due a delayed task is fresh work: which of the due ones a claim
   * takes first is the backend's order, but only due ones. */
  w->clock.now_ms = T(4990); /* late[17] .. late[10] are due, 3 roots each */
  tk__claimed many[64];
  for (int got = 0; got < 24; got += n) {
    n = claim(w->s, "A", 64, many);
    assert_true(n > 0);
    for (int i = 0; i < n; i++) {
      int k = 0;
      while (k < 20 && late[k] != many[i].task_id) k++;
      assert_true(k >= 10 && k <= 17);
    }
  }
  assert_int_equal(claim(w->s, "A", 64, many), 0);
}

/* The rows a prune of these tasks must count, from their reports. */
static tk__prune_counts rows_of(world *w, const int64_t *ids, int n) {
  tk__prune_counts c = {0};
  for (int i = 0; i < n; i++) {
    tk__task_report r;
    report_on(w->s, ids[i], &r);
    c.tasks++;
    c.steps += r.nsteps;
    c.attempts += r.nattempts;
    c.transitions += r.ntransitions;
    for (int k = 0; k < r.nsteps; k++)
      c.items += r.steps[k].items_pending + r.steps[k].items_acked + r.steps[k].items_gave_up;
    tk__task_report_free(&r);
  }
  return c;
}

static void expect_counts(tk__prune_counts got, tk__prune_counts want) {
  assert_int_equal(got.tasks, want.tasks);
  assert_int_equal(got.steps, want.steps);
  assert_int_equal(got.attempts, want.attempts);
  assert_int_equal(got.transitions, want.transitions);
  assert_int_equal(got.items, want.items);
}

static tk__prune_counts prune(world *w, int64_t complete, int64_t error, int64_t cancelled,
                              int limit, int dry_run) {
  tk__prune_request r = {.before = {complete, error, cancelled}, .limit = limit,
                         .dry_run = dry_run};
  tk__prune_counts c;
  tk_err err;
  must(w->s->ops->prune(w->s, &r, &c, &err), &err, "prune");
  return c;
}

static int task_exists(world *w, int64_t id) {
  tk__task_report r;
  tk_err err;
  int rc = w->s->ops->task_report(w->s, id, &r, &err);
  if (rc == 0) tk__task_report_free(&r);
  else assert_int_equal(rc, TK_ENOENT);
  return rc == 0;
}

/* Pruning removes finished tasks (complete, error, cancelled) finished
 * before their state's cutoff, with every row they own, counted exactly;
 * unfinished tasks and their rows stay as they were. */
static void prune_finished_tasks_only(world *w) {
  add_template(w, chain_toml);
  add_template(w, bulk_toml);
  tk__claimed c[2];
  /* done: complete at T(10) */
  int64_t done = submit(w, "chain");
  c[0] = claim_one(w->s, "A");
  w->clock.now_ms = T(5);
  tk__outcome o = success_of(&c[0], "A", T(5));
  record_ok(w->s, &o);
  c[0] = claim_one(w->s, "A");
  w->clock.now_ms = T(10);
  o = success_of(&c[0], "A", T(10));
  record_ok(w->s, &o);
  /* failed: error at T(20) */
  int64_t failed = submit(w, "chain");
  c[0] = claim_one(w->s, "A");
  w->clock.now_ms = T(20);
  o = error_of(&c[0], "A", T(20));
  record_ok(w->s, &o);
  /* gone: a batch task with items, cancelled at T(30) */
  w->clock.now_ms = T(30);
  int existed;
  int64_t gone = submit_on(w, w->s, "bulk", "{\"items\": [\"x\", \"y\", \"z\"]}", NULL, T(30),
                           &existed);
  const char *state;
  tk_err err;
  must(tk_task_operate(w->s, TK_OP_CANCEL, gone, NULL, T(30), &state, &err), &err, "cancel");
  /* Unfinished: one running, one pending, one delayed, one in error
   * reopened by an operator's retry. */
  int64_t running = submit(w, "chain");
  c[0] = claim_one(w->s, "A");
  int64_t pending = submit(w, "chain");
  int64_t delayed = submit_at(w, "chain", NULL, T(100000));
  int64_t reopened = submit(w, "chain");
  tk__claimed r0[4];
  int n = claim(w->s, "A", 4, r0);
  assert_int_equal(n, 2); /* pending's a and reopened's a */
  o = error_of(&r0[1], "A", T(31));
  assert_int_equal(r0[1].task_id, reopened);
  record_ok(w->s, &o);
  must(tk_task_operate(w->s, TK_OP_RETRY, reopened, "a", T(32), &state, &err), &err, "retry");
  w->clock.now_ms = T(40);
  int64_t unfinished[] = {running, pending, delayed, reopened};
  char *before[4];
  for (int i = 0; i < 4; i++) before[i] = task_text(w, unfinished[i]);

  /* A dry run counts exactly and changes nothing. */
  int64_t early[] = {done, failed};
  expect_counts(prune(w, T(25), T(25), T(25), 0, 1), rows_of(w, early, 2));
  int64_t all[] = {done, failed, gone};
  tk__prune_counts want_all = rows_of(w, all, 3);
  assert_true(want_all.items == 3);
  expect_counts(prune(w, T(1000), T(1000), T(1000), 0, 1), want_all);
  assert_true(task_exists(w, done) && task_exists(w, failed) && task_exists(w, gone));
  /* A cutoff is per state: complete only, one at most. */
  int64_t only_done[] = {done};
  tk__prune_counts want_done = rows_of(w, only_done, 1);
  expect_counts(prune(w, T(11), TK__NONE, TK__NONE, 1, 0), want_done);
  assert_false(task_exists(w, done));
  assert_true(task_exists(w, failed));
  /* Finished at the cutoff itself is not before it. */
  expect_counts(prune(w, TK__NONE, T(20), T(30), 10, 0), (tk__prune_counts){0});
  int64_t rest[] = {failed, gone};
  tk__prune_counts want_rest = rows_of(w, rest, 2);
  expect_counts(prune(w, T(1000), T(1000), T(1000), 10, 0), want_rest);
  assert_false(task_exists(w, failed));
  assert_false(task_exists(w, gone));
  expect_counts(prune(w, T(1000), T(1000), T(1000), 10, 0), (tk__prune_counts){0});
  for (int i = 0; i < 4; i++) expect_unchanged(w, unfinished[i], before[i]);
  assert_int_equal(tasks_in(w, TK__TASK_COMPLETE) + tasks_in(w, TK__TASK_ERROR) +
                       tasks_in(w, TK__TASK_CANCELLED),
                   0);
  /* The store still works: the unfinished tasks go on. */
  w->clock.now_ms = T(100000);
  assert_int_equal(claim(w->s, "A", 4, r0), 2); /* reopened's retry, delayed's a */
}

#define PRUNED_TASKS 30

typedef struct pruner {
  tk_store *s;
  pthread_barrier_t *go;
  int64_t tasks, rows;
  char error[TK_ERR_MSG_MAX + 64];
} pruner;

/* The pruner thread: batches of 4 until a batch finds none. */
static void *prune_until_none(void *arg) {
  pruner *p = arg;
  pthread_barrier_wait(p->go);
  for (int round = 0; round < 1000; round++) {
    tk__prune_request r = {.before = {T(1000), T(1000), T(1000)}, .limit = 4};
    tk__prune_counts c;
    tk_err err;
    if (p->s->ops->prune(p->s, &r, &c, &err) != 0) {
      snprintf(p->error, sizeof p->error, "prune: %s", err.msg);
      return NULL;
    }
    p->tasks += c.tasks;
    p->rows += c.steps + c.attempts + c.transitions;
    if (c.tasks == 0) return NULL;
  }
  snprintf(p->error, sizeof p->error, "still pruning after 1000 batches");
  return NULL;
}

/* Two connections pruning at once remove each task once, counted once,
 * without waiting on each other for ever. */
static void prune_from_two_connections(world *w) {
  add_template(w, one_toml);
  int64_t ids[PRUNED_TASKS];
  for (int i = 0; i < PRUNED_TASKS; i++) {
    ids[i] = submit(w, "one");
    const char *state;
    tk_err err;
    must(tk_task_operate(w->s, TK_OP_CANCEL, ids[i], NULL, T(1), &state, &err), &err, "cancel");
  }
  tk__prune_counts want = rows_of(w, ids, PRUNED_TASKS);
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, 2);
  pruner p[2] = {{.s = w->s, .go = &go}, {.s = open_store(w, w->url), .go = &go}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, prune_until_none, &p[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&go);
  for (int i = 0; i < 2; i++)
    if (p[i].error[0]) fail_msg("%s", p[i].error);
  assert_int_equal(p[0].tasks + p[1].tasks, PRUNED_TASKS);
  assert_int_equal(p[0].rows + p[1].rows, want.steps + want.attempts + want.transitions);
  assert_int_equal(tasks_in(w, TK__TASK_CANCELLED), 0);
}

/* The store's size on disk is reported and grows with what it holds. */
static void store_size(world *w) {
  int64_t a = 0, b = 0;
  tk_err err;
  must(w->s->ops->size(w->s, &a, &err), &err, "size");
  assert_true(a > 0);
  add_template(w, one_toml);
  char pad[128];
  snprintf(pad, sizeof pad, "{\"pad\": \"%096d\"}", 0);
  for (int i = 0; i < 300; i++) submit_on(w, w->s, "one", pad, NULL, T(0), &(int){0});
  must(w->s->ops->size(w->s, &b, &err), &err, "size");
  assert_true(b > a);
}

/* ------------------------------------------------------------------ */
/* Retry budgets: bringing a deferred retry earlier                     */
/* ------------------------------------------------------------------ */

/* retry_earlier on refs v[0..n-1] to run_at: must succeed; the moved
 * flags as a string of 0s and 1s. */
static const char *earlier(world *w, const tk__retry_ref *v, int n, int64_t run_at,
                           char out[16]) {
  int moved[15];
  tk_err err;
  assert_true(n < 16);
  must(w->s->ops->retry_earlier(w->s, v, n, run_at, moved, &err), &err, "retry_earlier");
  for (int i = 0; i < n; i++) out[i] = moved[i] ? '1' : '0';
  out[n] = '\0';
  return out;
}

/* A retry a budget deferred (to T+10000) moves earlier, to the time
 * given, with its attempt row's next_run_at and delay, and nothing else:
 * no attempt spent, no state or transition, the claim that follows is
 * attempt 2, due at the new time. The fence: never a step that does not
 * wait for the retry of that very attempt (cancelled, claimed, failed
 * again since, or another step's attempt), never later than it is. */
static void retry_earlier_moves_only_a_waiting_retry(world *w) {
  add_template(w, one_toml);
  int64_t t[5];
  tk__claimed c[5];
  for (int i = 0; i < 5; i++) t[i] = submit(w, "one");
  for (int i = 0; i < 5; i++) c[i] = claim_one(w->s, "A");
  w->clock.now_ms = T(10);
  for (int i = 0; i < 5; i++) {
    tk__outcome o = retry_of(&c[i], "A", T(10), T(10000));
    o.source = TK_DELAY_BUDGET;
    record_ok(w->s, &o);
  }
  char mv[16];
  tk_err err;
  /* t[1] cancelled; t[2] named with another step's attempt. */
  must(tk_task_operate(w->s, TK_OP_CANCEL, t[1], NULL, T(20), NULL, &err), &err, "cancel");
  char *before[5];
  for (int i = 0; i < 5; i++) before[i] = task_text(w, t[i]);
  tk__retry_ref refs[] = {{c[0].step_id, c[0].claim_id},
                          {c[1].step_id, c[1].claim_id},
                          {c[2].step_id, c[3].claim_id},
                          {c[3].step_id, c[3].claim_id}};
  /* Never later: to T+20000, none moves, all unchanged. */
  assert_string_equal(earlier(w, refs, 4, T(20000), mv), "0000");
  assert_string_equal(earlier(w, refs, 0, T(100), mv), "");
  for (int i = 0; i < 4; i++) {
    char *again = task_text(w, t[i]);
    assert_string_equal(again, before[i]);
    free(again);
  }
  assert_string_equal(earlier(w, refs, 4, T(100), mv), "1001");
  expect_unchanged(w, t[1], before[1]);
  expect_unchanged(w, t[2], before[2]);
  expect_unchanged(w, t[4], before[4]);
  free(before[0]);
  free(before[3]);
  /* The moved ones: run_at and the attempt row's time, nothing else. */
  for (int i = 0; i < 4; i += 3) {
    tk__task_report r;
    report_on(w->s, t[i], &r);
    const tk__step_rec *st = step_named(&r, "s");
    assert_string_equal(st->state, TK__STEP_WAITING_FOR_RETRY);
    assert_int_equal(st->attempts, 1);
    assert_int_equal(st->run_at, T(100));
    const tk__attempt_rec *a = attempt_of(&r, "s", 1);
    assert_int_equal(a->next_run_at, T(100));
    assert_int_equal(a->delay_ms, 90);
    assert_string_equal(a->delay_source, "budget");
    assert_int_equal(r.nattempts, 1);
    tk__task_report_free(&r);
  }
  /* Equal to the run_at it has now: not "earlier", not moved. */
  assert_string_equal(earlier(w, refs, 1, T(100), mv), "0");
  /* Claimed at T+100 as attempt 2, due at T+100: in progress, it does
   * not move, by its old attempt or its new one. */
  w->clock.now_ms = T(100);
  tk__claimed c0 = claim_one(w->s, "A");
  assert_int_equal(c0.step_id, c[0].step_id);
  assert_int_equal(c0.attempt, 2);
  assert_int_equal(c0.run_at, T(100));
  tk__retry_ref now0[] = {{c0.step_id, c[0].claim_id}, {c0.step_id, c0.claim_id}};
  assert_string_equal(earlier(w, now0, 2, T(50), mv), "00");
  /* Failed again, waiting till T+9000: the old attempt does not move it,
   * the new one does. */
  w->clock.now_ms = T(110);
  tk__outcome o = retry_of(&c0, "A", T(110), T(9000));
  record_ok(w->s, &o);
  assert_string_equal(earlier(w, now0, 2, T(120), mv), "01");
  tk__task_report r;
  report_on(w->s, t[0], &r);
  assert_int_equal(step_named(&r, "s")->run_at, T(120));
  assert_int_equal(step_named(&r, "s")->attempts, 2);
  assert_int_equal(attempt_of(&r, "s", 1)->next_run_at, T(100));
  assert_int_equal(attempt_of(&r, "s", 2)->next_run_at, T(120));
  tk__task_report_free(&r);
}

/* ------------------------------------------------------------------ */
/* The table                                                           */
/* ------------------------------------------------------------------ */

/* Every case, run once per backend as "BACKEND: CASE". */
/* ------------------------------------------------------------------ */
/* Decisions, skipping, convergence and map (DESIGN §17)               */
/* ------------------------------------------------------------------ */

/* score -> triage, which decides between approve and review; notify
 * converges after both. */
static const char order_toml[] =
    "name = \"order\"\nversion = \"1\"\n" STEP("score")
    "[[steps]]\nname = \"triage\"\ndepends_on = [\"score\"]\n"
    "handler = { kind = \"builtin\", name = \"noop\" }\n"
    "decides = [\"approve\", \"review\"]\nallow_none = true\n" AFTER("approve", "triage")
        AFTER("review", "triage")
    "[[steps]]\nname = \"notify\"\ndepends_on = [\"approve\", \"review\"]\n"
    "handler = { kind = \"builtin\", name = \"noop\" }\n";

/* A decision whose losing branch heads a chain and a diamond, and a
 * step converging from a skipped and a live branch. */
static const char branches_toml[] =
    "name = \"branches\"\nversion = \"1\"\n"
    "[[steps]]\nname = \"d\"\nhandler = { kind = \"builtin\", name = \"noop\" }\n"
    "decides = [\"a\", \"b\"]\n" AFTER("a", "d") AFTER("b", "d") AFTER("a2", "a")
        AFTER("a3", "a2") AFTER("x", "a") AFTER("y", "a")
    "[[steps]]\nname = \"z\"\ndepends_on = [\"x\", \"y\"]\n"
    "handler = { kind = \"builtin\", name = \"noop\" }\n"
    "[[steps]]\nname = \"j\"\ndepends_on = [\"a3\", \"b\"]\n"
    "handler = { kind = \"builtin\", name = \"noop\" }\n";

/* list -> process (a map over list's files, at most 4, one failure
 * allowed) -> sum. */
static const char fanout_toml[] =
    "name = \"fanout\"\nversion = \"1\"\n" STEP("list")
    "[[steps]]\nname = \"process\"\ndepends_on = [\"list\"]\n"
    "handler = { kind = \"builtin\", name = \"noop\" }\n"
    "map = { over = \"{{parents.list.files}}\", max = 4, max_failures = 1 }\n" AFTER("sum",
                                                                                     "process");

/* count -> chunks (a range map of chunks of 4) -> done. */
static const char range_toml[] =
    "name = \"ranges\"\nversion = \"1\"\n" STEP("count")
    "[[steps]]\nname = \"chunks\"\ndepends_on = [\"count\"]\n"
    "handler = { kind = \"builtin\", name = \"noop\" }\n"
    "map = { range = \"{{parents.count.rows}}\", chunk = 4 }\n" AFTER("done", "chunks");

/* Claim one step and complete it with `results`; the claim. */
static tk__claimed complete_next(world *w, const char *results) {
  tk__claimed c = claim_one(w->s, "A");
  tk__outcome o = success_of(&c, "A", w->clock.now_ms);
  o.results = results;
  record_ok(w->s, &o);
  return c;
}

/* The reason of step `step`'s transition into `to`, or NULL. */
static const char *reason_into(const tk__task_report *r, const char *step, const char *to) {
  int64_t id = step_named(r, step)->id;
  for (int i = 0; i < r->ntransitions; i++)
    if (r->transitions[i].step_id == id && same_str(r->transitions[i].to, to))
      return r->transitions[i].reason;
  return NULL;
}

static void expect_skipped(const tk__task_report *r, const char *step, const char *reason) {
  assert_string_equal(step_named(r, step)->state, TK__STEP_SKIPPED);
  const char *got = reason_into(r, step, TK__STEP_SKIPPED);
  assert_non_null(got);
  assert_string_equal(got, reason);
}

/* Every outcome of a decision: one branch, the other, both, none. */
static void decision_outcomes(world *w) {
  add_template(w, order_toml);
  static const struct {
    const char *choice;
    int approve, review; /* ran */
  } runs[] = {{"{\"branches\": [\"review\"]}", 0, 1},
              {"{\"branches\": [\"approve\"]}", 1, 0},
              {"{\"branches\": [\"approve\", \"review\"]}", 1, 1},
              {"{\"branches\": []}", 0, 0}};
  for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
    int64_t t = submit(w, "order");
    complete_next(w, "{\"risk\": \"high\"}");
    tk__claimed c = claim_one(w->s, "A");
    assert_int_equal(c.task_id, t);
    tk__outcome o = success_of(&c, "A", w->clock.now_ms);
    o.results = runs[k].choice;
    tk__effects fx = record_ok(w->s, &o);
    assert_int_equal(fx.children_released, runs[k].approve + runs[k].review);
    for (int ran = 0; ran < runs[k].approve + runs[k].review; ran++) complete_next(w, "{}");
    tk__task_report r;
    report_on(w->s, t, &r);
    if (!runs[k].approve) expect_skipped(&r, "approve", "not chosen by triage");
    if (!runs[k].review) expect_skipped(&r, "review", "not chosen by triage");
    tk__task_report_free(&r);
    if (runs[k].approve || runs[k].review) {
      /* notify converges: one parent ran, the other may be skipped. */
      tk__claimed n = claim_one(w->s, "A");
      assert_int_equal(n.task_id, t);
      assert_int_equal(n.idx, 4);
      o = success_of(&n, "A", w->clock.now_ms);
      assert_string_equal(record_ok(w->s, &o).task_state, TK__TASK_COMPLETE);
    }
    report_on(w->s, t, &r);
    if (!runs[k].approve && !runs[k].review) expect_skipped(&r, "notify", "all parents skipped");
    assert_string_equal(r.state, TK__TASK_COMPLETE);
    assert_int_equal(r.steps_done, 5);
    assert_int_equal(r.steps_total, 5);
    tk__task_report_free(&r);
    tk__claimed none;
    assert_int_equal(claim(w->s, "A", 1, &none), 0);
  }
}

/* A skip goes down a chain and a diamond; a step with a skipped and a
 * live parent runs. */
static void skips_propagate(world *w) {
  add_template(w, branches_toml);
  int64_t t = submit(w, "branches");
  tk__claimed c = complete_next(w, "{\"branches\": [\"b\"]}");
  assert_int_equal(c.task_id, t);
  tk__task_report r;
  report_on(w->s, t, &r);
  expect_skipped(&r, "a", "not chosen by d");
  expect_skipped(&r, "a2", "all parents skipped");
  expect_skipped(&r, "a3", "all parents skipped");
  expect_skipped(&r, "x", "all parents skipped");
  expect_skipped(&r, "y", "all parents skipped");
  expect_skipped(&r, "z", "all parents skipped");
  assert_string_equal(step_named(&r, "j")->state, TK__STEP_PENDING);
  assert_int_equal(r.steps_done, 7);
  tk__task_report_free(&r);
  tk__claimed b = complete_next(w, "{}");
  assert_string_equal(b.prev_state, TK__STEP_PENDING);
  tk__claimed j = claim_one(w->s, "A");
  tk__outcome o = success_of(&j, "A", w->clock.now_ms);
  assert_string_equal(record_ok(w->s, &o).task_state, TK__TASK_COMPLETE);
  expect_states(w, t, TK__TASK_COMPLETE, "b", TK__STEP_COMPLETE, "j", TK__STEP_COMPLETE, NULL);
}

/* Resolving a decision makes no choice: its branches are skipped, and
 * what converges after them too. */
static void resolve_decision_skips_branches(world *w) {
  add_template(w, order_toml);
  int64_t t = submit(w, "order");
  complete_next(w, "{}");
  const char *ts = "unset";
  tk_err err;
  must(tk_task_operate(w->s, TK_OP_RESOLVE, t, "triage", w->clock.now_ms, &ts, &err), &err,
       "resolve a decision");
  assert_string_equal(ts, TK__TASK_COMPLETE);
  tk__task_report r;
  report_on(w->s, t, &r);
  assert_string_equal(step_named(&r, "triage")->state, TK__STEP_RESOLVED);
  expect_skipped(&r, "approve", "not chosen by triage");
  expect_skipped(&r, "review", "not chosen by triage");
  expect_skipped(&r, "notify", "all parents skipped");
  tk__task_report_free(&r);
}

/* The input of claimed step c as the `inputs` op reads it, dumped with
 * jansson's flags. */
static char *input_dumped(world *w, const tk__claimed *c, size_t flags) {
  json_t *in;
  tk_err err;
  must(w->s->ops->inputs(w->s, &c->step_id, 1, &in, &err), &err, "inputs");
  char *text = json_dumps(in, flags);
  json_decref(in);
  return text;
}

/* The input of claimed step c. */
static char *input_of(world *w, const tk__claimed *c) { return input_dumped(w, c, JSON_SORT_KEYS); }

/* a -> (b, c) -> d: a step with one parent and one with two. */
static const char diamond_toml[] = "name = \"diamond\"\nversion = \"1\"\n" STEP("a")
    AFTER("b", "a") AFTER("c", "a") STEP("d") "depends_on = [\"b\", \"c\"]\n";

/* Claim up to limit steps as "A" with their inputs, but for the template
 * steps in no_input (sorted tk__step_key values). */
static int claim_with_inputs(world *w, int limit, const int64_t *no_input, int nno_input,
                             tk__claimed *out) {
  tk__claim_request r = {.owner = "A", .lease_ms = LEASE_MS, .limit = limit,
                         .fresh_limit = limit, .out = out, .want_inputs = 1,
                         .no_input = no_input, .nno_input = nno_input};
  tk_err err;
  must(w->s->ops->record(w->s, NULL, 0, NULL, NULL, &r, &err), &err, "claim with inputs");
  return r.n;
}

/* The input of step c as the `inputs` op reads it, as the engine hands it
 * to a handler (compact JSON text). */
static char *input_text_of(world *w, const tk__claimed *c) {
  return input_dumped(w, c, JSON_COMPACT);
}

/* Issue 22: a claim brings each step's handler input, the very text the
 * `inputs` op reads for it: the context, the parents' results (one
 * parent, two, a map's results in element order) and a map instance's
 * element; none for the template steps the claim is told take none, nor
 * when it is not asked for inputs. */
static void claim_brings_inputs(world *w) {
  add_template(w, diamond_toml);
  add_template(w, fanout_toml);
  int existed;
  submit_on(w, w->s, "diamond", "{\"order\": 42, \"who\": \"caf\\u00e9 \\\"q\\\"\", \"l\": [1, 2.5, null]}",
            NULL, T(0), &existed);
  submit_on(w, w->s, "fanout", "{\"n\": 1}", NULL, T(0), &existed);
  int checked = 0, items = 0, two_parents = 0;
  int64_t diamond = 0;
  tk__claimed c[8];
  for (int round = 0, n; round < 20 && (n = claim_with_inputs(w, 8, NULL, 0, c)) > 0; round++) {
    for (int i = 0; i < n; i++) {
      if (c[i].input == NULL) fail_msg("step %lld claimed without its input", (long long)c[i].step_id);
      char *want = input_text_of(w, &c[i]);
      assert_string_equal(c[i].input, want);
      json_t *in = json_loads(want, 0, NULL);
      items += json_object_get(in, "item") != NULL;
      two_parents += json_object_size(json_object_get(in, "parents")) == 2;
      int of_diamond = json_object_get(json_object_get(in, "context"), "order") != NULL;
      if (of_diamond) diamond = c[i].template_id;
      json_decref(in);
      free(want);
      checked++;
      tk__outcome o = success_of(&c[i], "A", w->clock.now_ms);
      char results[160];
      snprintf(results, sizeof results,
               c[i].idx == 0 && !of_diamond
                   ? "{\"files\": [\"a.txt\", {\"n\": 2}, 3]}"
                   : "{\"step\": %lld, \"\\u00fc\": \"\\\"x\\\\y\", \"r\": 1.5, \"i\": %d}",
               (long long)c[i].step_id, c[i].item_index);
      o.results = results;
      record_ok(w->s, &o);
    }
    tk__claimed_inputs_free(c, n);
  }
  /* diamond: a, b, c, d; fanout: list, 3 instances, sum */
  assert_int_equal(checked, 9);
  assert_int_equal(items, 3);
  assert_int_equal(two_parents, 1);

  /* Told that diamond's "a" takes none: no input for it, but for its
   * children; and none at all when not asked for. */
  submit_on(w, w->s, "diamond", "{\"order\": 7}", NULL, T(0), &existed);
  int64_t no_a = tk__step_key(diamond, 0);
  assert_int_equal(claim_with_inputs(w, 8, &no_a, 1, c), 1);
  assert_null(c[0].input);
  tk__outcome o = success_of(&c[0], "A", w->clock.now_ms);
  record_ok(w->s, &o);
  assert_int_equal(claim_with_inputs(w, 1, &no_a, 1, c), 1);
  char *want = input_text_of(w, &c[0]);
  assert_non_null(c[0].input);
  assert_string_equal(c[0].input, want);
  free(want);
  tk__claimed_inputs_free(c, 1);
  tk__claimed plain = claim_one(w->s, "A");
  assert_null(plain.input);
}

/* A map: one instance per element, each a step of its own that sees its
 * element; the children get every result in element order. */
static void map_runs_instances(world *w) {
  add_template(w, fanout_toml);
  int64_t t = submit(w, "fanout");
  tk__claimed list = claim_one(w->s, "A");
  tk__outcome o = success_of(&list, "A", w->clock.now_ms);
  o.results = "{\"files\": [\"a.txt\", {\"n\": 2}, 3]}";
  assert_int_equal(record_ok(w->s, &o).children_released, 3);
  tk__task_report r;
  report_on(w->s, t, &r);
  const tk__step_rec *p = step_named(&r, "process");
  assert_string_equal(p->state, TK__STEP_MAPPED);
  assert_int_equal(p->instances_total, 3);
  assert_int_equal(p->instances_waiting, 3);
  assert_int_equal(r.nsteps, 3); /* instances are not the template's steps */
  assert_string_equal(reason_into(&r, "process", TK__STEP_MAPPED), "mapped into 3 instances");
  tk__task_report_free(&r);
  tk__claimed c[4];
  assert_int_equal(claim(w->s, "A", 4, c), 3);
  const char *items[3] = {"\"a.txt\"", "{\"n\": 2}", "3"};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(c[i].idx, 1); /* the map step's handler runs */
    assert_int_equal(c[i].item_index, i);
    char want[256], *got = input_of(w, &c[i]);
    snprintf(want, sizeof want,
             "{\"context\": {}, \"item\": %s, \"item_index\": %d, \"parents\": {\"list\": "
             "{\"files\": [\"a.txt\", {\"n\": 2}, 3]}}}",
             items[i], i);
    expect_json(got, want);
    free(got);
  }
  /* Finished out of order; one fails, within max_failures. */
  static const char *res[3] = {"{\"i\": 0}", NULL, "{\"i\": 2}"};
  int order[3] = {2, 1, 0};
  for (int k = 0; k < 3; k++) {
    int i = order[k];
    o = res[i] ? success_of(&c[i], "A", w->clock.now_ms) : error_of(&c[i], "A", w->clock.now_ms);
    if (res[i]) o.results = res[i];
    tk__effects fx = record_ok(w->s, &o);
    assert_int_equal(fx.children_released, k == 2);
  }
  report_on(w->s, t, &r);
  p = step_named(&r, "process");
  assert_string_equal(p->state, TK__STEP_COMPLETE);
  expect_json(p->results, "[{\"i\": 0}, null, {\"i\": 2}]");
  /* The task's history is its template steps': instances are paged. */
  for (int i = 0; i < r.ntransitions; i++)
    if (r.transitions[i].step != NULL && strchr(r.transitions[i].step, '[') != NULL)
      fail_msg("an instance's move in the task's history: %s", r.transitions[i].step);
  for (int i = 0; i < r.nattempts; i++)
    if (step_name_of(&r, r.attempts[i].step_id)[0] == '?')
      fail_msg("an instance's attempt in the task's history");
  assert_int_equal(p->instances_done, 2);
  assert_int_equal(p->instances_failed, 1);
  assert_int_equal(r.steps_done, 2);
  assert_int_equal(r.steps_error, 0);
  tk__task_report_free(&r);
  tk__claimed sum = claim_one(w->s, "A");
  assert_int_equal(sum.idx, 2);
  char *got = input_of(w, &sum);
  expect_json(got, "{\"context\": {}, \"parents\": {\"process\": [{\"i\": 0}, null, {\"i\": 2}]}}");
  free(got);
  o = success_of(&sum, "A", w->clock.now_ms);
  assert_string_equal(record_ok(w->s, &o).task_state, TK__TASK_COMPLETE);

  /* The instances page by page, in element order. */
  tk__step_rec *rows;
  int n;
  int64_t total;
  tk_err err;
  must(w->s->ops->instance_list(w->s, t, 1, 0, 5, &rows, &n, &total, &err), &err, "instances");
  assert_int_equal(total, 3);
  assert_int_equal(n, 2);
  assert_int_equal(rows[0].item_index, 1);
  assert_string_equal(rows[0].name, "process[1]");
  assert_string_equal(rows[0].state, TK__STEP_ERROR);
  expect_json(rows[0].item, "{\"n\": 2}");
  assert_int_equal(rows[1].item_index, 2);
  tk__step_recs_free(rows, n);
}

/* Too many failed instances fail the map; retrying one reopens it, and
 * its success completes it. */
static void map_failures_and_retry(world *w) {
  add_template(w, fanout_toml);
  int64_t t = submit(w, "fanout");
  complete_next(w, "{\"files\": [1, 2, 3, 4]}"); /* exactly max */
  tk__claimed c[4];
  assert_int_equal(claim(w->s, "A", 4, c), 4);
  for (int i = 0; i < 4; i++) {
    tk__outcome o = i < 2 ? error_of(&c[i], "A", w->clock.now_ms)
                          : success_of(&c[i], "A", w->clock.now_ms);
    tk__effects fx = record_ok(w->s, &o);
    if (i == 3) assert_string_equal(fx.task_state, TK__TASK_ERROR);
  }
  tk__task_report r;
  report_on(w->s, t, &r);
  assert_string_equal(step_named(&r, "process")->state, TK__STEP_ERROR);
  expect_contains(step_named(&r, "process")->last_error, "2 of 4 instances failed");
  assert_int_equal(r.steps_error, 1);
  tk__task_report_free(&r);
  expect_refused(w, TK_OP_RETRY, t, "process", TK_ESTATE,
                 "step \"process\" of task 1 is a map step: retry its failed instances "
                 "(\"process[N]\") instead, or resolve it");
  const char *ts = "unset";
  tk_err err;
  must(tk_task_operate(w->s, TK_OP_RETRY, t, "process[0]", w->clock.now_ms, &ts, &err), &err,
       "retry an instance");
  assert_string_equal(ts, TK__TASK_IN_PROGRESS);
  expect_states(w, t, TK__TASK_IN_PROGRESS, "process", TK__STEP_MAPPED, NULL);
  tk__claimed again = claim_one(w->s, "A");
  assert_int_equal(again.item_index, 0);
  tk__outcome o = success_of(&again, "A", w->clock.now_ms);
  record_ok(w->s, &o);
  report_on(w->s, t, &r);
  assert_string_equal(step_named(&r, "process")->state, TK__STEP_COMPLETE);
  assert_int_equal(r.steps_error, 0);
  tk__task_report_free(&r);
  /* The other failed one cannot run again: its children have the map's
   * results, null at its position. Resolving it is no change to the map. */
  expect_refused(w, TK_OP_RETRY, t, "process[1]", TK_ESTATE,
                 "step \"process[1]\" of task 1 is an instance of a map that is already "
                 "complete: its children have the map's results (null for this instance); "
                 "resolve it instead");
  must(tk_task_operate(w->s, TK_OP_RESOLVE, t, "process[1]", w->clock.now_ms, &ts, &err), &err,
       "resolve an instance");
  complete_next(w, "{}");
  expect_states(w, t, TK__TASK_COMPLETE, "process", TK__STEP_COMPLETE, "sum", TK__STEP_COMPLETE,
                NULL);
}

/* An empty list completes the map with []; more than max fails it. */
static void map_empty_and_too_wide(world *w) {
  add_template(w, fanout_toml);
  int64_t t = submit(w, "fanout");
  tk__claimed list = claim_one(w->s, "A");
  tk__outcome o = success_of(&list, "A", w->clock.now_ms);
  o.results = "{\"files\": []}";
  assert_int_equal(record_ok(w->s, &o).children_released, 1);
  tk__task_report r;
  report_on(w->s, t, &r);
  assert_string_equal(step_named(&r, "process")->state, TK__STEP_COMPLETE);
  expect_json(step_named(&r, "process")->results, "[]");
  assert_string_equal(reason_into(&r, "process", TK__STEP_COMPLETE), "mapped into 0 instances");
  tk__task_report_free(&r);
  tk__claimed sum = claim_one(w->s, "A");
  assert_int_equal(sum.idx, 2);
  o = success_of(&sum, "A", w->clock.now_ms);
  assert_string_equal(record_ok(w->s, &o).task_state, TK__TASK_COMPLETE);

  t = submit(w, "fanout");
  list = claim_one(w->s, "A");
  o = success_of(&list, "A", w->clock.now_ms);
  o.results = "{\"files\": [1, 2, 3, 4, 5]}";
  tk__effects fx = record_ok(w->s, &o);
  assert_int_equal(fx.children_released, 0);
  assert_string_equal(fx.task_state, TK__TASK_ERROR);
  report_on(w->s, t, &r);
  assert_string_equal(step_named(&r, "process")->state, TK__STEP_ERROR);
  expect_contains(step_named(&r, "process")->last_error, "5 elements, more than max 4");
  assert_string_equal(reason_into(&r, "process", TK__STEP_ERROR), TK__REASON_MAP_TOO_WIDE);
  tk__task_report_free(&r);
  tk__claimed none;
  assert_int_equal(claim(w->s, "A", 1, &none), 0);

  /* Not a list: the map fails, naming what it got. */
  t = submit(w, "fanout");
  complete_next(w, "{\"files\": \"a.txt\"}");
  report_on(w->s, t, &r);
  expect_contains(step_named(&r, "process")->last_error, "expected a list, got \"a.txt\"");
  assert_string_equal(reason_into(&r, "process", TK__STEP_ERROR), TK__REASON_MAP_BAD_VALUE);
  tk__task_report_free(&r);
}

/* A range in chunks: cursors that cover it exactly once. */
static void map_range_chunks(world *w) {
  add_template(w, range_toml);
  submit(w, "ranges");
  complete_next(w, "{\"rows\": 10}");
  tk__claimed c[4];
  assert_int_equal(claim(w->s, "A", 4, c), 3);
  static const char *want[3] = {"{\"start\": 0, \"end\": 4}", "{\"start\": 4, \"end\": 8}",
                                "{\"start\": 8, \"end\": 10}"};
  for (int i = 0; i < 3; i++) {
    json_t *in;
    tk_err err;
    must(w->s->ops->inputs(w->s, &c[i].step_id, 1, &in, &err), &err, "inputs");
    char *got = json_dumps(json_object_get(in, "item"), JSON_SORT_KEYS);
    expect_json(got, want[i]);
    free(got);
    json_decref(in);
  }
}

/* Cancelling a task mid-map cancels its map and every unfinished
 * instance; nothing of it is claimed again. */
static void cancel_mid_map(world *w) {
  add_template(w, fanout_toml);
  int64_t t = submit(w, "fanout");
  complete_next(w, "{\"files\": [1, 2, 3]}");
  tk__claimed c = complete_next(w, "{}");
  assert_int_equal(c.item_index, 0);
  tk__claimed running = claim_one(w->s, "A");
  const char *ts = "unset";
  tk_err err;
  must(tk_task_operate(w->s, TK_OP_CANCEL, t, NULL, w->clock.now_ms, &ts, &err), &err, "cancel");
  expect_states(w, t, TK__TASK_CANCELLED, "process", TK__STEP_CANCELLED, "sum",
                TK__STEP_CANCELLED, NULL);
  tk__task_report r;
  report_on(w->s, t, &r);
  const tk__step_rec *p = step_named(&r, "process");
  assert_int_equal(p->instances_total, 3);
  assert_int_equal(p->instances_done, 1);
  assert_int_equal(p->instances_waiting, 0); /* cancelled ones wait for nothing */
  tk__task_report_free(&r);
  tk__step_rec *rows;
  int n;
  int64_t total;
  must(w->s->ops->instance_list(w->s, t, 1, -1, 10, &rows, &n, &total, &err), &err, "instances");
  assert_int_equal(n, 3);
  assert_string_equal(rows[0].state, TK__STEP_COMPLETE);
  assert_string_equal(rows[1].state, TK__STEP_CANCELLED);
  assert_string_equal(rows[2].state, TK__STEP_CANCELLED);
  tk__step_recs_free(rows, n);
  tk__claimed none;
  assert_int_equal(claim(w->s, "A", 1, &none), 0);
  tk__outcome o = success_of(&running, "A", w->clock.now_ms);
  assert_int_equal(record1(w->s, &o, &(tk__effects){0}, &err), TK_EFENCED);
}

/* Bulk submit (submit_many): ids in order, an identity that exists and
 * one repeated in the call create nothing, every new task is claimable;
 * a bad submission refuses the whole call and stores nothing. */
static void submit_many_all_or_none(world *w) {
  add_template(w, one_toml);
  int64_t old = submit_on(w, w->s, "one", NULL, "kept", T(0), &(int){0});
  tk_submit_request r[4] = {{.template_name = "one", .identity = "a"},
                            {.template_name = "one", .identity = "kept"},
                            {.template_name = "one", .context_json = "{\"n\":2}"},
                            {.template_name = "one", .identity = "a"}};
  int64_t ids[4];
  int existed[4], failed = 7;
  tk_err err;
  must(tk_task_submit_many(w->s, w->cfg, r, 4, T(0), ids, existed, &failed, &err), &err,
       "submit many");
  assert_int_equal(failed, -1);
  assert_int_equal(existed[0], 0);
  assert_int_equal(existed[1], 1);
  assert_int_equal(ids[1], old);
  assert_int_equal(existed[2], 0);
  assert_true(ids[2] > ids[0] && ids[0] > old);
  assert_int_equal(existed[3], 1);
  assert_int_equal(ids[3], ids[0]);
  tk__claimed c[4];
  assert_int_equal(claim(w->s, "A", 4, c), 3); /* old, a and the third */
  tk__task_report rep;
  report_on(w->s, ids[2], &rep);
  expect_contains(rep.context, "\"n\"");
  tk__task_report_free(&rep);
  /* A bad context in the middle: nothing stored. */
  tk_submit_request bad[2] = {{.template_name = "one", .identity = "b"},
                              {.template_name = "one", .context_json = "[1"}};
  int rc = tk_task_submit_many(w->s, w->cfg, bad, 2, T(0), ids, existed, &failed, &err);
  assert_int_not_equal(rc, 0);
  assert_int_equal(failed, 1);
  assert_true(err.msg[0] != '\0');
  assert_int_equal(tasks_in(w, TK__TASK_PENDING) + tasks_in(w, TK__TASK_IN_PROGRESS), 3);
}

/* ------------------------------------------------------------------ */
/* History: every kind of move, the same on every backend              */
/* ------------------------------------------------------------------ */

/* Step `name`'s instances (instance_list) as lines of report_text's kind. */
static void add_instances(text *t, world *w, int64_t task, int map_idx) {
  tk__step_rec *rows;
  int n;
  int64_t total;
  tk_err err;
  must(w->s->ops->instance_list(w->s, task, map_idx, -1, 100, &rows, &n, &total, &err), &err,
       "instances");
  for (int i = 0; i < n; i++)
    add(t, "instance %s %s attempts=%d/%d item=%s error=%s results=%s\n", rows[i].name,
        rows[i].state, rows[i].attempts, rows[i].max_attempts, STR(rows[i].item),
        STR(rows[i].last_error), STR(rows[i].results));
  tk__step_recs_free(rows, n);
}

/* The whole history of each task, as report_text and its instances say. */
static char *histories(world *w, const int64_t *tasks, int n, int map_task, int map_idx) {
  text t = {0};
  for (int i = 0; i < n; i++) {
    char *one = task_text(w, tasks[i]);
    add(&t, "%s", one);
    free(one);
    if (tasks[i] == map_task) add_instances(&t, w, tasks[i], map_idx);
  }
  return t.s;
}

/* Operator action on step of task at the world's clock, which must be taken. */
static void operate_ok(world *w, tk_operator_action action, int64_t task, const char *step) {
  const char *ts = NULL;
  tk_err err;
  must(tk_task_operate(w->s, action, task, step, w->clock.now_ms, &ts, &err), &err, "operate");
}

/* The history that history_of_every_move writes, on every backend. */
static const char history_of_every_move_text[] =
    "task 1 complete identity=null created=T+0 updated=T+16000 finished=T+16000 steps=2/2/0 "
        "context={} template=1 default/chain@1\n"
    "step 0 a complete attempts=3/5 retryable=1 parents=0 backoff=default run_at=T+12000 "
        "lease=null@null delay=1000 error=null results={\"a\":3}\n"
    "step 1 b resolved_manually attempts=1/5 retryable=1 parents=0 backoff=default "
        "run_at=T+14000 lease=null@null delay=0 error=it broke for good results=null\n"
    "attempt a#1 by A started=T+0 finished=T+10 outcome=failure error=it broke "
        "delay=990(computed) next=T+1000\n"
    "attempt a#2 by B started=T+1000 finished=T+11000 outcome=lease_expired error=lease expired "
        "delay=1000(computed) next=T+12000\n"
    "attempt a#3 by A started=T+12000 finished=T+12000 outcome=success error=null "
        "delay=null(null) next=null\n"
    "attempt b#1 by A started=T+13000 finished=T+13000 outcome=failure error=it broke for good "
        "delay=null(null) next=null\n"
    "attempt b#1 by A started=T+14000 finished=T+15000 outcome=failure error=it broke for good "
        "delay=null(null) next=null\n"
    "transition T+0 (task) null -> pending (created) attempt=null\n"
    "transition T+0 a pending -> in_progress (claimed) attempt=1\n"
    "transition T+0 (task) pending -> in_progress (first step claimed) attempt=null\n"
    "transition T+10 a in_progress -> waiting_for_retry (failure) attempt=1\n"
    "transition T+1000 a waiting_for_retry -> in_progress (claimed) attempt=2\n"
    "transition T+11000 a in_progress -> waiting_for_retry (lease_expired) attempt=2\n"
    "transition T+12000 a waiting_for_retry -> in_progress (claimed) attempt=3\n"
    "transition T+12000 a in_progress -> complete (success) attempt=3\n"
    "transition T+13000 b pending -> in_progress (claimed) attempt=1\n"
    "transition T+13000 b in_progress -> error (failure) attempt=1\n"
    "transition T+13000 (task) in_progress -> error (a step failed and nothing else can "
        "progress) attempt=null\n"
    "transition T+14000 b error -> waiting_for_retry (operator retry) attempt=null\n"
    "transition T+14000 (task) error -> in_progress (a failed step was retried or resolved) "
        "attempt=null\n"
    "transition T+14000 b waiting_for_retry -> in_progress (claimed) attempt=1\n"
    "transition T+15000 b in_progress -> error (failure) attempt=1\n"
    "transition T+15000 (task) in_progress -> error (a step failed and nothing else can "
        "progress) attempt=null\n"
    "transition T+16000 b error -> resolved_manually (operator resolve) attempt=null\n"
    "transition T+16000 (task) error -> complete (all steps complete) attempt=null\n"
    "task 2 cancelled identity=null created=T+17000 updated=T+17100 finished=T+17100 steps=1/0/0 "
        "context={} template=2 default/one@1\n"
    "step 0 s cancelled attempts=1/5 retryable=1 parents=0 backoff=default run_at=T+17000 "
        "lease=null@null delay=0 error=null results=null\n"
    "attempt s#1 by A started=T+17000 finished=T+17200 outcome=fenced_out error=success refused: "
        "the step was no longer held by this claim delay=null(null) next=null\n"
    "transition T+17000 (task) null -> pending (created) attempt=null\n"
    "transition T+17000 s pending -> in_progress (claimed) attempt=1\n"
    "transition T+17000 (task) pending -> in_progress (first step claimed) attempt=null\n"
    "transition T+17100 s in_progress -> cancelled (task cancelled) attempt=null\n"
    "transition T+17100 (task) in_progress -> cancelled (operator cancel) attempt=null\n"
    "task 3 complete identity=null created=T+18000 updated=T+18000 finished=T+18000 steps=5/5/0 "
        "context={} template=3 default/order@1\n"
    "step 0 score complete attempts=1/5 retryable=1 parents=0 backoff=default run_at=T+18000 "
        "lease=null@null delay=0 error=null results={\"risk\":\"high\"}\n"
    "step 1 triage complete attempts=1/5 retryable=1 parents=0 backoff=default run_at=T+18000 "
        "lease=null@null delay=0 error=null results={\"branches\":[\"review\"]}\n"
    "step 2 approve skipped attempts=0/5 retryable=1 parents=1 backoff=default run_at=T+18000 "
        "lease=null@null delay=0 error=null results=null\n"
    "step 3 review complete attempts=1/5 retryable=1 parents=0 backoff=default run_at=T+18000 "
        "lease=null@null delay=0 error=null results={\"reviewed\":true}\n"
    "step 4 notify complete attempts=1/5 retryable=1 parents=0 backoff=default run_at=T+18000 "
        "lease=null@null delay=0 error=null results={}\n"
    "attempt score#1 by A started=T+18000 finished=T+18000 outcome=success error=null "
        "delay=null(null) next=null\n"
    "attempt triage#1 by A started=T+18000 finished=T+18000 outcome=success error=null "
        "delay=null(null) next=null\n"
    "attempt review#1 by A started=T+18000 finished=T+18000 outcome=success error=null "
        "delay=null(null) next=null\n"
    "attempt notify#1 by A started=T+18000 finished=T+18000 outcome=success error=null "
        "delay=null(null) next=null\n"
    "transition T+18000 (task) null -> pending (created) attempt=null\n"
    "transition T+18000 score pending -> in_progress (claimed) attempt=1\n"
    "transition T+18000 (task) pending -> in_progress (first step claimed) attempt=null\n"
    "transition T+18000 score in_progress -> complete (success) attempt=1\n"
    "transition T+18000 triage pending -> in_progress (claimed) attempt=1\n"
    "transition T+18000 triage in_progress -> complete (success) attempt=1\n"
    "transition T+18000 approve pending -> skipped (not chosen by triage) attempt=null\n"
    "transition T+18000 review pending -> in_progress (claimed) attempt=1\n"
    "transition T+18000 review in_progress -> complete (success) attempt=1\n"
    "transition T+18000 notify pending -> in_progress (claimed) attempt=1\n"
    "transition T+18000 notify in_progress -> complete (success) attempt=1\n"
    "transition T+18000 (task) in_progress -> complete (all steps complete) attempt=null\n"
    "task 4 complete identity=null created=T+19000 updated=T+19300 finished=T+19300 steps=3/3/0 "
        "context={} template=4 default/fanout@1\n"
    "step 0 list complete attempts=1/5 retryable=1 parents=0 backoff=default run_at=T+19000 "
        "lease=null@null delay=0 error=null results={\"files\":[\"x\",\"y\",\"z\"]}\n"
    "step 1 process complete attempts=0/5 retryable=1 parents=0 backoff=default run_at=T+19000 "
        "lease=null@null delay=0 error=null results=[{\"ok\":true},{\"n\":1},null]\n"
    "step 2 sum complete attempts=1/5 retryable=1 parents=0 backoff=default run_at=T+19300 "
        "lease=null@null delay=0 error=null results={\"sum\":3}\n"
    "attempt list#1 by A started=T+19000 finished=T+19000 outcome=success error=null "
        "delay=null(null) next=null\n"
    "attempt sum#1 by A started=T+19300 finished=T+19300 outcome=success error=null "
        "delay=null(null) next=null\n"
    "transition T+19000 (task) null -> pending (created) attempt=null\n"
    "transition T+19000 list pending -> in_progress (claimed) attempt=1\n"
    "transition T+19000 (task) pending -> in_progress (first step claimed) attempt=null\n"
    "transition T+19000 list in_progress -> complete (success) attempt=1\n"
    "transition T+19000 process pending -> mapped (mapped into 3 instances) attempt=null\n"
    "transition T+19100 process mapped -> error (too many instances failed) attempt=null\n"
    "transition T+19100 (task) in_progress -> error (a step failed and nothing else can "
        "progress) attempt=null\n"
    "transition T+19200 process error -> mapped (operator retry) attempt=null\n"
    "transition T+19200 (task) error -> in_progress (a failed step was retried or resolved) "
        "attempt=null\n"
    "transition T+19300 process mapped -> complete (all instances finished) attempt=null\n"
    "transition T+19300 sum pending -> in_progress (claimed) attempt=1\n"
    "transition T+19300 sum in_progress -> complete (success) attempt=1\n"
    "transition T+19300 (task) in_progress -> complete (all steps complete) attempt=null\n"
    "instance process[0] complete attempts=1/5 item=\"x\" error=null results={\"ok\":true}\n"
    "instance process[1] complete attempts=1/5 item=\"y\" error=null results={\"n\":1}\n"
    "instance process[2] error attempts=1/5 item=\"z\" error=it broke for good results=null\n";

/* One task through every kind of move a step makes (a retry, a lease that
 * expires and its late owner fenced, an error, an operator's retry and
 * resolve), one cancelled mid-attempt with its owner's outcome fenced out,
 * a decision with a skipped branch and convergence, and a map failed by
 * its instances and reopened by a retry of one: the whole history (tasks, steps, attempts,
 * transitions, instances) is the text below on every backend. Written to
 * hold a history fixed while the rows that record it change (issue 22). */
static void history_of_every_move(world *w) {
  add_template(w, chain_toml);
  add_template(w, one_toml);
  add_template(w, order_toml);
  add_template(w, fanout_toml);
  int64_t tasks[4];
  tk__claimed c;
  tk__outcome o;
  tk_err err;
  tk__effects fx;

  /* chain: a fails once, its next attempt's lease expires and its owner
   * writes late, the third succeeds; b fails for good, is retried by an
   * operator, fails again and is resolved. */
  tasks[0] = submit(w, "chain");
  c = claim_one(w->s, "A");
  w->clock.now_ms = T(10);
  o = retry_of(&c, "A", T(10), T(1000));
  record_ok(w->s, &o);
  w->clock.now_ms = T(1000);
  tk__claimed late = claim_one(w->s, "B");
  tk__expired x[2];
  assert_int_equal(expired_at(w->s, T(1000 + LEASE_MS), x, 2), 1);
  w->clock.now_ms = T(1000 + LEASE_MS);
  o = expired_of(&x[0], T(1000 + LEASE_MS), T(2000 + LEASE_MS));
  record_ok(w->s, &o);
  w->clock.now_ms = T(1500 + LEASE_MS);
  o = success_of(&late, "B", T(1500 + LEASE_MS));
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);
  w->clock.now_ms = T(2000 + LEASE_MS);
  complete_next(w, "{\"a\":3}");
  w->clock.now_ms = T(3000 + LEASE_MS);
  c = claim_one(w->s, "A");
  o = error_of(&c, "A", T(3000 + LEASE_MS));
  record_ok(w->s, &o);
  w->clock.now_ms = T(4000 + LEASE_MS);
  operate_ok(w, TK_OP_RETRY, tasks[0], "b");
  c = claim_one(w->s, "A");
  w->clock.now_ms = T(5000 + LEASE_MS);
  o = error_of(&c, "A", T(5000 + LEASE_MS));
  record_ok(w->s, &o);
  w->clock.now_ms = T(6000 + LEASE_MS);
  operate_ok(w, TK_OP_RESOLVE, tasks[0], "b");

  /* one: cancelled while its step runs; the owner's outcome is fenced out. */
  w->clock.now_ms = T(7000 + LEASE_MS);
  tasks[1] = submit(w, "one");
  c = claim_one(w->s, "A");
  w->clock.now_ms = T(7100 + LEASE_MS);
  operate_ok(w, TK_OP_CANCEL, tasks[1], NULL);
  w->clock.now_ms = T(7200 + LEASE_MS);
  o = success_of(&c, "A", T(7200 + LEASE_MS));
  assert_int_equal(record1(w->s, &o, &fx, &err), TK_EFENCED);

  /* order: triage chooses review; approve is skipped, notify converges. */
  w->clock.now_ms = T(8000 + LEASE_MS);
  tasks[2] = submit(w, "order");
  complete_next(w, "{\"risk\":\"high\"}");
  complete_next(w, "{\"branches\":[\"review\"]}");
  complete_next(w, "{\"reviewed\":true}");
  complete_next(w, "{}");

  /* fanout: three instances, two fail (one more than allowed), the map
   * fails; an operator's retry of one reopens it and it completes. */
  w->clock.now_ms = T(9000 + LEASE_MS);
  tasks[3] = submit(w, "fanout");
  complete_next(w, "{\"files\":[\"x\",\"y\",\"z\"]}");
  tk__claimed in[3];
  assert_int_equal(claim(w->s, "A", 3, in), 3);
  w->clock.now_ms = T(9100 + LEASE_MS);
  o = success_of(&in[0], "A", w->clock.now_ms);
  record_ok(w->s, &o);
  o = error_of(&in[1], "A", w->clock.now_ms);
  record_ok(w->s, &o);
  o = error_of(&in[2], "A", w->clock.now_ms);
  record_ok(w->s, &o);
  w->clock.now_ms = T(9200 + LEASE_MS);
  operate_ok(w, TK_OP_RETRY, tasks[3], "process[1]");
  w->clock.now_ms = T(9300 + LEASE_MS);
  complete_next(w, "{\"n\":1}");
  complete_next(w, "{\"sum\":3}");

  char *got = histories(w, tasks, 4, tasks[3], 1);
  if (strcmp(got, history_of_every_move_text) != 0) {
    print_error("the history:\n");
    for (char *line = strtok(got, "\n"); line; line = strtok(NULL, "\n"))
      print_error("%s\n", line);
    free(got);
    fail_msg("the history differs from the one every backend must write (above)");
  }
  free(got);
}

#include "store/conformance_workers.h"
#include "store/conformance_queues.h"
#include "store/conformance_budgets.h"
#include "store/conformance_waits.h"
#include "store/conformance_deadlines.h"
#include "store/conformance_callbacks.h"
#include "store/conformance_children.h"

static const conformance_case cases[] = {
    WORKER_CASES
    QUEUE_CASES
    BUDGET_CASES
    WAIT_CASES
    DEADLINE_CASES
    CALLBACK_CASES
    CHILD_CASES
    {"claim order: due retries by run_at, then pending work", due_retries_first_then_pending, 0},
    {"claim order: the oldest task's steps first", oldest_task_first, 0},
    {"claim order: fresh_limit", fresh_limit_bounds_only_fresh_work, 0},
    {"claim order: retry_ahead_ms", retry_ahead_claims_early_and_no_earlier, 0},
    {"claim order: attempts, leases and unique claim ids", claims_count_attempts_with_unique_ids,
     0},
    {"claim order: two connections never share a step", two_connections_never_share_a_step, 0},
    {"handler inputs", handler_inputs, 0},
    {"a claim brings each step's input, as the inputs op reads it", claim_brings_inputs, 0},
    {"fencing: a stale claim changes only the counter", stale_claim_changes_only_the_counter, 0},
    {"fencing: an outcome after cancel is fenced_out", outcome_after_cancel_is_fenced_out, 0},
    {"fencing: a group commits around a fenced outcome", group_commits_around_a_fenced_outcome,
     0},
    {"reaper against owner: the reaper wins an expired lease", reaper_wins_an_expired_lease, 0},
    {"reaper against owner: a heartbeat first keeps the claim",
     heartbeat_before_the_reaper_keeps_the_claim, 0},
    {"reaper against reaper", reaper_against_reaper, 0},
    {"reaper against reaper: many leases at once", reapers_at_once, 0},
    {"identity races", identity_races, 0},
    {"operator: retry", operator_retry, 0},
    {"operator: resolve", operator_resolve, 0},
    {"operator: cancel", operator_cancel, 0},
    {"batch items", batch_items, 0},
    {"lists: tasks by each filter and combined", lists_filter_tasks, 0},
    {"lists: a task's most recent error", lists_most_recent_error, 0},
    {"lists: pages neither repeat nor skip while states change", lists_pages_while_states_change,
     0},
    {"lists: steps by state", lists_steps, 0},
    {"lists: activity in buckets", activity_buckets, 0},
    {"lists: error text through the trigram index, literal", lists_error_text_indexed, 0},
    {"lists: activity in whole minutes from the per-minute counts",
     activity_minutes_match_attempts, 0},
    {"claims write due_at", claims_write_due_at, 0},
    {"upgrade from every older schema version", upgrade_from_every_older_version, 1},
    {"schedules: put, list, remove, one namespace with the configuration",
     schedules_put_list_remove, 0},
    {"schedules: a stale cursor fires nothing", schedules_stale_cursor_fires_nothing, 0},
    {"schedules: each slot fires once with three orchestrators", schedules_fire_once_per_slot,
     0},
    {"delayed start: claimed at its time and not before", delayed_start_claimed_at_its_time, 0},
    {"delayed start: a backlog waits, a cancelled one never starts", delayed_backlog_and_cancel,
     0},
    {"retention: only finished tasks go, with exact counts", prune_finished_tasks_only, 0},
    {"retention: two connections pruning at once", prune_from_two_connections, 0},
    {"retention: the store's size", store_size, 0},
    {"retry budgets: retry_earlier moves only a waiting retry, never later",
     retry_earlier_moves_only_a_waiting_retry, 0},
    {"flow: every outcome of a decision, and convergence", decision_outcomes, 0},
    {"flow: skips go down a chain and a diamond", skips_propagate, 0},
    {"flow: resolving a decision skips its branches", resolve_decision_skips_branches, 0},
    {"flow: a map's instances, their inputs and results", map_runs_instances, 0},
    {"flow: too many failed instances, and a retry reopening the map", map_failures_and_retry,
     0},
    {"flow: an empty map, one over max, one over no list", map_empty_and_too_wide, 0},
    {"flow: a range in chunks", map_range_chunks, 0},
    {"flow: cancel mid-map", cancel_mid_map, 0},
    {"bulk submit: identities, order, all or none", submit_many_all_or_none, 0},
    {"history: every kind of move, the same on every backend", history_of_every_move, 0},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* The name of the backend this program runs: SQLite's unless the includer
 * says. */
#ifndef CONFORMANCE_BACKEND
#define CONFORMANCE_BACKEND "sqlite"
#endif

/* Run the table on the program's backend; exit 77, having run nothing,
 * when it cannot run here. An argument runs only the cases whose names
 * match it (cmocka's pattern: * and ?), as in
 * test_conformance_pg 'postgres: fencing*'. */
int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const backend *be = strcmp(CONFORMANCE_BACKEND, pg_backend.name) == 0 ? &pg_backend
                                                                         : &sqlite_backend;
  if (be == &pg_backend) pg_probe();
  if (be->unavailable) {
    skip_missing_line("pg", "%s half: %s", be->name, be->unavailable);
    return 77;
  }
  static struct CMUnitTest tests[NCASES];
  static test_param params[NCASES];
  static char names[NCASES][128];
  for (size_t i = 0; i < NCASES; i++) {
    params[i] = (test_param){be, &cases[i]};
    snprintf(names[i], sizeof names[i], "%s: %s", be->name, cases[i].name);
    tests[i] = (struct CMUnitTest){names[i], run_case, world_setup, world_teardown, &params[i]};
  }
  return _cmocka_run_group_tests("store conformance", tests, NCASES, NULL, NULL);
}
