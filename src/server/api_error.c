/* The API's error shape (docs/api.md "Conventions"). */
#include "server/request_parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int tk__api_fail(tk__api_error *e, int status, const char *code, const char *param,
                 const char *fmt, ...) {
  e->status = status;
  e->code = code;
  snprintf(e->param, sizeof e->param, "%s", param ? param : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  return -1;
}

/* A JSON string of text, whose bytes outside ASCII become '?' when it is
 * not valid UTF-8 (a message may quote a client's bytes, which JSON
 * cannot carry as they are). */
static json_t *utf8_string(const char *text) {
  json_t *j = json_string(text);
  if (j != NULL) return j;
  char copy[TK_ERR_MSG_MAX];
  snprintf(copy, sizeof copy, "%s", text);
  for (char *p = copy; *p; p++)
    if ((unsigned char)*p >= 0x80) *p = '?';
  return json_string(copy);
}

char *tk__api_error_json(const tk__api_error *e) {
  json_t *inner = json_pack("{s:i, s:s, s:o}", "status", e->status, "code", e->code, "message",
                            utf8_string(e->message));
  if (inner == NULL) return NULL;
  if (e->param[0] != '\0') json_object_set_new(inner, "param", utf8_string(e->param));
  json_t *outer = json_pack("{s:o}", "error", inner);
  char *text = outer ? json_dumps(outer, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(outer);
  return text;
}
