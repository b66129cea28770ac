/* Cron expressions: parsing, errors, and next fire times from a table,
 * including month ends, leap days and daylight-saving changes in named
 * zones (from the system's tz database), before and after the last
 * transition the zone's file lists (where its footer rule takes over). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tasker/cron.h>

#include "core/civil.h"
#include "schedule/cron_cache.h"
#include "schedule/tz.h"

/* "2027-03-28T01:00:00Z" (UTC only, seconds optional) to ms. */
static int64_t utc(const char *s) {
  int y, mo, d, h, mi, sec = 0;
  int n = sscanf(s, "%d-%d-%dT%d:%d:%dZ", &y, &mo, &d, &h, &mi, &sec);
  assert_true(n >= 5);
  return (tk__days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec) * 1000;
}

static void fmt(int64_t ms, char *buf, size_t len) {
  int64_t s = ms / 1000, days = s / 86400;
  int y, m, d;
  tk__civil_from_days(days, &y, &m, &d);
  int rem = (int)(s - days * 86400);
  snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02dZ", y, m, d, rem / 3600, rem / 60 % 60,
           rem % 60);
}

typedef struct next_case {
  const char *expr, *zone, *after;
  const char *expect[4]; /* the next fire times in turn */
} next_case;

static const next_case cases[] = {
    {"*/15 * * * *", NULL, "2026-11-24T05:07:30Z",
     {"2026-11-24T05:15:00Z", "2026-11-24T05:30:00Z", "2026-11-24T05:45:00Z",
      "2026-11-24T06:00:00Z"}},
    /* strictly after: a fire time equal to `after` is not repeated */
    {"@hourly", NULL, "2026-11-24T05:00:00Z", {"2026-11-24T06:00:00Z", "2026-11-24T07:00:00Z"}},
    {"5/20 * * * *", NULL, "2026-11-24T05:00:00Z",
     {"2026-11-24T05:05:00Z", "2026-11-24T05:25:00Z", "2026-11-24T05:45:00Z",
      "2026-11-24T06:05:00Z"}},
    /* month ends: months without a 31st are skipped */
    {"0 0 31 * *", NULL, "2026-04-15T00:00:00Z",
     {"2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z",
      "2026-10-31T00:00:00Z"}},
    {"59 23 31 12 *", NULL, "2026-12-31T23:59:00Z", {"2027-12-31T23:59:00Z"}},
    {"0 0 1 1 *", NULL, "2026-12-31T23:59:59Z", {"2027-01-01T00:00:00Z"}},
    /* leap days: 2100 is not a leap year */
    {"0 12 29 2 *", NULL, "2026-03-01T00:00:00Z",
     {"2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"}},
    {"0 0 29 feb *", NULL, "2096-03-01T00:00:00Z", {"2104-02-29T00:00:00Z"}},
    /* both day fields restricted: either matches (2026-11-24 is a Tuesday) */
    {"30 4 1,15 * fri", NULL, "2026-11-24T00:00:00Z",
     {"2026-11-27T04:30:00Z", "2026-12-01T04:30:00Z", "2026-12-04T04:30:00Z"}},
    {"0 9 * * mon-fri", NULL, "2026-11-27T10:00:00Z",
     {"2026-11-30T09:00:00Z", "2026-12-01T09:00:00Z"}},
    {"0 0 * * 7", NULL, "2026-11-24T00:00:00Z", {"2026-11-29T00:00:00Z"}},
    {"@monthly", NULL, "2026-11-24T00:00:00Z", {"2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
    /* Berlin, spring 2027: 02:00 CET becomes 03:00 CEST at 01:00Z. 02:30
     * does not exist that day: it fires once, at the change. */
    {"30 2 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z",
     {"2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"}},
    {"*/30 * * * *", "Europe/Berlin", "2027-03-28T00:00:00Z",
     {"2027-03-28T00:30:00Z", "2027-03-28T01:00:00Z", "2027-03-28T01:30:00Z"}},
    /* Berlin, autumn 2027: 03:00 CEST becomes 02:00 CET at 01:00Z. A daily
     * 02:30 fires at its first occurrence only; every half hour keeps going. */
    {"30 2 * * *", "Europe/Berlin", "2027-10-30T12:00:00Z",
     {"2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z"}},
    {"*/30 * * * *", "Europe/Berlin", "2027-10-31T00:00:00Z",
     {"2027-10-31T00:30:00Z", "2027-10-31T01:00:00Z", "2027-10-31T01:30:00Z",
      "2027-10-31T02:00:00Z"}},
    {"0 9 * * *", "Europe/Berlin", "2027-10-30T12:00:00Z",
     {"2027-10-31T08:00:00Z", "2027-11-01T08:00:00Z"}},
    /* Every other hour is not every hour: the repeated 02:00 fires at its
     * first run only (02:00 CEST, 00:00Z), not again at 02:00 CET (01:00Z)
     * (issue 19). Berlin, autumn 2026 and 2027. */
    {"0 */2 * * *", "Europe/Berlin", "2026-10-24T21:00:00Z",
     {"2026-10-24T22:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T03:00:00Z",
      "2026-10-25T05:00:00Z"}},
    {"0 */2 * * *", "Europe/Berlin", "2027-10-30T21:00:00Z",
     {"2027-10-30T22:00:00Z", "2027-10-31T00:00:00Z", "2027-10-31T03:00:00Z",
      "2027-10-31T05:00:00Z"}},
    /* Sydney's repeated 02:00 (03:00 AEDT becomes 02:00 AEST at 16:00Z):
     * 02:00 AEDT is 15:00Z, 02:00 AEST (16:00Z) does not fire. */
    {"0 */2 * * *", "Australia/Sydney", "2026-04-04T12:00:00Z",
     {"2026-04-04T13:00:00Z", "2026-04-04T15:00:00Z", "2026-04-04T18:00:00Z",
      "2026-04-04T20:00:00Z"}},
    {"0 */2 * * *", "Australia/Sydney", "2027-04-03T12:00:00Z",
     {"2027-04-03T13:00:00Z", "2027-04-03T15:00:00Z", "2027-04-03T18:00:00Z",
      "2027-04-03T20:00:00Z"}},
    /* Every hour said another way is every hour: both 02:00s fire. */
    {"0 0-23 * * *", "Europe/Berlin", "2026-10-24T23:30:00Z",
     {"2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}},
    {"0 */1 * * *", "Australia/Sydney", "2026-04-04T14:30:00Z",
     {"2026-04-04T15:00:00Z", "2026-04-04T16:00:00Z", "2026-04-04T17:00:00Z"}},
    /* A restricted hour that is only the repeated one fires once. */
    {"15 2,3 * * *", "Europe/Berlin", "2026-10-24T23:00:00Z",
     {"2026-10-25T00:15:00Z", "2026-10-25T02:15:00Z", "2026-10-26T01:15:00Z"}},
    /* past the transitions the file lists: the footer rule (last Sunday of
     * March 2040 is the 25th) */
    {"30 2 * * *", "Europe/Berlin", "2040-03-24T12:00:00Z",
     {"2040-03-25T01:00:00Z", "2040-03-26T00:30:00Z"}},
    /* New York, spring 2027: 02:00 EST becomes 03:00 EDT at 07:00Z */
    {"0 2 * * *", "America/New_York", "2027-03-13T12:00:00Z",
     {"2027-03-14T07:00:00Z", "2027-03-15T06:00:00Z"}},
    /* Sydney (southern hemisphere), April 2027: 03:00 AEDT becomes 02:00
     * AEST on the 4th at 16:00Z the day before */
    {"30 2 * * *", "Australia/Sydney", "2027-04-03T00:00:00Z",
     {"2027-04-03T15:30:00Z", "2027-04-04T16:30:00Z"}},
    /* a zone with a fixed offset */
    {"0 0 * * *", "Asia/Kolkata", "2026-11-24T00:00:00Z", {"2026-11-24T18:30:00Z"}},
};

static void next_fire_times_match_the_table(void **state) {
  (void)state;
  char got[32], label[160];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const next_case *k = &cases[i];
    tk_cron *c;
    tk_err err;
    int rc = tk_cron_parse(k->expr, k->zone, &c, &err);
    if (rc != 0) fail_msg("%s: %s", k->expr, err.msg);
    int64_t t = utc(k->after);
    for (int n = 0; n < 4 && k->expect[n]; n++) {
      t = tk_cron_next(c, t);
      fmt(t, got, sizeof got);
      snprintf(label, sizeof label, "%s in %s after %s, fire %d", k->expr,
               k->zone ? k->zone : "UTC", k->after, n + 1);
      if (strcmp(got, k->expect[n]) != 0)
        fail_msg("%s: expected %s, got %s", label, k->expect[n], got);
    }
    tk_cron_free(c);
  }
}

/* Reference predicates for a few expressions, written out by hand: in UTC
 * (no changes) the next fire time after t must be the first minute after t
 * that the predicate accepts, found by walking minute by minute. */
static int p_every7_3to5(int mi, int h, int d, int mo, int wd) {
  (void)d, (void)mo, (void)wd;
  return mi % 7 == 0 && h >= 3 && h <= 5;
}
static int p_1st15th_or_monday(int mi, int h, int d, int mo, int wd) {
  (void)mo;
  return mi == 0 && h == 0 && (d == 1 || d == 15 || wd == 1);
}
static int p_feb_sundays(int mi, int h, int d, int mo, int wd) {
  (void)d;
  return mi == 15 && h == 10 && mo == 2 && wd == 0;
}
static int p_6h_10to12(int mi, int h, int d, int mo, int wd) {
  (void)mo, (void)wd;
  return mi == 0 && h % 6 == 0 && d >= 10 && d <= 12;
}

static void next_agrees_with_a_minute_walk(void **state) {
  (void)state;
  static const struct {
    const char *expr;
    int (*ok)(int, int, int, int, int);
  } walks[] = {{"*/7 3-5 * * *", p_every7_3to5},
               {"0 0 1,15 * 1", p_1st15th_or_monday},
               {"15 10 * 2 sun", p_feb_sundays},
               {"0 */6 10-12 * *", p_6h_10to12}};
  for (size_t i = 0; i < sizeof walks / sizeof walks[0]; i++) {
    tk_cron *c;
    tk_err err;
    assert_int_equal(tk_cron_parse(walks[i].expr, NULL, &c, &err), 0);
    int64_t t = utc("2026-01-01T00:00:00Z");
    for (int n = 0; n < 40; n++) {
      int64_t next = tk_cron_next(c, t), m = (t / 60000 + 1) * 60000;
      for (;; m += 60000) {
        int64_t s = m / 1000, days = s / 86400;
        int y, mo, d;
        tk__civil_from_days(days, &y, &mo, &d);
        int wd = (int)((days + 4) % 7), rem = (int)(s - days * 86400);
        if (walks[i].ok(rem / 60 % 60, rem / 3600, d, mo, wd)) break;
      }
      if (next != m) {
        char a[32], b[32];
        fmt(next, a, sizeof a);
        fmt(m, b, sizeof b);
        fail_msg("%s: next gave %s, the walk %s", walks[i].expr, a, b);
      }
      t = next;
    }
    tk_cron_free(c);
  }
}

static void bad_expressions_are_refused_with_the_column(void **state) {
  (void)state;
  static const struct {
    const char *expr, *zone;
    int code;
    const char *msg; /* a substring */
  } bad[] = {
      {"60 * * * *", NULL, TK_ESYNTAX, "column 1 (minute): 60 is out of range: expected 0-59"},
      {"* * * *", NULL, TK_ESYNTAX, "expected five fields"},
      {"0 0 * * * *", NULL, TK_ESYNTAX, "column 11: expected five fields"},
      {"0 24 * * *", NULL, TK_ESYNTAX, "column 3 (hour): 24 is out of range"},
      {"0 0 0 * *", NULL, TK_ESYNTAX, "column 5 (day-of-month): 0 is out of range: expected 1-31"},
      {"0 0 * 13 *", NULL, TK_ESYNTAX, "column 7 (month)"},
      {"0 0 * foo *", NULL, TK_ESYNTAX, "or a month name (jan-dec)"},
      {"0 0 * * 8", NULL, TK_ESYNTAX, "column 9 (day-of-week): 8 is out of range: expected 0-7"},
      {"*/0 * * * *", NULL, TK_ESYNTAX, "column 3 (minute): expected a step 1-59"},
      {"5-1 * * * *", NULL, TK_ESYNTAX, "a range must go upwards"},
      {"1, * * * *", NULL, TK_ESYNTAX, "expected a value after ','"},
      {"1x * * * *", NULL, TK_ESYNTAX, "expected ',', '-', '/' or the end of the field"},
      {"@reboot", NULL, TK_ESYNTAX, "one of @yearly"},
      {"0 0 30 2 *", NULL, TK_EINVAL, "never fires"},
      {"0 0 31 4,6 *", NULL, TK_EINVAL, "never fires"},
      {"0 0 * * *", "Mars/Olympus_Mons", TK_ENOENT, "time zone \"Mars/Olympus_Mons\""},
      {"0 0 * * *", "../../etc/passwd", TK_EINVAL, "expected a tz database name"},
      {"0 0 * * *", "europe/berlin", TK_ENOENT,
       "time zone \"europe/berlin\": no such zone; did you mean \"Europe/Berlin\"?"},
      {"0 0 * * *", "ASIA/TOKYO", TK_ENOENT, "did you mean \"Asia/Tokyo\"?"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tk_cron *c = (tk_cron *)1;
    tk_err err;
    int rc = tk_cron_parse(bad[i].expr, bad[i].zone, &c, &err);
    if (rc != bad[i].code || strstr(err.msg, bad[i].msg) == NULL)
      fail_msg("\"%s\": got %d \"%s\", expected %d with \"%s\"", bad[i].expr, rc, err.msg,
               bad[i].code, bad[i].msg);
    assert_null(c);
  }
  /* February 29 alone is fine (it fires every four years), and a
   * restricted day of week always finds a day. */
  tk_cron *c;
  tk_err err;
  assert_int_equal(tk_cron_parse("0 0 30 2 mon", NULL, &c, &err), 0);
  assert_string_equal(tk_cron_text(c), "0 0 30 2 mon");
  assert_string_equal(tk_cron_zone(c), "UTC");
  tk_cron_free(c);
}

static void posix_rules_parse(void **state) {
  (void)state;
  tk__tz_rule r;
  assert_int_equal(tk__tz_rule_parse("CET-1CEST,M3.5.0,M10.5.0/3", &r), 0);
  assert_int_equal(r.std_off, 3600);
  assert_int_equal(r.dst_off, 7200);
  assert_int_equal(r.end.secs, 3 * 3600);
  assert_int_equal(tk__tz_rule_parse("<+03>-3", &r), 0);
  assert_int_equal(r.std_off, 3 * 3600);
  assert_false(r.has_dst);
  assert_int_equal(tk__tz_rule_parse("EST5EDT,M3.2.0,M11.1.0", &r), 0);
  assert_int_equal(r.std_off, -5 * 3600);
  assert_int_equal(r.dst_off, -4 * 3600);
  /* Dublin: winter time is the "daylight" one, an hour behind */
  assert_int_equal(tk__tz_rule_parse("IST-1GMT0,M10.5.0,M3.5.0/1", &r), 0);
  assert_int_equal(r.std_off, 3600);
  assert_int_equal(r.dst_off, 0);
  assert_int_equal(tk__tz_rule_parse("<-03>3<-02>,M3.5.0/-2,M10.5.0/-1", &r), 0);
  assert_int_equal(r.start.secs, -2 * 3600);
  assert_int_equal(tk__tz_rule_parse("X-1", &r), TK_ESYNTAX);
  assert_int_equal(tk__tz_rule_parse("CET-1CEST,M13.5.0,M10.5.0", &r), TK_ESYNTAX);
  assert_int_equal(tk__tz_rule_parse("CET", &r), TK_ESYNTAX);
}

/* The zone's offsets at known instants, from the table and the rule. */
static void zone_offsets(void **state) {
  (void)state;
  tk__tz z;
  tk_err err;
  assert_int_equal(tk__tz_load("Europe/Berlin", &z, &err), 0);
  assert_int_equal(tk__tz_offset(&z, utc("2027-03-28T00:59:59Z") / 1000), 3600);
  assert_int_equal(tk__tz_offset(&z, utc("2027-03-28T01:00:00Z") / 1000), 7200);
  assert_int_equal(tk__tz_offset(&z, utc("2060-07-01T00:00:00Z") / 1000), 7200);
  assert_int_equal(tk__tz_offset(&z, utc("2060-12-01T00:00:00Z") / 1000), 3600);
  assert_int_equal(tk__tz_change_after(&z, utc("2027-01-01T00:00:00Z") / 1000),
                   utc("2027-03-28T01:00:00Z") / 1000);
  assert_int_equal(tk__tz_change_at_or_before(&z, utc("2060-07-01T00:00:00Z") / 1000),
                   utc("2060-03-28T01:00:00Z") / 1000);
  tk__tz_free(&z);
  assert_int_equal(tk__tz_load(NULL, &z, &err), 0);
  assert_int_equal(tk__tz_offset(&z, 0), 0);
  assert_int_equal(tk__tz_change_after(&z, 0), INT64_MAX);
  tk__tz_free(&z);
}

/* tk_cron_slots: the fire times in (after, until], the latest max of them
 * oldest first, and whether earlier ones were left out; a year of a
 * per-minute schedule is bounded the same way. */
static void slots_between_two_instants(void **state) {
  (void)state;
  tk_cron *c;
  tk_err err;
  assert_int_equal(tk_cron_parse("0 */6 * * *", NULL, &c, &err), 0);
  int64_t out[8], from = utc("2026-01-01T00:00:00Z");
  int more = -1;
  /* (00:00, 2 Jan 00:00]: 06, 12, 18 and 00 of the next day. */
  assert_int_equal(tk_cron_slots(c, from, utc("2026-01-02T00:00:00Z"), out, 8, &more), 4);
  assert_int_equal(more, 0);
  assert_int_equal(out[0], utc("2026-01-01T06:00:00Z"));
  assert_int_equal(out[3], utc("2026-01-02T00:00:00Z"));
  /* Only the latest 3 of 12 over three days, oldest first. */
  assert_int_equal(tk_cron_slots(c, from, utc("2026-01-04T00:00:00Z"), out, 3, &more), 3);
  assert_int_equal(more, 1);
  assert_int_equal(out[0], utc("2026-01-03T12:00:00Z"));
  assert_int_equal(out[1], utc("2026-01-03T18:00:00Z"));
  assert_int_equal(out[2], utc("2026-01-04T00:00:00Z"));
  /* An empty range, and one before the first slot. */
  assert_int_equal(tk_cron_slots(c, from, from, out, 8, &more), 0);
  assert_int_equal(tk_cron_slots(c, from, utc("2026-01-01T05:59:00Z"), out, 8, &more), 0);
  assert_int_equal(more, 0);
  tk_cron_free(c);
  assert_int_equal(tk_cron_parse("* * * * *", NULL, &c, &err), 0);
  assert_int_equal(tk_cron_slots(c, from, utc("2027-01-01T00:00:00Z"), out, 5, &more), 5);
  assert_int_equal(more, 1);
  assert_int_equal(out[0], utc("2026-12-31T23:56:00Z"));
  assert_int_equal(out[4], utc("2027-01-01T00:00:00Z"));
  tk_cron_free(c);
}

/* The engine's cache of parsed expressions: one parse (one zone file
 * read) per expression and zone, shared; a sweep drops those not got
 * since the previous one. */
static void cron_cache_keeps_each_expression_once(void **state) {
  (void)state;
  tk__cron_cache *k = tk__cron_cache_new();
  assert_non_null(k);
  const tk_cron *a, *b, *c;
  tk_err err;
  assert_int_equal(tk__cron_cache_get(k, "*/5 * * * *", "Europe/Berlin", &a, &err), 0);
  assert_int_equal(tk__cron_cache_get(k, "*/5 * * * *", "Europe/Berlin", &b, &err), 0);
  assert_ptr_equal(a, b);
  assert_int_equal(tk__cron_cache_get(k, "*/5 * * * *", NULL, &c, &err), 0);
  assert_ptr_not_equal(a, c);
  assert_string_equal(tk_cron_zone(a), "Europe/Berlin");
  assert_string_equal(tk_cron_zone(c), "UTC");
  /* A bad one is an error each time and is not kept. */
  assert_int_equal(tk__cron_cache_get(k, "0 0 * * *", "Mars/Base", &b, &err), TK_ENOENT);
  assert_null(b);
  assert_int_equal(tk__cron_cache_size(k), 2);
  /* Many more than the first table holds: it grows, and each is found. */
  char expr[32];
  for (int m = 0; m < 60; m++) {
    snprintf(expr, sizeof expr, "%d 3 * * *", m);
    assert_int_equal(tk__cron_cache_get(k, expr, "Asia/Tokyo", &b, &err), 0);
  }
  assert_int_equal(tk__cron_cache_size(k), 62);
  assert_int_equal(tk__cron_cache_get(k, "*/5 * * * *", "Europe/Berlin", &b, &err), 0);
  assert_ptr_equal(a, b);
  /* All were got: the sweep keeps them; the next round gets two. */
  tk__cron_cache_sweep(k);
  assert_int_equal(tk__cron_cache_size(k), 62);
  assert_int_equal(tk__cron_cache_get(k, "*/5 * * * *", "Europe/Berlin", &b, &err), 0);
  assert_ptr_equal(a, b);
  assert_int_equal(tk__cron_cache_get(k, "7 3 * * *", "Asia/Tokyo", &b, &err), 0);
  tk__cron_cache_sweep(k);
  assert_int_equal(tk__cron_cache_size(k), 2);
  assert_int_equal(tk__cron_cache_get(k, "*/5 * * * *", "Europe/Berlin", &b, &err), 0);
  assert_ptr_equal(a, b);
  assert_int_equal(tk__cron_cache_get(k, "7 3 * * *", "Asia/Tokyo", &c, &err), 0);
  assert_int_equal(tk_cron_next(c, utc("2026-01-01T00:00:00Z")), utc("2026-01-01T18:07:00Z"));
  tk__cron_cache_free(k);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(next_fire_times_match_the_table),
      cmocka_unit_test(next_agrees_with_a_minute_walk),
      cmocka_unit_test(bad_expressions_are_refused_with_the_column),
      cmocka_unit_test(posix_rules_parse),
      cmocka_unit_test(zone_offsets),
      cmocka_unit_test(slots_between_two_instants),
      cmocka_unit_test(cron_cache_keeps_each_expression_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
