/* The placeholder syntax of placeholder.h: compiling a text into literals
 * and references, looking references up in the attempt's input, and
 * writing their values as text (plain or URL-encoded) or typed JSON. */
#include "handlers/placeholder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/error.h>

typedef enum source {
  SRC_TEXT,
  SRC_CONTEXT,
  SRC_PARENTS,
  SRC_ITEM,
  SRC_ITEM_INDEX,
  SRC_ENV,
  SRC_TASK
} source;

/* The input's member each source of the input reads, by source. */
static const char *const input_member[] = {
    [SRC_CONTEXT] = "context", [SRC_PARENTS] = "parents", [SRC_ITEM] = "item",
    [SRC_ITEM_INDEX] = "item_index"};

/* One piece of a compiled text. A literal is text[off..off+len); a
 * reference is the placeholder as written there (for messages), with its
 * path segments segs[seg..seg+nseg) after the source name. */
typedef struct part {
  source src;
  size_t off, len;
  size_t seg, nseg;
  int quoted; /* a literal written {{"..."}} */
} part;

typedef struct seg {
  size_t off, len;
} seg;

struct tk__ph {
  char *text; /* a copy of the compiled text */
  size_t len;
  part *parts;
  size_t nparts, nrefs;
  seg *segs;
  size_t nsegs;
};

/* Placeholder text quoted in messages at most. */
#define QUOTE_MAX 80

static const char sources_expected[] = "expected context.PATH, parents.STEP.PATH, item.PATH, "
                                       "item_index, env.NAME, task.id, task.step, task.attempt, "
                                       "task.callback_url or task.callback_token";

/* ---- compiling ------------------------------------------------------------------ */

static int is_seg_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

/* Room for one more element of `size` bytes in *arr (n used of *cap);
 * 0, or TK_ENOMEM. */
static int grow(void **arr, size_t n, size_t *cap, size_t size) {
  if (n < *cap) return 0;
  size_t c = *cap ? *cap * 2 : 4;
  void *grown = realloc(*arr, c * size);
  if (grown == NULL) return TK_ENOMEM;
  *arr = grown;
  *cap = c;
  return 0;
}

/* Append a part; 0, or TK_ENOMEM. */
static int add_part(tk__ph *t, part p, size_t *cap) {
  if (grow((void **)&t->parts, t->nparts, cap, sizeof p)) return TK_ENOMEM;
  t->parts[t->nparts++] = p;
  return 0;
}

/* Append a path segment; 0, or TK_ENOMEM. */
static int add_seg(tk__ph *t, seg s, size_t *cap) {
  if (grow((void **)&t->segs, t->nsegs, cap, sizeof s)) return TK_ENOMEM;
  t->segs[t->nsegs++] = s;
  return 0;
}

/* "{{...}}" as written from `at` (at most QUOTE_MAX bytes), for messages. */
static void fail_at(char *why, size_t whylen, const char *text, size_t len, size_t at,
                    size_t upto, const char *what) {
  size_t n = upto > at ? upto - at : len - at;
  const char *more = n > QUOTE_MAX ? "..." : "";
  if (n > QUOTE_MAX) n = QUOTE_MAX;
  if (why) snprintf(why, whylen, "placeholder \"%.*s%s\" (byte %zu): %s", (int)n, text + at, more,
                    at + 1, what);
}

/* Compile the placeholder whose "{{" is at text[at]; its "}}" ends at
 * *end. 0, TK_ESYNTAX (why), TK_ENOMEM. */
static int compile_one(tk__ph *t, size_t at, size_t *end, size_t *pcap, size_t *scap, char *why,
                       size_t whylen) {
  const char *s = t->text;
  size_t len = t->len, i = at + 2;
  while (i < len && (s[i] == ' ' || s[i] == '\t')) i++;
  /* A quoted literal: its bytes, verbatim. */
  if (i < len && s[i] == '"') {
    size_t q = i + 1;
    while (q < len && s[q] != '"') q++;
    if (q >= len) {
      fail_at(why, whylen, s, len, at, len, "unclosed quote (expected \"...\" then \"}}\")");
      return TK_ESYNTAX;
    }
    size_t k = q + 1;
    while (k < len && (s[k] == ' ' || s[k] == '\t')) k++;
    if (k + 1 >= len || s[k] != '}' || s[k + 1] != '}') {
      fail_at(why, whylen, s, len, at, k + 2 <= len ? k + 2 : len,
              "expected \"}}\" after the quoted text");
      return TK_ESYNTAX;
    }
    *end = k + 2;
    return add_part(t, (part){SRC_TEXT, i + 1, q - i - 1, 0, 0, 1}, pcap);
  }
  /* A reference: source, then segments. */
  size_t name = i;
  while (i < len && is_seg_char(s[i])) i++;
  size_t nlen = i - name;
  source src = nlen == 7 && memcmp(s + name, "context", 7) == 0   ? SRC_CONTEXT
               : nlen == 7 && memcmp(s + name, "parents", 7) == 0 ? SRC_PARENTS
               : nlen == 4 && memcmp(s + name, "item", 4) == 0    ? SRC_ITEM
               : nlen == 10 && memcmp(s + name, "item_index", 10) == 0 ? SRC_ITEM_INDEX
               : nlen == 3 && memcmp(s + name, "env", 3) == 0     ? SRC_ENV
               : nlen == 4 && memcmp(s + name, "task", 4) == 0    ? SRC_TASK
                                                                  : SRC_TEXT;
  /* The closing braces, for quoting the whole placeholder in messages. */
  const char *close = NULL;
  for (size_t k = i; k + 1 < len && close == NULL; k++)
    if (s[k] == '}' && s[k + 1] == '}') close = s + k;
  size_t upto = close ? (size_t)(close - s) + 2 : len;
  char what[256];
  if (nlen == 0 && i < len && s[i] == '}' && i + 1 < len && s[i + 1] == '}') {
    snprintf(what, sizeof what, "empty; %s", sources_expected);
    fail_at(why, whylen, s, len, at, upto, what);
    return TK_ESYNTAX;
  }
  if (src == SRC_TEXT) {
    snprintf(what, sizeof what, "unknown source \"%.*s\"; %s", (int)(nlen > 40 ? 40 : nlen),
             s + name, sources_expected);
    fail_at(why, whylen, s, len, at, upto, nlen ? what : sources_expected);
    return TK_ESYNTAX;
  }
  size_t first = t->nsegs;
  while (i < len && s[i] == '.') {
    size_t b = ++i;
    while (i < len && is_seg_char(s[i])) i++;
    if (i == b) {
      fail_at(why, whylen, s, len, at, upto,
              "expected a name after \".\" (letters, digits, '_' or '-')");
      return TK_ESYNTAX;
    }
    int rc = add_seg(t, (seg){b, i - b}, scap);
    if (rc) return rc;
  }
  while (i < len && (s[i] == ' ' || s[i] == '\t')) i++;
  if (i + 1 >= len || s[i] != '}' || s[i + 1] != '}') {
    if (close == NULL)
      fail_at(why, whylen, s, len, at, len, "unclosed (expected \"}}\")");
    else
      fail_at(why, whylen, s, len, at, upto,
              "unexpected character in a path: names are letters, digits, '_' or '-', "
              "joined by \".\"");
    return TK_ESYNTAX;
  }
  size_t nseg = t->nsegs - first;
  if (src == SRC_ENV && nseg != 1) {
    fail_at(why, whylen, s, len, at, i + 2, "env takes one name: {{env.NAME}}");
    return TK_ESYNTAX;
  }
  if (src == SRC_ITEM_INDEX && nseg != 0) {
    fail_at(why, whylen, s, len, at, i + 2,
            "item_index is a number and takes no path: {{item_index}}");
    return TK_ESYNTAX;
  }
  if (src == SRC_TASK) {
    const seg *g = nseg == 1 ? &t->segs[first] : NULL;
    int ok = g && ((g->len == 2 && memcmp(s + g->off, "id", 2) == 0) ||
                   (g->len == 4 && memcmp(s + g->off, "step", 4) == 0) ||
                   (g->len == 7 && memcmp(s + g->off, "attempt", 7) == 0) ||
                   (g->len == 12 && memcmp(s + g->off, "callback_url", 12) == 0) ||
                   (g->len == 14 && memcmp(s + g->off, "callback_token", 14) == 0));
    if (!ok) {
      fail_at(why, whylen, s, len, at, i + 2,
              "expected task.id, task.step, task.attempt, task.callback_url or "
              "task.callback_token");
      return TK_ESYNTAX;
    }
  }
  *end = i + 2;
  t->nrefs++;
  return add_part(t, (part){src, at, i + 2 - at, first, nseg, 0}, pcap);
}

int tk__ph_compile(const char *text, size_t len, tk__ph **out, char *why, size_t whylen) {
  *out = NULL;
  tk__ph *t = calloc(1, sizeof *t);
  if (t == NULL || (t->text = malloc(len + 1)) == NULL) {
    free(t);
    return TK_ENOMEM;
  }
  if (len) memcpy(t->text, text, len);
  t->text[len] = '\0';
  t->len = len;
  size_t pcap = 0, scap = 0, lit = 0, i = 0;
  int rc = 0;
  while (rc == 0 && i < len) {
    if (!(text[i] == '{' && i + 1 < len && text[i + 1] == '{')) {
      i++;
      continue;
    }
    if (i > lit) rc = add_part(t, (part){SRC_TEXT, lit, i - lit, 0, 0, 0}, &pcap);
    size_t end = i;
    if (rc == 0) rc = compile_one(t, i, &end, &pcap, &scap, why, whylen);
    i = lit = end;
  }
  if (rc == 0 && len > lit) rc = add_part(t, (part){SRC_TEXT, lit, len - lit, 0, 0, 0}, &pcap);
  if (rc) {
    if (rc == TK_ENOMEM && why) snprintf(why, whylen, "out of memory");
    tk__ph_free(t);
    return rc;
  }
  *out = t;
  return 0;
}

void tk__ph_free(tk__ph *t) {
  if (t == NULL) return;
  free(t->text);
  free(t->parts);
  free(t->segs);
  free(t);
}

size_t tk__ph_refs(const tk__ph *t) { return t->nrefs; }

int tk__ph_single(const tk__ph *t) { return t->nparts == 1 && t->parts[0].src != SRC_TEXT; }

/* ---- looking up ---------------------------------------------------------------- */

static const char *type_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER:
  case JSON_REAL: return "a number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  default: return "null";
  }
}

void tk__ph_member_names(json_t *obj, char *buf, size_t len) {
  size_t used = 0, n = 0;
  const char *key;
  json_t *v;
  buf[0] = '\0';
  json_object_foreach(obj, key, v) {
    (void)v;
    if (used >= len) break;
    int w = n < 8 ? snprintf(buf + used, len - used, "%s%s", n ? ", " : "", key)
                  : snprintf(buf + used, len - used, ", ...");
    if (w < 0) break;
    used += (size_t)w;
    if (++n > 8) break;
  }
  if (n == 0) snprintf(buf, len, "none");
}

/* Read a reference's segments from `root` (named root_name in messages):
 * *out borrowed. 0, or TK_ENOENT with why naming how far it got. */
static int walk(const tk__ph *t, const part *p, json_t *root, const char *root_name,
                json_t **out, char *why, size_t whylen) {
  const char *s = t->text;
  char path[256];
  snprintf(path, sizeof path, "%s", root_name);
  json_t *v = root;
  /* parents.STEP: say which parents there are when STEP is not one. */
  for (size_t k = 0; k < p->nseg; k++) {
    const seg *g = &t->segs[p->seg + k];
    char name[129];
    snprintf(name, sizeof name, "%.*s", (int)(g->len > 128 ? 128 : g->len), s + g->off);
    json_t *next = NULL;
    if (json_is_object(v)) {
      next = json_object_getn(v, s + g->off, g->len);
      if (next == NULL) {
        char names[160];
        tk__ph_member_names(v, names, sizeof names);
        if (p->src == SRC_PARENTS && k == 0)
          snprintf(why, whylen, "%.*s: this step has no parent \"%s\" (its parents: %s)",
                   (int)p->len, s + p->off, name, names);
        else
          snprintf(why, whylen, "%.*s: %s has no member \"%s\"", (int)p->len, s + p->off, path,
                   name);
        return TK_ENOENT;
      }
    } else if (json_is_array(v)) {
      size_t idx = 0, d = 0;
      for (; d < g->len && d < 10 && s[g->off + d] >= '0' && s[g->off + d] <= '9'; d++)
        idx = idx * 10 + (size_t)(s[g->off + d] - '0');
      if (d != g->len) {
        snprintf(why, whylen, "%.*s: %s is an array, and \"%s\" is not an index", (int)p->len,
                 s + p->off, path, name);
        return TK_ENOENT;
      }
      next = json_array_get(v, idx);
      if (next == NULL) {
        snprintf(why, whylen, "%.*s: %s has %zu elements, no [%s]", (int)p->len, s + p->off,
                 path, json_array_size(v), name);
        return TK_ENOENT;
      }
    } else {
      if (p->src == SRC_PARENTS && k == 1 && json_is_null(v))
        snprintf(why, whylen, "%.*s: %s is null (that step completed without results)",
                 (int)p->len, s + p->off, path);
      else
        snprintf(why, whylen, "%.*s: %s is %s, which has no member \"%s\"", (int)p->len,
                 s + p->off, path, type_name(v), name);
      return TK_ENOENT;
    }
    size_t used = strlen(path);
    snprintf(path + used, sizeof path - used, ".%s", name);
    v = next;
  }
  *out = v;
  return 0;
}

/* Reference part p's value: a new reference in *out. 0, TK_ENOENT (why),
 * TK_ENOMEM. */
static int lookup(const tk__ph *t, const part *p, const tk__ph_scope *sc, json_t **out, char *why,
                  size_t whylen) {
  const char *s = t->text;
  *out = NULL;
  if (p->src == SRC_ENV) {
    const seg *g = &t->segs[p->seg];
    char name[129];
    snprintf(name, sizeof name, "%.*s", (int)(g->len > 128 ? 128 : g->len), s + g->off);
    const char *v = sc->getenv ? sc->getenv(sc->env_ud, name) : getenv(name);
    if (v == NULL) {
      snprintf(why, whylen, "%.*s: the orchestrator's environment has no %s", (int)p->len,
               s + p->off, name);
      return TK_ENOENT;
    }
    *out = json_string_nocheck(v);
  } else if (p->src == SRC_TASK) {
    const seg *g = &t->segs[p->seg];
    char c = s[g->off];
    if (c == 'c') {
      /* callback_url (12 characters) or callback_token: only an http step
       * that waits for a callback has them (docs/callbacks.md). */
      const char *v = g->len == 12 ? sc->callback_url : sc->callback_token;
      if (v == NULL) {
        snprintf(why, whylen,
                 "%.*s: only an http step with callback = { timeout = ... } has a callback",
                 (int)p->len, s + p->off);
        return TK_ENOENT;
      }
      *out = json_string_nocheck(v);
    } else {
      *out = c == 'i' ? json_integer(sc->task_id)
             : c == 's' ? json_string_nocheck(sc->step ? sc->step : "")
                        : json_integer(sc->attempt);
    }
  } else {
    const char *name = input_member[p->src];
    json_t *root = json_object_get(sc->input, name);
    /* Only a map's instance has an item: elsewhere it is a mistake to
     * name, not a null to walk. */
    if (root == NULL && (p->src == SRC_ITEM || p->src == SRC_ITEM_INDEX)) {
      snprintf(why, whylen, "%.*s: this step is not an instance of a map (its input has no %s)",
               (int)p->len, s + p->off, name);
      return TK_ENOENT;
    }
    if (root == NULL) root = p->src == SRC_CONTEXT ? json_null() : json_object();
    else json_incref(root);
    json_t *v = NULL;
    int rc = walk(t, p, root, name, &v, why, whylen);
    if (rc == 0) *out = json_incref(v);
    json_decref(root);
    if (rc) return rc;
  }
  if (*out == NULL) {
    snprintf(why, whylen, "out of memory");
    return TK_ENOMEM;
  }
  return 0;
}

int tk__ph_value(const tk__ph *t, const tk__ph_scope *sc, json_t **out, char *why,
                 size_t whylen) {
  return lookup(t, &t->parts[0], sc, out, why, whylen);
}

/* ---- writing ------------------------------------------------------------------- */

/* Append bytes, percent-encoded unless unreserved (RFC 3986 §2.3), so that
 * a value cannot add a path segment, a query parameter or a fragment. */
static void add_encoded(tk__buf *b, const char *p, size_t n, tk__ph_encoding enc) {
  if (enc == TK__PH_PLAIN) {
    tk__buf_add(b, p, n);
    return;
  }
  static const char hex[] = "0123456789ABCDEF";
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)p[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      tk__buf_addc(b, (char)c);
    } else {
      char e[3] = {'%', hex[c >> 4], hex[c & 15]};
      tk__buf_add(b, e, 3);
    }
  }
}

int tk__ph_expand(const tk__ph *t, const tk__ph_scope *sc, tk__ph_encoding enc, tk__buf *out,
                  char *why, size_t whylen) {
  for (size_t i = 0; i < t->nparts; i++) {
    const part *p = &t->parts[i];
    if (p->src == SRC_TEXT) {
      /* Literal text is the template author's: written as it is. */
      tk__buf_add(out, t->text + p->off, p->len);
      continue;
    }
    json_t *v;
    int rc = lookup(t, p, sc, &v, why, whylen);
    if (rc) return rc;
    char num[64];
    const char *text = NULL;
    size_t n = 0;
    switch (json_typeof(v)) {
    case JSON_STRING:
      text = json_string_value(v);
      n = json_string_length(v);
      break;
    case JSON_INTEGER:
      n = (size_t)snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
      text = num;
      break;
    case JSON_REAL: {
      /* JSON's own spelling of the number (shortest round trip). */
      char *d = json_dumps(v, JSON_ENCODE_ANY);
      snprintf(num, sizeof num, "%s", d ? d : "");
      free(d);
      text = num;
      n = strlen(num);
      break;
    }
    case JSON_TRUE: text = "true", n = 4; break;
    case JSON_FALSE: text = "false", n = 5; break;
    default:
      snprintf(why, whylen,
               "%.*s is %s; only a string, a number or a boolean can be written into text",
               (int)p->len, t->text + p->off, type_name(v));
      json_decref(v);
      return TK_EINVAL;
    }
    add_encoded(out, text, n, enc);
    json_decref(v);
  }
  if (out->oom) {
    snprintf(why, whylen, "out of memory");
    return TK_ENOMEM;
  }
  return 0;
}

void tk__ph_shape(const tk__ph *t, const char *stand_in, tk__buf *out) {
  for (size_t i = 0; i < t->nparts; i++) {
    const part *p = &t->parts[i];
    if (p->src == SRC_TEXT && !p->quoted) tk__buf_add(out, t->text + p->off, p->len);
    else tk__buf_adds(out, stand_in);
  }
}

/* ---- JSON templates ---------------------------------------------------------------- */

/* Fill one string of a JSON template. */
static int fill_string(json_t *v, const tk__ph_scope *sc, json_t **out, char *why,
                       size_t whylen) {
  tk__ph *t;
  int rc = tk__ph_compile(json_string_value(v), json_string_length(v), &t, why, whylen);
  if (rc) return rc;
  if (t->nparts == 0 || (t->nparts == 1 && !t->parts[0].quoted && t->nrefs == 0)) {
    *out = json_incref(v); /* plain text */
  } else if (tk__ph_single(t)) {
    rc = tk__ph_value(t, sc, out, why, whylen);
  } else {
    tk__buf b = {0};
    rc = tk__ph_expand(t, sc, TK__PH_PLAIN, &b, why, whylen);
    if (rc == 0) {
      /* Not json_stringn_nocheck: a value may hold bytes that are not
       * UTF-8, and JSON text must be. */
      *out = json_stringn(b.p ? b.p : "", b.len);
      if (*out == NULL) {
        snprintf(why, whylen, "%s: the filled text is not valid UTF-8", json_string_value(v));
        rc = TK_EINVAL;
      }
    }
    tk__buf_free(&b);
  }
  tk__ph_free(t);
  return rc;
}

int tk__ph_fill_json(json_t *v, const tk__ph_scope *sc, json_t **out, char *why, size_t whylen) {
  *out = NULL;
  int rc = 0;
  if (json_is_string(v)) return fill_string(v, sc, out, why, whylen);
  if (json_is_object(v)) {
    json_t *copy = json_object();
    const char *key;
    json_t *m;
    json_object_foreach(v, key, m) {
      json_t *f;
      if (copy == NULL) break;
      if ((rc = tk__ph_fill_json(m, sc, &f, why, whylen)) != 0) break;
      if (json_object_set_new_nocheck(copy, key, f) != 0) rc = TK_ENOMEM;
      if (rc) break;
    }
    if (copy == NULL) rc = TK_ENOMEM;
    if (rc) json_decref(copy);
    else *out = copy;
  } else if (json_is_array(v)) {
    json_t *copy = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(v, i, m) {
      json_t *f;
      if (copy == NULL) break;
      if ((rc = tk__ph_fill_json(m, sc, &f, why, whylen)) != 0) break;
      if (json_array_append_new(copy, f) != 0) rc = TK_ENOMEM;
      if (rc) break;
    }
    if (copy == NULL) rc = TK_ENOMEM;
    if (rc) json_decref(copy);
    else *out = copy;
  } else {
    *out = json_incref(v);
  }
  if (rc == TK_ENOMEM) snprintf(why, whylen, "out of memory");
  return rc;
}
