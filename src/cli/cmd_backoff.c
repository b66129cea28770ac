/* tasker backoff: print the delays a backoff policy gives, attempt by
 * attempt, optionally as min/median/max over many jittered draws. */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/backoff.h>
#include <tasker/config.h>
#include <tasker/duration.h>

const char cmd_backoff_usage[] =
    "usage: tasker backoff [--attempts N] [--samples K] [--seed S] [--json] [policy flags]\n"
    "\n"
    "Print the delay before each retry, for failures 1..N. With --samples K each\n"
    "row shows the min, median and max over K independent draws (decorrelated\n"
    "jitter draws K whole sequences, since each delay depends on the previous).\n"
    "\n"
    "  --attempts N          failures to show (default 10, at most 100000)\n"
    "  --samples K           draws per attempt (default 1, at most 1000000)\n"
    "  --seed S              random seed (default: fresh entropy, printed)\n"
    "  --json                print [{attempt, raw_ms, capped_ms, min_ms, median_ms, max_ms}]\n"
    "\n"
    "Policy: a configured profile (see tasker config show), then these flags:\n"
    "  --profile NAME        the profile to start from (default: \"default\", [backoff])\n"
    "  --schedule 1s,2s,4s   explicit first delays\n"
    "  --base DURATION       first delay when there is no schedule\n"
    "  --multiplier X        growth past the schedule (>= 1)\n"
    "  --max-delay DURATION  cap, applied after jitter\n"
    "  --min-delay DURATION  floor, applied after jitter\n"
    "  --jitter MODE         none | proportional | full | equal | decorrelated\n"
    "  --jitter-fraction F   for proportional jitter, in [0, 1]\n"
    "\n"
    "Durations: 150ms, 2s, 5m, 1h, 1m30s, or plain seconds.\n";

enum {
  OPT_ATTEMPTS, OPT_SAMPLES, OPT_SEED, OPT_SCHEDULE, OPT_BASE, OPT_MULTIPLIER,
  OPT_MAX_DELAY, OPT_MIN_DELAY, OPT_JITTER, OPT_JITTER_FRACTION, OPT_PROFILE, OPT_COUNT
};

/* Parse "1s,2s,4s" into the policy's schedule. */
static int parse_schedule(const cli_opt *o, tk_backoff_policy *p) {
  char buf[1024];
  if (strlen(o->value) >= sizeof buf) {
    cli_error("backoff", "--schedule: value too long (%zu characters)", strlen(o->value));
    return CLI_EXIT_USAGE;
  }
  strcpy(buf, o->value);
  p->schedule_len = 0;
  if (buf[0] == '\0') return 0; /* an explicitly empty schedule */
  char *save = NULL;
  int n = 0;
  for (char *tok = buf;; tok = NULL) {
    char *item = strtok_r(tok, ",", &save);
    if (item == NULL) break;
    if (n == TK_BACKOFF_SCHEDULE_MAX) {
      cli_error("backoff", "--schedule: invalid value \"%s\": at most %d delays are allowed",
                o->value, TK_BACKOFF_SCHEDULE_MAX);
      return CLI_EXIT_USAGE;
    }
    tk_err err;
    if (tk_duration_parse(item, &p->schedule_ms[n], &err) != 0) {
      cli_error("backoff", "--schedule: invalid value \"%s\": %s", o->value, err.msg);
      return CLI_EXIT_USAGE;
    }
    n++;
  }
  if (n == 0 || o->value[strlen(o->value) - 1] == ',' || o->value[0] == ',' ||
      strstr(o->value, ",,") != NULL) {
    cli_error("backoff", "--schedule: invalid value \"%s\": expected delays separated by commas",
              o->value);
    return CLI_EXIT_USAGE;
  }
  p->schedule_len = n;
  return 0;
}

/* Apply the policy flags on top of `p`. */
static int apply_policy_flags(cli_opt *o, tk_backoff_policy *p) {
  int rc = 0;
  if (o[OPT_SCHEDULE].seen && (rc = parse_schedule(&o[OPT_SCHEDULE], p))) return rc;
  if (o[OPT_BASE].seen && (rc = cli_duration("backoff", &o[OPT_BASE], &p->base_ms))) return rc;
  if (o[OPT_MULTIPLIER].seen &&
      (rc = cli_double("backoff", &o[OPT_MULTIPLIER], 1.0, 1e300, &p->multiplier)))
    return rc;
  if (o[OPT_MAX_DELAY].seen &&
      (rc = cli_duration("backoff", &o[OPT_MAX_DELAY], &p->max_delay_ms)))
    return rc;
  if (o[OPT_MIN_DELAY].seen &&
      (rc = cli_duration("backoff", &o[OPT_MIN_DELAY], &p->min_delay_ms)))
    return rc;
  if (o[OPT_JITTER].seen && tk_jitter_parse(o[OPT_JITTER].value, &p->jitter) != 0) {
    cli_error("backoff",
              "--jitter: invalid value \"%s\": expected none, proportional, full, equal or "
              "decorrelated",
              o[OPT_JITTER].value);
    return CLI_EXIT_USAGE;
  }
  if (o[OPT_JITTER_FRACTION].seen &&
      (rc = cli_double("backoff", &o[OPT_JITTER_FRACTION], 0.0, 1.0, &p->jitter_fraction)))
    return rc;
  tk_err err;
  if (tk_backoff_policy_validate(p, &err) != 0) {
    cli_error("backoff", "invalid policy: %s", err.msg);
    return CLI_EXIT_USAGE;
  }
  return 0;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void describe_policy(const tk_backoff_policy *p, uint64_t seed, int64_t samples) {
  char a[32], b[32];
  printf("policy: ");
  if (p->schedule_len > 0) {
    printf("schedule ");
    for (int i = 0; i < p->schedule_len; i++) {
      tk_duration_format(p->schedule_ms[i], a, sizeof a);
      printf("%s%s", i ? "," : "", a);
    }
  } else {
    tk_duration_format(p->base_ms, a, sizeof a);
    printf("base %s", a);
  }
  tk_duration_format(p->max_delay_ms, a, sizeof a);
  tk_duration_format(p->min_delay_ms, b, sizeof b);
  printf(", multiplier %g, max %s, min %s, jitter %s", p->multiplier, a, b,
         tk_jitter_name(p->jitter));
  if (p->jitter == TK_JITTER_PROPORTIONAL) printf(" %g", p->jitter_fraction);
  printf("\n");
  if (p->jitter != TK_JITTER_NONE)
    printf("seed %" PRIu64 ", %lld sample%s per attempt\n", seed, (long long)samples,
           samples == 1 ? "" : "s");
}

static void cell(int64_t ms) {
  char buf[40];
  tk_duration_format(ms, buf, sizeof buf);
  printf(" %12s", buf);
}

int cmd_backoff(cli_globals *g, int argc, char **argv) {
  cli_opt o[OPT_COUNT] = {
      [OPT_ATTEMPTS] = {"attempts", "N", NULL, 0},
      [OPT_SAMPLES] = {"samples", "K", NULL, 0},
      [OPT_SEED] = {"seed", "S", NULL, 0},
      [OPT_SCHEDULE] = {"schedule", "DELAYS", NULL, 0},
      [OPT_BASE] = {"base", "DURATION", NULL, 0},
      [OPT_MULTIPLIER] = {"multiplier", "X", NULL, 0},
      [OPT_MAX_DELAY] = {"max-delay", "DURATION", NULL, 0},
      [OPT_MIN_DELAY] = {"min-delay", "DURATION", NULL, 0},
      [OPT_JITTER] = {"jitter", "MODE", NULL, 0},
      [OPT_JITTER_FRACTION] = {"jitter-fraction", "F", NULL, 0},
      [OPT_PROFILE] = {"profile", "NAME", NULL, 0},
  };
  const char *pos[1];
  int npos;
  int rc = cli_parse("backoff", o, OPT_COUNT, argc, argv, pos, &npos, 0);
  if (rc) return rc;

  int64_t attempts = 10, samples = 1;
  uint64_t seed;
  if (o[OPT_ATTEMPTS].seen && (rc = cli_int("backoff", &o[OPT_ATTEMPTS], 1, 100000, &attempts)))
    return rc;
  if (o[OPT_SAMPLES].seen && (rc = cli_int("backoff", &o[OPT_SAMPLES], 1, 1000000, &samples)))
    return rc;
  if (o[OPT_SEED].seen) {
    if ((rc = cli_u64("backoff", &o[OPT_SEED], &seed))) return rc;
  } else {
    seed = tk_rand_entropy_seed();
  }
  tk_config *cfg = NULL;
  if ((rc = cli_load_config(g, &cfg))) return rc;
  const tk_backoff_policy *profile;
  rc = cli_config_profile("backoff", cfg, o[OPT_PROFILE].seen ? o[OPT_PROFILE].value : "default",
                          &profile);
  tk_backoff_policy policy;
  if (rc == 0) policy = *profile;
  tk_config_free(cfg);
  if (rc || (rc = apply_policy_flags(o, &policy))) return rc;

  int64_t *prev = calloc((size_t)samples, sizeof *prev); /* per-sequence previous delay */
  int64_t *draws = malloc((size_t)samples * sizeof *draws);
  json_t *rows = g->json ? json_array() : NULL;
  if (prev == NULL || draws == NULL || (g->json && rows == NULL)) {
    free(prev);
    free(draws);
    json_decref(rows);
    cli_error("backoff", "out of memory for %lld samples", (long long)samples);
    return CLI_EXIT_FAILURE;
  }
  tk_rand rng;
  tk_rand_seed(&rng, seed);
  if (!g->json) {
    describe_policy(&policy, seed, samples);
    printf("%7s %12s %12s %12s %12s %12s\n", "attempt", "raw", "capped", "min", "median", "max");
  }
  for (int32_t n = 1; n <= attempts; n++) {
    tk_backoff_result r;
    for (int64_t k = 0; k < samples; k++) {
      draws[k] = tk_backoff_delay(&policy, n, prev[k], -1, &rng, &r);
      prev[k] = draws[k];
    }
    qsort(draws, (size_t)samples, sizeof *draws, cmp_i64);
    int64_t lo = draws[0], hi = draws[samples - 1];
    int64_t median = samples % 2 ? draws[samples / 2]
                                 : draws[samples / 2 - 1] +
                                       (draws[samples / 2] - draws[samples / 2 - 1]) / 2;
    if (g->json) {
      json_array_append_new(rows, json_pack("{s:i, s:I, s:I, s:I, s:I, s:I}", "attempt", (int)n,
                                            "raw_ms", (json_int_t)r.raw_ms, "capped_ms",
                                            (json_int_t)r.capped_ms, "min_ms", (json_int_t)lo,
                                            "median_ms", (json_int_t)median, "max_ms",
                                            (json_int_t)hi));
    } else {
      printf("%7d", (int)n);
      cell(r.raw_ms);
      cell(r.capped_ms);
      cell(lo);
      cell(median);
      cell(hi);
      printf("\n");
    }
  }
  if (g->json) {
    char *text = json_dumps(rows, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text) puts(text);
    free(text);
    json_decref(rows);
  }
  free(prev);
  free(draws);
  return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}
