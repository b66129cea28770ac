/* Times as the commands print them: relative to now, and in UTC. */
#include "cli.h"

#include <stdio.h>
#include <time.h>

#include <jansson.h>

#include <tasker/duration.h>

#define MINUTE_MS 60000
#define HOUR_MS 3600000
#define DAY_MS 86400000

/* d (>= 1s) by its largest whole unit: "12s", "3m", "5h", "2d". */
static void largest_unit(int64_t d, char *out, size_t len) {
  static const struct {
    int64_t ms;
    char unit;
  } units[] = {{DAY_MS, 'd'}, {HOUR_MS, 'h'}, {MINUTE_MS, 'm'}, {1000, 's'}};
  size_t u = 0;
  while (u < 3 && d < units[u].ms) u++;
  snprintf(out, len, "%lld%c", (long long)(d / units[u].ms), units[u].unit);
}

/* d as precisely as a wait of that length is worth: the exact duration
 * below a minute ("1.5s", "350ms"), whole seconds below a day ("58m51s"),
 * days and hours beyond ("33d16h", "2d"). */
static void precise_amount(int64_t d, char *out, size_t len) {
  if (d < MINUTE_MS) {
    tk_duration_format(d, out, len);
  } else if (d < DAY_MS) {
    tk_duration_format(d / 1000 * 1000, out, len);
  } else if (d % DAY_MS / HOUR_MS == 0) {
    snprintf(out, len, "%lldd", (long long)(d / DAY_MS));
  } else {
    snprintf(out, len, "%lldd%lldh", (long long)(d / DAY_MS), (long long)(d % DAY_MS / HOUR_MS));
  }
}

const char *cli_relative(const struct json_t *at, int64_t now, int precise, char *buf,
                         size_t len) {
  if (!json_is_integer(at)) return "-";
  int64_t t = json_integer_value(at), d = t > now ? t - now : now - t;
  char amount[32];
  if (precise) {
    precise_amount(d, amount, sizeof amount);
  } else if (d < 1000) {
    snprintf(buf, len, t > now ? "in <1s" : "now");
    return buf;
  } else {
    largest_unit(d, amount, sizeof amount);
  }
  snprintf(buf, len, t > now ? "in %s" : "%s ago", amount);
  return buf;
}

const char *cli_utc(int64_t ms, char *buf, size_t len) {
  time_t secs = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  struct tm tm;
  if (gmtime_r(&secs, &tm) == NULL || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    snprintf(buf, len, "%lld ms", (long long)ms);
  return buf;
}
