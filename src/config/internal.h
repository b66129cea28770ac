/* Internal declarations of the configuration module: the schema of known
 * keys, the loaded configuration, and the helpers the files share. */
#ifndef TASKER_CONFIG_INTERNAL_H
#define TASKER_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <tasker/config.h>
#include <tasker/schedule.h>
#include <tasker/toml.h>

/* How a key's value is read, checked and stored. The first six and BOOL
 * are read into a settings struct (tk__convert); DURATION, INT, NUMBER,
 * STRING and BOOL also into JSON (tk__convert_json), and the rest only
 * into JSON, for the tables of templates and handler specs
 * (config/spec.h). */
typedef enum tk__ckind {
  TK__K_DURATION,  /* int64_t ms: a duration string or seconds */
  TK__K_DURATIONS, /* int64_t[] + int length: an array of durations */
  TK__K_INT,       /* int64_t: a TOML integer */
  TK__K_NUMBER,    /* double: a TOML integer or float */
  TK__K_JITTER,    /* tk_jitter: one of the mode names */
  TK__K_STRING,    /* const char *: a non-empty string */
  TK__K_TEXT,      /* JSON: a string, possibly empty */
  TK__K_BOOL,      /* int (0 or 1), or JSON: true or false */
  TK__K_STRINGS,   /* JSON: an array of at least `min` strings */
  TK__K_INTS,      /* JSON: an array of integers, each from min to max */
  TK__K_STRMAP,    /* JSON: a table whose values are strings */
  TK__K_CHOICE,    /* JSON: one of the strings in `choices` */
  TK__K_NAME,      /* JSON: 1 to 128 letters, digits, '_', '-' or '.' */
  TK__K_OTHER      /* JSON: a known key whose value the caller reads itself */
} tk__ckind;

/* The case labels of the JSON-only kinds, for switches over the kinds a
 * settings struct holds. */
#define TK__JSON_ONLY_KINDS                                                                 \
  case TK__K_TEXT:                                                                         \
  case TK__K_STRINGS:                                                                      \
  case TK__K_INTS:                                                                         \
  case TK__K_STRMAP:                                                                       \
  case TK__K_CHOICE:                                                                       \
  case TK__K_NAME:                                                                         \
  case TK__K_OTHER

/* One known key: its type, range, built-in default and where it lives in
 * the section's struct (tk_backoff_policy, tk_engine_settings,
 * tk_batch_settings, tk_budget_settings). */
typedef struct tk__key {
  const char *name;
  tk__ckind kind;
  size_t offset;     /* the field */
  size_t len_offset; /* DURATIONS: the int entry count */
  int64_t min, max;  /* INT and DURATION (ms) inclusive; DURATIONS: max entries */
  double fmin, fmax; /* NUMBER inclusive */
  const char *allowed; /* what a value must be, for messages */
  int64_t def_i;       /* default: INT, DURATION, JITTER, BOOL */
  double def_f;        /* default: NUMBER */
  const char *def_s;   /* default: STRING (DURATIONS default to empty) */
  /* Read into JSON only (config/spec.h): */
  const char *const *choices; /* CHOICE: the allowed strings, NULL-terminated */
  const char *json;           /* the JSON member written; NULL: name */
  const char *missing;        /* non-NULL: required; what to say when absent */
} tk__key;

/* A table of keys: [backoff] (also every profile), [engine], [batch]. */
typedef struct tk__schema {
  const char *name;
  const tk__key *keys;
  size_t nkeys;
} tk__schema;

enum { TK__BACKOFF_NKEYS = 8, TK__ENGINE_NKEYS = 10, TK__BATCH_NKEYS = 2, TK__MAX_KEYS = 10 };

extern const tk__schema tk__backoff_schema;
extern const tk__schema tk__engine_schema;
extern const tk__schema tk__batch_schema;
/* [retention] (DESIGN §16). */
enum { TK__RETENTION_NKEYS = 6 };
extern const tk__schema tk__retention_schema;
/* [limits]: ceilings templates are checked against. */
enum { TK__LIMITS_NKEYS = 1 };
extern const tk__schema tk__limits_schema;
/* [server]: what the API serves (docs/callbacks.md). */
enum { TK__SERVER_NKEYS = 1 };
extern const tk__schema tk__server_schema;

/* [budgets.NAME]: a schema of its own, like the profiles' [backoff]. */
enum { TK__BUDGET_NKEYS = 4 };
extern const tk__schema tk__budget_schema;

/* The key named `name` (len bytes) in s, or NULL. */
const tk__key *tk__schema_find(const tk__schema *s, const char *name, size_t len);

/* Index of k in s. */
size_t tk__schema_index(const tk__schema *s, const tk__key *k);

/* Whether c may appear in a bare TOML key (and so in a profile name, a
 * --set key or an environment name): A-Z a-z 0-9 _ -. */
static inline int tk__is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

/* k's field in obj (a settings struct), as a T lvalue; the entry count
 * of a DURATIONS field. */
#define TK__FIELD(obj, k, T) ((T *)((char *)(obj) + (k)->offset))
#define TK__CFIELD(obj, k, T) ((const T *)((const char *)(obj) + (k)->offset))
#define TK__LEN(obj, k) ((int *)((char *)(obj) + (k)->len_offset))
#define TK__CLEN(obj, k) ((const int *)((const char *)(obj) + (k)->len_offset))

/* Store k's built-in default into obj; copy k's field from src to dst. */
void tk__field_default(const tk__key *k, void *obj);
void tk__field_copy(const tk__key *k, void *dst, const void *src);

/* Write k's field of obj as TOML ("5m" quoted, 2.0, ["1s", "2s"]) like
 * snprintf. */
int tk__field_format(const tk__key *k, const void *obj, char *buf, size_t len);

/* What is wrong with a value, for the loader to place and word:
 * `at` is the offending value (an element of a schedule, with its 1-based
 * `index`; else index 0) and `what` the phrase after "KEY = VALUE: ". */
typedef struct tk__complaint {
  const tk_toml_value *at;
  int index;
  const char *member; /* STRMAP: the key of the offending entry; else NULL */
  char what[256];
} tk__complaint;

/* Read v as k's type into k's field of obj, checking type and range.
 * Strings are stored as pointers into v's document (the caller copies
 * them). Returns 0, or TK_ECONFIG with *why filled. */
int tk__convert(const tk__key *k, const tk_toml_value *v, void *obj, tk__complaint *why);

/* Read v as k's type into *out, a new JSON value (a duration as integer
 * ms), checking type and range as tk__convert does. Not for DURATIONS,
 * JITTER and OTHER keys. Returns 0, TK_ECONFIG with *why filled, or
 * TK_ENOMEM. */
int tk__convert_json(const tk__key *k, const tk_toml_value *v, json_t **out, tk__complaint *why);

/* The message for key `name` of the table at `path` ("" or NULL: the
 * root), which is not in cands[0..n-1], into buf: "unknown key
 * \"PATH.NAME\" (did you mean \"X\"?)", or "(known keys: a, b)" when no
 * known key is close. */
void tk__unknown_key(char *buf, size_t len, const char *path, const char *name,
                     const char *const *cands, size_t n);

/* 0 if v is a table, else TK_ECONFIG with *why saying what it is and
 * that `expected` (NULL: "a table") was. */
int tk__expect_table(const tk_toml_value *v, const char *expected, tk__complaint *why);

/* The candidate closest to `word` by edit distance (a transposition
 * counts once), or NULL when none is close enough to be a likely typo. */
const char *tk__suggest(const char *word, const char *const *cands, size_t n);

/* A profile: the keys its own table set, and the effective policy. */
typedef struct tk__profile {
  char *name;                 /* "default" for [backoff] */
  tk_backoff_policy own;      /* values set in this profile's tables */
  uint32_t set;               /* bit i: key i of tk__backoff_schema set */
  tk_config_origin origin[TK__BACKOFF_NKEYS];
  tk_backoff_policy eff;      /* after inheritance from the default */
} tk__profile;

/* A budget: the keys its tables set, and the effective settings (the
 * built-in default of every key it does not set). */
typedef struct tk__budget {
  char *name;
  tk_budget_settings s;
  tk_config_origin origin[TK__BUDGET_NKEYS];
} tk__budget;

/* A schedule [schedules.NAME] (schedules.c): its definition, its strings
 * in the config's pool, where it was first defined and where each of its
 * keys (cron, zone, template, version, context, missed) was last set
 * (kind TK_CONFIG_DEFAULT: not set). */
#define TK__SCHEDULE_NKEYS 6
typedef struct tk__schedule_cfg {
  tk_schedule_def def;
  tk_config_origin table_at, key_at[TK__SCHEDULE_NKEYS];
} tk__schedule_cfg;

/* After every layer: each schedule has cron and template, and its
 * expression parses in its zone; else TK_ECONFIG naming the place. */
int tk__schedules_finish(const tk_config *c, tk_err *err);

/* A queue [queues.NAME] (queues.c): its settings, where it was first
 * defined and where each of its keys (concurrency, rate, burst) was last
 * set (kind TK_CONFIG_DEFAULT: not set). */
#define TK__QUEUE_NKEYS 3
typedef struct tk__queue_cfg {
  tk_queue_settings s;
  tk_config_origin table_at, key_at[TK__QUEUE_NKEYS];
} tk__queue_cfg;

/* After every layer: a burst goes with a rate, and a queue without one
 * set gets max(1, ceil(rate)); else TK_ECONFIG naming the place. */
int tk__queues_finish(tk_config *c, tk_err *err);

struct tk_config {
  tk__profile *profiles; /* [0] is the default profile */
  size_t nprofiles, profiles_cap;
  tk__budget *budgets; /* in the order first defined */
  size_t nbudgets, budgets_cap;
  tk__schedule_cfg *schedules; /* in the order first defined */
  size_t nschedules, schedules_cap;
  tk__queue_cfg *queues; /* in the order first defined */
  size_t nqueues, queues_cap;
  tk_engine_settings engine;
  tk_config_origin engine_origin[TK__ENGINE_NKEYS];
  tk_batch_settings batch;
  tk_config_origin batch_origin[TK__BATCH_NKEYS];
  tk_retention_settings retention;
  tk_config_origin retention_origin[TK__RETENTION_NKEYS];
  tk_limits_settings limits;
  tk_config_origin limits_origin[TK__LIMITS_NKEYS];
  tk_server_settings server;
  tk_config_origin server_origin[TK__SERVER_NKEYS];
  tk_config_setting *settings;
  size_t nsettings;
  char **pool; /* strings the config owns */
  size_t npool, pool_cap;
};

/* A copy of `len` bytes of s (NUL added) owned by c, or NULL. */
char *tk__config_strdup(tk_config *c, const char *s, size_t len);

/* Give c its defaults (one default profile, [engine], [batch]). */
int tk__config_init_defaults(tk_config *c);

/* After all layers: resolve inheritance, run the cross-field checks and
 * build the settings list. 0 or an error naming the place. */
int tk__config_finish(tk_config *c, tk_err *err);

/* "FILE:LINE:COLUMN", "--set KEY=VALUE" or "default", like snprintf. */
int tk__origin_place(const tk_config_origin *o, char *buf, size_t len);

#endif
