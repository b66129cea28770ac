/* GET /api/v1/tasks and /api/v1/steps: a page of a list, filtered
 * (docs/api.md). Every parameter is checked before the store is read, so
 * a bad one answers 400 naming it; what the store then refuses can only
 * be the cursor. */
#include "server/server_internal.h"

#include <stdio.h>
#include <string.h>

#include "store/list_sql.h"

int tk__filter_resolve(tk__list_query *lq, int64_t now, const char *state_param,
                       tk__api_error *e) {
  tk_err err;
  if (lq->since && tk_time_arg_parse(lq->since, now, &lq->filter.created_since, &err) != 0)
    return tk__api_fail(e, 400, "bad_filter", "since", "since: %s", err.msg);
  tk_task_filter state_only = {.state = lq->filter.state};
  if (tk_task_filter_check(&state_only, &err) != 0)
    return strcmp(state_param, "state") == 0
               ? tk__api_fail(e, 400, "bad_filter", state_param, "%s", err.msg)
               : tk__api_fail(e, 400, "bad_filter", state_param, "%s: %s", state_param, err.msg);
  if (tk_task_filter_check(&lq->filter, &err) != 0)
    return tk__api_fail(e, 400, "bad_filter", NULL, "%s", err.msg);
  return 0;
}

/* The step state of a steps list: one of the store's (tk__step_states,
 * the list tk_steps_json checks too). */
static int step_state_check(const char *state, tk__api_error *e) {
  if (tk__name_in(tk__step_states, state)) return 0;
  char states[256];
  size_t len = 0;
  states[0] = '\0';
  for (int i = 0; tk__step_states[i] && len < sizeof states; i++)
    len += (size_t)snprintf(states + len, sizeof states - len, "%s%s", i ? ", " : "",
                            tk__step_states[i]);
  return tk__api_fail(e, 400, "bad_filter", "state",
                      "state=\"%.100s\": expected a step state: %s", state, states);
}

void tk__api_lists(tk_server *s, const tk__route *r, const tk__query *q, tk__response *out) {
  int steps = r->id == TK__R_STEPS;
  tk__list_query lq;
  tk__api_error e;
  if (tk__list_query_parse(q, steps, &lq, &e) != 0 ||
      tk__filter_resolve(&lq, tk_clock_now(&s->clock), steps ? "task_state" : "state", &e) != 0 ||
      (steps && step_state_check(lq.step_state, &e) != 0)) {
    tk__respond_error(out, &e);
    return;
  }
  char *text;
  tk_err err;
  int rc = steps ? tk_steps_json(s->store, lq.step_state, &lq.filter, lq.cursor, lq.limit, &text,
                                 &err)
                 : tk_tasks_json(s->store, &lq.filter, lq.cursor, lq.limit, &text, &err);
  if (rc == TK_EINVAL && lq.cursor != NULL) {
    /* The library's message names the cursor and what is expected. */
    tk__api_fail(&e, 400, "bad_cursor", "cursor", "%s", err.msg);
    tk__respond_error(out, &e);
  } else if (rc != 0) {
    tk__respond_tk_error(s, out, &err, NULL);
  } else {
    tk__respond_json(out, 200, text);
  }
}
