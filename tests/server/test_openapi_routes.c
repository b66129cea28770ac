/* The OpenAPI document built into the server (src/server/api_docs,
 * docs/api.md "The OpenAPI document") against the server's own router
 * (tk__route_parse): every documented path and method is one the router
 * takes, every method a documented path leaves out is refused there with
 * 405, and every route the router has is reached by some documented path
 * (a route left out of the document fails here, named). What each route
 * answers is checked against the document over HTTP by
 * tests/server/openapi.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "server/assets.h"
#include "server/request_parse.h"

/* The document as built in, parsed. */
static json_t *document(void) {
  const tk__asset *doc = tk__api_doc_find("/openapi.json");
  assert_non_null(doc);
  assert_string_equal(doc->content_type, "application/json");
  json_error_t je;
  json_t *j = json_loadb((const char *)doc->data, doc->len, JSON_REJECT_DUPLICATES, &je);
  if (j == NULL) fail_msg("openapi.json: line %d, column %d: %s", je.line, je.column, je.text);
  return j;
}

/* The path template with each {param} replaced by a value the router
 * takes for it (a task id, a step, an action, a template's name, a
 * queue, a claim token). */
static void example_path(const char *tmpl, char *out, size_t size) {
  static const char *const values[][2] = {
      {"{id}", "12"},          {"{step}", "load"},
      {"{action}", "retry"},   {"{name}", "ops/etl"},
      {"{queue}", "images"},   {"{token}", "AAAAAAAAAAEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}};
  size_t n = 0;
  out[0] = '\0';
  for (const char *p = tmpl; *p;) {
    size_t i, k = sizeof values / sizeof values[0];
    for (i = 0; i < k && strncmp(p, values[i][0], strlen(values[i][0])) != 0; i++) {}
    if (*p == '{' && i == k) fail_msg("%s: a path parameter this test has no value for", tmpl);
    const char *piece = i < k ? values[i][1] : p;
    size_t len = i < k ? strlen(piece) : 1;
    assert_true(n + len < size);
    memcpy(out + n, piece, len);
    out[n += len] = '\0';
    p += i < k ? strlen(values[i][0]) : 1;
  }
}

/* Route method and uri: the route's id, or 0 with *status the refusal's. */
static int route(const char *method, const char *uri, int *status) {
  tk__route r;
  tk__api_error e;
  const char *allow;
  *status = 200;
  if (tk__route_parse(method, uri, strlen(uri), &r, &allow, &e) == 0) return (int)r.id;
  *status = e.status;
  return 0;
}

static void documented_methods_route_and_others_are_refused(void **state) {
  (void)state;
  json_t *doc = document(), *ops;
  const char *tmpl;
  int paths = 0;
  json_object_foreach(json_object_get(doc, "paths"), tmpl, ops) {
    char uri[512];
    example_path(tmpl, uri, sizeof uri);
    static const char *const methods[][2] = {{"get", "GET"}, {"post", "POST"}};
    for (size_t m = 0; m < 2; m++) {
      int status, id = route(methods[m][1], uri, &status);
      int documented = json_object_get(ops, methods[m][0]) != NULL;
      if (documented && (id == 0 || id == TK__R_ASSET))
        fail_msg("%s %s (documented): the router answers %d, not a route of its own", methods[m][1],
                 uri, id ? 200 : status);
      if (!documented && status != 405)
        fail_msg("%s %s is not documented but the router %s", methods[m][1], uri,
                 id ? "takes it" : "does not refuse it with 405");
    }
    /* HEAD wherever GET (the document says so once, in info). */
    int status;
    if (json_object_get(ops, "get") && route("HEAD", uri, &status) == 0)
      fail_msg("HEAD %s: %d, while GET is documented", uri, status);
    paths++;
  }
  assert_true(paths >= 10);
  json_decref(doc);
}

static void every_route_is_documented(void **state) {
  (void)state;
  json_t *doc = document(), *ops;
  const char *tmpl;
  int reached[TK__R_ASSET + 1] = {0};
  json_object_foreach(json_object_get(doc, "paths"), tmpl, ops) {
    char uri[512];
    int status;
    example_path(tmpl, uri, sizeof uri);
    if (json_object_get(ops, "get")) reached[route("GET", uri, &status)] = 1;
    if (json_object_get(ops, "post")) reached[route("POST", uri, &status)] = 1;
  }
  /* The dashboard's files are not the API: the only route left out. */
  int missing = 0;
  for (int id = TK__R_STATUS; id < TK__R_ASSET; id++) {
    assert_non_null(tk__route_name((tk__route_id)id));
    if (!reached[id]) {
      print_message("# not in src/server/api_docs/openapi.json: %s\n",
                    tk__route_name((tk__route_id)id));
      missing++;
    }
  }
  if (missing) fail_msg("%d route(s) of the server are not documented (listed above)", missing);
  json_decref(doc);
}

/* The GET and POST of /api/v1/tasks are one route: both must be there. */
static void both_methods_of_a_route_are_documented(void **state) {
  (void)state;
  json_t *doc = document();
  json_t *tasks = json_object_get(json_object_get(doc, "paths"), "/api/v1/tasks");
  assert_non_null(json_object_get(tasks, "get"));
  assert_non_null(json_object_get(tasks, "post"));
  assert_string_equal(json_string_value(json_object_get(doc, "openapi")), "3.1.0");
  json_decref(doc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(documented_methods_route_and_others_are_refused),
      cmocka_unit_test(every_route_is_documented),
      cmocka_unit_test(both_methods_of_a_route_are_documented),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
