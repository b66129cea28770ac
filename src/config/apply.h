/* Applying one parsed layer onto a configuration. */
#ifndef TASKER_CONFIG_APPLY_H
#define TASKER_CONFIG_APPLY_H

#include "config/internal.h"

/* One layer being applied: where its values come from (kind, file or
 * --set text, layer number; line and column are filled per value). */
typedef struct tk__layer {
  tk_config *c;
  tk_config_origin where;
  tk_err *err;
} tk__layer;

/* Apply every key of root (a parsed document) onto L->c, checking each
 * key and value. 0, or TK_ECONFIG (TK_ENOMEM) with the message in L->err
 * naming the place, the key, the value and what is allowed. */
int tk__apply_layer(const tk__layer *L, const tk_toml_value *root);

/* The [schedules] table of a layer (schedules.c), the same way. */
int tk__apply_schedules(const tk__layer *L, const tk_toml_value *table);

/* The [queues] table of a layer (queues.c), the same way. */
int tk__apply_queues(const tk__layer *L, const tk_toml_value *table);

/* "PLACE: KEY = VALUE: what" for a value `why` refuses (for a --set flag,
 * which shows the key and the value already, "PLACE: what"): TK_ECONFIG. */
int tk__layer_refuse(const tk__layer *L, const char *key, const tk__complaint *why);

/* "PLACE: message" at pos of layer L: TK_ECONFIG. */
int tk__layer_fail_at(const tk__layer *L, tk_toml_pos pos, const char *msg);

#endif
