/* Values, keys and key/value pairs: the recursive part of the grammar
 * (arrays and inline tables) and the dispatch to the scalar readers. */
#include "toml/parser.h"

#include <stdlib.h>
#include <string.h>

#define PATH_BUF 200

const char *tk__toml_kind(const tk_toml_value *v) {
  switch (v->type) {
  case TK_TOML_STRING: return "a string";
  case TK_TOML_INTEGER: return "an integer";
  case TK_TOML_FLOAT: return "a float";
  case TK_TOML_BOOLEAN: return "a boolean";
  case TK_TOML_OFFSET_DATETIME: return "an offset date-time";
  case TK_TOML_LOCAL_DATETIME: return "a local date-time";
  case TK_TOML_LOCAL_DATE: return "a local date";
  case TK_TOML_LOCAL_TIME: return "a local time";
  case TK_TOML_ARRAY: return (v->flags & TK__TOML_F_AOT) ? "an array of tables" : "an array";
  default: return (v->flags & TK__TOML_F_INLINE) ? "an inline table" : "a table";
  }
}

int tk__toml_too_deep(tk__toml_parser *P, const char *at) {
  return tk__toml_fail(P, at, TK_ETOODEEP,
                       "nesting too deep: more than %u levels of tables and arrays",
                       P->max_depth);
}

int tk__toml_add_container(tk__toml_parser *P, tk_toml_value *parent, const tk__toml_key *k,
                           int type, int flags, tk_toml_pos pos, tk_toml_value **out) {
  unsigned depth = parent->depth + 1u;
  if (depth > P->max_depth) return tk__toml_too_deep(P, k->at);
  tk_toml_value v;
  memset(&v, 0, sizeof v);
  v.type = (uint8_t)type;
  v.flags = (uint8_t)flags;
  v.depth = (uint16_t)depth;
  v.pos = pos;
  tk__toml_entry *e = tk__toml_table_add(P->mem, parent, k->ptr, k->len, k->hash, k->pos, &v);
  if (e == NULL) return tk__toml_nomem(P);
  *out = tk__toml_entry_value(e);
  return 0;
}

/* Make room for one more key part. */
static int grow_keys(tk__toml_parser *P) {
  size_t limit = (size_t)P->max_depth + 1;
  if (P->keys_cap >= limit)
    return tk__toml_fail(P, P->p, TK_ETOODEEP, "key has more than %zu dotted parts", limit);
  size_t cap = P->keys_cap ? P->keys_cap * 2 : 8;
  if (cap > limit) cap = limit;
  tk__toml_key *keys = realloc(P->keys, cap * sizeof *keys);
  if (keys == NULL) return tk__toml_nomem(P);
  P->keys = keys;
  P->keys_cap = cap;
  return 0;
}

int tk__toml_parse_key(tk__toml_parser *P, size_t *n) {
  size_t count = 0;
  int rc;
  for (;;) {
    if (count == P->keys_cap && (rc = grow_keys(P)) != 0) return rc;
    tk__toml_key *k = &P->keys[count];
    const char *p = P->p;
    k->at = p;
    k->pos = tk__toml_pos(P, p);
    if (p < P->end && (*p == '"' || *p == '\'')) {
      if ((rc = tk__toml_parse_quoted_key(P, k)) != 0) return rc;
    } else {
      const char *q = p;
      while (q < P->end && tk__toml_is_bare_char(*q)) q++;
      if (q == p) {
        char buf[48];
        const char *found = tk__toml_found(P, p, buf, sizeof buf);
        if (count > 0)
          return tk__toml_fail(P, p, TK_ESYNTAX, "expected a key after '.', found %s", found);
        return tk__toml_fail(P, p, TK_ESYNTAX,
                             "expected a key, found %s (bare keys may hold only A-Z a-z 0-9 _ "
                             "and -; quote other keys)",
                             found);
      }
      k->ptr = p;
      k->len = (size_t)(q - p);
      P->p = q;
    }
    k->hash = tk__toml_hash(k->ptr, k->len);
    count++;
    tk__toml_skip_ws(P);
    if (P->p < P->end && *P->p == '.') {
      P->p++;
      tk__toml_skip_ws(P);
      continue;
    }
    *n = count;
    return 0;
  }
}

int tk__toml_parse_keyval(tk__toml_parser *P, tk_toml_value *table) {
  size_t n;
  int rc = tk__toml_parse_key(P, &n);
  if (rc != 0) return rc;
  tk_toml_value *t = table;
  for (size_t i = 0; i + 1 < n; i++)
    if ((rc = tk__toml_dotted_step(P, t, P->keys, i, &t)) != 0) return rc;
  /* Nested values reuse P->keys: keep the last part. */
  tk__toml_key last = P->keys[n - 1];
  char path[PATH_BUF], buf[48];
  tk__toml_entry *e = tk__toml_table_find(t, last.ptr, last.len, last.hash);
  if (e != NULL)
    return tk__toml_fail(P, last.at, TK_ESYNTAX,
                         "duplicate key %s (first defined at line %u, column %u)",
                         tk__toml_show_path(P->keys, n, 1, path, sizeof path),
                         (unsigned)e->pub.key_pos.line, (unsigned)e->pub.key_pos.column);
  if (P->p >= P->end || *P->p != '=')
    return tk__toml_fail(P, P->p, TK_ESYNTAX, "expected '=' after key %s, found %s",
                         tk__toml_show_path(P->keys, n, 1, path, sizeof path),
                         tk__toml_found(P, P->p, buf, sizeof buf));
  P->p++;
  tk__toml_skip_ws(P);
  tk_toml_value v;
  memset(&v, 0, sizeof v);
  if ((rc = tk__toml_parse_value(P, &v, t->depth + 1u)) != 0) return rc;
  if (tk__toml_table_add(P->mem, t, last.ptr, last.len, last.hash, last.pos, &v) == NULL)
    return tk__toml_nomem(P);
  return 0;
}

/* The error for an array or inline table that reached the end of input. */
static int unclosed(tk__toml_parser *P, const tk_toml_value *v, char close) {
  return tk__toml_fail(P, P->p, TK_ESYNTAX,
                       "expected '%c' to close the %s that opened at line %u, column %u, found "
                       "end of input",
                       close, close == ']' ? "array" : "inline table", (unsigned)v->pos.line,
                       (unsigned)v->pos.column);
}

/* Push a finished element onto the parser's element stack. */
static int push_element(tk__toml_parser *P, const tk_toml_value *item) {
  if (P->stack_len == P->stack_cap) {
    size_t cap = P->stack_cap ? P->stack_cap * 2 : 64;
    tk_toml_value *grown = realloc(P->stack, cap * sizeof *grown);
    if (grown == NULL) return tk__toml_nomem(P);
    P->stack = grown;
    P->stack_cap = cap;
  }
  P->stack[P->stack_len++] = *item;
  return 0;
}

/* [ value, value, ... ] over any number of lines, trailing comma allowed.
 * Elements collect on the parser's stack (nested arrays above their
 * parent's) and are copied out once, at the exact size, when it closes. */
static int parse_array(tk__toml_parser *P, tk_toml_value *v, unsigned depth) {
  int rc;
  size_t base = P->stack_len;
  v->type = TK_TOML_ARRAY;
  P->p++;
  for (;;) {
    if ((rc = tk__toml_skip_ws_nl(P)) != 0) return rc;
    if (P->p == P->end) return unclosed(P, v, ']');
    if (*P->p == ']') break;
    tk_toml_value item;
    memset(&item, 0, sizeof item);
    if ((rc = tk__toml_parse_value(P, &item, depth + 1)) != 0) return rc;
    if ((rc = push_element(P, &item)) != 0) return rc;
    if ((rc = tk__toml_skip_ws_nl(P)) != 0) return rc;
    if (P->p == P->end) return unclosed(P, v, ']');
    if (*P->p == ']') break;
    if (*P->p != ',') {
      char buf[48];
      return tk__toml_fail(P, P->p, TK_ESYNTAX,
                           "expected ',' or ']' after an array element, found %s",
                           tk__toml_found(P, P->p, buf, sizeof buf));
    }
    P->p++;
  }
  P->p++;
  size_t n = P->stack_len - base;
  if (n > UINT32_MAX / 4) return tk__toml_nomem(P);
  if (n > 0) {
    v->u.a.items = tk__toml_alloc(&P->mem->nodes, n * sizeof *v->u.a.items);
    if (v->u.a.items == NULL) return tk__toml_nomem(P);
    memcpy(v->u.a.items, P->stack + base, n * sizeof *v->u.a.items);
  }
  v->u.a.len = v->u.a.cap = (uint32_t)n;
  P->stack_len = base;
  return 0;
}

/* { key = value, ... } on one line, no trailing comma (TOML 1.0). */
static int parse_inline_table(tk__toml_parser *P, tk_toml_value *v) {
  int rc;
  char buf[48];
  v->type = TK_TOML_TABLE;
  v->flags = TK__TOML_F_INLINE;
  P->p++;
  tk__toml_skip_ws(P);
  if (P->p < P->end && *P->p == '}') {
    P->p++;
    return 0;
  }
  for (;;) {
    if ((rc = tk__toml_parse_keyval(P, v)) != 0) return rc;
    tk__toml_skip_ws(P);
    if (P->p == P->end) return unclosed(P, v, '}');
    if (*P->p == '}') break;
    if (*P->p != ',') {
      const char *found = tk__toml_found(P, P->p, buf, sizeof buf);
      if (*P->p == '\n' || *P->p == '\r')
        return tk__toml_fail(P, P->p, TK_ESYNTAX,
                             "expected ',' or '}' in inline table, found %s (an inline table "
                             "must be on one line in TOML 1.0)",
                             found);
      return tk__toml_fail(P, P->p, TK_ESYNTAX,
                           "expected ',' or '}' after a value in inline table, found %s", found);
    }
    P->p++;
    tk__toml_skip_ws(P);
    if (P->p < P->end && *P->p == '}')
      return tk__toml_fail(P, P->p, TK_ESYNTAX,
                           "expected a key after ',', found '}' (TOML 1.0 allows no trailing "
                           "comma in an inline table)");
  }
  P->p++;
  return 0;
}

/* The error for text that is not a value. */
static int not_a_value(tk__toml_parser *P, const char *p) {
  const char *q = p;
  int word = q < P->end && ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
                            (*q >= '0' && *q <= '9') || *q == '_');
  while (word && q < P->end && q - p < 40 && !tk__toml_is_delim((unsigned char)*q) &&
         (unsigned char)*q > 0x20 && (unsigned char)*q < 0x7F)
    q++;
  if (q == p) {
    char buf[48];
    return tk__toml_fail(P, p, TK_ESYNTAX,
                         "expected a value (string, number, boolean, date-time, array or inline "
                         "table), found %s",
                         tk__toml_found(P, p, buf, sizeof buf));
  }
  return tk__toml_fail(P, p, TK_ESYNTAX,
                       "invalid value \"%.*s\": expected a string, number, boolean (true, false), "
                       "date-time, array or inline table",
                       (int)(q - p), p);
}

/* true or false. */
static int parse_bool(tk__toml_parser *P, tk_toml_value *v) {
  const char *p = P->p;
  size_t left = (size_t)(P->end - p);
  int b;
  size_t n;
  if (left >= 4 && memcmp(p, "true", 4) == 0) {
    b = 1;
    n = 4;
  } else if (left >= 5 && memcmp(p, "false", 5) == 0) {
    b = 0;
    n = 5;
  } else {
    return not_a_value(P, p);
  }
  if (p + n < P->end && !tk__toml_is_delim((unsigned char)p[n])) return not_a_value(P, p);
  v->type = TK_TOML_BOOLEAN;
  v->u.b = b;
  P->p = p + n;
  return 0;
}

int tk__toml_parse_value(tk__toml_parser *P, tk_toml_value *v, unsigned depth) {
  const char *p = P->p;
  if (p == P->end) return not_a_value(P, p);
  v->pos = tk__toml_pos(P, p);
  v->depth = (uint16_t)(depth > UINT16_MAX ? UINT16_MAX : depth);
  switch (*p) {
  case '"':
  case '\'': return tk__toml_parse_string(P, v);
  case '[':
    if (depth > P->max_depth) return tk__toml_too_deep(P, p);
    return parse_array(P, v, depth);
  case '{':
    if (depth > P->max_depth) return tk__toml_too_deep(P, p);
    return parse_inline_table(P, v);
  case 't':
  case 'f': return parse_bool(P, v);
  case '+':
  case '-':
  case 'i':
  case 'n': return tk__toml_parse_number(P, v);
  default:
    if (*p >= '0' && *p <= '9') {
      if (tk__toml_looks_datetime(p, P->end)) return tk__toml_parse_datetime(P, v);
      return tk__toml_parse_number(P, v);
    }
    return not_a_value(P, p);
  }
}
