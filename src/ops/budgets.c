/* Retry budgets for operators (DESIGN §14): every state the store keeps,
 * read as the engine reads it (its row's layout is engine/budget_row.h:
 * the budget's state, then the owners' books) and shown as `tasker
 * budgets`, GET /api/v1/budgets, the dashboard and the metrics show it,
 * built here once. */
#include <tasker/budget_report.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/duration.h>

#include "engine/budget_row.h"
#include "ops/budget_report.h"

/* Split a key "LEN:NAME" or "LEN:NAME@HOST" (engine/budgets.c, key_of);
 * a key of no such form is all name. */
static void split_key(const char *key, tk__budget_report *r) {
  char *end;
  unsigned long len = strtoul(key, &end, 10);
  r->has_host = 0;
  if (end == key || *end != ':' || strlen(end + 1) < len) {
    snprintf(r->name, sizeof r->name, "%s", key);
    return;
  }
  snprintf(r->name, sizeof r->name, "%.*s", (int)len, end + 1);
  const char *rest = end + 1 + len;
  if (*rest == '@') {
    r->has_host = 1;
    snprintf(r->host, sizeof r->host, "%s", rest + 1);
  }
}

/* One stored state at now: under the configuration's figures when cfg has
 * the budget (as the next orchestrator applying it would load it: a state
 * of another window starts empty), else under those it was written with. */
static void report_one(const tk__budget_rec *rec, const tk_config *cfg, int64_t now,
                       tk__budget_row *row, tk__budget_report *r) {
  memset(r, 0, sizeof *r);
  split_key(rec->key, r);
  r->updated_at = rec->updated_at;
  r->next_retry_at = r->reserved_until = -1;
  const tk_budget_settings *set = cfg ? tk_config_budget(cfg, r->name) : NULL;
  r->configured = cfg == NULL ? -1 : set != NULL;
  r->per_host = set ? set->per_host : r->has_host ? 1 : -1;
  if (set) r->cfg = set->budget;
  else if ((rec->len == TK__BUDGET_ROW_SIZE || rec->len == TK__BUDGET_ROW_SIZE_2) &&
           tk_retry_budget_saved_config(rec->state, TK_RETRY_BUDGET_STATE_SIZE, &r->cfg))
    ;
  else return; /* nothing known to read it by */
  r->known = 1;
  tk__budget_row_load(row, &r->cfg, rec->state, rec->len);
  tk_retry_budget *b = &row->b;
  r->first_attempts = b->total_firsts;
  r->retries = b->total_retries;
  r->deferred = b->total_deferred;
  r->brought_earlier = b->total_promoted;
  r->reserved = b->resv_started ? b->resv_live : 0;
  if (r->reserved > 0 && b->resv_last * b->slot_ms > now) r->reserved_until = b->resv_last * b->slot_ms;
  r->available = tk_retry_budget_available(b, now);
  int64_t at;
  if (r->available == 0 && !tk_retry_budget_try(b, now, &at)) r->next_retry_at = at;
}

int tk__budget_report_read(tk_store *s, const tk_config *cfg, int64_t now,
                           tk__budget_report **out, int *n, tk_err *err) {
  *out = NULL;
  *n = 0;
  if (s->ops->budget_list == NULL) return 0;
  tk__budget_rec *recs = NULL;
  int nrecs = 0;
  int rc = s->ops->budget_list(s, &recs, &nrecs, err);
  if (rc) return rc;
  tk__budget_row *row = malloc(sizeof *row);
  tk__budget_report *v = nrecs ? calloc((size_t)nrecs, sizeof *v) : NULL;
  if (row == NULL || (nrecs && v == NULL)) {
    rc = tk_err_set(err, TK_ENOMEM, "out of memory reading the retry budgets");
    free(v);
    v = NULL;
  }
  for (int i = 0; rc == 0 && i < nrecs; i++) report_one(&recs[i], cfg, now, row, &v[i]);
  free(row);
  tk__budget_recs_free(recs, nrecs);
  if (rc) return rc;
  *out = v;
  *n = nrecs;
  return 0;
}

static json_t *or_null(int known, json_t *v) {
  if (known) return v;
  json_decref(v);
  return json_null();
}

static json_t *time_or_null(int64_t t) { return t >= 0 ? json_integer(t) : json_null(); }

static json_t *budget_json(const tk__budget_report *r) {
  return json_pack(
      "{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:o, s:I, s:I, s:I, s:I, s:I}",
      "name", r->name, "host", r->has_host ? json_string(r->host) : json_null(), "configured",
      r->configured < 0 ? json_null() : json_boolean(r->configured), "per_host",
      r->per_host < 0 ? json_null() : json_boolean(r->per_host), "ratio",
      or_null(r->known, json_real(r->cfg.ratio)), "window_ms",
      or_null(r->known, json_integer(r->cfg.window_ms)), "min_per_second",
      or_null(r->known, json_real(r->cfg.min_per_second)), "available",
      or_null(r->known, json_integer(r->available)), "next_retry_at",
      time_or_null(r->next_retry_at), "reserved", (json_int_t)r->reserved, "reserved_until",
      time_or_null(r->reserved_until), "first_attempts", (json_int_t)r->first_attempts,
      "retries", (json_int_t)r->retries, "deferred", (json_int_t)r->deferred,
      "brought_earlier", (json_int_t)r->brought_earlier, "updated_at",
      (json_int_t)r->updated_at);
}

int tk_budgets_json(tk_store *s, const tk_config *cfg, int64_t now, char **json, tk_err *err) {
  *json = NULL;
  tk__budget_report *v = NULL;
  int n = 0;
  int rc = tk__budget_report_read(s, cfg, now, &v, &n, err);
  if (rc) return rc;
  json_t *all = json_array();
  for (int i = 0; all && i < n; i++)
    if (json_array_append_new(all, budget_json(&v[i])) != 0) {
      json_decref(all);
      all = NULL;
    }
  free(v);
  *json = all ? json_dumps(all, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))
              : NULL;
  json_decref(all);
  return *json ? 0 : tk_err_set(err, TK_ENOMEM, "out of memory listing retry budgets");
}
