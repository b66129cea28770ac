/* The rules for a schedule's values (def.h): shared by the configuration
 * and tk_schedule_check, calling neither. */
#include "schedule/def.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include <tasker/cron.h>

#include "schedule/tz.h"

const char *tk__schedule_missed_name(tk_schedule_missed m) {
  return m == TK_MISSED_CATCH_UP ? "catch_up" : "skip";
}

int tk__schedule_missed_parse(const char *text, tk_schedule_missed *out) {
  if (strcmp(text, "skip") == 0) *out = TK_MISSED_SKIP;
  else if (strcmp(text, "catch_up") == 0) *out = TK_MISSED_CATCH_UP;
  else return TK_EINVAL;
  return 0;
}

int tk__schedule_name_check(const char *name, tk_err *err) {
  size_t n = name ? strlen(name) : 0;
  if (n == 0 || n > TK_SCHEDULE_NAME_MAX)
    return tk_err_set(err, TK_EINVAL, "schedule name \"%s\": expected 1-%d characters",
                      name ? name : "", TK_SCHEDULE_NAME_MAX);
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '-' || c == '.'))
      return tk_err_set(err, TK_EINVAL, "schedule name \"%s\": character %zu ('%c') is not "
                        "allowed: expected letters, digits, '_', '-' or '.'", name, i + 1, c);
  }
  return 0;
}

int tk__schedule_context_check(const char *text, tk_err *err) {
  json_error_t jerr;
  json_t *v = json_loads(text ? text : "{}", JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
  if (v == NULL)
    return tk_err_set(err, TK_EINVAL, "context: invalid JSON at line %d, column %d: %s",
                      jerr.line, jerr.column, jerr.text);
  int ok = json_is_object(v);
  json_decref(v);
  return ok ? 0 : tk_err_set(err, TK_EINVAL, "context %s: expected a JSON object such as "
                             "{\"day\": \"today\"}", text);
}


int tk_schedule_zone_check(const char *zone, tk_err *err) {
  if (zone == NULL) return 0;
  if (*zone == '\0')
    return tk_err_set(err, TK_EINVAL, "time zone \"\": expected a tz database name such as "
                      "\"Europe/Berlin\" (leave the zone out for UTC)");
  tk__tz z;
  int rc = tk__tz_load(zone, &z, err);
  tk__tz_free(&z);
  return rc;
}
