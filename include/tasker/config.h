/* tasker: typed, layered, validated configuration (DESIGN §7).
 *
 * Settings are built in layers, later wins:
 *   built-in defaults -> the config file -> the environment overlay
 *   (environments/ENV.toml beside the config file) -> --set KEY=VALUE.
 * Every retry setting comes from here: nothing else hard-codes a delay.
 *
 * [backoff] is the default profile; [backoff.profiles.NAME] are named
 * profiles that inherit every key they do not set from the effective
 * default profile (after all layers). [engine] and [batch] hold the engine's
 * settings; [budgets.NAME] are retry budgets, each key it does not set
 * taking its built-in default. Every effective value remembers where it
 * came from.
 *
 * Errors name the place (FILE:LINE:COLUMN, or "--set KEY=VALUE"), the key,
 * the value and what is allowed, e.g.
 *   x.toml:4:14: backoff.multiplier = 0.5: must be a number >= 1
 * The library never reads the process environment: the caller resolves
 * TASKER_ENV into env_name.
 */
#ifndef TASKER_CONFIG_H
#define TASKER_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include <tasker/backoff.h>
#include <tasker/budget.h>
#include <tasker/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The default location of the config file, relative to the working
 * directory; used only when it exists. */
#define TK_CONFIG_DEFAULT_PATH "config/tasker.toml"

typedef struct tk_config tk_config;

/* Where the layers come from. A zeroed struct (or NULL) loads the built-in
 * defaults only. */
typedef struct tk_config_source {
  const char *config_path;  /* explicit file; must exist. NULL: default_path */
  const char *default_path; /* used when config_path is NULL and the file
                               exists (e.g. TK_CONFIG_DEFAULT_PATH); NULL: none */
  const char *env_name;     /* overlay environments/ENV.toml in the directory
                               of the config file (or of default_path); must
                               exist when given. NULL or "": no overlay */
  const char *const *sets;  /* "dotted.key=VALUE", applied in order; VALUE is
                               a TOML value, or else taken as a bare string */
  int nsets;
} tk_config_source;

/* The [engine] table. Durations in milliseconds. */
typedef struct tk_engine_settings {
  int64_t max_attempts; /* attempts per step before it is exhausted; >= 1 */
  int64_t lease_ms;     /* how long a claim is owned without a heartbeat; > 0 */
  int64_t heartbeat_ms; /* heartbeat interval; 0 < heartbeat < lease */
  int64_t claim_batch;  /* steps claimed per transaction; 1..10000 */
  int64_t workers;      /* concurrent step executions; 1..1024 */
  /* Attempts in flight at once whose handler holds no worker while it
   * waits (http); 0..100000, 0: they run on the workers. */
  int64_t max_async;
  const char *db;       /* store URL, e.g. "sqlite:./tasker.db" */
  /* A lost store connection (a database restart): tried again under this
   * backoff profile until reconnect_give_up has passed. */
  const char *reconnect_backoff; /* a profile name */
  int64_t reconnect_give_up_ms;  /* > 0 */
  /* What a commit survives: "full" or "fast" (tk_durability_parse;
   * docs/durability.md). */
  const char *durability;
} tk_engine_settings;

/* The [batch] table (DESIGN §9). */
/* The [retention] table (DESIGN §16, docs/config.md): finished tasks older
 * than these are removed in the background by every orchestrator. A
 * duration of 0 is not set: a state's own (complete_after, ...) falls back
 * to finished_after, and with neither that state is kept for ever. */
typedef struct tk_retention_settings {
  int64_t finished_after_ms;  /* every finished state */
  int64_t complete_after_ms;  /* complete only */
  int64_t error_after_ms;     /* error only */
  int64_t cancelled_after_ms; /* cancelled only */
  int64_t batch;              /* tasks per transaction; 1..100000 */
  int64_t interval_ms;        /* between looks when a look found little; > 0 */
} tk_retention_settings;

typedef struct tk_batch_settings {
  int64_t max_in_call_retries; /* handler re-calls within one claim; 0..1000 */
  int64_t max_item_attempts;   /* attempts before an item gives up; >= 1 */
} tk_batch_settings;

/* The [limits] table: ceilings a template is checked against when it is
 * added (docs/config.md). */
typedef struct tk_limits_settings {
  int64_t map_max; /* the most instances a map step may declare (map.max); 1..10^9 */
} tk_limits_settings;

/* The [server] table (docs/callbacks.md). */
typedef struct tk_server_settings {
  /* The URL the outside world reaches `tasker serve` at ("" unset): an
   * http step's callback URL begins with it. */
  const char *public_url;
} tk_server_settings;

/* A [budgets.NAME] table: a retry budget that steps name with
 * retry = { budget = "NAME" } (DESIGN §14, docs/config.md). */
typedef struct tk_budget_settings {
  tk_retry_budget_config budget; /* ratio, window, min_per_second */
  int per_host; /* 1: one budget per destination host (a handler's
                   tk_handler_result.downstream); 0: one for every step naming it */
} tk_budget_settings;

/* A [queues.NAME] table (DESIGN §19, docs/config.md): limits that hold
 * store-wide, across every orchestrator and outside worker, for the steps
 * naming the queue (a step's `queue`, a worker handler's queue). The
 * store keeps them (tk_queue_sync). */
typedef struct tk_queue_settings {
  const char *name;      /* 1 to 64 of a-z 0-9 '_' '.' '-' */
  int concurrency;       /* its steps in progress at once; 0: no limit */
  double rate;           /* its steps started per second; 0: no limit */
  const char *rate_text; /* the rate as written ("50/s"); NULL: none */
  int burst;             /* the token bucket's size in effect (the one set,
                            else max(1, ceil(rate))); 0 without a rate */
} tk_queue_settings;

typedef enum tk_config_origin_kind {
  TK_CONFIG_DEFAULT = 0, /* built in */
  TK_CONFIG_FILE,        /* a config file or an overlay */
  TK_CONFIG_SET          /* a --set flag */
} tk_config_origin_kind;

/* Where an effective value was set. */
typedef struct tk_config_origin {
  tk_config_origin_kind kind;
  const char *file;      /* FILE: the path as opened; SET: the "KEY=VALUE"
                            text; DEFAULT: NULL */
  uint32_t line, column; /* FILE: position of the value; else 0 */
  unsigned layer;        /* 0 defaults, 1 config file, 2 overlay, 3 + i for
                            the i-th --set */
} tk_config_origin;

typedef enum tk_config_kind {
  TK_CONFIG_DURATION = 1, /* i: milliseconds */
  TK_CONFIG_DURATIONS,    /* list/list_len: milliseconds */
  TK_CONFIG_INTEGER,      /* i */
  TK_CONFIG_NUMBER,       /* f */
  TK_CONFIG_STRING,       /* s (also the jitter mode) */
  TK_CONFIG_BOOLEAN       /* i: 0 or 1 */
} tk_config_kind;

/* One effective setting, for `config show`. */
typedef struct tk_config_setting {
  const char *key;  /* full dotted key: "backoff.profiles.fast.max_delay" */
  tk_config_kind kind;
  const char *text; /* the value as TOML: "5m" (quoted), 2.0, ["1s", "2s"] */
  int64_t i;
  double f;
  const char *s;
  const int64_t *list;
  int list_len;
  tk_config_origin origin;    /* for an inherited value, the origin of the
                                 default profile's value */
  const char *inherited_from; /* "backoff.KEY" when a profile did not set
                                 the key itself; else NULL */
} tk_config_setting;

/* Build the configuration from `src` (NULL: defaults only). On success
 * *out owns it and 0 is returned. On failure *out is NULL and the message
 * names the file or flag: TK_ECONFIG for an invalid setting, a missing
 * overlay or a bad --set; TK_ENOENT for a missing config file; the TOML
 * parser's code (TK_ESYNTAX, TK_ERANGE, ...) for a file that is not TOML;
 * TK_EIO, TK_ENOMEM. */
int tk_config_load(const tk_config_source *src, tk_config **out, tk_err *err);

/* Free a configuration; NULL is allowed. Every pointer obtained from it
 * dies with it. */
void tk_config_free(tk_config *c);

/* The effective policy of a profile, or NULL if there is none by that
 * name. "default" is [backoff]. */
const tk_backoff_policy *tk_config_profile(const tk_config *c, const char *name);

/* Profiles in order: 0 is "default", then named profiles in the order they
 * were first defined. tk_config_profile_name returns NULL out of range. */
size_t tk_config_profile_count(const tk_config *c);
const char *tk_config_profile_name(const tk_config *c, size_t i);

const tk_engine_settings *tk_config_engine(const tk_config *c);
const tk_batch_settings *tk_config_batch(const tk_config *c);
const tk_retention_settings *tk_config_retention(const tk_config *c);
const tk_limits_settings *tk_config_limits(const tk_config *c);
const tk_server_settings *tk_config_server(const tk_config *c);

/* The budget [budgets.NAME], or NULL if there is none by that name. */
const tk_budget_settings *tk_config_budget(const tk_config *c, const char *name);

/* Budgets in the order they were first defined; tk_config_budget_name
 * returns NULL out of range. */
size_t tk_config_budget_count(const tk_config *c);
const char *tk_config_budget_name(const tk_config *c, size_t i);

/* The queues [queues.NAME], in the order they were first defined;
 * tk_config_queue_at returns NULL out of range, tk_config_queue NULL for
 * a name not configured. */
size_t tk_config_queue_count(const tk_config *c);
const tk_queue_settings *tk_config_queue_at(const tk_config *c, size_t i);
const tk_queue_settings *tk_config_queue(const tk_config *c, const char *name);

/* Where key `key` ("concurrency", "rate" or "burst") of configured queue
 * i was set, for `tasker config show`: kind TK_CONFIG_DEFAULT when it was
 * not (a burst then is the default for its rate). TK_EINVAL for an index
 * or a key out of range. */
int tk_config_queue_origin(const tk_config *c, size_t i, const char *key,
                           tk_config_origin *out);

/* Every effective setting: [backoff], each profile, [engine], [batch],
 * [retention], [limits], then each budget, in schema order. tk_config_setting_at returns NULL out
 * of range. */
size_t tk_config_setting_count(const tk_config *c);
const tk_config_setting *tk_config_setting_at(const tk_config *c, size_t i);

/* The setting with this full dotted key, or NULL. */
const tk_config_setting *tk_config_find(const tk_config *c, const char *key);

/* "default", "FILE:LINE" or "--set", like snprintf. */
int tk_config_origin_format(const tk_config_origin *o, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
