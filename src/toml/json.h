/* The tagged JSON of the toml-test suite, built from a document tree: the
 * format `tasker toml-decode` prints and the conformance test compares. */
#ifndef TK_TOML_JSON_H
#define TK_TOML_JSON_H

#include <jansson.h>

#include <tasker/toml.h>

/* Tables become objects, arrays arrays, and each scalar an object
 * {"type": T, "value": TEXT} with T one of string, integer, float, bool,
 * datetime, datetime-local, date-local, time-local. A new reference, or
 * NULL when out of memory. */
json_t *tk__toml_to_tagged_json(const tk_toml_value *v);

#endif
