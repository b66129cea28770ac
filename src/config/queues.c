/* [queues.NAME] tables (DESIGN §19, docs/config.md): a queue's limits,
 * concurrency (its steps in progress at once), rate ("50/s": steps started
 * per second, minute or hour, a token bucket) and burst (the bucket's
 * size). Each key of a layer is read onto the configuration's queues (a
 * later layer sets single keys of a queue an earlier one defined), and
 * every value is checked where the file says it. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/apply.h"
#include "config/internal.h"
#include "handlers/handler.h"
#include "toml/format.h"

/* The values as the schema reads them (tk__convert). */
typedef struct values {
  int64_t concurrency;
  const char *rate;
  int64_t burst;
} values;

#define COUNT_MAX 1000000000
#define RATE_FORMS                                                                          \
  "a rate such as \"50/s\", \"300/m\" or \"1000/h\" (a whole count from 1 to 1000000000 "   \
  "per second, minute or hour)"

/* In the order of tk__queue_cfg.key_at. */
static const tk__key keys[TK__QUEUE_NKEYS] = {
    {.name = "concurrency", .kind = TK__K_INT, .offset = offsetof(values, concurrency), .min = 1,
     .max = 1000000, .allowed = "an integer from 1 to 1000000 (its steps in progress at once)"},
    {.name = "rate", .kind = TK__K_STRING, .offset = offsetof(values, rate),
     .allowed = RATE_FORMS},
    {.name = "burst", .kind = TK__K_INT, .offset = offsetof(values, burst), .min = 1,
     .max = COUNT_MAX, .allowed = "an integer from 1 to 1000000000 (the most steps the rate "
                                  "lets start at once)"},
};
enum { K_CONCURRENCY, K_RATE, K_BURST };
static const tk__schema schema = {"queues", keys, TK__QUEUE_NKEYS};

/* "50/s", "300/m", "1000/h" as steps per second; -1 for anything else. */
static double rate_parse(const char *s) {
  int64_t count = 0;
  const char *p = s;
  for (; *p >= '0' && *p <= '9'; p++) {
    count = count * 10 + (*p - '0');
    if (count > COUNT_MAX) return -1;
  }
  if (p == s || count < 1 || p[0] != '/' || p[1] == '\0' || p[2] != '\0') return -1;
  switch (p[1]) {
  case 's': return (double)count;
  case 'm': return (double)count / 60.0;
  case 'h': return (double)count / 3600.0;
  default: return -1;
  }
}

/* The queue called name in c, added (no key set) when missing. */
static tk__queue_cfg *find_or_add(tk_config *c, const char *name, size_t len) {
  for (size_t i = 0; i < c->nqueues; i++)
    if (strlen(c->queues[i].s.name) == len && memcmp(c->queues[i].s.name, name, len) == 0)
      return &c->queues[i];
  if (c->nqueues == c->queues_cap) {
    size_t cap = c->queues_cap ? 2 * c->queues_cap : 4;
    tk__queue_cfg *grown = realloc(c->queues, cap * sizeof *grown);
    if (grown == NULL) return NULL;
    c->queues = grown;
    c->queues_cap = cap;
  }
  tk__queue_cfg *q = &c->queues[c->nqueues];
  memset(q, 0, sizeof *q);
  if ((q->s.name = tk__config_strdup(c, name, len)) == NULL) return NULL;
  c->nqueues++;
  return q;
}

/* Set key e of queue q from layer L. */
static int apply_key(const tk__layer *L, tk__queue_cfg *q, const tk_toml_entry *e) {
  char path[TK__QUEUE_NAME_MAX + 16], key[TK__QUEUE_NAME_MAX + 32];
  snprintf(path, sizeof path, "queues.%s", q->s.name);
  const tk__key *k = tk__schema_find(&schema, e->key, e->key_len);
  if (k == NULL) {
    char msg[TK_ERR_MSG_MAX];
    const char *cands[TK__QUEUE_NKEYS] = {keys[0].name, keys[1].name, keys[2].name};
    tk__unknown_key(msg, sizeof msg, path, e->key, cands, TK__QUEUE_NKEYS);
    return tk__layer_fail_at(L, e->key_pos, msg);
  }
  snprintf(key, sizeof key, "%s.%s", path, k->name);
  values v = {0};
  tk__complaint why;
  if (tk__convert(k, e->value, &v, &why) != 0) return tk__layer_refuse(L, key, &why);
  size_t i = tk__schema_index(&schema, k);
  if (i == K_CONCURRENCY) {
    q->s.concurrency = (int)v.concurrency;
  } else if (i == K_BURST) {
    q->s.burst = (int)v.burst;
  } else {
    double rate = rate_parse(v.rate);
    if (rate <= 0) {
      why = (tk__complaint){.at = e->value};
      snprintf(why.what, sizeof why.what, "expected %s", RATE_FORMS);
      return tk__layer_refuse(L, key, &why);
    }
    q->s.rate = rate;
    /* The document dies after this layer; keep a copy. */
    if ((q->s.rate_text = tk__config_strdup(L->c, v.rate, strlen(v.rate))) == NULL)
      return tk_err_set(L->err, TK_ENOMEM, "out of memory reading the queues");
  }
  tk_toml_pos at = tk_toml_pos_of(e->value);
  q->key_at[i] = L->where;
  q->key_at[i].line = at.line;
  q->key_at[i].column = at.column;
  return 0;
}

int tk__apply_queues(const tk__layer *L, const tk_toml_value *table) {
  for (size_t i = 0; i < tk_toml_table_len(table); i++) {
    const tk_toml_entry *e = tk_toml_table_at(table, i);
    if (!tk__queue_name_ok(e->key, e->key_len) || strlen(e->key) != e->key_len) {
      char name[6 * 80 + 3], msg[TK_ERR_MSG_MAX];
      tk__toml_format_string(e->key, e->key_len < 80 ? e->key_len : 80, name, sizeof name);
      snprintf(msg, sizeof msg, "queues.%.200s: a queue name must be 1 to %d lowercase letters, "
               "digits, \"_\", \".\" or \"-\"", name, TK__QUEUE_NAME_MAX);
      return tk__layer_fail_at(L, e->key_pos, msg);
    }
    char path[TK__QUEUE_NAME_MAX + 16];
    snprintf(path, sizeof path, "queues.%.*s", (int)e->key_len, e->key);
    tk__complaint why;
    if (tk__expect_table(e->value, "a table ([queues.NAME] with concurrency, rate, burst)",
                         &why) != 0)
      return tk__layer_refuse(L, path, &why);
    tk__queue_cfg *q = find_or_add(L->c, e->key, e->key_len);
    if (q == NULL) return tk_err_set(L->err, TK_ENOMEM, "out of memory reading the queues");
    if (q->table_at.kind == TK_CONFIG_DEFAULT) {
      q->table_at = L->where;
      q->table_at.line = e->key_pos.line;
      q->table_at.column = e->key_pos.column;
    }
    for (size_t k = 0; k < tk_toml_table_len(e->value); k++) {
      int rc = apply_key(L, q, tk_toml_table_at(e->value, k));
      if (rc) return rc;
    }
  }
  return 0;
}

int tk__queues_finish(tk_config *c, tk_err *err) {
  for (size_t i = 0; i < c->nqueues; i++) {
    tk__queue_cfg *q = &c->queues[i];
    if (q->s.rate_text == NULL && q->s.burst > 0) {
      char place[TK_ERR_MSG_MAX];
      tk__origin_place(&q->key_at[K_BURST], place, sizeof place);
      return tk_err_set(err, TK_ECONFIG,
                        "%s: queues.%s.burst = %d: a burst needs a rate (it is the size of "
                        "the rate's token bucket), such as rate = \"50/s\"",
                        place, q->s.name, q->s.burst);
    }
    if (q->s.rate_text != NULL && q->key_at[K_BURST].kind == TK_CONFIG_DEFAULT)
      q->s.burst = q->s.rate < 1 ? 1 : (int)ceil(q->s.rate);
  }
  return 0;
}

size_t tk_config_queue_count(const tk_config *c) { return c ? c->nqueues : 0; }

const tk_queue_settings *tk_config_queue_at(const tk_config *c, size_t i) {
  return c && i < c->nqueues ? &c->queues[i].s : NULL;
}

const tk_queue_settings *tk_config_queue(const tk_config *c, const char *name) {
  for (size_t i = 0; c && i < c->nqueues; i++)
    if (strcmp(c->queues[i].s.name, name) == 0) return &c->queues[i].s;
  return NULL;
}

int tk_config_queue_origin(const tk_config *c, size_t i, const char *key,
                           tk_config_origin *out) {
  const tk__key *k = key ? tk__schema_find(&schema, key, strlen(key)) : NULL;
  if (c == NULL || i >= c->nqueues || k == NULL) return TK_EINVAL;
  *out = c->queues[i].key_at[tk__schema_index(&schema, k)];
  return 0;
}
