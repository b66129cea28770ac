/* The dashboard's built-in files (scripts/embed-assets, server/assets.h):
 * every file is found at its path with its content type and exact bytes,
 * index.html names only files that are built in, nothing is fetched from
 * elsewhere, and no script writes markup (every API value goes into the
 * page as text). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "server/assets.h"

/* The generated table itself (not in the header: the server only looks
 * files up); its last entry has a NULL path. */
extern const tk__asset tk__assets[];

/* Whether the asset's bytes contain the NUL-terminated `needle`. */
static int asset_has(const tk__asset *a, const char *needle) {
  size_t n = strlen(needle);
  for (size_t i = 0; n <= a->len && i <= a->len - n; i++)
    if (memcmp(a->data + i, needle, n) == 0)
      return 1;
  return 0;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void every_file_is_found_with_its_type(void **state) {
  (void)state;
  int n = 0;
  for (const tk__asset *a = tk__assets; a->path; a++, n++) {
    assert_true(a->path[0] == '/');
    assert_true(a->len > 0);
    /* A NUL after the bytes, not counted; text holds no other. */
    assert_int_equal(a->data[a->len], 0);
    if (strncmp(a->content_type, "image/png", 9) != 0 && strncmp(a->content_type, "image/x-icon", 12) != 0)
      assert_int_equal(strlen((const char *)a->data), a->len);
    assert_ptr_equal(tk__asset_find(a->path), a);
    if (ends_with(a->path, ".html"))
      assert_string_equal(a->content_type, "text/html; charset=utf-8");
    else if (ends_with(a->path, ".js"))
      assert_string_equal(a->content_type, "text/javascript; charset=utf-8");
    else if (ends_with(a->path, ".css"))
      assert_string_equal(a->content_type, "text/css; charset=utf-8");
  }
  assert_true(n >= 3);
}

static void root_is_index_and_the_rest_is_not_found(void **state) {
  (void)state;
  const tk__asset *index = tk__asset_find("/index.html");
  assert_non_null(index);
  assert_ptr_equal(tk__asset_find("/"), index);
  assert_true(asset_has(index, "<!doctype html>"));
  assert_null(tk__asset_find(NULL));
  assert_null(tk__asset_find(""));
  assert_null(tk__asset_find("index.html"));
  assert_null(tk__asset_find("/index.html/"));
  assert_null(tk__asset_find("/INDEX.HTML"));
  assert_null(tk__asset_find("/../index.html"));
  assert_null(tk__asset_find("/missing.js"));
  assert_null(tk__asset_find("/api/v1/status"));
}

/* Each src="X" and href="X" of index.html names a built-in file. */
static void index_names_only_built_in_files(void **state) {
  (void)state;
  const tk__asset *index = tk__asset_find("/");
  const char *p = (const char *)index->data;
  int refs = 0;
  while ((p = strpbrk(p, "sh")) != NULL) {
    const char *attr = strncmp(p, "src=\"", 5) == 0 ? p + 5 : strncmp(p, "href=\"", 6) == 0 ? p + 6 : NULL;
    p++;
    if (!attr)
      continue;
    const char *end = strchr(attr, '"');
    assert_non_null(end);
    char path[128];
    int len = snprintf(path, sizeof path, "/%.*s", (int)(end - attr), attr);
    assert_true(len > 1 && (size_t)len < sizeof path);
    if (!tk__asset_find(path))
      fail_msg("index.html names %s, which is not built in", path);
    refs++;
  }
  assert_true(refs >= 2);
}

/* Nothing from elsewhere (the only URL is SVG's namespace name, which is
 * never fetched), and no script builds markup from strings. */
static void nothing_from_elsewhere_and_no_markup_from_strings(void **state) {
  (void)state;
  static const char *const banned[] = {"innerHTML", "outerHTML", "insertAdjacentHTML",
                                       "document.write", "eval(", "new Function"};
  for (const tk__asset *a = tk__assets; a->path; a++) {
    if (asset_has(a, "https://"))
      fail_msg("%s names an https:// URL", a->path);
    const char *p = (const char *)a->data;
    while ((p = strstr(p, "http://")) != NULL) {
      if (strncmp(p, "http://www.w3.org/2000/svg", 26) != 0)
        fail_msg("%s names a URL: %.40s", a->path, p);
      p++;
    }
    if (!ends_with(a->path, ".js"))
      continue;
    for (size_t i = 0; i < sizeof banned / sizeof banned[0]; i++)
      if (asset_has(a, banned[i]))
        fail_msg("%s uses %s: values must go into the page as text", a->path, banned[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_file_is_found_with_its_type),
      cmocka_unit_test(root_is_index_and_the_rest_is_not_found),
      cmocka_unit_test(index_names_only_built_in_files),
      cmocka_unit_test(nothing_from_elsewhere_and_no_markup_from_strings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
