/* A task built from a submission but not yet stored: tk_task_submit's
 * first half, for callers that create the task inside a transaction of
 * their own (schedules: the slot's task and the schedule's progress). */
#ifndef TASKER_WORKFLOW_SUBMIT_H
#define TASKER_WORKFLOW_SUBMIT_H

#include <jansson.h>

#include <tasker/workflow.h>

#include "store/store.h"

typedef struct tk__built_task {
  tk__new_task t; /* ready for task_create; points into the rest */
  tk__template_rec tmpl;
  int have_tmpl;
  json_t *def, *ctx;
  tk__new_step *steps;
  size_t n;
  char *canonical;
} tk__built_task;

/* Validate req (context, template) and resolve each step's settings as
 * tk_task_submit does; nothing is stored. Free with tk__built_task_free
 * (done already when this fails). */
int tk__task_build(tk_store *s, const tk_config *cfg, const tk_submit_request *req, int64_t now,
                   tk__built_task *b, tk_err *err);
/* tk__task_build for a submission of the template `like` was built from
 * (the same name and version): its template is not looked up again and
 * its definition is shared. */
int tk__task_build_like(const tk__built_task *like, const tk_config *cfg,
                        const tk_submit_request *req, int64_t now, tk__built_task *b,
                        tk_err *err);
void tk__built_task_free(tk__built_task *b);

/* task.created for the task req created, to req->observer when its
 * interest has it (after the commit, on the caller's thread). */
void tk__task_created_emit(const tk_submit_request *req, int64_t now, int64_t task_id);

#endif
