/* Opening a store by URL and the public wrappers over the backend ops.
 * What every backend shares lives beside it: templates.c (lookup by name),
 * rows.c (building and freeing typed rows), prune_cutoffs.c. */
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
