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
  tk_err err;
  if (tk_backoff_schedule_parse(o->value, p, &err) == 0) return 0;
  /* The library's message is `schedule "VALUE": WHY`; say it as a flag's. */
  size_t prefix = strlen("schedule \"") + strlen(o->value) + strlen("\": ");
  const char *why = strlen(err.msg) > prefix ? err.msg + prefix : err.msg;
  cli_error("backoff", "--schedule: invalid value \"%s\": %s", o->value, why);
  return CLI_EXIT_USAGE;
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

  tk_err err;
  if (g->json) {
    /* The preview's "delays" are the rows --json prints. */
    char *text = NULL;
    json_t *all = NULL;
    if (tk_backoff_preview_json(NULL, &policy, (int32_t)attempts, samples, seed, &text, &err) ==
            0 &&
        (all = json_loads(text, 0, NULL)) != NULL) {
      char *rows = json_dumps(json_object_get(all, "delays"), JSON_INDENT(2) | JSON_PRESERVE_ORDER);
      if (rows) puts(rows);
      free(rows);
    }
    int ok = all != NULL, had_text = text != NULL;
    json_decref(all);
    free(text);
    if (!ok) {
      cli_error("backoff", "%s", had_text ? "out of memory" : err.msg);
      return CLI_EXIT_FAILURE;
    }
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
  }
  tk_backoff_preview_row *rows = malloc((size_t)attempts * sizeof *rows);
  if (rows == NULL || tk_backoff_preview(&policy, (int32_t)attempts, samples, seed, rows, &err) != 0) {
    cli_error("backoff", "out of memory for %lld samples", (long long)samples);
    free(rows);
    return CLI_EXIT_FAILURE;
  }
  describe_policy(&policy, seed, samples);
  printf("%7s %12s %12s %12s %12s %12s\n", "attempt", "raw", "capped", "min", "median", "max");
  for (int64_t i = 0; i < attempts; i++) {
    printf("%7d", (int)rows[i].attempt);
    cell(rows[i].raw_ms);
    cell(rows[i].capped_ms);
    cell(rows[i].min_ms);
    cell(rows[i].median_ms);
    cell(rows[i].max_ms);
    printf("\n");
  }
  free(rows);
  return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}
