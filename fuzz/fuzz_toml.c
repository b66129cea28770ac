/* libFuzzer target for the TOML parser: any input must either parse into a
 * tree whose every entry can be found again by its key, and which converts
 * to tagged JSON and formats without trouble, or fail with a located
 * message. The sanitizers catch the rest. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/toml.h>

#include "toml/json.h"

/* Check a value and everything below it. */
static void walk(const tk_toml_value *v) {
  char text[128];
  tk_toml_format_value(v, text, sizeof text);
  if (tk_toml_pos_of(v).line == 0 || tk_toml_pos_of(v).column == 0) abort();
  for (size_t i = 0; i < tk_toml_array_len(v); i++) walk(tk_toml_array_at(v, i));
  for (size_t i = 0; i < tk_toml_table_len(v); i++) {
    const tk_toml_entry *e = tk_toml_table_at(v, i);
    if (tk_toml_find(v, e->key, e->key_len) != e || e->key[e->key_len] != '\0') abort();
    walk(e->value);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tk_toml_options opts = {.name = NULL, .max_input = 1 << 20, .max_depth = 0};
  tk_toml_doc *doc = NULL;
  tk_err err;
  tk_err_clear(&err);
  if (tk_toml_parse_opts((const char *)data, size, &opts, &doc, &err) != 0) {
    if (doc != NULL || strncmp(err.msg, "line ", 5) != 0) abort();
    return 0;
  }
  walk(tk_toml_root(doc));
  json_t *json = tk__toml_to_tagged_json(tk_toml_root(doc));
  if (json == NULL) abort();
  free(json_dumps(json, JSON_ENCODE_ANY));
  json_decref(json);
  tk_toml_free(doc);
  return 0;
}
