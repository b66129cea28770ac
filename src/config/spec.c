/* Template tables and handler specs read against key schemas: the
 * configuration's mechanism (tk__key, tk__convert_json, tk__suggest), with
 * JSON as the target and template wording for the place of a problem. */
#include "config/spec.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "handlers/handler.h"

/* Unknown-key candidates listed at most (more are never suggested). */
#define MAX_CANDS 48

int tk__spec_fail(const tk__spec_where *w, const tk_toml_value *v, const char *key,
                  const char *fmt, ...) {
  char msg[TK_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tk_toml_pos pos = v ? tk_toml_pos_of(v) : (tk_toml_pos){1, 1};
  const char *path = w->path ? w->path : "";
  const char *dot = *path && key ? "." : "";
  return tk_err_set(w->err, TK_ECONFIG, "%s:%u:%u: %s%s%s%s%s", w->file, pos.line, pos.column,
                    path, dot, key ? key : "", *path || key ? ": " : "", msg);
}

int tk__spec_refuse(const tk__spec_where *w, const char *key, const tk__complaint *why) {
  char val[80], sub[96] = "";
  if (tk_toml_format_value(why->at, val, sizeof val) >= (int)sizeof val)
    strcpy(val + sizeof val - 4, "...");
  if (why->index > 0) snprintf(sub, sizeof sub, "[%d]", why->index);
  else if (why->member) snprintf(sub, sizeof sub, ".%s", why->member);
  char name[160];
  snprintf(name, sizeof name, "%s%s", key ? key : "", sub);
  tk_toml_pos pos = tk_toml_pos_of(why->at);
  const char *path = w->path ? w->path : "";
  const char *dot = *path && *name ? "." : "";
  return tk_err_set(w->err, TK_ECONFIG, "%s:%u:%u: %s%s%s = %s: %s", w->file, pos.line,
                    pos.column, path, dot, name, val, why->what);
}

int tk__spec_read(const tk__spec_where *w, const tk__schema *s, const tk_toml_value *t,
                  json_t *out) {
  if (tk_toml_type_of(t) != TK_TOML_TABLE) {
    tk__complaint why;
    tk__expect_table(t, NULL, &why);
    return tk__spec_refuse(w, NULL, &why);
  }
  /* Unknown keys first, in document order: a misspelt key is more likely
   * the problem than the value under it. */
  for (size_t i = 0; i < tk_toml_table_len(t); i++) {
    const tk_toml_entry *e = tk_toml_table_at(t, i);
    if (tk__schema_find(s, e->key, e->key_len) != NULL) continue;
    const char *cands[MAX_CANDS];
    size_t n = 0;
    for (; n < s->nkeys && n < MAX_CANDS; n++) cands[n] = s->keys[n].name;
    char msg[TK_ERR_MSG_MAX];
    tk__unknown_key(msg, sizeof msg, w->path, e->key, cands, n);
    return tk_err_set(w->err, TK_ECONFIG, "%s:%u:%u: %s", w->file, e->key_pos.line,
                      e->key_pos.column, msg);
  }
  for (size_t i = 0; i < tk_toml_table_len(t); i++) {
    const tk_toml_entry *e = tk_toml_table_at(t, i);
    const tk__key *k = tk__schema_find(s, e->key, e->key_len);
    if (k->kind == TK__K_OTHER) continue;
    tk__complaint why;
    json_t *v = NULL;
    int rc = tk__convert_json(k, e->value, &v, &why);
    if (rc == TK_ECONFIG) return tk__spec_refuse(w, k->name, &why);
    if (rc != 0 || json_object_set_new(out, k->json ? k->json : k->name, v) != 0)
      return tk_err_set(w->err, TK_ENOMEM, "out of memory reading %s", w->file);
  }
  for (size_t i = 0; i < s->nkeys; i++) {
    const tk__key *k = &s->keys[i];
    if (k->missing != NULL && tk_toml_get(t, k->name) == NULL)
      return tk__spec_fail(w, t, k->name, "missing: %s", k->missing);
  }
  return 0;
}

int tk__spec_queue_name(const tk__spec_where *w, const char *key, const tk_toml_value *v,
                        const char **name, size_t *len) {
  *len = 0;
  *name = tk_toml_type_of(v) == TK_TOML_STRING ? tk_toml_string(v, len) : NULL;
  if (*name != NULL && tk__queue_name_ok(*name, *len) && strlen(*name) == *len) return 0;
  tk__complaint why = {.at = v};
  snprintf(why.what, sizeof why.what,
           "expected a queue name: 1 to %d lowercase letters, digits, '_', '.' or '-'",
           TK__QUEUE_NAME_MAX);
  return tk__spec_refuse(w, key, &why);
}
