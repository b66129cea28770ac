/* Claim tokens: see claim_token.h. */
#include "core/claim_token.h"

#include <string.h>

#include <nettle/base64.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>

#include <tasker/error.h>

/* The token's bytes: the claim id, big-endian, then the secret. */
#define RAW_LEN (8 + TK__CLAIM_SECRET_LEN)

_Static_assert(BASE64_ENCODE_RAW_LENGTH(RAW_LEN) == TK__CLAIM_TOKEN_LEN,
               "24 bytes are 32 base64 characters, with no padding");
_Static_assert(TK__CLAIM_HASH_LEN == SHA256_DIGEST_SIZE, "the hash is SHA-256");

int tk__claim_secret_new(unsigned char secret[TK__CLAIM_SECRET_LEN],
                         unsigned char hash[TK__CLAIM_HASH_LEN]) {
  int rc = tk__entropy(secret, TK__CLAIM_SECRET_LEN);
  if (rc == 0) tk__claim_secret_hash(secret, hash);
  return rc;
}

void tk__claim_secret_hash(const unsigned char secret[TK__CLAIM_SECRET_LEN],
                           unsigned char hash[TK__CLAIM_HASH_LEN]) {
  struct sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, TK__CLAIM_SECRET_LEN, secret);
  sha256_digest(&ctx, SHA256_DIGEST_SIZE, hash);
}

void tk__claim_token_format(int64_t claim_id, const unsigned char secret[TK__CLAIM_SECRET_LEN],
                            char *out) {
  uint8_t raw[RAW_LEN];
  uint64_t id = (uint64_t)claim_id;
  for (int i = 0; i < 8; i++) raw[i] = (uint8_t)(id >> (56 - 8 * i));
  memcpy(raw + 8, secret, TK__CLAIM_SECRET_LEN);
  struct base64_encode_ctx ctx;
  base64url_encode_init(&ctx);
  size_t n = base64_encode_update(&ctx, out, RAW_LEN, raw);
  n += base64_encode_final(&ctx, out + n);
  out[n] = '\0';
}

/* Whether c is of the URL-safe base64 alphabet. */
static int url_safe(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_';
}

int tk__claim_token_parse(const char *s, int64_t *claim_id,
                          unsigned char secret[TK__CLAIM_SECRET_LEN]) {
  /* The decoder would skip white space and take padding: check first
   * that s is exactly what format writes. */
  size_t len = s ? strnlen(s, TK__CLAIM_TOKEN_LEN + 1) : 0;
  if (len != TK__CLAIM_TOKEN_LEN) return TK_EINVAL;
  for (size_t i = 0; i < len; i++)
    if (!url_safe(s[i])) return TK_EINVAL;
  uint8_t raw[RAW_LEN + 2];
  size_t n = sizeof raw;
  struct base64_decode_ctx ctx;
  base64url_decode_init(&ctx);
  if (!base64_decode_update(&ctx, &n, raw, len, s) || !base64_decode_final(&ctx) ||
      n != RAW_LEN)
    return TK_EINVAL;
  uint64_t id = 0;
  for (int i = 0; i < 8; i++) id = id << 8 | raw[i];
  if (id == 0 || id > (uint64_t)INT64_MAX) return TK_EINVAL;
  *claim_id = (int64_t)id;
  memcpy(secret, raw + 8, TK__CLAIM_SECRET_LEN);
  return 0;
}

int tk__claim_secret_matches(const unsigned char secret[TK__CLAIM_SECRET_LEN],
                             const unsigned char stored[TK__CLAIM_HASH_LEN]) {
  unsigned char hash[TK__CLAIM_HASH_LEN];
  tk__claim_secret_hash(secret, hash);
  return memeql_sec(hash, stored, TK__CLAIM_HASH_LEN);
}
