/* The builtin choose (DESIGN §17, docs/handlers.md): a decision step's
 * branches, looked up in `cases` by the text of one value of the step's
 * input, so that the common decision needs no handler of its own:
 *
 *   { kind = "builtin", name = "choose", value = "{{parents.score.risk}}",
 *     cases = { high = ["review"], low = ["approve"] }, default = ["review"] }
 *
 * The value is looked up, never evaluated. It runs as a kind of its own
 * (registry.c gives it to a builtin spec named "choose"; template time is
 * builtin.c's) because it reads the step's input, which the other
 * builtins never need: the engine reads an input only for a kind that
 * takes one, and a noop step stays as cheap as it was. */
#include "handlers/handler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/error.h>

#include "handlers/placeholder.h"

/* A value quoted in messages at most (bytes). */
#define SHOWN_MAX 80

/* Fail the attempt permanently: what the same input would do again. */
#define REFUSE(out, ...) tk__handler_fail(out, TK_HANDLER_PERMANENT, "builtin choose: " __VA_ARGS__)

/* The environment as a choice sees it: never there, and asked for (a
 * secret's value would show in the results or the error). */
static const char *no_env(void *asked, const char *name) {
  (void)name;
  *(int *)asked = 1;
  return NULL;
}

/* The value of the spec's one placeholder in the attempt's input, a new
 * reference; NULL with the attempt failed, saying why. */
static json_t *look_up(const char *value, const tk_handler_call *call, tk_handler_result *out) {
  char why[sizeof out->error - 32];
  tk__ph *t = NULL;
  int rc = tk__ph_compile(value, strlen(value), &t, why, sizeof why);
  if (rc == TK_ENOMEM) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "builtin choose: out of memory");
    return NULL;
  }
  if (rc != 0 || !tk__ph_single(t)) {
    if (rc == 0)
      snprintf(why, sizeof why, "\"%.*s\" is not one placeholder such as {{parents.score.risk}}",
               SHOWN_MAX, value);
    REFUSE(out, "value: %s", why);
    tk__ph_free(t);
    return NULL;
  }
  json_error_t jerr;
  json_t *input = call->input ? json_loads(call->input, 0, &jerr) : NULL;
  json_t *v = NULL;
  if (call->input && input == NULL)
    tk__handler_fail(out, TK_HANDLER_RETRY, "builtin choose: cannot read the step's input: %s",
                     jerr.text);
  else {
    int env = 0;
    tk__ph_scope sc = {input, call->task_id, call->step, call->attempt, no_env, &env, NULL, NULL};
    rc = tk__ph_value(t, &sc, &v, why, sizeof why);
    if (rc == TK_ENOMEM) tk__handler_fail(out, TK_HANDLER_RETRY, "builtin choose: %s", why);
    else if (env)
      REFUSE(out, "value: %s: the orchestrator's environment cannot choose (a secret would show "
             "in the step's results or error)", value);
    else if (rc != 0) REFUSE(out, "%s", why);
  }
  json_decref(input);
  tk__ph_free(t);
  return v;
}

/* v as a message shows it: a string quoted, anything else as JSON, each
 * cut after SHOWN_MAX bytes. */
static void show(json_t *v, char *buf, size_t cap) {
  if (json_is_string(v)) {
    tk__quote_start(json_string_value(v), json_string_length(v), SHOWN_MAX, 1, buf, cap);
    return;
  }
  char *d = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
  snprintf(buf, cap, "%.*s%s", SHOWN_MAX, d ? d : "", d && strlen(d) > SHOWN_MAX ? "..." : "");
  free(d);
}

/* The text a case is named by: a string's characters, a number's or a
 * boolean's JSON spelling (malloc'd); NULL for null, an object or an
 * array, which have none. */
static char *text_of(json_t *v) {
  if (json_is_string(v)) return strdup(json_string_value(v));
  if (json_is_number(v) || json_is_boolean(v)) return json_dumps(v, JSON_ENCODE_ANY);
  return NULL;
}

/* One attempt: {"BRANCHES_KEY": the chosen case's step names}. */
static void run(const tk__handler_step *step, const tk_handler_call *call,
                tk_handler_result *out) {
  json_t *spec = step->spec;
  const char *value = json_string_value(json_object_get(spec, "value"));
  if (value == NULL) {
    REFUSE(out, "the handler has no value (write value = \"{{parents.STEP.KEY}}\")");
    return;
  }
  json_t *v = look_up(value, call, out);
  if (v == NULL) return;
  char shown[SHOWN_MAX * 4 + 8];
  show(v, shown, sizeof shown);
  char *text = text_of(v);
  json_decref(v);
  if (text == NULL) {
    REFUSE(out, "%s is %s; a case is chosen by a string, a number or a boolean", value, shown);
    return;
  }
  json_t *cases = json_object_get(spec, "cases");
  json_t *chosen = json_object_get(cases, text);
  const char *which = "the case";
  if (chosen == NULL) {
    chosen = json_object_get(spec, "default");
    which = "default";
  }
  if (chosen == NULL) {
    char names[200];
    tk__ph_member_names(cases, names, sizeof names);
    REFUSE(out, "%s is %s, which is none of the cases (%s), and there is no default", value,
           shown, names);
  } else if (!json_is_array(chosen)) {
    REFUSE(out, "%s for %s is not an array of step names", which, shown);
  } else {
    const char *key = json_string_value(json_object_get(spec, "branches_key"));
    json_t *results = json_pack("{sO}", key ? key : "branches", chosen);
    out->results = results ? json_dumps(results, JSON_COMPACT) : NULL;
    json_decref(results);
    if (out->results == NULL)
      tk__handler_fail(out, TK_HANDLER_RETRY, "builtin choose: out of memory");
  }
  free(text);
}

const tk__handler_kind tk__choose_kind = {
    .version = TK__HANDLER_KIND_VERSION,
    .name = "builtin",
    .takes_input = 1,
    .run = run,
};
