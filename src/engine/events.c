/* Typed events to the observers (DESIGN §11) and log lines, through the sinks. */
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

void tk__engine_emit(tk_engine *e, tk_event *ev) {
  ev->orchestrator = e->id;
  e->events_built++;
  for (int i = 0; i < e->nobservers; i++)
    if (e->observers[i].obs.interest & TK_EV_BIT(ev->type))
      e->observers[i].obs.on_event(ev, e->observers[i].ud);
}

int tk_engine_observe(tk_engine *e, const tk_observer *obs, void *ud, tk_err *err) {
  if (obs == NULL || obs->version != TK_OBSERVER_VERSION || obs->on_event == NULL)
    return tk_err_set(err, TK_EINVAL, "observer: version %d (expected %d) or no on_event",
                      obs ? obs->version : 0, TK_OBSERVER_VERSION);
  if (e->nobservers == TK__MAX_OBSERVERS)
    return tk_err_set(err, TK_ENOMEM, "observer: at most %d per engine", TK__MAX_OBSERVERS);
  e->observers[e->nobservers].obs = *obs;
  e->observers[e->nobservers].ud = ud;
  e->nobservers++;
  e->interest |= obs->interest & TK_EV_ALL;
  return 0;
}
