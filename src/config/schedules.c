/* [schedules.NAME] tables (DESIGN §16, docs/schedules.md): read each key of
 * a layer onto the configuration's schedules (a later layer sets single
 * keys of a schedule an earlier one defined), checking the expression,
 * the zone, `missed` and the context where the file says them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/cron.h>
#include <tasker/schedule.h>

#include "config/apply.h"
#include "config/internal.h"
#include "toml/json.h"
#include "schedule/def.h"

/* The keys of a table, in the order of tk__schedule_cfg.key_at. */
static const char *const keys[TK__SCHEDULE_NKEYS] = {"cron",    "zone",    "template",
                                                     "version", "context", "missed"};
enum { K_CRON, K_ZONE, K_TEMPLATE, K_VERSION, K_CONTEXT, K_MISSED };

/* The index of key in keys[], or TK__SCHEDULE_NKEYS. */
static size_t key_index(const char *key) {
  size_t k = 0;
  while (k < TK__SCHEDULE_NKEYS && strcmp(key, keys[k]) != 0) k++;
  return k;
}

/* Where pos of layer L is. */
static tk_config_origin origin_at(const tk__layer *L, tk_toml_pos pos) {
  tk_config_origin o = L->where;
  o.line = pos.line;
  o.column = pos.column;
  return o;
}

/* "PLACE: message" at origin o: TK_ECONFIG in err. */
static int fail_origin(tk_err *err, const tk_config_origin *o, const char *msg) {
  char where[TK_ERR_MSG_MAX];
  tk__origin_place(o, where, sizeof where);
  return tk_err_set(err, TK_ECONFIG, "%s: %s", where, msg);
}

/* "PLACE: message" at pos of layer L: TK_ECONFIG. */
static int fail_at(const tk__layer *L, tk_toml_pos pos, const char *msg) {
  tk_config_origin o = origin_at(L, pos);
  return fail_origin(L->err, &o, msg);
}

/* The schedule called name in c, added (all keys unset) when missing. */
static tk__schedule_cfg *find_or_add(tk_config *c, const char *name, size_t len) {
  for (size_t i = 0; i < c->nschedules; i++)
    if (strlen(c->schedules[i].def.name) == len && memcmp(c->schedules[i].def.name, name, len) == 0)
      return &c->schedules[i];
  if (c->nschedules == c->schedules_cap) {
    size_t cap = c->schedules_cap ? 2 * c->schedules_cap : 4;
    tk__schedule_cfg *grown = realloc(c->schedules, cap * sizeof *grown);
    if (grown == NULL) return NULL;
    c->schedules = grown;
    c->schedules_cap = cap;
  }
  tk__schedule_cfg *s = &c->schedules[c->nschedules];
  memset(s, 0, sizeof *s);
  if ((s->def.name = tk__config_strdup(c, name, len)) == NULL) return NULL;
  c->nschedules++;
  return s;
}

/* Set key e of schedule s (named `name`) from layer L. */
static int apply_key(const tk__layer *L, tk__schedule_cfg *s, const tk_toml_entry *e) {
  char msg[TK_ERR_MSG_MAX];
  const char *name = s->def.name;
  size_t len = 0;
  const char *text = tk_toml_string(e->value, &len);
  tk_toml_pos at = tk_toml_pos_of(e->value);
  size_t k = key_index(e->key);
  if (k < TK__SCHEDULE_NKEYS) s->key_at[k] = origin_at(L, at);
  if (k == K_CONTEXT) {
    if (tk_toml_type_of(e->value) != TK_TOML_TABLE) {
      snprintf(msg, sizeof msg, "schedules.%s.context: expected a table such as "
               "{ day = \"today\" }, got %s", name,
               tk_toml_type_name(tk_toml_type_of(e->value)));
      return fail_at(L, at, msg);
    }
    json_t *o;
    const tk_toml_value *bad = NULL;
    int rc = tk__toml_to_json(e->value, &o, &bad);
    if (rc == TK_ECONFIG) {
      snprintf(msg, sizeof msg, "schedules.%s.context: a float JSON cannot hold (nan or inf)",
               name);
      return fail_at(L, tk_toml_pos_of(bad), msg);
    }
    char *dump = rc == 0 ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    s->def.context_json = dump ? tk__config_strdup(L->c, dump, strlen(dump)) : NULL;
    free(dump);
    return s->def.context_json ? 0 : tk_err_set(L->err, TK_ENOMEM, "out of memory");
  }
  if (k == TK__SCHEDULE_NKEYS) {
    const char *near = tk__suggest(e->key, keys, TK__SCHEDULE_NKEYS);
    snprintf(msg, sizeof msg, "schedules.%s: unknown key \"%s\"%s%s%s (expected cron, zone, "
             "template, version, context, missed)", name, e->key, near ? "; did you mean \"" : "",
             near ? near : "", near ? "\"?" : "");
    return fail_at(L, e->key_pos, msg);
  }
  if (text == NULL) {
    snprintf(msg, sizeof msg, "schedules.%s.%s: expected a string, got %s", name, e->key,
             tk_toml_type_name(tk_toml_type_of(e->value)));
    return fail_at(L, at, msg);
  }
  char *copy = tk__config_strdup(L->c, text, len);
  if (copy == NULL) return tk_err_set(L->err, TK_ENOMEM, "out of memory");
  if (k == K_MISSED) {
    if (tk__schedule_missed_parse(copy, &s->def.missed) != 0) {
      snprintf(msg, sizeof msg, "schedules.%s.missed = \"%s\": expected \"skip\" (missed slots "
               "do not fire) or \"catch_up\" (they fire, oldest first)", name, copy);
      return fail_at(L, at, msg);
    }
    return 0;
  }
  if (k == K_CRON) s->def.cron = copy;
  else if (k == K_ZONE) s->def.zone = copy;
  else if (k == K_TEMPLATE) s->def.template_name = copy;
  else s->def.version = copy;
  return 0;
}

/* After every layer: the schedule has what it needs, its zone is one
 * (placed at the zone's value), and its expression parses in it. */
static int check(const tk__schedule_cfg *s, tk_err *err) {
  char msg[TK_ERR_MSG_MAX];
  const char *missing = s->def.cron == NULL ? "cron" : s->def.template_name ? NULL : "template";
  if (missing) {
    snprintf(msg, sizeof msg, "schedules.%s: %s is required (e.g. cron = \"0 2 * * *\", "
             "template = \"etl\")", s->def.name, missing);
    return fail_origin(err, &s->table_at, msg);
  }
  tk_err e;
  int rc = tk_schedule_zone_check(s->def.zone, &e);
  if (rc) {
    snprintf(msg, sizeof msg, "schedules.%s.zone: %.400s", s->def.name, e.msg);
    return fail_origin(err, &s->key_at[K_ZONE], msg);
  }
  tk_cron *c = NULL;
  rc = tk_cron_parse(s->def.cron, s->def.zone, &c, &e);
  tk_cron_free(c);
  if (rc == 0) return 0;
  snprintf(msg, sizeof msg, "schedules.%s.cron: %.400s", s->def.name, e.msg);
  return fail_origin(err, &s->key_at[K_CRON], msg);
}

int tk__schedules_finish(const tk_config *c, tk_err *err) {
  for (size_t i = 0; i < c->nschedules; i++) {
    int rc = check(&c->schedules[i], err);
    if (rc) return rc;
  }
  return 0;
}

int tk__apply_schedules(const tk__layer *L, const tk_toml_value *table) {
  for (size_t i = 0; i < tk_toml_table_len(table); i++) {
    const tk_toml_entry *e = tk_toml_table_at(table, i);
    char name[TK_SCHEDULE_NAME_MAX + 1] = "";
    tk_err nerr;
    snprintf(name, sizeof name, "%.*s", (int)e->key_len, e->key);
    if (e->key_len > TK_SCHEDULE_NAME_MAX || tk__schedule_name_check(name, &nerr) != 0)
      return fail_at(L, e->key_pos, e->key_len > TK_SCHEDULE_NAME_MAX
                                        ? "schedules: a schedule name is at most 64 bytes"
                                        : nerr.msg);
    if (tk_toml_type_of(e->value) != TK_TOML_TABLE) {
      char msg[320];
      snprintf(msg, sizeof msg, "schedules.%s: expected a table ([schedules.%s]), got %s", name,
               name, tk_toml_type_name(tk_toml_type_of(e->value)));
      return fail_at(L, tk_toml_pos_of(e->value), msg);
    }
    tk__schedule_cfg *s = find_or_add(L->c, e->key, e->key_len);
    if (s == NULL) return tk_err_set(L->err, TK_ENOMEM, "out of memory reading the schedules");
    if (s->table_at.kind == 0) s->table_at = origin_at(L, e->key_pos);
    for (size_t k = 0; k < tk_toml_table_len(e->value); k++) {
      int rc = apply_key(L, s, tk_toml_table_at(e->value, k));
      if (rc) return rc;
    }
  }
  return 0;
}

size_t tk_config_schedule_count(const tk_config *c) { return c ? c->nschedules : 0; }

const tk_schedule_def *tk_config_schedule_at(const tk_config *c, size_t i) {
  return c && i < c->nschedules ? &c->schedules[i].def : NULL;
}

int tk_config_schedule_origin(const tk_config *c, size_t i, const char *key,
                              tk_config_origin *out) {
  size_t k = key_index(key);
  if (c == NULL || i >= c->nschedules || k == TK__SCHEDULE_NKEYS) return TK_EINVAL;
  *out = c->schedules[i].key_at[k];
  return 0;
}
