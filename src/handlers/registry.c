/* The handler kinds of this build, and the one place a spec's kind is
 * turned into its functions: at template time (tk__handler_spec_read) and
 * at run time (tk__handler_kind_of). A new kind is one line here. */
#include "handlers/handler.h"

#include <stdio.h>
#include <string.h>

static const tk__handler_kind *const kinds[] = {
    &tk__builtin_kind,
    &tk__command_kind,
    &tk__function_kind,
    &tk__http_kind,
    &tk__worker_kind,
    &tk__wait_kind,
    &tk__task_kind,
};

#define NKINDS (sizeof kinds / sizeof kinds[0])
_Static_assert(NKINDS + 1 < TK__HANDLER_KINDS_MAX,
               "an engine's slots: one per kind, the builtin choose's and the stand-in");

const tk__handler_kind *tk__handler_kind_find(const char *name) {
  for (size_t i = 0; i < NKINDS; i++)
    if (kinds[i]->version == TK__HANDLER_KIND_VERSION && strcmp(kinds[i]->name, name) == 0)
      return kinds[i];
  return NULL;
}

/* The stand-in's run: the stored spec names a kind this build lacks. */
static void run_unknown(const tk__handler_step *step, const tk_handler_call *call,
                        tk_handler_result *out) {
  (void)call;
  const char *kind = json_string_value(json_object_get(step->spec, "kind"));
  tk__handler_fail(out, TK_HANDLER_PERMANENT,
                   "handler kind \"%s\" is not known to this orchestrator (tasker %s)",
                   kind ? kind : "", TK_VERSION);
}

/* Never validates: it only runs specs stored by another build. */
static const tk__handler_kind unknown_kind = {
    .version = TK__HANDLER_KIND_VERSION,
    .name = "unknown",
    .run = run_unknown,
};

const tk__handler_kind *tk__handler_kind_of(json_t *spec) {
  const char *name = json_string_value(json_object_get(spec, "kind"));
  const tk__handler_kind *k = name ? tk__handler_kind_find(name) : NULL;
  /* The builtin choose takes the step's input, no other builtin does
   * (builtin_choose.c). */
  const char *builtin = json_string_value(json_object_get(spec, "name"));
  if (k == &tk__builtin_kind && builtin && strcmp(builtin, "choose") == 0) return &tk__choose_kind;
  return k ? k : &unknown_kind;
}

/* "builtin, command, function, http, worker or wait" (quoted: "\"builtin\", ..."). */
static void kind_list(char *buf, size_t len, int quoted) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < NKINDS && used < len; i++) {
    const char *sep = i == 0 ? "" : i + 1 == NKINDS ? " or " : ", ";
    int n = snprintf(buf + used, len - used, quoted ? "%s\"%s\"" : "%s%s", sep, kinds[i]->name);
    if (n < 0) break;
    used += (size_t)n;
  }
}

int tk__handler_spec_read(const tk__handler_site *site, const tk_toml_value *h, json_t **out) {
  const tk__spec_where *w = &site->where;
  char list[160];
  tk__complaint why;
  if (tk__expect_table(h, "a table such as { kind = \"command\", argv = [...] }", &why) != 0)
    return tk__spec_refuse(w, NULL, &why);
  const tk_toml_value *kv = tk_toml_get(h, "kind");
  if (kv == NULL) {
    kind_list(list, sizeof list, 1);
    return tk__spec_fail(w, h, "kind", "missing: expected kind = %s", list);
  }
  /* The kind as a choice among this build's kinds. */
  const char *names[NKINDS + 1];
  for (size_t i = 0; i < NKINDS; i++) names[i] = kinds[i]->name;
  names[NKINDS] = NULL;
  kind_list(list, sizeof list, 0);
  const tk__key key = {.name = "kind", .kind = TK__K_CHOICE, .choices = names, .allowed = list};
  json_t *name = NULL;
  int rc = tk__convert_json(&key, kv, &name, &why);
  if (rc == TK_ECONFIG) return tk__spec_refuse(w, "kind", &why);
  if (rc != 0) return tk_err_set(w->err, rc, "out of memory reading %s", w->file);
  const tk__handler_kind *kind = tk__handler_kind_find(json_string_value(name));
  json_decref(name);
  json_t *spec = json_object();
  if (spec == NULL) return tk_err_set(w->err, TK_ENOMEM, "out of memory reading %s", w->file);
  rc = kind->validate(site, h, spec);
  if (rc == 0 && site->batch != NULL && kind->run_batch == NULL) {
    tk__spec_where step = {w->file, site->step, w->err};
    rc = tk__spec_fail(&step, site->batch, "batch",
                       "a %s handler does not take batches yet: use the builtin \"batch\" or a "
                       "function handler (tk_engine_register_batch)",
                       kind->name);
  }
  if (rc != 0) {
    json_decref(spec);
    return rc;
  }
  *out = spec;
  return 0;
}
