/* The http handler: one request per attempt through libcurl, its method,
 * URL, query, headers and body filled from the task by placeholders; 2xx
 * is success and a JSON body the step's results; 408, 425, 429 and 5xx
 * (but 501 and 505) and transport errors are retryable, with Retry-After
 * as the server's hint; the rest permanent; both lists per step
 * (docs/handlers.md). With workers, attempts are started here and driven
 * by the engine's reactor thread (http_reactor.c): a request in flight
 * holds no thread. Inline (no workers), an attempt blocks its caller. */
#include "handlers/http.h"

/* The compiled spec, and this engine's reactor (made with its first http
 * step, in the engine's slot for the kind). */
static void *prepare(const tk__handler_host *host, json_t *spec) {
  tk__http_global_init();
  tk__http_step *s = tk__http_compile(spec);
  if (s == NULL) return NULL; /* runs say out of memory */
  if (*host->shared == NULL) *host->shared = tk__http_reactor_new();
  s->reactor = *host->shared;
  return s;
}

static void release(void *prepared) { tk__http_step_free(prepared); }

static void close_engine(void *shared) { tk__http_reactor_free(shared); }

/* One attempt on the calling thread. */
static void run(const tk__handler_step *step, const tk_handler_call *call,
                tk_handler_result *out) {
  tk__http_req *r = tk__http_req_new(step->prepared, call, step, out);
  if (r == NULL) return;
  CURL *easy = curl_easy_init();
  if (easy == NULL) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "http: out of memory starting the request");
  } else if (tk__http_req_setup(r, easy) == 0) {
    tk__http_req_conclude(r, curl_easy_perform(easy));
  }
  tk__http_req_free(r);
  if (easy) curl_easy_cleanup(easy);
}

/* One attempt handed to the reactor; done when it ends (or at once, when
 * it cannot be sent). */
static void start(const tk__handler_step *step, const tk_handler_call *call,
                  tk_handler_result *out, tk__handler_done done, void *done_ud) {
  const tk__http_step *hs = step->prepared;
  tk__http_req *r = tk__http_req_new(hs, call, step, out);
  if (r == NULL) {
    done(done_ud);
    return;
  }
  if (hs->reactor == NULL) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "http: out of memory starting the request");
    tk__http_req_free(r);
    done(done_ud);
    return;
  }
  CURL *easy = tk__http_reactor_easy(hs->reactor);
  if (easy == NULL) {
    tk__handler_fail(out, TK_HANDLER_RETRY, "http: out of memory starting the request");
  } else if (tk__http_req_setup(r, easy) == 0) {
    if (tk__http_reactor_submit(hs->reactor, tk__http_req_transfer(r, done, done_ud)) == 0)
      return; /* the reactor calls done */
    tk__handler_fail(out, TK_HANDLER_RETRY, "http: cannot start the request thread");
  }
  tk__http_req_free(r);
  if (easy) curl_easy_cleanup(easy);
  done(done_ud);
}

const tk__handler_kind tk__http_kind = {
    .version = TK__HANDLER_KIND_VERSION,
    .name = "http",
    .takes_input = 1,
    .validate = tk__http_validate,
    .prepare = prepare,
    .release = release,
    .run = run,
    .start = start,
    .close = close_engine,
};
