/* Queues for operators (DESIGN §19): the configuration's limits given to
 * the store, and every queue as `tasker queues`, GET /api/v1/queues and
 * the dashboard show it, built here once. */
#include <tasker/queue.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "store/store.h"

int tk_queue_sync(tk_store *s, const tk_config *cfg, tk_err *err) {
  size_t n = tk_config_queue_count(cfg);
  tk__queue_def *defs = calloc(n ? n : 1, sizeof *defs);
  if (defs == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory syncing queues");
  for (size_t i = 0; i < n; i++) {
    const tk_queue_settings *q = tk_config_queue_at(cfg, i);
    defs[i] = (tk__queue_def){q->name, q->concurrency, q->rate, q->burst};
  }
  int rc = s->ops->queue_put(s, defs, (int)n, err);
  free(defs);
  return rc;
}

/* Whether x is a whole number (to a part in 10^9: a count per minute or
 * hour divided into seconds and multiplied back). */
static int whole(double x) { return x >= 0.5 && fabs(x - round(x)) <= 1e-9 * x; }

/* A rate in steps per second as the configuration writes it: "50/s",
 * "300/m" when it is a whole count per minute, "1000/h"; else "0.5/s". */
static void rate_text(double per_second, char *buf, size_t len) {
  if (whole(per_second)) snprintf(buf, len, "%.0f/s", round(per_second));
  else if (whole(per_second * 60)) snprintf(buf, len, "%.0f/m", round(per_second * 60));
  else if (whole(per_second * 3600)) snprintf(buf, len, "%.0f/h", round(per_second * 3600));
  else snprintf(buf, len, "%g/s", per_second);
}

/* A limit or null for none (0). */
static json_t *limit(int64_t v) { return v > 0 ? json_integer(v) : json_null(); }

static json_t *queue_json(const tk__queue_rec *q, int64_t now) {
  char rate[48];
  int has_rate = q->rate > 0, has_ready = q->oldest_ready_at != TK__NONE;
  rate_text(q->rate, rate, sizeof rate);
  return json_pack(
      "{s:s, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:b}", "name", q->name,
      "ready", (json_int_t)q->ready, "scheduled", (json_int_t)q->scheduled, "in_progress",
      (json_int_t)q->in_progress, "concurrency", limit(q->concurrency), "rate",
      has_rate ? json_string(rate) : json_null(), "rate_per_second",
      has_rate ? json_real(q->rate) : json_null(), "burst",
      has_rate ? json_integer(q->burst) : json_null(), "tokens",
      /* Tenths: a bucket refills continuously; more digits say nothing. */
      has_rate ? json_real(floor(q->tokens * 10) / 10) : json_null(), "oldest_ready_at",
      has_ready ? json_integer(q->oldest_ready_at) : json_null(), "oldest_ready_age_ms",
      has_ready ? json_integer(now > q->oldest_ready_at ? now - q->oldest_ready_at : 0)
                : json_null(),
      "workers_seen", (json_int_t)q->workers_seen, "worker", q->worker);
}

int tk_queues_json(tk_store *s, int64_t now, char **json, tk_err *err) {
  *json = NULL;
  tk__queue_rec *recs = NULL;
  int n = 0;
  int rc = s->ops->queue_list(s, now, &recs, &n, err);
  if (rc) return rc;
  json_t *all = json_array();
  for (int i = 0; all && i < n; i++)
    if (json_array_append_new(all, queue_json(&recs[i], now)) != 0) {
      json_decref(all);
      all = NULL;
    }
  free(recs);
  *json = all ? json_dumps(all, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))
              : NULL;
  json_decref(all);
  return *json ? 0 : tk_err_set(err, TK_ENOMEM, "out of memory listing queues");
}
