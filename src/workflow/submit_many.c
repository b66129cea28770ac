/* Bulk submit (tk_task_submit_many): every submission built and checked
 * before the store sees any, then one store transaction for them all. */
#include <tasker/workflow.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "workflow/submit.h"

/* Whether two submissions name the same template and version (NULL: the
 * newest), so that the second may be built like the first. */
static int same_template(const tk_submit_request *a, const tk_submit_request *b) {
  if (a->template_name == NULL || b->template_name == NULL ||
      strcmp(a->template_name, b->template_name) != 0)
    return 0;
  if (a->version == NULL || b->version == NULL) return a->version == b->version;
  return strcmp(a->version, b->version) == 0;
}

static uint64_t hash_text(const char *p) {
  uint64_t h = 1469598103934665603ULL;
  for (; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  return h;
}

/* The submit's identity rule across the call: a submission whose identity
 * an earlier one of the call already names creates nothing, as if they
 * had been submitted one after another. first[i] is the index of the
 * first submission with reqs[i]'s identity (i itself for the first, and
 * for one without an identity). An open-addressing table of indexes. */
static int identities_fold(const tk_submit_request *reqs, int n, int *first) {
  size_t cap = 16;
  while (cap < (size_t)n * 2) cap *= 2;
  int *slot = malloc(cap * sizeof *slot);
  if (slot == NULL) return -1;
  for (size_t k = 0; k < cap; k++) slot[k] = -1;
  for (int i = 0; i < n; i++) {
    first[i] = i;
    if (reqs[i].identity == NULL) continue;
    for (size_t k = hash_text(reqs[i].identity) & (cap - 1);; k = (k + 1) & (cap - 1)) {
      if (slot[k] < 0) {
        slot[k] = i;
        break;
      }
      if (strcmp(reqs[slot[k]].identity, reqs[i].identity) == 0) {
        first[i] = slot[k];
        break;
      }
    }
  }
  free(slot);
  return 0;
}

int tk_task_submit_many(tk_store *s, const tk_config *cfg, const tk_submit_request *reqs, int n,
                        int64_t now, int64_t *task_ids, int *existed, int *failed,
                        tk_err *err) {
  if (failed) *failed = -1;
  if (n <= 0) return 0;
  tk__built_task *b = calloc((size_t)n, sizeof *b);
  tk__new_task *t = calloc((size_t)n, sizeof *t);
  int *first = calloc((size_t)n, sizeof *first);
  int64_t *ids = calloc((size_t)n, sizeof *ids);
  int *old = calloc((size_t)n, sizeof *old);
  int rc = 0, built = 0, nt = 0;
  if (!b || !t || !first || !ids || !old || identities_fold(reqs, n, first) != 0) {
    rc = tk_err_set(err, TK_ENOMEM, "out of memory submitting %d tasks", n);
    goto done;
  }
  for (; built < n; built++) {
    const tk_submit_request *r = &reqs[built];
    /* The template is looked up once per run of submissions naming it. */
    rc = built > 0 && same_template(r, &reqs[built - 1])
             ? tk__task_build_like(&b[built - 1], cfg, r, now, &b[built], err)
             : tk__task_build(s, cfg, r, now, &b[built], err);
    if (rc) {
      if (failed) *failed = built;
      goto done;
    }
    if (first[built] == built) t[nt++] = b[built].t;
  }
  if ((rc = s->ops->submit_many(s, t, nt, ids, old, err))) goto done;
  /* Back from the store's order (first submissions of each identity) to
   * the caller's. */
  for (int i = 0, k = 0; i < n; i++) {
    if (first[i] == i) {
      task_ids[i] = ids[k];
      if (existed) existed[i] = old[k];
      k++;
    } else {
      task_ids[i] = task_ids[first[i]];
      if (existed) existed[i] = 1;
    }
  }
  for (int i = 0, k = 0; i < n; i++)
    if (first[i] == i && !old[k++]) tk__task_created_emit(&reqs[i], now, task_ids[i]);
done:
  for (int i = 0; b && i < built; i++) tk__built_task_free(&b[i]);
  free(b);
  free(t);
  free(first);
  free(ids);
  free(old);
  return rc;
}
