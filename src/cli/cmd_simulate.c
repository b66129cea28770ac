/* tasker simulate: retry policies measured on simulated time. Two
 * scenarios: N clients contending for one versioned slot (the default), and
 * `outage`, steady work against a downstream that fails for a while, with
 * and without a retry budget. The models live in the library
 * (tk_simulate, tk_simulate_outage); this file parses flags and prints
 * tables, JSON or SVG. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/config.h>
#include <tasker/duration.h>
#include <tasker/rand.h>
#include <tasker/simulate.h>

const char cmd_simulate_usage[] =
    "usage: tasker simulate [contention] [--clients FROM:TO:STEP] [--trials N] [options]\n"
    "       tasker simulate outage [--rate N/s] [--outage DURATION] [options]\n"
    "\n"
    "contention (the default scenario):\n"
    "N clients each need one successful conditional write to a single versioned\n"
    "slot. An attempt is a read then a write that succeeds only if the version is\n"
    "unchanged; every message takes |Normal(latency, latency-sd)|. After a failed\n"
    "write a client sleeps its policy's delay and tries again, up to its attempt\n"
    "budget. Time is simulated: a sweep takes seconds of CPU, not of waiting.\n"
    "Prints, per client count and policy, the mean total calls (reads + writes),\n"
    "the mean completion time (until the last client succeeded or gave up) and the\n"
    "share of clients that succeeded within their budget.\n"
    "\n"
    "  --clients SPEC        N or FROM:TO:STEP (default 10:190:10)\n"
    "  --trials N            trials per point (default 100)\n"
    "  --base DURATION       first delay (default 10ms)\n"
    "  --cap DURATION        max delay of the tasker policies (default 1s)\n"
    "  --multiplier X        growth per failure (default 2)\n"
    "  --jitter-fraction F   for proportional jitter (default 0.1)\n"
    "  --max-attempts N      attempts per client, the first included (default 20)\n"
    "  --latency DURATION    mean one-way message delay (default 10ms)\n"
    "  --latency-sd DURATION its standard deviation (default 2ms)\n"
    "  --policies LIST       comma-separated subset of: none, exponential, full,\n"
    "                        equal, decorrelated, proportional, linear (default all)\n"
    "  --seed S              random seed (default: fresh entropy, printed)\n"
    "  --json                print {config, results: [{clients, policy, ...}]}\n"
    "  --svg FILE            also write charts of calls and completion time\n"
    "\n"
    "Policies: none retries at once; exponential is base * multiplier^(n-1) capped,\n"
    "without jitter; full, equal, decorrelated and proportional add that jitter;\n"
    "linear is a naive client outside tasker: base * n, at most 3 retries.\n"
    "\n"
    "outage:\n"
    "Steps arrive at a steady rate and each calls one downstream, which fails every\n"
    "call for a while. A step that failed retries under a backoff profile of the\n"
    "configuration, up to its attempts. Each profile runs without and with a retry\n"
    "budget: retries may spend at most RATIO of the first attempts over a sliding\n"
    "WINDOW, plus a floor per second; a retry over budget waits, it does not fail.\n"
    "Prints downstream calls per first attempt during the outage, while the retries\n"
    "it held up drain and until the end; the time to drain; steps that succeeded\n"
    "or used up their attempts; retries the budget deferred and the longest wait.\n"
    "\n"
    "  --rate RATE                first attempts per second: 100/s, 100 or 6000/m\n"
    "                             (default 100/s)\n"
    "  --duration DURATION        how long work arrives (default 20m)\n"
    "  --outage DURATION          how long every call fails (default 60s)\n"
    "  --outage-start DURATION    when the outage starts (default 30s)\n"
    "  --max-attempts N           calls per step, the first included (default 3)\n"
    "  --profiles LIST            backoff profiles of the configuration, by name\n"
    "                             (default all; see tasker config show)\n"
    "  --budget-ratio X           retries per first attempt (default 0.05)\n"
    "  --budget-window DURATION   the window, a multiple of 100ms (default 10s)\n"
    "  --budget-min-per-second N  the floor (default 2)\n"
    "  --seed S                   jitter seed (default: fresh entropy, printed)\n"
    "  --json                     print {seed, config, results: [...]}\n"
    "  --svg FILE                 also write a chart of calls per second over time\n";

enum {
  OPT_CLIENTS, OPT_TRIALS, OPT_BASE, OPT_CAP, OPT_MULTIPLIER, OPT_JITTER_FRACTION,
  OPT_MAX_ATTEMPTS, OPT_LATENCY, OPT_LATENCY_SD, OPT_POLICIES, OPT_SEED, OPT_SVG, OPT_COUNT
};

#define MAX_POINTS 1000
#define MAX_CLIENTS 100000

/* What to run: the client counts and the policies, in output order. */
typedef struct sweep {
  int32_t from, to, step, npoints;
  tk_sim_policy policies[TK_SIM_POLICY_COUNT];
  int npolicies;
  tk_sim_config cfg;
  tk_sim_stats *stats; /* [point][policy] */
} sweep;

static int32_t point_clients(const sweep *s, int i) { return s->from + i * s->step; }
static const tk_sim_stats *at(const sweep *s, int point, int pol) {
  return &s->stats[point * s->npolicies + pol];
}

/* "N" or "FROM:TO:STEP". */
static int parse_clients(const cli_opt *o, sweep *s) {
  long long v[3];
  int n = 0;
  const char *p = o->value;
  while (n < 3) {
    char *end;
    errno = 0;
    v[n++] = strtoll(p, &end, 10);
    if (end == p || errno != 0) goto bad;
    if (*end == '\0') break;
    if (*end != ':') goto bad;
    p = end + 1;
  }
  if (*p == '\0' || (n != 1 && n != 3)) goto bad;
  if (n == 1) v[1] = v[0], v[2] = 1;
  if (v[0] < 1 || v[1] < v[0] || v[1] > MAX_CLIENTS || v[2] < 1) goto bad;
  if ((v[1] - v[0]) / v[2] + 1 > MAX_POINTS) {
    cli_error("simulate", "--clients: \"%s\" gives more than %d client counts", o->value,
              MAX_POINTS);
    return CLI_EXIT_USAGE;
  }
  s->from = (int32_t)v[0];
  s->to = (int32_t)v[1];
  s->step = (int32_t)v[2];
  return 0;
bad:
  cli_error("simulate",
            "--clients: invalid value \"%s\": expected N or FROM:TO:STEP with "
            "1 <= FROM <= TO <= %d and STEP >= 1",
            o->value, MAX_CLIENTS);
  return CLI_EXIT_USAGE;
}

/* "full,exponential": each name once, in the order given. */
static int parse_policies(const cli_opt *o, sweep *s) {
  char buf[256];
  if (strlen(o->value) >= sizeof buf) goto bad;
  strcpy(buf, o->value);
  s->npolicies = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    tk_sim_policy p;
    if (tk_sim_policy_parse(tok, &p) != 0) {
      cli_error("simulate",
                "--policies: unknown policy \"%s\": expected none, exponential, full, equal, "
                "decorrelated, proportional or linear",
                tok);
      return CLI_EXIT_USAGE;
    }
    for (int i = 0; i < s->npolicies; i++)
      if (s->policies[i] == p) {
        cli_error("simulate", "--policies: \"%s\" is listed twice", tok);
        return CLI_EXIT_USAGE;
      }
    s->policies[s->npolicies++] = p;
  }
  if (s->npolicies > 0) return 0;
bad:
  cli_error("simulate", "--policies: invalid value \"%s\": expected policy names separated "
            "by commas", o->value);
  return CLI_EXIT_USAGE;
}

/* A duration flag that must be above zero where the model needs it. */
static int positive_duration(const cli_opt *o, int64_t *ms) {
  int rc = cli_duration("simulate", o, ms);
  if (rc == 0 && *ms <= 0) {
    cli_error("simulate", "--%s: invalid value \"%s\": must be above 0", o->name, o->value);
    return CLI_EXIT_USAGE;
  }
  return rc;
}

static int parse_flags(cli_opt *o, sweep *s, int *seeded) {
  int rc = 0;
  int64_t v;
  tk_sim_config *c = &s->cfg;
  if (o[OPT_CLIENTS].seen && (rc = parse_clients(&o[OPT_CLIENTS], s))) return rc;
  s->npoints = (s->to - s->from) / s->step + 1;
  if (o[OPT_TRIALS].seen) {
    if ((rc = cli_int("simulate", &o[OPT_TRIALS], 1, 1000000, &v))) return rc;
    c->trials = (int32_t)v;
  }
  if (o[OPT_MAX_ATTEMPTS].seen) {
    if ((rc = cli_int("simulate", &o[OPT_MAX_ATTEMPTS], 1, 1000000, &v))) return rc;
    c->max_attempts = (int32_t)v;
  }
  if (o[OPT_BASE].seen && (rc = positive_duration(&o[OPT_BASE], &c->base_ms))) return rc;
  if (o[OPT_CAP].seen && (rc = positive_duration(&o[OPT_CAP], &c->cap_ms))) return rc;
  if (o[OPT_MULTIPLIER].seen &&
      (rc = cli_double("simulate", &o[OPT_MULTIPLIER], 1.0, 1e6, &c->multiplier)))
    return rc;
  if (o[OPT_JITTER_FRACTION].seen &&
      (rc = cli_double("simulate", &o[OPT_JITTER_FRACTION], 0.0, 1.0, &c->jitter_fraction)))
    return rc;
  if (o[OPT_LATENCY].seen) {
    if ((rc = cli_duration("simulate", &o[OPT_LATENCY], &v))) return rc;
    c->latency_mean_ms = (double)v;
  }
  if (o[OPT_LATENCY_SD].seen) {
    if ((rc = cli_duration("simulate", &o[OPT_LATENCY_SD], &v))) return rc;
    c->latency_sd_ms = (double)v;
  }
  if (o[OPT_POLICIES].seen && (rc = parse_policies(&o[OPT_POLICIES], s))) return rc;
  *seeded = o[OPT_SEED].seen;
  if (o[OPT_SEED].seen && (rc = cli_u64("simulate", &o[OPT_SEED], &c->seed))) return rc;
  c->clients = s->to;
  tk_err err;
  if (tk_sim_config_validate(c, &err) != 0) {
    cli_error("simulate", "invalid settings: %s", err.msg);
    return CLI_EXIT_USAGE;
  }
  return 0;
}

static int run_sweep(sweep *s) {
  s->stats = calloc((size_t)s->npoints * (size_t)s->npolicies, sizeof *s->stats);
  if (s->stats == NULL) {
    cli_error("simulate", "out of memory for %d results", s->npoints * s->npolicies);
    return CLI_EXIT_FAILURE;
  }
  tk_sim_config c = s->cfg;
  for (int i = 0; i < s->npoints; i++) {
    c.clients = point_clients(s, i);
    for (int k = 0; k < s->npolicies; k++) {
      tk_err err;
      if (tk_simulate(&c, s->policies[k], &s->stats[i * s->npolicies + k], &err) != 0) {
        cli_error("simulate", "%s", err.msg);
        return CLI_EXIT_FAILURE;
      }
    }
  }
  return 0;
}

/* ---- text ---- */

enum { METRIC_CALLS, METRIC_TIME, METRIC_SUCCEEDED };

static double metric(const tk_sim_stats *st, int m) {
  return m == METRIC_CALLS ? st->calls : m == METRIC_TIME ? st->completion_ms : st->succeeded;
}

static void print_cell(double v, int m) {
  char buf[40];
  if (m == METRIC_CALLS) {
    snprintf(buf, sizeof buf, "%.1f", v);
  } else if (m == METRIC_TIME) {
    tk_duration_format((int64_t)(v + 0.5), buf, sizeof buf);
  } else {
    snprintf(buf, sizeof buf, "%.1f%%", v * 100.0);
  }
  printf(" %13s", buf);
}

static void print_table(const sweep *s, int m, const char *title) {
  printf("\n%s\n%7s", title, "clients");
  for (int k = 0; k < s->npolicies; k++) printf(" %13s", tk_sim_policy_name(s->policies[k]));
  printf("\n");
  for (int i = 0; i < s->npoints; i++) {
    printf("%7d", (int)point_clients(s, i));
    for (int k = 0; k < s->npolicies; k++) print_cell(metric(at(s, i, k), m), m);
    printf("\n");
  }
}

static void print_text(const sweep *s) {
  const tk_sim_config *c = &s->cfg;
  char base[32], cap[32], lat[32], sd[32];
  tk_duration_format(c->base_ms, base, sizeof base);
  tk_duration_format(c->cap_ms, cap, sizeof cap);
  tk_duration_format((int64_t)c->latency_mean_ms, lat, sizeof lat);
  tk_duration_format((int64_t)c->latency_sd_ms, sd, sizeof sd);
  if (s->npoints == 1) printf("%d clients", (int)s->from);
  else printf("clients %d..%d step %d", (int)s->from, (int)s->to, (int)s->step);
  printf(", %d trials each, seed %" PRIu64 "\n", (int)c->trials, c->seed);
  printf("policy: base %s, multiplier %g, cap %s, jitter fraction %g, %d attempts per client "
         "(linear: %d)\n",
         base, c->multiplier, cap, c->jitter_fraction, (int)c->max_attempts,
         (int)tk_sim_budget(c, TK_SIM_LINEAR));
  printf("message delay: |Normal(%s, %s)|\n", lat, sd);
  print_table(s, METRIC_CALLS, "mean total calls (reads + writes)");
  print_table(s, METRIC_TIME, "mean completion time (until the last client succeeded or gave up)");
  print_table(s, METRIC_SUCCEEDED, "clients that succeeded within their attempt budget");
}

/* ---- JSON ---- */

/* JSON integers are signed: a seed above INT64_MAX is written as text. */
static json_t *seed_json(uint64_t seed) {
  char text[24];
  snprintf(text, sizeof text, "%" PRIu64, seed);
  return seed > (uint64_t)INT64_MAX ? json_string(text) : json_integer((json_int_t)seed);
}

/* Print `root` (its reference is taken; NULL means a failed json_pack),
 * indented, keys in insertion order. */
static int print_json_root(json_t *root) {
  if (root == NULL) {
    cli_error("simulate", "out of memory building JSON");
    return CLI_EXIT_FAILURE;
  }
  char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
  json_decref(root);
  if (text == NULL) return CLI_EXIT_FAILURE;
  puts(text);
  free(text);
  return 0;
}

static int print_json(const sweep *s) {
  const tk_sim_config *c = &s->cfg;
  json_t *results = json_array();
  json_t *policies = json_array();
  for (int k = 0; k < s->npolicies; k++)
    json_array_append_new(policies, json_string(tk_sim_policy_name(s->policies[k])));
  for (int i = 0; i < s->npoints; i++)
    for (int k = 0; k < s->npolicies; k++) {
      const tk_sim_stats *st = at(s, i, k);
      json_array_append_new(
          results, json_pack("{s:i, s:s, s:i, s:f, s:f, s:f}", "clients",
                             (int)point_clients(s, i), "policy",
                             tk_sim_policy_name(s->policies[k]), "max_attempts",
                             (int)tk_sim_budget(c, s->policies[k]), "mean_calls", st->calls,
                             "mean_completion_ms", st->completion_ms, "succeeded", st->succeeded));
    }
  json_t *config = json_pack(
      "{s:i, s:i, s:i, s:i, s:i, s:I, s:f, s:I, s:f, s:f, s:f, s:o}", "clients_from",
      (int)s->from, "clients_to", (int)s->to, "clients_step", (int)s->step, "trials",
      (int)c->trials, "max_attempts", (int)c->max_attempts, "base_ms", (json_int_t)c->base_ms,
      "multiplier", c->multiplier, "cap_ms", (json_int_t)c->cap_ms, "jitter_fraction",
      c->jitter_fraction, "latency_mean_ms", c->latency_mean_ms, "latency_sd_ms",
      c->latency_sd_ms, "policies", policies);
  return print_json_root(
      json_pack("{s:o, s:o, s:o}", "seed", seed_json(c->seed), "config", config, "results",
                results));
}

/* ---- SVG (shared by both scenarios) ---- */

#define SVG_W 1030
#define SVG_H 470
#define PANEL_W 420
#define PANEL_H 320

static const char *const colors[] = {"#d62728", "#ff7f0e", "#2ca02c", "#1f77b4", "#9467bd",
                                     "#8c564b", "#7f7f7f", "#e377c2", "#bcbd22", "#17becf"};
#define NCOLORS (sizeof colors / sizeof colors[0])

/* The smallest of 1, 2, 2.5, 5 times a power of ten that is >= v. */
static double nice_ceil(double v) {
  if (v <= 0) return 1;
  double mag = 1;
  while (mag * 10 <= v) mag *= 10;
  while (mag > v) mag /= 10;
  static const double steps[] = {1, 2, 2.5, 5, 10};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
    if (steps[i] * mag >= v) return steps[i] * mag;
  return 10 * mag;
}

/* Create `path` and write the prologue of a w x h drawing; NULL after
 * printing the error. */
static FILE *svg_open(const char *cmd, const char *path, int w, int h) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    cli_error(cmd, "--svg: cannot write \"%s\": %s", path, strerror(errno));
    return NULL;
  }
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
          "<style>.title{font-size:14px;font-weight:bold}.frame{fill:none;stroke:#333}"
          ".grid{stroke:#ddd}.ylabel{text-anchor:end}.xlabel{text-anchor:middle}"
          "</style>\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
          w, h, w, h);
  return f;
}

/* Close the drawing; a write error is printed and gives CLI_EXIT_FAILURE. */
static int svg_close(const char *cmd, FILE *f, const char *path) {
  fprintf(f, "</svg>\n");
  if (ferror(f) | (fclose(f) != 0)) {
    cli_error(cmd, "--svg: cannot write \"%s\": %s", path, strerror(errno));
    return CLI_EXIT_FAILURE;
  }
  return 0;
}

/* A chart's title, frame and horizontal grid from 0 up to at least ymax,
 * labelled; returns the value at the top of the frame. */
static double svg_frame(FILE *f, const char *title, int x0, int y0, int w, int h, double ymax) {
  double ytick = nice_ceil(ymax / 5);
  int nyticks = ymax > 0 ? (int)(ymax / ytick + 0.999999) : 1;
  double ytop = ytick * nyticks;
  fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"title\">%s</text>\n", x0, y0 - 14, title);
  fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"frame\"/>\n", x0, y0, w,
          h);
  for (int t = 0; t <= nyticks; t++) {
    double y = y0 + h - t * ytick / ytop * h;
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>\n", x0, y,
            x0 + w, y);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"ylabel\">%g</text>\n", x0 - 6, y + 4,
            t * ytick);
  }
  return ytop;
}

/* One legend entry: a short line in `color` and its label. */
static void svg_legend(FILE *f, int x, int y, const char *color, const char *label) {
  fprintf(f,
          "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>"
          "<text x=\"%d\" y=\"%d\">%s</text>\n",
          x, y, x + 22, y, color, x + 28, y + 4, label);
}

/* One chart: metric m (scaled by `scale`) against clients. */
static void svg_panel(FILE *f, const sweep *s, int m, double scale, const char *title, int x0,
                      int y0) {
  double ymax = 0;
  for (int i = 0; i < s->npoints; i++)
    for (int k = 0; k < s->npolicies; k++) {
      double v = metric(at(s, i, k), m) * scale;
      if (v > ymax) ymax = v;
    }
  double ytop = svg_frame(f, title, x0, y0, PANEL_W, PANEL_H, ymax);
  double xspan = s->to > s->from ? (double)(s->to - s->from) : 1.0;
#define PX(cl) (x0 + ((double)(cl) - s->from) / xspan * PANEL_W)
#define PY(v) (y0 + PANEL_H - (v) / ytop * PANEL_H)
  int xstep = s->npoints > 10 ? (s->npoints + 9) / 10 : 1; /* at most ~10 labels */
  for (int i = 0; i < s->npoints; i += xstep)
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"xlabel\">%d</text>\n",
            PX(point_clients(s, i)), y0 + PANEL_H + 16, (int)point_clients(s, i));
  fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"xlabel\">clients</text>\n", x0 + PANEL_W / 2,
          y0 + PANEL_H + 34);
  for (int k = 0; k < s->npolicies; k++) {
    const char *color = colors[s->policies[k]];
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
    for (int i = 0; i < s->npoints; i++)
      fprintf(f, "%s%.1f,%.1f", i ? " " : "", PX(point_clients(s, i)),
              PY(metric(at(s, i, k), m) * scale));
    fprintf(f, "\"/>\n");
    for (int i = 0; i < s->npoints; i++)
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n",
              PX(point_clients(s, i)), PY(metric(at(s, i, k), m) * scale), color);
  }
#undef PX
#undef PY
}

static int write_svg(const sweep *s, const char *path) {
  FILE *f = svg_open("simulate", path, SVG_W, SVG_H);
  if (f == NULL) return CLI_EXIT_FAILURE;
  fprintf(f, "<text x=\"%d\" y=\"22\" class=\"title\">clients contending for one slot: %d "
          "trials per point, %d attempts per client, seed %" PRIu64 "</text>\n",
          60, (int)s->cfg.trials, (int)s->cfg.max_attempts, s->cfg.seed);
  svg_panel(f, s, METRIC_CALLS, 1.0, "mean total calls (reads + writes)", 70, 60);
  svg_panel(f, s, METRIC_TIME, 0.001, "mean completion time (seconds)", 70 + PANEL_W + 90, 60);
  for (int k = 0; k < s->npolicies; k++)
    svg_legend(f, 70 + k * 125, 60 + PANEL_H + 56, colors[s->policies[k]],
               tk_sim_policy_name(s->policies[k]));
  return svg_close("simulate", f, path);
}

/* ---- the outage scenario ---- */

#define OUTAGE_CMD "simulate outage"
#define MAX_PROFILES 16

enum {
  OO_RATE, OO_DURATION, OO_OUTAGE, OO_OUTAGE_START, OO_MAX_ATTEMPTS, OO_PROFILES,
  OO_BUDGET_RATIO, OO_BUDGET_WINDOW, OO_BUDGET_MIN, OO_SEED, OO_SVG, OO_COUNT
};

/* What to run: the profiles in output order, each without and with the
 * budget; results[2k] is profile k without, results[2k + 1] with. */
typedef struct outage_run {
  tk_sim_outage_config cfg;
  const char *names[MAX_PROFILES];
  tk_backoff_policy policies[MAX_PROFILES];
  int nprofiles;
  tk_sim_outage_stats results[2 * MAX_PROFILES];
} outage_run;

/* "100/s", "100" (per second) or "6000/m". */
static int parse_rate(const cli_opt *o, double *per_s) {
  char *end;
  errno = 0;
  double v = strtod(o->value, &end);
  double scale = 1;
  if (strcmp(end, "/m") == 0) scale = 1.0 / 60;
  else if (*end != '\0' && strcmp(end, "/s") != 0) end = NULL;
  if (end != NULL && end != o->value && errno == 0 && isfinite(v) && v * scale > 0 &&
      v * scale <= 1e6) {
    *per_s = v * scale;
    return 0;
  }
  cli_error(OUTAGE_CMD,
            "--rate: invalid value \"%s\": expected first attempts per second as 100/s, 100 "
            "or 6000/m, above 0 and at most 1000000/s",
            o->value);
  return CLI_EXIT_USAGE;
}

/* "default,payments": profiles of cfg, each once; all of them when absent. */
static int parse_profiles(const cli_opt *o, const tk_config *cfg, outage_run *r) {
  r->nprofiles = 0;
  if (!o->seen) {
    size_t n = tk_config_profile_count(cfg);
    if (n > MAX_PROFILES) {
      cli_error(OUTAGE_CMD, "the configuration has %zu profiles: choose at most %d with "
                "--profiles", n, MAX_PROFILES);
      return CLI_EXIT_USAGE;
    }
    for (size_t i = 0; i < n; i++, r->nprofiles++) {
      r->names[r->nprofiles] = tk_config_profile_name(cfg, i);
      r->policies[r->nprofiles] = *tk_config_profile(cfg, r->names[r->nprofiles]);
    }
    return 0;
  }
  const char *p = o->value;
  while (*p != '\0') {
    size_t len = strcspn(p, ",");
    char name[128];
    if (len == 0 || len >= sizeof name) goto bad;
    memcpy(name, p, len);
    name[len] = '\0';
    const tk_backoff_policy *policy;
    int rc = cli_config_profile(OUTAGE_CMD, cfg, name, &policy);
    if (rc) return rc;
    for (int i = 0; i < r->nprofiles; i++)
      if (strcmp(r->names[i], name) == 0) {
        cli_error(OUTAGE_CMD, "--profiles: \"%s\" is listed twice", name);
        return CLI_EXIT_USAGE;
      }
    if (r->nprofiles == MAX_PROFILES) {
      cli_error(OUTAGE_CMD, "--profiles: at most %d profiles at once", MAX_PROFILES);
      return CLI_EXIT_USAGE;
    }
    /* The name as the configuration holds it: it outlives `name`. */
    for (size_t i = 0; i < tk_config_profile_count(cfg); i++)
      if (strcmp(tk_config_profile_name(cfg, i), name) == 0)
        r->names[r->nprofiles] = tk_config_profile_name(cfg, i);
    r->policies[r->nprofiles++] = *policy;
    p += len;
    if (*p == ',' && *++p == '\0') goto bad;
  }
  if (r->nprofiles > 0) return 0;
bad:
  cli_error(OUTAGE_CMD, "--profiles: invalid value \"%s\": expected profile names separated by "
            "commas", o->value);
  return CLI_EXIT_USAGE;
}

static int outage_flags(cli_opt *o, outage_run *r, int *seeded) {
  tk_sim_outage_config *c = &r->cfg;
  int rc = 0;
  int64_t v;
  if (o[OO_RATE].seen && (rc = parse_rate(&o[OO_RATE], &c->rate_per_s))) return rc;
  if (o[OO_DURATION].seen && (rc = cli_duration(OUTAGE_CMD, &o[OO_DURATION], &c->duration_ms)))
    return rc;
  if (o[OO_OUTAGE].seen && (rc = cli_duration(OUTAGE_CMD, &o[OO_OUTAGE], &c->outage_ms)))
    return rc;
  if (o[OO_OUTAGE_START].seen &&
      (rc = cli_duration(OUTAGE_CMD, &o[OO_OUTAGE_START], &c->outage_start_ms)))
    return rc;
  if (o[OO_MAX_ATTEMPTS].seen) {
    if ((rc = cli_int(OUTAGE_CMD, &o[OO_MAX_ATTEMPTS], 1, 1000, &v))) return rc;
    c->max_attempts = (int32_t)v;
  }
  if (o[OO_BUDGET_RATIO].seen &&
      (rc = cli_double(OUTAGE_CMD, &o[OO_BUDGET_RATIO], 0, 1000, &c->budget.ratio)))
    return rc;
  if (o[OO_BUDGET_WINDOW].seen &&
      (rc = cli_duration(OUTAGE_CMD, &o[OO_BUDGET_WINDOW], &c->budget.window_ms)))
    return rc;
  if (o[OO_BUDGET_MIN].seen &&
      (rc = cli_double(OUTAGE_CMD, &o[OO_BUDGET_MIN], 0, 1e6, &c->budget.min_per_second)))
    return rc;
  *seeded = o[OO_SEED].seen;
  if (o[OO_SEED].seen && (rc = cli_u64(OUTAGE_CMD, &o[OO_SEED], &c->seed))) return rc;
  tk_err err;
  if (tk_sim_outage_config_validate(c, &err) != 0) {
    cli_error(OUTAGE_CMD, "invalid settings: %s", err.msg);
    return CLI_EXIT_USAGE;
  }
  return 0;
}

static const char *budget_label(const tk_retry_budget_config *b, char *buf, size_t len) {
  snprintf(buf, len, "%g+%g/s", b->ratio, b->min_per_second);
  return buf;
}

/* "1.07", or "-" when no first attempt fell in the phase. */
static void amp_cell(double v, int width) {
  if (isnan(v)) printf(" %*s", width, "-");
  else printf(" %*.2f", width, v);
}

/* A duration, to the second past a minute: "2.047s", "14m1s". */
static void duration_cell(int64_t ms, int width) {
  char buf[40];
  tk_duration_format(ms >= 60000 ? (ms + 500) / 1000 * 1000 : ms, buf, sizeof buf);
  printf(" %*s", width, buf);
}

static void print_outage_text(const outage_run *r) {
  const tk_sim_outage_config *c = &r->cfg;
  char dur[32], len[32], from[32], to[32], win[32], b[64];
  tk_duration_format(c->duration_ms, dur, sizeof dur);
  tk_duration_format(c->outage_ms, len, sizeof len);
  tk_duration_format(c->outage_start_ms, from, sizeof from);
  tk_duration_format(c->outage_start_ms + c->outage_ms, to, sizeof to);
  tk_duration_format(c->budget.window_ms, win, sizeof win);
  printf("outage: %g first attempts/s for %s; every call fails from %s to %s (%s); "
         "%d attempts per step; seed %" PRIu64 "\n",
         c->rate_per_s, dur, from, to, len, (int)c->max_attempts, c->seed);
  printf("budget %s: retries may spend %g of the first attempts over %s, plus %g/s\n",
         budget_label(&c->budget, b, sizeof b), c->budget.ratio, win, c->budget.min_per_second);
  printf("\n%-23s %26s\n", "", "calls per first attempt");
  printf("%-12s %-10s %8s %8s %8s %11s %10s %10s %9s %11s %7s\n", "profile", "budget", "during",
         "draining", "after", "drain", "succeeded", "exhausted", "deferred", "max wait",
         "peak/s");
  for (int k = 0; k < r->nprofiles; k++)
    for (int with = 0; with < 2; with++) {
      const tk_sim_outage_stats *st = &r->results[2 * k + with];
      printf("%-12s %-10s", r->names[k], with ? b : "none");
      amp_cell(st->during.amplification, 8);
      amp_cell(st->draining.amplification, 8);
      amp_cell(st->after.amplification, 8);
      duration_cell(st->drain_ms, 11);
      printf(" %10lld %10lld %9lld", (long long)st->succeeded, (long long)st->exhausted,
             (long long)st->deferred);
      duration_cell(st->max_wait_ms, 11);
      printf(" %7lld\n", (long long)st->peak_per_s);
    }
}

static json_t *phase_json(const tk_sim_phase *p) {
  return json_pack("{s:I, s:I, s:o}", "firsts", (json_int_t)p->firsts, "calls",
                   (json_int_t)p->calls, "amplification",
                   isnan(p->amplification) ? json_null() : json_real(p->amplification));
}

static int print_outage_json(const outage_run *r) {
  const tk_sim_outage_config *c = &r->cfg;
  json_t *profiles = json_array(), *results = json_array();
  for (int k = 0; k < r->nprofiles; k++) {
    json_array_append_new(profiles, json_string(r->names[k]));
    for (int with = 0; with < 2; with++) {
      const tk_sim_outage_stats *st = &r->results[2 * k + with];
      json_array_append_new(
          results,
          json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o}",
                    "profile", r->names[k], "budget", with, "steps", (json_int_t)st->steps,
                    "succeeded", (json_int_t)st->succeeded, "exhausted",
                    (json_int_t)st->exhausted, "deferred", (json_int_t)st->deferred,
                    "max_wait_ms", (json_int_t)st->max_wait_ms, "drain_ms",
                    (json_int_t)st->drain_ms, "finish_ms", (json_int_t)st->finish_ms,
                    "peak_calls_per_s", (json_int_t)st->peak_per_s, "before",
                    phase_json(&st->before), "during", phase_json(&st->during), "draining",
                    phase_json(&st->draining), "after", phase_json(&st->after)));
    }
  }
  json_t *budget = json_pack("{s:f, s:I, s:f}", "ratio", c->budget.ratio, "window_ms",
                             (json_int_t)c->budget.window_ms, "min_per_second",
                             c->budget.min_per_second);
  json_t *config = json_pack("{s:f, s:I, s:I, s:I, s:i, s:o, s:o}", "rate_per_s", c->rate_per_s,
                             "duration_ms", (json_int_t)c->duration_ms, "outage_start_ms",
                             (json_int_t)c->outage_start_ms, "outage_ms",
                             (json_int_t)c->outage_ms, "max_attempts", (int)c->max_attempts,
                             "budget", budget, "profiles", profiles);
  return print_json_root(json_pack("{s:s, s:o, s:o, s:o}", "scenario", "outage", "seed",
                                   seed_json(c->seed), "config", config, "results", results));
}

#define OUTAGE_PLOT_W 860
#define OUTAGE_PLOT_H 320
#define OUTAGE_MAX_POINTS 1200

/* Calls per second of one run, averaged over `group` seconds at a time so
 * that a long run stays a readable line. */
static void svg_series(FILE *f, const tk_sim_outage_stats *st, size_t group, double xscale,
                       double ytop, const char *color) {
  int x0 = 70, y0 = 60;
  fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
  for (size_t i = 0; i < st->seconds; i += group) {
    size_t n = st->seconds - i < group ? st->seconds - i : group;
    double sum = 0;
    for (size_t k = i; k < i + n; k++) sum += (double)st->per_second[k];
    fprintf(f, "%s%.1f,%.1f", i ? " " : "", x0 + ((double)i + n / 2.0) * xscale,
            y0 + OUTAGE_PLOT_H - sum / (double)n / ytop * OUTAGE_PLOT_H);
  }
  fprintf(f, "\"/>\n");
}

static int write_outage_svg(const outage_run *r, const char *path) {
  const tk_sim_outage_config *c = &r->cfg;
  int x0 = 70, y0 = 60, nruns = 2 * r->nprofiles;
  int legend_rows = (nruns + 2) / 3;
  FILE *f = svg_open(OUTAGE_CMD, path, SVG_W, y0 + OUTAGE_PLOT_H + 60 + 22 * legend_rows);
  if (f == NULL) return CLI_EXIT_FAILURE;
  size_t seconds = 1;
  double ymax = c->rate_per_s;
  for (int k = 0; k < nruns; k++) {
    const tk_sim_outage_stats *st = &r->results[k];
    if (st->seconds > seconds) seconds = st->seconds;
    if ((double)st->peak_per_s > ymax) ymax = (double)st->peak_per_s;
  }
  size_t group = (seconds + OUTAGE_MAX_POINTS - 1) / OUTAGE_MAX_POINTS;
  char title[160], b[64];
  snprintf(title, sizeof title, "downstream calls per second%s: %g first attempts/s, %d attempts "
           "per step, seed %" PRIu64,
           group > 1 ? " (mean per point)" : "", c->rate_per_s, (int)c->max_attempts, c->seed);
  double ytop = svg_frame(f, title, x0, y0, OUTAGE_PLOT_W, OUTAGE_PLOT_H, ymax);
  double xscale = (double)OUTAGE_PLOT_W / (double)seconds;
  /* The outage, shaded, and the arrival rate: the load a budget tends to. */
  fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#d62728\" "
          "fill-opacity=\"0.08\"/>\n",
          x0 + c->outage_start_ms / 1000.0 * xscale, y0, c->outage_ms / 1000.0 * xscale,
          OUTAGE_PLOT_H);
  fprintf(f, "<text x=\"%.1f\" y=\"%d\" fill=\"#d62728\">outage</text>\n",
          x0 + c->outage_start_ms / 1000.0 * xscale + 4, y0 + 14);
  double ry = y0 + OUTAGE_PLOT_H - c->rate_per_s / ytop * OUTAGE_PLOT_H;
  fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\" "
          "stroke-dasharray=\"4 4\"/>\n",
          x0, ry, x0 + OUTAGE_PLOT_W, ry);
  fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"ylabel\">first attempts</text>\n",
          x0 + OUTAGE_PLOT_W - 4, ry - 4);
  /* Ticks at round durations, about 8 of them. */
  static const int steps_s[] = {1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200,
                                14400, 21600, 43200, 86400};
  double xtick = steps_s[sizeof steps_s / sizeof steps_s[0] - 1];
  for (size_t i = 0; i < sizeof steps_s / sizeof steps_s[0]; i++)
    if (steps_s[i] * 8.0 >= (double)seconds) {
      xtick = steps_s[i];
      break;
    }
  for (double t = 0; t <= (double)seconds; t += xtick) {
    char label[32] = "0";
    if (t > 0) tk_duration_format((int64_t)(t * 1000), label, sizeof label);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"xlabel\">%s</text>\n", x0 + t * xscale,
            y0 + OUTAGE_PLOT_H + 16, label);
  }
  fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"xlabel\">time</text>\n", x0 + OUTAGE_PLOT_W / 2,
          y0 + OUTAGE_PLOT_H + 34);
  budget_label(&c->budget, b, sizeof b);
  /* Profile names are letters, digits, '_' and '-' (the configuration
   * checks), so labels need no XML escaping. */
  for (int k = 0; k < nruns; k++) {
    const char *color = colors[k % NCOLORS];
    svg_series(f, &r->results[k], group, xscale, ytop, color);
    char label[200];
    snprintf(label, sizeof label, "%s, %s", r->names[k / 2],
             k % 2 ? "budget " : "no budget");
    if (k % 2) strncat(label, b, sizeof label - strlen(label) - 1);
    svg_legend(f, x0 + (k % 3) * 300, y0 + OUTAGE_PLOT_H + 60 + 22 * (k / 3), color, label);
  }
  return svg_close(OUTAGE_CMD, f, path);
}

static int cmd_simulate_outage(cli_globals *g, int argc, char **argv) {
  cli_opt o[OO_COUNT] = {
      [OO_RATE] = {"rate", "RATE", NULL, 0},
      [OO_DURATION] = {"duration", "DURATION", NULL, 0},
      [OO_OUTAGE] = {"outage", "DURATION", NULL, 0},
      [OO_OUTAGE_START] = {"outage-start", "DURATION", NULL, 0},
      [OO_MAX_ATTEMPTS] = {"max-attempts", "N", NULL, 0},
      [OO_PROFILES] = {"profiles", "LIST", NULL, 0},
      [OO_BUDGET_RATIO] = {"budget-ratio", "X", NULL, 0},
      [OO_BUDGET_WINDOW] = {"budget-window", "DURATION", NULL, 0},
      [OO_BUDGET_MIN] = {"budget-min-per-second", "N", NULL, 0},
      [OO_SEED] = {"seed", "S", NULL, 0},
      [OO_SVG] = {"svg", "FILE", NULL, 0},
  };
  const char *pos[1];
  int npos;
  int rc = cli_parse(OUTAGE_CMD, o, OO_COUNT, argc, argv, pos, &npos, 0);
  if (rc) return rc;
  outage_run *r = calloc(1, sizeof *r);
  if (r == NULL) {
    cli_error(OUTAGE_CMD, "out of memory");
    return CLI_EXIT_FAILURE;
  }
  tk_sim_outage_config_default(&r->cfg);
  int seeded;
  tk_config *cfg = NULL;
  if ((rc = outage_flags(o, r, &seeded)) == 0 && (rc = cli_load_config(g, &cfg)) == 0 &&
      (rc = parse_profiles(&o[OO_PROFILES], cfg, r)) == 0) {
    if (!seeded) r->cfg.seed = tk_rand_entropy_seed();
    for (int k = 0; k < 2 * r->nprofiles && rc == 0; k++) {
      tk_err err;
      if (tk_simulate_outage(&r->cfg, &r->policies[k / 2], k % 2, &r->results[k], &err) != 0) {
        cli_error(OUTAGE_CMD, "profile \"%s\": %s", r->names[k / 2], err.msg);
        rc = CLI_EXIT_FAILURE;
      }
    }
    if (rc == 0 && o[OO_SVG].seen) rc = write_outage_svg(r, o[OO_SVG].value);
    if (rc == 0) {
      if (g->json) rc = print_outage_json(r);
      else print_outage_text(r);
    }
  }
  for (int k = 0; k < 2 * MAX_PROFILES; k++) tk_sim_outage_stats_free(&r->results[k]);
  free(r);
  tk_config_free(cfg);
  if (rc) return rc;
  return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

int cmd_simulate(cli_globals *g, int argc, char **argv) {
  if (argc > 0 && strcmp(argv[0], "outage") == 0) return cmd_simulate_outage(g, argc - 1, argv + 1);
  if (argc > 0 && strcmp(argv[0], "contention") == 0) argc--, argv++;
  cli_opt o[OPT_COUNT] = {
      [OPT_CLIENTS] = {"clients", "SPEC", NULL, 0},
      [OPT_TRIALS] = {"trials", "N", NULL, 0},
      [OPT_BASE] = {"base", "DURATION", NULL, 0},
      [OPT_CAP] = {"cap", "DURATION", NULL, 0},
      [OPT_MULTIPLIER] = {"multiplier", "X", NULL, 0},
      [OPT_JITTER_FRACTION] = {"jitter-fraction", "F", NULL, 0},
      [OPT_MAX_ATTEMPTS] = {"max-attempts", "N", NULL, 0},
      [OPT_LATENCY] = {"latency", "DURATION", NULL, 0},
      [OPT_LATENCY_SD] = {"latency-sd", "DURATION", NULL, 0},
      [OPT_POLICIES] = {"policies", "LIST", NULL, 0},
      [OPT_SEED] = {"seed", "S", NULL, 0},
      [OPT_SVG] = {"svg", "FILE", NULL, 0},
  };
  const char *pos[1];
  int npos;
  int rc = cli_parse("simulate", o, OPT_COUNT, argc, argv, pos, &npos, 0);
  if (rc) return rc;

  sweep s = {.from = 10, .to = 190, .step = 10, .npolicies = TK_SIM_POLICY_COUNT};
  for (int k = 0; k < TK_SIM_POLICY_COUNT; k++) s.policies[k] = (tk_sim_policy)k;
  tk_sim_config_default(&s.cfg);
  int seeded;
  if ((rc = parse_flags(o, &s, &seeded))) return rc;
  if (!seeded) s.cfg.seed = tk_rand_entropy_seed();

  if ((rc = run_sweep(&s)) == 0) {
    if (o[OPT_SVG].seen) rc = write_svg(&s, o[OPT_SVG].value);
    if (rc == 0) {
      if (g->json) rc = print_json(&s);
      else print_text(&s);
    }
  }
  free(s.stats);
  if (rc) return rc;
  return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}
