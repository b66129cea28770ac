/* Events (JSON lines, DESIGN §11) and log lines, through the sinks. */
#include "engine/engine_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void tk__engine_log(tk_engine *e, tk_log_level level, const char *fmt, ...) {
  if (e->on_log == NULL) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  e->on_log(level, msg, e->log_ud);
}

void tk__engine_event(tk_engine *e, const char *type, int64_t now, json_t *fields) {
  if (e->on_event == NULL) {
    json_decref(fields);
    return;
  }
  json_t *ev = json_pack("{s:s, s:I, s:s}", "type", type, "at", (json_int_t)now, "orchestrator", e->id);
  json_object_update(ev, fields);
  json_decref(fields);
  char *line = json_dumps(ev, JSON_COMPACT);
  json_decref(ev);
  if (line) e->on_event(line, e->event_ud);
  free(line);
}
