/* Templates as every backend shares them: looked up by a name that may
 * carry its namespace, and their rows freed. */
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

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
