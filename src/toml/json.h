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

/* A TOML value as plain JSON (an http body, a schedule's context): tables
 * as objects, arrays as arrays, date-times as their RFC 3339 text. 0 with
 * *out a new reference; TK_ECONFIG with *bad at a float JSON cannot hold
 * (nan, inf); TK_ENOMEM. */
int tk__toml_to_json(const tk_toml_value *v, json_t **out, const tk_toml_value **bad);

#endif
