/* The HTTPS server of tls_stub.h: `openssl req -x509` makes the key and
 * the certificate into the caller's directory, libmicrohttpd serves them
 * from memory on a loopback socket of our own. */
#define _GNU_SOURCE
#include "tls_stub.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <microhttpd.h>

extern char **environ;

struct tls_stub {
  struct MHD_Daemon *daemon;
  int fd, port;
  char *key, *cert; /* PEM text: the daemon reads it while it runs */
  char cert_path[512];
  _Atomic int count;
};

/* The whole of a file, NUL-terminated and malloc'd; NULL if unreadable. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  char *text = NULL;
  size_t len = 0, cap = 0, n;
  char buf[4096];
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      char *bigger = realloc(text, cap);
      if (bigger == NULL) break;
      text = bigger;
    }
    memcpy(text + len, buf, n);
    len += n;
  }
  fclose(f);
  if (text) text[len] = '\0';
  return text;
}

/* Run `openssl req` to make dir/key.pem and dir/cert.pem for `name`; 0,
 * or -1 with why (its stderr, from dir/openssl.err). */
static int make_certificate(const char *dir, const char *name, char *why, size_t len) {
  char key[512], cert[512], err[512], subject[300], san[300];
  snprintf(key, sizeof key, "%s/key.pem", dir);
  snprintf(cert, sizeof cert, "%s/cert.pem", dir);
  snprintf(err, sizeof err, "%s/openssl.err", dir);
  snprintf(subject, sizeof subject, "/CN=%s", name);
  snprintf(san, sizeof san, "subjectAltName=DNS:%s", name);
  /* EC P-256: made at once, where an RSA key takes a while. */
  char *argv[] = {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                  "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                  "-days", "2", "-subj", subject, "-addext", san, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  int rc = posix_spawnp(&pid, "openssl", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    snprintf(why, len, "cannot run openssl (%s); scripts/ensure-deps installs it",
             strerror(rc));
    return -1;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    char *said = slurp(err);
    snprintf(why, len, "openssl req failed (status %d): %s", status, said ? said : "");
    free(said);
    return -1;
  }
  return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
  (void)url, (void)method, (void)version, (void)upload_data, (void)upload_data_size;
  (void)con_cls;
  tls_stub *s = cls;
  static const char body[] = "{\"tls\": true}";
  struct MHD_Response *r =
      MHD_create_response_from_buffer(sizeof body - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
  if (r == NULL) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", "application/json");
  s->count++;
  enum MHD_Result ok = MHD_queue_response(c, 200, r);
  MHD_destroy_response(r);
  return ok;
}

/* A listening socket on 127.0.0.1, any free port; -1 on failure. */
static int listen_loopback(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

tls_stub *tls_stub_start(const char *dir, const char *name, char *why, size_t len) {
  if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    snprintf(why, len, "this libmicrohttpd was built without TLS");
    return NULL;
  }
  if (make_certificate(dir, name, why, len) != 0) return NULL;
  tls_stub *s = calloc(1, sizeof *s);
  if (s == NULL) {
    snprintf(why, len, "out of memory");
    return NULL;
  }
  char key[512];
  snprintf(key, sizeof key, "%s/key.pem", dir);
  snprintf(s->cert_path, sizeof s->cert_path, "%s/cert.pem", dir);
  s->key = slurp(key);
  s->cert = slurp(s->cert_path);
  s->fd = listen_loopback(&s->port);
  if (s->key && s->cert && s->fd >= 0)
    s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_TLS, 0, NULL, NULL,
                                 on_request, s, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)s->fd,
                                 MHD_OPTION_HTTPS_MEM_KEY, s->key, MHD_OPTION_HTTPS_MEM_CERT,
                                 s->cert, MHD_OPTION_END);
  if (s->daemon == NULL) {
    snprintf(why, len, "%s", s->key == NULL || s->cert == NULL ? "openssl wrote no key or certificate"
                             : s->fd < 0 ? "cannot listen on 127.0.0.1"
                                         : "libmicrohttpd refused the key or the certificate");
    tls_stub_stop(s);
    return NULL;
  }
  return s;
}

int tls_stub_port(const tls_stub *s) { return s->port; }

const char *tls_stub_cert(const tls_stub *s) { return s->cert_path; }

int tls_stub_count(const tls_stub *s) { return s->count; }

void tls_stub_stop(tls_stub *s) {
  if (s == NULL) return;
  if (s->daemon) MHD_stop_daemon(s->daemon); /* closes the listening socket too */
  else if (s->fd >= 0) close(s->fd);
  free(s->key);
  free(s->cert);
  free(s);
}
