/* DAG validation: depth-first search with colours, reporting a cycle's
 * path. Iterative, so a long chain cannot overflow the C stack. */
#include "workflow/template.h"

#include <stdlib.h>
#include <string.h>

enum { WHITE, GREY, BLACK };

/* Write "a -> b -> c -> a" for the cycle closing at `to` along the path. */
static void describe_cycle(const int *path, int depth, int to, const char *const *names,
                           char *out, size_t len) {
  int start = 0;
  while (start < depth && path[start] != to) start++;
  size_t used = 0;
  out[0] = '\0';
  for (int i = start; i <= depth; i++) {
    int node = i < depth ? path[i] : to;
    int n = snprintf(out + used, len - used, "%s%s", i == start ? "" : " -> ", names[node]);
    if (n < 0 || (size_t)n >= len - used) break;
    used += (size_t)n;
  }
}

int tk__dag_check(int nsteps, const int *const *parents, const int *nparents,
                  const char *const *names, char *cycle, size_t cycle_len, int *step, int *dep) {
  int *colour = calloc((size_t)nsteps + 1, sizeof *colour);
  int *path = malloc(((size_t)nsteps + 1) * sizeof *path);
  int *next = malloc(((size_t)nsteps + 1) * sizeof *next);
  if (!colour || !path || !next) {
    free(colour); free(path); free(next);
    return TK_ENOMEM;
  }
  int rc = 0;
  /* Walk parent links: a cycle through parents is a cycle of the DAG. */
  for (int root = 0; root < nsteps && rc == 0; root++) {
    if (colour[root] != WHITE) continue;
    int depth = 0;
    path[0] = root;
    next[0] = 0;
    colour[root] = GREY;
    while (depth >= 0 && rc == 0) {
      int node = path[depth];
      if (next[depth] < nparents[node]) {
        int p = parents[node][next[depth]++];
        if (colour[p] == GREY) {
          /* The path runs child -> parent; print it parent-first, as the
           * order steps would run in. */
          int *rev = calloc((size_t)depth + 1, sizeof *rev);
          int k = 0, s = depth;
          while (path[s] != p) s--;
          if (rev) {
            for (int i = depth; i >= s; i--) rev[k++] = path[i];
            describe_cycle(rev, k, rev[0], names, cycle, cycle_len);
            free(rev);
          }
          *step = node;
          *dep = next[depth] - 1;
          rc = TK_ECONFIG;
        } else if (colour[p] == WHITE) {
          colour[p] = GREY;
          path[++depth] = p;
          next[depth] = 0;
        }
      } else {
        colour[node] = BLACK;
        depth--;
      }
    }
  }
  free(colour);
  free(path);
  free(next);
  return rc;
}
