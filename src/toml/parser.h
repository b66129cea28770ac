/* The parser state and the helpers its pieces share: positions and error
 * messages (lexer.c), strings (strings.c), numbers (numbers.c), date-times
 * (datetime.c), values and keys (value.c), table headers and the table
 * definition rules (tables.c). document.c drives them. */
#ifndef TK_TOML_PARSER_H
#define TK_TOML_PARSER_H

#include <stddef.h>
#include <stdint.h>

#include <tasker/toml.h>

#include "toml/tree.h"

/* One part of a dotted key, decoded. `ptr` points into the input when the
 * key needed no decoding, else into the arena. */
typedef struct tk__toml_key {
  const char *ptr;
  size_t len;
  uint32_t hash;
  tk_toml_pos pos;
  const char *at; /* where it starts in the input */
} tk__toml_key;

/* Decoded string contents: a slice of the input or of the scratch buffer. */
typedef struct tk__toml_slice {
  const char *ptr;
  size_t len;
} tk__toml_slice;

typedef struct tk__toml_parser {
  const char *src, *end; /* the document (after any byte order mark) */
  const char *p;         /* the next byte to read */
  const char *name;      /* for messages; may be NULL */
  tk_err *err;
  tk__toml_mem *mem;
  unsigned max_depth;
  tk_toml_value *root;
  tk_toml_value *cur; /* the table key/value lines go to */
  /* Position cache: positions are asked for in document order, so the line
   * count and the column are advanced from the last answer. */
  const char *pos_at;
  uint32_t line, col;
  /* Scratch for strings that need decoding, reused for every string. */
  char *buf;
  size_t buf_len, buf_cap;
  /* Elements of the arrays being read, innermost last. */
  tk_toml_value *stack;
  size_t stack_len, stack_cap;
  /* Parts of the key being read; at most max_depth + 1. */
  tk__toml_key *keys;
  size_t keys_cap;
} tk__toml_parser;

/* ---- lexer.c ---- */

/* The position of `at`, which must not precede the last position asked
 * for (else it is recomputed from the start, correctly but slowly). */
tk_toml_pos tk__toml_pos(tk__toml_parser *P, const char *at);

/* Set P->err to "NAME:L:C: MESSAGE" (the form of every other error about
 * a file, which editors follow), or "line L, column C: MESSAGE" without a
 * name, for the position of `at`; return `code`. */
int tk__toml_fail(tk__toml_parser *P, const char *at, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* The out-of-memory error, at the current position. */
int tk__toml_nomem(tk__toml_parser *P);

/* A short description of what is at `at` for "found ..." in messages:
 * "end of input", "end of line", "'x'", "U+00A0", "byte 0xFF". */
const char *tk__toml_found(const tk__toml_parser *P, const char *at, char *buf, size_t cap);

/* A dotted key as TOML would write it (a."b.c".d), shortened when long;
 * with quote_bare, a key of bare parts only is quoted whole ("a.b"). */
const char *tk__toml_show_path(const tk__toml_key *keys, size_t n, int quote_bare, char *buf,
                               size_t cap);

/* Length of the valid UTF-8 sequence (2-4 bytes, no overlongs, surrogates
 * or code points past U+10FFFF) starting with a byte >= 0x80 at p, or 0. */
size_t tk__toml_utf8_len(const unsigned char *p, const unsigned char *end);

/* Whether c may end a scalar: whitespace, newline, comment, ',', ']', '}'. */
static inline int tk__toml_is_delim(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '#' || c == ',' || c == ']' ||
         c == '}';
}

/* Whether c may appear in a bare key: A-Z a-z 0-9 _ -. */
static inline int tk__toml_is_bare_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

/* The value of digit c in `base` (2, 8, 10, 16; either case), or -1. */
static inline int tk__toml_digit(char c, int base) {
  int d;
  if (c >= '0' && c <= '9') d = c - '0';
  else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
  else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
  else return -1;
  return d < base ? d : -1;
}

/* Skip spaces and tabs. */
static inline void tk__toml_skip_ws(tk__toml_parser *P) {
  const char *p = P->p, *end = P->end;
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  P->p = p;
}

/* Skip a comment starting at '#' up to (not over) the end of line,
 * rejecting control characters and invalid UTF-8. 0 or an error code. */
int tk__toml_skip_comment(tk__toml_parser *P);

/* Skip whitespace, newlines and comments (inside arrays). */
int tk__toml_skip_ws_nl(tk__toml_parser *P);

/* After a header or key/value line: optional whitespace and comment, then
 * a newline (consumed) or the end of input. `what` names the line's
 * content for the message. */
int tk__toml_end_line(tk__toml_parser *P, const char *what);

/* ---- strings.c ---- */

/* Room for n more bytes after the P->buf_len bytes of the scratch buffer
 * (which may move), or NULL when out of memory. */
char *tk__toml_scratch(tk__toml_parser *P, size_t n);

/* A string value at P->p (any of the four kinds) into v. */
int tk__toml_parse_string(tk__toml_parser *P, tk_toml_value *v);

/* A quoted key at P->p (basic or literal, one line) into k->ptr/len. */
int tk__toml_parse_quoted_key(tk__toml_parser *P, tk__toml_key *k);

/* ---- numbers.c ---- */

/* An integer or float at P->p into v. */
int tk__toml_parse_number(tk__toml_parser *P, tk_toml_value *v);

/* Read a decimal float ("1.5e-3", digits only, no '_', optional sign) the
 * same way in every locale. 0, TK_ERANGE when it overflows, TK_ENOMEM. */
int tk__toml_strtod(const char *text, size_t len, double *out);

/* ---- datetime.c ---- */

/* Whether the text at p starts like a date (DDDD-) or a time (DD:). */
int tk__toml_looks_datetime(const char *p, const char *end);

/* One of the four date-time kinds at P->p into v. */
int tk__toml_parse_datetime(tk__toml_parser *P, tk_toml_value *v);

/* ---- value.c ---- */

/* Any value at P->p into v, which will sit `depth` levels below the root. */
int tk__toml_parse_value(tk__toml_parser *P, tk_toml_value *v, unsigned depth);

/* A dotted key at P->p into P->keys; *n gets the number of parts. */
int tk__toml_parse_key(tk__toml_parser *P, size_t *n);

/* A key = value pair at P->p, added to `table` (the current table or an
 * inline table being read). */
int tk__toml_parse_keyval(tk__toml_parser *P, tk_toml_value *table);

/* A new table or array child of `parent` under key k, `depth` levels deep,
 * stored in *out; fails with TK_ETOODEEP past the depth limit. */
int tk__toml_add_container(tk__toml_parser *P, tk_toml_value *parent, const tk__toml_key *k,
                           int type, int flags, tk_toml_pos pos, tk_toml_value **out);

/* The error for a table or array that would sit deeper than the limit. */
int tk__toml_too_deep(tk__toml_parser *P, const char *at);

/* The "table"-or-type word for messages about an existing value. */
const char *tk__toml_kind(const tk_toml_value *v);

/* ---- tables.c ---- */

/* A [table] or [[array of tables]] header at P->p; makes it current. */
int tk__toml_parse_header(tk__toml_parser *P);

/* The table that part k of a dotted key in `t` leads to, created when
 * absent; fails when the key holds something that cannot be extended. */
int tk__toml_dotted_step(tk__toml_parser *P, tk_toml_value *t, const tk__toml_key *keys,
                         size_t i, tk_toml_value **out);

#endif
