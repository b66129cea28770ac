/* Test helper: an HTTPS server on loopback with a self-signed certificate
 * made at start, for the tests that prove TLS is verified (a certificate
 * nobody trusts is refused, one trusted through ca_file is accepted, a
 * host name the certificate does not name is refused). libmicrohttpd
 * (built with GnuTLS on Debian) speaks the TLS; Debian's `openssl`
 * command makes the key and the certificate, so each run has its own. */
#ifndef TESTS_TLS_STUB_H
#define TESTS_TLS_STUB_H

#include <stddef.h>

typedef struct tls_stub tls_stub;

/* Make a key and a self-signed certificate whose only subject name is the
 * DNS name `name` (no IP address) in `dir` (key.pem, cert.pem), and serve
 * HTTPS with them on 127.0.0.1 on a free port: every request gets 200
 * with the body {"tls": true}. NULL when it cannot, with the reason (the
 * openssl command's own words included) in why. */
tls_stub *tls_stub_start(const char *dir, const char *name, char *why, size_t len);

/* Its port. */
int tls_stub_port(const tls_stub *s);

/* The certificate's PEM file: what a client trusts the server by. */
const char *tls_stub_cert(const tls_stub *s);

/* Requests that reached the server over a finished handshake. */
int tls_stub_count(const tls_stub *s);

/* Stop the server and free it (NULL: nothing). */
void tls_stub_stop(tls_stub *s);

#endif
