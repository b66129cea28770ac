/* The TOML API: lookups, positions, iteration order, scalars, error
 * messages (exact line, column and text) and the size and depth limits. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "common/expect_text.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tasker/toml.h>

/* Parse text that must be valid. */
static tk_toml_doc *parse_ok(const char *text) {
  tk_toml_doc *doc = NULL;
  tk_err err;
  tk_err_clear(&err);
  int rc = tk_toml_parse(text, strlen(text), NULL, &doc, &err);
  if (rc != 0) fail_msg("parse failed: %s", err.msg);
  assert_non_null(doc);
  return doc;
}

/* Parse text that must fail with `code` and exactly `msg`. */
static void parse_fails(const char *text, int code, const char *msg) {
  tk_toml_doc *doc = (tk_toml_doc *)1;
  tk_err err;
  tk_err_clear(&err);
  int rc = tk_toml_parse(text, strlen(text), NULL, &doc, &err);
  assert_null(doc);
  assert_int_equal(rc, code);
  assert_int_equal(err.code, code);
  assert_string_equal(err.msg, msg);
}

/* Fail unless pos is line:column. */
static void assert_pos(tk_toml_pos pos, unsigned line, unsigned column) {
  if (pos.line != line || pos.column != column)
    fail_msg("position %u:%u, want %u:%u", (unsigned)pos.line, (unsigned)pos.column, line, column);
}

static const char config[] =
    "# tasker configuration\n"                       /* 1 */
    "title = \"demo\"\n"                             /* 2 */
    "\n"                                             /* 3 */
    "[engine]\n"                                     /* 4 */
    "max_attempts = 5\n"                             /* 5 */
    "lease = \"30s\"\n"                              /* 6 */
    "\n"                                             /* 7 */
    "[backoff]\n"                                    /* 8 */
    "base = 0.5\n"                                   /* 9 */
    "jitter.kind = \"full\"\n"                       /* 10 */
    "\n"                                             /* 11 */
    "[backoff.profiles.fast]\n"                      /* 12 */
    "  max_delay = \"2s\"   # capped\n"              /* 13 */
    "  schedule = [ 1, 2,\n"                         /* 14 */
    "               3 ]\n"                           /* 15 */
    "\"dotted.key\" = { a = true, b.c = 1979-05-27 }\n" /* 16 */
    "\n"                                             /* 17 */
    "[[hooks]]\n"                                    /* 18 */
    "name = \"first\"\n"                             /* 19 */
    "[[hooks]]\n"                                    /* 20 */
    "name = \"second\"\n";                           /* 21 */

static void lookups_by_key_and_path(void **state) {
  (void)state;
  tk_toml_doc *doc = parse_ok(config);
  const tk_toml_value *root = tk_toml_root(doc);
  assert_int_equal(tk_toml_type_of(root), TK_TOML_TABLE);
  int64_t i;
  assert_int_equal(tk_toml_int(tk_toml_get_path(root, "engine.max_attempts"), &i), 0);
  assert_int_equal(i, 5);
  assert_string_equal(tk_toml_string(tk_toml_get_path(root, "backoff.profiles.fast.max_delay"), NULL),
                      "2s");
  assert_string_equal(tk_toml_string(tk_toml_get_path(root, "backoff.jitter.kind"), NULL), "full");
  /* A quoted key with a dot is reached with per-key lookups only. */
  const tk_toml_value *fast = tk_toml_get_path(root, "backoff.profiles.fast");
  assert_null(tk_toml_get_path(fast, "dotted.key"));
  const tk_toml_value *dk = tk_toml_get(fast, "dotted.key");
  assert_non_null(dk);
  int b;
  assert_int_equal(tk_toml_bool(tk_toml_get(dk, "a"), &b), 0);
  assert_true(b);
  tk_toml_datetime dt;
  const tk_toml_value *date = tk_toml_get_path(dk, "b.c");
  assert_int_equal(tk_toml_type_of(date), TK_TOML_LOCAL_DATE);
  assert_int_equal(tk_toml_datetime_of(date, &dt), 0);
  assert_int_equal(dt.year, 1979);
  assert_int_equal(dt.month, 5);
  assert_int_equal(dt.day, 27);
  /* Misses and wrong types answer "none". */
  assert_null(tk_toml_get(root, "nope"));
  assert_null(tk_toml_get_path(root, "engine.max_attempts.x"));
  assert_null(tk_toml_get_path(root, "title.x"));
  assert_null(tk_toml_get(NULL, "x"));
  assert_int_equal(tk_toml_int(tk_toml_get(root, "title"), &i), TK_EINVAL);
  assert_null(tk_toml_string(tk_toml_get_path(root, "engine.max_attempts"), NULL));
  /* Arrays of tables. */
  const tk_toml_value *hooks = tk_toml_get(root, "hooks");
  assert_int_equal(tk_toml_type_of(hooks), TK_TOML_ARRAY);
  assert_int_equal(tk_toml_array_len(hooks), 2);
  assert_string_equal(tk_toml_string(tk_toml_get(tk_toml_array_at(hooks, 1), "name"), NULL),
                      "second");
  assert_null(tk_toml_array_at(hooks, 2));
  assert_null(tk_toml_doc_name(doc));
  tk_toml_free(doc);
}

static void keys_and_values_carry_positions(void **state) {
  (void)state;
  tk_toml_doc *doc = parse_ok(config);
  const tk_toml_value *root = tk_toml_root(doc);
  assert_pos(tk_toml_pos_of(root), 1, 1);
  const tk_toml_entry *e = tk_toml_find_path(root, "engine.lease");
  assert_non_null(e);
  assert_pos(e->key_pos, 6, 1);
  assert_pos(tk_toml_pos_of(e->value), 6, 9);
  /* A table is where its header is; its key where the name is in it. */
  e = tk_toml_find(root, "engine", 6);
  assert_pos(e->key_pos, 4, 2);
  assert_pos(tk_toml_pos_of(e->value), 4, 1);
  e = tk_toml_find_path(root, "backoff.profiles.fast.max_delay");
  assert_pos(e->key_pos, 13, 3);
  assert_pos(tk_toml_pos_of(e->value), 13, 15);
  const tk_toml_value *schedule = tk_toml_get_path(root, "backoff.profiles.fast.schedule");
  assert_pos(tk_toml_pos_of(schedule), 14, 14);
  assert_pos(tk_toml_pos_of(tk_toml_array_at(schedule, 2)), 15, 16);
  /* Dotted keys: each part has its own position. */
  e = tk_toml_find_path(root, "backoff.jitter");
  assert_pos(e->key_pos, 10, 1);
  e = tk_toml_find_path(root, "backoff.jitter.kind");
  assert_pos(e->key_pos, 10, 8);
  assert_pos(tk_toml_pos_of(e->value), 10, 15);
  const tk_toml_value *fast = tk_toml_get_path(root, "backoff.profiles.fast");
  e = tk_toml_find(fast, "dotted.key", 10);
  assert_pos(e->key_pos, 16, 1);
  assert_pos(tk_toml_pos_of(e->value), 16, 16);
  e = tk_toml_find_path(e->value, "b.c");
  assert_pos(e->key_pos, 16, 30);
  assert_pos(tk_toml_pos_of(e->value), 16, 34);
  /* Each table of an array of tables is at its own [[header]]. */
  const tk_toml_value *hooks = tk_toml_get(root, "hooks");
  assert_pos(tk_toml_pos_of(tk_toml_array_at(hooks, 0)), 18, 1);
  assert_pos(tk_toml_pos_of(tk_toml_array_at(hooks, 1)), 20, 1);
  assert_pos(tk_toml_find(tk_toml_array_at(hooks, 1), "name", 4)->key_pos, 21, 1);
  tk_toml_free(doc);
}

static void columns_count_code_points(void **state) {
  (void)state;
  /* "é" and "€" are 2 and 3 bytes but one column each; CRLF ends a line. */
  tk_toml_doc *doc = parse_ok("k = \"é€\"\r\n\"ü\" = \"x\"   # ö\r\nz = [\"€\", 2]\n");
  const tk_toml_value *root = tk_toml_root(doc);
  const tk_toml_entry *e = tk_toml_find(root, "\xc3\xbc", 2);
  assert_non_null(e);
  assert_pos(e->key_pos, 2, 1);
  assert_pos(tk_toml_pos_of(e->value), 2, 7);
  const tk_toml_value *z = tk_toml_get(root, "z");
  assert_pos(tk_toml_pos_of(tk_toml_array_at(z, 1)), 3, 11);
  tk_toml_free(doc);
}

static void tables_iterate_in_document_order(void **state) {
  (void)state;
  tk_toml_doc *doc = parse_ok("z = 1\n"
                              "a = 2\n"
                              "[m.inner]\n"
                              "x = 1\n"
                              "[b]\n"
                              "[m]\n" /* defined after its child: keeps its place */
                              "y = 2\n");
  const tk_toml_value *root = tk_toml_root(doc);
  const char *want[] = {"z", "a", "m", "b"};
  assert_int_equal(tk_toml_table_len(root), 4);
  for (size_t i = 0; i < 4; i++) assert_string_equal(tk_toml_table_at(root, i)->key, want[i]);
  assert_null(tk_toml_table_at(root, 4));
  const tk_toml_value *m = tk_toml_get(root, "m");
  assert_string_equal(tk_toml_table_at(m, 0)->key, "inner");
  assert_string_equal(tk_toml_table_at(m, 1)->key, "y");
  /* The implicit table takes the position of its definition. */
  assert_pos(tk_toml_pos_of(m), 6, 1);
  assert_pos(tk_toml_find(root, "m", 1)->key_pos, 6, 2);
  tk_toml_free(doc);
}

static void scalars_decode(void **state) {
  (void)state;
  tk_toml_doc *doc = parse_ok("hex = 0xDEAD_beef\n"
                              "oct = 0o755\n"
                              "bin = 0b1101\n"
                              "min = -9223372036854775808\n"
                              "max = 9223372036854775807\n"
                              "f = -1_000.5e-3\n"
                              "ninf = -inf\n"
                              "nan = nan\n"
                              "nul = \"a\\u0000b\"\n"
                              "ml = \"\"\"\r\nline1\r\nline2 \\\r\n   joined\"\"\"\n"
                              "lit = '''\n''x'' '''\n"
                              "odt = 1979-05-27T00:32:00.999999999-07:30\n"
                              "lt = 07:32:00.5\n");
  const tk_toml_value *r = tk_toml_root(doc);
  int64_t i;
  double d;
  tk_toml_int(tk_toml_get(r, "hex"), &i);
  assert_int_equal(i, 0xDEADBEEF);
  tk_toml_int(tk_toml_get(r, "oct"), &i);
  assert_int_equal(i, 0755);
  tk_toml_int(tk_toml_get(r, "bin"), &i);
  assert_int_equal(i, 13);
  tk_toml_int(tk_toml_get(r, "min"), &i);
  assert_true(i == INT64_MIN);
  tk_toml_int(tk_toml_get(r, "max"), &i);
  assert_true(i == INT64_MAX);
  assert_int_equal(tk_toml_float(tk_toml_get(r, "f"), &d), 0);
  assert_true(d == -1.0005);
  tk_toml_float(tk_toml_get(r, "ninf"), &d);
  assert_true(isinf(d) && d < 0);
  tk_toml_float(tk_toml_get(r, "nan"), &d);
  assert_true(isnan(d));
  size_t len;
  const char *s = tk_toml_string(tk_toml_get(r, "nul"), &len);
  assert_int_equal(len, 3);
  assert_memory_equal(s, "a\0b", 3);
  assert_string_equal(tk_toml_string(tk_toml_get(r, "ml"), NULL), "line1\nline2 joined");
  assert_string_equal(tk_toml_string(tk_toml_get(r, "lit"), NULL), "''x'' ");
  tk_toml_datetime dt;
  const tk_toml_value *odt = tk_toml_get(r, "odt");
  assert_int_equal(tk_toml_type_of(odt), TK_TOML_OFFSET_DATETIME);
  tk_toml_datetime_of(odt, &dt);
  assert_int_equal(dt.nanosecond, 999999999);
  assert_int_equal(dt.offset_minutes, -450);
  tk_toml_datetime_of(tk_toml_get(r, "lt"), &dt);
  assert_int_equal(dt.hour, 7);
  assert_int_equal(dt.nanosecond, 500000000);
  assert_string_equal(tk_toml_type_name(tk_toml_type_of(odt)), "offset date-time");
  assert_string_equal(tk_toml_type_name(TK_TOML_LOCAL_TIME), "local time");
  assert_string_equal(tk_toml_type_name(TK_TOML_BOOLEAN), "boolean");
  tk_toml_free(doc);
}

static void values_format_back(void **state) {
  (void)state;
  tk_toml_doc *doc = parse_ok("s = \"a\\\"b\\n\\u0001\"\n"
                              "f = 0.1\n"
                              "g = 3.0\n"
                              "h = 1e300\n"
                              "i = -42\n"
                              "t = 1979-05-27T07:32:00.120Z\n"
                              "u = 1979-05-27T07:32:00+05:30\n"
                              "a = [1]\n");
  const tk_toml_value *r = tk_toml_root(doc);
  char buf[64];
  struct {
    const char *key, *text;
  } cases[] = {{"s", "\"a\\\"b\\n\\u0001\""},  {"f", "0.1"}, {"g", "3.0"},
               {"h", "1e+300"},               {"i", "-42"}, {"t", "1979-05-27T07:32:00.120Z"},
               {"u", "1979-05-27T07:32:00+05:30"}, {"a", "[...]"}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    int n = tk_toml_format_value(tk_toml_get(r, cases[k].key), buf, sizeof buf);
    assert_string_equal(buf, cases[k].text);
    assert_int_equal(n, (int)strlen(cases[k].text));
  }
  /* Truncation behaves like snprintf. */
  assert_int_equal(tk_toml_format_value(tk_toml_get(r, "u"), buf, 5), 25);
  assert_string_equal(buf, "1979");
  tk_toml_free(doc);
}

static void errors_name_line_column_and_expectation(void **state) {
  (void)state;
  parse_fails("[engine]\nlease = 1\n\nretries 3\n", TK_ESYNTAX,
              "line 4, column 9: expected '=' after key \"retries\", found '3'");
  parse_fails("[server]\nport = 1\n[server]\n", TK_ESYNTAX,
              "line 3, column 1: table [server] defined twice (first at line 1)");
  parse_fails("a = 1\nb = 2\n  a = 3\n", TK_ESYNTAX,
              "line 3, column 3: duplicate key \"a\" (first defined at line 1, column 1)");
  parse_fails("x = \"abc\n", TK_ESYNTAX,
              "line 1, column 9: unterminated string: expected \" to close the string that "
              "opened at line 1, column 5, found end of line");
  parse_fails("x = \"a\\qb\"\n", TK_ESYNTAX,
              "line 1, column 7: invalid escape sequence \\q; the escapes are \\b \\t \\n \\f "
              "\\r \\\" \\\\ \\uXXXX and \\UXXXXXXXX");
  parse_fails("n = 9223372036854775808\n", TK_ERANGE,
              "line 1, column 5: integer 9223372036854775808 does not fit in a 64-bit signed "
              "integer (9223372036854775807 is the largest)");
  parse_fails("d = 2023-02-29\n", TK_ESYNTAX, "line 1, column 13: invalid day 29: 2023-02 has 28 days");
  parse_fails("t = 07:32\n", TK_ESYNTAX,
              "line 1, column 10: invalid time: seconds are required in TOML 1.0 (write "
              "HH:MM:SS)");
  parse_fails("a = [1, 2\n", TK_ESYNTAX,
              "line 2, column 1: expected ']' to close the array that opened at line 1, column "
              "5, found end of input");
  parse_fails("a = { b = 1\n", TK_ESYNTAX,
              "line 1, column 12: expected ',' or '}' in inline table, found end of line (an "
              "inline table must be on one line in TOML 1.0)");
  parse_fails("a = 1 2\n", TK_ESYNTAX, "line 1, column 7: expected end of line after the value, found '2'");
  parse_fails("a = {}\n[a.b]\n", TK_ESYNTAX,
              "line 2, column 2: cannot add to \"a\": it is an inline table (defined at line 1, "
              "column 1), complete as written");
  parse_fails("a = [1]\n[[a]]\n", TK_ESYNTAX,
              "line 2, column 1: cannot append to a with [[a]]: it is a static array (defined "
              "at line 1, column 1); [[...]] extends only arrays of tables");
  parse_fails("[a.b]\nc = 1\n[a]\nb.d = 2\n", TK_ESYNTAX,
              "line 4, column 1: cannot add to table \"b\" with a dotted key: it was defined by "
              "a [header] at line 1, column 1");
  parse_fails("x = 1\n\xff = 2\n", TK_ESYNTAX,
              "line 2, column 1: expected a key, found invalid UTF-8 byte 0xFF (bare keys may "
              "hold only A-Z a-z 0-9 _ and -; quote other keys)");
  parse_fails("k = \"\xc3\xa9\xc3\xa9\" x\n", TK_ESYNTAX,
              "line 1, column 10: expected end of line after the value, found 'x'");
  /* The document name prefixes the message. */
  tk_toml_doc *doc;
  tk_err err;
  assert_int_equal(tk_toml_parse("a = \n", 5, "cfg.toml", &doc, &err), TK_ESYNTAX);
  assert_string_equal(err.msg, "cfg.toml:1:5: expected a value (string, number, "
                               "boolean, date-time, array or inline table), found end of line");
}

/* A document with n nested arrays or inline tables. */
static char *nested(int n, int inline_tables) {
  char *s = malloc((size_t)n * 8 + 16);
  size_t o = (size_t)sprintf(s, "x = ");
  for (int i = 0; i < n; i++) o += (size_t)sprintf(s + o, inline_tables ? "{a=" : "[");
  o += (size_t)sprintf(s + o, "1");
  for (int i = 0; i < n; i++) s[o++] = inline_tables ? '}' : ']';
  s[o++] = '\n';
  s[o] = '\0';
  return s;
}

static void depth_is_limited(void **state) {
  (void)state;
  tk_toml_doc *doc;
  tk_err err;
  for (int inl = 0; inl < 2; inl++) {
    char *ok = nested(TK_TOML_MAX_DEPTH, inl), *deep = nested(TK_TOML_MAX_DEPTH + 1, inl);
    assert_int_equal(tk_toml_parse(ok, strlen(ok), NULL, &doc, &err), 0);
    tk_toml_free(doc);
    assert_int_equal(tk_toml_parse(deep, strlen(deep), NULL, &doc, &err), TK_ETOODEEP);
    assert_null(doc);
    expect_contains(err.msg, "nesting too deep: more than 128 levels of tables and arrays");
    assert_int_equal(strncmp(err.msg, "line 1, column ", 15), 0);
    free(ok);
    free(deep);
  }
  /* Headers and dotted keys count too; the limit can be lowered. */
  tk_toml_options opts = {.name = "d.toml", .max_depth = 3};
  assert_int_equal(tk_toml_parse_opts("[a.b.c]\n", 8, &opts, &doc, &err), 0);
  tk_toml_free(doc);
  assert_int_equal(tk_toml_parse_opts("[a.b.c.d]\n", 10, &opts, &doc, &err), TK_ETOODEEP);
  assert_string_equal(err.msg, "d.toml:1:8: nesting too deep: more than 3 levels "
                               "of tables and arrays");
  assert_int_equal(tk_toml_parse_opts("a.b.c = [[1]]\n", 14, &opts, &doc, &err), TK_ETOODEEP);
  assert_int_equal(tk_toml_parse_opts("a.b.c = [1]\n", 12, &opts, &doc, &err), 0);
  tk_toml_free(doc);
  assert_int_equal(tk_toml_parse_opts("a.b.c = 1\n", 10, &opts, &doc, &err), 0);
  tk_toml_free(doc);
  /* Very long dotted keys stop early rather than growing without bound. */
  char key[4096];
  size_t o = 0;
  for (int i = 0; i < 1000; i++) o += (size_t)sprintf(key + o, "k.");
  sprintf(key + o, "z = 1\n");
  assert_int_equal(tk_toml_parse(key, strlen(key), NULL, &doc, &err), TK_ETOODEEP);
}

static void size_is_limited(void **state) {
  (void)state;
  tk_toml_doc *doc;
  tk_err err;
  tk_toml_options opts = {.name = "big.toml", .max_input = 10};
  assert_int_equal(tk_toml_parse_opts("a = 123456\n", 11, &opts, &doc, &err), TK_ETOOBIG);
  assert_null(doc);
  assert_string_equal(err.msg, "big.toml: input is 11 bytes, more than the limit of 10 bytes");
  assert_int_equal(tk_toml_parse_opts("a = 12345\n", 10, &opts, &doc, &err), 0);
  tk_toml_free(doc);
  /* A stream is not read past the limit. */
  FILE *f = tmpfile();
  for (int i = 0; i < 1000; i++) fputs("# padding\n", f);
  rewind(f);
  opts.max_input = 4096;
  assert_int_equal(tk_toml_parse_stream(f, &opts, &doc, &err), TK_ETOOBIG);
  assert_string_equal(err.msg, "big.toml: input is more than the limit of 4096 bytes");
  rewind(f);
  opts.max_input = 10000;
  assert_int_equal(tk_toml_parse_stream(f, &opts, &doc, &err), 0);
  tk_toml_free(doc);
  fclose(f);
}

static void files_parse_with_their_name(void **state) {
  (void)state;
  tk_toml_doc *doc;
  tk_err err;
  char path[] = "/tmp/tk_toml_test_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char text[] = "ok = true\nbad = \n";
  assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
  close(fd);
  assert_int_equal(tk_toml_parse_file(path, &doc, &err), TK_ESYNTAX);
  char want[256];
  snprintf(want, sizeof want,
           "%s:2:7: expected a value (string, number, boolean, date-time, array "
           "or inline table), found end of line",
           path);
  assert_string_equal(err.msg, want);
  FILE *f = fopen(path, "w");
  fputs("ok = true\n", f);
  fclose(f);
  assert_int_equal(tk_toml_parse_file(path, &doc, &err), 0);
  assert_string_equal(tk_toml_doc_name(doc), path);
  tk_toml_free(doc);
  unlink(path);
  assert_int_equal(tk_toml_parse_file(path, &doc, &err), TK_ENOENT);
  snprintf(want, sizeof want, "%s: no such file", path);
  assert_string_equal(err.msg, want);
  assert_int_equal(tk_toml_parse(NULL, 0, NULL, &doc, &err), 0); /* empty document */
  assert_int_equal(tk_toml_table_len(tk_toml_root(doc)), 0);
  tk_toml_free(doc);
  assert_int_equal(tk_toml_parse("a=1", 3, NULL, NULL, &err), TK_EINVAL);
  tk_toml_free(NULL);
}

static void big_tables_index_and_detect_duplicates(void **state) {
  (void)state;
  enum { N = 200000 };
  size_t cap = (size_t)N * 24 + 64, o = 0;
  char *text = malloc(cap);
  o += (size_t)sprintf(text + o, "[t]\n");
  for (int i = 0; i < N; i++) o += (size_t)sprintf(text + o, "key%d = %d\n", i, i);
  tk_toml_doc *doc = parse_ok(text);
  const tk_toml_value *t = tk_toml_get(tk_toml_root(doc), "t");
  assert_int_equal(tk_toml_table_len(t), N);
  for (int i = 0; i < N; i += 997) {
    char key[32];
    int64_t v;
    snprintf(key, sizeof key, "key%d", i);
    assert_int_equal(tk_toml_int(tk_toml_get(t, key), &v), 0);
    assert_int_equal(v, i);
    assert_string_equal(tk_toml_table_at(t, (size_t)i)->key, key);
  }
  tk_toml_free(doc);
  /* The same key again at the very end is found. */
  o += (size_t)sprintf(text + o, "key%d = 0\n", N / 2);
  tk_err err;
  assert_int_equal(tk_toml_parse(text, o, NULL, &doc, &err), TK_ESYNTAX);
  char want[128];
  snprintf(want, sizeof want, "line %d, column 1: duplicate key \"key%d\" (first defined at line %d, column 1)",
           N + 2, N / 2, N / 2 + 2);
  assert_string_equal(err.msg, want);
  free(text);
}

/* Regression (found by the fuzzer): a string bigger than the arena's first
 * chunk, allocated before anything else, was overwritten by what came
 * next. */
static void large_values_keep_their_bytes(void **state) {
  (void)state;
  for (size_t n = 1000; n <= 40000; n *= 3) {
    char *text = malloc(n + 64);
    size_t o = (size_t)sprintf(text, "s = '");
    memset(text + o, 'x', n);
    o += n;
    o += (size_t)sprintf(text + o, "'\nk = 1\n[t]\nu = 2\n");
    tk_toml_doc *doc = parse_ok(text);
    size_t len;
    const char *s = tk_toml_string(tk_toml_get(tk_toml_root(doc), "s"), &len);
    assert_int_equal(len, n);
    for (size_t i = 0; i < n; i++)
      if (s[i] != 'x') fail_msg("byte %zu of %zu is 0x%02x", i, n, (unsigned char)s[i]);
    assert_string_equal(tk_toml_table_at(tk_toml_root(doc), 1)->key, "k");
    tk_toml_free(doc);
    free(text);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lookups_by_key_and_path),
      cmocka_unit_test(keys_and_values_carry_positions),
      cmocka_unit_test(columns_count_code_points),
      cmocka_unit_test(tables_iterate_in_document_order),
      cmocka_unit_test(scalars_decode),
      cmocka_unit_test(values_format_back),
      cmocka_unit_test(errors_name_line_column_and_expectation),
      cmocka_unit_test(depth_is_limited),
      cmocka_unit_test(size_is_limited),
      cmocka_unit_test(files_parse_with_their_name),
      cmocka_unit_test(big_tables_index_and_detect_duplicates),
      cmocka_unit_test(large_values_keep_their_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
