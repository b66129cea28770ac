/* Reading a table of a template (the template's own keys, a step, a retry
 * or batch table, a handler spec) against a key schema into JSON: the same
 * table-driven mechanism as the configuration (schema.c, validate.c), with
 * every problem placed at FILE:LINE:COLUMN. */
#ifndef TASKER_CONFIG_SPEC_H
#define TASKER_CONFIG_SPEC_H

#include <jansson.h>

#include <tasker/error.h>
#include <tasker/toml.h>

#include "config/internal.h"

/* Where a table is read, for messages: the file, the table's key path
 * ("steps[2].handler"; "" for the document's root) and the error to fill. */
typedef struct tk__spec_where {
  const char *file;
  const char *path;
  tk_err *err;
} tk__spec_where;

/* Fail with "FILE:L:C: PATH.KEY: message" at v (NULL: line 1, column 1);
 * key NULL names PATH alone. Returns TK_ECONFIG. */
int tk__spec_fail(const tk__spec_where *w, const tk_toml_value *v, const char *key,
                  const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Fail with "FILE:L:C: PATH.KEY = VALUE: what" for a value the schema
 * refused (key NULL: PATH = VALUE). Returns why's code, TK_ECONFIG. */
int tk__spec_refuse(const tk__spec_where *w, const char *key, const tk__complaint *why);

/* v (the value of `key` in w's table) as a queue name (DESIGN §19; the
 * rule of tk__queue_name_ok) into *name and *len, which point into v's
 * document; else "FILE:L:C: PATH.KEY = VALUE: expected a queue name ..."
 * (TK_ECONFIG). */
int tk__spec_queue_name(const tk__spec_where *w, const char *key, const tk_toml_value *v,
                        const char **name, size_t *len);

/* Read the TOML table t against schema s into the JSON object out. A key
 * not in s fails ("unknown key", with the nearest known one); each value
 * is read with tk__convert_json and written under the key's JSON name
 * (values of OTHER keys are left to the caller); a key with `missing` set
 * that t lacks fails with that text. 0, or TK_ECONFIG (TK_ENOMEM) with
 * the message in w->err. */
int tk__spec_read(const tk__spec_where *w, const tk__schema *s, const tk_toml_value *t,
                  json_t *out);

#endif
