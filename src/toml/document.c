/* Parsing a whole document: limits, the line-by-line top level, and the
 * buffer, stream and file entry points. */
#include "toml/parser.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Deeper nesting would risk the C stack in the recursive descent. */
#define DEPTH_CAP 1024u
/* Lines and columns are 32-bit. */
#define INPUT_CAP ((size_t)UINT32_MAX - 1)

/* The effective limits of opts (may be NULL). */
static void limits(const tk_toml_options *opts, size_t *max_input, unsigned *max_depth) {
  *max_input = opts != NULL && opts->max_input > 0 ? opts->max_input : TK_TOML_MAX_INPUT;
  if (*max_input > INPUT_CAP) *max_input = INPUT_CAP;
  *max_depth = opts != NULL && opts->max_depth > 0 ? opts->max_depth : TK_TOML_MAX_DEPTH;
  if (*max_depth > DEPTH_CAP) *max_depth = DEPTH_CAP;
}

/* The top level: blank lines, comments, headers and key/value lines, each
 * ending at a newline. */
static int parse_lines(tk__toml_parser *P) {
  for (;;) {
    tk__toml_skip_ws(P);
    const char *p = P->p;
    int rc;
    if (p == P->end) return 0;
    switch (*p) {
    case '\n': P->p++; continue;
    case '\r':
      if (p + 1 < P->end && p[1] == '\n') {
        P->p += 2;
        continue;
      }
      return tk__toml_fail(P, p, TK_ESYNTAX, "a carriage return must be followed by a newline");
    case '#': rc = tk__toml_skip_comment(P); break;
    case '[':
      rc = tk__toml_parse_header(P);
      if (rc == 0) rc = tk__toml_end_line(P, "the table header");
      break;
    default:
      rc = tk__toml_parse_keyval(P, P->cur);
      if (rc == 0) rc = tk__toml_end_line(P, "the value");
      break;
    }
    if (rc != 0) return rc;
  }
}

int tk_toml_parse_opts(const char *text, size_t len, const tk_toml_options *opts,
                       tk_toml_doc **out, tk_err *err) {
  const char *name = opts != NULL ? opts->name : NULL;
  size_t max_input;
  unsigned max_depth;
  if (out == NULL || (text == NULL && len > 0))
    return tk_err_set(err, TK_EINVAL, "tk_toml_parse: no %s", out == NULL ? "output" : "input");
  *out = NULL;
  limits(opts, &max_input, &max_depth);
  if (len > max_input)
    return tk_err_set(err, TK_ETOOBIG, "%s%sinput is %zu bytes, more than the limit of %zu bytes",
                      name ? name : "", name ? ": " : "", len, max_input);
  tk_toml_doc *doc = calloc(1, sizeof *doc);
  if (doc == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory");
  tk__toml_arena_init(&doc->mem.nodes);
  tk__toml_arena_init(&doc->mem.bytes);
  tk__toml_parser P;
  memset(&P, 0, sizeof P);
  P.src = text != NULL ? text : "";
  P.end = P.src + len;
  /* A UTF-8 byte order mark is allowed at the very start, and only there. */
  if (len >= 3 && memcmp(P.src, "\xEF\xBB\xBF", 3) == 0) P.src += 3;
  P.p = P.src;
  P.name = name;
  P.err = err;
  P.mem = &doc->mem;
  P.max_depth = max_depth;
  P.root = P.cur = &doc->root;
  doc->root.type = TK_TOML_TABLE;
  doc->root.flags = TK__TOML_F_DEFINED;
  doc->root.pos.line = doc->root.pos.column = 1;
  int rc = 0;
  if (name != NULL && (doc->name = tk__toml_strndup(&doc->mem.bytes, name, strlen(name))) == NULL)
    rc = tk_err_set(err, TK_ENOMEM, "out of memory");
  if (rc == 0) rc = parse_lines(&P);
  free(P.buf);
  free(P.keys);
  free(P.stack);
  if (rc != 0) {
    tk_toml_free(doc);
    return rc;
  }
  *out = doc;
  return 0;
}

int tk_toml_parse(const char *text, size_t len, const char *name, tk_toml_doc **out,
                  tk_err *err) {
  tk_toml_options opts;
  memset(&opts, 0, sizeof opts);
  opts.name = name;
  return tk_toml_parse_opts(text, len, &opts, out, err);
}

int tk_toml_parse_stream(FILE *fp, const tk_toml_options *opts, tk_toml_doc **out,
                         tk_err *err) {
  const char *name = opts != NULL && opts->name != NULL ? opts->name : NULL;
  const char *sep = name != NULL ? ": " : "";
  if (name == NULL) name = "";
  size_t max_input;
  unsigned max_depth;
  if (out != NULL) *out = NULL;
  if (fp == NULL || out == NULL) return tk_err_set(err, TK_EINVAL, "tk_toml_parse_stream: no %s",
                                                   fp == NULL ? "stream" : "output");
  limits(opts, &max_input, &max_depth);
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      /* One byte past the limit tells "too big" from "exactly the limit". */
      if (cap > max_input) {
        free(buf);
        return tk_err_set(err, TK_ETOOBIG, "%s%sinput is more than the limit of %zu bytes", name,
                          sep, max_input);
      }
      size_t grown = cap ? cap * 2 : 64 * 1024;
      if (grown > max_input + 1) grown = max_input + 1;
      char *p = realloc(buf, grown);
      if (p == NULL) {
        free(buf);
        return tk_err_set(err, TK_ENOMEM, "%s%sout of memory reading the input", name, sep);
      }
      buf = p;
      cap = grown;
    }
    size_t n = fread(buf + len, 1, cap - len, fp);
    len += n;
    if (n == 0) break;
  }
  if (ferror(fp)) {
    int e = errno;
    free(buf);
    return tk_err_set(err, TK_EIO, "%s%sread error: %s", name, sep, strerror(e));
  }
  int rc = tk_toml_parse_opts(buf, len, opts, out, err);
  free(buf);
  return rc;
}

int tk_toml_parse_file(const char *path, tk_toml_doc **out, tk_err *err) {
  if (out != NULL) *out = NULL;
  if (path == NULL) return tk_err_set(err, TK_EINVAL, "tk_toml_parse_file: no path");
  FILE *fp = fopen(path, "rb");
  if (fp == NULL) {
    int e = errno;
    if (e == ENOENT) return tk_err_set(err, TK_ENOENT, "%s: no such file", path);
    return tk_err_set(err, TK_EIO, "%s: cannot open: %s", path, strerror(e));
  }
  tk_toml_options opts;
  memset(&opts, 0, sizeof opts);
  opts.name = path;
  int rc = tk_toml_parse_stream(fp, &opts, out, err);
  fclose(fp);
  return rc;
}

void tk_toml_free(tk_toml_doc *doc) {
  if (doc == NULL) return;
  tk__toml_arena_free(&doc->mem.nodes);
  tk__toml_arena_free(&doc->mem.bytes);
  free(doc);
}
