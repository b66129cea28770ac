#!/bin/sh
# The OpenAPI document (docs/api.md "The OpenAPI document") as a real
# `tasker serve` serves it, over a real SQLite store with tasks in several
# states: a task in error (a step exhausted), one complete (a template in a
# namespace), a decision's task with a step failed for good, a map's task
# with an instance failed, one pending and one cancelled, and two whose
# step waits for a worker; [queues.payments] limits a queue (GET /api/v1/queues);
# ops/quick's step names the budget api, whose state is stored (GET /api/v1/budgets).
# - validate.mjs: GET /api/v1/openapi.json (application/json, info.version
#   the binary's) is valid OpenAPI 3.1 by the pinned validator from the npm
#   registry (tests/server/openapi/package-lock.json), its schemas compile,
#   and the validator refuses broken copies;
# - conform.mjs: every documented operation called, each answer's status,
#   type and body checked against the document, and the parameters the
#   server takes or refuses against the document's bounds (a second server
#   with a token for the 401s).
# The packages are installed with `npm ci` into the build directory. No
# node, npm, or no registry to install from: the test FAILS, saying so
# (make test installs nodejs and npm; the registry must be reachable).
# tests/server/test_openapi_routes.c checks that every route is documented.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
sqlite_store
HERE=$(cd "$(dirname "$0")/openapi" && pwd)
NPM_DIR=$(cd "$(dirname "$TASKER")/.." && pwd)/npm/openapi
. "$(dirname "$0")/../lib/serve.sh"

# stop_here NAME WHY...: a failure the rest cannot run without.
stop_here() {
  tap_fail "$@"
  tap_done
  exit 1
}

# The validator, pinned by the lock file, installed once per lock file.
for tool in node npm; do
  command -v "$tool" >/dev/null 2>&1 ||
    stop_here "$tool is installed" "no $tool on PATH: make test installs Debian's nodejs and npm (make server-deps)"
done
mkdir -p "$NPM_DIR"
cp "$HERE"/*.mjs "$NPM_DIR/"
if ! cmp -s "$HERE/package-lock.json" "$NPM_DIR/installed.lock" || [ ! -d "$NPM_DIR/node_modules" ]; then
  cp "$HERE/package.json" "$HERE/package-lock.json" "$NPM_DIR/"
  if (cd "$NPM_DIR" && npm ci --ignore-scripts --no-audit --no-fund) >"$W/npm.out" 2>&1; then
    cp "$HERE/package-lock.json" "$NPM_DIR/installed.lock"
  else
    stop_here "npm ci installs the pinned validator" \
      "npm ci failed in $NPM_DIR: could the npm registry not be reached? npm said:" \
      "$(grep -v '^npm error *at ' "$W/npm.out" | tail -n 12 | tr '\n' ' ')"
  fi
fi
tap_ok "the pinned validator is installed (npm ci, tests/server/openapi/package-lock.json)"

setup() {
  name=$1
  shift
  run "$@"
  [ "$RC" -eq 0 ] || stop_here "$name" "exit $RC" "stdout: $OUT" "stderr: $ERR"
}
tasker_config $QUICK_RETRIES server.public_url=http://127.0.0.1:9 backoff.profiles.slow.base=1h backoff.profiles.slow.jitter=full \
  queues.payments.concurrency=3 queues.payments.rate=50/s budgets.api.ratio=0.1 \
  budgets.api.window=10s budgets.api.min_per_second=1
etl_template "$W/etl.toml"
cat >"$W/quick.toml" <<'TOML'
namespace = "ops"
name = "quick"
version = "1"
[[steps]]
name = "only"
handler = { kind = "builtin", name = "noop" }
retry = { budget = "api" }
TOML
cat >"$W/pix.toml" <<'TOML'
name = "pix"
version = "1"
[[steps]]
name = "resize"
handler = { kind = "worker", queue = "pix" }
TOML
cat >"$W/approval.toml" <<'TOML'
name = "approval"
version = "1"
[[steps]]
name = "approve"
handler = { kind = "wait", timeout = "72h" }
TOML
. "$(dirname "$0")/../lib/flow_views.sh"
fv_templates
setup "init" t init
setup "template add" t template add "$W/etl.toml" "$W/quick.toml" "$W/order.toml" "$W/files.toml" \
  "$W/pix.toml" "$W/approval.toml"
# Tasks 1 to 4: etl (error), ops/quick (complete), order (error: review
# failed for good), files (error: process[12] failed); 5 pending, 6
# cancelled.
for tmpl in etl ops/quick order files; do setup "submit $tmpl" t submit "$tmpl"; done
setup "run until idle" t run --until-idle --workers 2
# Task 5 starts in an hour: the run that parks task 10 leaves it pending.
setup "submit etl" t submit etl --in 1h
setup "submit etl" t submit etl
setup "cancel 6" t cancel 6
# Tasks 7 and 8: a step each for a worker of queue "pix".
setup "submit pix" t submit pix
setup "submit pix" t submit pix
# Task 9: a wait step, pending (it starts in an hour: the run that parks
# task 10 leaves it so): its signals are kept until it waits.
setup "submit approval" t submit approval --in 1h
# Task 10: an http step waiting for its callback. The export service
# (examples/callback-export) answers 202 and, for a task's first request in
# mode silent, never calls back; the token it received is conform.mjs's.
CB_SERVICE=$(cd "$(dirname "$0")/../../examples/callback-export" && pwd)/export_service.py
bg_start service python3 "$CB_SERVICE" --port 0 --port-file "$W/service.port" \
  --log "$W/service.log" 2>"$W/service.err"
wait_for "the export service listens" 60 test -s "$W/service.port" || stop_here "service" "no port"
cat >"$W/export.toml" <<TOML
name = "export"
version = "1"
[[steps]]
name = "export"
[steps.handler]
kind = "http"
method = "POST"
url = "http://127.0.0.1:$(cat "$W/service.port")/export"
body = { callback = "{{task.callback_url}}", mode = "silent", task = "{{task.id}}" }
callback = { timeout = "1h" }
TOML
setup "template add export" t template add "$W/export.toml"
setup "submit export" t submit export
setup "run until the export waits" t run --until-idle
CB_TOKEN=$(jq -r 'select(.token == null and .callback_url != null) | .callback_url' \
  "$W/service.log" | sed 's|.*/||')
[ -n "$CB_TOKEN" ] || stop_here "the export service received a callback URL" "$(cat "$W/service.log")"
run t tasks --json
expect_eq "the tasks' states" "$(printf '%s' "$OUT" | jq -c '[.tasks[] | [.id, .state]] | sort')" \
  '[[1,"error"],[2,"complete"],[3,"error"],[4,"error"],[5,"pending"],[6,"cancelled"],[7,"pending"],[8,"pending"],[9,"pending"],[10,"in_progress"]]'

# Two servers on free loopback ports: one without a token, one with.
serve_start plain || { tap_done; exit 1; }
PLAIN_BASE=$BASE
TOKEN=openapi-test-token
export TASKER_TOKEN=$TOKEN
serve_start token || { tap_done; exit 1; }
unset TASKER_TOKEN
TOKEN_BASE=$BASE
BASE=$PLAIN_BASE

# The document, from the server.
curl -s -D "$W/doc.headers" -o "$W/openapi.json" "$BASE/api/v1/openapi.json"
expect_match "GET /api/v1/openapi.json: 200" "$(head -n 1 "$W/doc.headers")" " 200"
expect_match "served as application/json" "$(cat "$W/doc.headers")" "Content-Type: application/json"
expect_eq "info.version is the binary's version" "$(jq -r .info.version "$W/openapi.json")" \
  "$("$TASKER" --version | sed -n 's/^tasker //p')"

# report SCRIPT: run a check script, each of its lines one result.
report() {
  (cd "$NPM_DIR" && BASE=$BASE TOKEN_BASE=$TOKEN_BASE TOKEN=$TOKEN CB_TOKEN=$CB_TOKEN \
    node "$1" "$W/openapi.json") \
    >"$W/node.out" 2>"$W/node.err"
  rc=$?
  tab=$(printf '\t')
  while IFS="$tab" read -r verdict name why; do
    case "$verdict" in
    ok) tap_ok "$name" ;;
    "not ok") tap_fail "$name" "$why" ;;
    esac
  done <"$W/node.out"
  [ "$rc" -eq 0 ] || tap_fail "$1 runs to its end" "exit $rc: $(tail -n 20 "$W/node.err")"
}
report validate.mjs
report conform.mjs

# Both servers ran the whole test: stopped, each exits 0 (a sanitizer's
# report at exit, a leak or a crash on shutdown, is a non-zero status).
serve_stop plain
serve_stop token
kill -TERM "$(bg_pid service)"
bg_wait service 30
tap_done
