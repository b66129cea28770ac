/* Deadlines (DESIGN §3, docs/deadlines.md): the engine looks at the
 * deadlines that came (deadline_apply) when the earliest one it knows
 * comes, as it takes wait timeouts and retries, with no polling. It
 * learns of new ones from next_due (whose ready time counts them), from
 * the store's changes (another process's submit: a pass looks, at most
 * every TK__WAIT_LOOK_MS), and from its claims of a new task's first
 * steps, which carry the task's deadline. A task that a deadline ended has its
 * steps cancelled in the store: this engine's attempts of them still
 * running finish, and their outcomes are refused as a lost lease's. */
#include "engine/engine_internal.h"

#include <stdlib.h>

#include "store/rules.h"

void tk__engine_deadline_hint(tk_engine *e, int64_t at) {
  if (at < e->deadline_at) e->deadline_at = at;
}

int tk__engine_deadlines(tk_engine *e, int64_t now, tk_err *err) {
  /* News waits for the next pass that may look: it never makes a wake-up
   * of its own (an idle engine learns the earliest deadline from
   * next_due). */
  e->deadline_news |= e->waits_changed;
  int look = e->deadline_news && (e->deadlines_looked_at == INT64_MIN ||
                                  now >= e->deadlines_looked_at + TK__WAIT_LOOK_MS);
  if (!look && now < e->deadline_at) return 0;
  e->deadline_news = 0;
  int n = 0;
  int64_t next_at = INT64_MAX;
  int rc = e->store->ops->deadline_apply(e->store, now, e->claim_batch, e->deadline_tasks, &n,
                                         &next_at, err);
  if (rc) return rc;
  e->deadlines_looked_at = now;
  /* A full batch may have left more behind: look again at once; rows due
   * that another orchestrator holds: when it should be done with them. */
  e->deadline_at = n == e->claim_batch ? now
                   : next_at <= now    ? now + TK__WAIT_LOOK_MS
                                       : next_at;
  e->stats.tasks_failed += n;
  for (int i = 0; i < n; i++) {
    if (tk__engine_wants(e, TK_EV_TASK_FAILED)) {
      tk_event x = {.type = TK_EV_TASK_FAILED, .at = now, .task = e->deadline_tasks[i]};
      x.u.finished.state = TK__TASK_ERROR;
      tk__engine_emit(e, &x);
    }
    tk__engine_log(e, TK_LOG_WARN,
                   "task %lld failed: its deadline passed (unfinished steps cancelled)",
                   (long long)e->deadline_tasks[i]);
  }
  return 0;
}
