/* Built-in defaults, applied from the key table in schema.c so that every
 * default delay, cap and limit is written down exactly once. */
#include "config/internal.h"

#include <stdlib.h>
#include <string.h>

void tk__field_default(const tk__key *k, void *obj) {
  switch (k->kind) {
  case TK__K_DURATIONS: *TK__LEN(obj, k) = 0; break;
  case TK__K_DURATION:
  case TK__K_INT: *TK__FIELD(obj, k, int64_t) = k->def_i; break;
  case TK__K_NUMBER: *TK__FIELD(obj, k, double) = k->def_f; break;
  case TK__K_JITTER: *TK__FIELD(obj, k, tk_jitter) = (tk_jitter)k->def_i; break;
  case TK__K_STRING: *TK__FIELD(obj, k, const char *) = k->def_s; break;
  case TK__K_BOOL: *TK__FIELD(obj, k, int) = k->def_i != 0; break;
  TK__JSON_ONLY_KINDS: break; /* not in a settings struct */
  }
}

/* Every key of s set to its default in obj. */
static void apply_defaults(const tk__schema *s, void *obj) {
  for (size_t i = 0; i < s->nkeys; i++) tk__field_default(&s->keys[i], obj);
}

void tk_backoff_policy_default(tk_backoff_policy *p) {
  memset(p, 0, sizeof *p);
  apply_defaults(&tk__backoff_schema, p);
}

int tk__config_init_defaults(tk_config *c) {
  c->profiles = calloc(4, sizeof *c->profiles);
  if (c->profiles == NULL) return TK_ENOMEM;
  c->profiles_cap = 4;
  c->nprofiles = 1;
  tk__profile *d = &c->profiles[0];
  d->name = tk__config_strdup(c, "default", 7);
  if (d->name == NULL) return TK_ENOMEM;
  tk_backoff_policy_default(&d->own);
  d->set = (1u << TK__BACKOFF_NKEYS) - 1; /* the default profile sets every key */
  apply_defaults(&tk__engine_schema, &c->engine);
  apply_defaults(&tk__batch_schema, &c->batch);
  apply_defaults(&tk__retention_schema, &c->retention);
  apply_defaults(&tk__limits_schema, &c->limits);
  apply_defaults(&tk__server_schema, &c->server);
  /* Origins are zeroed: kind TK_CONFIG_DEFAULT, layer 0. */
  return 0;
}
