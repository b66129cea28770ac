/* Previews of a backoff policy: the delays it gives attempt by attempt,
 * with the band its jitter draws from, for `tasker backoff` and the
 * dashboard's backoff explorer (GET /api/v1/backoff). */
#include <tasker/backoff.h>

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/duration.h>

/* qsort order of int64_t. */
static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

int tk_backoff_preview(const tk_backoff_policy *p, int32_t attempts, int64_t samples,
                       uint64_t seed, tk_backoff_preview_row *rows, tk_err *err) {
  int64_t *prev = calloc((size_t)samples, sizeof *prev); /* per-sequence previous delay */
  int64_t *draws = malloc((size_t)samples * sizeof *draws);
  if (prev == NULL || draws == NULL) {
    free(prev);
    free(draws);
    return tk_err_set(err, TK_ENOMEM, "out of memory for %lld samples", (long long)samples);
  }
  tk_rand rng;
  tk_rand_seed(&rng, seed);
  for (int32_t n = 1; n <= attempts; n++) {
    tk_backoff_result r;
    for (int64_t k = 0; k < samples; k++) {
      draws[k] = tk_backoff_delay(p, n, prev[k], -1, &rng, &r);
      prev[k] = draws[k];
    }
    qsort(draws, (size_t)samples, sizeof *draws, cmp_i64);
    int64_t mid = samples / 2;
    rows[n - 1] = (tk_backoff_preview_row){
        .attempt = n,
        .raw_ms = r.raw_ms,
        .capped_ms = r.capped_ms,
        .min_ms = draws[0],
        .median_ms = samples % 2 ? draws[mid] : draws[mid - 1] + (draws[mid] - draws[mid - 1]) / 2,
        .max_ms = draws[samples - 1],
    };
  }
  free(prev);
  free(draws);
  return 0;
}

/* The policy's fields as a JSON object (durations in ms). */
static json_t *policy_json(const tk_backoff_policy *p) {
  json_t *schedule = json_array();
  for (int i = 0; i < p->schedule_len; i++)
    json_array_append_new(schedule, json_integer(p->schedule_ms[i]));
  return json_pack("{s:o, s:I, s:f, s:I, s:I, s:s, s:f, s:I}", "schedule_ms", schedule, "base_ms",
                   (json_int_t)p->base_ms, "multiplier", p->multiplier, "max_delay_ms",
                   (json_int_t)p->max_delay_ms, "min_delay_ms", (json_int_t)p->min_delay_ms,
                   "jitter", tk_jitter_name(p->jitter), "jitter_fraction", p->jitter_fraction,
                   "max_server_delay_ms", (json_int_t)p->max_server_delay_ms);
}

int tk_backoff_preview_json(const char *profile, const tk_backoff_policy *p, int32_t attempts,
                            int64_t samples, uint64_t seed, char **json, tk_err *err) {
  *json = NULL;
  tk_backoff_preview_row *rows = malloc((size_t)attempts * sizeof *rows);
  if (rows == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory for %d attempts", (int)attempts);
  int rc = tk_backoff_preview(p, attempts, samples, seed, rows, err);
  json_t *delays = json_array();
  for (int32_t i = 0; rc == 0 && i < attempts; i++)
    json_array_append_new(
        delays, json_pack("{s:i, s:I, s:I, s:I, s:I, s:I}", "attempt", (int)rows[i].attempt,
                          "raw_ms", (json_int_t)rows[i].raw_ms, "capped_ms",
                          (json_int_t)rows[i].capped_ms, "min_ms", (json_int_t)rows[i].min_ms,
                          "median_ms", (json_int_t)rows[i].median_ms, "max_ms",
                          (json_int_t)rows[i].max_ms));
  free(rows);
  if (rc != 0) {
    json_decref(delays);
    return rc;
  }
  /* The seed is printed as text: a uint64 may not fit a JSON integer. */
  char seed_text[24];
  snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
  json_t *j = json_pack("{s:s?, s:o, s:s, s:I, s:o}", "profile", profile, "policy", policy_json(p),
                        "seed", seed_text, "samples", (json_int_t)samples, "delays", delays);
  if (j) *json = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(j);
  return *json ? 0 : tk_err_set(err, TK_ENOMEM, "out of memory writing the preview");
}

int tk_backoff_schedule_parse(const char *text, tk_backoff_policy *p, tk_err *err) {
  char buf[1024];
  size_t len = strlen(text);
  if (len >= sizeof buf)
    return tk_err_set(err, TK_EINVAL, "schedule: value too long (%zu characters)", len);
  if (len == 0) {
    p->schedule_len = 0; /* an explicitly empty schedule */
    return 0;
  }
  if (text[0] == ',' || text[len - 1] == ',' || strstr(text, ",,") != NULL)
    return tk_err_set(err, TK_EINVAL,
                      "schedule \"%s\": expected delays separated by commas",
                      text);
  memcpy(buf, text, len + 1);
  int64_t ms[TK_BACKOFF_SCHEDULE_MAX];
  int n = 0;
  char *save = NULL;
  for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    if (n == TK_BACKOFF_SCHEDULE_MAX)
      return tk_err_set(err, TK_EINVAL, "schedule \"%s\": at most %d delays are allowed", text,
                        TK_BACKOFF_SCHEDULE_MAX);
    tk_err e;
    if (tk_duration_parse(item, &ms[n], &e) != 0)
      return tk_err_set(err, TK_EINVAL, "schedule \"%s\": %s", text, e.msg);
    n++;
  }
  memcpy(p->schedule_ms, ms, (size_t)n * sizeof ms[0]);
  p->schedule_len = n;
  return 0;
}
