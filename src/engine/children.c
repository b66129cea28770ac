/* Child tasks (DESIGN §18; docs/children.md): a claimed step of kind
 * `task` is not run. Its child's context is rendered from the step's
 * input, the child is built from its template as a submit builds a task,
 * and the store starts it in the transaction that parks the step
 * (child_start), so the step holds no worker and no lease while the child
 * runs. The child's end comes back as a signal bound to the claim, taken
 * by tk__engine_waits as any wait's (waits.c). */
#include "engine/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/rules.h"
#include "workflow/submit.h"

int tk__engine_is_child(const job *j) { return j->def->kind == &tk__task_kind; }

/* Fail j's attempt now for good: what the same input would do again. */
static int refuse(job *j, int64_t now, const char *tmpl, const char *why) {
  memset(&j->result, 0, sizeof j->result);
  j->result.retry_after_ms = -1;
  j->result.status = TK_HANDLER_PERMANENT;
  if (tmpl)
    snprintf(j->result.error, sizeof j->result.error,
             "task step: cannot start a child task of \"%.128s\": %.300s", tmpl, why);
  else
    snprintf(j->result.error, sizeof j->result.error, "task step: %.400s", why);
  j->started_at = j->finished_at = now;
  return 1;
}

int tk__engine_start_child(tk_engine *e, job *j, int64_t now) {
  const tk__claimed *c = &j->claim;
  json_t *spec = j->def->spec;
  const char *tmpl = json_string_value(json_object_get(spec, "template"));
  const char *version = json_string_value(json_object_get(spec, "version"));
  char why[512], ident[96];
  char *ctx = NULL;
  int rc = tk__task_child_context(spec, j->input, c->task_id, j->name, c->attempt, &ctx, why,
                                  sizeof why);
  if (rc == TK_ENOMEM) snprintf(why, sizeof why, "out of memory");
  if (rc) return refuse(j, now, NULL, why);
  tk_submit_request req = {.template_name = tmpl, .version = version, .context_json = ctx,
                           .identity = tk__child_identity(c->task_id, c->step_id, c->claim_id,
                                                          ident, sizeof ident)};
  tk__built_task b;
  tk_err err;
  rc = tk__task_build(e->store, e->config, &req, now, &b, &err);
  free(ctx);
  if (rc) return refuse(j, now, tmpl, err.msg);
  int64_t timeout = j->def->timeout_ms;
  tk__child_req r = {.step_id = c->step_id, .claim_id = c->claim_id, .task_id = c->task_id,
                     .attempt = c->attempt, .task = &b.t,
                     .timeout_at = timeout > 0 ? now + timeout : INT64_MAX, .now = now};
  rc = e->store->ops->child_start(e->store, &r, &err);
  tk__built_task_free(&b);
  if (rc) {
    /* Fenced: another claim has the step. Otherwise the lease expires and
     * the reaper fails the attempt under the retry policy. */
    tk__engine_log(e, TK_LOG_WARN, "task %lld step %s attempt %d: cannot start its child: %s",
                   (long long)c->task_id, j->name, c->attempt, err.msg);
    return 0;
  }
  if (r.timeout_at < e->wait_at || e->wait_at == INT64_MIN) e->wait_at = r.timeout_at;
  tk__engine_log(e, TK_LOG_INFO, "task %lld step %s attempt %d: started child task %lld (%s)",
                 (long long)c->task_id, j->name, c->attempt, (long long)r.child_id, tmpl);
  return 0;
}
