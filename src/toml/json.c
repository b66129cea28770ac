/* Document tree to tagged JSON (see json.h). */
#include "toml/json.h"

#include <string.h>

/* The toml-test type tag of a scalar type, or NULL for containers. */
static const char *json_tag(tk_toml_type type) {
  switch (type) {
  case TK_TOML_STRING: return "string";
  case TK_TOML_INTEGER: return "integer";
  case TK_TOML_FLOAT: return "float";
  case TK_TOML_BOOLEAN: return "bool";
  case TK_TOML_OFFSET_DATETIME: return "datetime";
  case TK_TOML_LOCAL_DATETIME: return "datetime-local";
  case TK_TOML_LOCAL_DATE: return "date-local";
  case TK_TOML_LOCAL_TIME: return "time-local";
  default: return NULL;
  }
}

/* {"type": tag, "value": text}. */
static json_t *tagged(tk_toml_type type, const char *text, size_t len) {
  json_t *obj = json_object();
  if (obj == NULL) return NULL;
  if (json_object_set_new(obj, "type", json_string(json_tag(type))) != 0 ||
      json_object_set_new(obj, "value", json_stringn(text, len)) != 0) {
    json_decref(obj);
    return NULL;
  }
  return obj;
}

json_t *tk__toml_to_tagged_json(const tk_toml_value *v) {
  tk_toml_type type = tk_toml_type_of(v);
  char text[64];
  if (type == TK_TOML_TABLE) {
    json_t *obj = json_object();
    for (size_t i = 0; obj != NULL && i < tk_toml_table_len(v); i++) {
      const tk_toml_entry *e = tk_toml_table_at(v, i);
      if (json_object_setn_new(obj, e->key, e->key_len, tk__toml_to_tagged_json(e->value)) != 0) {
        json_decref(obj);
        obj = NULL;
      }
    }
    return obj;
  }
  if (type == TK_TOML_ARRAY) {
    json_t *arr = json_array();
    for (size_t i = 0; arr != NULL && i < tk_toml_array_len(v); i++) {
      if (json_array_append_new(arr, tk__toml_to_tagged_json(tk_toml_array_at(v, i))) != 0) {
        json_decref(arr);
        arr = NULL;
      }
    }
    return arr;
  }
  size_t len;
  const char *s = tk_toml_string(v, &len);
  if (s != NULL) return tagged(type, s, len);
  if (json_tag(type) == NULL) return NULL;
  /* Every other scalar is tagged with its TOML spelling. */
  tk_toml_format_value(v, text, sizeof text);
  return tagged(type, text, strlen(text));
}

int tk__toml_to_json(const tk_toml_value *v, json_t **out, const tk_toml_value **bad) {
  *out = NULL;
  switch (tk_toml_type_of(v)) {
  case TK_TOML_STRING: {
    size_t len;
    const char *s = tk_toml_string(v, &len);
    *out = json_stringn(s, len);
    break;
  }
  case TK_TOML_INTEGER: {
    int64_t i;
    tk_toml_int(v, &i);
    *out = json_integer(i);
    break;
  }
  case TK_TOML_FLOAT: {
    double d;
    tk_toml_float(v, &d);
    if (d != d || d > 1.7976931348623157e308 || d < -1.7976931348623157e308) {
      *bad = v;
      return TK_ECONFIG;
    }
    *out = json_real(d);
    break;
  }
  case TK_TOML_BOOLEAN: {
    int b;
    tk_toml_bool(v, &b);
    *out = json_boolean(b);
    break;
  }
  case TK_TOML_ARRAY: {
    json_t *a = json_array();
    for (size_t i = 0; a && i < tk_toml_array_len(v); i++) {
      json_t *e;
      int rc = tk__toml_to_json(tk_toml_array_at(v, i), &e, bad);
      if (rc == 0 && json_array_append_new(a, e) != 0) rc = TK_ENOMEM;
      if (rc) {
        json_decref(a);
        return rc;
      }
    }
    *out = a;
    break;
  }
  case TK_TOML_TABLE: {
    json_t *o = json_object();
    for (size_t i = 0; o && i < tk_toml_table_len(v); i++) {
      const tk_toml_entry *en = tk_toml_table_at(v, i);
      json_t *e;
      int rc = tk__toml_to_json(en->value, &e, bad);
      if (rc == 0 && json_object_setn_new(o, en->key, en->key_len, e) != 0) rc = TK_ENOMEM;
      if (rc) {
        json_decref(o);
        return rc;
      }
    }
    *out = o;
    break;
  }
  default: { /* the four date-time kinds */
    char text[64];
    tk_toml_format_value(v, text, sizeof text);
    *out = json_string(text);
    break;
  }
  }
  return *out ? 0 : TK_ENOMEM;
}
