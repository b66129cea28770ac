/* The store-wide metrics `tasker serve` exposes: one status read of the
 * store (what `tasker status` shows) as tasker_store_* series. Their names
 * differ from the orchestrators' tasker_* ones, so a sum over a serve and
 * any number of orchestrators never counts a thing twice. */
#include "engine/metrics_internal.h"

#include <stdio.h>
#include <string.h>

#include "store/store.h"

/* Every state, so that a series exists at 0 before anything is in it
 * (a rate or an alert on a series that appears late misses its start). */
static const char *const task_states[] = {TK__TASK_PENDING, TK__TASK_IN_PROGRESS,
                                          TK__TASK_COMPLETE, TK__TASK_ERROR,
                                          TK__TASK_CANCELLED};
static const char *const step_states[] = {TK__STEP_PENDING, TK__STEP_IN_PROGRESS,
                                          TK__STEP_WAITING,  TK__STEP_COMPLETE,
                                          TK__STEP_ERROR,    TK__STEP_CANCELLED,
                                          TK__STEP_RESOLVED};

static int64_t count_of(const tk__state_count *c, int n, const char *state) {
  for (int i = 0; i < n; i++)
    if (strcmp(c[i].state, state) == 0) return c[i].n;
  return 0;
}

static int known(const char *const *states, int n, const char *state) {
  for (int i = 0; i < n; i++)
    if (strcmp(states[i], state) == 0) return 1;
  return 0;
}

/* A gauge family by state: the known states, then any other the store
 * reported (a newer schema's). */
static void by_state(tk__buf *b, const char *name, const char *help, const char *const *states,
                     int nstates, const tk__state_count *c, int n) {
  tk__prom_family(b, name, "gauge", help);
  for (int i = 0; i < nstates; i++)
    tk__prom_int(b, name, "state", states[i], count_of(c, n, states[i]));
  for (int i = 0; i < n; i++)
    if (!known(states, nstates, c[i].state)) tk__prom_int(b, name, "state", c[i].state, c[i].n);
}

/* What the persistent counters count, for their HELP. */
static const char *counter_help(const char *name) {
  if (strcmp(name, "fenced_writes") == 0)
    return "Outcomes the store refused because a newer claim fenced them out, by any "
           "orchestrator, since the store was created.";
  return "A persistent counter of the store (its counters table), since the store was "
         "created.";
}

int tk_metrics_render_store(tk_store *s, int64_t now, char **text, size_t *len, tk_err *err) {
  *text = NULL;
  tk__status_report r;
  int rc = s->ops->status(s, now, &r, err);
  if (rc) return rc;
  tk__buf b = {0};
  by_state(&b, "tasker_store_tasks", "Tasks in the store by state.", task_states,
           (int)(sizeof task_states / sizeof *task_states), r.tasks, r.ntasks);
  by_state(&b, "tasker_store_steps", "Steps in the store by state.", step_states,
           (int)(sizeof step_states / sizeof *step_states), r.steps, r.nsteps);
  tk__prom_family(&b, "tasker_store_steps_ready", "gauge",
                  "Steps whose run_at has come and whose parents are done: ready to be claimed.");
  tk__prom_int(&b, "tasker_store_steps_ready", NULL, NULL, r.ready_now);
  for (int i = 0; i < r.ncounters; i++) {
    /* A metric name allows [a-zA-Z0-9_:]; the counters' names are
     * snake_case already, anything else becomes '_'. */
    char name[96];
    int k = snprintf(name, sizeof name, "tasker_store_%s_total", r.counters[i].name);
    for (int j = (int)strlen("tasker_store_"); j < k && name[j]; j++) {
      char ch = name[j];
      if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')))
        name[j] = '_';
    }
    tk__prom_family(&b, name, "counter", counter_help(r.counters[i].name));
    tk__prom_int(&b, name, NULL, NULL, r.counters[i].value);
  }
  return tk__prom_take(&b, text, len, err);
}
