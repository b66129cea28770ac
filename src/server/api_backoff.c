/* GET /api/v1/backoff: the delays a configured profile gives, optionally
 * changed by the parameters (as `tasker backoff`'s flags), with the band
 * its jitter draws from and the names of every profile (docs/api.md). */
#include "server/server_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/backoff.h>
#include <tasker/duration.h>

/* A duration parameter into *ms when present. */
static int duration(const tk__query *q, const char *key, int64_t *ms, tk__api_error *e) {
  const char *v = tk__query_get(q, key);
  tk_err err;
  if (v && tk_duration_parse(v, ms, &err) != 0)
    return tk__api_fail(e, 400, "bad_request", key, "%s: %s", key, err.msg);
  return 0;
}

/* A number parameter in [min, max] into *x when present. */
static int number(const tk__query *q, const char *key, double min, double max, double *x,
                  tk__api_error *e) {
  const char *v = tk__query_get(q, key);
  if (v == NULL) return 0;
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (v[0] == '\0' || *end != '\0' || errno != 0 || !(d >= min && d <= max))
    return tk__api_fail(e, 400, "bad_request", key,
                        "%s=\"%.100s\": expected a number from %g to %g", key, v, min, max);
  *x = d;
  return 0;
}

/* The profile named by `profile` (default "default") with the parameters
 * applied, validated. */
static int policy_of(const tk_server *s, const tk__query *q, const char **name,
                     tk_backoff_policy *p, tk__api_error *e) {
  *name = tk__query_get(q, "profile");
  if (*name == NULL) *name = "default";
  const tk_backoff_policy *base = tk_config_profile(s->config, *name);
  if (base == NULL)
    return tk__api_fail(e, 404, "not_found", "profile",
                        "no backoff profile \"%.100s\" in the configuration", *name);
  *p = *base;
  const char *v;
  tk_err err;
  if ((v = tk__query_get(q, "schedule")) && tk_backoff_schedule_parse(v, p, &err) != 0)
    return tk__api_fail(e, 400, "bad_request", "schedule", "%s", err.msg);
  if (duration(q, "base", &p->base_ms, e) || duration(q, "cap", &p->max_delay_ms, e) ||
      duration(q, "min", &p->min_delay_ms, e) ||
      number(q, "multiplier", 1.0, 1e300, &p->multiplier, e) ||
      number(q, "jitter_fraction", 0.0, 1.0, &p->jitter_fraction, e))
    return -1;
  if ((v = tk__query_get(q, "jitter")) && tk_jitter_parse(v, &p->jitter) != 0)
    return tk__api_fail(e, 400, "bad_request", "jitter",
                        "jitter=\"%.100s\": expected none, proportional, full, equal or "
                        "decorrelated",
                        v);
  if (tk_backoff_policy_validate(p, &err) != 0)
    return tk__api_fail(e, 400, "bad_request", NULL, "the policy is not valid: %s", err.msg);
  return 0;
}

void tk__api_backoff(tk_server *s, const tk__query *q, tk__response *out) {
  static const char *const known[] = {"profile", "attempts", "samples", "seed",
                                      "schedule", "base", "multiplier", "cap",
                                      "min",      "jitter", "jitter_fraction", NULL};
  tk__api_error e;
  const char *name;
  tk_backoff_policy p;
  int64_t attempts, samples, seed;
  if (tk__query_only(q, known, &e) != 0 ||
      tk__query_int(q, "attempts", 1, 1000, 10, &attempts, &e) != 0 ||
      tk__query_int(q, "samples", 1, 10000, 200, &samples, &e) != 0 ||
      tk__query_int(q, "seed", 0, INT64_MAX, 1, &seed, &e) != 0 ||
      policy_of(s, q, &name, &p, &e) != 0) {
    tk__respond_error(out, &e);
    return;
  }
  char *text;
  tk_err err;
  if (tk_backoff_preview_json(name, &p, (int32_t)attempts, samples, (uint64_t)seed, &text, &err) !=
      0) {
    tk__respond_tk_error(s, out, &err, NULL);
    return;
  }
  json_t *j = json_loads(text, 0, NULL), *names = json_array();
  free(text);
  for (size_t i = 0; i < tk_config_profile_count(s->config); i++)
    json_array_append_new(names, json_string(tk_config_profile_name(s->config, i)));
  json_object_set_new(j, "profiles", names);
  tk__respond_json_value(out, 200, j);
}
