/* The table of known configuration keys: type, range, built-in default.
 * This is the one place where a default delay, cap or limit is written. */
#include "config/internal.h"

#include <stdint.h>
#include <string.h>

#define POLICY(f) offsetof(tk_backoff_policy, f)
#define ENGINE(f) offsetof(tk_engine_settings, f)
#define BATCH(f) offsetof(tk_batch_settings, f)
#define BUDGET(f) offsetof(tk_budget_settings, f)
#define RETENTION(f) offsetof(tk_retention_settings, f)
#define LIMITS(f) offsetof(tk_limits_settings, f)
#define SERVER(f) offsetof(tk_server_settings, f)

#define SECONDS 1000
#define MINUTES (60 * SECONDS)
#define HOURS (60 * MINUTES)

/* Ordered as `config show` prints them. */
static const tk__key backoff_keys[] = {
    {.name = "schedule", .kind = TK__K_DURATIONS, .offset = POLICY(schedule_ms),
     .len_offset = POLICY(schedule_len), .max = TK_BACKOFF_SCHEDULE_MAX,
     .allowed = "an array of at most 32 durations"},
    {.name = "base", .kind = TK__K_DURATION, .offset = POLICY(base_ms), .min = 0,
     .max = INT64_MAX, .allowed = "a duration >= 0", .def_i = 1 * SECONDS},
    {.name = "multiplier", .kind = TK__K_NUMBER, .offset = POLICY(multiplier), .fmin = 1.0,
     .fmax = 1e300, .allowed = "a number >= 1", .def_f = 2.0},
    {.name = "max_delay", .kind = TK__K_DURATION, .offset = POLICY(max_delay_ms), .min = 0,
     .max = INT64_MAX, .allowed = "a duration >= 0", .def_i = 5 * MINUTES},
    {.name = "min_delay", .kind = TK__K_DURATION, .offset = POLICY(min_delay_ms), .min = 0,
     .max = INT64_MAX, .allowed = "a duration >= 0", .def_i = 0},
    {.name = "jitter", .kind = TK__K_JITTER, .offset = POLICY(jitter),
     .allowed = "one of none, proportional, full, equal, decorrelated",
     .def_i = TK_JITTER_PROPORTIONAL},
    {.name = "jitter_fraction", .kind = TK__K_NUMBER, .offset = POLICY(jitter_fraction),
     .fmin = 0.0, .fmax = 1.0, .allowed = "a number from 0 to 1", .def_f = 0.1},
    {.name = "max_server_delay", .kind = TK__K_DURATION, .offset = POLICY(max_server_delay_ms),
     .min = 0, .max = INT64_MAX, .allowed = "a duration >= 0", .def_i = 1 * HOURS},
};

static const char *const durability_names[] = {"full", "fast", NULL};

static const tk__key engine_keys[] = {
    {.name = "max_attempts", .kind = TK__K_INT, .offset = ENGINE(max_attempts), .min = 1,
     .max = INT32_MAX, .allowed = "an integer from 1 to 2147483647", .def_i = 5},
    {.name = "lease", .kind = TK__K_DURATION, .offset = ENGINE(lease_ms), .min = 1,
     .max = INT64_MAX, .allowed = "a duration > 0", .def_i = 30 * SECONDS},
    {.name = "heartbeat", .kind = TK__K_DURATION, .offset = ENGINE(heartbeat_ms), .min = 1,
     .max = INT64_MAX, .allowed = "a duration > 0", .def_i = 10 * SECONDS},
    {.name = "claim_batch", .kind = TK__K_INT, .offset = ENGINE(claim_batch), .min = 1,
     .max = 10000, .allowed = "an integer from 1 to 10000", .def_i = 64},
    {.name = "workers", .kind = TK__K_INT, .offset = ENGINE(workers), .min = 1, .max = 1024,
     .allowed = "an integer from 1 to 1024", .def_i = 4},
    {.name = "max_async", .kind = TK__K_INT, .offset = ENGINE(max_async), .min = 0,
     .max = 100000, .allowed = "an integer from 0 to 100000", .def_i = 1000},
    {.name = "db", .kind = TK__K_STRING, .offset = ENGINE(db), .allowed = "a non-empty string",
     .def_s = "sqlite:./tasker.db"},
    {.name = "reconnect_backoff", .kind = TK__K_STRING, .offset = ENGINE(reconnect_backoff),
     .allowed = "the name of a backoff profile", .def_s = "default"},
    {.name = "reconnect_give_up", .kind = TK__K_DURATION, .offset = ENGINE(reconnect_give_up_ms),
     .min = 1, .max = INT64_MAX, .allowed = "a duration > 0", .def_i = 5 * MINUTES},
    {.name = "durability", .kind = TK__K_STRING, .offset = ENGINE(durability),
     .allowed = "one of full, fast", .def_s = "full", .choices = durability_names},
};

#define DAYS (24 * (int64_t)HOURS)
/* [retention]: off unless a duration is set (docs/config.md). */
static const tk__key retention_keys[] = {
    {.name = "finished_after", .kind = TK__K_DURATION, .offset = RETENTION(finished_after_ms),
     .min = 0, .max = 100000 * DAYS, .allowed = "a duration >= 0 (0: keep)", .def_i = 0},
    {.name = "complete_after", .kind = TK__K_DURATION, .offset = RETENTION(complete_after_ms),
     .min = 0, .max = 100000 * DAYS, .allowed = "a duration >= 0 (0: finished_after)",
     .def_i = 0},
    {.name = "error_after", .kind = TK__K_DURATION, .offset = RETENTION(error_after_ms), .min = 0,
     .max = 100000 * DAYS, .allowed = "a duration >= 0 (0: finished_after)", .def_i = 0},
    {.name = "cancelled_after", .kind = TK__K_DURATION, .offset = RETENTION(cancelled_after_ms),
     .min = 0, .max = 100000 * DAYS, .allowed = "a duration >= 0 (0: finished_after)",
     .def_i = 0},
    {.name = "batch", .kind = TK__K_INT, .offset = RETENTION(batch), .min = 1, .max = 100000,
     .allowed = "an integer from 1 to 100000", .def_i = 500},
    {.name = "interval", .kind = TK__K_DURATION, .offset = RETENTION(interval_ms), .min = 1,
     .max = INT64_MAX, .allowed = "a duration > 0", .def_i = 1 * MINUTES},
};

/* [limits]: what `template add` accepts (docs/config.md). A map's
 * instances are rows of one transaction, hence a ceiling at all. */
static const tk__key limits_keys[] = {
    {.name = "map_max", .kind = TK__K_INT, .offset = LIMITS(map_max), .min = 1,
     .max = 1000000000, .allowed = "an integer from 1 to 1000000000", .def_i = 100000},
};

/* [server]: the URL callbacks come to (docs/callbacks.md); "" unset. */
static const tk__key server_keys[] = {
    {.name = "public_url", .kind = TK__K_STRING, .offset = SERVER(public_url),
     .allowed = "the http:// or https:// URL tasker serve is reached at", .def_s = ""},
};

static const tk__key batch_keys[] = {
    {.name = "max_in_call_retries", .kind = TK__K_INT, .offset = BATCH(max_in_call_retries),
     .min = 0, .max = 1000, .allowed = "an integer from 0 to 1000", .def_i = 2},
    {.name = "max_item_attempts", .kind = TK__K_INT, .offset = BATCH(max_item_attempts),
     .min = 1, .max = INT32_MAX, .allowed = "an integer from 1 to 2147483647", .def_i = 5},
};

/* [budgets.NAME] (DESIGN §14). The ranges are tk_retry_budget_config's;
 * that the window is a multiple of 100 ms and that the floor allows a
 * retry per window are checked after the last layer (finish.c). */
static const tk__key budget_keys[] = {
    {.name = "ratio", .kind = TK__K_NUMBER, .offset = BUDGET(budget.ratio), .fmin = 0,
     .fmax = 1000, .allowed = "a number from 0 to 1000 (retries per first attempt)",
     .def_f = 0.1},
    {.name = "window", .kind = TK__K_DURATION, .offset = BUDGET(budget.window_ms), .min = 100,
     .max = 24 * HOURS, .allowed = "a duration from 100ms to 24h", .def_i = 10 * SECONDS},
    {.name = "min_per_second", .kind = TK__K_NUMBER, .offset = BUDGET(budget.min_per_second),
     .fmin = 0, .fmax = 1e6, .allowed = "a number from 0 to 1000000", .def_f = 1},
    {.name = "per_host", .kind = TK__K_BOOL, .offset = BUDGET(per_host),
     .allowed = "true or false", .def_i = 0},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
_Static_assert(COUNT(backoff_keys) == TK__BACKOFF_NKEYS, "TK__BACKOFF_NKEYS");
_Static_assert(COUNT(engine_keys) == TK__ENGINE_NKEYS, "TK__ENGINE_NKEYS");
_Static_assert(COUNT(batch_keys) == TK__BATCH_NKEYS, "TK__BATCH_NKEYS");
_Static_assert(COUNT(budget_keys) == TK__BUDGET_NKEYS, "TK__BUDGET_NKEYS");
_Static_assert(COUNT(retention_keys) == TK__RETENTION_NKEYS, "TK__RETENTION_NKEYS");
_Static_assert(COUNT(limits_keys) == TK__LIMITS_NKEYS, "TK__LIMITS_NKEYS");
_Static_assert(COUNT(server_keys) == TK__SERVER_NKEYS, "TK__SERVER_NKEYS");

const tk__schema tk__backoff_schema = {"backoff", backoff_keys, COUNT(backoff_keys)};
const tk__schema tk__engine_schema = {"engine", engine_keys, COUNT(engine_keys)};
const tk__schema tk__batch_schema = {"batch", batch_keys, COUNT(batch_keys)};
const tk__schema tk__budget_schema = {"budgets", budget_keys, COUNT(budget_keys)};
const tk__schema tk__retention_schema = {"retention", retention_keys, COUNT(retention_keys)};
const tk__schema tk__limits_schema = {"limits", limits_keys, COUNT(limits_keys)};
const tk__schema tk__server_schema = {"server", server_keys, COUNT(server_keys)};

const tk__key *tk__schema_find(const tk__schema *s, const char *name, size_t len) {
  for (size_t i = 0; i < s->nkeys; i++)
    if (strlen(s->keys[i].name) == len && memcmp(s->keys[i].name, name, len) == 0)
      return &s->keys[i];
  return NULL;
}

size_t tk__schema_index(const tk__schema *s, const tk__key *k) { return (size_t)(k - s->keys); }
