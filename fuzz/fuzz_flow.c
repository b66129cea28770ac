/* libFuzzer target for the rules of decisions and map (src/store/flow.c):
 * the input is a handler's results (any bytes; JSON when it parses), read
 * as the results of two decision steps and as the parent results of two
 * map steps of one fixed template (tests/common/flow_fixture.h). Never a
 * crash; and
 *   - a decision accepted chooses only its own branches, at least one
 *     unless allow_none; one refused chooses nothing and says why;
 *   - a map accepted gives an array of at most max elements, a range's
 *     being cursors [0, N) in order, each at most chunk long; one refused
 *     gives none and says why. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/error.h>

#include "store/flow.h"

#include "../tests/common/flow_fixture.h"

static tk__flow *flow;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  if (tk__flow_read(1, flow_definition, flow_edges, FLOW_NEDGES, &flow, NULL) != 0)
    abort();
  return 0;
}

static void check_decision(int idx, const char *results) {
  const tk__flow_step *st = &flow->steps[idx];
  unsigned char chosen[NSTEPS];
  char why[512] = "";
  memset(chosen, 0xAA, sizeof chosen);
  int rc = tk__flow_decide(flow, idx, results, chosen, why, sizeof why);
  int n = 0;
  for (int i = 0; i < NSTEPS; i++) {
    if (chosen[i] > 1) abort();
    if (!chosen[i]) continue;
    n++;
    int mine = 0;
    for (int b = 0; b < st->ndecides; b++) mine |= st->decides[b] == i;
    if (!mine) abort();
  }
  if (rc == 0 && n == 0 && !st->allow_none) abort();
  if (rc != 0 && (rc != TK_EINVAL || n != 0 || why[0] == '\0')) abort();
}

static void check_map(int idx, const char *results) {
  const tk__flow_step *st = &flow->steps[idx];
  json_t *els = (json_t *)1;
  char why[512] = "";
  int rc = tk__flow_map_elements(flow, idx, results, &els, why, sizeof why);
  if (rc != 0) {
    if (els != NULL || why[0] == '\0') abort();
    if (rc != TK_EINVAL && rc != TK_ERANGE && rc != TK_ENOMEM) abort();
    return;
  }
  if (!json_is_array(els) || (int64_t)json_array_size(els) > st->max) abort();
  if (st->map == 2) {
    json_int_t at = 0;
    size_t i;
    json_t *c;
    json_array_foreach(els, i, c) {
      json_int_t s = json_integer_value(json_object_get(c, "start"));
      json_int_t e = json_integer_value(json_object_get(c, "end"));
      if (s != at || e <= s || e - s > st->chunk) abort();
      at = e;
    }
  }
  json_decref(els);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *results = malloc(size + 1);
  if (results == NULL) return 0;
  memcpy(results, data, size);
  results[size] = '\0';
  check_decision(TRIAGE, results);
  check_decision(PICK, results);
  check_map(PROCESS, results);
  check_map(CHUNKS, results);
  free(results);
  return 0;
}
