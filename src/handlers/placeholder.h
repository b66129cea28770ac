/* Placeholders: how a handler spec takes values from the task (the http
 * handler's method, URL, query, headers and body, the builtin choose's
 * value; docs/handlers.md, "Placeholders"). The grammar, whole:
 *
 *   text        = *( literal / placeholder )
 *   literal     = any bytes; "{{" always begins a placeholder
 *   placeholder = "{{" *WS ( reference / quoted ) *WS "}}"      WS: space, tab
 *   reference   = "context" *( "." segment )
 *               / "parents" *( "." segment )
 *               / "item" *( "." segment )
 *               / "item_index"
 *               / "env" "." segment
 *               / "task" "." ( "id" / "step" / "attempt" / "callback_url"
 *                              / "callback_token" )
 *   segment     = 1*( ALPHA / DIGIT / "_" / "-" )
 *   quoted      = DQUOTE *( any byte but DQUOTE ) DQUOTE        {{"{{"}} is "{{"
 *
 * context.a.b is member b of member a of the task's context; a segment of
 * digits indexes an array (an object's member of that name otherwise).
 * parents.STEP.a is member a of the results of parent step STEP. In an
 * instance of a map step (DESIGN §17), item.a is member a of its element
 * and item_index its position (0 for the first); elsewhere they are not
 * there. env.NAME is the orchestrator's environment variable NAME, read
 * when the attempt runs (so a secret need not be stored in the template
 * or the task).
 * task.id, task.step and task.attempt are the attempt's own;
 * task.callback_url and task.callback_token the attempt's callback (an
 * http step that waits for one, docs/callbacks.md; a secret: redacted).
 *
 * Values are looked up, never evaluated: there is no expression, call or
 * shell. A value that is not there is an error that names the placeholder
 * and how far its path got. */
#ifndef TASKER_HANDLERS_PLACEHOLDER_H
#define TASKER_HANDLERS_PLACEHOLDER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "core/buf.h"

/* A compiled text: literals and references, in order. */
typedef struct tk__ph tk__ph;

/* What references are resolved against, per attempt. */
typedef struct tk__ph_scope {
  /* {"context": ..., "parents": {STEP: results}}, and for a map's
   * instance "item": ELEMENT, "item_index": N; NULL: {} */
  json_t *input;
  int64_t task_id;
  const char *step;
  int attempt;
  /* The environment: NULL reads the process's (getenv). */
  const char *(*getenv)(void *ud, const char *name);
  void *env_ud;
  /* The attempt's callback URL and token, or NULL: it has none. */
  const char *callback_url, *callback_token;
} tk__ph_scope;

/* How a value's text is written into the result. */
typedef enum tk__ph_encoding {
  TK__PH_PLAIN, /* as it is (a header value; a text body) */
  TK__PH_URL    /* percent-encoded, all but A-Z a-z 0-9 - . _ ~ (a URL's path or query) */
} tk__ph_encoding;

/* Compile text[0..len) into *out. 0; TK_ESYNTAX with why (naming the
 * placeholder and what was expected) for text that breaks the grammar;
 * TK_ENOMEM. */
int tk__ph_compile(const char *text, size_t len, tk__ph **out, char *why, size_t whylen);

void tk__ph_free(tk__ph *t);

/* How many references t holds (0: it is plain text). */
size_t tk__ph_refs(const tk__ph *t);

/* Whether t is one reference and nothing else ("{{context.order}}"): its
 * value can be inserted as it is, typed, rather than as text. */
int tk__ph_single(const tk__ph *t);

/* The value of a single-reference t (tk__ph_single), a new reference.
 * 0; TK_ENOENT with why when it is not there; TK_ENOMEM. */
int tk__ph_value(const tk__ph *t, const tk__ph_scope *sc, json_t **out, char *why,
                 size_t whylen);

/* Append t to out with each reference's value as text, encoded by enc: a
 * string as its bytes, a number or boolean as in JSON. 0; TK_ENOENT with
 * why for a value that is not there; TK_EINVAL with why for null, an
 * object or an array (they have no text); TK_ENOMEM. */
int tk__ph_expand(const tk__ph *t, const tk__ph_scope *sc, tk__ph_encoding enc, tk__buf *out,
                  char *why, size_t whylen);

/* Append t's shape to out: its literal text, and `stand_in` for each
 * placeholder (a quoted one included: its text is a value's). What a
 * template-time check of the literal structure reads. */
void tk__ph_shape(const tk__ph *t, const char *stand_in, tk__buf *out);

/* "a, b" of obj's member names (the first 8, then "..."), for messages;
 * "none" when it has none. */
void tk__ph_member_names(json_t *obj, char *buf, size_t len);

/* A copy of the JSON template v with every string's placeholders filled:
 * a string that is one reference becomes its value, typed (an object
 * stays an object); any other string gets the text of its values (JSON
 * escaping is the encoder's when the copy is written out). Members' names
 * are copied as they are. 0 with *out a new reference; TK_ESYNTAX,
 * TK_ENOENT or TK_EINVAL with why; TK_ENOMEM. */
int tk__ph_fill_json(json_t *v, const tk__ph_scope *sc, json_t **out, char *why, size_t whylen);

#endif
