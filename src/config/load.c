/* Layering: built-in defaults -> config file -> environment overlay ->
 * --set flags, later wins (DESIGN §7). */
#include "config/apply.h"

#include <stdlib.h>
#include <string.h>

#include "toml/format.h"

enum { LAYER_FILE = 1, LAYER_OVERLAY = 2, LAYER_SETS = 3 };

/* Apply a parsed layer, whose values come from `name` (a path or a --set
 * text), then free it. */
static int apply_doc(tk_config *c, tk_toml_doc *doc, tk_config_origin_kind kind,
                     const char *name, unsigned layer, tk_err *err) {
  tk__layer L = {c, {kind, NULL, 0, 0, layer}, err};
  int rc;
  if ((L.where.file = tk__config_strdup(c, name, strlen(name))) == NULL)
    rc = tk_err_set(err, TK_ENOMEM, "out of memory reading %s", name);
  else
    rc = tk__apply_layer(&L, tk_toml_root(doc));
  tk_toml_free(doc);
  return rc;
}

/* Parse the file at path and apply it as `layer`. *found is set to 0
 * (and 0 returned) when the file does not exist. */
static int apply_file(tk_config *c, const char *path, unsigned layer, int *found,
                      tk_err *err) {
  tk_toml_doc *doc = NULL;
  int rc = tk_toml_parse_file(path, &doc, err);
  *found = rc != TK_ENOENT;
  if (rc == TK_ENOENT) return 0;
  if (rc) return rc;
  return apply_doc(c, doc, TK_CONFIG_FILE, path, layer, err);
}

/* An environment name becomes part of a path, so it may not climb out of
 * the environments directory. */
static int valid_env(const char *s) {
  if (s[0] == '.') return 0;
  for (; *s; s++)
    if (*s != '.' && !tk__is_name_char(*s)) return 0;
  return 1;
}

/* environments/ENV.toml beside `main` (a file path, may be NULL). */
static char *overlay_path(const char *main, const char *env) {
  const char *slash = main ? strrchr(main, '/') : NULL;
  size_t dir = slash ? (size_t)(slash - main) + 1 : 0;
  size_t len = dir + strlen("environments/") + strlen(env) + strlen(".toml") + 1;
  char *p = malloc(len);
  if (p == NULL) return NULL;
  memcpy(p, main, dir);
  strcpy(p + dir, "environments/");
  strcat(p, env);
  strcat(p, ".toml");
  return p;
}

static int apply_overlay(tk_config *c, const char *main, const char *env, tk_err *err) {
  if (!valid_env(env))
    return tk_err_set(err, TK_ECONFIG,
                      "environment \"%s\": a name must use only letters, digits, \"_\", \"-\" "
                      "and \".\", and not start with \".\"",
                      env);
  char *path = overlay_path(main, env);
  if (path == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory");
  int found;
  int rc = apply_file(c, path, LAYER_OVERLAY, &found, err);
  if (rc == 0 && !found)
    rc = tk_err_set(err, TK_ECONFIG, "environment \"%s\": overlay file %s not found", env, path);
  free(path);
  return rc;
}

/* A dotted run of bare keys: "backoff.profiles.payments.max_delay". */
static int valid_set_key(const char *k, size_t len) {
  if (len == 0 || k[0] == '.' || k[len - 1] == '.') return 0;
  for (size_t i = 0; i < len; i++)
    if (k[i] == '.' ? k[i + 1] == '.' : !tk__is_name_char(k[i])) return 0;
  return 1;
}

/* The flag "KEY=VALUE" read as a one-line document, so that positions in
 * messages are columns of the flag: VALUE as TOML when it is a TOML value,
 * else as a string, so that `--set backoff.jitter=full` needs no quotes.
 * A value with a line break is always a string, so a flag can never set a
 * second key. */
static int parse_set(const char *arg, size_t key_len, tk_toml_doc **doc, tk_err *err) {
  size_t head = key_len + 1; /* "KEY=" */
  const char *value = arg + head;
  size_t vlen = strlen(value);
  int rc = TK_ESYNTAX;
  if (strpbrk(value, "\r\n") == NULL) rc = tk_toml_parse(arg, head + vlen, NULL, doc, err);
  if (rc != TK_ESYNTAX) return rc;
  size_t cap = head + 6 * vlen + 3;
  char *text = malloc(cap);
  if (text == NULL) return TK_ENOMEM;
  memcpy(text, arg, head);
  int n = tk__toml_format_string(value, vlen, text + head, cap - head);
  rc = tk_toml_parse(text, head + (size_t)n, NULL, doc, NULL);
  free(text);
  return rc;
}

static int apply_set(tk_config *c, const char *arg, unsigned layer, tk_err *err) {
  const char *eq = strchr(arg, '=');
  if (eq == NULL) return tk_err_set(err, TK_ECONFIG, "--set %s: expected KEY=VALUE", arg);
  size_t key_len = (size_t)(eq - arg);
  if (!valid_set_key(arg, key_len))
    return tk_err_set(err, TK_ECONFIG,
                      "--set %s: invalid key \"%.*s\": expected a dotted name such as "
                      "backoff.max_delay",
                      arg, (int)key_len, arg);
  tk_toml_doc *doc = NULL;
  tk_err why;
  tk_err_clear(&why);
  int rc = parse_set(arg, key_len, &doc, &why);
  if (rc == TK_ENOMEM) return tk_err_set(err, rc, "out of memory");
  if (rc) return tk_err_set(err, TK_ECONFIG, "--set %s: invalid value: %s", arg, why.msg);
  return apply_doc(c, doc, TK_CONFIG_SET, arg, layer, err);
}

static int apply_sources(tk_config *c, const tk_config_source *src, tk_err *err) {
  const char *main = src->config_path ? src->config_path : src->default_path;
  int rc, found = 0;
  if (main != NULL) {
    if ((rc = apply_file(c, main, LAYER_FILE, &found, err))) return rc;
    if (!found && src->config_path != NULL)
      return tk_err_set(err, TK_ENOENT, "config file %s not found", main);
  }
  if (src->env_name != NULL && src->env_name[0] != '\0' &&
      (rc = apply_overlay(c, main, src->env_name, err)))
    return rc;
  for (int i = 0; i < src->nsets; i++)
    if ((rc = apply_set(c, src->sets[i], LAYER_SETS + (unsigned)i, err))) return rc;
  return 0;
}

int tk_config_load(const tk_config_source *src, tk_config **out, tk_err *err) {
  *out = NULL;
  tk_config *c = calloc(1, sizeof *c);
  if (c == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory");
  int rc = tk__config_init_defaults(c);
  if (rc) rc = tk_err_set(err, rc, "out of memory");
  if (rc == 0 && src != NULL) rc = apply_sources(c, src, err);
  if (rc == 0) rc = tk__config_finish(c, err);
  if (rc) {
    tk_config_free(c);
    return rc;
  }
  *out = c;
  return 0;
}
