/* The listening socket: "ADDR:PORT" or "[ADDR]:PORT" parsed, bound and
 * listened on here (not by libmicrohttpd) so a failure says why, and port
 * 0 reports the port the system chose. */
#include "server/server_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct listen_addr {
  int family;
  struct sockaddr_storage sa;
  socklen_t len;
  int loopback;
} listen_addr;

/* TK_EINVAL saying why `listen` is not an address and what is expected. */
static int bad(tk_err *err, const char *listen, const char *why) {
  return tk_err_set(err, TK_EINVAL,
                    "listen address \"%.200s\": %s: expected ADDR:PORT (e.g. 127.0.0.1:8080) or "
                    "[IPV6]:PORT (e.g. [::1]:8080), port 0 to 65535",
                    listen, why);
}

/* "ADDR:PORT" or "[ADDR]:PORT" into *a (numeric addresses only). */
static int parse(const char *listen, listen_addr *a, tk_err *err) {
  char host[64];
  const char *port;
  memset(a, 0, sizeof *a);
  if (listen[0] == '[') {
    const char *close = strchr(listen, ']');
    if (close == NULL || close[1] != ':') return bad(err, listen, "no \"]:\" after the IPv6 address");
    if ((size_t)(close - listen - 1) >= sizeof host) return bad(err, listen, "address too long");
    memcpy(host, listen + 1, (size_t)(close - listen - 1));
    host[close - listen - 1] = '\0';
    port = close + 2;
    a->family = AF_INET6;
  } else {
    const char *colon = strrchr(listen, ':');
    if (colon == NULL) return bad(err, listen, "no port");
    if ((size_t)(colon - listen) >= sizeof host) return bad(err, listen, "address too long");
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    if (strchr(host, ':')) return bad(err, listen, "an IPv6 address must be in brackets");
    port = colon + 1;
    a->family = AF_INET;
  }
  size_t plen = strlen(port);
  long p = plen > 0 && plen <= 5 && strspn(port, "0123456789") == plen ? strtol(port, NULL, 10) : -1;
  if (p < 0 || p > 65535) return bad(err, listen, "the port is not a number from 0 to 65535");
  if (a->family == AF_INET) {
    struct sockaddr_in *in = (struct sockaddr_in *)&a->sa;
    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)p);
    if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
      return bad(err, listen, "the address is not a numeric IPv4 address");
    a->loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    a->len = sizeof *in;
  } else {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a->sa;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)p);
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
      return bad(err, listen, "the address is not a numeric IPv6 address");
    a->loopback = memcmp(&in6->sin6_addr, &in6addr_loopback, sizeof in6addr_loopback) == 0;
    a->len = sizeof *in6;
  }
  return 0;
}

int tk__loopback_host(const char *host) {
  if (host == NULL) return 0;
  char name[64];
  size_t n;
  if (host[0] == '[') {
    const char *close = strchr(host, ']');
    if (close == NULL || (close[1] != '\0' && close[1] != ':')) return 0;
    n = (size_t)(close - host - 1);
    host++;
  } else {
    const char *colon = strchr(host, ':');
    n = colon ? (size_t)(colon - host) : strlen(host);
  }
  if (n >= sizeof name) return 0;
  memcpy(name, host, n);
  name[n] = '\0';
  struct in_addr v4;
  struct in6_addr v6;
  if (inet_pton(AF_INET, name, &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, name, &v6) == 1)
    return memcmp(&v6, &in6addr_loopback, sizeof v6) == 0;
  for (char *p = name; *p; p++)
    if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
  return strcmp(name, "localhost") == 0;
}

int tk_server_listen_check(const char *listen, int *loopback, tk_err *err) {
  listen_addr a;
  int rc = parse(listen ? listen : TK_SERVER_DEFAULT_LISTEN, &a, err);
  if (rc == 0 && loopback) *loopback = a.loopback;
  return rc;
}

int tk_server_listen_allowed(const char *listen, const char *token, tk_err *err) {
  int loopback;
  if (listen == NULL) listen = TK_SERVER_DEFAULT_LISTEN;
  int rc = tk_server_listen_check(listen, &loopback, err);
  if (rc == 0 && !loopback && (token == NULL || token[0] == '\0'))
    rc = tk_err_set(err, TK_EINVAL,
                    "listen address \"%.200s\" is not loopback: serving beyond this machine "
                    "requires a token (--token-file PATH or TASKER_TOKEN)",
                    listen);
  return rc;
}

int tk__listen_open(const char *where, int *fd, char *addr, size_t addrlen, int *port,
                    int *ipv6, tk_err *err) {
  listen_addr a;
  int rc = parse(where, &a, err);
  if (rc) return rc;
  int s = socket(a.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return tk_err_set(err, TK_EIO, "listen on %s: socket: %s", where, strerror(errno));
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (a.family == AF_INET6) setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  if (bind(s, (struct sockaddr *)&a.sa, a.len) != 0 || listen(s, 64) != 0 ||
      getsockname(s, (struct sockaddr *)&bound, &blen) != 0) {
    int e = errno;
    close(s);
    return tk_err_set(err, TK_EIO, "cannot listen on %s: %s", where, strerror(e));
  }
  char host[INET6_ADDRSTRLEN];
  if (a.family == AF_INET) {
    struct sockaddr_in *in = (struct sockaddr_in *)&bound;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    *port = ntohs(in->sin_port);
    snprintf(addr, addrlen, "%s:%d", host, *port);
  } else {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&bound;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    *port = ntohs(in6->sin6_port);
    snprintf(addr, addrlen, "[%s]:%d", host, *port);
  }
  *ipv6 = a.family == AF_INET6;
  *fd = s;
  return 0;
}
