/* Times as the commands print them, relative to now. */
#include "cli.h"

#include <stdio.h>

#include <jansson.h>

#include <tasker/duration.h>

#define DAY_MS 86400000

const char *cli_relative(const struct json_t *at, int64_t now, int precise, char *buf,
                         size_t len) {
  if (!json_is_integer(at)) return "-";
  int64_t t = json_integer_value(at), d = t > now ? t - now : now - t;
  char amount[32];
  if (precise && d < DAY_MS) {
    tk_duration_format(d, amount, sizeof amount);
  } else if (d < 1000) {
    snprintf(buf, len, t > now ? "in <1s" : "now");
    return buf;
  } else {
    static const struct {
      int64_t ms;
      char unit;
    } units[] = {{DAY_MS, 'd'}, {3600000, 'h'}, {60000, 'm'}, {1000, 's'}};
    size_t u = 0;
    while (u < 3 && d < units[u].ms) u++;
    snprintf(amount, sizeof amount, "%lld%c", (long long)(d / units[u].ms), units[u].unit);
  }
  snprintf(buf, len, t > now ? "in %s" : "%s ago", amount);
  return buf;
}
