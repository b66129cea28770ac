/* The placeholders of a map's instance (src/handlers/placeholder.c,
 * DESIGN §17): {{item}} with a path into the instance's element and
 * {{item_index}}, looked up in the input the store gives an instance
 * ({"context", "parents", "item", "item_index"}), typed, as text and
 * URL-encoded; refused with a message naming the placeholder when the
 * step is not an instance or the path is not in the element; and
 * {{item_index.x}} refused as it is compiled. The other sources are
 * tested through the http handler (test_http.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <tasker/error.h>

#include "handlers/placeholder.h"

/* The input of instance 3 of a map over files. */
static const char instance_input[] =
    "{\"context\":{\"batch\":\"b-1\"},\"parents\":{\"list\":{\"files\":[]}},"
    "\"item\":{\"path\":\"in/a b.csv\",\"size\":120,\"tags\":[\"x\",\"y\"],\"ok\":true},"
    "\"item_index\":3}";

/* text compiled and filled as text in scope sc (plain or URL-encoded):
 * its return code, with the text or the reason in out. */
static int expand(const char *text, json_t *input, tk__ph_encoding enc, char *out, size_t cap) {
  tk__ph_scope sc = {input, 42, "process", 1, NULL, NULL, NULL, NULL};
  tk__ph *t = NULL;
  int rc = tk__ph_compile(text, strlen(text), &t, out, cap);
  if (rc != 0) return rc;
  tk__buf b = {0};
  rc = tk__ph_expand(t, &sc, enc, &b, out, cap);
  if (rc == 0) snprintf(out, cap, "%.*s", (int)b.len, b.p ? b.p : "");
  tk__buf_free(&b);
  tk__ph_free(t);
  return rc;
}

static void expands_to(const char *text, const char *input, tk__ph_encoding enc,
                       const char *want) {
  json_t *in = input ? json_loads(input, 0, NULL) : NULL;
  char out[512];
  int rc = expand(text, in, enc, out, sizeof out);
  json_decref(in);
  if (rc != 0) fail_msg("%s: %d: %s", text, rc, out);
  assert_string_equal(out, want);
}

static void refused(const char *text, const char *input, int want_rc, const char *want) {
  json_t *in = input ? json_loads(input, 0, NULL) : NULL;
  char out[512];
  int rc = expand(text, in, TK__PH_PLAIN, out, sizeof out);
  json_decref(in);
  assert_int_equal(rc, want_rc);
  assert_string_equal(out, want);
}

/* The typed value of a single placeholder, compact JSON. */
static void value_is(const char *text, const char *want) {
  json_t *in = json_loads(instance_input, 0, NULL);
  tk__ph_scope sc = {in, 42, "process", 1, NULL, NULL, NULL, NULL};
  tk__ph *t = NULL;
  char why[256] = "";
  assert_int_equal(tk__ph_compile(text, strlen(text), &t, why, sizeof why), 0);
  assert_true(tk__ph_single(t));
  json_t *v = NULL;
  if (tk__ph_value(t, &sc, &v, why, sizeof why) != 0) fail_msg("%s: %s", text, why);
  char *got = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  assert_string_equal(got, want);
  free(got);
  json_decref(v);
  tk__ph_free(t);
  json_decref(in);
}

static void item_and_item_index_are_the_instances_element_and_position(void **state) {
  (void)state;
  value_is("{{item}}", "{\"path\":\"in/a b.csv\",\"size\":120,\"tags\":[\"x\",\"y\"],\"ok\":true}");
  value_is("{{ item.path }}", "\"in/a b.csv\"");
  value_is("{{item.tags.1}}", "\"y\"");
  value_is("{{item_index}}", "3");
  expands_to("file {{item.path}} ({{item.size}} bytes, {{item.ok}}) #{{item_index}} of "
             "{{context.batch}}",
             instance_input, TK__PH_PLAIN, "file in/a b.csv (120 bytes, true) #3 of b-1");
  expands_to("/files/{{item.path}}?i={{item_index}}", instance_input, TK__PH_URL,
             "/files/in%2Fa%20b.csv?i=3");
  /* An element that is itself a string or a number. */
  expands_to("{{item}}-{{item_index}}", "{\"item\":\"a.csv\",\"item_index\":0}", TK__PH_PLAIN,
             "a.csv-0");
  expands_to("{{item.start}}..{{item.end}}", "{\"item\":{\"start\":0,\"end\":1000},\"item_index\":0}",
             TK__PH_PLAIN, "0..1000");
}

static void a_json_body_gets_the_item_typed(void **state) {
  (void)state;
  json_t *in = json_loads(instance_input, 0, NULL);
  json_t *body = json_pack("{s:s, s:s, s:s}", "file", "{{item}}", "n", "{{item_index}}", "note",
                           "#{{item_index}}: {{item.path}}");
  tk__ph_scope sc = {in, 42, "process", 1, NULL, NULL, NULL, NULL};
  json_t *out = NULL;
  char why[256] = "";
  if (tk__ph_fill_json(body, &sc, &out, why, sizeof why) != 0) fail_msg("%s", why);
  char *got = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(got, "{\"file\":{\"ok\":true,\"path\":\"in/a b.csv\",\"size\":120,\"tags\":"
                           "[\"x\",\"y\"]},\"n\":3,\"note\":\"#3: in/a b.csv\"}");
  free(got);
  json_decref(out);
  json_decref(body);
  json_decref(in);
}

static void outside_an_instance_item_is_not_there(void **state) {
  (void)state;
  static const char ordinary[] = "{\"context\":{\"item\":1},\"parents\":{}}";
  refused("{{item}}", ordinary, TK_ENOENT,
          "{{item}}: this step is not an instance of a map (its input has no item)");
  refused("x {{item.path}}", ordinary, TK_ENOENT,
          "{{item.path}}: this step is not an instance of a map (its input has no item)");
  refused("{{item_index}}", ordinary, TK_ENOENT,
          "{{item_index}}: this step is not an instance of a map (its input has no item_index)");
  refused("{{item}}", NULL, TK_ENOENT,
          "{{item}}: this step is not an instance of a map (its input has no item)");
}

static void a_path_not_in_the_element_is_named(void **state) {
  (void)state;
  refused("{{item.name}}", instance_input, TK_ENOENT, "{{item.name}}: item has no member \"name\"");
  refused("{{item.tags.5}}", instance_input, TK_ENOENT,
          "{{item.tags.5}}: item.tags has 2 elements, no [5]");
  refused("{{item.size.x}}", instance_input, TK_ENOENT,
          "{{item.size.x}}: item.size is a number, which has no member \"x\"");
  refused("{{item.tags}}", instance_input, TK_EINVAL,
          "{{item.tags}} is an array; only a string, a number or a boolean can be written into "
          "text");
  /* A null element is there, and has no text. */
  refused("{{item}}", "{\"item\":null,\"item_index\":1}", TK_EINVAL,
          "{{item}} is null; only a string, a number or a boolean can be written into text");
}

static void item_index_takes_no_path_and_sources_are_listed(void **state) {
  (void)state;
  refused("{{item_index.a}}", instance_input, TK_ESYNTAX,
          "placeholder \"{{item_index.a}}\" (byte 1): item_index is a number and takes no path: "
          "{{item_index}}");
  refused("{{items}}", instance_input, TK_ESYNTAX,
          "placeholder \"{{items}}\" (byte 1): unknown source \"items\"; expected context.PATH, "
          "parents.STEP.PATH, item.PATH, item_index, env.NAME, task.id, task.step, "
          "task.attempt, task.callback_url or task.callback_token");
  refused("{{item.}}", instance_input, TK_ESYNTAX,
          "placeholder \"{{item.}}\" (byte 1): expected a name after \".\" (letters, digits, '_' "
          "or '-')");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(item_and_item_index_are_the_instances_element_and_position),
      cmocka_unit_test(a_json_body_gets_the_item_typed),
      cmocka_unit_test(outside_an_instance_item_is_not_there),
      cmocka_unit_test(a_path_not_in_the_element_is_named),
      cmocka_unit_test(item_index_takes_no_path_and_sources_are_listed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
