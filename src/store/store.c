/* Opening a store by URL, and the public wrappers over the backend ops. */
#include "store/store.h"

#include <string.h>

/* The backends, by URL scheme. */
static const tk__store_ops *const backends[] = {&tk__sqlite_store_ops};

int tk_store_open(const char *url, tk_store **out, tk_err *err) {
  *out = NULL;
  if (url == NULL || *url == '\0') return tk_err_set(err, TK_EINVAL, "empty store URL");
  const char *colon = strchr(url, ':');
  const char *location = url;
  const tk__store_ops *ops = &tk__sqlite_store_ops; /* a bare path is a SQLite file */
  if (colon != NULL && colon != url && strchr(url, '/') != url) {
    size_t n = (size_t)(colon - url);
    ops = NULL;
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
      if (strlen(backends[i]->scheme) == n && strncmp(url, backends[i]->scheme, n) == 0)
        ops = backends[i];
    if (ops == NULL) {
      if (strncmp(url, "postgres", 8) == 0)
        return tk_err_set(err, TK_EUNSUPPORTED,
                          "store URL \"%s\": the PostgreSQL backend is not built yet; use "
                          "sqlite:PATH",
                          url);
      return tk_err_set(err, TK_EINVAL, "store URL \"%s\": unknown scheme \"%.*s\" (expected sqlite:PATH)",
                        url, (int)n, url);
    }
    location = colon + 1;
  }
  return ops->open(location, out, err);
}

void tk_store_process_init(void) { tk__sqlite_process_init(); }

void tk_store_close(tk_store *s) {
  if (s) s->ops->close(s);
}

int tk_store_migrate(tk_store *s, int *applied, int *version, tk_err *err) {
  return s->ops->migrate(s, applied, version, err);
}

int tk_store_schema_version(tk_store *s, int *version, tk_err *err) {
  return s->ops->schema_version(s, version, err);
}

int tk__store_claim(tk_store *s, const char *owner, int64_t now, int64_t lease_ms, int limit,
                    tk__claimed *out, int *n, tk_err *err) {
  tk__claim_request r = {.owner = owner, .now = now, .lease_ms = lease_ms, .limit = limit,
                         .fresh_limit = limit, .out = out};
  int rc = s->ops->record(s, NULL, 0, NULL, NULL, &r, err);
  *n = r.n;
  return rc;
}
