/* Flag parsing for subcommands: --name VALUE, --name=VALUE, booleans. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tasker/duration.h>

void cli_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tasker%s%s: ", cmd ? " " : "", cmd ? cmd : "");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static cli_opt *find_opt(cli_opt *opts, int nopts, const char *name, size_t len) {
  for (int i = 0; i < nopts; i++)
    if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0) return &opts[i];
  return NULL;
}

int cli_parse(const char *cmd, cli_opt *opts, int nopts, int argc, char **argv,
              const char **pos, int *npos, int maxpos) {
  *npos = 0;
  int only_positional = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (only_positional || a[0] != '-' || a[1] == '\0') {
      if (*npos >= maxpos) {
        cli_error(cmd, "unexpected argument \"%s\"", a);
        return CLI_EXIT_USAGE;
      }
      pos[(*npos)++] = a;
      continue;
    }
    if (strcmp(a, "--") == 0) {
      only_positional = 1;
      continue;
    }
    if (a[1] != '-') {
      cli_error(cmd, "unknown flag \"%s\" (flags are written --name)", a);
      return CLI_EXIT_USAGE;
    }
    const char *name = a + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    cli_opt *o = find_opt(opts, nopts, name, len);
    if (o == NULL) {
      cli_error(cmd, "unknown flag \"--%.*s\" (see tasker %s --help)", (int)len, name, cmd);
      return CLI_EXIT_USAGE;
    }
    o->seen++;
    if (o->metavar == NULL) {
      if (eq) {
        cli_error(cmd, "flag --%s takes no value, got \"%s\"", o->name, eq + 1);
        return CLI_EXIT_USAGE;
      }
      o->value = "1";
    } else if (eq) {
      o->value = eq + 1;
    } else if (i + 1 < argc) {
      o->value = argv[++i];
    } else {
      cli_error(cmd, "flag --%s needs a value (%s)", o->name, o->metavar);
      return CLI_EXIT_USAGE;
    }
  }
  return 0;
}

int cli_int(const char *cmd, const cli_opt *o, int64_t min, int64_t max, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(o->value, &end, 10);
  if (o->value[0] == '\0' || *end != '\0' || errno != 0 || v < min || v > max) {
    cli_error(cmd, "--%s: invalid value \"%s\": expected an integer from %lld to %lld",
              o->name, o->value, (long long)min, (long long)max);
    return CLI_EXIT_USAGE;
  }
  *out = v;
  return 0;
}

int cli_u64(const char *cmd, const cli_opt *o, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(o->value, &end, 0);
  if (o->value[0] == '\0' || o->value[0] == '-' || *end != '\0' || errno != 0) {
    cli_error(cmd, "--%s: invalid value \"%s\": expected an unsigned 64-bit integer",
              o->name, o->value);
    return CLI_EXIT_USAGE;
  }
  *out = v;
  return 0;
}

int cli_double(const char *cmd, const cli_opt *o, double min, double max, double *out) {
  char *end;
  errno = 0;
  double v = strtod(o->value, &end);
  if (o->value[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || v < min || v > max) {
    cli_error(cmd, "--%s: invalid value \"%s\": expected a number from %g to %g", o->name,
              o->value, min, max);
    return CLI_EXIT_USAGE;
  }
  *out = v;
  return 0;
}

int cli_duration(const char *cmd, const cli_opt *o, int64_t *out_ms) {
  tk_err err;
  if (tk_duration_parse(o->value, out_ms, &err) != 0) {
    cli_error(cmd, "--%s: %s", o->name, err.msg);
    return CLI_EXIT_USAGE;
  }
  return 0;
}
