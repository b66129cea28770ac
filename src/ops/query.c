/* Lists over the whole store for operators (include/tasker/query.h): a
 * filter checked and turned into the store's query, pages of tasks and
 * steps as JSON (docs/api.md), and recent activity (bulk actions are
 * bulk.c). Backends return typed rows (store.h); the JSON is made
 * here, as report.c makes the reports'. */
#include "ops/ops_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/duration.h>
#include <tasker/query.h>

#include <jansson.h>

#include "core/civil.h"
#include "store/list_sql.h"

/* Buckets an activity report holds at most. */
#define BUCKETS_MAX 1440


/* "a, b, c" of a NULL-terminated list into buf. */
static const char *listed(const char *const *v, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; v[i] && len < cap; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", v[i]);
  return buf;
}

int tk_task_filter_check(const tk_task_filter *f, tk_err *err) {
  char states[128];
  if (f->state && *f->state && tk__state_known(tk__task_states, f->state) == NULL)
    return tk_err_set(err, TK_EINVAL, "state \"%s\": expected a task state (%s)", f->state,
                      listed(tk__task_states, states, sizeof states));
  if (f->template_name && *f->template_name) {
    const char *t = f->template_name, *slash = strchr(t, '/');
    if (strlen(t) >= TK__TEMPLATE_NAME_MAX || slash == t ||
        (slash && (slash[1] == '\0' || strchr(slash + 1, '/'))))
      return tk_err_set(err, TK_EINVAL,
                        "template \"%.300s\": expected a template name or namespace/name "
                        "(under %d bytes)",
                        t, TK__TEMPLATE_NAME_MAX);
  }
  if (f->created_since < 0)
    return tk_err_set(err, TK_EINVAL,
                      "created_since %lld: expected ms since the epoch, or 0 for any time",
                      (long long)f->created_since);
  return 0;
}

int tk__query_of(const tk_task_filter *f, tk__query *out, tk_err *err) {
  memset(out, 0, sizeof *out);
  if (f == NULL) return 0;
  int rc = tk_task_filter_check(f, err);
  if (rc) return rc;
  if (f->state && *f->state) out->q.state = f->state;
  if (f->template_name && *f->template_name) {
    const char *slash = strchr(f->template_name, '/');
    if (slash) {
      snprintf(out->ns, sizeof out->ns, "%.*s", (int)(slash - f->template_name), f->template_name);
      snprintf(out->name, sizeof out->name, "%s", slash + 1);
      out->q.ns = out->ns;
    } else {
      snprintf(out->name, sizeof out->name, "%s", f->template_name);
    }
    out->q.name = out->name;
  }
  out->q.created_since = f->created_since;
  if (f->error_text && *f->error_text) out->q.error_text = f->error_text;
  return 0;
}

/* The page arguments: cursor (NULL or "": the first page) into q->before,
 * limit checked. */
static int page_of(const char *cursor, int limit, tk__task_query *q, tk_err *err) {
  if (limit < 1 || limit > TK_PAGE_MAX)
    return tk_err_set(err, TK_EINVAL, "limit %d: expected 1 to %d", limit, TK_PAGE_MAX);
  q->limit = limit;
  q->before = 0;
  if (cursor == NULL || *cursor == '\0') return 0;
  int64_t v = 0;
  const char *p = cursor;
  for (; isdigit((unsigned char)*p) && p - cursor < 18; p++) v = v * 10 + (*p - '0');
  if (*p != '\0' || v <= 0)
    return tk_err_set(err, TK_EINVAL,
                      "cursor \"%.64s\": expected the next_cursor of an earlier page", cursor);
  q->before = v;
  return 0;
}

/* A nullable integer column as JSON, and text or null. */
static json_t *opt_int(int64_t v) { return v == TK__NONE ? json_null() : json_integer(v); }
static json_t *opt_str(const char *v) { return v ? json_string(v) : json_null(); }

static json_t *template_of(const char *ns, const char *name, const char *version) {
  return json_pack("{s:o, s:o, s:o}", "namespace", opt_str(ns), "name", opt_str(name), "version",
                   opt_str(version));
}

/* {"KEY": rows, "next_cursor": id of the last row shown or null} as text;
 * n rows were read for a page of limit (one more: there is a next page). */
static int page_json(const char *key, json_t *rows, int n, int limit, int64_t last_id, char **out,
                     tk_err *err) {
  int more = n > limit;
  char cursor[24];
  snprintf(cursor, sizeof cursor, "%lld", (long long)last_id);
  json_t *page =
      json_pack("{s:o, s:o}", key, rows, "next_cursor", more ? json_string(cursor) : json_null());
  *out = page ? json_dumps(page, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
  json_decref(page);
  return *out ? 0 : tk_err_set(err, TK_ENOMEM, "out of memory");
}

static json_t *task_row_json(const tk__task_row *r) {
  return json_pack("{s:I, s:s, s:o, s:o, s:I, s:I, s:o, s:i, s:i, s:i, s:o, s:o, s:i}", "id",
                   (json_int_t)r->id, "state", r->state, "template",
                   template_of(r->namespace_, r->name, r->version), "identity",
                   opt_str(r->identity), "created_at", (json_int_t)r->created_at, "updated_at",
                   (json_int_t)r->updated_at, "finished_at", opt_int(r->finished_at), "steps_total",
                   r->steps_total, "steps_done", r->steps_done, "steps_error", r->steps_error,
                   "last_error", opt_str(r->last_error), "next_run_at", opt_int(r->next_run_at),
                   "priority", r->priority);
}

int tk_tasks_json(tk_store *s, const tk_task_filter *f, const char *cursor, int limit, char **json,
                  tk_err *err) {
  *json = NULL;
  tk__query q;
  int rc = tk__query_of(f, &q, err);
  if (rc == 0) rc = page_of(cursor, limit, &q.q, err);
  if (rc) return rc;
  q.q.limit = limit + 1; /* one more: whether there is a next page */
  tk__task_row *rows;
  int n;
  if ((rc = s->ops->task_list(s, &q.q, &rows, &n, err))) return rc;
  json_t *tasks = json_array();
  for (int i = 0; i < n && i < limit; i++) json_array_append_new(tasks, task_row_json(&rows[i]));
  rc = page_json("tasks", tasks, n, limit, n ? rows[(n > limit ? limit : n) - 1].id : 0, json, err);
  tk__task_rows_free(rows, n);
  return rc;
}

int tk_tasks_count(tk_store *s, const tk_task_filter *f, int64_t *n, tk_err *err) {
  *n = 0;
  tk__query q;
  int rc = tk__query_of(f, &q, err);
  return rc ? rc : s->ops->task_count(s, &q.q, n, err);
}

/* The stored step state, or TK_EINVAL listing them. */
static int step_state_check(const char *state, const char **known, tk_err *err) {
  char states[160];
  *known = tk__state_known(tk__step_states, state);
  if (*known) return 0;
  return tk_err_set(err, TK_EINVAL, "step state \"%.64s\": expected one of %s",
                    state ? state : "(none)", listed(tk__step_states, states, sizeof states));
}

/* Whether a failed step ran out of attempts rather than failed for good
 * (outcome.c's rule, from what is stored: a permanent failure on the last
 * attempt reads as exhausted too). */
static int exhausted(const tk__step_row *r) {
  return strcmp(r->state, TK__STEP_ERROR) == 0 && r->retryable && r->attempts >= r->max_attempts;
}

static json_t *step_row_json(const tk__step_row *r) {
  return json_pack("{s:I, s:I, s:s, s:s, s:i, s:i, s:b, s:b, s:o, s:o, s:I}", "id",
                   (json_int_t)r->id, "task", (json_int_t)r->task_id, "step", r->name, "state",
                   r->state, "attempts", r->attempts, "max_attempts", r->max_attempts, "exhausted",
                   exhausted(r), "retryable", r->retryable, "last_error", opt_str(r->last_error),
                   "template", template_of(r->namespace_, r->template_name, r->version),
                   "updated_at", (json_int_t)r->updated_at);
}

int tk_steps_json(tk_store *s, const char *step_state, const tk_task_filter *f, const char *cursor,
                  int limit, char **json, tk_err *err) {
  *json = NULL;
  tk__query q;
  const char *state;
  int rc = step_state_check(step_state, &state, err);
  if (rc == 0) rc = tk__query_of(f, &q, err);
  if (rc == 0) rc = page_of(cursor, limit, &q.q, err);
  if (rc) return rc;
  q.q.limit = limit + 1;
  tk__step_row *rows;
  int n;
  if ((rc = s->ops->step_list(s, state, &q.q, &rows, &n, err))) return rc;
  json_t *steps = json_array();
  for (int i = 0; i < n && i < limit; i++) json_array_append_new(steps, step_row_json(&rows[i]));
  rc = page_json("steps", steps, n, limit, n ? rows[(n > limit ? limit : n) - 1].id : 0, json, err);
  tk__step_rows_free(rows, n);
  return rc;
}

/* ---- Activity ---- */

int tk_activity_json(tk_store *s, int64_t now, int64_t window_ms, int64_t bucket_ms, char **json,
                     tk_err *err) {
  *json = NULL;
  /* The window's end minus its buckets must stay a time: under 100 years. */
  const int64_t century_ms = INT64_C(100) * 366 * 86400000;
  if (bucket_ms <= 0 || window_ms <= 0 || window_ms > century_ms || bucket_ms > century_ms ||
      window_ms / bucket_ms > BUCKETS_MAX ||
      (window_ms / bucket_ms == BUCKETS_MAX && window_ms % bucket_ms))
    return tk_err_set(err, TK_EINVAL,
                      "activity window %lld ms in buckets of %lld ms: expected both above 0 "
                      "and under 100 years, and at most %d buckets",
                      (long long)window_ms, (long long)bucket_ms, BUCKETS_MAX);
  /* Whole buckets, the last one ending now; buckets of whole minutes end
   * with the current minute instead (the last one still filling), so that
   * they are read from the store's per-minute counts. */
  int n = (int)((window_ms + bucket_ms - 1) / bucket_ms);
  int64_t end = now;
  if (bucket_ms % TK__MINUTE_MS == 0 && now % TK__MINUTE_MS > 0)
    end = now - now % TK__MINUTE_MS + TK__MINUTE_MS;
  int64_t since = end - n * bucket_ms;
  tk__activity_bucket *b = calloc((size_t)n, sizeof *b);
  if (b == NULL) return tk_err_set(err, TK_ENOMEM, "out of memory");
  int rc = s->ops->activity(s, since, bucket_ms, n, b, err);
  /* Written out directly, in the layout json_dumps(JSON_INDENT(2)) gives:
   * building 1,440 buckets as jansson objects cost ten times the read. */
  tk__buf t = {0};
  tk__buf_addf(&t, "{\n  \"since\": %lld,\n  \"bucket_ms\": %lld,\n  \"buckets\": [",
               (long long)since, (long long)bucket_ms);
  for (int i = 0; rc == 0 && i < n; i++) {
    tk__buf_addf(&t,
                 "%s\n    {\n      \"start\": %lld,\n      \"succeeded\": %lld,\n"
                 "      \"failed\": %lld,\n      \"retries\": %lld,\n",
                 i ? "," : "", (long long)b[i].start, (long long)b[i].succeeded,
                 (long long)b[i].failed, (long long)b[i].retries);
    if (b[i].lateness_n)
      tk__buf_addf(&t, "      \"lateness_avg_ms\": %lld,\n      \"lateness_max_ms\": %lld\n",
                   (long long)((b[i].lateness_sum_ms + b[i].lateness_n / 2) / b[i].lateness_n),
                   (long long)b[i].lateness_max_ms);
    else
      tk__buf_adds(&t, "      \"lateness_avg_ms\": null,\n      \"lateness_max_ms\": null\n");
    tk__buf_adds(&t, "    }");
  }
  tk__buf_adds(&t, "\n  ]\n}");
  free(b);
  if (rc == 0) {
    *json = tk__buf_take(&t);
    if (*json == NULL) rc = tk_err_set(err, TK_ENOMEM, "out of memory");
  }
  tk__buf_free(&t);
  return rc;
}

/* ---- Time arguments ---- */

/* n digits at *p as a number (advancing *p); -1 when they are not digits. */
static int digits(const char **p, int n) {
  int v = 0;
  for (int i = 0; i < n; i++, (*p)++) {
    if (!isdigit((unsigned char)**p)) return -1;
    v = v * 10 + (**p - '0');
  }
  return v;
}

/* An RFC 3339 date-time (offset required) into *ms; -1 when it is not one. */
static int rfc3339(const char *text, int64_t *ms) {
  const char *p = text;
  int y = digits(&p, 4);
  if (y < 0 || *p++ != '-') return -1;
  int mo = digits(&p, 2);
  if (mo < 1 || mo > 12 || *p++ != '-') return -1;
  int d = digits(&p, 2);
  if (d < 1 || d > tk__days_in_month(y, mo)) return -1;
  if (*p != 'T' && *p != 't' && *p != ' ') return -1;
  p++;
  int h = digits(&p, 2);
  if (h < 0 || h > 23 || *p++ != ':') return -1;
  int mi = digits(&p, 2);
  if (mi < 0 || mi > 59 || *p++ != ':') return -1;
  int sec = digits(&p, 2);
  if (sec < 0 || sec > 60) return -1; /* 60: a leap second */
  int frac = 0;
  if (*p == '.') {
    p++;
    if (!isdigit((unsigned char)*p)) return -1;
    for (int scale = 100; isdigit((unsigned char)*p); p++, scale /= 10) frac += (*p - '0') * scale;
  }
  int offset = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int sign = *p++ == '-' ? -1 : 1;
    int oh = digits(&p, 2);
    if (oh < 0 || oh > 23 || *p++ != ':') return -1;
    int om = digits(&p, 2);
    if (om < 0 || om > 59) return -1;
    offset = sign * (oh * 60 + om);
  } else {
    return -1;
  }
  if (*p != '\0') return -1;
  int64_t s = tk__days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset * 60;
  *ms = s * 1000 + frac;
  return 0;
}

int tk_time_arg_parse(const char *text, int64_t now, int64_t *ms, tk_err *err) {
  if (text == NULL || *text == '\0')
    return tk_err_set(err, TK_EINVAL,
                      "time \"\": expected a duration such as 90s or 1h, or an RFC 3339 time "
                      "such as 2026-11-24T05:00:00Z");
  /* A date starts with a four-digit year and a dash; no duration does. */
  if (strlen(text) > 4 && text[4] == '-' && isdigit((unsigned char)text[0])) {
    if (rfc3339(text, ms) == 0) return 0;
    return tk_err_set(err, TK_EINVAL,
                      "time \"%.64s\": expected an RFC 3339 time such as 2026-11-24T05:00:00Z "
                      "or 2026-11-24T06:00:00+01:00 (an offset or Z required)",
                      text);
  }
  int64_t d;
  tk_err e;
  if (tk_duration_parse(text, &d, &e) != 0 || d > now)
    return tk_err_set(err, TK_EINVAL,
                      "time \"%.64s\": expected a duration such as 90s or 1h (that long ago), or "
                      "an RFC 3339 time such as 2026-11-24T05:00:00Z",
                      text);
  *ms = now - d;
  return 0;
}
