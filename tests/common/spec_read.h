/* cmocka helpers for the handler kinds' tests: read a handler table, as a
 * template would, from the text of a TOML inline table. Include after
 * <cmocka.h>. */
#ifndef TESTS_SPEC_READ_H
#define TESTS_SPEC_READ_H

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include <tasker/toml.h>

#include "handlers/handler.h"

/* Read the handler table `handler` (TOML inline table text) into a spec
 * as a template would, or fail the test with the error. */
static inline json_t *spec_of(const char *handler) {
  char text[4096];
  snprintf(text, sizeof text, "h = %s\n", handler);
  tk_toml_doc *doc;
  tk_err err;
  if (tk_toml_parse(text, strlen(text), "t.toml", &doc, &err) != 0) fail_msg("%s", err.msg);
  tk__handler_site site = {{"t.toml", "steps[1].handler", &err}, "steps[1]", NULL};
  json_t *spec = NULL;
  if (tk__handler_spec_read(&site, tk_toml_get(tk_toml_root(doc), "h"), &spec) != 0)
    fail_msg("%s", err.msg);
  tk_toml_free(doc);
  return spec;
}

/* The error a handler table gets at template time. */
static inline void expect_spec_error(const char *handler, const char *want) {
  char text[4096];
  snprintf(text, sizeof text, "h = %s\n", handler);
  tk_toml_doc *doc;
  tk_err err;
  assert_int_equal(tk_toml_parse(text, strlen(text), "t.toml", &doc, &err), 0);
  tk__handler_site site = {{"t.toml", "steps[1].handler", &err}, "steps[1]", NULL};
  json_t *spec = NULL;
  assert_int_equal(tk__handler_spec_read(&site, tk_toml_get(tk_toml_root(doc), "h"), &spec),
                   TK_ECONFIG);
  assert_null(spec);
  assert_string_equal(err.msg, want);
  tk_toml_free(doc);
}

#endif
