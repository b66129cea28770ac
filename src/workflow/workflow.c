/* Adding templates and submitting tasks: validation in C, one store
 * transaction each. */
#include <tasker/workflow.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "workflow/batch_items.h"
#include "workflow/submit.h"
#include "workflow/template.h"

/* FNV-1a over the canonical JSON text: enough to tell a re-add of the
 * same definition from a changed one (not a security boundary). */
static void digest_of(const char *text, char out[17]) {
  uint64_t h = 1469598103934665603ULL;
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
    h ^= *p;
    h *= 1099511628211ULL;
  }
  snprintf(out, 17, "%016llx", (unsigned long long)h);
}

int tk_template_add_files(tk_store *s, const tk_config *cfg, const char *const *paths, int n,
                          int64_t now, tk_template_info *out, tk_err *err) {
  tk__template *t = calloc((size_t)n + 1, sizeof *t);
  tk__template_row *rows = calloc((size_t)n + 1, sizeof *rows);
  char **texts = calloc((size_t)n + 1, sizeof *texts);
  char(*digests)[17] = calloc((size_t)n + 1, sizeof *digests);
  int rc = 0, parsed = 0;
  if (!t || !rows || !texts || !digests) {
    rc = tk_err_set(err, TK_ENOMEM, "out of memory adding %d templates", n);
    goto done;
  }
  for (; parsed < n && rc == 0; parsed++) {
    if ((rc = tk__template_from_file(paths[parsed], cfg, &t[parsed], err))) break;
    json_t *def = t[parsed].definition;
    texts[parsed] = json_dumps(def, JSON_COMPACT | JSON_SORT_KEYS);
    if (texts[parsed] == NULL) {
      rc = tk_err_set(err, TK_ENOMEM, "out of memory storing template %s", paths[parsed]);
      parsed++;
      break;
    }
    digest_of(texts[parsed], digests[parsed]);
    rows[parsed] = (tk__template_row){
        .namespace_ = json_string_value(json_object_get(def, "namespace")),
        .name = json_string_value(json_object_get(def, "name")),
        .version = json_string_value(json_object_get(def, "version")),
        .description = json_string_value(json_object_get(def, "description")),
        .definition = texts[parsed],
        .digest = digests[parsed],
        .edges = t[parsed].edges,
        .nedges = t[parsed].nedges,
        .created_at = now,
    };
  }
  if (rc == 0) rc = s->ops->template_put(s, rows, n, err);
  for (int i = 0; rc == 0 && out != NULL && i < n; i++) {
    tk_template_info *info = &out[i];
    memset(info, 0, sizeof *info);
    info->id = rows[i].id;
    snprintf(info->namespace_, sizeof info->namespace_, "%s", rows[i].namespace_);
    snprintf(info->name, sizeof info->name, "%s", rows[i].name);
    snprintf(info->version, sizeof info->version, "%s", rows[i].version);
    info->steps = (int)json_array_size(json_object_get(t[i].definition, "steps"));
    info->existed = rows[i].existed;
  }
done:
  for (int i = 0; i < parsed; i++) {
    free(texts ? texts[i] : NULL);
    tk__template_free(&t[i]);
  }
  free(t);
  free(rows);
  free(texts);
  free(digests);
  return rc;
}

int tk_template_add_file(tk_store *s, const tk_config *cfg, const char *path, int64_t now,
                         tk_template_info *out, tk_err *err) {
  return tk_template_add_files(s, cfg, &path, 1, now, out, err);
}

/* A retry setting of the step, else of the template, else NULL. */
static json_t *retry_setting(json_t *def, json_t *step, const char *key) {
  json_t *v = json_object_get(json_object_get(step, "retry"), key);
  return v ? v : json_object_get(json_object_get(def, "retry"), key);
}

/* The submission's context (NULL: {}) as a JSON object into *out. */
static int context_parse(const char *text, json_t **out, tk_err *err) {
  json_error_t jerr;
  /* Any JSON value parses, so that a valid non-object gets the clear
   * "expected a JSON object" message. */
  json_t *ctx = json_loads(text ? text : "{}", JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
  if (ctx == NULL)
    return tk_err_set(err, TK_EINVAL, "context: invalid JSON at line %d, column %d: %s",
                      jerr.line, jerr.column, jerr.text);
  if (!json_is_object(ctx)) {
    /* Named before the value is freed (it used to be read after). */
    const char *kind = json_is_array(ctx)     ? "an array"
                       : json_is_string(ctx)  ? "a string"
                       : json_is_number(ctx)  ? "a number"
                       : json_is_boolean(ctx) ? "a boolean"
                                              : "null";
    json_decref(ctx);
    return tk_err_set(err, TK_EINVAL, "context: expected a JSON object such as {\"order\": 42}, "
                      "got %s", kind);
  }
  *out = ctx;
  return 0;
}

int tk_priority_check(int64_t priority, tk_err *err) {
  if (priority >= TK_PRIORITY_MIN && priority <= TK_PRIORITY_MAX) return 0;
  return tk_err_set(err, TK_EINVAL,
                    "priority %lld: must be an integer from %d to %d (higher is claimed first; "
                    "0 is the default)",
                    (long long)priority, TK_PRIORITY_MIN, TK_PRIORITY_MAX);
}

int tk_deadline_check(int64_t ms, const char *text, tk_err *err) {
  if (ms >= 1 && ms <= TK_DEADLINE_MAX_MS) return 0;
  char shown[32];
  if (text == NULL) snprintf(shown, sizeof shown, "%lld ms", (long long)ms);
  return tk_err_set(err, TK_EINVAL,
                    "deadline %s%s%s: must be a duration > 0 and at most 100 years, such as "
                    "\"2h\" or \"90m\"",
                    text ? "\"" : "", text ? text : shown, text ? "\"" : "");
}

/* The task's deadline: the submit's (req->deadline_ms), else its
 * template's (deadline_ms in the definition), from now; 0: none. */
static int64_t deadline_of(const tk_submit_request *req, json_t *def, int64_t now) {
  int64_t ms = req->deadline_ms;
  if (ms == 0) ms = json_integer_value(json_object_get(def, "deadline_ms"));
  return ms > 0 ? now + ms : 0;
}

/* The rest of a build once b has its context and its template's
 * definition: each step's settings and batch items, and b->t. With
 * `like` (a task built from the same definition), the settings are
 * copied from its steps and only batch items are read again: a bulk
 * submit reads the definition once per run of one template. */
static int steps_resolve(const tk_config *cfg, const tk_submit_request *req, int64_t now,
                         const tk__built_task *like, tk__built_task *b, tk_err *err) {
  int rc = 0;
  json_t *def = b->def;
  json_t *steps = json_object_get(def, "steps");
  size_t n = b->n = json_array_size(steps);
  tk__new_step *ns = b->steps = calloc(n ? n : 1, sizeof *ns);
  char *canonical = b->canonical = json_dumps(b->ctx, JSON_COMPACT);
  if (ns == NULL || canonical == NULL) {
    rc = tk_err_set(err, TK_ENOMEM, "out of memory submitting %s", req->template_name);
    goto done;
  }
  const tk_engine_settings *engine = tk_config_engine(cfg);
  int batch = 0;
  for (size_t i = 0; i < n; i++) {
    json_t *step = json_array_get(steps, i);
    json_t *v;
    if (like) {
      ns[i] = like->steps[i];
      /* Its items are like's own: read this task's from its context. */
      ns[i].items = NULL;
      ns[i].nitems = 0;
      ns[i].batch = 0;
      if (like->steps[i].batch && (rc = tk__batch_step_resolve(step, b->ctx, cfg, &ns[i], err)))
        goto done;
      batch |= ns[i].batch;
      continue;
    }
    ns[i].name = json_string_value(json_object_get(step, "name"));
    ns[i].nparents = (int)json_array_size(json_object_get(step, "depends_on"));
    v = retry_setting(def, step, "max_attempts");
    ns[i].max_attempts = v ? (int)json_integer_value(v) : (int)engine->max_attempts;
    v = retry_setting(def, step, "retryable");
    ns[i].retryable = v ? json_is_true(v) : 1;
    v = retry_setting(def, step, "backoff");
    ns[i].backoff = v ? json_string_value(v) : "default";
    /* Only a worker handler's spec has a queue (handlers/worker.c). */
    json_t *handler = json_object_get(step, "handler");
    ns[i].worker_queue = json_string_value(json_object_get(handler, "queue"));
    /* A worker step's queue is its worker_queue (template.c refuses any
     * other); any other step's is the one it names, if any. */
    json_t *queue = json_object_get(step, "queue");
    ns[i].queue = queue ? json_string_value(queue) : ns[i].worker_queue;
    if ((rc = tk__batch_step_resolve(step, b->ctx, cfg, &ns[i], err))) goto done;
    batch |= ns[i].batch;
  }
  /* Only batch items borrow from the context: a bulk submit holds many
   * built tasks at once, so the parsed context goes as soon as it can. */
  if (!batch) {
    json_decref(b->ctx);
    b->ctx = NULL;
  }
  b->t = (tk__new_task){
      .template_id = b->tmpl.id,
      .context = canonical,
      .identity = req->identity,
      .steps = ns,
      .nsteps = (int)n,
      .now = now,
      .start_at = req->start_at,
      .priority = req->priority,
      .deadline_at = deadline_of(req, def, now),
  };
done:
  if (rc) tk__built_task_free(b);
  return rc;
}

int tk__task_build(tk_store *s, const tk_config *cfg, const tk_submit_request *req, int64_t now,
                   tk__built_task *b, tk_err *err) {
  memset(b, 0, sizeof *b);
  int rc = tk_priority_check(req->priority, err);
  if (rc == 0 && req->deadline_ms != 0) rc = tk_deadline_check(req->deadline_ms, NULL, err);
  if (rc == 0) rc = context_parse(req->context_json, &b->ctx, err);
  if (rc) return rc;
  if ((rc = tk__template_lookup(s, req->template_name, req->version, &b->tmpl, err))) {
    tk__built_task_free(b);
    return rc;
  }
  b->have_tmpl = 1;
  b->def = json_loads(b->tmpl.definition, 0, NULL);
  return steps_resolve(cfg, req, now, NULL, b, err);
}

int tk__task_build_like(const tk__built_task *like, const tk_config *cfg,
                        const tk_submit_request *req, int64_t now, tk__built_task *b,
                        tk_err *err) {
  memset(b, 0, sizeof *b);
  int rc = tk_priority_check(req->priority, err);
  if (rc == 0 && req->deadline_ms != 0) rc = tk_deadline_check(req->deadline_ms, NULL, err);
  if (rc == 0) rc = context_parse(req->context_json, &b->ctx, err);
  if (rc) return rc;
  b->tmpl.id = like->tmpl.id;
  b->def = json_incref(like->def);
  return steps_resolve(cfg, req, now, like, b, err);
}

void tk__built_task_free(tk__built_task *b) {
  for (size_t i = 0; b->steps && i < b->n; i++) tk__batch_step_free(&b->steps[i]);
  free(b->canonical);
  free(b->steps);
  json_decref(b->def);
  if (b->have_tmpl) tk__template_rec_free(&b->tmpl);
  json_decref(b->ctx);
  memset(b, 0, sizeof *b);
}

int tk_task_submit(tk_store *s, const tk_config *cfg, const tk_submit_request *req, int64_t now,
                   int64_t *task_id, int *existed, tk_err *err) {
  tk__built_task b;
  int rc = tk__task_build(s, cfg, req, now, &b, err);
  if (rc) return rc;
  rc = s->ops->task_create(s, &b.t, task_id, existed, err);
  if (rc == 0 && !(existed && *existed)) tk__task_created_emit(req, now, *task_id);
  tk__built_task_free(&b);
  return rc;
}

void tk__task_created_emit(const tk_submit_request *req, int64_t now, int64_t task_id) {
  if (!req->observer || !req->observer->on_event ||
      !(req->observer->interest & TK_EV_BIT(TK_EV_TASK_CREATED)))
    return;
  tk_event ev = {.type = TK_EV_TASK_CREATED, .at = now, .task = task_id};
  ev.u.created.template_name = req->template_name;
  ev.u.created.version = req->version;
  ev.u.created.identity = req->identity;
  req->observer->on_event(&ev, req->observer_ud);
}

int tk_task_operate(tk_store *s, tk_operator_action action, int64_t task_id, const char *step,
                    int64_t now, const char **task_state, tk_err *err) {
  if (action != TK_OP_CANCEL && (step == NULL || *step == '\0'))
    return tk_err_set(err, TK_EINVAL, "task %lld: which step? retry and resolve need a step name",
                      (long long)task_id);
  tk__effects fx;
  int rc = s->ops->operator(s, action, task_id, action == TK_OP_CANCEL ? NULL : step, now, &fx,
                            err);
  if (task_state) *task_state = rc == 0 ? fx.task_state : NULL;
  return rc;
}
