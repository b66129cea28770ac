/* The loaded configuration: accessors, owned strings, freeing. */
#include "config/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *tk__config_strdup(tk_config *c, const char *s, size_t len) {
  if (c->npool == c->pool_cap) {
    size_t cap = c->pool_cap ? 2 * c->pool_cap : 16;
    char **grown = realloc(c->pool, cap * sizeof *grown);
    if (grown == NULL) return NULL;
    c->pool = grown;
    c->pool_cap = cap;
  }
  char *copy = malloc(len + 1);
  if (copy == NULL) return NULL;
  memcpy(copy, s, len);
  copy[len] = '\0';
  c->pool[c->npool++] = copy;
  return copy;
}

void tk_config_free(tk_config *c) {
  if (c == NULL) return;
  for (size_t i = 0; i < c->npool; i++) free(c->pool[i]);
  free(c->pool);
  free(c->profiles);
  free(c->budgets);
  free(c->schedules);
  free(c->queues);
  free(c->settings);
  free(c);
}

const tk_backoff_policy *tk_config_profile(const tk_config *c, const char *name) {
  for (size_t i = 0; i < c->nprofiles; i++)
    if (strcmp(c->profiles[i].name, name) == 0) return &c->profiles[i].eff;
  return NULL;
}

size_t tk_config_profile_count(const tk_config *c) { return c->nprofiles; }

const char *tk_config_profile_name(const tk_config *c, size_t i) {
  return i < c->nprofiles ? c->profiles[i].name : NULL;
}

const tk_engine_settings *tk_config_engine(const tk_config *c) { return &c->engine; }

const tk_batch_settings *tk_config_batch(const tk_config *c) { return &c->batch; }

const tk_retention_settings *tk_config_retention(const tk_config *c) { return &c->retention; }
const tk_limits_settings *tk_config_limits(const tk_config *c) { return &c->limits; }
const tk_server_settings *tk_config_server(const tk_config *c) { return &c->server; }

const tk_budget_settings *tk_config_budget(const tk_config *c, const char *name) {
  for (size_t i = 0; i < c->nbudgets; i++)
    if (strcmp(c->budgets[i].name, name) == 0) return &c->budgets[i].s;
  return NULL;
}

size_t tk_config_budget_count(const tk_config *c) { return c->nbudgets; }

const char *tk_config_budget_name(const tk_config *c, size_t i) {
  return i < c->nbudgets ? c->budgets[i].name : NULL;
}

size_t tk_config_setting_count(const tk_config *c) { return c->nsettings; }

const tk_config_setting *tk_config_setting_at(const tk_config *c, size_t i) {
  return i < c->nsettings ? &c->settings[i] : NULL;
}

const tk_config_setting *tk_config_find(const tk_config *c, const char *key) {
  for (size_t i = 0; i < c->nsettings; i++)
    if (strcmp(c->settings[i].key, key) == 0) return &c->settings[i];
  return NULL;
}

int tk_config_origin_format(const tk_config_origin *o, char *buf, size_t len) {
  switch (o->kind) {
  case TK_CONFIG_FILE: return snprintf(buf, len, "%s:%u", o->file, (unsigned)o->line);
  case TK_CONFIG_SET: return snprintf(buf, len, "--set");
  case TK_CONFIG_DEFAULT: break;
  }
  return snprintf(buf, len, "default");
}

int tk__origin_place(const tk_config_origin *o, char *buf, size_t len) {
  switch (o->kind) {
  case TK_CONFIG_FILE:
    return snprintf(buf, len, "%s:%u:%u", o->file, (unsigned)o->line, (unsigned)o->column);
  case TK_CONFIG_SET: return snprintf(buf, len, "--set %s", o->file);
  case TK_CONFIG_DEFAULT: break;
  }
  return snprintf(buf, len, "default");
}
