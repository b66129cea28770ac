/* tasker toml-decode: TOML on stdin to tagged JSON on stdout (the decoder
 * interface of the toml-test suite). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include <tasker/toml.h>

#include "toml/json.h"

const char cmd_toml_decode_usage[] =
    "usage: tasker toml-decode < FILE.toml\n"
    "\n"
    "Decode TOML on stdin and print it as tagged JSON (the toml-test format).\n";

int cmd_toml_decode(cli_globals *g, int argc, char **argv) {
  (void)g;
  const char *pos[1];
  int npos = 0;
  int rc = cli_parse("toml-decode", NULL, 0, argc, argv, pos, &npos, 0);
  if (rc != 0) return rc;
  tk_err err;
  tk_toml_doc *doc;
  tk_err_clear(&err);
  if (tk_toml_parse_stream(stdin, NULL, &doc, &err) != 0) {
    fprintf(stderr, "toml-decode: %s\n", tk_err_message(&err));
    return CLI_EXIT_FAILURE;
  }
  json_t *json = tk__toml_to_tagged_json(tk_toml_root(doc));
  tk_toml_free(doc);
  char *text = json ? json_dumps(json, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
  json_decref(json);
  if (text == NULL) {
    fprintf(stderr, "toml-decode: out of memory\n");
    return CLI_EXIT_FAILURE;
  }
  puts(text);
  free(text);
  return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}
