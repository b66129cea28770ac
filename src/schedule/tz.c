/* TZif reading (RFC 8536) and POSIX TZ rules: see tz.h for why by hand. */
#include "schedule/tz.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/civil.h"

#define TZ_FILE_MAX (1 << 20)

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static int64_t be64(const unsigned char *p) {
  return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

/* ---- POSIX TZ rules ---------------------------------------------------- */

/* A zone abbreviation: three or more letters, or <...> (may hold digits
 * and signs). Advances *p past it. */
static int rule_name(const char **p) {
  const char *s = *p;
  if (*s == '<') {
    const char *e = strchr(s, '>');
    if (e == NULL || e - s < 4) return -1;
    *p = e + 1;
    return 0;
  }
  while (isalpha((unsigned char)*s)) s++;
  if (s - *p < 3) return -1;
  *p = s;
  return 0;
}

/* [+-]hh[:mm[:ss]], hours up to 167 (RFC 8536 allows times past 24h). */
static int rule_time(const char **p, int32_t *secs) {
  const char *s = *p;
  int sign = 1;
  if (*s == '+' || *s == '-') sign = *s++ == '-' ? -1 : 1;
  if (!isdigit((unsigned char)*s)) return -1;
  long v[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++) {
    if (i > 0) {
      if (*s != ':') break;
      s++;
    }
    if (!isdigit((unsigned char)*s)) return -1;
    char *end;
    v[i] = strtol(s, &end, 10);
    if (end - s > 3) return -1;
    s = end;
  }
  if (v[0] > 167 || v[1] > 59 || v[2] > 59) return -1;
  *secs = sign * (int32_t)(v[0] * 3600 + v[1] * 60 + v[2]);
  *p = s;
  return 0;
}

static int rule_date(const char **p, tk__tz_rule_date *d) {
  const char *s = *p;
  char *end;
  memset(d, 0, sizeof *d);
  d->secs = 7200; /* 02:00 unless given */
  if (*s == 'M') {
    d->kind = 'M';
    d->m = (int)strtol(s + 1, &end, 10);
    if (end == s + 1 || *end != '.') return -1;
    s = end + 1;
    d->w = (int)strtol(s, &end, 10);
    if (end == s || *end != '.') return -1;
    s = end + 1;
    d->d = (int)strtol(s, &end, 10);
    if (end == s) return -1;
    s = end;
    if (d->m < 1 || d->m > 12 || d->w < 1 || d->w > 5 || d->d < 0 || d->d > 6) return -1;
  } else {
    d->kind = *s == 'J' ? 'J' : 'D';
    if (*s == 'J') s++;
    if (!isdigit((unsigned char)*s)) return -1;
    d->d = (int)strtol(s, &end, 10);
    s = end;
    if (d->kind == 'J' ? d->d < 1 || d->d > 365 : d->d > 365) return -1;
  }
  if (*s == '/') {
    s++;
    if (rule_time(&s, &d->secs) != 0) return -1;
  }
  *p = s;
  return 0;
}

int tk__tz_rule_parse(const char *text, tk__tz_rule *out) {
  const char *s = text;
  int32_t v;
  memset(out, 0, sizeof *out);
  if (rule_name(&s) != 0 || rule_time(&s, &v) != 0) return TK_ESYNTAX;
  out->std_off = -v; /* POSIX counts hours west of UTC */
  if (*s == '\0') return 0;
  if (rule_name(&s) != 0) return TK_ESYNTAX;
  out->has_dst = 1;
  out->dst_off = out->std_off + 3600;
  if (*s != ',' && *s != '\0') {
    if (rule_time(&s, &v) != 0) return TK_ESYNTAX;
    out->dst_off = -v;
  }
  if (*s == '\0') { /* no dates: the US rules POSIX names as the default */
    out->start = (tk__tz_rule_date){'M', 3, 2, 0, 7200};
    out->end = (tk__tz_rule_date){'M', 11, 1, 0, 7200};
    return 0;
  }
  if (*s++ != ',' || rule_date(&s, &out->start) != 0 || *s++ != ',' ||
      rule_date(&s, &out->end) != 0 || *s != '\0')
    return TK_ESYNTAX;
  return 0;
}

static int is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

/* The local midnight (as seconds since the epoch, UTC-based civil time) of
 * a rule date in year y, plus its time of day. */
static int64_t rule_local(const tk__tz_rule_date *d, int y) {
  int64_t day;
  if (d->kind == 'M') {
    int64_t first = tk__days_from_civil(y, d->m, 1);
    int wd_first = (int)(((first % 7) + 7 + 4) % 7); /* 1970-01-01 was a Thursday */
    int dd = 1 + (d->d - wd_first + 7) % 7 + (d->w - 1) * 7;
    while (dd > tk__days_in_month(y, d->m)) dd -= 7;
    day = first + dd - 1;
  } else if (d->kind == 'J') {
    int n = d->d; /* 1-365, February 29 never counted */
    day = tk__days_from_civil(y, 1, 1) + n - 1 + (is_leap(y) && n >= 60 ? 1 : 0);
  } else {
    day = tk__days_from_civil(y, 1, 1) + d->d;
  }
  return day * 86400 + d->secs;
}

/* The offset a rule gives at instant t. */
static int32_t rule_offset(const tk__tz_rule *r, int64_t t) {
  if (!r->has_dst) return r->std_off;
  int y = tk__year_of_ms((t + r->std_off) * 1000);
  int64_t start = rule_local(&r->start, y) - r->std_off; /* given in standard time */
  int64_t end = rule_local(&r->end, y) - r->dst_off;     /* given in daylight time */
  int dst = start < end ? t >= start && t < end : !(t >= end && t < start);
  return dst ? r->dst_off : r->std_off;
}

/* ---- TZif files -------------------------------------------------------- */

/* The index of the last transition at or before t, or -1. */
static int last_at_or_before(const tk__tz *z, int64_t t) {
  int lo = -1, hi = z->nat; /* at[lo] <= t < at[hi] */
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    if (z->at[mid] <= t) lo = mid;
    else hi = mid;
  }
  return lo;
}

/* Whether t lies after the table, where the footer rule governs. */
static int in_rule(const tk__tz *z, int64_t t) {
  return z->has_rule && (z->nat == 0 || t >= z->at[z->nat - 1]);
}

int32_t tk__tz_offset(const tk__tz *z, int64_t t) {
  if (in_rule(z, t)) return rule_offset(&z->rule, t);
  if (z->ntypes == 0) return 0; /* UTC without a database */
  int i = last_at_or_before(z, t);
  return z->offs[i < 0 ? 0 : z->type[i]];
}

/* The rule's changes in the years around t that lie after the table. */
static int rule_changes(const tk__tz *z, int64_t t, int64_t out[6]) {
  if (!z->has_rule || !z->rule.has_dst) return 0;
  const tk__tz_rule *r = &z->rule;
  int y = tk__year_of_ms((t + r->std_off) * 1000), n = 0;
  int64_t table_end = z->nat ? z->at[z->nat - 1] : INT64_MIN;
  for (int yy = y - 1; yy <= y + 1; yy++) {
    int64_t c[2] = {rule_local(&r->start, yy) - r->std_off, rule_local(&r->end, yy) - r->dst_off};
    for (int k = 0; k < 2; k++)
      if (c[k] > table_end) out[n++] = c[k];
  }
  return n;
}

int64_t tk__tz_change_after(const tk__tz *z, int64_t t) {
  int i = last_at_or_before(z, t);
  if (i + 1 < z->nat) return z->at[i + 1];
  int64_t c[6], best = INT64_MAX;
  int n = rule_changes(z, t, c);
  for (int k = 0; k < n; k++)
    if (c[k] > t && c[k] < best) best = c[k];
  return best;
}

int64_t tk__tz_change_at_or_before(const tk__tz *z, int64_t t) {
  int i = last_at_or_before(z, t);
  int64_t best = i < 0 ? INT64_MIN : z->at[i], c[6];
  int n = rule_changes(z, t, c);
  for (int k = 0; k < n; k++)
    if (c[k] <= t && c[k] > best) best = c[k];
  return best;
}

void tk__tz_free(tk__tz *z) {
  free(z->at);
  free(z->type);
  free(z->offs);
  memset(z, 0, sizeof *z);
}

/* A zone name is path components of letters, digits, '_', '-', '+'. */
static int valid_name(const char *name) {
  if (name[0] == '/' || strlen(name) >= 64) return 0;
  for (const char *p = name; *p; p++) {
    if (*p == '.' && (p == name || p[-1] == '/')) return 0; /* no "..", no hidden files */
    if (!isalnum((unsigned char)*p) && !strchr("/_-+.", *p)) return 0;
  }
  return 1;
}

/* The zone under dir whose name is `name` but for case ("europe/berlin"
 * is "Europe/Berlin"), each component looked up in its directory, into
 * out[64]; 1 when there is one. */
static int same_but_case(const char *dir, const char *name, char out[64]) {
  char path[512], part[64];
  size_t used = 0;
  snprintf(path, sizeof path, "%s", dir);
  out[0] = '\0';
  for (const char *p = name; *p;) {
    size_t len = strcspn(p, "/");
    if (len >= sizeof part) return 0;
    memcpy(part, p, len);
    part[len] = '\0';
    DIR *d = opendir(path);
    if (d == NULL) return 0;
    struct dirent *ent;
    int found = 0;
    while (!found && (ent = readdir(d)) != NULL) {
      if (strcasecmp(ent->d_name, part) != 0) continue;
      size_t at = strlen(path);
      found = used + strlen(ent->d_name) + 2 < 64 && at + strlen(ent->d_name) + 2 < sizeof path;
      if (found) {
        used += (size_t)snprintf(out + used, 64 - used, "%s%s", used ? "/" : "", ent->d_name);
        snprintf(path + at, sizeof path - at, "/%s", ent->d_name);
      }
    }
    closedir(d);
    if (!found) return 0;
    p += len;
    if (*p == '/') p++;
  }
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int parse_tzif(const unsigned char *b, size_t n, tk__tz *z) {
  if (n < 44 || memcmp(b, "TZif", 4) != 0) return -1;
  /* Skip the version 1 block to the 64-bit one (versions 2 and later). */
  size_t off = 0;
  int v2 = b[4] >= '2';
  for (int pass = 0; pass < (v2 ? 2 : 1); pass++) {
    if (off + 44 > n || memcmp(b + off, "TZif", 4) != 0) return -1;
    uint32_t isut = be32(b + off + 20), isstd = be32(b + off + 24), leap = be32(b + off + 28),
             timecnt = be32(b + off + 32), typecnt = be32(b + off + 36),
             charcnt = be32(b + off + 40);
    size_t tsize = pass == 0 && v2 ? 4 : (v2 ? 8 : 4);
    size_t data = timecnt * tsize + timecnt + typecnt * 6 + charcnt + leap * (tsize + 4) +
                  isstd + isut;
    if (typecnt == 0 || typecnt > 256 || timecnt > 100000 || off + 44 + data > n) return -1;
    if (pass == 0 && v2) {
      off += 44 + data;
      continue;
    }
    const unsigned char *p = b + off + 44;
    z->nat = (int)timecnt;
    z->ntypes = (int)typecnt;
    z->at = calloc(timecnt + 1, sizeof *z->at);
    z->type = calloc(timecnt + 1, 1);
    z->offs = calloc(typecnt, sizeof *z->offs);
    if (!z->at || !z->type || !z->offs) return -2;
    for (uint32_t i = 0; i < timecnt; i++)
      z->at[i] = tsize == 8 ? be64(p + i * 8) : (int32_t)be32(p + i * 4);
    p += timecnt * tsize;
    for (uint32_t i = 0; i < timecnt; i++) {
      if (p[i] >= typecnt) return -1;
      z->type[i] = p[i];
    }
    p += timecnt;
    for (uint32_t i = 0; i < typecnt; i++) z->offs[i] = (int32_t)be32(p + i * 6);
    off += 44 + data;
  }
  /* The footer: "\n" rule "\n" (versions 2 and later). */
  if (v2 && off < n && b[off] == '\n') {
    const unsigned char *e = memchr(b + off + 1, '\n', n - off - 1);
    if (e && e > b + off + 1 && (size_t)(e - b - off - 1) < 128) {
      char text[128];
      memcpy(text, b + off + 1, (size_t)(e - b - off - 1));
      text[e - b - off - 1] = '\0';
      z->has_rule = tk__tz_rule_parse(text, &z->rule) == 0;
    }
  }
  return 0;
}

int tk__tz_load(const char *name, tk__tz *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  if (name == NULL || *name == '\0') name = "UTC";
  if (!valid_name(name))
    return tk_err_set(err, TK_EINVAL,
                      "time zone \"%s\": expected a tz database name such as \"Europe/Berlin\"",
                      name);
  snprintf(out->name, sizeof out->name, "%s", name);
  const char *dir = getenv("TZDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : "/usr/share/zoneinfo", name);
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    /* UTC needs no database: a machine without tzdata still has it. */
    if (strcmp(name, "UTC") == 0 || strcmp(name, "Etc/UTC") == 0) return 0;
    int e = errno;
    char near[64];
    if (e == ENOENT && same_but_case(dir && *dir ? dir : "/usr/share/zoneinfo", name, near))
      return tk_err_set(err, TK_ENOENT, "time zone \"%s\": no such zone; did you mean \"%s\"?",
                        name, near);
    return tk_err_set(err, e == ENOENT ? TK_ENOENT : TK_EIO,
                      "time zone \"%s\": %s (looked for %s; is the tzdata package installed?)",
                      name, strerror(e), path);
  }
  /* The file's size, not TZ_FILE_MAX, is what is allocated and read. */
  struct stat st;
  size_t want = fstat(fileno(f), &st) == 0 && st.st_size > 0 && st.st_size < TZ_FILE_MAX
                    ? (size_t)st.st_size : TZ_FILE_MAX;
  unsigned char *buf = malloc(want);
  size_t n = buf ? fread(buf, 1, want, f) : 0;
  fclose(f);
  if (buf == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory");
  int rc = parse_tzif(buf, n, out);
  free(buf);
  if (rc != 0) {
    tk__tz_free(out);
    snprintf(out->name, sizeof out->name, "%s", name);
    return rc == -2 ? tk_err_set(err, TK_ENOMEM, "out of memory")
                    : tk_err_set(err, TK_ESYNTAX, "time zone \"%s\": %s is not a TZif file",
                                 name, path);
  }
  return 0;
}
