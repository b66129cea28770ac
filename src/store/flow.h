/* Decisions and map (DESIGN §17): the rules of a template's flow, written
 * once for the engine and every backend. A flow is read from a stored
 * template's normalized definition (workflow/template.h documents it);
 * a backend keeps one per template it has seen, as it keeps the edges.
 *
 * What a backend does with it, inside the transaction that records an
 * outcome or an operator action:
 *   - a decision step completes: tk__flow_decide names the chosen
 *     branches; every other branch is skipped at once ("not chosen by
 *     STEP"), the chosen ones are released like any child;
 *   - a skipped step releases its children as skipped parents: a child
 *     whose parents are then all finished runs if one of them is complete
 *     or resolved, and is skipped ("all parents skipped") if none is;
 *   - a map step that becomes ready is expanded at once
 *     (tk__flow_map_elements) into one instance per element, or completes
 *     with [] for none, or fails for too many;
 *   - the last instance of a map to finish completes the map with the
 *     array of their results (tk__flow_map_verdict) or fails it. */
#ifndef TASKER_STORE_FLOW_H
#define TASKER_STORE_FLOW_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <tasker/error.h>

/* Transition reasons of the flow, as stored. */
#define TK__REASON_NOT_CHOSEN_FMT "not chosen by %s"
#define TK__REASON_ALL_SKIPPED "all parents skipped"
#define TK__REASON_MAPPED_FMT "mapped into %lld instances"
#define TK__REASON_MAP_DONE "all instances finished"
#define TK__REASON_MAP_FAILED "too many instances failed"
#define TK__REASON_MAP_TOO_WIDE "more elements than the map's max"
#define TK__REASON_MAP_BAD_VALUE "nothing to map over"

/* One step's part in the flow. Index arrays are template positions. */
typedef struct tk__flow_step {
  const char *name;
  int *parents, nparents;
  int *children, nchildren;
  /* A decision step: the branches it chooses between (ndecides > 0). */
  int *decides, ndecides;
  int allow_none;
  const char *branches_key;
  /* A map step: over (1) a list or a range (2) found at `path` in the
   * results of parent `map_parent`. */
  int map;
  int map_parent;
  json_t *map_path; /* array of segment strings */
  int64_t chunk, max, max_failures;
} tk__flow_step;

typedef struct tk__flow {
  int64_t template_id;
  int nsteps;
  int special; /* any decision or map: a template without is never slowed */
  tk__flow_step *steps;
  json_t *definition; /* owns the strings above */
} tk__flow;

/* Read the flow of template template_id from its normalized definition
 * (JSON text) and its edges (pairs parent, child). 0, TK_ENOMEM, or
 * TK_EINVAL for a definition that does not parse. */
int tk__flow_read(int64_t template_id, const char *definition, const int *edges, int nedges,
                  tk__flow **out, tk_err *err);
void tk__flow_free(tk__flow *f);

/* Whether step idx (a template position, < nsteps) is a decision, a map. */
int tk__flow_is_decision(const tk__flow *f, int idx);
int tk__flow_is_map(const tk__flow *f, int idx);

/* The branches decision step idx chose by its results (JSON text): chosen
 * [0..nsteps) set to 1 for each (0 for every other step). 0; TK_EINVAL
 * with the permanent failure's message in why (naming the value) for
 * results that do not name a choice this step may make. */
int tk__flow_decide(const tk__flow *f, int idx, const char *results, unsigned char *chosen,
                    char *why, size_t whylen);

/* The elements map step idx runs over, from its parent's results (JSON
 * text, NULL for none): a new JSON array in *elements, for a range the
 * cursors {"start", "end"}. 0; TK_ERANGE with why when there are more
 * than the map's max; TK_EINVAL with why when the value is missing or not
 * a list (a range: not a non-negative integer); TK_ENOMEM. Each is a
 * permanent failure of the map step. */
int tk__flow_map_elements(const tk__flow *f, int idx, const char *parent_results,
                          json_t **elements, char *why, size_t whylen);

/* Whether a map of `total` instances, `failed` of them in error, ends
 * complete (1) or in error (0, why says so). */
int tk__flow_map_verdict(const tk__flow *f, int idx, int64_t total, int64_t failed, char *why,
                         size_t whylen);

/* The name of instance i of map step `name` ("process[3]") into buf. */
void tk__flow_instance_name(char *buf, size_t cap, const char *name, int64_t i);

#endif
