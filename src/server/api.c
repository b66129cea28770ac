/* The API's endpoints that read one thing (docs/api.md): status, one task,
 * templates, activity, metrics; and the dispatch of every route. */
#include "server/server_internal.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/duration.h>
#include <tasker/metrics.h>
#include <tasker/query.h>
#include <tasker/budget_report.h>
#include <tasker/queue.h>

#include "server/assets.h"
#include "store/store.h"

void tk__respond_tk_error(tk_server *s, tk__response *out, const tk_err *err, const char *param) {
  tk__api_error e;
  const char *msg = tk_err_message(err);
  switch (err->code) {
    case TK_ENOENT: tk__api_fail(&e, 404, "not_found", param, "%s", msg); break;
    case TK_ESTATE: tk__api_fail(&e, 409, "conflict", param, "%s", msg); break;
    case TK_EINVAL: tk__api_fail(&e, 400, "bad_request", param, "%s", msg); break;
    case TK_EDISCONNECTED: {
      /* The next request should find the store again: reconnect now (a
       * database restart), and say the request did not happen. */
      tk_err again;
      int back = s->store && s->store->ops->reconnect &&
                 s->store->ops->reconnect(s->store, &again) == 0;
      s->store_lost = !back;
      tk__server_log(s, TK_LOG_WARN, "store connection lost: %s (%s)", msg,
                     back ? "reconnected" : "not reconnected yet");
      tk__api_fail(&e, 503, "unavailable", NULL, "the store cannot be reached: %s; try again",
                   msg);
      break;
    }
    default:
      tk__server_log(s, TK_LOG_ERROR, "%s: %s", tk_err_name(err->code), msg);
      tk__api_fail(&e, 500, "internal", NULL, "%s", msg);
  }
  tk__respond_error(out, &e);
}

static int64_t now(const tk_server *s) { return tk_clock_now(&s->clock); }

/* The query of r, checked against `known` (NULL-terminated); -1 with the
 * error answered. */
static int read_query(const tk__route *r, const char *const *known, tk__query *q,
                      tk__response *out) {
  tk__api_error e;
  if (tk__query_parse(r->query, r->query_len, q, &e) != 0) {
    tk__respond_error(out, &e);
    return -1;
  }
  if (known && tk__query_only(q, known, &e) != 0) {
    tk__query_free(q);
    tk__respond_error(out, &e);
    return -1;
  }
  return 0;
}

/* The snapshot's figures, or counted now when there is no snapshot. */
static int figures(tk_server *s, char **status, char **metrics, tk_err *err) {
  if (s->snapshot) return tk__snapshot_get(s->snapshot, status, metrics, err);
  char *st, *m;
  int rc = tk__store_figures(s->store, now(s), &st, &m, err);
  if (rc) return rc;
  if (status) *status = st;
  else free(st);
  if (metrics) *metrics = m;
  else free(m);
  return 0;
}

/* GET /api/v1/status: the last count. */
static void get_status(tk_server *s, tk__response *out) {
  char *text;
  tk_err err;
  if (figures(s, &text, NULL, &err) != 0) tk__respond_tk_error(s, out, &err, NULL);
  else tk__respond_json(out, 200, text);
}

/* a then b as one malloc'd text; both are freed (either may be NULL).
 * NULL when both are, or when memory ran out. */
static char *joined(char *a, char *b) {
  if (a == NULL || b == NULL) return a ? a : b;
  size_t la = strlen(a), lb = strlen(b);
  char *both = realloc(a, la + lb + 1);
  if (both) memcpy(both + la, b, lb + 1);
  else free(a);
  free(b);
  return both;
}

/* /metrics: the store's figures, the metrics given or the server's
 * engine's, and the long-polls' series. */
static void get_metrics(tk_server *s, tk__response *out) {
  char *store_text = NULL, *engine_text = NULL;
  tk_err err;
  int rc = s->store ? figures(s, NULL, &store_text, &err) : 0;
  if (rc == 0 && s->metrics) rc = tk_metrics_render(s->metrics, &engine_text, NULL, &err);
  if (rc != 0) {
    free(store_text);
    tk__respond_tk_error(s, out, &err, NULL);
    return;
  }
  char *text = joined(store_text, engine_text);
  if (text && s->engine) text = joined(text, tk__workers_metrics(s));
  tk__respond_json(out, 200, text);
  out->content_type = text ? TK_METRICS_CONTENT_TYPE : NULL;
}

/* GET /api/v1/tasks/ID: tk_engine_task_json at the server's time. */
static void get_task(tk_server *s, const tk__route *r, tk__response *out) {
  char *text;
  tk_err err;
  if (tk_engine_task_json(s->store, r->task, now(s), &text, &err) != 0)
    tk__respond_tk_error(s, out, &err, "id");
  else
    tk__respond_json(out, 200, text);
}

/* GET /api/v1/tasks/ID/steps/STEP/instances: a page of a map step's
 * instances (tk_instances_json), after and limit checked first. */
static void get_instances(tk_server *s, const tk__route *r, const tk__query *q,
                          tk__response *out) {
  int64_t after, limit;
  tk__api_error e;
  if (tk__query_int(q, "after", 0, INT32_MAX - 1, -1, &after, &e) != 0 ||
      tk__query_int(q, "limit", 1, TK_PAGE_MAX, 50, &limit, &e) != 0) {
    tk__respond_error(out, &e);
    return;
  }
  char *text;
  tk_err err;
  if (tk_instances_json(s->store, r->task, r->step, (int)after, (int)limit, now(s), &text,
                        &err) != 0)
    /* The task's absence names the id; the rest (no such step, not a
     * map) the step. */
    tk__respond_tk_error(s, out, &err, strncmp(err.msg, "no task", 7) == 0 ? "id" : "step");
  else
    tk__respond_json(out, 200, text);
}

/* GET /api/v1/templates: every stored template. */
static void get_templates(tk_server *s, tk__response *out) {
  char *text;
  tk_err err;
  if (tk_template_list_json(s->store, &text, &err) != 0) tk__respond_tk_error(s, out, &err, NULL);
  else tk__respond_json(out, 200, text);
}

/* GET /api/v1/queues: every queue with its counts and limits now. */
static void get_queues(tk_server *s, tk__response *out) {
  char *text;
  tk_err err;
  if (tk_queues_json(s->store, now(s), &text, &err) != 0) tk__respond_tk_error(s, out, &err, NULL);
  else tk__respond_json(out, 200, text);
}

/* GET /api/v1/budgets: every retry budget state the store keeps, now,
 * read under the server's configuration. */
static void get_budgets(tk_server *s, tk__response *out) {
  char *text;
  tk_err err;
  if (tk_budgets_json(s->store, s->config, now(s), &text, &err) != 0)
    tk__respond_tk_error(s, out, &err, NULL);
  else
    tk__respond_json(out, 200, text);
}

/* One template: its entry of the list (one shape for both) plus its
 * definition. */
static void get_template(tk_server *s, const tk__route *r, const char *version,
                         tk__response *out) {
  tk__template_rec rec;
  tk_err err;
  char *list = NULL;
  if (tk__template_lookup(s->store, r->name, version, &rec, &err) != 0) {
    tk__respond_tk_error(s, out, &err, "name");
    return;
  }
  int rc = tk_template_list_json(s->store, &list, &err);
  json_t *all = rc == 0 ? json_loads(list, 0, NULL) : NULL, *found = NULL, *item;
  size_t i;
  json_array_foreach(all, i, item) {
    if (json_integer_value(json_object_get(item, "id")) == rec.id) found = item;
  }
  if (found) json_object_set_new(found, "definition", json_loads(rec.definition, 0, NULL));
  char *text = found ? json_dumps(found, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  if (rc != 0) {
    tk__respond_tk_error(s, out, &err, NULL);
  } else if (found == NULL) {
    tk_err_set(&err, TK_ENOENT, "template \"%s\" went away while it was read", r->name);
    tk__respond_tk_error(s, out, &err, "name");
  } else {
    tk__respond_json(out, 200, text);
    text = NULL;
  }
  free(text);
  json_decref(all);
  free(list);
  tk__template_rec_free(&rec);
}

/* GET /api/v1/openapi.json: the document built in (src/server/api_docs),
 * its info.version this build's version, so it cannot name another. */
static void get_openapi(tk__response *out) {
  const tk__asset *doc = tk__api_doc_find("/openapi.json");
  json_t *j = doc ? json_loadb((const char *)doc->data, doc->len, 0, NULL) : NULL;
  json_t *info = json_object_get(j, "info");
  if (info == NULL || json_object_set_new(info, "version", json_string(TK_VERSION)) != 0) {
    json_decref(j);
    j = NULL; /* a 500: the build embedded no valid document */
  }
  tk__respond_json_value(out, 200, j);
}

/* A duration parameter of at least 1 ms, dflt when absent. */
static int duration_param(const tk__query *q, const char *key, int64_t dflt, int64_t *ms,
                          tk__api_error *e) {
  const char *v = tk__query_get(q, key);
  tk_err err;
  *ms = dflt;
  if (v == NULL) return 0;
  if (tk_duration_parse(v, ms, &err) != 0 || *ms <= 0)
    return tk__api_fail(e, 400, "bad_request", key,
                        "%s=\"%.100s\": expected a positive duration such as 1h, 30m or 90s", key,
                        v);
  return 0;
}

/* GET /api/v1/activity: window and bucket checked, then counted. */
static void get_activity(tk_server *s, const tk__query *q, tk__response *out) {
  int64_t window, bucket;
  tk__api_error e;
  if (duration_param(q, "window", 3600000, &window, &e) != 0 ||
      duration_param(q, "bucket", 60000, &bucket, &e) != 0 ||
      (window / bucket > 1440 &&
       tk__api_fail(&e, 400, "bad_request", "bucket",
                    "window / bucket is %lld buckets: at most 1440 are allowed (use a larger "
                    "bucket)",
                    (long long)(window / bucket)) != 0)) {
    tk__respond_error(out, &e);
    return;
  }
  char *text;
  tk_err err;
  if (tk_activity_json(s->store, now(s), window, bucket, &text, &err) != 0)
    tk__respond_tk_error(s, out, &err, NULL);
  else
    tk__respond_json(out, 200, text);
}

void tk__api_handle(tk_server *s, const tk__route *r, const char *body, size_t len,
                    tk__response *out) {
  static const char *const none[] = {NULL};
  static const char *const version_only[] = {"version", NULL};
  static const char *const activity[] = {"window", "bucket", NULL};
  static const char *const page[] = {"after", "limit", NULL};
  tk__query q = {0};
  /* The store was still unreachable after the last lost connection: open
   * it again first, so that the first request after the server is back
   * answers from it instead of failing once more on the dead session.
   * Still unreachable: the request fails as before, with its 503. */
  tk_err again;
  if (s->store_lost && s->store->ops->reconnect(s->store, &again) == 0) s->store_lost = 0;
  switch (r->id) {
    case TK__R_METRICS:
      get_metrics(s, out);
      return;
    case TK__R_TASKS:
    case TK__R_STEPS:
      if (r->post) break;
      if (read_query(r, NULL, &q, out) == 0) tk__api_lists(s, r, &q, out);
      break;
    case TK__R_TASK_CANCEL:
    case TK__R_STEP_ACTION:
    case TK__R_BULK:
    case TK__R_SIGNAL:
      break;
    case TK__R_BACKOFF:
      if (read_query(r, NULL, &q, out) == 0) tk__api_backoff(s, &q, out);
      break;
    case TK__R_ACTIVITY:
      if (read_query(r, activity, &q, out) == 0) get_activity(s, &q, out);
      break;
    case TK__R_INSTANCES:
      if (read_query(r, page, &q, out) == 0) get_instances(s, r, &q, out);
      break;
    case TK__R_TEMPLATE:
      if (read_query(r, version_only, &q, out) == 0)
        get_template(s, r, tk__query_get(&q, "version"), out);
      break;
    default:
      if (read_query(r, none, &q, out) != 0) return;
      if (r->id == TK__R_STATUS) get_status(s, out);
      else if (r->id == TK__R_TASK) get_task(s, r, out);
      else if (r->id == TK__R_TEMPLATES) get_templates(s, out);
      else if (r->id == TK__R_OPENAPI) get_openapi(out);
      else if (r->id == TK__R_QUEUES) get_queues(s, out);
      else if (r->id == TK__R_BUDGETS) get_budgets(s, out);
  }
  tk__query_free(&q);
  if (r->post) tk__api_actions(s, r, body, len, out);
}
