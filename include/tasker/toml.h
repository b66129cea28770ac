/* tasker: the TOML 1.0 parser.
 *
 * A document is parsed in one call into a read-only tree owned by a
 * tk_toml_doc; every pointer handed out below lives as long as the document
 * and dies with tk_toml_free(). Tables keep their entries in document order.
 *
 * Every value and every table key carries its source position (1-based line
 * and column; columns count Unicode code points, a tab is one column), so
 * callers can report "FILE:LINE:COLUMN" for problems found after parsing.
 *
 * Parse errors fill the tk_err with a message of the form
 *   NAME:L:C: what was found and what was expected
 * (or "line L, column C: ..." when the input has no name)
 * and one of these codes: TK_ESYNTAX (malformed or not TOML 1.0, including
 * redefined keys and tables), TK_ERANGE (an integer that does not fit in 64
 * bits, a float that overflows), TK_ETOOBIG (input over the size limit),
 * TK_ETOODEEP (nesting over the depth limit), TK_ENOMEM, and for files
 * TK_ENOENT / TK_EIO.
 */
#ifndef TASKER_TOML_H
#define TASKER_TOML_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <tasker/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Default limits: input bytes, and levels of nested tables and arrays below
 * the root table (a = [[1]] uses 2; [a.b.c] uses 3). */
#define TK_TOML_MAX_INPUT ((size_t)64 << 20)
#define TK_TOML_MAX_DEPTH 128

typedef enum tk_toml_type {
  TK_TOML_STRING = 1,
  TK_TOML_INTEGER,
  TK_TOML_FLOAT,
  TK_TOML_BOOLEAN,
  TK_TOML_OFFSET_DATETIME, /* 1979-05-27T07:32:00-08:00 */
  TK_TOML_LOCAL_DATETIME,  /* 1979-05-27T07:32:00 */
  TK_TOML_LOCAL_DATE,      /* 1979-05-27 */
  TK_TOML_LOCAL_TIME,      /* 07:32:00 */
  TK_TOML_ARRAY,
  TK_TOML_TABLE
} tk_toml_type;

typedef struct tk_toml_pos {
  uint32_t line;   /* 1-based */
  uint32_t column; /* 1-based, in code points */
} tk_toml_pos;

/* The fields a date-time kind does not have are 0: a local date has no
 * time, a local time no date, only an offset date-time has an offset. */
typedef struct tk_toml_datetime {
  int year, month, day;     /* 0000-9999, 1-12, 1-31 (checked per month) */
  int hour, minute, second; /* 0-23, 0-59, 0-60 (RFC 3339 leap second) */
  int nanosecond;           /* 0-999999999; digits past the 9th are dropped */
  int frac_digits;          /* fraction digits written, 0-9, for printing */
  int offset_minutes;       /* minutes east of UTC; "Z" is 0 */
} tk_toml_datetime;

typedef struct tk_toml_doc tk_toml_doc;
typedef struct tk_toml_value tk_toml_value;

/* One table entry. The key is NUL-terminated for convenience, but a quoted
 * key may hold "\u0000", so key_len is authoritative. */
typedef struct tk_toml_entry {
  const char *key;
  size_t key_len;
  tk_toml_pos key_pos; /* where the key (or its segment of a dotted key or
                          table header) defined the entry */
  const tk_toml_value *value;
} tk_toml_entry;

/* Parse options; a zeroed struct (or NULL) gives the defaults. */
typedef struct tk_toml_options {
  const char *name;  /* prefixed to error messages and kept by the doc */
  size_t max_input;  /* bytes; 0 means TK_TOML_MAX_INPUT, capped at 4 GiB-1 */
  unsigned max_depth; /* 0 means TK_TOML_MAX_DEPTH */
} tk_toml_options;

/* Parse `len` bytes at `text` (need not be NUL-terminated; the buffer may
 * be freed after the call). On success *out owns the tree and 0 is
 * returned; on failure *out is NULL and a negative code is returned with the
 * message in err (may be NULL). `name` (may be NULL) prefixes messages. */
int tk_toml_parse(const char *text, size_t len, const char *name, tk_toml_doc **out,
                  tk_err *err);

/* tk_toml_parse with explicit options (opts may be NULL). */
int tk_toml_parse_opts(const char *text, size_t len, const tk_toml_options *opts,
                       tk_toml_doc **out, tk_err *err);

/* Read `fp` to its end (refusing more than the size limit without reading
 * it all) and parse it. The stream is not closed. */
int tk_toml_parse_stream(FILE *fp, const tk_toml_options *opts, tk_toml_doc **out,
                         tk_err *err);

/* Parse the file at `path`; the path names the document in messages.
 * A missing file gives TK_ENOENT, an unreadable one TK_EIO. */
int tk_toml_parse_file(const char *path, tk_toml_doc **out, tk_err *err);

/* Free a document and everything in it. NULL is allowed. */
void tk_toml_free(tk_toml_doc *doc);

/* The root table; never NULL for a parsed document. */
const tk_toml_value *tk_toml_root(const tk_toml_doc *doc);

/* The name given at parse time, or NULL. */
const char *tk_toml_doc_name(const tk_toml_doc *doc);

/* The type of a value; 0 (no type) for NULL, so a missing key can be
 * tested with the same switch. */
tk_toml_type tk_toml_type_of(const tk_toml_value *v);

/* "string", "integer", "float", "boolean", "offset date-time",
 * "local date-time", "local date", "local time", "array", "table";
 * "unknown" for anything else. */
const char *tk_toml_type_name(tk_toml_type type);

/* Where the value starts: its first character, the '[' of an array, the
 * '{' of an inline table, the '[' of the header that defined a table, or
 * the key that implicitly created it. Tables in an array of tables are at
 * their "[[" header. The root table is at line 1, column 1. */
tk_toml_pos tk_toml_pos_of(const tk_toml_value *v);

/* Scalar accessors: 0 and the value, or TK_EINVAL (and *out untouched)
 * when v is NULL or of another type. No implicit conversions. */
int tk_toml_int(const tk_toml_value *v, int64_t *out);
int tk_toml_float(const tk_toml_value *v, double *out);
int tk_toml_bool(const tk_toml_value *v, int *out);
/* Any of the four date-time kinds; tk_toml_type_of tells which. */
int tk_toml_datetime_of(const tk_toml_value *v, tk_toml_datetime *out);

/* The string's bytes (NUL-terminated, valid UTF-8; may hold NUL when it
 * was written as \u0000) and its length in *len (may be NULL), or NULL
 * when v is not a string. */
const char *tk_toml_string(const tk_toml_value *v, size_t *len);

/* Number of entries of a table, elements of an array; 0 for other types. */
size_t tk_toml_table_len(const tk_toml_value *table);
size_t tk_toml_array_len(const tk_toml_value *array);

/* The i-th entry of a table in document order (the order in which keys
 * first appeared), or NULL when out of range or not a table. */
const tk_toml_entry *tk_toml_table_at(const tk_toml_value *table, size_t i);

/* The i-th element of an array, or NULL. */
const tk_toml_value *tk_toml_array_at(const tk_toml_value *array, size_t i);

/* The entry for one key (exactly these bytes, no dotted-path splitting),
 * or NULL when missing or `table` is not a table. Average O(1). */
const tk_toml_entry *tk_toml_find(const tk_toml_value *table, const char *key, size_t len);

/* tk_toml_find(table, key, strlen(key))->value, or NULL. */
const tk_toml_value *tk_toml_get(const tk_toml_value *table, const char *key);

/* Follow a dotted path of keys ("backoff.profiles.fast.max_delay"),
 * splitting at every '.', through tables only; the entry of the last key,
 * or NULL when any step is missing or not a table. For keys that contain
 * dots, walk with tk_toml_find. */
const tk_toml_entry *tk_toml_find_path(const tk_toml_value *table, const char *path);

/* tk_toml_find_path(table, path)->value, or NULL. */
const tk_toml_value *tk_toml_get_path(const tk_toml_value *table, const char *path);

/* Write a scalar as TOML would spell it (strings quoted and escaped,
 * floats in the shortest form that reads back exactly, date-times in
 * RFC 3339), "[...]" for an array and "{...}" for a table, into buf like
 * snprintf; returns the length the full text needs. */
int tk_toml_format_value(const tk_toml_value *v, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
