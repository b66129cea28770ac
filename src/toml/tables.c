/* Table headers and the TOML 1.0 rules for defining tables: a table is
 * defined once, either by a [header] or by dotted keys; parents named in a
 * header may be defined later; inline tables and static arrays are closed;
 * [[header]] appends to arrays of tables only. The flags in tree.h record
 * how each table came to be. */
#include "toml/parser.h"

#define PATH_BUF 200

/* The error for part i of a key (dotted key or header) whose entry e holds
 * something that cannot be extended as a table. */
static int cannot_extend(tk__toml_parser *P, const tk__toml_key *keys, size_t i,
                         const tk__toml_entry *e, int in_header) {
  const tk_toml_value *v = &e->val;
  char path[PATH_BUF];
  tk__toml_show_path(keys, i + 1, 1, path, sizeof path);
  unsigned line = e->pub.key_pos.line, col = e->pub.key_pos.column;
  if (v->type == TK_TOML_TABLE && (v->flags & TK__TOML_F_INLINE))
    return tk__toml_fail(P, keys[i].at, TK_ESYNTAX,
                         "cannot add to %s: it is an inline table (defined at line %u, column "
                         "%u), complete as written",
                         path, line, col);
  if (v->type == TK_TOML_TABLE)
    return tk__toml_fail(P, keys[i].at, TK_ESYNTAX,
                         "cannot add to table %s with a dotted key: it was defined by a [header] "
                         "at line %u, column %u",
                         path, (unsigned)v->pos.line, (unsigned)v->pos.column);
  return tk__toml_fail(P, keys[i].at, TK_ESYNTAX,
                       "cannot use %s as a table: it is %s (defined at line %u, column %u)%s",
                       path, tk__toml_kind(v), line, col,
                       in_header && v->type == TK_TOML_ARRAY
                           ? "; only arrays made with [[...]] can be extended"
                           : "");
}

int tk__toml_dotted_step(tk__toml_parser *P, tk_toml_value *t, const tk__toml_key *keys,
                         size_t i, tk_toml_value **out) {
  const tk__toml_key *k = &keys[i];
  tk__toml_entry *e = tk__toml_table_find(t, k->ptr, k->len, k->hash);
  if (e == NULL)
    return tk__toml_add_container(P, t, k, TK_TOML_TABLE, TK__TOML_F_DOTTED, k->pos, out);
  tk_toml_value *v = tk__toml_entry_value(e);
  if (v->type == TK_TOML_TABLE && (v->flags & TK__TOML_F_DOTTED) && !(v->flags & TK__TOML_F_INLINE)) {
    *out = v;
    return 0;
  }
  return cannot_extend(P, keys, i, e, 0);
}

/* The table that the parent part i of a header leads to: tables (not
 * inline) and the last element of arrays of tables; created when absent. */
static int header_step(tk__toml_parser *P, tk_toml_value *t, const tk__toml_key *keys, size_t i,
                       tk_toml_value **out) {
  const tk__toml_key *k = &keys[i];
  tk__toml_entry *e = tk__toml_table_find(t, k->ptr, k->len, k->hash);
  if (e == NULL)
    return tk__toml_add_container(P, t, k, TK_TOML_TABLE, TK__TOML_F_IMPLICIT, k->pos, out);
  tk_toml_value *v = tk__toml_entry_value(e);
  if (v->type == TK_TOML_TABLE && !(v->flags & TK__TOML_F_INLINE)) {
    *out = v;
    return 0;
  }
  if (v->type == TK_TOML_ARRAY && (v->flags & TK__TOML_F_AOT)) {
    *out = &v->u.a.items[v->u.a.len - 1];
    return 0;
  }
  return cannot_extend(P, keys, i, e, 1);
}

/* [a.b.c]: define the last table, or fail when it is already defined. */
static int define_table(tk__toml_parser *P, tk_toml_value *t, const tk__toml_key *last,
                        const char *open, tk_toml_pos hpos, const char *path) {
  tk__toml_entry *e = tk__toml_table_find(t, last->ptr, last->len, last->hash);
  if (e == NULL)
    return tk__toml_add_container(P, t, last, TK_TOML_TABLE, TK__TOML_F_DEFINED, hpos, &P->cur);
  tk_toml_value *v = tk__toml_entry_value(e);
  unsigned line = e->pub.key_pos.line, col = e->pub.key_pos.column;
  if (v->type == TK_TOML_TABLE && (v->flags & TK__TOML_F_IMPLICIT)) {
    /* Named earlier only as a parent: this is its definition. */
    v->flags = (uint8_t)((v->flags & ~TK__TOML_F_IMPLICIT) | TK__TOML_F_DEFINED);
    v->pos = hpos;
    e->pub.key_pos = last->pos;
    P->cur = v;
    return 0;
  }
  if (v->type == TK_TOML_TABLE && (v->flags & TK__TOML_F_DEFINED))
    return tk__toml_fail(P, open, TK_ESYNTAX, "table [%s] defined twice (first at line %u)", path,
                         (unsigned)v->pos.line);
  if (v->type == TK_TOML_TABLE && (v->flags & TK__TOML_F_DOTTED))
    return tk__toml_fail(P, open, TK_ESYNTAX,
                         "table [%s] was already defined by dotted keys at line %u, column %u",
                         path, line, col);
  if (v->type == TK_TOML_TABLE)
    return tk__toml_fail(P, open, TK_ESYNTAX,
                         "table [%s] was already defined as an inline table at line %u, column %u",
                         path, line, col);
  if (v->type == TK_TOML_ARRAY && (v->flags & TK__TOML_F_AOT))
    return tk__toml_fail(P, open, TK_ESYNTAX,
                         "[%s] is an array of tables (first at line %u); use [[%s]] to add an "
                         "element",
                         path, line, path);
  return tk__toml_fail(P, open, TK_ESYNTAX,
                       "cannot define table [%s]: the key already holds %s (line %u, column %u)",
                       path, tk__toml_kind(v), line, col);
}

/* [[a.b.c]]: append a table to the array of tables, creating it. */
static int append_table(tk__toml_parser *P, tk_toml_value *t, const tk__toml_key *last,
                        const char *open, tk_toml_pos hpos, const char *path) {
  tk__toml_entry *e = tk__toml_table_find(t, last->ptr, last->len, last->hash);
  tk_toml_value *arr;
  int rc;
  if (e == NULL) {
    rc = tk__toml_add_container(P, t, last, TK_TOML_ARRAY, TK__TOML_F_AOT, hpos, &arr);
    if (rc != 0) return rc;
  } else {
    arr = tk__toml_entry_value(e);
    unsigned line = e->pub.key_pos.line, col = e->pub.key_pos.column;
    if (arr->type == TK_TOML_ARRAY && !(arr->flags & TK__TOML_F_AOT))
      return tk__toml_fail(P, open, TK_ESYNTAX,
                           "cannot append to %s with [[%s]]: it is a static array (defined at "
                           "line %u, column %u); [[...]] extends only arrays of tables",
                           path, path, line, col);
    if (arr->type != TK_TOML_ARRAY)
      return tk__toml_fail(P, open, TK_ESYNTAX,
                           "[[%s]] cannot make an array of tables: the key already holds %s "
                           "(line %u, column %u)",
                           path, tk__toml_kind(arr), line, col);
  }
  if (arr->depth + 1u > P->max_depth) return tk__toml_too_deep(P, open);
  tk_toml_value *elem = tk__toml_array_push(P->mem, arr);
  if (elem == NULL) return tk__toml_nomem(P);
  elem->type = TK_TOML_TABLE;
  elem->flags = TK__TOML_F_DEFINED;
  elem->depth = (uint16_t)(arr->depth + 1);
  elem->pos = hpos;
  P->cur = elem;
  return 0;
}

int tk__toml_parse_header(tk__toml_parser *P) {
  const char *open = P->p;
  tk_toml_pos hpos = tk__toml_pos(P, open);
  int aot = open + 1 < P->end && open[1] == '[';
  char buf[48];
  size_t n;
  int rc;
  P->p += aot ? 2 : 1;
  tk__toml_skip_ws(P);
  if ((rc = tk__toml_parse_key(P, &n)) != 0) return rc;
  if (P->p >= P->end || *P->p != ']' || (aot && (P->p + 1 >= P->end || P->p[1] != ']'))) {
    const char *at = P->p < P->end && *P->p == ']' ? P->p + 1 : P->p;
    return tk__toml_fail(P, at, TK_ESYNTAX, "expected '%s' to close the %s header, found %s",
                         aot ? "]]" : "]", aot ? "array of tables" : "table",
                         tk__toml_found(P, at, buf, sizeof buf));
  }
  P->p += aot ? 2 : 1;
  tk_toml_value *t = P->root;
  for (size_t i = 0; i + 1 < n; i++)
    if ((rc = header_step(P, t, P->keys, i, &t)) != 0) return rc;
  char path[PATH_BUF];
  tk__toml_show_path(P->keys, n, 0, path, sizeof path);
  if (aot) return append_table(P, t, &P->keys[n - 1], open, hpos, path);
  return define_table(P, t, &P->keys[n - 1], open, hpos, path);
}
