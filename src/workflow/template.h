/* Templates (DESIGN §2): a TOML workflow definition validated into a
 * normalized JSON definition plus the DAG's edges, ready for the store. */
#ifndef TASKER_WORKFLOW_TEMPLATE_H
#define TASKER_WORKFLOW_TEMPLATE_H

#include <jansson.h>

#include <tasker/config.h>
#include <tasker/toml.h>

/* A validated template. `definition` is
 *   {namespace, name, version, description,
 *    retry: {max_attempts?, backoff?, retryable?},
 *    steps: [{name, depends_on: [names], handler: {kind, ...},
 *             retry: {...}, timeout_ms?, queue?,
 *             batch?: {items_from, max_in_call_retries?, max_item_attempts?,
 *                      fail_if_any_gave_up?}}]}
 * and edges are (parent_idx, child_idx) pairs. */
typedef struct tk__template {
  json_t *definition;
  int *edges;
  int nedges;
} tk__template;

/* Validate the parsed TOML `doc` (named `file` in messages) against `cfg`
 * (for backoff profile names) into *out. Every error names FILE:LINE:COLUMN,
 * the key, the value and what was expected; TK_ECONFIG for a template
 * error. */
int tk__template_from_toml(const tk_toml_doc *doc, const char *file, const tk_config *cfg,
                           tk__template *out, tk_err *err);

/* Check that the steps form no cycle; fails (TK_ECONFIG) with the path of
 * one ("a -> b -> a") and the dependency that closes it: entry *dep of
 * step *step's parents. parents[i] lists the parent indices of step i. */
int tk__dag_check(int nsteps, const int *const *parents, const int *nparents,
                  const char *const *names, char *cycle, size_t cycle_len, int *step, int *dep);

/* Parse the TOML file at `path` and validate it as above. */
int tk__template_from_file(const char *path, const tk_config *cfg, tk__template *out,
                           tk_err *err);

void tk__template_free(tk__template *t);

#endif
