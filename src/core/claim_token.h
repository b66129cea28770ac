/* Claim tokens (DESIGN §19): what an outside worker holds for a claim, and
 * the one place they are made, read and checked (issue 24's callback
 * tokens are made the same way).
 *
 * A token is the claim's id (its attempts row) and a 128-bit random
 * secret, 24 bytes in URL-safe base64 without padding: 32 characters. The
 * store keeps only the secret's SHA-256 (nettle), so neither a copy of the
 * database nor a report can be turned back into a token; the hash is
 * compared in constant time. */
#ifndef TASKER_CORE_CLAIM_TOKEN_H
#define TASKER_CORE_CLAIM_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#define TK__CLAIM_SECRET_LEN 16
#define TK__CLAIM_HASH_LEN 32  /* SHA-256; the store's TK__TOKEN_HASH_LEN */
#define TK__CLAIM_TOKEN_LEN 32 /* characters, without the NUL */

/* n bytes from the kernel's random source (rand.c): 0, or TK_EIO when it
 * cannot give them (never a weaker fallback: these are secrets). */
int tk__entropy(void *buf, size_t n);

/* A new random secret and its hash. 0, or TK_EIO. */
int tk__claim_secret_new(unsigned char secret[TK__CLAIM_SECRET_LEN],
                         unsigned char hash[TK__CLAIM_HASH_LEN]);

/* The SHA-256 of a secret. */
void tk__claim_secret_hash(const unsigned char secret[TK__CLAIM_SECRET_LEN],
                           unsigned char hash[TK__CLAIM_HASH_LEN]);

/* The token of claim claim_id with secret into out (at least
 * TK__CLAIM_TOKEN_LEN + 1 bytes). */
void tk__claim_token_format(int64_t claim_id, const unsigned char secret[TK__CLAIM_SECRET_LEN],
                            char *out);

/* Read a token: 0 with its claim id (> 0) and secret, or TK_EINVAL when s
 * is not one (length, alphabet, a claim id <= 0). */
int tk__claim_token_parse(const char *s, int64_t *claim_id,
                          unsigned char secret[TK__CLAIM_SECRET_LEN]);

/* Whether secret hashes to stored (1) or not (0), in time independent of
 * where they differ. */
int tk__claim_secret_matches(const unsigned char secret[TK__CLAIM_SECRET_LEN],
                             const unsigned char stored[TK__CLAIM_HASH_LEN]);

#endif
