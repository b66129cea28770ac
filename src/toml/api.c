/* Read-only access to a parsed document: types, positions, scalars,
 * lookups and iteration. Every function accepts NULL and answers "none". */
#include "toml/tree.h"

#include <string.h>

const tk_toml_value *tk_toml_root(const tk_toml_doc *doc) { return doc ? &doc->root : NULL; }

const char *tk_toml_doc_name(const tk_toml_doc *doc) { return doc ? doc->name : NULL; }

tk_toml_type tk_toml_type_of(const tk_toml_value *v) { return v ? (tk_toml_type)v->type : 0; }

const char *tk_toml_type_name(tk_toml_type type) {
  switch (type) {
  case TK_TOML_STRING: return "string";
  case TK_TOML_INTEGER: return "integer";
  case TK_TOML_FLOAT: return "float";
  case TK_TOML_BOOLEAN: return "boolean";
  case TK_TOML_OFFSET_DATETIME: return "offset date-time";
  case TK_TOML_LOCAL_DATETIME: return "local date-time";
  case TK_TOML_LOCAL_DATE: return "local date";
  case TK_TOML_LOCAL_TIME: return "local time";
  case TK_TOML_ARRAY: return "array";
  case TK_TOML_TABLE: return "table";
  }
  return "unknown";
}

tk_toml_pos tk_toml_pos_of(const tk_toml_value *v) {
  tk_toml_pos none = {0, 0};
  return v ? v->pos : none;
}

int tk_toml_int(const tk_toml_value *v, int64_t *out) {
  if (v == NULL || v->type != TK_TOML_INTEGER) return TK_EINVAL;
  *out = v->u.i;
  return 0;
}

int tk_toml_float(const tk_toml_value *v, double *out) {
  if (v == NULL || v->type != TK_TOML_FLOAT) return TK_EINVAL;
  *out = v->u.f;
  return 0;
}

int tk_toml_bool(const tk_toml_value *v, int *out) {
  if (v == NULL || v->type != TK_TOML_BOOLEAN) return TK_EINVAL;
  *out = v->u.b;
  return 0;
}

int tk_toml_datetime_of(const tk_toml_value *v, tk_toml_datetime *out) {
  if (v == NULL || v->type < TK_TOML_OFFSET_DATETIME || v->type > TK_TOML_LOCAL_TIME)
    return TK_EINVAL;
  tk__toml_dt_unpack(&v->u.dt, out);
  return 0;
}

const char *tk_toml_string(const tk_toml_value *v, size_t *len) {
  if (v == NULL || v->type != TK_TOML_STRING) return NULL;
  if (len != NULL) *len = v->u.s.len;
  return v->u.s.ptr;
}

size_t tk_toml_table_len(const tk_toml_value *table) {
  return table != NULL && table->type == TK_TOML_TABLE ? table->u.t.len : 0;
}

size_t tk_toml_array_len(const tk_toml_value *array) {
  return array != NULL && array->type == TK_TOML_ARRAY ? array->u.a.len : 0;
}

const tk_toml_entry *tk_toml_table_at(const tk_toml_value *table, size_t i) {
  if (i >= tk_toml_table_len(table)) return NULL;
  return &table->u.t.entries[i]->pub;
}

const tk_toml_value *tk_toml_array_at(const tk_toml_value *array, size_t i) {
  if (i >= tk_toml_array_len(array)) return NULL;
  return &array->u.a.items[i];
}

const tk_toml_entry *tk_toml_find(const tk_toml_value *table, const char *key, size_t len) {
  if (table == NULL || table->type != TK_TOML_TABLE || key == NULL) return NULL;
  tk__toml_entry *e = tk__toml_table_find(table, key, len, tk__toml_hash(key, len));
  return e ? &e->pub : NULL;
}

const tk_toml_value *tk_toml_get(const tk_toml_value *table, const char *key) {
  const tk_toml_entry *e = key ? tk_toml_find(table, key, strlen(key)) : NULL;
  return e ? e->value : NULL;
}

const tk_toml_entry *tk_toml_find_path(const tk_toml_value *table, const char *path) {
  if (path == NULL) return NULL;
  for (;;) {
    const char *dot = strchr(path, '.');
    size_t len = dot ? (size_t)(dot - path) : strlen(path);
    const tk_toml_entry *e = tk_toml_find(table, path, len);
    if (e == NULL || dot == NULL) return e;
    table = e->value;
    path = dot + 1;
  }
}

const tk_toml_value *tk_toml_get_path(const tk_toml_value *table, const char *path) {
  const tk_toml_entry *e = tk_toml_find_path(table, path);
  return e ? e->value : NULL;
}
