/* Claim tokens (core/claim_token.c): a token reads back as its claim id
 * and secret, a tampered or malformed one is refused, and a secret matches
 * only its own hash. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include <tasker/error.h>

#include "core/claim_token.h"

static void round_trip(void **state) {
  (void)state;
  const int64_t ids[] = {1, 255, 256, INT64_C(123456789012), INT64_MAX};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    unsigned char secret[TK__CLAIM_SECRET_LEN], hash[TK__CLAIM_HASH_LEN];
    assert_int_equal(tk__claim_secret_new(secret, hash), 0);
    char token[TK__CLAIM_TOKEN_LEN + 1];
    tk__claim_token_format(ids[i], secret, token);
    assert_int_equal(strlen(token), TK__CLAIM_TOKEN_LEN);
    assert_int_equal(strspn(token, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                   "0123456789-_"),
                     TK__CLAIM_TOKEN_LEN);
    int64_t id = 0;
    unsigned char back[TK__CLAIM_SECRET_LEN];
    assert_int_equal(tk__claim_token_parse(token, &id, back), 0);
    assert_int_equal(id, ids[i]);
    assert_memory_equal(back, secret, sizeof secret);
    assert_true(tk__claim_secret_matches(back, hash));
  }
}

/* Two secrets are never the same (128 random bits), and the hash is
 * SHA-256's (the empty-prefix check of a known vector). */
static void secrets_and_hash(void **state) {
  (void)state;
  unsigned char a[TK__CLAIM_SECRET_LEN], b[TK__CLAIM_SECRET_LEN];
  unsigned char ha[TK__CLAIM_HASH_LEN], hb[TK__CLAIM_HASH_LEN];
  assert_int_equal(tk__claim_secret_new(a, ha), 0);
  assert_int_equal(tk__claim_secret_new(b, hb), 0);
  assert_memory_not_equal(a, b, sizeof a);
  assert_false(tk__claim_secret_matches(a, hb));
  /* SHA-256 of 16 zero bytes. */
  static const unsigned char zero_hash[TK__CLAIM_HASH_LEN] = {
      0x37, 0x47, 0x08, 0xff, 0xf7, 0x71, 0x9d, 0xd5, 0x97, 0x9e, 0xc8, 0x75, 0xd5, 0x6c, 0xd2, 0x28,
      0x6f, 0x6d, 0x3c, 0xf7, 0xec, 0x31, 0x7a, 0x3b, 0x25, 0x63, 0x2a, 0xab, 0x28, 0xec, 0x37, 0xbb};
  unsigned char zero[TK__CLAIM_SECRET_LEN] = {0}, h[TK__CLAIM_HASH_LEN];
  tk__claim_secret_hash(zero, h);
  assert_memory_equal(h, zero_hash, sizeof h);
  assert_true(tk__claim_secret_matches(zero, zero_hash));
}

/* Any changed character changes the claim id or the secret (or makes it
 * no token at all): the secret then no longer matches. */
static void tampering_is_refused(void **state) {
  (void)state;
  unsigned char secret[TK__CLAIM_SECRET_LEN], hash[TK__CLAIM_HASH_LEN];
  assert_int_equal(tk__claim_secret_new(secret, hash), 0);
  char token[TK__CLAIM_TOKEN_LEN + 1];
  tk__claim_token_format(42, secret, token);
  for (int i = 0; i < TK__CLAIM_TOKEN_LEN; i++) {
    char t[TK__CLAIM_TOKEN_LEN + 1];
    memcpy(t, token, sizeof t);
    t[i] = t[i] == 'x' ? 'y' : 'x';
    int64_t id = 0;
    unsigned char back[TK__CLAIM_SECRET_LEN];
    if (tk__claim_token_parse(t, &id, back) != 0) continue;
    assert_false(id == 42 && tk__claim_secret_matches(back, hash));
  }
  const char *bad[] = {"", "short", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" /* id 0 */,
                       "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAA AAAAAAAAAAAAAAA",
                       "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA+/", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                       "_____________________________________"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t id;
    unsigned char back[TK__CLAIM_SECRET_LEN];
    assert_int_equal(tk__claim_token_parse(bad[i], &id, back), TK_EINVAL);
  }
  int64_t id;
  unsigned char back[TK__CLAIM_SECRET_LEN];
  assert_int_equal(tk__claim_token_parse(NULL, &id, back), TK_EINVAL);
  /* A claim id past INT64_MAX (high bit set). */
  assert_int_equal(tk__claim_token_parse("gAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", &id, back), TK_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(round_trip),
      cmocka_unit_test(secrets_and_hash),
      cmocka_unit_test(tampering_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
