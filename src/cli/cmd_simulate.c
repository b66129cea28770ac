/* tasker simulate: N clients contending for one versioned slot under each
 * retry policy, on simulated time. The model lives in the library
 * (tk_simulate); this file parses flags and prints tables, JSON or SVG. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/duration.h>
#include <tasker/rand.h>
#include <tasker/simulate.h>

const char cmd_simulate_usage[] =
    "usage: tasker simulate [--clients FROM:TO:STEP] [--trials N] [options]\n"
    "\n"
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
    "linear is a naive client outside tasker: base * n, at most 3 retries.\n";

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
  /* JSON integers are signed: a seed above INT64_MAX is written as text. */
  char seed_text[24];
  snprintf(seed_text, sizeof seed_text, "%" PRIu64, c->seed);
  json_t *seed = c->seed > (uint64_t)INT64_MAX ? json_string(seed_text)
                                                : json_integer((json_int_t)c->seed);
  json_t *root = json_pack("{s:o, s:o, s:o}", "seed", seed, "config", config, "results", results);
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

/* ---- SVG ---- */

#define SVG_W 1030
#define SVG_H 470
#define PANEL_W 420
#define PANEL_H 320

static const char *const colors[TK_SIM_POLICY_COUNT] = {
    "#d62728", "#ff7f0e", "#2ca02c", "#1f77b4", "#9467bd", "#8c564b", "#7f7f7f"};

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

/* One chart: metric m (scaled by `scale`) against clients. */
static void svg_panel(FILE *f, const sweep *s, int m, double scale, const char *title, int x0,
                      int y0) {
  double ymax = 0;
  for (int i = 0; i < s->npoints; i++)
    for (int k = 0; k < s->npolicies; k++) {
      double v = metric(at(s, i, k), m) * scale;
      if (v > ymax) ymax = v;
    }
  double ytick = nice_ceil(ymax / 5);
  int nyticks = ymax > 0 ? (int)(ymax / ytick + 0.999999) : 1;
  double ytop = ytick * nyticks;
  double xspan = s->to > s->from ? (double)(s->to - s->from) : 1.0;
#define PX(cl) (x0 + ((double)(cl) - s->from) / xspan * PANEL_W)
#define PY(v) (y0 + PANEL_H - (v) / ytop * PANEL_H)
  fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"title\">%s</text>\n", x0, y0 - 14, title);
  fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"frame\"/>\n", x0, y0,
          PANEL_W, PANEL_H);
  for (int t = 0; t <= nyticks; t++) {
    double y = PY(t * ytick);
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>\n", x0, y,
            x0 + PANEL_W, y);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"ylabel\">%g</text>\n", x0 - 6, y + 4,
            t * ytick);
  }
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
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    cli_error("simulate", "--svg: cannot write \"%s\": %s", path, strerror(errno));
    return CLI_EXIT_FAILURE;
  }
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
          "<style>.title{font-size:14px;font-weight:bold}.frame{fill:none;stroke:#333}"
          ".grid{stroke:#ddd}.ylabel{text-anchor:end}.xlabel{text-anchor:middle}"
          "</style>\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
          SVG_W, SVG_H, SVG_W, SVG_H);
  fprintf(f, "<text x=\"%d\" y=\"22\" class=\"title\">clients contending for one slot: %d "
          "trials per point, %d attempts per client, seed %" PRIu64 "</text>\n",
          60, (int)s->cfg.trials, (int)s->cfg.max_attempts, s->cfg.seed);
  svg_panel(f, s, METRIC_CALLS, 1.0, "mean total calls (reads + writes)", 70, 60);
  svg_panel(f, s, METRIC_TIME, 0.001, "mean completion time (seconds)", 70 + PANEL_W + 90, 60);
  int lx = 70, ly = 60 + PANEL_H + 56;
  for (int k = 0; k < s->npolicies; k++) {
    int x = lx + k * 125;
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>"
            "<text x=\"%d\" y=\"%d\">%s</text>\n",
            x, ly, x + 22, ly, colors[s->policies[k]], x + 28, ly + 4,
            tk_sim_policy_name(s->policies[k]));
  }
  fprintf(f, "</svg>\n");
  if (ferror(f) | (fclose(f) != 0)) {
    cli_error("simulate", "--svg: cannot write \"%s\": %s", path, strerror(errno));
    return CLI_EXIT_FAILURE;
  }
  return 0;
}

int cmd_simulate(cli_globals *g, int argc, char **argv) {
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
