/* A claimed attempt's way to its handler: the job made from a claim, its
 * input read, started on a worker, asynchronously or inline, and the
 * list of jobs in flight whose leases the engine renews. */
#include "engine/engine_internal.h"

#include "store/flow.h"

#include <stdlib.h>
#include <string.h>

/* The attempt ends when its handler returns (or, started asynchronously,
 * calls back), not when the engine thread gets round to recording it: a
 * retry's delay counts from then. */
static void attempt_ended(tk_engine *e, job *j) {
  j->run_ns = tk_monotonic_ns() - j->start_ns;
  j->finished_at = tk_clock_now(&e->clock);
}

/* An asynchronous attempt's end (tk__handler_done), on the handler's
 * thread: back to the engine thread as a worker's result would go. */
static void async_done(void *ud) {
  job *j = ud;
  tk_engine *e = j->engine;
  attempt_ended(e, j);
  tk__pool_done(e, j);
}

int tk__engine_execute(tk_engine *e, job *j) {
  memset(&j->result, 0, sizeof j->result);
  j->result.retry_after_ms = -1;
  j->start_ns = tk_monotonic_ns();
  int64_t now = tk_clock_now(&e->clock);
  j->started_at = now;
  j->call = (tk_handler_call){
      .task_id = j->claim.task_id,
      .step = j->name,
      .attempt = j->claim.attempt,
      .max_attempts = j->claim.max_attempts,
      .input = j->input,
      .spec = j->def->spec_text,
      .deadline_ms = j->def->timeout_ms > 0 ? now + j->def->timeout_ms : 0,
  };
  j->hstep = (tk__handler_step){j->def->spec, j->def->prepared, &e->clock, j->cb_url,
                                j->cb_token};
  if (j->async) {
    j->def->kind->start(&j->hstep, &j->call, &j->result, async_done, j);
    return 1; /* j belongs to its end now */
  }
  if (j->def->batch != NULL) tk__batch_run(j, &j->call);
  else j->def->kind->run(&j->hstep, &j->call, &j->result);
  attempt_ended(e, j);
  return 0;
}

void tk__flight_add(tk_engine *e, job *j) {
  j->flight_prev = NULL;
  j->flight_next = e->running;
  if (e->running) e->running->flight_prev = j;
  e->running = j;
  e->in_flight++;
  e->async_in_flight += j->async;
  if (j->next_heartbeat < e->heartbeat_due) e->heartbeat_due = j->next_heartbeat;
}

void tk__flight_remove(tk_engine *e, job *j) {
  if (j->flight_prev) j->flight_prev->flight_next = j->flight_next;
  else e->running = j->flight_next;
  if (j->flight_next) j->flight_next->flight_prev = j->flight_prev;
  e->in_flight--;
  e->async_in_flight -= j->async;
}

void tk__job_free(job *j) {
  tk__batch_free(j->batch);
  tk__engine_callback_wipe(j);
  free(j->result.results);
  free(j->input);
  free(j);
}

const char *tk__claim_step_name(const tk__claimed *c, const char *name, char *buf, size_t cap) {
  if (c->item_index < 0) return name;
  tk__flow_instance_name(buf, cap, name, c->item_index);
  return buf;
}

/* A job for claim c, or NULL (logged) when the step cannot start: a step
 * that cannot start is left to its lease, and the reaper retries it. */
static job *new_job(tk_engine *e, const tk__claimed *c, int64_t now) {
  tk_err err;
  const template_entry *t = tk__engine_template(e, c->template_id, &err);
  if (t == NULL || c->idx >= t->nsteps) {
    tk__engine_log(e, TK_LOG_ERROR, "cannot start step %lld: %s", (long long)c->step_id,
                   t ? "its index is past the template's steps" : err.msg);
    return NULL;
  }
  job *j = calloc(1, sizeof *j);
  if (j == NULL) {
    tk__engine_log(e, TK_LOG_ERROR, "cannot start step %lld: out of memory",
                   (long long)c->step_id);
    return NULL;
  }
  j->claim = *c;
  j->claim.input = NULL; /* j->input owns it */
  j->def = &t->steps[c->idx];
  /* Built by the claim (issue 22), unless the template was new to this
   * engine and the handler takes none. */
  if (j->def->kind->takes_input) j->input = c->input;
  else free(c->input);
  j->name = tk__claim_step_name(c, j->def->name, j->instance_name, sizeof j->instance_name);
  j->engine = e;
  /* Inline (no workers) every attempt runs to its end on this thread. */
  j->async = e->workers > 0 && e->max_async > 0 && j->def->kind->start != NULL &&
             j->def->batch == NULL;
  j->next_heartbeat = now + e->heartbeat_ms;
  if (strcmp(c->prev_state, TK__STEP_WAITING_FOR_RETRY) == 0) j->not_before = c->run_at;
  if (j->def->batch != NULL) tk__batch_prepare(e, j);
  return j;
}

/* Whether job j's handler takes an input the claim did not bring. */
static int lacks_input(const job *j) { return j && j->def->kind->takes_input && !j->input; }

/* Read the inputs the claim did not bring (its backend could not build
 * one) of the jobs whose handlers take one (kind->takes_input) in one
 * store call; a job whose input cannot be read is freed and its slot set
 * to NULL: it is not started blind. */
static void read_inputs(tk_engine *e, job **jobs, int n) {
  int m = 0;
  for (int i = 0; i < n; i++)
    if (lacks_input(jobs[i])) e->input_ids[m++] = jobs[i]->claim.step_id;
  if (m == 0) return;
  tk_err err;
  int ok = e->store->ops->inputs(e->store, e->input_ids, m, e->inputs, &err) == 0;
  /* inputs[] is in the order of input_ids[], which is the order of jobs[]. */
  for (int k = 0, i = 0; i < n; i++) {
    job *j = jobs[i];
    if (!lacks_input(j)) continue;
    json_t *input = ok ? e->inputs[k++] : NULL;
    if (input != NULL) j->input = json_dumps(input, JSON_COMPACT);
    json_decref(input);
    if (j->input == NULL) {
      tk__engine_log(e, TK_LOG_ERROR, "cannot start step %lld: its input: %s",
                     (long long)j->claim.step_id, ok ? "out of memory" : err.msg);
      tk__job_free(j);
      jobs[i] = NULL;
    }
  }
}

/* Start the n attempts claimed into e->claims: hand them to the workers,
 * or run them here when there are none (returned in *inline_done). */
void tk__engine_start_claimed(tk_engine *e, int n, int64_t now, int64_t claim_us,
                              job **inline_done) {
  job *queued = NULL, **queued_end = &queued; /* for the workers, in claim order */
  *inline_done = NULL;
  e->stats.claimed += n;
  job **jobs = e->starting;
  int nasync = 0;
  for (int i = 0; i < n; i++) {
    jobs[i] = new_job(e, &e->claims[i], now);
    if (jobs[i] == NULL) free(e->claims[i].input);
    e->claims[i].input = NULL; /* the job's now, or freed */
    nasync += jobs[i] && jobs[i]->async;
  }
  if (n > 0 && e->workers > 0)
    e->async_share = e->async_share / 2 + (double)nasync / n / 2;
  read_inputs(e, jobs, n);
  for (int i = 0; i < n; i++) {
    job *j = jobs[i];
    if (j == NULL) continue;
    const tk__claimed *c = &j->claim;
    if (c->task_deadline_at > 0) tk__engine_deadline_hint(e, c->task_deadline_at);
    if (tk__engine_wants(e, TK_EV_STEP_CLAIMED)) {
      tk_event ev = {.type = TK_EV_STEP_CLAIMED, .at = now, .task = c->task_id,
                     .step = j->name, .attempt = c->attempt, .has_late_ms = 1,
                     .late_ms = now - c->run_at};
      ev.u.claimed.max_attempts = c->max_attempts;
      ev.u.claimed.claim_us = claim_us;
      tk__engine_emit(e, &ev);
    }
    int dropped = 0;
    if (j->def->callback_ms > 0 && tk__engine_callback_arm(e, j, now, &dropped) != 0) {
      if (!dropped) {
        j->next = *inline_done;
        *inline_done = j;
      }
      continue;
    }
    if (tk__engine_is_wait(j) || tk__engine_is_child(j)) {
      /* Parked in the store, holding nothing here; a signal that came
       * first (or a child that cannot start) ends the attempt now,
       * recorded with the inline ones. */
      if (tk__engine_is_wait(j) ? tk__engine_park(e, j, now)
                                : tk__engine_start_child(e, j, now)) {
        j->next = *inline_done;
        *inline_done = j;
      } else {
        tk__job_free(j);
      }
      continue;
    }
    if (e->workers > 0) {
      tk__flight_add(e, j);
      /* Started here, at once: it holds no worker. A retry claimed ahead
       * of its run_at waits among the workers' held ones, which start it
       * on time. */
      if (j->async && j->not_before <= now) {
        tk__engine_execute(e, j);
        continue;
      }
      j->next = NULL;
      *queued_end = j;
      queued_end = &j->next;
    } else {
      tk__engine_execute(e, j);
      j->next = *inline_done;
      *inline_done = j;
    }
  }
  if (queued != NULL) tk__pool_submit(e, queued);
}
