/* After the last layer: profiles inherit from the effective default,
 * cross-field rules are checked on the effective values, and the list of
 * settings for `config show` is built. */
#include "config/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Two keys of one table whose values must be ordered: low <= high (or
 * low < high when strict). */
typedef struct order_rule {
  const char *low, *high;
  int strict;
  const char *low_verb;  /* when low is to blame: "is above" */
  const char *high_verb; /* when high is to blame: "is below" */
} order_rule;

static const order_rule delay_rule = {"min_delay", "max_delay", 0, "is above", "is below"};
static const order_rule beat_rule = {"heartbeat", "lease", 1, "must be below", "must be above"};

/* The values of one table as the rule sees them. */
typedef struct view {
  const char *path;
  const tk__schema *schema;
  const void *obj;
  const tk_config_origin *origin; /* effective origin per key */
  uint32_t own;                   /* keys the table set itself (profiles) */
} view;

static int check_order(const view *v, const order_rule *r, tk_err *err) {
  const tk__key *lo = tk__schema_find(v->schema, r->low, strlen(r->low));
  const tk__key *hi = tk__schema_find(v->schema, r->high, strlen(r->high));
  int64_t a = *TK__CFIELD(v->obj, lo, int64_t);
  int64_t b = *TK__CFIELD(v->obj, hi, int64_t);
  if (r->strict ? a < b : a <= b) return 0;
  size_t il = tk__schema_index(v->schema, lo), ih = tk__schema_index(v->schema, hi);
  /* Blame the value a profile set itself over one it inherited, else the
   * later layer, else the high one. */
  int own_lo = (v->own >> il) & 1, own_hi = (v->own >> ih) & 1;
  int blame_low = own_lo != own_hi ? own_lo : v->origin[il].layer > v->origin[ih].layer;
  const tk__key *bk = blame_low ? lo : hi, *ok = blame_low ? hi : lo;
  const tk_config_origin *bo = &v->origin[blame_low ? il : ih];
  const tk_config_origin *oo = &v->origin[blame_low ? ih : il];
  char bplace[TK_ERR_MSG_MAX], oplace[TK_ERR_MSG_MAX], bval[64], oval[64];
  tk__origin_place(bo, bplace, sizeof bplace);
  tk__origin_place(oo, oplace, sizeof oplace);
  tk__field_format(bk, v->obj, bval, sizeof bval);
  tk__field_format(ok, v->obj, oval, sizeof oval);
  return tk_err_set(err, TK_ECONFIG, "%s: %s.%s = %s %s %s = %s (%s)", bplace, v->path, bk->name,
                    bval, blame_low ? r->low_verb : r->high_verb, ok->name, oval, oplace);
}

/* The effective policy and origins of profile p. */
static void inherit(tk_config *c, tk__profile *p, tk_config_origin *origin) {
  const tk__profile *d = &c->profiles[0];
  p->eff = d->own;
  for (size_t i = 0; i < TK__BACKOFF_NKEYS; i++) {
    int own = (p->set >> i) & 1;
    if (own) tk__field_copy(&tk__backoff_schema.keys[i], &p->eff, &p->own);
    origin[i] = own ? p->origin[i] : d->origin[i];
  }
}

#define PATH_MAX_LEN 128

/* Profile i resolved, as a view; path and origin are the caller's
 * buffers. The default profile owns every key, so it blames by layer. */
static view profile_view(tk_config *c, size_t i, char *path, tk_config_origin *origin) {
  tk__profile *p = &c->profiles[i];
  inherit(c, p, origin);
  if (i == 0) snprintf(path, PATH_MAX_LEN, "backoff");
  else snprintf(path, PATH_MAX_LEN, "backoff.profiles.%s", p->name);
  view v = {path, &tk__backoff_schema, &p->eff, origin, i == 0 ? 0 : p->set};
  return v;
}

/* The cross-field checks of one resolved profile. */
static int check_profile(const view *v, tk_err *err) {
  int rc = check_order(v, &delay_rule, err);
  if (rc) return rc;
  /* The per-key checks cover every invariant; this is a backstop. */
  tk_err why;
  if (tk_backoff_policy_validate(v->obj, &why) != 0)
    return tk_err_set(err, TK_ECONFIG, "%s: %s", v->path, why.msg);
  return 0;
}

/* Append one setting per key of a table. `inherited` names the default
 * profile's keys for a profile that did not set them. */
static int add_settings(tk_config *c, const view *v, const char *const *inherited) {
  for (size_t i = 0; i < v->schema->nkeys; i++) {
    const tk__key *k = &v->schema->keys[i];
    tk_config_setting *s = &c->settings[c->nsettings];
    memset(s, 0, sizeof *s);
    char key[160], text[1024];
    snprintf(key, sizeof key, "%s.%s", v->path, k->name);
    tk__field_format(k, v->obj, text, sizeof text);
    if ((s->key = tk__config_strdup(c, key, strlen(key))) == NULL ||
        (s->text = tk__config_strdup(c, text, strlen(text))) == NULL)
      return TK_ENOMEM;
    switch (k->kind) {
    case TK__K_DURATIONS:
      s->kind = TK_CONFIG_DURATIONS;
      s->list = TK__CFIELD(v->obj, k, int64_t);
      s->list_len = *TK__CLEN(v->obj, k);
      break;
    case TK__K_DURATION:
    case TK__K_INT:
      s->kind = k->kind == TK__K_INT ? TK_CONFIG_INTEGER : TK_CONFIG_DURATION;
      s->i = *TK__CFIELD(v->obj, k, int64_t);
      break;
    case TK__K_NUMBER: s->kind = TK_CONFIG_NUMBER; s->f = *TK__CFIELD(v->obj, k, double); break;
    case TK__K_JITTER:
      s->kind = TK_CONFIG_STRING;
      s->s = tk_jitter_name(*TK__CFIELD(v->obj, k, tk_jitter));
      break;
    case TK__K_STRING:
      s->kind = TK_CONFIG_STRING;
      s->s = *TK__CFIELD(v->obj, k, const char *);
      break;
    case TK__K_BOOL: s->kind = TK_CONFIG_BOOLEAN; s->i = *TK__CFIELD(v->obj, k, int); break;
    TK__JSON_ONLY_KINDS: break; /* not in a settings struct */
    }
    s->origin = v->origin[i];
    if (inherited && !((v->own >> i) & 1)) s->inherited_from = inherited[i];
    c->nsettings++;
  }
  return 0;
}

/* Engine key `key` (a string) names a configured backoff profile. */
static int check_profile_name(tk_config *c, const char *key, tk_err *err) {
  const tk__key *k = tk__schema_find(&tk__engine_schema, key, strlen(key));
  const char *name = *TK__CFIELD(&c->engine, k, const char *);
  for (size_t i = 0; i < c->nprofiles; i++)
    if (strcmp(c->profiles[i].name, name) == 0) return 0;
  char place[TK_ERR_MSG_MAX], known[256] = "";
  tk__origin_place(&c->engine_origin[tk__schema_index(&tk__engine_schema, k)], place,
                   sizeof place);
  for (size_t i = 0, len = 0; i < c->nprofiles && len < sizeof known; i++)
    len += (size_t)snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "",
                            c->profiles[i].name);
  return tk_err_set(err, TK_ECONFIG,
                    "%s: engine.%s = \"%s\": no such backoff profile (configured: %s)", place,
                    key, name, known);
}

/* The checks of a budget that span keys or are not a range: the window is
 * a multiple of 100 ms, and the floor allows a retry per window. Each names
 * the place of the value to blame (for the floor, the one set by the later
 * layer), then tk_retry_budget_config_validate is the backstop. */
static int check_budget(const tk__budget *b, tk_err *err) {
  const tk_retry_budget_config *c = &b->s.budget;
  if (tk_retry_budget_config_validate(c, NULL) == 0) return 0;
  enum { RATIO, WINDOW, MIN }; /* key indices in tk__budget_schema */
  char place[TK_ERR_MSG_MAX], other[TK_ERR_MSG_MAX], w[32], m[32];
  tk__field_format(&tk__budget_schema.keys[WINDOW], &b->s, w, sizeof w);
  tk__field_format(&tk__budget_schema.keys[MIN], &b->s, m, sizeof m);
  if (c->window_ms % TK_RETRY_BUDGET_SLOTS != 0) {
    tk__origin_place(&b->origin[WINDOW], place, sizeof place);
    return tk_err_set(err, TK_ECONFIG,
                      "%s: budgets.%s.window = %s: must be a multiple of 100ms (the window "
                      "slides in 100 equal steps)",
                      place, b->name, w);
  }
  double per_window = c->min_per_second * (double)c->window_ms / 1000.0;
  if (per_window < 1.0) {
    int blame_min = b->origin[MIN].layer >= b->origin[WINDOW].layer;
    tk__origin_place(&b->origin[blame_min ? MIN : WINDOW], place, sizeof place);
    tk__origin_place(&b->origin[blame_min ? WINDOW : MIN], other, sizeof other);
    return tk_err_set(err, TK_ECONFIG,
                      "%s: budgets.%s.%s = %s: with %s = %s (%s) the floor allows %g retries "
                      "per window; min_per_second x window must be at least 1, or a deferred "
                      "retry could wait for first attempts that never come",
                      place, b->name, blame_min ? "min_per_second" : "window", blame_min ? m : w,
                      blame_min ? "window" : "min_per_second", blame_min ? w : m, other,
                      per_window);
  }
  tk_err why;
  tk_retry_budget_config_validate(c, &why);
  return tk_err_set(err, TK_ECONFIG, "budgets.%s: %s", b->name, why.msg);
}

/* Each profile is resolved once, checked and listed; then [engine],
 * [batch] and each budget. */
int tk__config_finish(tk_config *c, tk_err *err) {
  size_t total = c->nprofiles * TK__BACKOFF_NKEYS + TK__ENGINE_NKEYS + TK__BATCH_NKEYS +
                 TK__RETENTION_NKEYS + TK__LIMITS_NKEYS + TK__SERVER_NKEYS +
                 c->nbudgets * TK__BUDGET_NKEYS;
  if ((c->settings = calloc(total, sizeof *c->settings)) == NULL)
    return tk_err_set(err, TK_ENOMEM, "out of memory");
  const char *inherited[TK__BACKOFF_NKEYS]; /* the default profile's keys */
  int rc;
  for (size_t i = 0; i < c->nprofiles; i++) {
    char path[PATH_MAX_LEN];
    tk_config_origin origin[TK__BACKOFF_NKEYS];
    view v = profile_view(c, i, path, origin);
    if ((rc = check_profile(&v, err))) return rc;
    if (add_settings(c, &v, i == 0 ? NULL : inherited) != 0)
      return tk_err_set(err, TK_ENOMEM, "out of memory");
    if (i == 0)
      for (size_t k = 0; k < TK__BACKOFF_NKEYS; k++) inherited[k] = c->settings[k].key;
  }
  view engine = {"engine", &tk__engine_schema, &c->engine, c->engine_origin, 0};
  view batch = {"batch", &tk__batch_schema, &c->batch, c->batch_origin, 0};
  if ((rc = check_order(&engine, &beat_rule, err))) return rc;
  if ((rc = check_profile_name(c, "reconnect_backoff", err))) return rc;
  view retention = {"retention", &tk__retention_schema, &c->retention, c->retention_origin, 0};
  view limits = {"limits", &tk__limits_schema, &c->limits, c->limits_origin, 0};
  view server = {"server", &tk__server_schema, &c->server, c->server_origin, 0};
  if (add_settings(c, &engine, NULL) != 0 || add_settings(c, &batch, NULL) != 0 ||
      add_settings(c, &retention, NULL) != 0 || add_settings(c, &limits, NULL) != 0 ||
      add_settings(c, &server, NULL) != 0)
    return tk_err_set(err, TK_ENOMEM, "out of memory");
  for (size_t i = 0; i < c->nbudgets; i++) {
    tk__budget *b = &c->budgets[i];
    char path[PATH_MAX_LEN];
    snprintf(path, sizeof path, "budgets.%s", b->name);
    view v = {path, &tk__budget_schema, &b->s, b->origin, 0};
    if ((rc = check_budget(b, err))) return rc;
    if (add_settings(c, &v, NULL) != 0) return tk_err_set(err, TK_ENOMEM, "out of memory");
  }
  if ((rc = tk__queues_finish(c, err))) return rc;
  return tk__schedules_finish(c, err);
}
