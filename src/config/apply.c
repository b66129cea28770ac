/* Applying one parsed layer (a file, an overlay or one --set) onto the
 * configuration: walk its tables, check each key against the schema and
 * each value against its key, and record where every value came from. */
#include "config/apply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toml/format.h"

#define KEY_MAX 256

static const char *const sections[] = {"backoff",   "engine",    "batch",  "budgets",
                                       "schedules", "retention", "limits", "queues",
                                       "server"};

/* The place of a problem: "FILE:L:C" for a file, "--set K=V" for a flag. */
static void place(const tk__layer *L, tk_toml_pos pos, char *buf, size_t len) {
  tk_config_origin o = L->where;
  o.line = pos.line;
  o.column = pos.column;
  tk__origin_place(&o, buf, len);
}

static int fail(const tk__layer *L, tk_toml_pos pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Set L->err to "PLACE: message" and return TK_ECONFIG. */
static int fail(const tk__layer *L, tk_toml_pos pos, const char *fmt, ...) {
  char where[TK_ERR_MSG_MAX], what[TK_ERR_MSG_MAX];
  place(L, pos, where, sizeof where);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return tk_err_set(L->err, TK_ECONFIG, "%s: %s", where, what);
}

/* A value as TOML, shortened to fit a one-line message. */
static void value_text(const tk_toml_value *v, char *buf, size_t len) {
  if (tk_toml_format_value(v, buf, len) >= (int)len && len > 4) strcpy(buf + len - 4, "...");
}

int tk__layer_fail_at(const tk__layer *L, tk_toml_pos pos, const char *msg) {
  return fail(L, pos, "%s", msg);
}

/* "KEY = VALUE: what is wrong". A --set flag already shows the key and
 * the value, so there only what is wrong (and which schedule entry). */
int tk__layer_refuse(const tk__layer *L, const char *key, const tk__complaint *why) {
  char val[80], idx[16] = "";
  value_text(why->at, val, sizeof val);
  if (why->index > 0) snprintf(idx, sizeof idx, "[%d]", why->index);
  if (L->where.kind == TK_CONFIG_SET && why->index == 0)
    return fail(L, tk_toml_pos_of(why->at), "%s", why->what);
  return fail(L, tk_toml_pos_of(why->at), "%s%s = %s: %s", key, idx, val, why->what);
}

/* "backoff" + "." + "max_delay"; the whole key for messages. */
static void join(char *buf, const char *path, const char *key, size_t key_len) {
  snprintf(buf, KEY_MAX, "%s%s%.*s", path, *path ? "." : "", (int)key_len, key);
}

static int unknown_key(const tk__layer *L, const char *path, const tk_toml_entry *e,
                       const char *const *cands, size_t n) {
  char msg[TK_ERR_MSG_MAX];
  tk__unknown_key(msg, sizeof msg, path, e->key, cands, n);
  return fail(L, e->key_pos, "%s", msg);
}

/* e's value must be a table. */
static int need_table(const tk__layer *L, const char *path, const tk_toml_entry *e) {
  tk__complaint why;
  if (tk__expect_table(e->value, NULL, &why) == 0) return 0;
  char key[KEY_MAX];
  join(key, path, e->key, e->key_len);
  return tk__layer_refuse(L, key, &why);
}

/* Where the values of one table go: a struct described by a schema, the
 * origin of each key, and (for profiles) which keys the table set. */
typedef struct target {
  const char *path; /* "backoff", "backoff.profiles.fast", "engine" */
  const tk__schema *schema;
  void *obj;
  tk_config_origin *origin;
  uint32_t *set;
} target;

static int apply_key(const tk__layer *L, const target *t, const tk_toml_entry *e,
                     const char *extra) {
  const tk__key *k = tk__schema_find(t->schema, e->key, e->key_len);
  if (k == NULL) {
    const char *cands[TK__MAX_KEYS + 1];
    size_t n = 0;
    for (; n < t->schema->nkeys; n++) cands[n] = t->schema->keys[n].name;
    if (extra) cands[n++] = extra;
    return unknown_key(L, t->path, e, cands, n);
  }
  tk__complaint why;
  if (tk__convert(k, e->value, t->obj, &why) != 0) {
    char key[KEY_MAX];
    join(key, t->path, e->key, e->key_len);
    return tk__layer_refuse(L, key, &why);
  }
  if (k->kind == TK__K_STRING) {
    /* The document dies after this layer; keep a copy. */
    const char **s = TK__FIELD(t->obj, k, const char *);
    if ((*s = tk__config_strdup(L->c, *s, strlen(*s))) == NULL)
      return tk_err_set(L->err, TK_ENOMEM, "out of memory reading the configuration");
  }
  size_t i = tk__schema_index(t->schema, k);
  tk_toml_pos pos = tk_toml_pos_of(e->value);
  t->origin[i] = L->where;
  t->origin[i].line = pos.line;
  t->origin[i].column = pos.column;
  if (t->set) *t->set |= 1u << i;
  return 0;
}

static int apply_table(const tk__layer *L, const target *t, const tk_toml_value *table) {
  for (size_t i = 0; i < tk_toml_table_len(table); i++) {
    int rc = apply_key(L, t, tk_toml_table_at(table, i), NULL);
    if (rc) return rc;
  }
  return 0;
}

/* Profile names are referred to from templates and flags, so they are
 * kept to what a bare TOML key allows. */
static int valid_name(const char *s, size_t len) {
  if (len == 0 || len > 64) return 0;
  for (size_t i = 0; i < len; i++)
    if (!tk__is_name_char(s[i])) return 0;
  return 1;
}

static tk__profile *find_or_add_profile(tk_config *c, const char *name, size_t len) {
  for (size_t i = 1; i < c->nprofiles; i++)
    if (strlen(c->profiles[i].name) == len && memcmp(c->profiles[i].name, name, len) == 0)
      return &c->profiles[i];
  if (c->nprofiles == c->profiles_cap) {
    tk__profile *grown = realloc(c->profiles, 2 * c->profiles_cap * sizeof *grown);
    if (grown == NULL) return NULL;
    c->profiles = grown;
    c->profiles_cap *= 2;
  }
  tk__profile *p = &c->profiles[c->nprofiles];
  memset(p, 0, sizeof *p);
  if ((p->name = tk__config_strdup(c, name, len)) == NULL) return NULL;
  c->nprofiles++;
  return p;
}

/* Entry e of the tables named by their keys under `section` (a profile, a
 * budget: `noun`) must have a valid name and be a table. */
static int named_table(const tk__layer *L, const char *section, const char *noun,
                       const tk_toml_entry *e) {
  if (!valid_name(e->key, e->key_len)) {
    char name[6 * KEY_MAX + 3];
    tk__toml_format_string(e->key, e->key_len < KEY_MAX ? e->key_len : KEY_MAX, name,
                           sizeof name);
    return fail(L, e->key_pos,
                "%s.%s: a %s name must be 1 to 64 letters, digits, \"_\" or \"-\"", section,
                name, noun);
  }
  return need_table(L, section, e);
}

static int apply_profiles(const tk__layer *L, const tk_toml_value *profiles) {
  for (size_t i = 0; i < tk_toml_table_len(profiles); i++) {
    const tk_toml_entry *e = tk_toml_table_at(profiles, i);
    if (strcmp(e->key, "default") == 0)
      return fail(L, e->key_pos,
                  "backoff.profiles.default: the default profile is [backoff]; set its keys "
                  "there");
    int rc = named_table(L, "backoff.profiles", "profile", e);
    if (rc) return rc;
    tk__profile *p = find_or_add_profile(L->c, e->key, e->key_len);
    if (p == NULL) return tk_err_set(L->err, TK_ENOMEM, "out of memory reading the profiles");
    char path[KEY_MAX];
    join(path, "backoff.profiles", e->key, e->key_len);
    target t = {path, &tk__backoff_schema, &p->own, p->origin, &p->set};
    if ((rc = apply_table(L, &t, e->value))) return rc;
  }
  return 0;
}

static tk__budget *find_or_add_budget(tk_config *c, const char *name, size_t len) {
  for (size_t i = 0; i < c->nbudgets; i++)
    if (strlen(c->budgets[i].name) == len && memcmp(c->budgets[i].name, name, len) == 0)
      return &c->budgets[i];
  if (c->nbudgets == c->budgets_cap) {
    size_t cap = c->budgets_cap ? 2 * c->budgets_cap : 4;
    tk__budget *grown = realloc(c->budgets, cap * sizeof *grown);
    if (grown == NULL) return NULL;
    c->budgets = grown;
    c->budgets_cap = cap;
  }
  tk__budget *b = &c->budgets[c->nbudgets];
  memset(b, 0, sizeof *b); /* origins: built in */
  if ((b->name = tk__config_strdup(c, name, len)) == NULL) return NULL;
  for (size_t i = 0; i < tk__budget_schema.nkeys; i++)
    tk__field_default(&tk__budget_schema.keys[i], &b->s);
  c->nbudgets++;
  return b;
}

/* [budgets.NAME] tables: named like profiles, each key not set keeping its
 * built-in default. */
static int apply_budgets(const tk__layer *L, const tk_toml_value *budgets) {
  for (size_t i = 0; i < tk_toml_table_len(budgets); i++) {
    const tk_toml_entry *e = tk_toml_table_at(budgets, i);
    int rc = named_table(L, "budgets", "budget", e);
    if (rc) return rc;
    tk__budget *b = find_or_add_budget(L->c, e->key, e->key_len);
    if (b == NULL) return tk_err_set(L->err, TK_ENOMEM, "out of memory reading the budgets");
    char path[KEY_MAX];
    join(path, "budgets", e->key, e->key_len);
    target t = {path, &tk__budget_schema, &b->s, b->origin, NULL};
    if ((rc = apply_table(L, &t, e->value))) return rc;
  }
  return 0;
}

static int apply_backoff(const tk__layer *L, const tk_toml_value *table) {
  tk__profile *d = &L->c->profiles[0];
  target t = {"backoff", &tk__backoff_schema, &d->own, d->origin, NULL};
  for (size_t i = 0; i < tk_toml_table_len(table); i++) {
    const tk_toml_entry *e = tk_toml_table_at(table, i);
    int rc;
    if (strcmp(e->key, "profiles") == 0) {
      if ((rc = need_table(L, "backoff", e)) || (rc = apply_profiles(L, e->value))) return rc;
    } else if ((rc = apply_key(L, &t, e, "profiles"))) {
      return rc;
    }
  }
  return 0;
}

int tk__apply_layer(const tk__layer *L, const tk_toml_value *root) {
  tk_config *c = L->c;
  target engine = {"engine", &tk__engine_schema, &c->engine, c->engine_origin, NULL};
  target batch = {"batch", &tk__batch_schema, &c->batch, c->batch_origin, NULL};
  target retention = {"retention", &tk__retention_schema, &c->retention, c->retention_origin,
                      NULL};
  target limits = {"limits", &tk__limits_schema, &c->limits, c->limits_origin, NULL};
  target server = {"server", &tk__server_schema, &c->server, c->server_origin, NULL};
  for (size_t i = 0; i < tk_toml_table_len(root); i++) {
    const tk_toml_entry *e = tk_toml_table_at(root, i);
    const target *t = NULL;
    int budgets = strcmp(e->key, "budgets") == 0;
    int schedules = strcmp(e->key, "schedules") == 0;
    int queues = strcmp(e->key, "queues") == 0;
    if (strcmp(e->key, "engine") == 0) t = &engine;
    else if (strcmp(e->key, "batch") == 0) t = &batch;
    else if (strcmp(e->key, "retention") == 0) t = &retention;
    else if (strcmp(e->key, "limits") == 0) t = &limits;
    else if (strcmp(e->key, "server") == 0) t = &server;
    else if (strcmp(e->key, "backoff") != 0 && !budgets && !schedules && !queues)
      return unknown_key(L, "", e, sections, sizeof sections / sizeof sections[0]);
    int rc = need_table(L, "", e);
    if (rc == 0 && schedules) rc = tk__apply_schedules(L, e->value);
    else if (rc == 0 && queues) rc = tk__apply_queues(L, e->value);
    else if (rc == 0 && budgets) rc = apply_budgets(L, e->value);
    else if (rc == 0) rc = t ? apply_table(L, t, e->value) : apply_backoff(L, e->value);
    if (rc) return rc;
  }
  return 0;
}
