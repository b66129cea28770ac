/* Opening a store by URL, the public wrappers over the backend ops, and
 * what every backend shares: template lookup, handler input, typed rows. */
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

int tk__store_clock_init(tk_store *s, tk_err *err); /* store_clock.c */
void tk__store_clock_free(tk_store *s);

/* URL schemes and their backends; ops NULL: a backend this build leaves
 * out (make PG_BACKEND=0). */
#ifdef TK_NO_POSTGRES
#define POSTGRES_OPS NULL
#else
#define POSTGRES_OPS (&tk__postgres_store_ops)
#endif
typedef struct scheme {
  const char *name, *backend;
  const tk__store_ops *ops;
} scheme;
static const scheme schemes[] = {
    {"sqlite", "SQLite", &tk__sqlite_store_ops},
    {"postgres", "PostgreSQL", POSTGRES_OPS},
    {"postgresql", "PostgreSQL", POSTGRES_OPS}, /* PostgreSQL's own spelling */
};
#define NSCHEMES (sizeof schemes / sizeof schemes[0])

/* The entry of the scheme that url starts with ("name:"), or NULL. */
static const scheme *scheme_of(const char *url) {
  for (size_t i = 0; i < NSCHEMES; i++) {
    size_t n = strlen(schemes[i].name);
    if (strncmp(url, schemes[i].name, n) == 0 && url[n] == ':') return &schemes[i];
  }
  return NULL;
}

/* Whether url is a libpq "key=value ..." connection string. */
static int libpq_keywords(const char *url) {
  const char *eq = strchr(url, '=');
  if (eq == NULL) return 0;
  for (const char *p = url; p < eq; p++)
    if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || *p == ' ')) return 0;
  return 1;
}

int tk_store_open(const char *url, tk_store **out, tk_err *err) {
  tk_store_open_options create = {.create = 1};
  return tk_store_open_with(url, &create, out, err);
}

int tk_store_open_with(const char *url, const tk_store_open_options *opts, tk_store **out,
                       tk_err *err) {
  static const tk_store_open_options existing;
  *out = NULL;
  if (url == NULL || *url == '\0') return tk_err_set(err, TK_EINVAL, "empty store URL");
  /* A bare path is a SQLite file; each backend's open reads the whole URL. */
  const scheme *sc = libpq_keywords(url) ? scheme_of("postgres:") : scheme_of(url);
  const char *colon = strchr(url, ':');
  if (sc == NULL && colon != NULL && colon != url && strchr(url, '/') != url)
    return tk_err_set(err, TK_EINVAL,
                      "store URL \"%s\": unknown scheme \"%.*s\" (expected sqlite:PATH or "
                      "postgres://...)",
                      url, (int)(colon - url), url);
  if (sc == NULL) sc = &schemes[0];
  const tk__store_ops *ops = sc->ops;
  if (ops == NULL)
    return tk_err_set(err, TK_EUNSUPPORTED, "store URL \"%s\": this build has no %s backend",
                      url, sc->backend);
  if (ops->version != TK__STORE_OPS_VERSION)
    return tk_err_set(err, TK_EUNSUPPORTED,
                      "store backend \"%s\" implements store interface version %d; this build "
                      "needs version %d",
                      ops->scheme, ops->version, TK__STORE_OPS_VERSION);
  int rc = ops->open(url, opts ? opts : &existing, out, err);
  if (rc) return rc;
  (*out)->clock = tk_clock_system();
  (*out)->server = NULL;
  if (ops->server_time != NULL && (rc = tk__store_clock_init(*out, err)) != 0) {
    ops->close(*out);
    *out = NULL;
  }
  return rc;
}

void tk_store_process_init(void) {
  for (size_t i = 0; i < NSCHEMES; i++) {
    const tk__store_ops *ops = schemes[i].ops;
    if (ops && ops->process_init && (i == 0 || schemes[i - 1].ops != ops)) ops->process_init();
  }
}

void tk_store_close(tk_store *s) {
  if (s == NULL) return;
  tk__store_clock_free(s);
  s->ops->close(s);
}

tk_clock tk_store_clock(const tk_store *s) { return s->clock; }

void tk_store_set_clock(tk_store *s, tk_clock clock) { s->clock = clock; }

int tk_store_migrate(tk_store *s, int *applied, int *version, tk_err *err) {
  return s->ops->migrate(s, 0, applied, version, err);
}

int tk_store_migrate_to(tk_store *s, int target, int *applied, int *version, tk_err *err) {
  return s->ops->migrate(s, target, applied, version, err);
}

int tk_store_schema_version(tk_store *s, int *version, tk_err *err) {
  return s->ops->schema_version(s, version, err);
}

int tk__store_claim(tk_store *s, const char *owner, int64_t lease_ms, int limit,
                    tk__claimed *out, int *n, tk_err *err) {
  tk__claim_request r = {.owner = owner, .lease_ms = lease_ms, .limit = limit,
                         .fresh_limit = limit, .out = out};
  int rc = s->ops->record(s, NULL, 0, NULL, NULL, &r, err);
  *n = r.n;
  return rc;
}

int tk__template_lookup(tk_store *s, const char *name, const char *version,
                        tk__template_rec *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  const char *slash = strchr(name, '/');
  char ns[256] = "";
  const char *bare = name;
  if (slash) {
    size_t n = (size_t)(slash - name);
    if (n >= sizeof ns) n = sizeof ns - 1;
    memcpy(ns, name, n);
    ns[n] = '\0';
    bare = slash + 1;
  }
  /* Two rows are enough to see whether a bare name is ambiguous. */
  tk__template_rec found[2];
  int n = 0;
  int rc = s->ops->template_find(s, slash ? ns : NULL, bare, version, found, 2, &n, err);
  if (rc) return rc;
  if (n == 0) {
    if (version)
      return tk_err_set(err, TK_ENOENT,
                        "no template \"%s\" version \"%s\" (see tasker template list)", name,
                        version);
    return tk_err_set(err, TK_ENOENT, "no template \"%s\" (see tasker template list)", name);
  }
  if (n == 2 && !slash && strcmp(found[0].namespace_, found[1].namespace_) != 0) {
    rc = tk_err_set(err, TK_EINVAL,
                    "template name \"%s\" exists in namespaces \"%s\" and \"%s\": write "
                    "NAMESPACE/%s",
                    name, found[0].namespace_, found[1].namespace_, name);
    tk__template_recs_free(found, 2);
    return rc;
  }
  *out = found[0];
  if (n == 2) tk__template_rec_free(&found[1]);
  return 0;
}

int tk__input_add(json_t **slot, const char *context, const char *parent, const char *results) {
  if (*slot == NULL) {
    json_t *ctx = context ? json_loads(context, JSON_DECODE_ANY, NULL) : NULL;
    *slot = json_pack("{s:o, s:o}", "context", ctx ? ctx : json_null(), "parents", json_object());
    if (*slot == NULL) return TK_ENOMEM;
  }
  if (parent == NULL) return 0;
  json_t *v = results ? json_loads(results, JSON_DECODE_ANY, NULL) : NULL;
  return json_object_set_new(json_object_get(*slot, "parents"), parent, v ? v : json_null()) == 0
             ? 0
             : TK_ENOMEM;
}

void tk__prune_cutoffs(const tk__prune_request *r, int64_t cut[TK__PRUNE_STATES + 1]) {
  cut[TK__PRUNE_STATES] = INT64_MIN;
  for (int i = 0; i < TK__PRUNE_STATES; i++) {
    cut[i] = r->before[i] == TK__NONE ? INT64_MIN : r->before[i];
    if (cut[i] > cut[TK__PRUNE_STATES]) cut[TK__PRUNE_STATES] = cut[i];
  }
}

int64_t tk__prune_minutes_before(const tk__prune_request *r) {
  int64_t earliest = INT64_MAX;
  for (int i = 0; i < TK__PRUNE_STATES; i++)
    if (r->before[i] != TK__NONE && r->before[i] < earliest) earliest = r->before[i];
  if (earliest == INT64_MAX) return INT64_MIN;
  return earliest - ((earliest % TK__MINUTE_MS) + TK__MINUTE_MS) % TK__MINUTE_MS;
}

void tk__template_rec_free(tk__template_rec *r) {
  if (r == NULL) return;
  free(r->namespace_);
  free(r->name);
  free(r->version);
  free(r->description);
  free(r->definition);
  memset(r, 0, sizeof *r);
}

void tk__template_recs_free(tk__template_rec *r, int n) {
  for (int i = 0; r && i < n; i++) tk__template_rec_free(&r[i]);
}

void tk__task_report_free(tk__task_report *r) {
  if (r == NULL) return;
  free(r->identity);
  free(r->context);
  tk__template_rec_free(&r->template_);
  for (int i = 0; i < r->nsteps; i++) {
    tk__step_rec *s = &r->steps[i];
    free(s->name);
    free(s->backoff);
    free(s->lease_owner);
    free(s->last_error);
    free(s->results);
  }
  free(r->steps);
  for (int i = 0; i < r->nattempts; i++) {
    tk__attempt_rec *a = &r->attempts[i];
    free(a->owner);
    free(a->outcome);
    free(a->error);
    free(a->delay_source);
  }
  free(r->attempts);
  for (int i = 0; i < r->ntransitions; i++) {
    free(r->transitions[i].from);
    free(r->transitions[i].to);
    free(r->transitions[i].reason);
  }
  free(r->transitions);
  for (int i = 0; i < r->ngave_up; i++) {
    free(r->gave_up[i].key);
    free(r->gave_up[i].last_error);
  }
  free(r->gave_up);
  memset(r, 0, sizeof *r);
}

void tk__task_rows_free(tk__task_row *r, int n) {
  for (int i = 0; r && i < n; i++) {
    free(r[i].namespace_);
    free(r[i].name);
    free(r[i].version);
    free(r[i].identity);
    free(r[i].last_error);
  }
  free(r);
}

void tk__step_rows_free(tk__step_row *r, int n) {
  for (int i = 0; r && i < n; i++) {
    free(r[i].name);
    free(r[i].last_error);
    free(r[i].namespace_);
    free(r[i].template_name);
    free(r[i].version);
  }
  free(r);
}

void tk__batch_load_free(tk__batch_load *b) {
  if (b == NULL) return;
  free(b->items);
  free(b->text);
  memset(b, 0, sizeof *b);
}

int tk__grow(void **arr, int *cap, int need, size_t size) {
  if (need <= *cap) return 0;
  int c = *cap ? *cap : 8;
  while (c < need) c *= 2;
  char *p = realloc(*arr, (size_t)c * size);
  if (p == NULL) return TK_ENOMEM;
  memset(p + (size_t)*cap * size, 0, (size_t)(c - *cap) * size);
  *arr = p;
  *cap = c;
  return 0;
}

char *tk__dup(const char *s, int *oom) {
  if (s == NULL) return NULL;
  char *d = strdup(s);
  if (d == NULL) *oom = 1;
  return d;
}
